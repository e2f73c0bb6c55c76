/* dispatch.c — operator registry, dispatch tables, the boxed call path, TLS.
 *
 * Invariants:
 *  - Operators live in a fixed array and are never freed before exit, so a
 *    handle (od_op *) is valid forever and its id is its index.
 *  - op->table[k] is a pure function of op->reg[*] and the global fallbacks;
 *    recompute() rebuilds one operator's table, and every registration change
 *    calls it (a fallback change rebuilds every operator). Registration is
 *    single-threaded start-up work; after od_registry_freeze() nothing
 *    changes, so the call path reads tables without a lock.
 *  - op->fallthrough is the set of runtime keys whose slot holds a
 *    fallthrough; those keys are masked out of every call of the operator,
 *    so a fallthrough is never "run".
 *  - The hot path (od_call) does: one scan of the precomputed tensor-argument
 *    positions, two TLS reads, one clz, one indirect call.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "od_dispatch.h"
#include "od_parallel.h"
#include "od_sbuf.h"

#define OD_MAX_OPS 2048

typedef struct od_reg {
    bool present;
    od_kernel k;
} od_reg;

struct od_op {
    int id;
    od_schema *schema;
    char *qualname; /* "aten::add.Tensor" */
    char *basename; /* "aten::add" */
    const char *def_file;
    int def_line;
    /* Positions of tensor-like arguments (Tensor, Tensor?, Tensor[], Tensor?[]). */
    int tensor_args[OD_MAX_ARGS];
    int ntensor_args;
    od_reg reg[OD_NUM_KEYS]; /* registrations on runtime and alias keys */
    od_kernel table[OD_NUM_RUNTIME_KEYS];
    od_provenance prov[OD_NUM_RUNTIME_KEYS];
    od_keyset fallthrough;
    uint32_t mutates; /* bit i: argument i is a Tensor(a!) the operator writes */
};

static od_op *g_ops[OD_MAX_OPS];
static int g_nops;
static od_reg g_fallbacks[OD_NUM_RUNTIME_KEYS];
static bool g_frozen;
static _Atomic(od_stats_hook) g_stats_hook;

static _Thread_local od_tls t_tls;

/* ------------------------------------------------------------------ tables */

static bool is_backend_or_undefined(od_key k) { return k == OD_KEY_Undefined || od_key_is_backend(k); }

/* Backend whose kernels decide whether Autograd<B> takes the math kernel;
 * Meta stands in for AutogradOther's "other" backends. */
static od_key autograd_backend(od_key k)
{
    return k == OD_KEY_AutogradOther ? OD_KEY_Meta : od_key_backend_of_autograd(k);
}

static void set_slot(od_op *op, od_key k, const od_kernel *kern, od_provenance p)
{
    op->table[k] = *kern;
    op->prov[k] = p;
}

/* The precedence of docs/ARCHITECTURE.md (PyTorch's), first match wins. */
static void compute_slot(od_op *op, od_key k)
{
    const od_reg *r = op->reg;
    const od_reg *cea = &r[OD_KEY_CompositeExplicitAutograd];
    const od_reg *cia = &r[OD_KEY_CompositeImplicitAutograd];
    memset(&op->table[k], 0, sizeof op->table[k]);
    op->prov[k] = OD_PROV_MISSING;

    if (k != OD_KEY_Undefined && r[k].present) {
        set_slot(op, k, &r[k].k, OD_PROV_KERNEL);
        return;
    }
    if (is_backend_or_undefined(k) && cea->present) {
        set_slot(op, k, &cea->k, OD_PROV_DEFAULT_BACKEND);
        return;
    }
    if (cia->present) {
        bool take = is_backend_or_undefined(k);
        if (od_key_is_autograd(k)) {
            od_key b = autograd_backend(k);
            take = !r[b].present && !cea->present;
        }
        if (take) {
            set_slot(op, k, &cia->k, OD_PROV_MATH);
            return;
        }
    }
    if (k == OD_KEY_Undefined)
        return;
    if (od_key_is_autograd(k) && r[OD_KEY_Autograd].present) {
        set_slot(op, k, &r[OD_KEY_Autograd].k, OD_PROV_AUTOGRAD);
        return;
    }
    if (g_fallbacks[k].present)
        set_slot(op, k, &g_fallbacks[k].k, OD_PROV_FALLBACK);
}

static void recompute(od_op *op)
{
    op->fallthrough = 0;
    for (int k = 0; k < OD_NUM_RUNTIME_KEYS; k++) {
        compute_slot(op, (od_key)k);
        if (op->prov[k] != OD_PROV_MISSING && op->table[k].fallthrough)
            op->fallthrough |= OD_KS(k);
    }
}

/* ------------------------------------------------------------ registration */

static od_status check_unfrozen(const char *what, od_error *err)
{
    if (g_frozen)
        return od_error_set(err, OD_EFROZEN,
                            "cannot %s: the operator registry is frozen after start-up", what);
    return OD_OK;
}

static char *dup_printf(const char *fmt, const char *a, const char *b, const char *c)
{
    int n = snprintf(NULL, 0, fmt, a, b, c);
    char *s = malloc((size_t)n + 1);
    if (s)
        snprintf(s, (size_t)n + 1, fmt, a, b, c);
    return s;
}

static void op_free(od_op *op)
{
    if (!op)
        return;
    od_schema_free(op->schema);
    free(op->qualname);
    free(op->basename);
    free(op);
}

static od_op *find_exact(const char *qualname)
{
    for (int i = 0; i < g_nops; i++)
        if (strcmp(g_ops[i]->qualname, qualname) == 0)
            return g_ops[i];
    return NULL;
}

od_status od_def(const char *schema_text, const char *file, int line, od_op **out, od_error *err)
{
    od_status st = check_unfrozen("define an operator", err);
    if (st)
        return st;
    od_schema *sc = NULL;
    st = od_schema_parse(schema_text, &sc, err);
    if (st) {
        od_error_prefix(err, "invalid schema \"%s\"", schema_text);
        return st;
    }
    if (!sc->ns) {
        od_schema_free(sc);
        return od_error_set(err, OD_EINVAL,
                            "schema \"%s\" has no namespace: write it as ns::name(...)",
                            schema_text);
    }
    if (sc->nargs > OD_MAX_ARGS || sc->nrets > OD_MAX_RETURNS) {
        od_schema_free(sc);
        return od_error_set(err, OD_EINVAL,
                            "schema \"%s\": at most %d arguments and %d returns are supported",
                            schema_text, OD_MAX_ARGS, OD_MAX_RETURNS);
    }
    od_op *op = calloc(1, sizeof *op);
    if (!op) {
        od_schema_free(sc);
        return od_error_set(err, OD_ENOMEM, "out of memory defining an operator");
    }
    op->schema = sc;
    op->qualname = dup_printf(sc->overload[0] ? "%s::%s.%s" : "%s::%s%s", sc->ns, sc->name,
                              sc->overload);
    op->basename = dup_printf("%s::%s%s", sc->ns, sc->name, "");
    op->def_file = file;
    op->def_line = line;
    if (!op->qualname || !op->basename) {
        op_free(op);
        return od_error_set(err, OD_ENOMEM, "out of memory defining an operator");
    }
    od_op *prev = find_exact(op->qualname);
    if (prev) {
        st = od_error_set(err, OD_EDUPLICATE,
                          "Tried to register an operator (%s) with the same name and overload "
                          "name multiple times: first at %s:%d, again at %s:%d",
                          op->qualname, prev->def_file, prev->def_line, file, line);
        op_free(op);
        return st;
    }
    if (g_nops == OD_MAX_OPS) {
        op_free(op);
        return od_error_set(err, OD_ETOOLARGE, "too many operators (at most %d)", OD_MAX_OPS);
    }
    for (int i = 0; i < sc->nargs; i++) {
        if (od_type_is_tensor_like(sc->args[i].type))
            op->tensor_args[op->ntensor_args++] = i;
        if (sc->args[i].alias && sc->args[i].alias->is_write && sc->args[i].type->kind == OD_TY_TENSOR)
            op->mutates |= 1u << i;
    }
    op->id = g_nops;
    g_ops[g_nops++] = op;
    recompute(op);
    if (out)
        *out = op;
    return OD_OK;
}

static od_status register_kernel(od_op *op, od_key key, const od_kernel *k, od_error *err)
{
    od_status st = check_unfrozen("register a kernel", err);
    if (st)
        return st;
    if (!op)
        return od_error_set(err, OD_EINVAL, "register a kernel: operator handle is NULL");
    if ((unsigned)key >= OD_NUM_KEYS || key == OD_KEY_Undefined)
        return od_error_set(err, OD_EINVAL,
                            "cannot register a kernel for %s on key %d: not a registrable key",
                            op->qualname, (int)key);
    if (!k->fallthrough && !k->fn)
        return od_error_set(err, OD_EINVAL, "register %s on %s: kernel function is NULL",
                            op->qualname, od_key_name(key));
    od_reg *r = &op->reg[key];
    if (r->present)
        return od_error_set(err, OD_EDUPLICATE,
                            "duplicate kernel for %s on %s%s: already registered at %s:%d, "
                            "registered again at %s:%d",
                            op->qualname, od_key_name(key), od_key_is_alias(key) ? "[alias]" : "",
                            r->k.file, r->k.line, k->file, k->line);
    r->present = true;
    r->k = *k;
    recompute(op);
    return OD_OK;
}

od_status od_impl(od_op *op, od_key key, od_boxed_fn fn, void *ctx, const char *name,
                  const char *file, int line, od_error *err)
{
    od_kernel k = {fn, ctx, name, file, line, false};
    return register_kernel(op, key, &k, err);
}

od_status od_impl_fallthrough(od_op *op, od_key key, const char *file, int line, od_error *err)
{
    if (od_key_is_alias(key))
        return od_error_set(err, OD_EINVAL, "a fallthrough must name a runtime key, not %s",
                            od_key_name(key));
    od_kernel k = {NULL, NULL, "fallthrough", file, line, true};
    return register_kernel(op, key, &k, err);
}

od_status od_fallback(od_key key, od_boxed_fn fn, void *ctx, const char *name, const char *file,
                      int line, od_error *err)
{
    od_status st = check_unfrozen("register a fallback", err);
    if (st)
        return st;
    if ((unsigned)key >= OD_NUM_RUNTIME_KEYS || key == OD_KEY_Undefined)
        return od_error_set(err, OD_EINVAL,
                            "a backend fallback needs a runtime dispatch key, got %s",
                            od_key_name(key));
    od_reg *r = &g_fallbacks[key];
    if (r->present)
        return od_error_set(err, OD_EDUPLICATE,
                            "Tried to register multiple backend fallbacks for the same dispatch "
                            "key %s: first at %s:%d, again at %s:%d",
                            od_key_name(key), r->k.file, r->k.line, file, line);
    r->present = true;
    r->k = (od_kernel){fn, ctx, fn ? name : "fallthrough", file, line, fn == NULL};
    for (int i = 0; i < g_nops; i++)
        recompute(g_ops[i]);
    return OD_OK;
}

/* ------------------------------------------------------------------ lookup
 * At freeze, every operator's basename ("aten::add") goes into a hash
 * table whose entries list its overloads in definition order, so a name
 * costs one hash and a compare or two; before freeze lookups scan. */

#define NAME_SLOTS 4096 /* a power of two, well above twice OD_MAX_OPS */
_Static_assert(NAME_SLOTS >= 2 * OD_MAX_OPS, "name index load factor");

typedef struct name_slot {
    const char *basename; /* NULL: empty */
    int first, count;     /* into g_by_name */
} name_slot;

static name_slot g_names[NAME_SLOTS];
static od_op *g_by_name[OD_MAX_OPS]; /* grouped by basename, definition order within */

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static name_slot *name_find(const char *base)
{
    for (uint32_t i = name_hash(base) & (NAME_SLOTS - 1);; i = (i + 1) & (NAME_SLOTS - 1)) {
        name_slot *sl = &g_names[i];
        if (!sl->basename || strcmp(sl->basename, base) == 0)
            return sl;
    }
}

static void build_name_index(void)
{
    int n = 0;
    for (int i = 0; i < g_nops; i++) {
        name_slot *sl = name_find(g_ops[i]->basename);
        if (sl->basename)
            continue; /* grouped already, with its first overload */
        sl->basename = g_ops[i]->basename;
        sl->first = n;
        for (int j = i; j < g_nops; j++)
            if (strcmp(g_ops[j]->basename, sl->basename) == 0)
                g_by_name[n++] = g_ops[j];
        sl->count = n - sl->first;
    }
}

void od_registry_freeze(void)
{
    if (!g_frozen)
        build_name_index();
    g_frozen = true;
}

bool od_registry_frozen(void) { return g_frozen; }

/* The overloads of base: *ops (borrowed) and their count. */
static int overloads_of(const char *base, od_op *const **ops)
{
    static _Thread_local od_op *scan[OD_MAX_OPS];
    if (g_frozen) {
        name_slot *sl = name_find(base);
        *ops = sl->basename ? &g_by_name[sl->first] : NULL;
        return sl->basename ? sl->count : 0;
    }
    int n = 0;
    for (int i = 0; i < g_nops; i++)
        if (strcmp(g_ops[i]->basename, base) == 0)
            scan[n++] = g_ops[i];
    *ops = scan;
    return n;
}

static int split_name(const char *name, char *base, size_t cap, const char **overload)
{
    /* Qualify a bare name with "aten::" and split off ".overload". */
    const char *colons = strstr(name, "::");
    const char *tail = colons ? colons + 2 : name;
    const char *dot = strchr(tail, '.');
    size_t tail_len = dot ? (size_t)(dot - tail) : strlen(tail);
    /* no printf: this runs a few times per request */
    size_t pre = colons ? 0 : 6, keep = colons ? (size_t)(tail - name) + tail_len : tail_len;
    *overload = dot ? dot + 1 : NULL;
    if (pre + keep >= cap)
        return (int)(pre + keep);
    memcpy(base, "aten::", pre);
    memcpy(base + pre, colons ? name : tail, keep);
    base[pre + keep] = '\0';
    return (int)(pre + keep);
}

int od_op_overloads(const char *name, const od_op **out, int cap)
{
    char base[256];
    const char *ovl;
    if (split_name(name, base, sizeof base, &ovl) >= (int)sizeof base)
        return 0;
    od_op *const *ops;
    int n = overloads_of(base, &ops);
    for (int i = 0; i < n && i < cap && out; i++)
        out[i] = ops[i];
    return n;
}

const od_op *od_op_find(const char *name)
{
    char base[256];
    const char *ovl;
    if (!name || split_name(name, base, sizeof base, &ovl) >= (int)sizeof base)
        return NULL;
    od_op *const *ops;
    int n = overloads_of(base, &ops);
    for (int i = 0; i < n; i++)
        if (strcmp(ops[i]->schema->overload, ovl ? ovl : "") == 0)
            return ops[i];
    return !ovl && n == 1 ? ops[0] : NULL;
}

const od_op *od_op_at(int i) { return i >= 0 && i < g_nops ? g_ops[i] : NULL; }
int od_op_count(void) { return g_nops; }
const od_schema *od_op_schema(const od_op *op) { return op->schema; }
const char *od_op_name(const od_op *op) { return op->qualname; }
int od_op_id(const od_op *op) { return op->id; }
od_keyset od_op_fallthrough_keys(const od_op *op) { return op->fallthrough; }

const od_kernel *od_op_slot(const od_op *op, od_key k, od_provenance *prov)
{
    if ((unsigned)k >= OD_NUM_RUNTIME_KEYS) {
        if (prov)
            *prov = OD_PROV_MISSING;
        return NULL;
    }
    if (prov)
        *prov = op->prov[k];
    return op->prov[k] == OD_PROV_MISSING ? NULL : &op->table[k];
}

const od_kernel *od_backend_fallback(od_key key)
{
    return (unsigned)key < OD_NUM_RUNTIME_KEYS && g_fallbacks[key].present ? &g_fallbacks[key].k
                                                                           : NULL;
}

const char *od_provenance_name(od_provenance p)
{
    switch (p) {
    case OD_PROV_KERNEL: return "kernel";
    case OD_PROV_DEFAULT_BACKEND: return "default backend kernel";
    case OD_PROV_MATH: return "math kernel";
    case OD_PROV_AUTOGRAD: return "autograd kernel";
    case OD_PROV_FALLBACK: return "backend fallback";
    default: return "missing";
    }
}

/* --------------------------------------------------------------------- TLS */

od_keyset od_tls_included(void) { return t_tls.included ^ OD_KS_DEFAULT_INCLUDED; }
od_keyset od_tls_excluded(void) { return t_tls.excluded ^ OD_KS_DEFAULT_EXCLUDED; }
void od_tls_set_included(od_keyset ks) { t_tls.included = ks ^ OD_KS_DEFAULT_INCLUDED; }
void od_tls_set_excluded(od_keyset ks) { t_tls.excluded = ks ^ OD_KS_DEFAULT_EXCLUDED; }
od_tls od_tls_save(void) { return t_tls; }
void od_tls_restore(const od_tls *saved) { t_tls = *saved; }
od_tls *od_tls_get(void) { return &t_tls; }

od_tls od_tls_include(od_keyset ks)
{
    od_tls prev = t_tls;
    od_tls_set_included(od_tls_included() | ks);
    return prev;
}

od_tls od_tls_exclude(od_keyset ks)
{
    od_tls prev = t_tls;
    od_tls_set_excluded(od_tls_excluded() | ks);
    return prev;
}

/* ------------------------------------------------------------------- calls */

od_keyset od_compute_keyset(const od_op *op, const od_stack *s)
{
    od_keyset ks = 0;
    for (int i = 0; i < op->ntensor_args; i++) {
        const od_value *v = &s->args[op->tensor_args[i]];
        if (v->tag == OD_T_TENSOR) {
            ks |= v->u.t->keys;
        } else if (v->tag == OD_T_TENSOR_LIST) {
            od_tensor *const *ts = v->u.list.items;
            for (size_t j = 0; j < v->u.list.n; j++)
                if (ts[j])
                    ks |= ts[j]->keys;
        }
    }
    return (ks | od_tls_included()) & ~od_tls_excluded();
}

void od_set_stats_hook(od_stats_hook hook) { atomic_store(&g_stats_hook, hook); }

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int print_key_list(const od_op *op, char *buf, size_t cap)
{
    size_t len = 0;
    bool first = true;
    for (int k = 0; k < OD_NUM_RUNTIME_KEYS; k++) {
        if (op->prov[k] == OD_PROV_MISSING || op->table[k].fallthrough)
            continue;
        int n = snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0, "%s%s",
                         first ? "" : ", ", od_key_name((od_key)k));
        len += (size_t)n;
        first = false;
    }
    if (cap)
        buf[len < cap ? len : cap - 1] = '\0';
    return (int)len;
}

od_status od_error_no_kernel(const od_op *op, od_key key, od_error *err)
{
    char keys[512];
    print_key_list(op, keys, sizeof keys);
    if (key == OD_KEY_Undefined) /* the caller's arguments hold no tensor (cat([])): their error, not ours */
        return od_error_set(
            err, OD_EMISMATCH,
            "There were no tensor arguments to this function (e.g., you passed an empty list of "
            "Tensors), but no fallback function is registered for schema %s.  This usually "
            "means that this function requires a non-empty list of Tensors, or that you (the "
            "operator writer) forgot to register a fallback function.  Available functions are "
            "[%s].",
            op->qualname, keys);
    return od_error_set(err, OD_ENOKERNEL,
                        "Could not run '%s' with arguments from the '%s' backend. This could be "
                        "because the operator doesn't exist for this backend, or was omitted "
                        "during the selective/custom build process (if using custom build). "
                        "'%s' is only available for these backends: [%s].",
                        op->qualname, od_key_name(key), op->qualname, keys);
}

/* Runs a kernel while recording a trace step and feeding the stats hook.
 * Kept out of line so the untraced path stays small. */
static od_status __attribute__((noinline))
run_observed(const od_op *op, od_key k, od_keyset ks, od_stack *s, od_error *err)
{
    od_trace *tr = t_tls.trace;
    od_stats_hook hook = atomic_load_explicit(&g_stats_hook, memory_order_relaxed);
    od_trace_step *step = NULL;
    if (tr) {
        if (tr->depth == 0 && tr->nsteps == 0)
            tr->first_keyset = ks;
        if (tr->nsteps < OD_TRACE_MAX) {
            step = &tr->steps[tr->nsteps++];
            *step = (od_trace_step){op, k, op->prov[k], &op->table[k], tr->depth, 0, OD_OK};
        } else {
            tr->dropped++;
        }
        tr->depth++;
    }
    const od_kernel *kern = &op->table[k];
    uint64_t t0 = now_ns();
    od_status st = kern->fn(kern->ctx, op, ks, s, err);
    uint64_t dt = now_ns() - t0;
    if (tr) {
        tr->depth--;
        if (step) {
            step->ns = dt;
            step->status = st;
        }
    }
    if (hook)
        hook(op, k, st, dt);
    return st;
}

static void __attribute__((noinline)) bump_versions(const od_op *op, od_stack *s)
{
    for (int i = 0; i < s->nargs; i++)
        if ((op->mutates >> i & 1u) && s->args[i].tag == OD_T_TENSOR && s->args[i].u.t)
            od_tensor_bump_version(s->args[i].u.t);
}

od_status od_call_with_keys(const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    ks &= ~op->fallthrough;
    od_key k = od_ks_highest(ks);
    s->nrets = 0;
    if (__builtin_expect(od_cancelled(), 0)) /* a composite stops at its next operator */
        return od_error_set(err, OD_ETIMEOUT, "%s: cancelled (the call's time budget ran out)",
                            op->qualname);
    if (__builtin_expect(op->prov[k] == OD_PROV_MISSING, 0))
        return od_error_no_kernel(op, k, err);
    od_status st;
    if (__builtin_expect(t_tls.trace != NULL ||
                             atomic_load_explicit(&g_stats_hook, memory_order_relaxed) != NULL,
                         0)) {
        st = run_observed(op, k, ks, s, err);
    } else {
        const od_kernel *kern = &op->table[k];
        st = kern->fn(kern->ctx, op, ks, s, err);
    }
    /* In-place operators bump their tensor's version where the data is
     * written (the backend key), so autograd above sees the new version. */
    if (__builtin_expect(op->mutates != 0, 0) && st == OD_OK && od_key_is_backend(k))
        bump_versions(op, s);
    return st;
}

od_status od_call(const od_op *op, od_stack *s, od_error *err)
{
    if (__builtin_expect(s->nargs != op->schema->nargs, 0))
        return od_error_set(err, OD_EINVAL, "%s expects %d arguments on the stack, got %d",
                            op->qualname, op->schema->nargs, s->nargs);
    return od_call_with_keys(op, od_compute_keyset(op, s), s, err);
}

od_keyset od_call_keyset(const od_op *op, const od_stack *s)
{
    return od_compute_keyset(op, s) & ~op->fallthrough;
}

od_status od_call_traced(const od_op *op, od_stack *s, od_trace *tr, od_error *err)
{
    memset(tr, 0, sizeof *tr);
    tr->first_keyset = od_call_keyset(op, s); /* also when no kernel runs */
    od_trace *prev = t_tls.trace;
    t_tls.trace = tr;
    od_status st = od_call(op, s, err);
    t_tls.trace = prev;
    return st;
}

od_status od_redispatch(const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    return od_call_with_keys(op, ks & od_ks_below(od_ks_highest(ks)), s, err);
}

/* ----------------------------------------------------------- introspection */

int od_op_table(const od_op *op, od_slot_info slots[OD_NUM_RUNTIME_KEYS])
{
    int valid = 0;
    for (int k = 0; k < OD_NUM_RUNTIME_KEYS; k++) {
        slots[k].key = (od_key)k;
        slots[k].prov = op->prov[k];
        slots[k].kernel = op->prov[k] == OD_PROV_MISSING ? NULL : &op->table[k];
        valid += op->prov[k] != OD_PROV_MISSING;
    }
    return valid;
}

int od_op_registrations(const od_op *op, od_registration_info *out, int cap)
{
    int n = 0;
    for (int k = 0; k < OD_NUM_KEYS; k++) {
        if (!op->reg[k].present)
            continue;
        if (n < cap && out)
            out[n] = (od_registration_info){(od_key)k, &op->reg[k].k};
        n++;
    }
    return n;
}

char *od_dump_table(const od_op *op)
{
    od_sbuf b = {0};
    for (int k = 0; k < OD_NUM_RUNTIME_KEYS; k++) {
        if (op->prov[k] == OD_PROV_MISSING)
            continue;
        const od_kernel *kern = &op->table[k];
        od_sbuf_printf(&b, "%s: %sregistered at %s:%d [%s]\n", od_key_name((od_key)k),
                  kern->fallthrough ? "fallthrough " : "", kern->file, kern->line,
                  od_provenance_name(op->prov[k]));
    }
    return od_sbuf_finish(&b);
}

char *od_dump_state(const od_op *op)
{
    od_sbuf b = {0};
    char *schema_text = NULL, *sig = NULL;
    int n = od_schema_print(op->schema, NULL, 0);
    schema_text = malloc((size_t)n + 1);
    int m = od_schema_print_signature(op->schema, NULL, 0);
    sig = malloc((size_t)m + 1);
    if (!schema_text || !sig) {
        free(schema_text);
        free(sig);
        return NULL;
    }
    od_schema_print(op->schema, schema_text, (size_t)n + 1);
    od_schema_print_signature(op->schema, sig, (size_t)m + 1);
    od_sbuf_printf(&b, "name: %s\nschema: %s\ndebug: registered at %s:%d\nalias analysis kind: "
                  "FROM_SCHEMA\n",
              op->qualname, schema_text, op->def_file, op->def_line);
    for (int k = 0; k < OD_NUM_KEYS; k++) {
        const od_reg *r = &op->reg[k];
        if (!r->present)
            continue;
        od_sbuf_printf(&b, "%s%s: registered at %s:%d :: %s [ %sboxed ]\n", od_key_name((od_key)k),
                  od_key_is_alias((od_key)k) ? "[alias]" : "", r->k.file, r->k.line,
                  r->k.fallthrough ? "(none)" : sig, r->k.fallthrough ? "fallthrough " : "");
    }
    free(schema_text);
    free(sig);
    return od_sbuf_finish(&b);
}

/* Operators are process-lifetime objects; freeing them at exit keeps leak
 * checkers quiet without making handles invalid during normal operation. */
__attribute__((destructor)) static void registry_teardown(void)
{
    for (int i = 0; i < g_nops; i++)
        op_free(g_ops[i]);
    g_nops = 0;
}
