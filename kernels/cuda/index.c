/* index.c — gather, scatter (every overload), scatter_add and
 * scatter_reduce.two on CUDA.
 *
 * Invariants: od_scatter_parse (kernels/shape_index.c) checks the call as on
 * the CPU; the device then finds the first out-of-range index in row-major
 * order (first_bad_index: one sync, sixteen bytes back), so a bad index
 * gives the CPU's message for the same first offender and the kernels never
 * index out of range. Launchers live in index.cu.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cu_index.h"
#include "cuda_internal.h"
#include "od_half.h"

static od_status drain(const od_cu_env *env, od_status st)
{
    if (cudaStreamSynchronize(env->stream) != cudaSuccess)
        (void)cudaGetLastError();
    return st;
}

/* The first entry of idx (contiguous int64 on the device, n entries) outside
 * [lo, hi), found on the device: *pos (-1 for none) and *value. Sixteen
 * bytes come back, not the index. */
static od_status first_bad_index(const od_cu_env *env, const od_tensor *idx, int64_t n, int64_t lo, int64_t hi,
                                 int64_t *pos, int64_t *value, od_error *err)
{
    int64_t *d = NULL, h[2] = {-1, 0};
    od_status st = od_cu_scratch(env, sizeof h, (void **)&d, err);
    if (st)
        return st;
    st = od_cu_status(od_cu_index_first_bad(od_tensor_data(idx), n, lo, hi, d, env->sm_count, env->stream),
                      "index check launch", err);
    if (!st)
        st = od_cu_status(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, env->stream),
                          "cudaMemcpyAsync (index check)", err);
    if (!st)
        st = od_cu_finish(env, "index check", err);
    else
        drain(env, st);
    od_cu_scratch_free(env, d, sizeof h);
    *pos = h[0];
    *value = h[1];
    return st;
}

od_status od_cuda_scatter(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_scatter_info info;
    int device, nouts = 0;
    od_cu_env env;
    od_tensor *out = NULL, *idx = NULL;
    int64_t *count = NULL;
    size_t count_bytes = 0;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_scatter_parse(id, s, &info, err)) ||
        (st = od_cu_begin(device, &env, err)) || (st = od_cu_outputs(id, s, device, &out, &nouts, err)))
        return st;
    const od_tensor *self = info.self, *src = info.src;
    od_tensor *index = info.index;
    od_dtype dt = self->dtype;
    int64_t n = od_tensor_numel(index);
    if (!info.gather && (st = od_cu_copy_same_device(&env, out, self, err)))
        goto fail;
    if (n == 0) {
        if (info.reduce == OD_SCR_MEAN && dt == OD_BOOL) {
            st = od_error_set(err, OD_EUNSUPPORTED, "\"div_floor_cuda\" not implemented for 'Bool'");
            goto fail;
        }
        if ((st = od_cu_finish(&env, od_cu_op_name(op), err)))
            goto fail;
        od_cu_return(s, &out, 1);
        return OD_OK;
    }
    if (info.reduce == OD_SCR_MEAN && dt == OD_BOOL && info.include_self) {
        st = od_error_set(err, OD_EUNSUPPORTED, "\"scatter_gather_tensor_cuda_reduce_mean\" not implemented for 'Bool'");
        goto fail;
    }
    /* the first out-of-range index in row-major order, as the CPU kernel */
    int64_t limit = self->ndim > 0 ? self->sizes[info.dim] : 1, bad = -1, badv = 0;
    if ((st = od_cu_contiguous(&env, index, &idx, err)) ||
        (st = first_bad_index(&env, idx, n, 0, limit, &bad, &badv, err)))
        goto fail;
    if (!info.gather && !src && bad != 0 && (st = od_scalar_check_fits(&info.value, dt, err)))
        goto fail;
    if (bad >= 0) {
        st = od_scatter_check_index(&info, badv, err);
        goto fail;
    }
    if (info.reduce == OD_SCR_MEAN && dt == OD_BOOL) {
        st = od_error_set(err, OD_EUNSUPPORTED, "\"scatter_gather_tensor_cuda_reduce_mean\" not implemented for 'Bool'");
        goto fail;
    }
    od_cu_scatter_args a;
    memset(&a, 0, sizeof a);
    a.gather = info.gather;
    a.reduce = (int32_t)info.reduce;
    a.include_self = info.include_self;
    a.dtype = dt;
    a.ndim = idx->ndim;
    a.dim = info.dim;
    a.n = n;
    a.limit = limit;
    a.out_numel = od_tensor_numel(out);
    a.index = od_tensor_data(idx);
    a.src = info.gather ? od_tensor_data(self) : src ? od_tensor_data(src) : NULL;
    a.out = od_tensor_data(out);
    a.sm_count = env.sm_count;
    int64_t ocontig[OD_MAX_DIMS];
    for (int64_t k = out->ndim - 1, acc = 1; k >= 0; k--) {
        ocontig[k] = acc;
        acc *= out->sizes[k];
    }
    for (int k = 0; k < idx->ndim; k++) {
        a.sizes[k] = idx->sizes[k];
        a.istr[k] = idx->strides[k];
        a.sstr[k] = src && k < src->ndim ? src->strides[k] : 0;
        a.ostr[k] = info.gather ? (k < self->ndim ? self->strides[k] : 0) : (k < out->ndim ? ocontig[k] : 0);
    }
    a.dstride = info.gather ? (self->ndim > 0 ? self->strides[info.dim] : 0) : (out->ndim > 0 ? ocontig[info.dim] : 0);
    if (!info.gather && !src) {
        const od_value *v = &info.value;
        a.value_is_int = v->tag != OD_T_DOUBLE;
        a.vi = v->tag == OD_T_BOOL ? (int64_t)v->u.b : v->tag == OD_T_INT ? v->u.i : 0;
        a.vd = v->tag == OD_T_DOUBLE ? v->u.d : 0.0;
        if (v->tag == OD_T_DOUBLE && (dt == OD_BOOL || od_dtype_is_integral(dt, true))) {
            /* torch's cast of a (fitting) double: bool is != 0, integers truncate */
            a.value_is_int = 1;
            a.vi = dt == OD_BOOL ? (v->u.d != 0) : (int64_t)trunc(v->u.d);
        }
    }
    if (od_cu_scatter_needs_count(&a)) {
        count_bytes = (size_t)a.out_numel * sizeof(int64_t);
        if ((st = od_cu_scratch(&env, count_bytes, (void **)&count, err)) ||
            (st = od_cu_status(cudaMemsetAsync(count, 0, count_bytes, env.stream), "cudaMemsetAsync", err)))
            goto fail;
        a.count = count;
    }
    if ((st = od_cu_status(od_cu_scatter(&a, env.stream), "scatter kernel launch", err)) ||
        (st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    if (count)
        od_cu_scratch_free(&env, count, count_bytes);
    od_tensor_release(idx);
    od_cu_return(s, &out, 1);
    return OD_OK;
fail:
    drain(&env, st);
    if (count)
        od_cu_scratch_free(&env, count, count_bytes);
    od_tensor_release(idx);
    od_tensor_release(out);
    return st;
}

/* ---- masked_fill, nonzero, take ------------------------------------------------- */

/* The 0-dim value tensor (CPU or on env's device) as a Scalar, as item(). */
static od_status item_of(const od_cu_env *env, const od_tensor *t, od_value *out, od_error *err)
{
    uint64_t raw = 0;
    const void *p = od_tensor_data(t);
    if (t->device.type != OD_DEV_CPU) {
        od_status st = od_cu_status(cudaMemcpyAsync(&raw, p, od_dtype_size(t->dtype), cudaMemcpyDeviceToHost,
                                                    env->stream),
                                    "cudaMemcpyAsync (value to host)", err);
        if (!st)
            st = od_cu_finish(env, "masked_fill value", err);
        if (st)
            return st;
        p = &raw;
    }
    switch (t->dtype) {
    case OD_BOOL: *out = od_bool(*(const bool *)p); break;
    case OD_UINT8: *out = od_int(*(const uint8_t *)p); break;
    case OD_INT8: *out = od_int(*(const int8_t *)p); break;
    case OD_INT16: *out = od_int(*(const int16_t *)p); break;
    case OD_INT32: *out = od_int(*(const int32_t *)p); break;
    case OD_INT64: *out = od_int(*(const int64_t *)p); break;
    case OD_FLOAT16: *out = od_double(od_half_to_float(*(const uint16_t *)p)); break;
    case OD_BFLOAT16: *out = od_double(od_bf16_to_float(*(const uint16_t *)p)); break;
    case OD_FLOAT32: *out = od_double(*(const float *)p); break;
    default: *out = od_double(*(const double *)p); break;
    }
    return OD_OK;
}

/* A Scalar that fits dt (checked), as dt's bytes: torch's cast. */
static uint64_t scalar_bits(const od_value *v, od_dtype dt)
{
    bool isd = v->tag == OD_T_DOUBLE;
    double d = isd ? v->u.d : 0.0;
    int64_t i = v->tag == OD_T_BOOL ? (int64_t)v->u.b : v->tag == OD_T_INT ? v->u.i : 0;
    uint64_t r = 0;
    if (dt == OD_BOOL) {
        bool b = isd ? d != 0 : i != 0;
        memcpy(&r, &b, 1);
    } else if (od_dtype_is_integral(dt, false)) {
        int64_t x = isd ? (int64_t)trunc(d) : i; /* fits: no overflow */
        switch (dt) {
        case OD_UINT8: { uint8_t y = (uint8_t)x; memcpy(&r, &y, 1); break; }
        case OD_INT8: { int8_t y = (int8_t)x; memcpy(&r, &y, 1); break; }
        case OD_INT16: { int16_t y = (int16_t)x; memcpy(&r, &y, 2); break; }
        case OD_INT32: { int32_t y = (int32_t)x; memcpy(&r, &y, 4); break; }
        default: memcpy(&r, &x, 8); break;
        }
    } else if (dt == OD_FLOAT64) {
        double y = isd ? d : (double)i;
        memcpy(&r, &y, 8);
    } else {
        float f = isd ? (float)d : (float)i;
        if (dt == OD_FLOAT32) {
            memcpy(&r, &f, 4);
        } else {
            uint16_t h = dt == OD_FLOAT16 ? od_float_to_half(f) : od_float_to_bf16(f);
            memcpy(&r, &h, 2);
        }
    }
    return r;
}

od_status od_cuda_masked_fill(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device, nouts = 0;
    od_cu_env env;
    od_tensor *out = NULL, *mview = NULL;
    od_status st;
    if ((st = od_cu_call_device(op, s, true, &device, err)) || (st = od_cu_begin(device, &env, err)) ||
        (st = od_cu_outputs(id, s, device, &out, &nouts, err)))
        return st;
    od_tensor *self = s->args[0].u.t, *mask = s->args[1].u.t;
    od_value v = s->args[2];
    bool inplace = out == self; /* masked_fill_ writes self, whatever its layout */
    if (s->args[2].tag == OD_T_TENSOR && (st = item_of(&env, s->args[2].u.t, &v, err)))
        goto fail;
    if ((st = od_scalar_check_fits(&v, self->dtype, err)) ||
        (!inplace && (st = od_cu_copy_same_device(&env, out, self, err))) ||
        (st = od_tensor_expand(mask, out->sizes, out->ndim, &mview, err)))
        goto fail;
    od_cu_masked_fill_args a;
    memset(&a, 0, sizeof a);
    a.out = od_tensor_data(out);
    a.mask = od_tensor_data(mview);
    a.es = (int32_t)od_dtype_size(out->dtype);
    a.mask_es = (int32_t)od_dtype_size(mask->dtype);
    a.mask_is_bool = mask->dtype == OD_BOOL;
    a.ndim = out->ndim;
    for (int k = 0; k < out->ndim; k++) {
        a.sizes[k] = out->sizes[k];
        a.mstr[k] = mview->strides[k];
        a.ostr[k] = out->strides[k];
    }
    a.n = od_tensor_numel(out);
    a.value = scalar_bits(&v, out->dtype);
    a.sm_count = env.sm_count;
    if (a.n > 0 && ((st = od_cu_flag(&env, &a.flag, err)) ||
                    (st = od_cu_status(od_cu_masked_fill(&a, env.stream), "masked_fill kernel launch", err))))
        goto fail;
    if ((st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    if (a.flag && a.flag[0]) {
        st = od_error_set(err, OD_EINVAL, "Mask tensor can take 0 and 1 values only");
        goto fail;
    }
    od_tensor_release(mview);
    od_cu_return(s, &out, 1);
    return OD_OK;
fail:
    drain(&env, st);
    od_tensor_release(mview);
    od_tensor_release(out);
    return st;
}

od_status od_cuda_nonzero(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx;
    (void)ks;
    int device;
    od_cu_env env;
    od_tensor *out = NULL;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_cu_begin(device, &env, err)))
        return st;
    od_tensor *self = s->args[0].u.t;
    od_cu_nonzero_args a;
    memset(&a, 0, sizeof a);
    a.self = od_tensor_data(self);
    a.dtype = self->dtype;
    a.ndim = self->ndim;
    for (int k = 0; k < self->ndim; k++) {
        a.sizes[k] = self->sizes[k];
        a.strides[k] = self->strides[k];
    }
    a.n = od_tensor_numel(self);
    a.sm_count = env.sm_count;
    /* count first (the result's size depends on the data), then allocate;
     * the counter lives in device memory (device atomics on mapped host
     * memory are not guaranteed over PCIe) */
    int64_t count = 0;
    if ((st = od_cu_scratch(&env, sizeof(int64_t), (void **)&a.count, err)) ||
        (st = od_cu_status(cudaMemsetAsync(a.count, 0, sizeof(int64_t), env.stream), "cudaMemsetAsync", err)) ||
        (st = od_cu_status(od_cu_nonzero_count(&a, env.stream), "nonzero count kernel launch", err)) ||
        (st = od_cu_status(cudaMemcpyAsync(&count, a.count, sizeof count, cudaMemcpyDeviceToHost, env.stream),
                           "cudaMemcpyAsync (count to host)", err)) ||
        (st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    od_out_spec spec;
    int64_t sizes[2] = {count, self->ndim};
    od_out_spec_init(&spec, OD_INT64, self->device, sizes, 2);
    if ((st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err)))
        goto fail;
    a.out = od_tensor_data(out);
    if (spec.sizes[0] > 0 && self->ndim > 0 &&
        (st = od_cu_status(od_cu_nonzero_write(&a, env.stream), "nonzero kernel launch", err)))
        goto fail;
    if ((st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    od_cu_scratch_free(&env, a.count, sizeof(int64_t));
    od_cu_return(s, &out, 1);
    return OD_OK;
fail:
    drain(&env, st);
    if (a.count)
        od_cu_scratch_free(&env, a.count, sizeof(int64_t));
    od_tensor_release(out);
    return st;
}

od_status od_cuda_take(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device, nouts = 0;
    od_cu_env env;
    od_tensor *out = NULL, *idx = NULL;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_cu_begin(device, &env, err)) ||
        (st = od_cu_outputs(id, s, device, &out, &nouts, err)))
        return st;
    od_tensor *self = s->args[0].u.t, *index = s->args[1].u.t;
    int64_t numel = od_tensor_numel(self), n = od_tensor_numel(index);
    if (n > 0) {
        int64_t bad = -1, badv = 0, wrapped;
        if ((st = od_cu_contiguous(&env, index, &idx, err)) ||
            (st = first_bad_index(&env, idx, n, -numel, numel, &bad, &badv, err)))
            goto fail;
        if (bad >= 0) {
            st = od_take_check_index(badv, numel, &wrapped, err);
            goto fail;
        }
        od_cu_take_args a;
        memset(&a, 0, sizeof a);
        a.self = od_tensor_data(self);
        a.out = od_tensor_data(out);
        a.idx = od_tensor_data(idx);
        a.numel = numel;
        a.elem_size = (int32_t)od_dtype_size(self->dtype);
        a.ndim = self->ndim;
        for (int k = 0; k < self->ndim; k++) {
            a.sizes[k] = self->sizes[k];
            a.strides[k] = self->strides[k];
        }
        a.n = n;
        a.sm_count = env.sm_count;
        if ((st = od_cu_status(od_cu_take(&a, env.stream), "take kernel launch", err)))
            goto fail;
    }
    if ((st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    od_tensor_release(idx);
    od_cu_return(s, &out, 1);
    return OD_OK;
fail:
    drain(&env, st);
    od_tensor_release(idx);
    od_tensor_release(out);
    return st;
}
