/* test_dispatch.c — key sets, table precedence, redispatch, TLS, errors, dumps.
 *
 * These tests define their own operators (namespace test::) and use tensors
 * whose only relevant state is their key set, so they exercise the
 * dispatcher alone. Criterion runs each test in its own process, so global
 * fallbacks registered by one test do not leak into another.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_dispatch.h"

/* ---- helpers -------------------------------------------------------------- */

static char g_log[512];

static void log_ran(const char *what)
{
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "%s%s", n ? "," : "", what);
}

/* A kernel that records its ctx (a name) and the key set it received. */
static od_keyset g_last_ks;
static od_status k_record(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)err;
    log_ran((const char *)ctx);
    g_last_ks = ks;
    s->nrets = 1;
    s->rets[0] = od_int(42);
    return OD_OK;
}

/* Records, then redispatches below its own key. */
static od_status k_redispatch(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    log_ran((const char *)ctx);
    return od_redispatch(op, ks, s, err);
}

static od_tensor fake_tensor(od_keyset ks)
{
    od_tensor t;
    memset(&t, 0, sizeof t);
    t.keys = ks;
    return t;
}

static od_op *def(const char *schema)
{
    od_op *op = NULL;
    od_error err;
    od_status st = od_def(schema, "test_dispatch.c", 1, &op, &err);
    cr_assert_eq(st, OD_OK, "od_def(%s): %s", schema, err.message);
    return op;
}

static void impl(od_op *op, od_key k, od_boxed_fn fn, const char *name)
{
    od_error err;
    od_status st = od_impl(op, k, fn, (void *)name, name, "test_dispatch.c", (int)k + 100, &err);
    cr_assert_eq(st, OD_OK, "od_impl(%s): %s", od_key_name(k), err.message);
}

static od_status call1(const od_op *op, od_keyset tensor_keys, od_error *err)
{
    od_tensor t = fake_tensor(tensor_keys);
    od_value args[1] = {od_tensor_v(&t)};
    od_stack s;
    od_stack_init(&s, args, 1);
    g_log[0] = '\0';
    od_status st = od_call(op, &s, err);
    od_stack_release_rets(&s);
    return st;
}

/* What od_init() registers for every process: BackendSelect is in the default
 * included set, so calls need its fallthrough to reach the backends. */
static void std_fallthrough(void)
{
    od_error err;
    od_status st = od_fallback(OD_KEY_BackendSelect, NULL, NULL, "fallthrough", "core.c", 1, &err);
    cr_assert_eq(st, OD_OK, "%s", err.message);
}

/* "Key=provenance/kernel" for every valid slot, one string, for comparing tables. */
static void table_string(const od_op *op, char *buf, size_t cap)
{
    od_slot_info slots[OD_NUM_RUNTIME_KEYS];
    od_op_table(op, slots);
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < OD_NUM_RUNTIME_KEYS; k++) {
        if (slots[k].prov == OD_PROV_MISSING)
            continue;
        len += (size_t)snprintf(buf + len, cap - len, "%s=%s/%s ", od_key_name((od_key)k),
                                od_provenance_name(slots[k].prov),
                                slots[k].kernel->fallthrough ? "fallthrough"
                                                             : slots[k].kernel->name);
    }
}

/* ---- key sets ------------------------------------------------------------- */

Test(keys, highest_by_priority)
{
    cr_assert_eq(od_ks_highest(0), OD_KEY_Undefined);
    cr_assert_eq(od_ks_highest(OD_KS(OD_KEY_CPU)), OD_KEY_CPU);
    cr_assert_eq(od_ks_highest(OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_CUDA)), OD_KEY_CUDA);
    cr_assert_eq(od_ks_highest(OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_AutogradCPU)), OD_KEY_AutogradCPU);
    cr_assert_eq(od_ks_highest(OD_KS(OD_KEY_Mode) | OD_KS(OD_KEY_Batched)), OD_KEY_Mode);
    /* The key order of docs/ARCHITECTURE.md, highest first. */
    const od_key order[] = {OD_KEY_Mode, OD_KEY_Batched, OD_KEY_AutocastCUDA, OD_KEY_AutocastCPU,
                            OD_KEY_AutogradCUDA, OD_KEY_AutogradCPU, OD_KEY_AutogradOther,
                            OD_KEY_BackendSelect, OD_KEY_CUDA, OD_KEY_CPU, OD_KEY_Meta};
    for (size_t i = 0; i + 1 < sizeof order / sizeof *order; i++)
        cr_assert_gt(order[i], order[i + 1], "%s must outrank %s", od_key_name(order[i]),
                     od_key_name(order[i + 1]));
}

Test(keys, algebra_and_below)
{
    od_keyset s = od_ks_add(od_ks_add(0, OD_KEY_CPU), OD_KEY_AutogradCPU);
    cr_assert(od_ks_has(s, OD_KEY_CPU));
    cr_assert(od_ks_has(s, OD_KEY_AutogradCPU));
    cr_assert_not(od_ks_has(s, OD_KEY_CUDA));
    s = od_ks_remove(s, OD_KEY_AutogradCPU);
    cr_assert_eq(s, OD_KS(OD_KEY_CPU));
    od_keyset below = od_ks_below(OD_KEY_AutogradCPU);
    cr_assert(od_ks_has(below, OD_KEY_AutogradOther));
    cr_assert(od_ks_has(below, OD_KEY_CPU));
    cr_assert_not(od_ks_has(below, OD_KEY_AutogradCPU));
    cr_assert_not(od_ks_has(below, OD_KEY_Mode));
}

Test(keys, names_roundtrip_and_print)
{
    for (int k = 0; k < OD_NUM_KEYS; k++)
        cr_assert_eq(od_key_from_name(od_key_name((od_key)k)), k);
    cr_assert_eq(od_key_from_name("NoSuchKey"), OD_NUM_KEYS);
    char buf[128];
    od_ks_print(OD_KS(OD_KEY_AutogradCPU) | OD_KS(OD_KEY_CPU), buf, sizeof buf);
    cr_assert_str_eq(buf, "DispatchKeySet(CPU, AutogradCPU)");
    od_ks_print(0, buf, sizeof buf);
    cr_assert_str_eq(buf, "DispatchKeySet()");
    /* Truncation reports the full length like snprintf. */
    int need = od_ks_print(OD_KS(OD_KEY_AutogradCPU) | OD_KS(OD_KEY_CPU), buf, 8);
    cr_assert_eq(need, (int)strlen("DispatchKeySet(CPU, AutogradCPU)"));
    cr_assert_eq(strlen(buf), 7);
}

Test(keys, alias_expansion)
{
    cr_assert_eq(od_key_runtime_set(OD_KEY_Autograd), OD_KS_AUTOGRAD);
    cr_assert_eq(od_key_runtime_set(OD_KEY_CompositeExplicitAutograd), OD_KS_BACKENDS);
    cr_assert_eq(od_key_runtime_set(OD_KEY_CompositeImplicitAutograd),
                 OD_KS_BACKENDS | OD_KS_AUTOGRAD);
    cr_assert_eq(od_key_runtime_set(OD_KEY_CPU), OD_KS(OD_KEY_CPU));
    cr_assert(od_key_is_alias(OD_KEY_Autograd));
    cr_assert_not(od_key_is_alias(OD_KEY_Mode));
}

/* ---- table precedence ----------------------------------------------------- */

Test(table, direct_kernel_wins)
{
    od_op *op = def("test::a(Tensor self) -> Tensor");
    impl(op, OD_KEY_CPU, k_record, "cpu");
    impl(op, OD_KEY_CompositeExplicitAutograd, k_record, "cea");
    impl(op, OD_KEY_CompositeImplicitAutograd, k_record, "cia");
    char buf[1024];
    table_string(op, buf, sizeof buf);
    /* CPU direct; other backends and Undefined take the CEA kernel; the
     * Autograd keys are missing (CEA exists, so no math kernel there). */
    cr_assert_str_eq(buf, "Undefined=default backend kernel/cea Meta=default backend kernel/cea "
                          "CPU=kernel/cpu CUDA=default backend kernel/cea ");
}

Test(table, math_kernel_fills_backends_and_autograd)
{
    od_op *op = def("test::b(Tensor self) -> Tensor");
    impl(op, OD_KEY_CompositeImplicitAutograd, k_record, "cia");
    char buf[1024];
    table_string(op, buf, sizeof buf);
    cr_assert_str_eq(buf, "Undefined=math kernel/cia Meta=math kernel/cia CPU=math kernel/cia "
                          "CUDA=math kernel/cia AutogradOther=math kernel/cia "
                          "AutogradCPU=math kernel/cia AutogradCUDA=math kernel/cia ");
}

/* PyTorch's test_computed_table: CPU, AutogradCPU direct, Autograd alias and a
 * math default. */
Test(table, pytorch_computed_table_case)
{
    od_op *op = def("test::c(Tensor self) -> Tensor");
    impl(op, OD_KEY_CPU, k_record, "fn_cpu");
    impl(op, OD_KEY_AutogradCPU, k_record, "fn_autogradcpu");
    impl(op, OD_KEY_Autograd, k_record, "fn_autograd");
    impl(op, OD_KEY_CompositeImplicitAutograd, k_record, "default");
    char buf[1024];
    table_string(op, buf, sizeof buf);
    /* AutogradCUDA: CUDA has no kernel and no CEA → the math kernel (rule 3
     * outranks the Autograd alias); AutogradOther likewise (Meta has none). */
    cr_assert_str_eq(buf, "Undefined=math kernel/default Meta=math kernel/default "
                          "CPU=kernel/fn_cpu CUDA=math kernel/default "
                          "AutogradOther=math kernel/default AutogradCPU=kernel/fn_autogradcpu "
                          "AutogradCUDA=math kernel/default ");
}

Test(table, autograd_alias_when_backend_has_kernel)
{
    od_op *op = def("test::d(Tensor self) -> Tensor");
    impl(op, OD_KEY_CPU, k_record, "cpu");
    impl(op, OD_KEY_CUDA, k_record, "cuda");
    impl(op, OD_KEY_Autograd, k_record, "ag");
    impl(op, OD_KEY_CompositeImplicitAutograd, k_record, "cia");
    char buf[1024];
    table_string(op, buf, sizeof buf);
    cr_assert_str_eq(buf, "Undefined=math kernel/cia Meta=math kernel/cia CPU=kernel/cpu "
                          "CUDA=kernel/cuda AutogradOther=math kernel/cia "
                          "AutogradCPU=autograd kernel/ag AutogradCUDA=autograd kernel/ag ");
}

Test(table, fallback_and_fallthrough_recomputed_when_added_later)
{
    std_fallthrough();
    od_op *op = def("test::e(Tensor self) -> Tensor");
    impl(op, OD_KEY_CPU, k_record, "cpu");
    char before[1024], after[1024];
    table_string(op, before, sizeof before);
    cr_assert_str_eq(before, "CPU=kernel/cpu BackendSelect=backend fallback/fallthrough ");
    od_error err;
    cr_assert_eq(od_fallback(OD_KEY_AutogradCPU, NULL, NULL, "fallthrough", "t.c", 7, &err), OD_OK);
    cr_assert_eq(od_fallback(OD_KEY_Mode, k_record, "modefb", "modefb", "t.c", 8, &err), OD_OK);
    table_string(op, after, sizeof after);
    cr_assert_str_eq(after, "CPU=kernel/cpu BackendSelect=backend fallback/fallthrough "
                            "AutogradCPU=backend fallback/fallthrough Mode=backend fallback/modefb ");
    /* A fallthrough key is masked out: a grad-requiring CPU tensor reaches CPU. */
    cr_assert_eq(od_op_fallthrough_keys(op), OD_KS(OD_KEY_AutogradCPU) | OD_KS(OD_KEY_BackendSelect));
    cr_assert_eq(call1(op, OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_AutogradCPU), &err), OD_OK);
    cr_assert_str_eq(g_log, "cpu");
    cr_assert_eq(g_last_ks, OD_KS(OD_KEY_CPU));
    /* A second fallback for one key is an error naming both sites. */
    cr_assert_eq(od_fallback(OD_KEY_Mode, k_record, "x", "x", "other.c", 9, &err), OD_EDUPLICATE);
    cr_assert(strstr(err.message, "t.c:8") && strstr(err.message, "other.c:9"), "%s", err.message);
}

Test(table, op_level_fallthrough)
{
    std_fallthrough();
    od_op *op = def("test::f(Tensor self) -> Tensor");
    impl(op, OD_KEY_CPU, k_record, "cpu");
    od_error err;
    cr_assert_eq(od_impl_fallthrough(op, OD_KEY_AutocastCPU, "t.c", 3, &err), OD_OK);
    od_tls saved = od_tls_save();
    od_tls_set_excluded(0); /* enable autocast */
    cr_assert_eq(call1(op, OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_AutocastCPU), &err), OD_OK);
    cr_assert_str_eq(g_log, "cpu");
    od_tls_restore(&saved);
    char *dump = od_dump_table(op);
    cr_assert(strstr(dump, "AutocastCPU: fallthrough registered at t.c:3 [kernel]\n"), "%s", dump);
    free(dump);
}

/* Every subset of {CPU, AutogradCPU, CEA, CIA, Autograd} registered in every
 * order gives the same table, with fallbacks registered before or after. */
static const od_key k_kinds[5] = {OD_KEY_CPU, OD_KEY_AutogradCPU,
                                  OD_KEY_CompositeExplicitAutograd,
                                  OD_KEY_CompositeImplicitAutograd, OD_KEY_Autograd};
static const char *const k_names[5] = {"cpu", "agcpu", "cea", "cia", "ag"};

static int g_opcount;
static void permute_check(int *items, int n, int depth, const char *expect)
{
    if (depth == n) {
        char name[64], sch[96], got[1024];
        snprintf(name, sizeof name, "p%d", g_opcount++);
        snprintf(sch, sizeof sch, "test::%s(Tensor self) -> Tensor", name);
        od_op *op = def(sch);
        for (int i = 0; i < n; i++)
            impl(op, k_kinds[items[i]], k_record, k_names[items[i]]);
        table_string(op, got, sizeof got);
        cr_assert_str_eq(got, expect, "order-dependent table for %s", sch);
        return;
    }
    for (int i = depth; i < n; i++) {
        int t = items[depth];
        items[depth] = items[i];
        items[i] = t;
        permute_check(items, n, depth + 1, expect);
        t = items[depth];
        items[depth] = items[i];
        items[i] = t;
    }
}

/* An independent statement of the table rules (docs/ARCHITECTURE.md), written as a decision per
 * key rather than a first-match scan, to cross-check the implementation. */
static const char *expected_for(unsigned mask, od_key k, bool fb_cpu, bool fb_agcpu)
{
    bool cpu = mask & 1, agcpu = mask & 2, cea = mask & 4, cia = mask & 8, ag = mask & 16;
    switch (k) {
    case OD_KEY_Undefined: return cea ? "default backend kernel/cea" : cia ? "math kernel/cia" : NULL;
    case OD_KEY_CPU:
        if (cpu) return "kernel/cpu";
        if (cea) return "default backend kernel/cea";
        if (cia) return "math kernel/cia";
        return fb_cpu ? "backend fallback/fbcpu" : NULL;
    case OD_KEY_Meta:
    case OD_KEY_CUDA: return cea ? "default backend kernel/cea" : cia ? "math kernel/cia" : NULL;
    case OD_KEY_AutogradCPU:
        if (agcpu) return "kernel/agcpu";
        if (cia && !cpu && !cea) return "math kernel/cia";
        if (ag) return "autograd kernel/ag";
        return fb_agcpu ? "backend fallback/fbag" : NULL;
    case OD_KEY_AutogradCUDA:
    case OD_KEY_AutogradOther:
        if (cia && !cea) return "math kernel/cia";
        if (ag) return "autograd kernel/ag";
        return NULL;
    default: return NULL;
    }
}

static void expected_string(unsigned mask, bool fb_cpu, bool fb_agcpu, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < OD_NUM_RUNTIME_KEYS; k++) {
        const char *e = expected_for(mask, (od_key)k, fb_cpu, fb_agcpu);
        if (e)
            len += (size_t)snprintf(buf + len, cap - len, "%s=%s ", od_key_name((od_key)k), e);
    }
}

static void all_subsets(bool fb_cpu, bool fb_agcpu)
{
    for (unsigned mask = 0; mask < 32; mask++) {
        int items[5], n = 0;
        for (int i = 0; i < 5; i++)
            if (mask & (1u << i))
                items[n++] = i;
        char expect[1024];
        expected_string(mask, fb_cpu, fb_agcpu, expect, sizeof expect);
        permute_check(items, n, 0, expect);
    }
}

Test(table, every_combination_order_independent_no_fallbacks) { all_subsets(false, false); }

Test(table, every_combination_order_independent_fallbacks_first)
{
    od_error err;
    cr_assert_eq(od_fallback(OD_KEY_CPU, k_record, "fbcpu", "fbcpu", "t.c", 1, &err), OD_OK);
    cr_assert_eq(od_fallback(OD_KEY_AutogradCPU, k_record, "fbag", "fbag", "t.c", 2, &err), OD_OK);
    all_subsets(true, true);
}

Test(table, every_combination_fallbacks_added_after)
{
    /* Define every op first, then add the fallbacks: tables must be rebuilt. */
    od_op *ops[32];
    for (unsigned mask = 0; mask < 32; mask++) {
        char sch[96];
        snprintf(sch, sizeof sch, "test::late%u(Tensor self) -> Tensor", mask);
        ops[mask] = def(sch);
        for (int i = 0; i < 5; i++)
            if (mask & (1u << i))
                impl(ops[mask], k_kinds[i], k_record, k_names[i]);
    }
    od_error err;
    cr_assert_eq(od_fallback(OD_KEY_CPU, k_record, "fbcpu", "fbcpu", "t.c", 1, &err), OD_OK);
    cr_assert_eq(od_fallback(OD_KEY_AutogradCPU, k_record, "fbag", "fbag", "t.c", 2, &err), OD_OK);
    for (unsigned mask = 0; mask < 32; mask++) {
        char expect[1024], got[1024];
        expected_string(mask, true, true, expect, sizeof expect);
        table_string(ops[mask], got, sizeof got);
        cr_assert_str_eq(got, expect, "mask %u", mask);
    }
}

/* ---- registration errors ---------------------------------------------------- */

Test(registry, duplicate_kernel_names_both_sites)
{
    od_op *op = def("test::dup(Tensor self) -> Tensor");
    od_error err;
    cr_assert_eq(od_impl(op, OD_KEY_CPU, k_record, "a", "a", "first.c", 10, &err), OD_OK);
    cr_assert_eq(od_impl(op, OD_KEY_CPU, k_record, "b", "b", "second.c", 20, &err), OD_EDUPLICATE);
    cr_assert(strstr(err.message, "first.c:10"), "%s", err.message);
    cr_assert(strstr(err.message, "second.c:20"), "%s", err.message);
    cr_assert(strstr(err.message, "test::dup"), "%s", err.message);
}

Test(registry, duplicate_definition_names_both_sites)
{
    od_error err;
    od_op *op = NULL;
    cr_assert_eq(od_def("test::x.ovl(Tensor self) -> Tensor", "one.c", 1, &op, &err), OD_OK);
    cr_assert_eq(od_def("test::x.ovl(Tensor self, int k) -> Tensor", "two.c", 2, &op, &err),
                 OD_EDUPLICATE);
    cr_assert(strstr(err.message, "one.c:1") && strstr(err.message, "two.c:2"), "%s", err.message);
}

Test(registry, bad_schema_and_bad_keys)
{
    od_error err;
    od_op *op = NULL;
    cr_assert_eq(od_def("test::bad(Tensor self -> Tensor", "f.c", 1, &op, &err), OD_EINVAL);
    cr_assert(strstr(err.message, "test::bad"), "%s", err.message);
    cr_assert_eq(od_def("nonamespace(Tensor self) -> Tensor", "f.c", 1, &op, &err), OD_EINVAL);
    op = def("test::k(Tensor self) -> Tensor");
    cr_assert_eq(od_impl(op, OD_KEY_Undefined, k_record, "u", "u", "f.c", 1, &err), OD_EINVAL);
    cr_assert_eq(od_impl(op, (od_key)99, k_record, "u", "u", "f.c", 1, &err), OD_EINVAL);
    cr_assert_eq(od_impl(op, OD_KEY_CPU, NULL, NULL, "u", "f.c", 1, &err), OD_EINVAL);
    cr_assert_eq(od_impl_fallthrough(op, OD_KEY_Autograd, "f.c", 1, &err), OD_EINVAL);
    cr_assert_eq(od_fallback(OD_KEY_Autograd, NULL, NULL, "x", "f.c", 1, &err), OD_EINVAL);
}

Test(registry, frozen_refuses_changes)
{
    od_op *op = def("test::fz(Tensor self) -> Tensor");
    od_registry_freeze();
    cr_assert(od_registry_frozen());
    od_error err;
    cr_assert_eq(od_impl(op, OD_KEY_CPU, k_record, "a", "a", "f.c", 1, &err), OD_EFROZEN);
    cr_assert_eq(od_def("test::late(Tensor self) -> Tensor", "f.c", 1, NULL, &err), OD_EFROZEN);
    cr_assert_eq(od_fallback(OD_KEY_CPU, NULL, NULL, "x", "f.c", 1, &err), OD_EFROZEN);
}

Test(registry, lookup_by_name_and_overload)
{
    od_op *a = def("test::look(Tensor self) -> Tensor");
    od_op *b = def("test::look.two(Tensor self, Tensor other) -> Tensor");
    od_op *c = def("test::only.one(Tensor self) -> Tensor");
    cr_assert_eq(od_op_find("test::look"), a);
    cr_assert_eq(od_op_find("test::look.two"), b);
    cr_assert_eq(od_op_find("test::only"), c, "a single overload is the default");
    cr_assert_null(od_op_find("test::look.three"));
    cr_assert_null(od_op_find("test::nothing"));
    const od_op *all[4];
    cr_assert_eq(od_op_overloads("test::look", all, 4), 2);
    cr_assert_str_eq(od_op_name(b), "test::look.two");
    cr_assert_eq(od_op_at(od_op_id(b)), b);
}

Test(registry, lookup_after_freeze_uses_the_index_and_agrees)
{
    od_op *a = def("test::look(Tensor self) -> Tensor");
    od_op *b = def("test::look.two(Tensor self, Tensor other) -> Tensor");
    od_op *c = def("test::only.one(Tensor self) -> Tensor");
    od_op *d = def("test::many.x(Tensor self) -> Tensor");
    od_op *e = def("test::many.y(Tensor self) -> Tensor");
    char name[64];
    for (int i = 0; i < 300; i++) { /* enough names to collide in the hash */
        snprintf(name, sizeof name, "test::n%d(Tensor self) -> Tensor", i);
        def(name);
    }
    od_registry_freeze();
    cr_assert_eq(od_op_find("test::look"), a);
    cr_assert_eq(od_op_find("test::look.two"), b);
    cr_assert_eq(od_op_find("test::only"), c);
    cr_assert_null(od_op_find("test::many"), "two overloads, no default");
    cr_assert_eq(od_op_find("test::many.y"), e);
    cr_assert_null(od_op_find("test::look.three"));
    cr_assert_null(od_op_find("test::nothing"));
    const od_op *all[4];
    cr_assert_eq(od_op_overloads("test::many", all, 4), 2);
    cr_assert(all[0] == d && all[1] == e, "definition order");
    for (int i = 0; i < od_op_count(); i++) { /* every operator by its own name */
        const od_op *op = od_op_at(i);
        cr_assert_eq(od_op_find(od_op_name(op)), op, "%s", od_op_name(op));
    }
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "test::n%d", i);
        cr_assert_eq(od_op_overloads(name, all, 4), 1, "%s", name);
    }
}

/* ---- calls -------------------------------------------------------------------- */

Test(call, traced_records_keyset_steps_and_restores)
{
    std_fallthrough();
    od_op *op = def("test::tr(Tensor self) -> Tensor");
    impl(op, OD_KEY_CPU, k_record, "cpu");
    impl(op, OD_KEY_AutogradCPU, k_redispatch, "agcpu");
    od_tensor t = fake_tensor(OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_AutogradCPU));
    od_value args[1] = {od_tensor_v(&t)};
    od_stack s;
    od_stack_init(&s, args, 1);
    od_error err;
    od_trace tr;
    od_keyset ks = od_call_keyset(op, &s);
    cr_assert_eq(od_ks_highest(ks), OD_KEY_AutogradCPU);
    cr_assert_eq(od_call_traced(op, &s, &tr, &err), OD_OK);
    od_stack_release_rets(&s);
    cr_assert_eq(tr.first_keyset, ks);
    cr_assert_eq(tr.nsteps, 2);
    cr_assert(tr.steps[0].key == OD_KEY_AutogradCPU && tr.steps[0].depth == 0);
    cr_assert(tr.steps[1].key == OD_KEY_CPU && tr.steps[1].depth == 1);
    cr_assert_null(od_tls_get()->trace, "the thread's recording is restored");
}


Test(call, highest_key_runs_and_redispatch_goes_below)
{
    std_fallthrough();
    od_op *op = def("test::r(Tensor self) -> Tensor");
    impl(op, OD_KEY_CPU, k_record, "cpu");
    impl(op, OD_KEY_AutogradCPU, k_redispatch, "agcpu");
    impl(op, OD_KEY_Mode, k_redispatch, "mode");
    od_error err;
    cr_assert_eq(call1(op, OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_AutogradCPU), &err), OD_OK);
    cr_assert_str_eq(g_log, "agcpu,cpu");
    cr_assert_eq(g_last_ks, OD_KS(OD_KEY_CPU), "redispatch passes the masked set");
    /* Mode via the TLS included set, then AutogradCPU, then CPU. */
    od_tls saved = od_tls_include(OD_KS(OD_KEY_Mode));
    cr_assert_eq(call1(op, OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_AutogradCPU), &err), OD_OK);
    cr_assert_str_eq(g_log, "mode,agcpu,cpu");
    od_tls_restore(&saved);
}

Test(call, tensor_list_and_optional_arguments_contribute_keys)
{
    std_fallthrough();
    od_op *op = def("test::lst(Tensor[] xs, Tensor? maybe, int k) -> Tensor");
    impl(op, OD_KEY_CPU, k_record, "cpu");
    impl(op, OD_KEY_CUDA, k_record, "cuda");
    od_tensor a = fake_tensor(OD_KS(OD_KEY_CPU)), b = fake_tensor(OD_KS(OD_KEY_CUDA));
    od_tensor *list[3] = {&a, NULL, &a};
    od_value args[3] = {od_list_v(OD_T_TENSOR_LIST, list, 3), od_none(), od_int(1)};
    od_stack s;
    od_stack_init(&s, args, 3);
    od_error err;
    g_log[0] = '\0';
    cr_assert_eq(od_call(op, &s, &err), OD_OK);
    od_stack_release_rets(&s);
    cr_assert_str_eq(g_log, "cpu");
    args[1] = od_tensor_v(&b);
    g_log[0] = '\0';
    od_stack_init(&s, args, 3);
    cr_assert_eq(od_call(op, &s, &err), OD_OK);
    od_stack_release_rets(&s);
    cr_assert_str_eq(g_log, "cuda", "CUDA outranks CPU");
}

Test(call, excluded_wins_over_included_and_tensor_keys)
{
    std_fallthrough();
    od_op *op = def("test::ex(Tensor self) -> Tensor");
    impl(op, OD_KEY_CPU, k_record, "cpu");
    impl(op, OD_KEY_AutogradCPU, k_record, "agcpu");
    od_tls saved = od_tls_exclude(OD_KS_AUTOGRAD); /* no_grad */
    od_tls_include(OD_KS(OD_KEY_AutogradCPU));
    od_error err;
    cr_assert_eq(call1(op, OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_AutogradCPU), &err), OD_OK);
    cr_assert_str_eq(g_log, "cpu");
    od_tls_restore(&saved);
    cr_assert_eq(call1(op, OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_AutogradCPU), &err), OD_OK);
    cr_assert_str_eq(g_log, "agcpu");
}

Test(call, wrong_argument_count_is_an_error)
{
    std_fallthrough();
    od_op *op = def("test::argc(Tensor self, int k) -> Tensor");
    impl(op, OD_KEY_CPU, k_record, "cpu");
    od_error err;
    cr_assert_eq(call1(op, OD_KS(OD_KEY_CPU), &err), OD_EINVAL);
    cr_assert(strstr(err.message, "expects 2 arguments"), "%s", err.message);
}

/* ---- thread-local state ------------------------------------------------------ */

Test(tls, defaults_and_exact_save_restore)
{
    cr_assert_eq(od_tls_included(), OD_KS_DEFAULT_INCLUDED);
    cr_assert_eq(od_tls_excluded(), OD_KS_DEFAULT_EXCLUDED);
    od_tls zero = od_tls_save();
    cr_assert_eq(zero.included, 0, "zero-initialised TLS is the default");
    cr_assert_eq(zero.excluded, 0);
    od_tls a = od_tls_include(OD_KS(OD_KEY_Mode));
    od_tls b = od_tls_exclude(OD_KS(OD_KEY_CPU));
    od_trace tr = {0};
    od_tls_get()->trace = &tr;
    od_tls during = od_tls_save();
    cr_assert_eq(od_tls_included(), OD_KS_DEFAULT_INCLUDED | OD_KS(OD_KEY_Mode));
    cr_assert_eq(od_tls_excluded(), OD_KS_DEFAULT_EXCLUDED | OD_KS(OD_KEY_CPU));
    od_tls_restore(&b);
    cr_assert_eq(od_tls_excluded(), OD_KS_DEFAULT_EXCLUDED);
    cr_assert_eq(od_tls_included(), OD_KS_DEFAULT_INCLUDED | OD_KS(OD_KEY_Mode));
    cr_assert_null(od_tls_get()->trace);
    od_tls_restore(&a);
    cr_assert_eq(memcmp(&zero, od_tls_get(), sizeof zero), 0);
    od_tls_restore(&during);
    cr_assert_eq(od_tls_get()->trace, &tr);
    od_tls_restore(&zero);
}

static void *thread_sees_defaults(void *arg)
{
    (void)arg;
    bool ok = od_tls_included() == OD_KS_DEFAULT_INCLUDED &&
              od_tls_excluded() == OD_KS_DEFAULT_EXCLUDED && od_tls_get()->trace == NULL;
    return ok ? (void *)1 : NULL;
}

Test(tls, per_thread)
{
    od_tls saved = od_tls_include(OD_KS(OD_KEY_Mode));
    pthread_t th;
    void *ok = NULL;
    pthread_create(&th, NULL, thread_sees_defaults, NULL);
    pthread_join(th, &ok);
    cr_assert(ok, "another thread must not see this thread's included set");
    od_tls_restore(&saved);
}

/* ---- missing kernels --------------------------------------------------------- */

Test(errors, no_kernel_for_key_lists_available_keys)
{
    std_fallthrough();
    od_op *op = def("test::m(Tensor self) -> Tensor");
    impl(op, OD_KEY_CPU, k_record, "cpu");
    impl(op, OD_KEY_Meta, k_record, "meta");
    od_error err;
    cr_assert_eq(call1(op, OD_KS(OD_KEY_CUDA), &err), OD_ENOKERNEL);
    cr_assert(strstr(err.message, "Could not run 'test::m' with arguments from the 'CUDA' backend."),
              "%s", err.message);
    cr_assert(strstr(err.message, "'test::m' is only available for these backends: [Meta, CPU]."),
              "%s", err.message);
}

Test(errors, no_tensor_arguments_and_no_fallback)
{
    od_op *op = def("test::nt(Tensor[] xs) -> Tensor");
    impl(op, OD_KEY_CPU, k_record, "cpu");
    od_value args[1] = {od_list_v(OD_T_TENSOR_LIST, NULL, 0)};
    od_stack s;
    od_stack_init(&s, args, 1);
    od_error err;
    od_tls saved = od_tls_save();
    od_tls_set_included(0);
    /* the caller's error (an empty list), not a missing kernel: 422, not 501 */
    cr_assert_eq(od_call(op, &s, &err), OD_EMISMATCH);
    od_tls_restore(&saved);
    cr_assert(strstr(err.message, "There were no tensor arguments to this function"), "%s",
              err.message);
    cr_assert(strstr(err.message, "schema test::nt.") && strstr(err.message, "[CPU]"), "%s",
              err.message);
}

/* ---- dumps and tracing -------------------------------------------------------- */

Test(dump, table_and_state_formats)
{
    od_op *op = def("test::dd(Tensor self, int dim, bool flag) -> Tensor");
    od_error err;
    cr_assert_eq(od_impl(op, OD_KEY_CPU, k_record, "c", "k_cpu", "kernels/x.c", 12, &err), OD_OK);
    cr_assert_eq(od_impl(op, OD_KEY_Autograd, k_record, "a", "k_ag", "kernels/ag.c", 7, &err), OD_OK);
    cr_assert_eq(od_impl(op, OD_KEY_CompositeExplicitAutograd, k_record, "e", "k_e", "kernels/e.c", 3,
                         &err), OD_OK);
    cr_assert_eq(od_fallback(OD_KEY_BackendSelect, NULL, NULL, "fallthrough", "core/bs.c", 3, &err),
                 OD_OK);
    char *table = od_dump_table(op);
    cr_assert_str_eq(table, "Undefined: registered at kernels/e.c:3 [default backend kernel]\n"
                            "Meta: registered at kernels/e.c:3 [default backend kernel]\n"
                            "CPU: registered at kernels/x.c:12 [kernel]\n"
                            "CUDA: registered at kernels/e.c:3 [default backend kernel]\n"
                            "BackendSelect: fallthrough registered at core/bs.c:3 [backend fallback]\n"
                            "AutogradOther: registered at kernels/ag.c:7 [autograd kernel]\n"
                            "AutogradCPU: registered at kernels/ag.c:7 [autograd kernel]\n"
                            "AutogradCUDA: registered at kernels/ag.c:7 [autograd kernel]\n");
    free(table);
    char *state = od_dump_state(op);
    cr_assert_str_eq(state,
                     "name: test::dd\n"
                     "schema: test::dd(Tensor self, int dim, bool flag) -> Tensor\n"
                     "debug: registered at test_dispatch.c:1\n"
                     "alias analysis kind: FROM_SCHEMA\n"
                     "CPU: registered at kernels/x.c:12 :: (Tensor _0, int _1, bool _2) -> Tensor _0 [ boxed ]\n"
                     "Autograd[alias]: registered at kernels/ag.c:7 :: (Tensor _0, int _1, bool _2) -> Tensor _0 [ boxed ]\n"
                     "CompositeExplicitAutograd[alias]: registered at kernels/e.c:3 :: (Tensor _0, int _1, bool _2) -> Tensor _0 [ boxed ]\n");
    free(state);
    od_registration_info regs[8];
    cr_assert_eq(od_op_registrations(op, regs, 8), 3);
    cr_assert_eq(regs[0].key, OD_KEY_CPU);
    cr_assert_eq(regs[2].key, OD_KEY_CompositeExplicitAutograd);
}

static int g_hook_calls;
static void count_hook(const od_op *op, od_key key, od_status st, uint64_t ns)
{
    (void)op;
    (void)ns;
    if (st == OD_OK && (key == OD_KEY_CPU || key == OD_KEY_AutogradCPU))
        __atomic_add_fetch(&g_hook_calls, 1, __ATOMIC_RELAXED);
}

Test(trace, records_each_key_visited_with_provenance)
{
    std_fallthrough();
    od_op *op = def("test::tr(Tensor self) -> Tensor");
    impl(op, OD_KEY_CPU, k_record, "cpu");
    impl(op, OD_KEY_Autograd, k_redispatch, "ag");
    od_trace tr;
    memset(&tr, 0, sizeof tr);
    od_tls_get()->trace = &tr;
    od_set_stats_hook(count_hook);
    od_error err;
    cr_assert_eq(call1(op, OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_AutogradCPU), &err), OD_OK);
    od_tls_get()->trace = NULL;
    od_set_stats_hook(NULL);
    cr_assert_eq(tr.nsteps, 2);
    cr_assert_eq(tr.first_keyset, OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_AutogradCPU));
    cr_assert_eq(tr.steps[0].key, OD_KEY_AutogradCPU);
    cr_assert_eq(tr.steps[0].prov, OD_PROV_AUTOGRAD);
    cr_assert_eq(tr.steps[0].depth, 0);
    cr_assert_eq(tr.steps[1].key, OD_KEY_CPU);
    cr_assert_eq(tr.steps[1].prov, OD_PROV_KERNEL);
    cr_assert_eq(tr.steps[1].depth, 1);
    cr_assert_geq(tr.steps[0].ns, tr.steps[1].ns, "outer step includes the inner one");
    cr_assert_eq(g_hook_calls, 2);
}
