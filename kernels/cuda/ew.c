/* ew.c — boxed CUDA kernels of the elementwise operators: binary
 * arithmetic, comparisons, where, unary, clamp, fill_, lerp, addcmul,
 * addcdiv, nextafter, equal.
 *
 * Invariants: each kernel validates through the operator's shape function
 * (same checks and messages as CPU and Meta), allocates its output on the
 * call's CUDA device, and runs one launch over an iterator whose inputs are
 * read in their own dtypes and converted to the compute family of
 * od_elementwise_common_dtype (PyTorch's opmath: float for float16 and
 * bfloat16). 0-dim CPU tensors join as constants. Everything is released on
 * every error path; nrets stays 0 on error.
 */
#include <math.h>
#include <string.h>

#include "cuda_internal.h"
#include "od_math.h"

/* Allocates the output, adds the inputs in order (tensor or Scalar
 * arguments; NULL entries skipped), runs op and returns the output. */
static od_status run_ew_p(const od_op *op, od_opid id, od_stack *s, const od_value *const *inputs,
                          int ninputs, od_cu_ew ewop, od_dtype compute, double alpha_d, int64_t alpha_i,
                          const od_ew_params *prm, bool int_div, od_error *err)
{
    int device;
    od_status st = od_cu_call_device(op, s, true, &device, err);
    if (st)
        return st;
    od_cu_env env;
    if ((st = od_cu_begin(device, &env, err)))
        return st;
    od_tensor *out = NULL;
    int nouts = 0;
    if ((st = od_cu_outputs(id, s, device, &out, &nouts, err)))
        return st;
    od_cu_iter it;
    od_cu_iter_init(&it, out);
    for (int i = 0; i < ninputs && !st; i++) {
        const od_value *v = inputs[i];
        if (v->tag == OD_T_TENSOR)
            st = od_cu_iter_add_tensor(&it, v->u.t, err);
        else
            od_cu_iter_add_scalar(&it, v);
    }
    if (!st)
        st = od_cu_run_elementwise_p(&env, &it, ewop, compute, alpha_d, alpha_i, prm ? prm->d : NULL,
                                     prm ? prm->i : NULL, int_div ? od_cu_op_name(op) : NULL, err);
    if (st) {
        od_tensor_release(out);
        return st;
    }
    od_cu_return(s, &out, 1);
    return OD_OK;
}

static od_status run_ew(const od_op *op, od_opid id, od_stack *s, const od_value *const *inputs,
                        int ninputs, od_cu_ew ewop, od_dtype compute, double alpha_d, int64_t alpha_i,
                        bool int_div, od_error *err)
{
    return run_ew_p(op, id, s, inputs, ninputs, ewop, compute, alpha_d, alpha_i, NULL, int_div, err);
}

_Static_assert(OD_CU_EW_MAX_PARAMS == OD_EW_MAX_PARAMS, "OD_CU_EW_MAX_PARAMS must equal OD_EW_MAX_PARAMS");

/* alpha of add/sub in both forms (an int alpha is exact in either family). */
static void alpha_of(const od_value *a, double *d, int64_t *i)
{
    *d = od_value_as_double(a);
    *i = a->tag == OD_T_INT ? a->u.i : a->tag == OD_T_BOOL ? (int64_t)a->u.b : od_double_to_i64(a->u.d);
}

od_status od_cuda_binary(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_dtype compute;
    int mode = OD_DIV_TRUE;
    od_status st;
    if ((st = od_elementwise_common_dtype(id, s, &compute, err)) ||
        (st = od_div_rounding_mode(id, s, &mode, err)))
        return st;
    od_cu_ew ewop;
    double ad = 1;
    int64_t ai = 1;
    switch (id) {
    case OD_OPID_add_Tensor:
    case OD_OPID_add_Scalar:
    case OD_OPID_sub_Tensor:
    case OD_OPID_sub_Scalar: {
        od_value alpha = od_add_alpha(id, &s->args[2], compute); /* sub: add with -alpha */
        ewop = OD_CU_EW_ADD;
        alpha_of(&alpha, &ad, &ai);
        break;
    }
    case OD_OPID_mul_Tensor:
    case OD_OPID_mul_Scalar: ewop = OD_CU_EW_MUL; break;
    case OD_OPID_div_Tensor:
    case OD_OPID_div_Scalar:
    case OD_OPID_div_Tensor_mode:
    case OD_OPID_div_Scalar_mode:
        ewop = mode == OD_DIV_TRUNC ? OD_CU_EW_DIV_TRUNC : mode == OD_DIV_FLOOR ? OD_CU_EW_DIV_FLOOR
                                                                                : OD_CU_EW_DIV;
        break;
    case OD_OPID_pow_Tensor_Tensor:
    case OD_OPID_pow_Tensor_Scalar:
    case OD_OPID_pow_Scalar: ewop = OD_CU_EW_POW; break;
    case OD_OPID_maximum: ewop = OD_CU_EW_MAXIMUM; break;
    case OD_OPID_minimum: ewop = OD_CU_EW_MINIMUM; break;
    default:
        return od_error_set(err, OD_EINTERNAL, "od_cuda_binary: unexpected operator %s",
                            od_cu_op_name(op));
    }
    const od_value *in[2] = {&s->args[0], &s->args[1]};
    bool int_div = (ewop == OD_CU_EW_DIV_TRUNC || ewop == OD_CU_EW_DIV_FLOOR) &&
                   !od_dtype_is_floating(compute);
    return run_ew(op, id, s, in, 2, ewop, compute, ad, ai, int_div, err);
}

od_status od_cuda_compare(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_dtype compute;
    od_status st = od_elementwise_common_dtype(id, s, &compute, err);
    if (st)
        return st;
    od_cu_ew ewop;
    switch (id) {
    case OD_OPID_eq_Tensor: case OD_OPID_eq_Scalar: ewop = OD_CU_EW_EQ; break;
    case OD_OPID_ne_Tensor: case OD_OPID_ne_Scalar: ewop = OD_CU_EW_NE; break;
    case OD_OPID_lt_Tensor: case OD_OPID_lt_Scalar: ewop = OD_CU_EW_LT; break;
    case OD_OPID_le_Tensor: case OD_OPID_le_Scalar: ewop = OD_CU_EW_LE; break;
    case OD_OPID_gt_Tensor: case OD_OPID_gt_Scalar: ewop = OD_CU_EW_GT; break;
    case OD_OPID_ge_Tensor: case OD_OPID_ge_Scalar: ewop = OD_CU_EW_GE; break;
    default:
        return od_error_set(err, OD_EINTERNAL, "od_cuda_compare: unexpected operator %s",
                            od_cu_op_name(op));
    }
    const od_value *in[2] = {&s->args[0], &s->args[1]};
    return run_ew(op, id, s, in, 2, ewop, compute, 0, 0, false, err);
}

od_status od_cuda_where(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_dtype compute;
    od_status st = od_elementwise_common_dtype(id, s, &compute, err);
    if (st)
        return st;
    const od_value *in[3] = {&s->args[0], &s->args[1], &s->args[2]};
    return run_ew(op, id, s, in, 3, OD_CU_EW_WHERE, compute, 0, 0, false, err);
}

/* lerp, addcmul, addcdiv, nextafter: od_math.h's functions of the CPU
 * kernels; addcmul/addcdiv's value and lerp.Scalar's weight ride as alpha
 * (in the compute family: value.to<opmath_t>(), as ATen's CUDA kernels). */
od_status od_cuda_pointwise(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_dtype compute;
    od_status st = od_elementwise_common_dtype(id, s, &compute, err);
    if (st)
        return st;
    od_cu_ew ewop;
    double ad = 1;
    int64_t ai = 1;
    switch (id) {
    case OD_OPID_lerp_Scalar: ewop = OD_CU_EW_LERP_S; break;
    case OD_OPID_lerp_Tensor: ewop = OD_CU_EW_LERP; break;
    case OD_OPID_addcmul: ewop = OD_CU_EW_ADDCMUL; break;
    case OD_OPID_addcdiv: ewop = OD_CU_EW_ADDCDIV; break;
    case OD_OPID_nextafter: ewop = OD_CU_EW_NEXTAFTER; break;
    default:
        return od_error_set(err, OD_EINTERNAL, "od_cuda_pointwise: unexpected operator %s", od_cu_op_name(op));
    }
    if (ewop == OD_CU_EW_ADDCMUL || ewop == OD_CU_EW_ADDCDIV)
        alpha_of(&s->args[3], &ad, &ai);
    else if (ewop == OD_CU_EW_LERP_S)
        alpha_of(&s->args[2], &ad, &ai);
    const od_value *in[3] = {&s->args[0], &s->args[1], &s->args[2]};
    return run_ew(op, id, s, in, ewop == OD_CU_EW_NEXTAFTER || ewop == OD_CU_EW_LERP_S ? 2 : 3, ewop, compute, ad,
                  ai, false, err);
}

/* equal: ATen's cuda_equal, eq(self, other).all().item(), after its size
 * check (no broadcasting). */
od_status od_cuda_equal(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx;
    (void)ks;
    (void)op;
    if (s->nargs != 2 || s->args[0].tag != OD_T_TENSOR || s->args[1].tag != OD_T_TENSOR)
        return od_error_set(err, OD_EINVAL, "equal(): expected two tensors");
    od_tensor *a = s->args[0].u.t, *b = s->args[1].u.t;
    if (!od_device_eq(a->device, b->device)) {
        char da[32], db[32];
        od_device_print(a->device, da, sizeof da);
        od_device_print(b->device, db, sizeof db);
        return od_error_set(err, OD_EMISMATCH,
                            "Expected all tensors to be on the same device, but found at least two "
                            "devices, %s and %s!", da, db);
    }
    bool same = a->ndim == b->ndim && (a->ndim == 0 || !memcmp(a->sizes, b->sizes, (size_t)a->ndim * sizeof a->sizes[0]));
    if (same && od_tensor_numel(a) > 0) {
        od_tensor *eq = NULL, *all = NULL, *host = NULL;
        od_value ev[2] = {od_tensor_v(a), od_tensor_v(b)};
        od_status st = od_call_builtin1(OD_OPID_eq_Tensor, ev, 2, &eq, err);
        if (!st) {
            od_value av[1] = {od_tensor_v(eq)};
            st = od_call_builtin1(OD_OPID_all, av, 1, &all, err);
        }
        if (!st) {
            od_value cv[7] = {od_tensor_v(all), od_none(), od_none(), od_device_v((od_device){OD_DEV_CPU, 0}),
                              od_none(), od_bool(false), od_none()};
            st = od_call_builtin1(OD_OPID__to_copy, cv, 7, &host, err);
        }
        if (!st)
            same = *(const bool *)od_tensor_data(host);
        od_tensor_release(eq);
        od_tensor_release(all);
        od_tensor_release(host);
        if (st)
            return st;
    }
    s->rets[0] = od_bool(same);
    s->nrets = 1;
    return OD_OK;
}

od_status od_cuda_unary(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_dtype compute;
    od_status st = od_elementwise_common_dtype(id, s, &compute, err);
    if (st)
        return st;
    od_cu_ew ewop;
    switch (id) {
    case OD_OPID_neg: ewop = OD_CU_EW_NEG; break;
    case OD_OPID_abs: ewop = OD_CU_EW_ABS; break;
    case OD_OPID_relu: ewop = OD_CU_EW_RELU; break;
    case OD_OPID_gelu: {
        bool tanh_form;
        if ((st = od_gelu_approximate(s, &tanh_form, err)))
            return st;
        ewop = tanh_form ? OD_CU_EW_GELU_TANH : OD_CU_EW_GELU;
        break;
    }
    default:
        return od_error_set(err, OD_EINTERNAL, "od_cuda_unary: unexpected operator %s",
                            od_cu_op_name(op));
    }
    const od_value *in[1] = {&s->args[0]};
    return run_ew(op, id, s, in, 1, ewop, compute, 0, 0, false, err);
}

/* The launcher's operation of each OD_EW1 / OD_EW2 operator of ops.def. */
static const int16_t g_ew_op[OD_NUM_BUILTIN_OPS] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag)
#define OD_EW1(id, schema, fn, rule, ag) [OD_OPID_##id] = OD_CU_EW_##id,
#define OD_EW2(id, schema, fn, rule, ag) [OD_OPID_##id] = OD_CU_EW_##id,
#define OD_EWP(id, schema, fn, rule, ag) [OD_OPID_##id] = OD_CU_EW_##id,
#include "ops.def"
#undef OD_OP
#undef OD_EW1
#undef OD_EW2
#undef OD_EWP
};

/* Every OD_EW1 / OD_EW2 operator: inputs are its arguments in order. */
od_status od_cuda_ew(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_ew_rule rule = od_ew_rule_of(id);
    od_dtype compute;
    od_status st = od_elementwise_common_dtype(id, s, &compute, err);
    if (st)
        return st;
    if (rule == OD_EWR_NONE)
        return od_error_set(err, OD_EINTERNAL, "od_cuda_ew: unexpected operator %s", od_cu_op_name(op));
    int self = od_ew_self_arg(id);
    if (self >= 0) { /* OD_EWP: one tensor, the parameters as the CPU kernel holds them */
        od_ew_params p;
        if ((st = od_ew_params_of(id, s, compute, &p, err)))
            return st;
        const od_value *in1[1] = {&s->args[self]};
        return run_ew_p(op, id, s, in1, 1, (od_cu_ew)g_ew_op[id], compute, 0, 0, &p, false, err);
    }
    const od_value *in[2] = {&s->args[0], s->nargs > 1 ? &s->args[1] : NULL};
    bool int_div = rule == OD_EWR_INT_DIV && !od_dtype_is_floating(compute);
    return run_ew(op, id, s, in, s->nargs, (od_cu_ew)g_ew_op[id], compute, 0, 0, int_div, err);
}

od_status od_cuda_clamp(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_dtype compute;
    od_status st = od_elementwise_common_dtype(id, s, &compute, err);
    if (st)
        return st;
    /* A NaN Scalar bound alone leaves the input (ATen's ::min/::max), as if
     * absent; with both bounds given, the clamp's NaN rule gives NaN. */
    bool fill_nan = od_clamp_fills_nan(id, s);
#define OD_BOUND_(v) ((v).tag != OD_T_NONE && !((v).tag == OD_T_TENSOR && !(v).u.t) && \
                      (fill_nan || !((v).tag == OD_T_DOUBLE && isnan((v).u.d))))
    bool has_lo = OD_BOUND_(s->args[1]), has_hi = OD_BOUND_(s->args[2]);
#undef OD_BOUND_
    const od_value *in[3] = {&s->args[0], &s->args[1], &s->args[2]};
    if (has_lo && has_hi)
        return run_ew(op, id, s, in, 3, OD_CU_EW_CLAMP, compute, 0, 0, false, err);
    if (has_lo)
        return run_ew(op, id, s, in, 2, OD_CU_EW_CLAMP_MIN, compute, 0, 0, false, err);
    if (!has_hi)
        return run_ew(op, id, s, in, 1, OD_CU_EW_COPY, compute, 0, 0, false, err);
    in[1] = &s->args[2];
    return run_ew(op, id, s, in, 2, OD_CU_EW_CLAMP_MAX, compute, 0, 0, false, err);
}

/* The bytes of scalar v converted to dt, like a torch cast (od_tensor_scalar's rules). */
static uint64_t scalar_bits(const od_value *v, od_dtype dt)
{
    uint64_t bits = 0;
    double d = od_value_as_double(v);
    int64_t i = v->tag == OD_T_INT ? v->u.i : v->tag == OD_T_BOOL ? (int64_t)v->u.b : od_double_to_i64(d);
    if (v->tag == OD_T_DOUBLE && dt != OD_INT64 && !od_dtype_is_floating(dt) && dt != OD_BOOL)
        i = od_math_f64_to_i32(d);
    switch (dt) {
    case OD_BOOL: bits = v->tag == OD_T_DOUBLE ? d != 0 : i != 0; break;
    case OD_UINT8: bits = (uint8_t)i; break;
    case OD_INT8: bits = (uint8_t)(int8_t)i; break;
    case OD_INT16: bits = (uint16_t)(int16_t)i; break;
    case OD_INT32: bits = (uint32_t)(int32_t)i; break;
    case OD_INT64: bits = (uint64_t)i; break;
    case OD_FLOAT16: bits = v->tag == OD_T_DOUBLE ? od_double_to_half(d) : od_float_to_half((float)i); break;
    case OD_BFLOAT16: bits = v->tag == OD_T_DOUBLE ? od_double_to_bf16(d) : od_float_to_bf16((float)i); break;
    case OD_FLOAT32: {
        float f = v->tag == OD_T_DOUBLE ? (float)d : (float)i;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        bits = u;
        break;
    }
    default: {
        double x = v->tag == OD_T_DOUBLE ? d : (double)i;
        memcpy(&bits, &x, sizeof bits);
        break;
    }
    }
    return bits;
}

od_status od_cuda_fill(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device;
    od_status st = od_cu_call_device(op, s, false, &device, err);
    if (st)
        return st;
    od_cu_env env;
    od_tensor *out = NULL;
    int nouts = 0;
    if ((st = od_cu_begin(device, &env, err)) || (st = od_cu_outputs(id, s, device, &out, &nouts, err)))
        return st;
    od_cu_iter it;
    od_cu_iter_init(&it, out);
    od_cu_iter_coalesce(&it);
    uint64_t bits = scalar_bits(&s->args[1], out->dtype);
    if (it.numel > 0 &&
        ((st = od_cu_status(od_cu_fill(&it, (int)od_dtype_size(out->dtype), bits, env.sm_count, env.stream),
                            "fill kernel launch", err)) ||
         (st = od_cu_finish(&env, "aten::fill_", err)))) {
        od_tensor_release(out);
        return st;
    }
    od_cu_return(s, &out, 1);
    return OD_OK;
}
