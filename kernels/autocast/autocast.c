/* autocast.c — the Autocast keys, as torch.autocast in PyTorch 1.13: the
 * lower-precision list (mm, bmm, addmm, matmul, linear) casts its floating
 * inputs to the autocast dtype on CPU and CUDA; on CUDA the fp32 list
 * (softmax, log_softmax, layer_norm, sum) runs float16/bfloat16 inputs in
 * float32. (CPU autocast in 1.13 leaves those in the input's dtype; the
 * integration tests check both against torch.)
 *
 * Invariants: autocast is off unless a request turns it on (the keys are in
 * the default excluded set, and every other operator falls through them).
 * A kernel casts its eligible tensor arguments through the dispatcher (so
 * autograd records the casts), then runs the operator below the Autocast
 * keys with them excluded, so nested calls are not cast again.
 */
#include <string.h>

#include "od_ops.h"

enum { LOWER = 1, FP32 = 2 };

static od_status cast(od_tensor *t, od_dtype to, od_tensor **out, od_error *err)
{
    od_value a[7] = {od_tensor_v(t), od_dtype_v(to), od_none(), od_none(), od_none(), od_bool(false), od_none()};
    return od_call_builtin1(OD_OPID__to_copy, a, 7, out, err);
}

static od_status autocast_kernel(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    int list = (int)(intptr_t)ctx;
    od_dtype lower = (od_dtype)od_tls_get()->autocast_dtype;
    od_value args[OD_MAX_ARGS];
    od_tensor *tmp[OD_MAX_ARGS] = {0};
    od_status st = OD_OK;
    memcpy(args, s->args, (size_t)s->nargs * sizeof args[0]);
    for (int i = 0; i < s->nargs && st == OD_OK; i++) {
        od_tensor *t = s->args[i].tag == OD_T_TENSOR ? s->args[i].u.t : NULL;
        if (!t || !od_dtype_is_floating(t->dtype))
            continue;
        bool eligible = list == LOWER ? t->dtype != OD_FLOAT64 && t->dtype != lower
                                      : t->dtype == OD_FLOAT16 || t->dtype == OD_BFLOAT16;
        if (eligible && (st = cast(t, list == LOWER ? lower : OD_FLOAT32, &tmp[i], err)) == OD_OK)
            args[i].u.t = tmp[i];
    }
    if (st == OD_OK) {
        od_stack s2;
        od_stack_init(&s2, args, s->nargs);
        od_tls prev = od_tls_exclude(OD_KS_AUTOCAST);
        st = od_call_with_keys(op, ks & od_ks_below(OD_KEY_AutocastCPU), &s2, err);
        od_tls_restore(&prev);
        if (st == OD_OK) {
            memcpy(s->rets, s2.rets, sizeof s2.rets);
            s->nrets = s2.nrets;
        }
    }
    for (int i = 0; i < s->nargs; i++)
        od_tensor_release(tmp[i]);
    return st;
}

od_status od_register_autocast_kernels(od_error *err)
{
    static const struct {
        od_opid id;
        int list;
        bool cuda_only;
    } regs[] = {
        {OD_OPID_mm, LOWER, false},          {OD_OPID_bmm, LOWER, false},
        {OD_OPID_addmm, LOWER, false},       {OD_OPID_matmul, LOWER, false},
        {OD_OPID_linear, LOWER, false},      {OD_OPID_softmax_int, FP32, true},
        {OD_OPID_log_softmax_int, FP32, true}, {OD_OPID_layer_norm, FP32, true},
        {OD_OPID_sum, FP32, true},           {OD_OPID_sum_dim_IntList, FP32, true},
    };
    od_status st = OD_OK;
    for (size_t i = 0; i < sizeof regs / sizeof regs[0] && !st; i++) {
        od_op *op = (od_op *)od_builtin(regs[i].id); /* registration is the one writer */
        void *ctx = (void *)(intptr_t)regs[i].list;
        const char *name = regs[i].list == LOWER ? "autocast_lower_precision" : "autocast_fp32";
        if (!regs[i].cuda_only)
            st = od_impl(op, OD_KEY_AutocastCPU, autocast_kernel, ctx, name, __FILE__, __LINE__, err);
        if (!st)
            st = od_impl(op, OD_KEY_AutocastCUDA, autocast_kernel, ctx, name, __FILE__, __LINE__, err);
    }
    return st;
}
