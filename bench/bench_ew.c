/* bench_ew.c — every per-element operator of ops.def against memcpy.
 *
 * The target for the per-element operators is >= 70 % of memcpy
 * bandwidth at 1.6e7 elements through the C API, with a fresh output per
 * call. The operator list is ops.def's OD_EW1 / OD_EW2 / OD_EWP lines, so an
 * operator added there is measured without touching this file. Each call
 * goes through od_call (key set, dispatch table, boxed kernel), arguments
 * bound from the schema: tensors are random in [0.05, 0.95) (integers in
 * [1, 100) for integer-only rules), other arguments take their schema
 * default, or 1 / 0.5 / false where there is none.
 *
 * GB/s counts every input read and the output written once; the ceiling is
 * memcpy over the same threads (bench_util.h). Before each of the
 * operator's samples, one memcpy sample is taken of as many copies as the
 * operator's sample has calls, and the percentage is the median of those
 * pairs' ratios (a ceiling taken once at the start missed the host's bursts
 * over the minutes the list takes).
 *
 * Usage: bench_ew [--quick] [--n N] [substring]   (only operators whose
 * name contains substring; gelu's tanh form is "gelu tanh")
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "od_dispatch.h"
#include "od_ops.h"
#include "od_schema.h"

static int g_reps = 5;

static void die(const char *what, const od_error *err)
{
    fprintf(stderr, "bench_ew: %s: %s\n", what, err ? err->message : "");
    exit(1);
}

typedef struct ew_entry {
    const char *schema; /* only "aten::<name>(" is read */
    const char *rule;
    const char *str;    /* a str argument's value; NULL: its default */
} ew_entry;

/* The per-element lines of ops.def, in list order, then gelu in both forms
 * (its own kernel, not od_cpu_ew's, and one of the targets). */
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag)
#define OD_EW1(id, schema, fn, rule, ag) {schema, #rule, NULL},
#define OD_EW2(id, schema, fn, rule, ag) {schema, #rule, NULL},
#define OD_EWP(id, schema, fn, rule, ag) {schema, #rule, NULL},
static const ew_entry g_ew[] = {
#include "ops.def"
    {"aten::gelu(", "FLOAT", NULL},
    {"aten::gelu(", "FLOAT", "tanh"},
};
#undef OD_OP
#undef OD_EW1
#undef OD_EW2
#undef OD_EWP

static od_tensor *rand_tensor(int64_t n, od_dtype dt, uint64_t seed)
{
    od_tensor *t;
    od_error err;
    if (od_tensor_empty(&n, 1, dt, (od_device){OD_DEV_CPU, 0}, &t, &err))
        die("alloc", &err);
    uint64_t x = 0x9E3779B97F4A7C15u ^ seed ^ (uint64_t)time(NULL);
    for (int64_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double u = (double)(x >> 11) / 9007199254740992.0;
        if (dt == OD_FLOAT32)
            ((float *)od_tensor_data(t))[i] = (float)(0.05 + 0.9 * u);
        else
            ((int32_t *)od_tensor_data(t))[i] = 1 + (int32_t)(u * 99.0);
    }
    return t;
}

/* Binds op's arguments: tensors of n elements of dt, the rest from the
 * schema. Returns how many bytes the tensors hold; *ntensors counts them.
 * Tensors in args are new references (released by the caller). */
static int bind(const od_schema *sc, int64_t n, od_dtype dt, const char *str, od_value *args, int *ntensors)
{
    *ntensors = 0;
    for (int i = 0; i < sc->nargs; i++) {
        const od_arg *a = &sc->args[i];
        const od_type *ty = a->type->kind == OD_TY_OPTIONAL ? a->type->elem : a->type;
        if (ty->kind == OD_TY_TENSOR) {
            args[i] = od_tensor_v(rand_tensor(n, dt, (uint64_t)i * 7919u));
            (*ntensors)++;
        } else if (ty->kind == OD_TY_STR && str) {
            args[i] = od_str(str);
        } else if (a->has_default) {
            args[i] = a->default_value; /* borrowed from the schema */
        } else if (ty->kind == OD_TY_INT || ty->kind == OD_TY_SYMINT) {
            args[i] = od_int(1);
        } else if (ty->kind == OD_TY_BOOL) {
            args[i] = od_bool(false);
        } else if (ty->kind == OD_TY_SCALAR && dt != OD_FLOAT32) {
            args[i] = od_int(3); /* an integer operator's Scalar */
        } else {
            args[i] = od_double(0.5); /* Scalar, float */
        }
    }
    return sc->nargs;
}

static void unbind_args(od_value *args, int nargs)
{
    for (int i = 0; i < nargs; i++)
        if (args[i].tag == OD_T_TENSOR)
            od_tensor_release(args[i].u.t);
}

int main(int argc, char **argv)
{
    int64_t n = 16000000;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            g_reps = 3;
        else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc)
            n = atoll(argv[++i]);
        else
            only = argv[i];
    }
    od_error err;
    if (od_init(&err))
        die("od_init", &err);
    od_registry_freeze();
    size_t count = sizeof g_ew / sizeof g_ew[0];
    int inner = n <= 1000000 ? 20 : 3;
    memcpy_ctx m;
    memcpy_open(&m, (size_t)n * 4, inner); /* as many copies per sample as calls: see memcpy_ctx */
    printf("bench_ew: %zu per-element overloads, %lld elements, fresh output per call, median of %d; "
           "%d threads; memcpy of float32-sized buffers sampled before each of an operator's samples, "
           "%d copies to its %d calls (\"memcpy\": the median of the ratios)\n",
           count, (long long)n, g_reps, od_get_num_threads(), inner, inner);
    printf("%-34s %-8s %9s %9s %9s %7s\n", "operator", "dtype", "ms", "GB/s", "cp GB/s", "memcpy");
    int below = 0, measured = 0;
    for (size_t k = 0; k < count; k++) {
        char name[128];
        const char *s = strstr(g_ew[k].schema, "::"), *paren = strchr(g_ew[k].schema, '(');
        snprintf(name, sizeof name, "%.*s", (int)(paren - s - 2), s + 2);
        const od_op *op = od_op_find(name);
        if (g_ew[k].str) /* the row's label */
            snprintf(name + strlen(name), sizeof name - strlen(name), " %s", g_ew[k].str);
        if (only && !strstr(name, only))
            continue;
        if (!op)
            die(name, NULL);
        const od_schema *sc = od_op_schema(op);
        bool int_rule = strcmp(g_ew[k].rule, "BITWISE") == 0 || strcmp(g_ew[k].rule, "INT") == 0;
        od_dtype dt = int_rule ? OD_INT32 : OD_FLOAT32;
        od_value args[OD_MAX_ARGS];
        int nt, nargs = bind(sc, n, dt, g_ew[k].str, args, &nt);
        od_stack st;
        od_stack_init(&st, args, nargs);
        if (od_call(op, &st, &err)) { /* a rule the guess above does not fit: say so, go on */
            printf("%-34s %-8s skipped: %s\n", name, od_dtype_name(dt), err.message);
            unbind_args(args, nargs);
            continue;
        }
        size_t out_bytes = od_tensor_nbytes(st.rets[0].u.t);
        od_stack_release_rets(&st);
        double samples[16], cp[16];
        for (int r = 0; r < g_reps; r++) {
            cp[r] = memcpy_sample(&m);
            double t0 = now_s();
            for (int i = 0; i < inner; i++) {
                od_stack_init(&st, args, nargs);
                if (od_call(op, &st, &err))
                    die(name, &err);
                od_stack_release_rets(&st);
            }
            samples[r] = (now_s() - t0) / inner;
        }
        double bytes = (double)nt * (double)n * (double)od_dtype_size(dt) + (double)out_bytes, ratios[16];
        for (int r = 0; r < g_reps; r++)
            ratios[r] = bytes / samples[r] / 1e9 / cp[r];
        double sec = median(samples, g_reps), gbs = bytes / sec / 1e9, ratio = median(ratios, g_reps);
        measured++;
        below += ratio < 0.70;
        printf("%-34s %-8s %9.2f %9.2f %9.2f %6.0f%%%s\n", name, od_dtype_name(dt), sec * 1e3, gbs,
               median(cp, g_reps), 100.0 * ratio, ratio < 0.70 ? "   < 70%" : "");
        unbind_args(args, nargs);
    }
    memcpy_close(&m);
    printf("%d of %d measured overloads below 70%% of memcpy\n", below, measured);
    return 0;
}
