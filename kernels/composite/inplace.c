/* inplace.c — the in-place variants declared by ops.def's OD_INPLACE lines
 * (add_.Tensor, sqrt_, clamp_, ...): the out-of-place operator of the same
 * arguments, then copy_ of its result into self.
 *
 * Invariants: self keeps its dtype, shape and storage. ATen's TensorIterator
 * checks come first: the result must have self's shape (it may not broadcast
 * self) and its dtype must cast to self's (no float into an integer, nothing
 * into bool). Both operators are reached through the dispatcher, so Autograd
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
        if (v->tag == OD_T_DTYPE && v->u.dtype != self->dtype)
            return od_error_set(err, OD_EMISMATCH,
                                "Bad in-place call: input tensor dtype %s and output tensor dtype %s should match",
                                od_dtype_meta_name(self->dtype), od_dtype_meta_name(v->u.dtype));
        *at = i;
    }
    return OD_OK;
}

/* The promoted dtype of the iterator's inputs of functional operator fid:
 * its tensors and its number operands (a Scalar `other`, not alpha or an
 * activation's parameters); false when there is no tensor. */
static bool result_type(od_opid fid, const od_value *args, int n, od_dtype *out)
{
    const od_schema *sch = od_op_schema(od_builtin(fid));
    od_result_arg ra[OD_MAX_ARGS];
    int k = 0, nt = 0;
    for (int i = 0; sch && i < n && i < sch->nargs && k < OD_MAX_ARGS; i++) {
        const char *nm = sch->args[i].name;
        bool operand = args[i].tag == OD_T_TENSOR || (nm && (!strcmp(nm, "other") || !strcmp(nm, "self")));
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
    /* a TensorIterator operator (ATen's in-place per-element, binary,
     * comparison and clamp kernels) refuses an internally overlapping self
     * before anything else, and a result type that does not cast to self's
     * before its kernel's dtype dispatch; threshold_ and an integral
     * nan_to_num_ skip the first (below). (lerp_, addcmul_ and addcdiv_
     * check their dtypes in their meta functions first: not here.) */
    od_shape_fn sf = od_builtin_shape_fn(fid);
    bool iter = sf == od_shape_ew || sf == od_shape_binary || sf == od_shape_compare || sf == od_shape_unary ||
                sf == od_shape_clamp;
    if (iter && id != OD_OPID_threshold_ && id != OD_OPID_nan_to_num_ && od_tensor_numel(self) > 0)
        for (int d = 0; d < self->ndim; d++)
            if (self->sizes[d] > 1 && self->strides[d] == 0)
                return od_error_set(err, OD_EINVAL,
                                    "unsupported operation: more than one element of the written-to "
                                    "tensor refers to a single memory location. Please clone() the "
                                    "tensor before performing the operation.");
    if ((st = od_call_builtin1(fid, args, nargs, &res, err))) {
        od_dtype rt;
        if ((sf == od_shape_ew || sf == od_shape_binary) && st == OD_EUNSUPPORTED &&
            result_type(fid, args, nargs, &rt) && !od_dtype_can_cast(rt, self->dtype)) {
            od_error_clear(err);
            return od_error_set(err, OD_EMISMATCH, "result type %s can't be cast to the desired output type %s",
                                od_dtype_scalar_name(rt), od_dtype_scalar_name(self->dtype));
        }
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
        /* clamp's meta with Scalar bounds makes this check itself and prints self.dtype() ("long int") */
        bool own = id == OD_OPID_clamp_ || id == OD_OPID_clamp_min_ || id == OD_OPID_clamp_max_;
        st = od_error_set(err, OD_EMISMATCH, "result type %s can't be cast to the desired output type %s",
                          od_dtype_scalar_name(res->dtype),
                          own ? od_dtype_meta_name(self->dtype) : od_dtype_scalar_name(self->dtype));
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
    bool overlap = false;
    int64_t one[OD_MAX_DIMS];
    for (int d = 0; d < self->ndim; d++) {
        overlap |= self->sizes[d] > 1 && self->strides[d] == 0;
        one[d] = self->strides[d] == 0 && self->sizes[d] > 1 ? 1 : self->sizes[d];
    }
    od_tensor *dst = self, *src = res;
    if (overlap && od_tensor_numel(self) > 0) {
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
