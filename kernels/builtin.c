/* builtin.c — start-up of the built-in operators.
 *
 * Invariants: od_init() runs its body once per process (pthread_once); it
 * defines every operator of ops.def in list order, so OD_OPID_<id> equals
 * the operator's registry id, then registers the standard fallbacks and each
 * kernel family through the public registration API. A failure is remembered
 * and returned to every later caller.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "od_autograd.h"
#include "od_vmap.h"
#include "od_ops.h"

static const od_op *g_builtin[OD_NUM_BUILTIN_OPS];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static od_error g_init_err;

static const struct {
    const char *schema;
    int line;
} g_defs[OD_NUM_BUILTIN_OPS] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag) [OD_OPID_##id] = {schema, __LINE__},
#include "ops.def"
#undef OD_OP
};

static od_status init_body(od_error *err)
{
    od_status st;
    for (int i = 0; i < OD_NUM_BUILTIN_OPS; i++) {
        od_op *op = NULL;
        st = od_def(g_defs[i].schema, "kernels/ops.def", g_defs[i].line, &op, err);
        if (st)
            return st;
        if (od_op_id(op) != i)
            return od_error_set(err, OD_EINTERNAL,
                                "built-in %s got id %d, expected %d: od_init must define the "
                                "built-ins before any other operator",
                                od_op_name(op), od_op_id(op), i);
        g_builtin[i] = op;
    }
    /* Like PyTorch: factories without a BackendSelect kernel, and every call
     * while autocast is enabled but the op has no autocast kernel, fall
     * through to the next key. */
    if ((st = od_fallback(OD_KEY_BackendSelect, NULL, NULL, "fallthrough", __FILE__, __LINE__, err)) ||
        (st = od_fallback(OD_KEY_AutocastCPU, NULL, NULL, "fallthrough", __FILE__, __LINE__, err)) ||
        (st = od_fallback(OD_KEY_AutocastCUDA, NULL, NULL, "fallthrough", __FILE__, __LINE__, err)))
        return st;
    if ((st = od_register_meta_kernels(err)) || (st = od_register_cpu_kernels(err)) ||
        (st = od_register_composite_kernels(err)) || (st = od_register_autograd_kernels(err)) ||
        (st = od_register_builtin_modes(err)) || (st = od_register_reference_kernels(err)) ||
        (st = od_register_batched_kernels(err)) || (st = od_register_autocast_kernels(err)))
        return st;
#ifdef OD_HAVE_CUDA
    if ((st = od_register_cuda_kernels(err)))
        return st;
#endif
    return OD_OK;
}

static void init_once(void)
{
    od_error_clear(&g_init_err);
    init_body(&g_init_err);
}

od_status od_init(od_error *err)
{
    pthread_once(&g_once, init_once);
    if (g_init_err.status != OD_OK) {
        if (err)
            *err = g_init_err;
        return g_init_err.status;
    }
    return OD_OK;
}

const od_op *od_builtin(od_opid id)
{
    return (unsigned)id < OD_NUM_BUILTIN_OPS ? g_builtin[id] : NULL;
}

od_status od_call_builtin1(od_opid id, od_value *args, int nargs, od_tensor **out, od_error *err)
{
    od_stack s;
    od_status st = od_call_builtin(id, args, nargs, &s, err);
    if (st)
        return st;
    if (s.nrets < 1 || s.rets[0].tag != OD_T_TENSOR || !s.rets[0].u.t) {
        int n = s.nrets;
        od_stack_release_rets(&s);
        return od_error_set(err, OD_EINTERNAL, "%s returned %d values where a tensor was expected",
                            od_op_name(od_builtin(id)), n);
    }
    *out = s.rets[0].u.t;
    for (int i = 1; i < s.nrets; i++) /* the first is what the caller asked for */
        od_value_release(&s.rets[i]);
    return OD_OK;
}

od_status od_call_builtin(od_opid id, od_value *args, int nargs, od_stack *s, od_error *err)
{
    const od_op *op = od_builtin(id);
    if (!op)
        return od_error_set(err, OD_EINTERNAL, "built-in operator %d is not defined: call od_init() first",
                            (int)id);
    od_stack_init(s, args, nargs);
    return od_call(op, s, err);
}
