/* shape_elementwise.c — shape and dtype functions of the elementwise
 * operators, the copies, fill_ and the factories.
 *
 * Invariants: everything a backend must check before allocating lives here,
 * so Meta, CPU and CUDA agree on broadcasting, type promotion (torch's
 * result_type, Python numbers for Scalar arguments), device placement and on
 * error text (PyTorch 1.13's wording). Nothing here touches tensor data or
 * allocates. Arguments are read from the boxed stack (borrowed); a value of
 * the wrong tag is OD_EINVAL naming the argument, never a crash.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "od_half.h"
#include "od_shape.h"

/* ---- names for messages ----------------------------------------------------- */

/* Short operator name ("add") and argument names from the schema, so messages
 * read like PyTorch's argument parser. Falls back when called before od_init. */
static const char *op_name(od_opid id)
{
    const od_op *op = od_builtin(id);
    return op ? od_op_schema(op)->name : "op";
}

static const char *arg_name(od_opid id, int i)
{
    const od_op *op = od_builtin(id);
    if (op && i < od_op_schema(op)->nargs && od_op_schema(op)->args[i].name)
        return od_op_schema(op)->args[i].name;
    return "?";
}


static const char *ew_fn(od_opid id);

/* torch 1.13's refusal of a dtype its CPU kernel has no case for names the
 * kernel's AT_DISPATCH: "<fn>_cpu" for most, "<fn>_vml_cpu" for the unary
 * kernels UnaryOpsKernel.cpp declares with IMPLEMENT_FLOAT_KERNEL or
 * IMPLEMENT_COMPLEX_KERNEL, and a few of their own (hardtanh runs clamp's
 * kernel). fn: the operator's od_math function (ops.def), else its name. */
static od_status not_implemented(od_opid id, od_dtype dt, od_error *err)
{
    static const char *const vml[] = {"acos", "asin",  "atan", "ceil",  "cos",   "erf",  "erfc", "erfinv",
                                      "exp",  "expm1", "floor", "log",  "log10", "log1p", "log2", "i0",
                                      "round", "sin",  "sqrt",  "tan",  "tanh",  "trunc", "lgamma"};
    static const struct {
        const char *fn, *kernel;
    } own[] = {{"hardtanh", "clamp_scalar_cpu"}, {"gelu", "GeluKernelImpl"}, {"digamma", "digamma"}, {"pow", "pow"}};
    const char *fn = ew_fn(id) ? ew_fn(id) : op_name(id), *suffix = "_cpu";
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (!strcmp(fn, own[i].fn))
            fn = own[i].kernel, suffix = "";
    for (size_t i = 0; i < sizeof vml / sizeof vml[0] && *suffix; i++)
        if (!strcmp(fn, vml[i]))
            suffix = "_vml_cpu";
    return od_error_set(err, OD_EUNSUPPORTED, "\"%s%s\" not implemented for '%s'", fn, suffix,
                        od_dtype_scalar_name(dt));
}

/* The same where the kernel depends on an argument: round.decimals runs
 * round_decimals_kernel ("round_cpu"), or round's own for decimals=0;
 * polygamma(n) runs digamma's for n = 0, trigamma's for n = 1. */
static od_status not_implemented_s(od_opid id, const od_stack *s, od_dtype dt, od_error *err)
{
    const char *k = NULL;
    if ((id == OD_OPID_round_decimals || id == OD_OPID_round__decimals) && s->nargs > 1 && s->args[1].tag == OD_T_INT)
        k = s->args[1].u.i ? "round_cpu" : "round_vml_cpu";
    if (id == OD_OPID_polygamma && s->nargs > 0 && s->args[0].tag == OD_T_INT)
        k = s->args[0].u.i == 0 ? "digamma" : s->args[0].u.i == 1 ? "trigamma" : "polygamma";
    if (k)
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'", k, od_dtype_scalar_name(dt));
    return not_implemented(id, dt, err);
}

/* ---- argument access ---------------------------------------------------------- */

static od_status bad_arg(od_opid id, const od_stack *s, int i, const char *expected, od_error *err)
{
    const char *got = i < s->nargs ? od_tag_name(s->args[i].tag) : "nothing";
    return od_error_set(err, OD_EINVAL, "%s(): argument '%s' (position %d) must be %s, not %s",
                        op_name(id), arg_name(id, i), i + 1, expected, got);
}

static od_status need_nargs(od_opid id, const od_stack *s, int n, od_error *err)
{
    if (s->nargs != n)
        return od_error_set(err, OD_EINVAL, "%s(): expected %d arguments, got %d", op_name(id), n,
                            s->nargs);
    return OD_OK;
}

static od_status arg_tensor(od_opid id, const od_stack *s, int i, const od_tensor **t, od_error *err)
{
    if (i < s->nargs && s->args[i].tag == OD_T_TENSOR && s->args[i].u.t) {
        *t = s->args[i].u.t;
        return OD_OK;
    }
    return bad_arg(id, s, i, "Tensor", err);
}

static od_status arg_scalar(od_opid id, const od_stack *s, int i, od_error *err)
{
    if (i < s->nargs && od_value_is_number(&s->args[i]))
        return OD_OK;
    return bad_arg(id, s, i, "Number", err);
}

/* A Tensor or a Scalar argument, as the overload says. */
static od_status arg_operand(od_opid id, const od_stack *s, int i, bool is_tensor, od_error *err)
{
    const od_tensor *t = NULL;
    return is_tensor ? arg_tensor(id, s, i, &t, err) : arg_scalar(id, s, i, err);
}

/* ---- shared rules ------------------------------------------------------------- */

od_result_arg od_result_arg_of_value(const od_value *v)
{
    od_result_arg a = {NULL, OD_SCALAR_BOOL};
    if (v->tag == OD_T_TENSOR)
        a.tensor = v->u.t;
    else if (v->tag == OD_T_INT)
        a.scalar_kind = OD_SCALAR_INT;
    else if (v->tag == OD_T_DOUBLE)
        a.scalar_kind = OD_SCALAR_FLOAT;
    return a;
}

/* The device of the call and the check that every tensor argument is on it.
 * Like TensorIterator, a 0-dim CPU tensor may join tensors of another device
 * (it is read as a scalar); the device is that of the first other tensor. */
static od_status common_device(const od_stack *s, od_device *out, od_error *err)
{
    const od_tensor *first = NULL, *lead = NULL;
    for (int i = 0; i < s->nargs; i++) {
        if (s->args[i].tag != OD_T_TENSOR || !s->args[i].u.t)
            continue;
        const od_tensor *t = s->args[i].u.t;
        if (!first)
            first = t;
        if (!lead && !(t->ndim == 0 && t->device.type == OD_DEV_CPU))
            lead = t;
    }
    if (!lead)
        lead = first;
    out->type = OD_DEV_CPU;
    out->index = 0;
    if (!lead)
        return OD_OK;
    *out = lead->device;
    for (int i = 0; i < s->nargs; i++) {
        if (s->args[i].tag != OD_T_TENSOR || !s->args[i].u.t)
            continue;
        const od_tensor *t = s->args[i].u.t;
        if (od_device_eq(t->device, lead->device) || (t->ndim == 0 && t->device.type == OD_DEV_CPU))
            continue;
        char a[32], b[32];
        od_device_print(lead->device, a, sizeof a);
        od_device_print(t->device, b, sizeof b);
        return od_error_set(err, OD_EMISMATCH,
                            "Expected all tensors to be on the same device, but found at least two "
                            "devices, %s and %s!",
                            a, b);
    }
    return OD_OK;
}

/* Broadcast shape of the tensor arguments among idx[0..n) (Scalars are 0-dim). */
static od_status broadcast_args(const od_stack *s, const int *idx, int n, int64_t *sizes, int *ndim,
                                od_error *err)
{
    *ndim = 0;
    for (int k = 0; k < n; k++) {
        const od_value *v = &s->args[idx[k]];
        if (v->tag != OD_T_TENSOR || !v->u.t)
            continue;
        int64_t tmp[OD_MAX_DIMS];
        int nt;
        od_status st = od_broadcast_shapes(sizes, *ndim, v->u.t->sizes, v->u.t->ndim, tmp, &nt, err);
        if (st)
            return st;
        memcpy(sizes, tmp, sizeof(int64_t) * (size_t)nt);
        *ndim = nt;
    }
    return OD_OK;
}

/* result_type over the (tensor or number) arguments idx[0..n); None skipped. */
static od_dtype result_type_of(const od_stack *s, const int *idx, int n)
{
    od_result_arg ra[4];
    int m = 0;
    for (int k = 0; k < n && m < 4; k++) {
        const od_value *v = &s->args[idx[k]];
        if (v->tag == OD_T_NONE || (v->tag == OD_T_TENSOR && !v->u.t))
            continue;
        ra[m++] = od_result_arg_of_value(v);
    }
    return od_result_type(ra, m);
}

static bool value_is_bool(const od_value *v)
{
    return v->tag == OD_T_BOOL || (v->tag == OD_T_TENSOR && v->u.t && v->u.t->dtype == OD_BOOL);
}

/* ---- scalar range checks (c10's checked_convert) ------------------------------------ */

static const char *c_type_name(od_dtype dt)
{
    static const char *const names[OD_NUM_DTYPES] = {
        [OD_BOOL] = "bool",       [OD_UINT8] = "uint8_t",       [OD_INT8] = "int8_t",
        [OD_INT16] = "int16_t",   [OD_INT32] = "int",           [OD_INT64] = "int64_t",
        [OD_FLOAT16] = "at::Half", [OD_BFLOAT16] = "at::BFloat16", [OD_FLOAT32] = "float",
        [OD_FLOAT64] = "double",
    };
    return (unsigned)dt < OD_NUM_DTYPES ? names[dt] : "?";
}

/* c10's overflows<To, From>: doubles must lie within the dtype's range
 * (infinities and NaN pass for floating dtypes only); integers likewise, except
 * that uint8 also accepts -255..-1, which wrap (a - b as a + 255 * b). */
od_status od_scalar_check_fits(const od_value *v, od_dtype dt, od_error *err)
{
    bool overflow = false;
    if (dt == OD_BOOL || v->tag == OD_T_BOOL)
        return OD_OK;
    if (od_dtype_is_floating(dt)) {
        double lim = dt == OD_FLOAT16 ? 65504.0 : dt == OD_BFLOAT16 ? 3.3895313892515355e38
                     : dt == OD_FLOAT32 ? 3.4028234663852886e38 : INFINITY;
        double d = od_value_as_double(v);
        overflow = isfinite(d) && fabs(d) > lim;
    } else {
        int bits = (int)od_dtype_size(dt) * 8;
        int64_t lo = dt == OD_UINT8 ? 0 : bits == 64 ? INT64_MIN : -((int64_t)1 << (bits - 1));
        int64_t hi = dt == OD_UINT8 ? 255 : bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
        if (v->tag == OD_T_DOUBLE) {
            double d = v->u.d;
            overflow = bits == 64 ? !(d >= -9223372036854775808.0 && d < 9223372036854775808.0)
                                  : !(d >= (double)lo && d <= (double)hi);
        } else {
            int64_t i = v->u.i;
            overflow = i > hi || i < (dt == OD_UINT8 ? -255 : lo);
        }
    }
    if (overflow)
        return od_error_set(err, OD_EINVAL, OD_MSG_SCALAR_OVERFLOW "%s without overflow", c_type_name(dt));
    return OD_OK;
}

od_status od_check_result_cast(od_dtype result, od_dtype out, od_error *err)
{
    if (od_dtype_can_cast(result, out))
        return OD_OK;
    return od_error_set(err, OD_EINVAL, "result type %s can't be cast to the desired output type %s",
                        od_dtype_scalar_name(result), od_dtype_scalar_name(out));
}

/* ---- binary arithmetic ---------------------------------------------------------- */

/* Which arguments are tensors: bit 0 = args[0], bit 1 = args[1]. */
static unsigned binary_tensor_mask(od_opid id)
{
    switch (id) {
    case OD_OPID_add_Scalar:
    case OD_OPID_sub_Scalar:
    case OD_OPID_mul_Scalar:
    case OD_OPID_div_Scalar:
    case OD_OPID_div_Scalar_mode:
    case OD_OPID_pow_Tensor_Scalar:
    case OD_OPID_eq_Scalar:
    case OD_OPID_ne_Scalar:
    case OD_OPID_lt_Scalar:
    case OD_OPID_le_Scalar:
    case OD_OPID_gt_Scalar:
    case OD_OPID_ge_Scalar:
        return 1u;
    case OD_OPID_pow_Scalar:
        return 2u;
    default:
        return 3u;
    }
}

static int binary_nargs(od_opid id)
{
    switch (id) {
    case OD_OPID_add_Tensor:
    case OD_OPID_add_Scalar:
    case OD_OPID_sub_Tensor:
    case OD_OPID_sub_Scalar:
    case OD_OPID_div_Tensor_mode:
    case OD_OPID_div_Scalar_mode:
        return 3;
    default:
        return 2;
    }
}

od_status od_div_rounding_mode(od_opid id, const od_stack *s, int *mode, od_error *err)
{
    *mode = OD_DIV_TRUE;
    if (id != OD_OPID_div_Tensor_mode && id != OD_OPID_div_Scalar_mode)
        return OD_OK;
    if (s->nargs < 3)
        return bad_arg(id, s, 2, "str or None", err);
    const od_value *v = &s->args[2];
    if (v->tag == OD_T_NONE)
        return OD_OK;
    if (v->tag != OD_T_STRING || !v->u.s)
        return bad_arg(id, s, 2, "str or None", err);
    if (!strcmp(v->u.s, "trunc"))
        *mode = OD_DIV_TRUNC;
    else if (!strcmp(v->u.s, "floor"))
        *mode = OD_DIV_FLOOR;
    else
        return od_error_set(err, OD_EINVAL,
                            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                            "found '%s'",
                            v->u.s);
    return OD_OK;
}

od_value od_add_alpha(od_opid id, const od_value *alpha, od_dtype dt)
{
    od_value a = *alpha;
    bool sub = id == OD_OPID_sub_Tensor || id == OD_OPID_sub_Scalar;
    if (sub && a.tag == OD_T_INT)
        a.u.i = (int64_t)(0u - (uint64_t)a.u.i); /* -(-2^63) wraps, like c10::Scalar's negation */
    else if (sub && a.tag == OD_T_DOUBLE)
        a.u.d = -a.u.d;
    if (dt == OD_BOOL && a.tag != OD_T_BOOL) /* bool arithmetic: alpha is a bool too */
        a = od_bool(od_value_as_double(&a) != 0);
    return a;
}

static bool is_add_sub(od_opid id)
{
    return id == OD_OPID_add_Tensor || id == OD_OPID_add_Scalar || id == OD_OPID_sub_Tensor ||
           id == OD_OPID_sub_Scalar;
}

od_status od_shape_binary(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_status st;
    unsigned tm = binary_tensor_mask(id);
    if ((st = need_nargs(id, s, binary_nargs(id), err)) ||
        (st = arg_operand(id, s, 0, tm & 1u, err)) || (st = arg_operand(id, s, 1, tm & 2u, err)))
        return st;
    static const int ab[2] = {0, 1};
    od_device dev;
    int64_t sizes[OD_MAX_DIMS];
    int ndim;
    const od_value *a = &s->args[0], *b = &s->args[1];
    /* sub's bool check and div's rounding mode come before ATen's
     * TensorIterator build (devices, broadcast); alpha's checks after it */
    bool is_div = id == OD_OPID_div_Tensor || id == OD_OPID_div_Scalar || id == OD_OPID_div_Tensor_mode ||
                  id == OD_OPID_div_Scalar_mode;
    int mode = OD_DIV_TRUE;
    if (id == OD_OPID_sub_Tensor || id == OD_OPID_sub_Scalar) {
        if (value_is_bool(a) && value_is_bool(b))
            return od_error_set(err, OD_EINVAL,
                                "Subtraction, the `-` operator, with two bool tensors is not "
                                "supported. Use the `^` or `logical_xor()` operator instead.");
        if (value_is_bool(a) || value_is_bool(b))
            return od_error_set(err, OD_EINVAL,
                                "Subtraction, the `-` operator, with a bool tensor is not "
                                "supported. If you are trying to invert a mask, use the `~` or "
                                "`logical_not()` operator instead.");
    } else if (is_div && (st = od_div_rounding_mode(id, s, &mode, err))) {
        return st;
    }
    if ((st = common_device(s, &dev, err)) || (st = broadcast_args(s, ab, 2, sizes, &ndim, err)))
        return st;
    od_dtype dt = result_type_of(s, ab, 2);

    if (is_add_sub(id)) {
        if ((st = arg_scalar(id, s, 2, err)))
            return st;
        const od_value *alpha = &s->args[2];
        if (alpha->tag == OD_T_BOOL && dt != OD_BOOL)
            return od_error_set(err, OD_EINVAL, OD_MSG_ALPHA_BOOL);
        if (alpha->tag == OD_T_DOUBLE && !od_dtype_is_floating(dt))
            return od_error_set(err, OD_EINVAL, OD_MSG_ALPHA_FLOAT);
        /* alpha is converted to the result dtype with c10's checks (other,
         * a wrapped number, is not: int8 + 300 wraps, alpha=300 raises);
         * sub checks the negated alpha it adds (int8 alpha=128 is fine). */
        od_value eff = od_add_alpha(id, alpha, dt);
        if ((st = od_scalar_check_fits(&eff, dt, err)))
            return st;
    } else if (is_div) {
        if (mode == OD_DIV_TRUE) {
            if (!od_dtype_is_floating(dt))
                dt = OD_DEFAULT_FLOAT;
        } else if (dt == OD_BOOL) {
            return od_error_set(err, OD_EUNSUPPORTED, "\"div_%s_%s\" not implemented for 'Bool'",
                                mode == OD_DIV_TRUNC ? "trunc" : "floor", dev.type == OD_DEV_CUDA ? "cuda" : "cpu");
        }
    } else if (id == OD_OPID_pow_Tensor_Tensor || id == OD_OPID_pow_Tensor_Scalar ||
               id == OD_OPID_pow_Scalar) {
        if (id == OD_OPID_pow_Tensor_Scalar && od_dtype_is_integral(a->u.t->dtype, true) &&
            b->tag == OD_T_INT && b->u.i < 0)
            return od_error_set(err, OD_EINVAL, "Integers to negative integer powers are not allowed.");
        if (dt == OD_BOOL)
            return not_implemented(id, dt, err);
        /* an integral or 16-bit result converts a Scalar exponent with c10's
         * checks (exp.to<c10::Half>()); float32/float64 take it as a double */
        if (id == OD_OPID_pow_Tensor_Scalar && dt != OD_FLOAT32 && dt != OD_FLOAT64 &&
            (st = od_scalar_check_fits(b, dt, err)))
            return st;
    }
    od_out_spec_init(&outs[0], dt, dev, sizes, ndim);
    *nouts = 1;
    return OD_OK;
}

/* ---- comparisons ------------------------------------------------------------------- */

od_status od_shape_compare(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts,
                           od_error *err)
{
    od_status st;
    unsigned tm = binary_tensor_mask(id);
    if ((st = need_nargs(id, s, 2, err)) || (st = arg_operand(id, s, 0, tm & 1u, err)) ||
        (st = arg_operand(id, s, 1, tm & 2u, err)))
        return st;
    static const int ab[2] = {0, 1};
    od_device dev;
    int64_t sizes[OD_MAX_DIMS];
    int ndim;
    if ((st = common_device(s, &dev, err)) || (st = broadcast_args(s, ab, 2, sizes, &ndim, err)))
        return st;
    od_out_spec_init(&outs[0], OD_BOOL, dev, sizes, ndim);
    *nouts = 1;
    return OD_OK;
}

/* ---- where ---------------------------------------------------------------------------- */

od_status od_shape_where(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_status st;
    bool self_t = id == OD_OPID_where_self || id == OD_OPID_where_ScalarOther;
    bool other_t = id == OD_OPID_where_self || id == OD_OPID_where_ScalarSelf;
    const od_tensor *cond = NULL;
    if ((st = need_nargs(id, s, 3, err)) || (st = arg_tensor(id, s, 0, &cond, err)) ||
        (st = arg_operand(id, s, 1, self_t, err)) || (st = arg_operand(id, s, 2, other_t, err)))
        return st;
    static const int all[3] = {0, 1, 2};
    od_dtype dt = result_type_of(s, all + 1, 2);
    /* Scalar branches are converted to the result dtype with c10's checks,
     * by the Scalar overloads' scalar_tensor before they call where.self */
    for (int i = 1; i <= 2; i++)
        if (s->args[i].tag != OD_T_TENSOR && (st = od_scalar_check_fits(&s->args[i], dt, err)))
            return st;
    if (cond->dtype != OD_BOOL && cond->dtype != OD_UINT8)
        return od_error_set(err, OD_EMISMATCH,
                            "where expected condition to be a boolean tensor, but got a tensor with "
                            "dtype %s",
                            od_dtype_scalar_name(cond->dtype));
    od_device dev;
    int64_t sizes[OD_MAX_DIMS];
    int ndim;
    if ((st = common_device(s, &dev, err)) || (st = broadcast_args(s, all, 3, sizes, &ndim, err)))
        return st;
    od_out_spec_init(&outs[0], dt, dev, sizes, ndim);
    *nouts = 1;
    return OD_OK;
}

/* ---- unary ------------------------------------------------------------------------------ */

od_status od_gelu_approximate(const od_stack *s, bool *tanh_form, od_error *err)
{
    const od_value *v = s->nargs > 1 ? &s->args[1] : NULL;
    *tanh_form = false;
    if (!v || v->tag != OD_T_STRING || !v->u.s)
        return bad_arg(OD_OPID_gelu, s, 1, "str", err);
    if (!strcmp(v->u.s, "tanh"))
        *tanh_form = true;
    else if (strcmp(v->u.s, "none"))
        return od_error_set(err, OD_EINVAL, OD_MSG_GELU_APPROXIMATE);
    return OD_OK;
}

od_status od_shape_unary(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_status st;
    const od_tensor *self = NULL;
    if ((st = need_nargs(id, s, id == OD_OPID_gelu ? 2 : 1, err)) ||
        (st = arg_tensor(id, s, 0, &self, err)))
        return st;
    od_dtype dt = self->dtype;
    switch (id) {
    case OD_OPID_neg:
        if (dt == OD_BOOL)
            return od_error_set(err, OD_EINVAL,
                                "Negation, the `-` operator, on a bool tensor is not supported. If "
                                "you are trying to invert a mask, use the `~` or `logical_not()` "
                                "operator instead.");
        break;
    case OD_OPID_abs:
        if (dt == OD_BOOL)
            return not_implemented(id, dt, err);
        break;
    case OD_OPID_relu:
        if (dt == OD_BOOL)
            return od_error_set(err, OD_EINVAL, "Boolean inputs not supported for relu");
        break;
    case OD_OPID_gelu: {
        bool tf;
        if ((st = od_gelu_approximate(s, &tf, err)))
            return st;
    }
        /* fall through */
    case OD_OPID_silu:
        if (!od_dtype_is_floating(dt))
            return not_implemented(id, dt, err);
        break;
    default: /* exp log sqrt rsqrt sin cos tanh sigmoid: integers compute in float */
        if (!od_dtype_is_floating(dt))
            dt = OD_DEFAULT_FLOAT;
        break;
    }
    od_out_spec_init(&outs[0], dt, self->device, self->sizes, self->ndim);
    *nouts = 1;
    return OD_OK;
}

/* ---- per-element operators declared by OD_EW1 / OD_EW2 (kernels/od_ew.h) ------------- */

static const struct {
    unsigned char arity;  /* 0: not a per-element operator */
    unsigned char rule;   /* od_ew_rule */
    unsigned char params; /* an OD_EWP operator: one tensor and parameters */
    const char *fn;       /* its od_math function */
} g_ew[OD_NUM_BUILTIN_OPS] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag)
#define OD_EW1(id, schema, fn, rule, ag) [OD_OPID_##id] = {1, OD_EWR_##rule, 0, #fn},
#define OD_EW2(id, schema, fn, rule, ag) [OD_OPID_##id] = {2, OD_EWR_##rule, 0, #fn},
#define OD_EWP(id, schema, fn, rule, ag) [OD_OPID_##id] = {1, OD_EWR_##rule, 1, #fn},
#include "ops.def"
#undef OD_OP
#undef OD_EW1
#undef OD_EW2
#undef OD_EWP
};

static const char *ew_fn(od_opid id)
{
    return (unsigned)id < OD_NUM_BUILTIN_OPS ? g_ew[id].fn : NULL;
}

od_ew_rule od_ew_rule_of(od_opid id)
{
    return (unsigned)id < OD_NUM_BUILTIN_OPS ? (od_ew_rule)g_ew[id].rule : OD_EWR_NONE;
}

int od_ew_arity(od_opid id)
{
    return (unsigned)id < OD_NUM_BUILTIN_OPS && !g_ew[id].params ? g_ew[id].arity : 0;
}

int od_ew_self_arg(od_opid id)
{
    if ((unsigned)id >= OD_NUM_BUILTIN_OPS || !g_ew[id].params)
        return -1;
    const od_op *op = od_builtin(id);
    for (int i = 0; op && i < od_op_schema(op)->nargs; i++)
        if (od_op_schema(op)->args[i].type->kind == OD_TY_TENSOR)
            return i;
    return -1;
}

/* An OD_EWP parameter: a number for Scalar and float, None too for float?,
 * an int for int. */
static od_status arg_param(od_opid id, const od_stack *s, int i, od_error *err)
{
    const od_type *ty = od_op_schema(od_builtin(id))->args[i].type;
    const od_value *v = &s->args[i];
    if (ty->kind == OD_TY_OPTIONAL) {
        if (v->tag == OD_T_NONE)
            return OD_OK;
        ty = ty->elem;
    }
    if (ty->kind == OD_TY_INT)
        return v->tag == OD_T_INT ? OD_OK : bad_arg(id, s, i, "int", err);
    if (ty->kind == OD_TY_FLOAT)
        return v->tag == OD_T_INT || v->tag == OD_T_DOUBLE ? OD_OK : bad_arg(id, s, i, "float", err);
    return arg_scalar(id, s, i, err);
}

/* c10's Scalar::to<scalar_t>() for a floating dt (a double through float
 * for the 16-bit types, as their constructors take a float). */
static double round_to_dtype(double v, od_dtype dt)
{
    switch (dt) {
    case OD_FLOAT32: return (double)(float)v;
    case OD_BFLOAT16: return (double)od_bf16_to_float(od_float_to_bf16((float)v));
    case OD_FLOAT16: return (double)od_half_to_float(od_float_to_half((float)v));
    default: return v;
    }
}

/* Parameter i as to<scalar_t>() for dt, checked as c10 checks it; the result
 * in *d (floating dt) or *iv (integer dt, truncated as C++ converts). */
static od_status param_to(const od_value *v, od_dtype dt, double *d, int64_t *iv, od_error *err)
{
    od_status st = od_scalar_check_fits(v, dt, err);
    if (st)
        return st;
    double x = od_value_as_double(v);
    *d = round_to_dtype(x, dt);
    int64_t i = v->tag == OD_T_INT ? v->u.i : v->tag == OD_T_BOOL ? (int64_t)v->u.b : od_double_to_i64(x);
    /* the dtype's value (uint8's -3 is 253); a double narrower than int64
     * converts through int32, as C++ on x86 does */
    if (v->tag == OD_T_DOUBLE && dt != OD_INT64)
        i = od_double_to_i32(x);
    *iv = od_int_wrap(i, dt);
    return OD_OK;
}

/* float's and double's largest finite value in dt, as std::numeric_limits. */
static double dtype_max(od_dtype dt)
{
    return dt == OD_FLOAT16 ? 65504.0 : dt == OD_BFLOAT16 ? 3.3895313892515355e38
         : dt == OD_FLOAT32 ? 3.4028234663852886e38 : 1.7976931348623157e308;
}

/* softshrink's meta function checks lambda before anything else */
/* polygamma's meta checks n before its build (and so before the dtype) */
static od_status polygamma_n(const od_value *n, od_error *err)
{
    if (n->tag == OD_T_INT && n->u.i < 0)
        return od_error_set(err, OD_EINVAL, "polygamma(n, x) does not support negative n.");
    return OD_OK;
}

static od_status softshrink_lambda(const od_value *v, od_error *err)
{
    double l = od_value_as_double(v);
    if (!(l >= 0))
        return od_error_set(err, OD_EINVAL, "lambda must be greater or equal to 0, but found to be %g.", l);
    return OD_OK;
}

od_status od_ew_params_of(od_opid id, const od_stack *s, od_dtype dt, od_ew_params *p, od_error *err)
{
    od_status st = OD_OK;
    memset(p, 0, sizeof *p);
    const od_value *a = s->args;
    bool flt = od_dtype_is_floating(dt);
    /* the activations' bfloat16 kernels that hold parameters as float (elu,
     * leaky_relu, softplus, softshrink; the others convert to bfloat16) */
    od_dtype as_float = dt == OD_BFLOAT16 ? OD_FLOAT32 : dt;
    switch (id) {
    case OD_OPID_hardtanh: {
        /* ATen's hardtanh: no bool; integer limits through toLong() (no
         * promotion), then clamp (NaN limits fill the result with NaN) */
        if (dt == OD_BOOL)
            return od_error_set(err, OD_EINVAL, "Bool inputs not supported for hardtanh");
        if (!flt) {
            for (int k = 0; k < 2; k++) {
                double unused;
                if ((st = param_to(&a[1 + k], OD_INT64, &unused, &p->i[k], err)))
                    return st;
            }
            if (dt == OD_UINT8 && (p->i[0] < 0 || p->i[1] < 0))
                return od_error_set(err, OD_EINVAL, "cannot do hardtanh on an unsigned type with negative limits");
            for (int k = 0; k < 2; k++) {
                od_value lim = od_int(p->i[k]);
                if ((st = od_scalar_check_fits(&lim, dt, err)))
                    return st;
            }
            return OD_OK;
        }
        double lo = od_value_as_double(&a[1]), hi = od_value_as_double(&a[2]);
        if (lo != lo || hi != hi) { /* even for float16, which has no clamp kernel */
            p->d[0] = p->d[1] = NAN;
            return OD_OK;
        }
        if (dt == OD_FLOAT16)
            return not_implemented(id, dt, err);
        for (int k = 0; k < 2 && !st; k++)
            st = param_to(&a[1 + k], dt, &p->d[k], &p->i[k], err);
        return st;
    }
    case OD_OPID_elu:
        for (int k = 0; k < 3 && !st; k++)
            st = param_to(&a[1 + k], as_float, &p->d[k], &p->i[k], err);
        return st;
    case OD_OPID_leaky_relu:
        return param_to(&a[1], as_float, &p->d[0], &p->i[0], err);
    case OD_OPID_softshrink:
        if ((st = softshrink_lambda(&a[1], err)))
            return st;
        return param_to(&a[1], as_float, &p->d[0], &p->i[0], err);
    case OD_OPID_hardshrink:
        return param_to(&a[1], dt, &p->d[0], &p->i[0], err);
    case OD_OPID_softplus:
    case OD_OPID_threshold:
        for (int k = 0; k < 2 && !st; k++)
            st = param_to(&a[1 + k], id == OD_OPID_softplus ? as_float : dt, &p->d[k], &p->i[k], err);
        return st;
    case OD_OPID_logit: {
        /* None is eps -1: the clamp to [-1, 2] changes no result; a NaN eps
         * (never true in a comparison) clamps nothing */
        od_value eps = a[1].tag == OD_T_NONE ? od_double(-1.0) : a[1];
        if ((st = param_to(&eps, dt, &p->d[0], &p->i[0], err)))
            return st;
        p->d[1] = round_to_dtype(1.0 - p->d[0], dt);
        return OD_OK;
    }
    case OD_OPID_nan_to_num:
        /* static_cast<scalar_t>, unchecked; integers are returned as they are */
        if (flt) {
            p->d[0] = a[1].tag == OD_T_NONE ? 0.0 : od_value_as_double(&a[1]);
            p->d[1] = a[2].tag == OD_T_NONE ? dtype_max(dt) : od_value_as_double(&a[2]);
            p->d[2] = a[3].tag == OD_T_NONE ? -dtype_max(dt) : od_value_as_double(&a[3]);
        }
        return OD_OK;
    case OD_OPID_bitwise_not:
        p->i[0] = dt == OD_BOOL ? 1 : -1;
        return OD_OK;
    case OD_OPID_round_decimals: {
        /* static_cast<scalar_t>(std::pow(10, |decimals|)) */
        int64_t dec = a[1].u.i;
        uint64_t mag = dec < 0 ? 0 - (uint64_t)dec : (uint64_t)dec;
        p->d[0] = round_to_dtype(pow(10.0, (double)mag), dt);
        p->d[1] = dec < 0;
        p->d[2] = dt == OD_BFLOAT16;
        return OD_OK;
    }
    case OD_OPID_polygamma:
        if ((st = polygamma_n(&a[0], err)))
            return st;
        /* digamma and trigamma for 0 and 1, else calc_polygamma(x, int n):
         * n truncated to 32 bits */
        p->i[0] = a[0].u.i;
        p->d[0] = a[0].u.i <= 1 ? (double)a[0].u.i : (double)(int32_t)(uint32_t)(uint64_t)a[0].u.i;
        p->d[1] = a[0].u.i <= 1 ? 0.0 : 1.0;
        return OD_OK;
    default:
        return od_error_set(err, OD_EINTERNAL, "%s has no per-element parameters", op_name(id));
    }
}

/* Whether schema argument i of id is a Tensor (else a Scalar). */
static bool arg_is_tensor(od_opid id, int i)
{
    const od_op *op = od_builtin(id);
    return op && i < od_op_schema(op)->nargs && od_op_schema(op)->args[i].type->kind == OD_TY_TENSOR;
}

/* Validates a per-element call and works out its compute and output dtypes
 * (the table in od_ew.h); the output shape is the inputs' broadcast. */
static od_status ew_dtypes(od_opid id, const od_stack *s, od_dtype *compute, od_dtype *out_dt,
                           od_device *dev, int64_t *sizes, int *ndim, od_error *err)
{
    int ab[2] = {0, 1};
    int n = g_ew[id].arity;
    od_ew_rule rule = (od_ew_rule)g_ew[id].rule;
    od_status st;
    if (n == 0)
        return od_error_set(err, OD_EINTERNAL, "%s is not a per-element operator", op_name(id));
    if (g_ew[id].params) {
        int nargs = od_op_schema(od_builtin(id))->nargs;
        ab[0] = od_ew_self_arg(id);
        if ((st = need_nargs(id, s, nargs, err)))
            return st;
        for (int i = 0; i < nargs; i++)
            if ((st = i == ab[0] ? arg_operand(id, s, i, true, err) : arg_param(id, s, i, err)))
                return st;
        if (id == OD_OPID_hardtanh && s->args[ab[0]].u.t->dtype == OD_BOOL)
            return od_error_set(err, OD_EINVAL, "Bool inputs not supported for hardtanh");
        if (id == OD_OPID_polygamma && (st = polygamma_n(&s->args[0], err)))
            return st;
        if (id == OD_OPID_softshrink && (st = softshrink_lambda(&s->args[1], err)))
            return st;
    } else {
        if ((st = need_nargs(id, s, n, err)))
            return st;
        for (int i = 0; i < n; i++)
            if ((st = arg_operand(id, s, i, arg_is_tensor(id, i), err)))
                return st;
    }
    /* heaviside's meta checks the dtypes before its build (devices, broadcast) */
    if (rule == OD_EWR_SAME && n == 2 && s->args[0].tag == OD_T_TENSOR && s->args[1].tag == OD_T_TENSOR &&
        s->args[0].u.t->dtype != s->args[1].u.t->dtype)
        return od_error_set(err, OD_EINVAL, "%s is not yet implemented for tensors with different dtypes.",
                            op_name(id));
    if ((st = common_device(s, dev, err)) || (st = broadcast_args(s, ab, n, sizes, ndim, err)))
        return st;
    od_dtype dt = result_type_of(s, ab, n);
    /* LOGICAL computes in result_type too, as ATen's comparison_op does: a
     * 0-dim int32 65536 and an int16 tensor read as int16 0, false. */
    bool flt = od_dtype_is_floating(dt);
    if ((rule == OD_EWR_FLOAT_NOHALF || rule == OD_EWR_FLOAT_ONLY_NOHALF || rule == OD_EWR_NUMERIC_NOHALF) &&
        dt == OD_FLOAT16)
        return not_implemented_s(id, s, dt, err);
    switch (rule) {
    case OD_EWR_FLOAT:
    case OD_EWR_FLOAT_NOHALF:
        if (!flt)
            dt = OD_DEFAULT_FLOAT;
        break;
    case OD_EWR_FLOAT_ONLY:
    case OD_EWR_FLOAT_ONLY_NOHALF:
        if (!flt)
            return not_implemented_s(id, s, dt, err);
        break;
    case OD_EWR_NUMERIC:
    case OD_EWR_NUMERIC_NOHALF:
    case OD_EWR_INT_DIV:
        if (dt == OD_BOOL)
            return not_implemented(id, dt, err);
        break;
    case OD_EWR_BITWISE:
        if (flt)
            return not_implemented(id, dt, err);
        break;
    case OD_EWR_INT:
        if (flt || dt == OD_BOOL)
            return not_implemented(id, dt, err);
        break;
    default:
        break;
    }
    if (g_ew[id].params) {
        od_ew_params p;
        if ((st = od_ew_params_of(id, s, dt, &p, err)))
            return st;
    }
    *compute = dt;
    *out_dt = rule == OD_EWR_LOGICAL ? OD_BOOL : dt;
    return OD_OK;
}

od_status od_shape_ew(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_dtype compute, out_dt;
    od_device dev;
    int64_t sizes[OD_MAX_DIMS];
    int ndim;
    od_status st = ew_dtypes(id, s, &compute, &out_dt, &dev, sizes, &ndim, err);
    if (st)
        return st;
    od_out_spec_init(&outs[0], out_dt, dev, sizes, ndim);
    *nouts = 1;
    return OD_OK;
}

/* ---- clamp --------------------------------------------------------------------------------- */

bool od_clamp_fills_nan(od_opid id, const od_stack *s)
{
    if (id != OD_OPID_clamp || s->nargs < 3 || s->args[1].tag == OD_T_NONE || s->args[2].tag == OD_T_NONE)
        return false;
    for (int i = 1; i < 3; i++)
        if (s->args[i].tag == OD_T_DOUBLE && isnan(s->args[i].u.d))
            return true;
    return false;
}

od_status od_shape_clamp(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_status st;
    const od_tensor *self = NULL;
    if ((st = need_nargs(id, s, 3, err)) || (st = arg_tensor(id, s, 0, &self, err)))
        return st;
    bool tensors = id == OD_OPID_clamp_Tensor;
    for (int i = 1; i < 3; i++) {
        if (s->args[i].tag == OD_T_NONE)
            continue;
        if ((st = arg_operand(id, s, i, tensors, err)))
            return st;
    }
    if (s->args[1].tag == OD_T_NONE && s->args[2].tag == OD_T_NONE)
        return od_error_set(err, OD_EINVAL,
                            "torch.clamp: At least one of 'min' or 'max' must not be None");
    static const int all[3] = {0, 1, 2};
    od_device dev;
    int64_t sizes[OD_MAX_DIMS];
    int ndim;
    if ((st = common_device(s, &dev, err)) || (st = broadcast_args(s, all, 3, sizes, &ndim, err)))
        return st;
    /* Scalar bounds promote only a non-floating self (torch 1.13's manual
     * promotion); tensor bounds always take part. */
    od_dtype dt = (!tensors && od_dtype_is_floating(self->dtype)) ? self->dtype
                                                                  : result_type_of(s, all, 3);
    /* bool: torch 1.13 has clamp_min and clamp_max kernels for it (one
     * tensor bound), not clamp's (both). */
    bool lo = s->args[1].tag != OD_T_NONE, hi = s->args[2].tag != OD_T_NONE;
    if (dt == OD_BOOL && !tensors) /* ATen's Scalar kernels, each its own dispatch name */
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for 'Bool'",
                            lo && hi ? "clamp_scalar_cpu" : lo ? "clamp_min_cpu" : "clamp_max_scalar_cpu");
    if (dt == OD_BOOL && lo && hi)
        return not_implemented(id, dt, err);
    /* Scalar bounds are converted to the result dtype with c10's checks,
     * except where a NaN bound makes ATen fill the output with NaN. */
    bool fills_nan = od_clamp_fills_nan(id, s);
    for (int i = 1; !tensors && !fills_nan && i < 3; i++)
        if (s->args[i].tag != OD_T_NONE && (st = od_scalar_check_fits(&s->args[i], dt, err)))
            return st;
    od_out_spec_init(&outs[0], dt, dev, sizes, ndim);
    *nouts = 1;
    return OD_OK;
}

/* ---- lerp, addcmul, addcdiv, nextafter --------------------------------------------------- */

od_status od_shape_pointwise(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    static const int all[3] = {0, 1, 2};
    bool lerp = id == OD_OPID_lerp_Scalar || id == OD_OPID_lerp_Tensor;
    bool addc = id == OD_OPID_addcmul || id == OD_OPID_addcdiv;
    int nargs = addc ? 4 : lerp ? 3 : 2;
    int ntensors = id == OD_OPID_lerp_Scalar || id == OD_OPID_nextafter ? 2 : 3;
    od_status st;
    if ((st = need_nargs(id, s, nargs, err)))
        return st;
    for (int i = 0; i < nargs; i++)
        if ((st = arg_operand(id, s, i, i < ntensors, err)))
            return st;
    const od_tensor *self = s->args[0].u.t;
    /* the meta functions' own checks come before the iterator's device and
     * broadcast: lerp takes no promotion (end and weight must have self's
     * dtype), addcdiv refuses an integer division */
    for (int i = 1; lerp && i < ntensors; i++)
        if (s->args[i].u.t->dtype != self->dtype)
            return od_error_set(err, OD_EINVAL, "expected dtype %s for `%s` but got dtype %s",
                                od_dtype_meta_name(self->dtype), i == 1 ? "end" : "weight",
                                od_dtype_meta_name(s->args[i].u.t->dtype));
    if (id == OD_OPID_addcdiv && od_dtype_is_integral(s->args[1].u.t->dtype, true) &&
        od_dtype_is_integral(s->args[2].u.t->dtype, true))
        return od_error_set(err, OD_EINVAL,
                            "Integer division with addcdiv is no longer supported, and in a future  "
                            "release addcdiv will perform a true division of tensor1 and tensor2. The "
                            "historic addcdiv behavior can be implemented as (input + value * "
                            "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
                            "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv "
                            "behavior is just the latter implementation: (input + value * tensor1 / "
                            "tensor2), for all dtypes.");
    od_device dev;
    int64_t sizes[OD_MAX_DIMS];
    int ndim;
    if ((st = common_device(s, &dev, err)) || (st = broadcast_args(s, all, ntensors, sizes, &ndim, err)))
        return st;
    od_dtype dt = result_type_of(s, all, ntensors);
    /* ATen's CPU dispatch: floating types and bfloat16 (addcmul: integers
     * too), no float16; CUDA has float16 (not for nextafter, whose CUDA
     * kernel has float and double only) */
    bool cuda = dev.type == OD_DEV_CUDA;
    bool ok = dt == OD_FLOAT32 || dt == OD_FLOAT64 || (dt == OD_BFLOAT16 && !(cuda && id == OD_OPID_nextafter)) ||
              (dt == OD_FLOAT16 && cuda && id != OD_OPID_nextafter) ||
              (id == OD_OPID_addcmul && dt != OD_BOOL && !od_dtype_is_floating(dt));
    if (!ok) {
        const char *k = id == OD_OPID_lerp_Scalar ? "lerp_kernel_scalar"
                        : id == OD_OPID_lerp_Tensor ? "lerp_kernel_tensor"
                        : id == OD_OPID_addcmul     ? (cuda ? "addcmul_cuda" : "addcmul_cpu_out")
                        : id == OD_OPID_addcdiv     ? (cuda ? "addcdiv_cuda" : "addcdiv_cpu_out")
                                                    : (cuda ? "nextafter_cuda" : "nextafter_cpu");
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'", k, od_dtype_scalar_name(dt));
    }
    /* value.to<scalar_t>() (bfloat16 and half: to<opmath_t>, float), lerp's
     * weight.to<opmath_t>(): c10's range checks, which torch 1.13 makes for
     * an empty result too */
    od_dtype vdt = dt == OD_BFLOAT16 || dt == OD_FLOAT16 ? OD_FLOAT32 : dt;
    if (addc && (st = od_scalar_check_fits(&s->args[nargs - 1], vdt, err)))
        return st;
    if (id == OD_OPID_lerp_Scalar &&
        (st = od_scalar_check_fits(&s->args[2], dt == OD_FLOAT64 ? OD_FLOAT64 : OD_FLOAT32, err)))
        return st;
    od_out_spec_init(&outs[0], dt, dev, sizes, ndim);
    *nouts = 1;
    return OD_OK;
}

/* ---- equal ----------------------------------------------------------------------------------- */

/* equal returns a bool read from the data: Meta has no answer (as in torch),
 * so this validates and refuses. */
od_status od_shape_equal(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    (void)outs;
    (void)nouts;
    const od_tensor *a = NULL, *b = NULL;
    od_status st;
    if ((st = need_nargs(id, s, 2, err)) || (st = arg_tensor(id, s, 0, &a, err)) || (st = arg_tensor(id, s, 1, &b, err)))
        return st;
    return od_error_set(err, OD_ENOKERNEL,
                        "Could not run 'aten::equal' with arguments from the 'Meta' backend: its result is read "
                        "from the data");
}

/* ---- isin ------------------------------------------------------------------------------------ */

od_status od_shape_isin(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_status st;
    if ((st = need_nargs(id, s, 4, err)))
        return st;
    bool et = id != OD_OPID_isin_Scalar_Tensor, tt = id != OD_OPID_isin_Tensor_Scalar;
    if ((st = arg_operand(id, s, 0, et, err)) || (st = arg_operand(id, s, 1, tt, err)))
        return st;
    for (int i = 2; i < 4; i++)
        if (s->args[i].tag != OD_T_BOOL)
            return bad_arg(id, s, i, "bool", err);
    /* check_for_unsupported_isin_dtype, elements first */
    for (int i = 0; i < 2; i++) {
        const od_value *v = &s->args[i];
        od_dtype dt = v->tag == OD_T_TENSOR ? v->u.t->dtype : v->tag == OD_T_BOOL ? OD_BOOL
                      : v->tag == OD_T_INT ? OD_INT64 : OD_FLOAT64;
        if (dt == OD_BOOL || dt == OD_BFLOAT16)
            return od_error_set(err, OD_EINVAL, "Unsupported input type encountered for isin(): %s",
                                od_dtype_scalar_name(dt));
    }
    od_device dev;
    if ((st = common_device(s, &dev, err)))
        return st;
    const od_tensor *e = et ? s->args[0].u.t : NULL;
    od_out_spec_init(&outs[0], OD_BOOL, dev, e ? e->sizes : NULL, e ? e->ndim : 0);
    *nouts = 1;
    return OD_OK;
}

od_status od_isin_plan_of(od_opid id, const od_stack *s, bool cpu, od_isin_plan *p, od_error *err)
{
    od_out_spec spec;
    int nouts = 0;
    od_status st = od_shape_isin(id, s, &spec, &nouts, err);
    if (st)
        return st;
    const od_value *ev = &s->args[0], *tv = &s->args[1];
    const od_tensor *e = ev->tag == OD_T_TENSOR ? ev->u.t : NULL, *t = tv->tag == OD_T_TENSOR ? tv->u.t : NULL;
    /* a Scalar is a wrapped number: int64 or float64, 0-dim */
    od_dtype edt = e ? e->dtype : ev->tag == OD_T_INT ? OD_INT64 : OD_FLOAT64;
    od_dtype tdt = t ? t->dtype : tv->tag == OD_T_INT ? OD_INT64 : OD_FLOAT64;
    memset(p, 0, sizeof *p);
    p->n = e ? od_tensor_numel(e) : 1;
    p->m = t ? od_tensor_numel(t) : 1;
    p->invert = s->args[3].u.b;
    od_result_arg ra[2] = {od_result_arg_of_value(ev), od_result_arg_of_value(tv)};
    p->common = od_result_type(ra, 2);
    if (p->n == 0 || id == OD_OPID_isin_Tensor_Scalar) /* eq / ne against the number */
        return OD_OK;
    bool assume_unique = s->args[2].u.b;
    bool small = p->m < (int64_t)(10.0f * pow((double)p->n, 0.145));
    if (!small && !assume_unique && (edt == OD_FLOAT16 || tdt == OD_FLOAT16))
        return od_error_set(err, OD_EUNSUPPORTED, "\"unique\" not implemented for 'Half'");
    if (!small) /* the sorting path compares in cat's dtype: the ravelled inputs' promotion */
        p->common = od_promote_types(edt, tdt);
    if (cpu && small && p->common == OD_FLOAT16)
        return od_error_set(err, OD_EUNSUPPORTED, "\"isin_default_cpu\" not implemented for 'Half'");
    /* the brute-force kernel takes test_elements.to(common_type).view(-1):
     * to() keeps a dense layout's strides (or returns t itself), and view
     * refuses what such strides cannot flatten */
    if (small && t && (t->dtype == p->common || od_tensor_is_non_overlapping_and_dense(t))) {
        od_tensor *flat = NULL;
        int64_t all = p->m;
        if ((st = od_tensor_view((od_tensor *)t, &all, 1, &flat, err)))
            return st;
        od_tensor_release(flat);
    }
    p->replay = !small && assume_unique;
    return OD_OK;
}

/* ---- common dtype of the computation --------------------------------------------------- */

od_status od_elementwise_common_dtype(od_opid id, const od_stack *s, od_dtype *out, od_error *err)
{
    od_out_spec spec[1];
    int n = 0;
    od_shape_fn fn = NULL;
    switch (id) {
    case OD_OPID_eq_Tensor: case OD_OPID_eq_Scalar: case OD_OPID_ne_Tensor: case OD_OPID_ne_Scalar:
    case OD_OPID_lt_Tensor: case OD_OPID_lt_Scalar: case OD_OPID_le_Tensor: case OD_OPID_le_Scalar:
    case OD_OPID_gt_Tensor: case OD_OPID_gt_Scalar: case OD_OPID_ge_Tensor: case OD_OPID_ge_Scalar: {
        od_status st = od_shape_compare(id, s, spec, &n, err);
        if (st)
            return st;
        static const int ab[2] = {0, 1};
        *out = result_type_of(s, ab, 2);
        return OD_OK;
    }
    default:
        if (od_ew_rule_of(id) != OD_EWR_NONE) {
            od_dtype out_dt;
            od_device dev;
            int64_t sizes[OD_MAX_DIMS];
            int ndim;
            return ew_dtypes(id, s, out, &out_dt, &dev, sizes, &ndim, err);
        }
        fn = od_builtin_shape_fn(id);
        break;
    }
    if (!fn)
        return od_error_set(err, OD_EINTERNAL, "%s has no shape function", op_name(id));
    od_status st = fn(id, s, spec, &n, err);
    if (st)
        return st;
    *out = spec[0].dtype;
    return OD_OK;
}

/* ---- clone, copy_, fill_ ---------------------------------------------------------------------- */

static od_status arg_memory_format(od_opid id, const od_stack *s, int i, od_memory_format *mf, od_error *err)
{
    int code = od_memory_format_of_value(&s->args[i]);
    if (code == -2)
        return bad_arg(id, s, i, "torch.memory_format or None", err);
    if (code == -1)
        return od_error_set(err, OD_EINVAL, "%s(): argument '%s' (position %d): unknown memory format",
                            op_name(id), arg_name(id, i), i + 1);
    *mf = (od_memory_format)code;
    return OD_OK;
}

od_status od_shape_same(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_status st;
    const od_tensor *self = NULL;
    od_memory_format mf;
    if ((st = need_nargs(id, s, 2, err)) || (st = arg_tensor(id, s, 0, &self, err)) ||
        (st = arg_memory_format(id, s, 1, &mf, err)))
        return st;
    od_out_spec_init(&outs[0], self->dtype, self->device, self->sizes, self->ndim);
    if ((st = od_out_spec_layout(&outs[0], self, mf, err)))
        return st;
    *nouts = 1;
    return OD_OK;
}

od_status od_shape_inplace(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts,
                           od_error *err)
{
    od_status st;
    const od_tensor *self = NULL;
    if (id == OD_OPID_copy_) {
        const od_tensor *src = NULL;
        if ((st = need_nargs(id, s, 3, err)) || (st = arg_tensor(id, s, 0, &self, err)) ||
            (st = arg_tensor(id, s, 1, &src, err)))
            return st;
        if (s->args[2].tag != OD_T_BOOL)
            return bad_arg(id, s, 2, "bool", err);
        /* ATen's copy_ is a TensorIterator: it asserts no internal overlap in
         * self (whatever the device), then src must broadcast to self's shape */
        for (int d = 0; d < self->ndim && od_tensor_numel(self) > 0; d++)
            if (self->sizes[d] > 1 && self->strides[d] == 0)
                return od_error_set(err, OD_EINVAL,
                                    "unsupported operation: more than one element of the written-to "
                                    "tensor refers to a single memory location. Please clone() the "
                                    "tensor before performing the operation.");
        if ((st = od_broadcast_into(self->sizes, self->ndim, src->sizes, src->ndim, err)))
            return st;
    } else if (id == OD_OPID_fill__Scalar) {
        if ((st = need_nargs(id, s, 2, err)) || (st = arg_tensor(id, s, 0, &self, err)) ||
            (st = arg_scalar(id, s, 1, err)) ||
            (st = od_scalar_check_fits(&s->args[1], self->dtype, err)))
            return st;
    } else {
        return od_error_set(err, OD_EINTERNAL, "od_shape_inplace: unexpected operator %s",
                            op_name(id));
    }
    od_out_spec_init(&outs[0], self->dtype, self->device, self->sizes, self->ndim);
    outs[0].alias_of = 0;
    *nouts = 1;
    return OD_OK;
}

/* ---- factories ----------------------------------------------------------------------------- */

/* dtype? layout? device? pin_memory? starting at argument k. */
static od_status factory_options(od_opid id, const od_stack *s, int k, bool *has_dt, od_dtype *dt,
                                 od_device *dev, od_error *err)
{
    const od_value *v = &s->args[k];
    *has_dt = false;
    if (v->tag == OD_T_DTYPE && (unsigned)v->u.dtype < OD_NUM_DTYPES) {
        *has_dt = true;
        *dt = v->u.dtype;
    } else if (v->tag == OD_T_STRING && v->u.s) {
        *dt = od_dtype_from_name(v->u.s);
        if (*dt == OD_NUM_DTYPES)
            return od_error_set(err, OD_EINVAL, "%s(): argument '%s' (position %d): unknown dtype '%s'",
                                op_name(id), arg_name(id, k), k + 1, v->u.s);
        *has_dt = true;
    } else if (v->tag != OD_T_NONE) {
        return bad_arg(id, s, k, "torch.dtype or None", err);
    }
    v = &s->args[k + 1];
    if (!(v->tag == OD_T_NONE || (v->tag == OD_T_INT && v->u.i == 0) ||
          (v->tag == OD_T_STRING && v->u.s &&
           (!strcmp(v->u.s, "strided") || !strcmp(v->u.s, "torch.strided"))))) {
        if (v->tag == OD_T_INT || v->tag == OD_T_STRING)
            return od_error_set(err, OD_EUNSUPPORTED,
                                "%s(): argument '%s' (position %d): only the strided layout "
                                "(torch.strided) is supported",
                                op_name(id), arg_name(id, k + 1), k + 2);
        return bad_arg(id, s, k + 1, "torch.layout or None", err);
    }
    v = &s->args[k + 2];
    dev->type = OD_DEV_CPU;
    dev->index = 0;
    if (v->tag == OD_T_DEVICE && (unsigned)v->u.device.type < OD_NUM_DEVICE_TYPES) {
        *dev = v->u.device;
    } else if (v->tag == OD_T_STRING && v->u.s) {
        od_status st = od_device_parse(v->u.s, dev, err);
        if (st) {
            od_error_prefix(err, "%s(): argument '%s' (position %d)", op_name(id), arg_name(id, k + 2),
                            k + 3);
            return st;
        }
    } else if (v->tag != OD_T_NONE) {
        return bad_arg(id, s, k + 2, "torch.device or None", err);
    }
    v = &s->args[k + 3];
    if (v->tag != OD_T_NONE && v->tag != OD_T_BOOL)
        return bad_arg(id, s, k + 3, "bool or None", err);
    if (v->tag == OD_T_BOOL && v->u.b)
        return od_error_set(err, OD_EUNSUPPORTED,
                            "%s(): pinned memory is not supported; pass pin_memory=False or None",
                            op_name(id));
    return OD_OK;
}

od_status od_factory_options(od_opid id, const od_stack *s, int k, bool *has_dt, od_dtype *dt,
                             od_device *dev, od_error *err)
{
    return factory_options(id, s, k, has_dt, dt, dev, err);
}

od_status od_shape_factory(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts,
                           od_error *err)
{
    od_status st;
    int k = id == OD_OPID_full ? 2 : 1;
    int nargs = k + 4 + (id == OD_OPID_empty_memory_format);
    if ((st = need_nargs(id, s, nargs, err)))
        return st;
    const od_value *size = &s->args[0];
    if (size->tag != OD_T_INT_LIST)
        return bad_arg(id, s, 0, "tuple of ints", err);
    const int64_t *sz = size->u.list.items;
    size_t n = size->u.list.n;
    if (n > OD_MAX_DIMS)
        return od_error_set(err, OD_ETOOLARGE, "%s(): %zu dimensions requested; at most %d are supported",
                            op_name(id), n, OD_MAX_DIMS);
    int64_t numel = 1;
    for (size_t i = 0; i < n; i++) {
        if (sz[i] < 0) {
            char buf[256];
            od_shape_print(sz, (int)n, buf, sizeof buf);
            return od_error_set(err, OD_EINVAL, "Trying to create tensor with negative dimension %" PRId64
                                ": %s", sz[i], buf);
        }
        if (sz[i] != 0 && numel > INT64_MAX / sz[i])
            return od_error_set(err, OD_ETOOLARGE, "%s(): the number of elements overflows int64",
                                op_name(id));
        numel *= sz[i];
    }
    bool has_dt;
    od_dtype dt = OD_DEFAULT_FLOAT;
    od_device dev;
    if ((st = factory_options(id, s, k, &has_dt, &dt, &dev, err)))
        return st;
    od_memory_format mf = OD_MF_CONTIGUOUS;
    if (id == OD_OPID_empty_memory_format && s->args[k + 4].tag != OD_T_NONE) {
        if ((st = arg_memory_format(id, s, k + 4, &mf, err)))
            return st;
        if (mf == OD_MF_PRESERVE) /* nothing to preserve */
            return od_error_set(err, OD_EINVAL, "unsupported memory format Preserve");
    }
    if (id == OD_OPID_full) {
        if ((st = arg_scalar(id, s, 1, err)))
            return st;
        if (!has_dt) /* torch.full infers the dtype from fill_value */
            dt = s->args[1].tag == OD_T_BOOL ? OD_BOOL
                 : s->args[1].tag == OD_T_INT ? OD_INT64 : OD_DEFAULT_FLOAT;
        if ((st = od_scalar_check_fits(&s->args[1], dt, err)))
            return st;
    } else if (!has_dt) {
        dt = OD_DEFAULT_FLOAT;
    }
    if ((id == OD_OPID_rand || id == OD_OPID_randn) && !od_dtype_is_floating(dt))
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'",
                            id == OD_OPID_rand ? "check_uniform_bounds" : "normal_kernel_cpu",
                            od_dtype_scalar_name(dt));
    od_out_spec_init(&outs[0], dt, dev, sz, (int)n);
    if ((st = od_out_spec_layout(&outs[0], NULL, mf, err)))
        return st;
    *nouts = 1;
    return OD_OK;
}

/* ---- arange ---------------------------------------------------------------------------------- */

static int64_t value_to_i64(const od_value *v)
{
    return v->tag == OD_T_INT ? v->u.i : v->tag == OD_T_BOOL ? (int64_t)v->u.b : od_double_to_i64(v->u.d);
}

od_status od_arange_params_of(od_opid id, const od_stack *s, od_arange_params *p, od_error *err)
{
    od_status st;
    int nsc = id == OD_OPID_arange ? 1 : id == OD_OPID_arange_start ? 2 : 3;
    if ((st = need_nargs(id, s, nsc + 4, err)))
        return st;
    for (int i = 0; i < nsc; i++)
        if ((st = arg_scalar(id, s, i, err)))
            return st;
    od_value zero = od_int(0), one = od_int(1);
    const od_value *start = nsc == 1 ? &zero : &s->args[0];
    const od_value *end = nsc == 1 ? &s->args[0] : &s->args[1];
    const od_value *step = nsc == 3 ? &s->args[2] : &one;
    bool has_dt;
    od_dtype dt = OD_DEFAULT_FLOAT;
    if ((st = factory_options(id, s, nsc, &has_dt, &dt, &p->device, err)))
        return st;
    if (!has_dt) /* int64 when every bound is an integer (bools count), else float */
        dt = (start->tag != OD_T_DOUBLE && end->tag != OD_T_DOUBLE && step->tag != OD_T_DOUBLE)
                 ? OD_INT64 : OD_DEFAULT_FLOAT;
    if (dt == OD_BOOL)
        return od_error_set(err, OD_EUNSUPPORTED, "\"arange_cpu\" not implemented for 'Bool'");
    p->dtype = dt;
    p->integral = !od_dtype_is_floating(dt);
    double size_d;
    if (p->integral) {
        /* ATen computes integer ranges in int64 (Scalar::to<int64_t> is checked). */
        if ((st = od_scalar_check_fits(start, OD_INT64, err)) ||
            (st = od_scalar_check_fits(end, OD_INT64, err)) ||
            (st = od_scalar_check_fits(step, OD_INT64, err)))
            return st;
        int64_t xs = value_to_i64(start), xe = value_to_i64(end), xst = value_to_i64(step);
        if (xst == 0)
            return od_error_set(err, OD_EINVAL, "step must be nonzero");
        if (!((xst > 0 && xe >= xs) || (xst < 0 && xe <= xs)))
            return od_error_set(err, OD_EINVAL, "upper bound and larger bound inconsistent with step sign");
        if (dt == OD_INT64) {
            /* ATen's int64 (end - start + step - sgn) / step, wrapping as it
             * does at the extremes (arange(INT64_MIN, 256, INT64_MAX) is
             * empty in torch 1.13) */
            uint64_t sgn = xst > 0 ? 1u : (uint64_t)-1;
            int64_t num = (int64_t)((uint64_t)xe - (uint64_t)xs + (uint64_t)xst - sgn);
            size_d = num == INT64_MIN && xst == -1 ? 9.3e18 : (double)(num / xst);
        } else {
            size_d = ceil((od_value_as_double(end) - od_value_as_double(start)) /
                          od_value_as_double(step));
        }
        p->istart = xs;
        p->istep = xst;
        p->fstart = (double)xs;
        p->fstep = (double)xst;
    } else {
        /* float16 and bfloat16 take their bounds as float, their accumulate type (checked) */
        if ((dt == OD_FLOAT16 || dt == OD_BFLOAT16) &&
            ((st = od_scalar_check_fits(start, OD_FLOAT32, err)) || (st = od_scalar_check_fits(end, OD_FLOAT32, err)) ||
             (st = od_scalar_check_fits(step, OD_FLOAT32, err))))
            return st;
        double xs = od_value_as_double(start), xe = od_value_as_double(end),
               xst = od_value_as_double(step);
        size_d = ceil((xe - xs) / xst);
        if (!(xst > 0 || xst < 0))
            return od_error_set(err, OD_EINVAL, "step must be nonzero");
        if (!isfinite(xs) || !isfinite(xe))
            return od_error_set(err, OD_EINVAL, "unsupported range: %g -> %g", xs, xe);
        if (!((xst > 0 && xe >= xs) || (xst < 0 && xe <= xs)))
            return od_error_set(err, OD_EINVAL, "upper bound and larger bound inconsistent with step sign");
        p->fstart = xs;
        p->fstep = xst;
        p->istart = 0;
        p->istep = 0;
    }
    if (!(size_d >= 0 && size_d < 9.2233720368547758e18)) /* 2^63 itself does not fit */
        return od_error_set(err, OD_EINVAL, "invalid size, possible overflow?");
    p->size = (int64_t)size_d;
    return OD_OK;
}

od_status od_shape_arange(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_arange_params p;
    od_status st = od_arange_params_of(id, s, &p, err);
    if (st)
        return st;
    od_out_spec_init(&outs[0], p.dtype, p.device, &p.size, 1);
    *nouts = 1;
    return OD_OK;
}
