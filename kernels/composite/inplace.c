/* inplace.c — the in-place variants declared by ops.def's OD_INPLACE lines
 * (add_.Tensor, sqrt_, clamp_, ...): the out-of-place operator of the same
 * arguments, then copy_ of its result into self.
 *
 * Invariants: self keeps its dtype, shape and storage. Refusals come in
 * ATen's order: the operator's meta checks, then its TensorIterator build's
 * (an overlapping self; the result must have self's shape, it may not
 * broadcast self; its dtype must cast to self's: no float into an integer,
 * nothing into bool), then what its kernel refuses. Both operators are reached through the dispatcher, so Autograd
 * records the operator and copy_ (CopyBackwards, and the leaf check of an
 * in-place write), a mode sees both, and the same kernel serves CPU, CUDA and
 * Meta. self is returned, retained once.
 */
#include <string.h>

#include "composite.h"
#include "od_shape.h" /* od_dtype_meta_name */

/* In-place id -> its out-of-place operator's id, plus one (0: not in-place). */
static const int g_functional[OD_NUM_BUILTIN_OPS] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag)
#define OD_INPLACE(id, schema, functional) [OD_OPID_##id] = (int)OD_OPID_##functional + 1,
#include "ops.def"
#undef OD_INPLACE
#undef OD_OP
};

/* A structured in-place kernel with a dtype argument (cumsum_, cumprod_)
 * computes in self's dtype: ATen refuses another one, and None means self's
 * (so cumsum_ of a bool tensor is refused as cumsum(dtype=bool) is, not
 * computed in int64). Returns the argument's index in *at, -1 for none. */
static od_status dtype_arg(const od_op *op, const od_stack *s, const od_tensor *self, int *at, od_error *err)
{
    const od_schema *sch = od_op_schema(op);
    *at = -1;
    for (int i = 0; sch && i < sch->nargs && i < s->nargs; i++) {
        const od_value *v = &s->args[i];
        if (!sch->args[i].name || strcmp(sch->args[i].name, "dtype"))
            continue;
        for (int j = 0; j < sch->nargs && j < s->nargs; j++) { /* their meta wraps dim first */
            int w;
            od_status st;
            if (sch->args[j].name && !strcmp(sch->args[j].name, "dim") && s->args[j].tag == OD_T_INT &&
                (st = od_wrap_dim(s->args[j].u.i, self->ndim, &w, err)))
                return st;
        }
        if (v->tag == OD_T_DTYPE && v->u.dtype != self->dtype)
            return od_error_set(err, OD_EMISMATCH,
                                "Bad in-place call: input tensor dtype %s and output tensor dtype %s should match",
                                od_dtype_meta_name(self->dtype), od_dtype_meta_name(v->u.dtype));
        *at = i;
    }
    return OD_OK;
}

/* The promoted dtype of the iterator's inputs of functional operator fid:
 * its tensors and its number operands (a Scalar `other`, clamp's bounds; not
 * alpha or an activation's parameters); false when there is no tensor. */
static bool result_type(od_opid fid, const od_value *args, int n, od_dtype *out)
{
    const od_schema *sch = od_op_schema(od_builtin(fid));
    od_result_arg ra[OD_MAX_ARGS];
    int k = 0, nt = 0;
    for (int i = 0; sch && i < n && i < sch->nargs && k < OD_MAX_ARGS; i++) {
        const char *nm = sch->args[i].name;
        bool operand = args[i].tag == OD_T_TENSOR || (nm && (!strcmp(nm, "other") || !strcmp(nm, "self") ||
                                                             !strcmp(nm, "min") || !strcmp(nm, "max")));
        if (!operand || args[i].tag == OD_T_NONE)
            continue;
        nt += args[i].tag == OD_T_TENSOR;
        ra[k++] = od_result_arg_of_value(&args[i]);
    }
    if (!nt)
        return false;
    *out = od_result_type(ra, k);
    return true;
}

/* The functional refused after ATen's TensorIterator build would have: its
 * kernel's dtype dispatch, an integer division by zero, add / sub's alpha,
 * a Scalar argument's conversion, gelu's approximate. */
static bool refused_after_build(od_status st, const od_error *err)
{
    return st == OD_EUNSUPPORTED || !strcmp(err->message, OD_MSG_ZERO_DIVISION) ||
           !strcmp(err->message, OD_MSG_ALPHA_BOOL) || !strcmp(err->message, OD_MSG_ALPHA_FLOAT) ||
           !strcmp(err->message, OD_MSG_GELU_APPROXIMATE) ||
           !strncmp(err->message, OD_MSG_SCALAR_OVERFLOW, strlen(OD_MSG_SCALAR_OVERFLOW));
}

/* The broadcast of the tensor arguments in order (TensorIterator's shape
 * over its inputs, self among them) into sizes / *nd. */
static od_status inputs_broadcast(const od_value *args, int n, int64_t *sizes, int *nd, od_error *err)
{
    const od_tensor *ts[OD_MAX_ARGS];
    int k = 0;
    for (int i = 0; i < n && k < OD_MAX_ARGS; i++)
        if (args[i].tag == OD_T_TENSOR)
            ts[k++] = args[i].u.t;
    return od_broadcast_tensors(ts, k, sizes, nd, err);
}

/* TensorIterator's words for a result type that does not cast to the output's; out_name: how the check
 * prints the output's dtype */
static od_status cast_error(od_dtype result, const char *out_name, od_error *err)
{
    return od_error_set(err, OD_EMISMATCH, "result type %s can't be cast to the desired output type %s",
                        od_dtype_scalar_name(result), out_name);
}

static bool overlaps(const od_tensor *t)
{
    bool o = false;
    for (int d = 0; d < t->ndim && od_tensor_numel(t) > 0; d++)
        o |= t->sizes[d] > 1 && t->strides[d] == 0;
    return o;
}

static od_status overlap_error(od_error *err)
{
    return od_error_set(err, OD_EINVAL,
                        "unsupported operation: more than one element of the written-to tensor refers to a single "
                        "memory location. Please clone() the tensor before performing the operation.");
}

OD_CX_KERNEL(od_cia_inplace)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self, *res = NULL;
    od_status st;
    if (g_functional[id] == 0)
        return od_error_set(err, OD_EINTERNAL, "%s is not an in-place operator", od_op_name(op));
    int dt_at = -1;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = dtype_arg(op, s, self, &dt_at, err)))
        return st;
    od_value args[OD_MAX_ARGS];
    int nargs = s->nargs < OD_MAX_ARGS ? s->nargs : OD_MAX_ARGS;
    memcpy(args, s->args, (size_t)nargs * sizeof args[0]); /* borrowed values, not retained */
    if (dt_at >= 0 && dt_at < nargs)
        args[dt_at] = od_dtype_v(self->dtype);
    if (id == OD_OPID_polygamma_ && nargs == 2) { /* polygamma_(self, n) is polygamma(n, self) */
        args[0] = s->args[1];
        args[1] = s->args[0];
    }
    od_opid fid = (od_opid)(g_functional[id] - 1);
    /* A TensorIterator operator (ATen's in-place per-element, binary,
     * comparison, clamp and pointwise kernels) refuses an internally
     * overlapping self in its build, after its meta's own checks, and a
     * result type that does not cast to self's before its kernel's dtype
     * dispatch; threshold_ and an integral nan_to_num_ skip the first (below). */
    od_shape_fn sf = od_builtin_shape_fn(fid);
    if (fid == OD_OPID_clamp_min || fid == OD_OPID_clamp_max || fid == OD_OPID_clamp_min_Tensor ||
        fid == OD_OPID_clamp_max_Tensor)
        sf = od_shape_clamp; /* clamp with one bound (defined_by.c) */
    if (fid == OD_OPID_selu || fid == OD_OPID_celu)
        sf = od_builtin_shape_fn(OD_OPID_elu); /* elu with its constants (defined_by.c), as ATen's elu_ */
    /* lerp, addcmul, addcdiv and nextafter (od_shape_pointwise) are
     * TensorIterator operators too */
    bool iter = sf == od_shape_ew || sf == od_shape_binary || sf == od_shape_compare || sf == od_shape_unary ||
                sf == od_shape_clamp || sf == od_shape_pointwise;
    bool no_overlap = iter && id != OD_OPID_threshold_ && id != OD_OPID_nan_to_num_;
    /* clamp's meta with Scalar bounds checks the cast itself (and prints
     * self.dtype(), "long int"), before the build */
    bool own_cast = id == OD_OPID_clamp_ || id == OD_OPID_clamp_min_ || id == OD_OPID_clamp_max_;
    od_dtype rt;
    if ((st = od_call_builtin1(fid, args, nargs, &res, err))) {
        if (!iter)
            return st;
        if (own_cast && refused_after_build(st, err) && result_type(fid, args, nargs, &rt) &&
            !od_dtype_can_cast(rt, self->dtype)) {
            od_error_clear(err);
            return cast_error(rt, od_dtype_meta_name(self->dtype), err);
        }
        /* A refusal at or after the build yields to the build's own checks,
         * in its order: overlap, self's shape, the cast to self's dtype.
         * Those before it (sub's bool check, div's rounding mode, lerp's
         * dtypes) stand. */
        od_error berr;
        od_error_clear(&berr);
        int64_t bs[OD_MAX_DIMS];
        int nb;
        bool bok = inputs_broadcast(args, nargs, bs, &nb, &berr) == OD_OK;
        /* hardtanh_ converts its bounds (toLong) before it calls clamp_'s build */
        bool late = refused_after_build(st, err) && (id != OD_OPID_hardtanh_ || st == OD_EUNSUPPORTED);
        if (no_overlap && (late || (!bok && !strcmp(berr.message, err->message))) && overlaps(self)) {
            od_error_clear(err);
            return overlap_error(err);
        }
        if (!late)
            return st;
        if (bok && nb >= 0 && (nb != self->ndim || memcmp(bs, self->sizes, sizeof(int64_t) * (size_t)nb))) {
            od_error_clear(err);
            return od_broadcast_into(self->sizes, self->ndim, bs, nb, err);
        }
        if (sf != od_shape_compare && sf != od_shape_clamp && result_type(fid, args, nargs, &rt) &&
            !od_dtype_can_cast(rt, self->dtype)) {
            od_error_clear(err);
            return cast_error(rt, od_dtype_scalar_name(self->dtype), err);
        }
        return st;
    }
    if (own_cast && !od_dtype_can_cast(res->dtype, self->dtype)) {
        st = cast_error(res->dtype, od_dtype_meta_name(self->dtype), err);
        od_tensor_release(res);
        return st;
    }
    if (no_overlap && overlaps(self)) {
        od_tensor_release(res);
        return overlap_error(err);
    }
    /* pow_.Scalar's meta builds a unary iterator over base.to(result type):
     * one dtype throughout (checked after the overlap), so any other than
     * self's is refused */
    if ((id == OD_OPID_pow__Scalar || id == OD_OPID_square_) && res->dtype != self->dtype) {
        st = od_error_set(err, OD_EMISMATCH, "Found dtype %s but expected %s", od_dtype_scalar_name(self->dtype),
                          od_dtype_scalar_name(res->dtype));
        od_tensor_release(res);
        return st;
    }
    char a[256], b[256];
    bool reshaped = res->ndim != self->ndim || memcmp(res->sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    /* addbmm_ is ATen's addbmm_out with self as out, which resizes its
     * output: a broadcastable self (0-dim, [1]) grows to the result */
    if (reshaped && id == OD_OPID_addbmm_) {
        od_value rv[3] = {od_tensor_v(self), od_list_v(OD_T_INT_LIST, res->sizes, (size_t)res->ndim), od_none()};
        od_stack rs;
        if ((st = od_call_builtin(OD_OPID_resize_, rv, 3, &rs, err))) {
            od_tensor_release(res);
            return st;
        }
        od_stack_release_rets(&rs);
        reshaped = false;
    }
    if (reshaped) {
        od_shape_print(self->sizes, self->ndim, a, sizeof a);
        od_shape_print(res->sizes, res->ndim, b, sizeof b);
        od_tensor_release(res);
        return od_error_set(err, OD_EMISMATCH, "output with shape %s doesn't match the broadcast shape %s",
                            a, b);
    }
    /* structured kernels whose meta takes the result's dtype from another
     * operand (addmv: vec's, baddbmm: batch1's) check in place that it is
     * self's: equal, not merely castable */
    if ((id == OD_OPID_addmv_ || id == OD_OPID_baddbmm_) && res->dtype != self->dtype) {
        st = od_error_set(err, OD_EMISMATCH,
                          "Bad in-place call: input tensor dtype %s and output tensor dtype %s should match",
                          od_dtype_meta_name(self->dtype), od_dtype_meta_name(res->dtype));
        od_tensor_release(res);
        return st;
    }
    if (!od_dtype_can_cast(res->dtype, self->dtype)) {
        st = cast_error(res->dtype, od_dtype_scalar_name(self->dtype), err);
        od_tensor_release(res);
        return st;
    }
    /* ATen's ternary operators (build_ternary_op) do not cast their common
     * dtype to the output, and the CPU loop (cpu_kernel_vec) cannot cast:
     * in place on a self of another dtype it fails its internal assert */
    if ((id == OD_OPID_addcmul_ || id == OD_OPID_addcdiv_) && res->dtype != self->dtype &&
        self->device.type == OD_DEV_CPU) {
        od_tensor_release(res);
        return od_error_set(err, OD_EMISMATCH,
                            "!needs_dynamic_casting<func_t>::check(iter) INTERNAL ASSERT FAILED at "
                            "\"./aten/src/ATen/native/cpu/Loops.h\":347, please report a bug to PyTorch. ");
    }
    /* ATen's threshold_ skips TensorIterator's internal-overlap check, and
     * an integral nan_to_num_ writes nothing: an expanded self is written
     * through one element of each stride-0 run (copy_ refuses it whole) */
    int64_t one[OD_MAX_DIMS]; /* self's sizes with each stride-0 run cut to one element */
    for (int d = 0; d < self->ndim; d++)
        one[d] = self->strides[d] == 0 && self->sizes[d] > 1 ? 1 : self->sizes[d];
    od_tensor *dst = self, *src = res;
    if (overlaps(self)) {
        if (id == OD_OPID_nan_to_num_ && !od_dtype_is_floating(self->dtype)) {
            od_tensor_release(res);
            od_tensor_retain(self);
            return od_cx_return1(s, self);
        }
        if (id == OD_OPID_threshold_) {
            dst = src = NULL;
            if ((st = od_tensor_as_strided(self, one, self->strides, self->ndim, self->offset, &dst, err)) ||
                (st = od_tensor_as_strided(res, one, res->strides, res->ndim, res->offset, &src, err))) {
                od_tensor_release(dst);
                od_tensor_release(res);
                return st;
            }
        }
    }
    od_value cv[3] = {od_tensor_v(dst), od_tensor_v(src), od_bool(false)};
    od_stack cs;
    st = od_call_builtin(OD_OPID_copy_, cv, 3, &cs, err);
    if (dst != self) {
        od_tensor_release(dst);
        od_tensor_release(src);
    }
    od_tensor_release(res);
    if (st)
        return st;
    od_stack_release_rets(&cs); /* copy_ returns self itself */
    od_tensor_retain(self);
    return od_cx_return1(s, self);
}
