/* copy.c — copy_ between any pair of CPU / CUDA tensors, clone, cat and
 * index_select on CUDA.
 *
 * Invariants:
 *  - copy_ owns every cross-device copy (the dispatcher sends a call with a
 *    CPU and a CUDA tensor to the CUDA key). Dtype conversion and
 *    broadcasting always happen on the GPU: host<->device transfers move the
 *    source's own elements (row-major) or the destination's final bytes.
 *  - Host<->device transfers go through this thread's two pinned staging
 *    buffers: while one chunk is in flight on the copy engine the host
 *    gathers (or scatters) the next, so pageable memory costs one extra
 *    memcpy overlapped with the DMA rather than a synchronous driver copy.
 *  - Every function synchronizes its stream before returning (also on
 *    errors), so no staging buffer or scratch tensor is in use afterwards.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

/* ---- host-side strided gather / scatter ----------------------------------------------------- */

void od_cu_host_walk_init(od_cu_host_walk *w, const od_tensor *t)
{
    w->base = od_tensor_data(t);
    w->es = od_dtype_size(t->dtype);
    int nd = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] == 1)
            continue;
        int64_t bs = t->strides[d] * (int64_t)w->es;
        if (nd > 0 && w->bstrides[nd - 1] == bs * t->sizes[d]) {
            w->sizes[nd - 1] *= t->sizes[d];
            w->bstrides[nd - 1] = bs;
        } else {
            w->sizes[nd] = t->sizes[d];
            w->bstrides[nd] = bs;
            nd++;
        }
    }
    w->ndim = nd;
}

void od_cu_host_xfer(const od_cu_host_walk *w, int64_t begin, int64_t count, char *buf, bool to_buf)
{
    if (count <= 0)
        return;
    const size_t es = w->es;
    if (w->ndim == 0 || (w->ndim == 1 && w->bstrides[0] == (int64_t)es)) {
        char *p = w->base + begin * (int64_t)es;
        if (to_buf)
            memcpy(buf, p, (size_t)count * es);
        else
            memcpy(p, buf, (size_t)count * es);
        return;
    }
    int64_t idx[OD_MAX_DIMS];
    int64_t rem = begin;
    char *p = w->base;
    for (int d = w->ndim - 1; d >= 0; d--) {
        idx[d] = rem % w->sizes[d];
        rem /= w->sizes[d];
        p += idx[d] * w->bstrides[d];
    }
    const int inner = w->ndim - 1;
    const int64_t ib = w->bstrides[inner], isz = w->sizes[inner];
    while (count > 0) {
        int64_t run = isz - idx[inner];
        if (run > count)
            run = count;
        if (ib == (int64_t)es) {
            if (to_buf)
                memcpy(buf, p, (size_t)run * es);
            else
                memcpy(p, buf, (size_t)run * es);
            buf += run * (int64_t)es;
        } else {
            char *q = p;
            for (int64_t i = 0; i < run; i++, q += ib, buf += es) {
                if (to_buf)
                    memcpy(buf, q, es);
                else
                    memcpy(q, buf, es);
            }
        }
        count -= run;
        /* Advance the counter past the run. */
        p += (run - 1) * ib;
        idx[inner] += run - 1;
        for (int d = inner; d >= 0; d--) {
            if (++idx[d] < w->sizes[d]) {
                p += w->bstrides[d];
                break;
            }
            p -= (w->sizes[d] - 1) * w->bstrides[d]; /* wrap this dim, carry outwards */
            idx[d] = 0;
        }
    }
}

/* Waits for the stream after an error so nothing still uses the staging buffers. */
static od_status drain(const od_cu_env *env, od_status st)
{
    if (cudaStreamSynchronize(env->stream) != cudaSuccess)
        (void)cudaGetLastError();
    return st;
}

/* Host tensor t (CPU) -> device memory dst (numel(t) elements of t's dtype, row-major). */
static od_status h2d(const od_cu_env *env, const od_tensor *t, void *dst, od_error *err)
{
    int64_t n = od_tensor_numel(t);
    if (n == 0)
        return OD_OK;
    od_cu_host_walk w;
    od_cu_host_walk_init(&w, t);
    void *bufs[2];
    cudaEvent_t evs[2];
    size_t chunk;
    od_status st = od_cu_staging(env, bufs, evs, &chunk, err);
    if (st)
        return st;
    const int64_t ce = (int64_t)(chunk / w.es);
    int k = 0;
    for (int64_t off = 0; off < n; off += ce, k ^= 1) {
        int64_t cnt = n - off < ce ? n - off : ce;
        if ((st = od_cu_status(cudaEventSynchronize(evs[k]), "cudaEventSynchronize (staging)", err)))
            return drain(env, st);
        od_cu_host_xfer(&w, off, cnt, bufs[k], true);
        if ((st = od_cu_status(cudaMemcpyAsync((char *)dst + off * (int64_t)w.es, bufs[k],
                                               (size_t)cnt * w.es, cudaMemcpyHostToDevice, env->stream),
                               "cudaMemcpyAsync (host to device)", err)) ||
            (st = od_cu_status(cudaEventRecord(evs[k], env->stream), "cudaEventRecord", err)))
            return drain(env, st);
    }
    return od_cu_finish(env, "copy host to device", err);
}

/* Device memory src (numel(t) elements of t's dtype, row-major) -> host tensor t. */
static od_status d2h(const od_cu_env *env, const void *src, const od_tensor *t, od_error *err)
{
    int64_t n = od_tensor_numel(t);
    if (n == 0)
        return OD_OK;
    od_cu_host_walk w;
    od_cu_host_walk_init(&w, t);
    void *bufs[2];
    cudaEvent_t evs[2];
    size_t chunk;
    od_status st = od_cu_staging(env, bufs, evs, &chunk, err);
    if (st)
        return st;
    const int64_t ce = (int64_t)(chunk / w.es);
    int64_t prev_off = -1, prev_cnt = 0;
    int k = 0;
    for (int64_t off = 0; off < n; off += ce, k ^= 1) {
        int64_t cnt = n - off < ce ? n - off : ce;
        if ((st = od_cu_status(cudaMemcpyAsync(bufs[k], (const char *)src + off * (int64_t)w.es,
                                               (size_t)cnt * w.es, cudaMemcpyDeviceToHost, env->stream),
                               "cudaMemcpyAsync (device to host)", err)) ||
            (st = od_cu_status(cudaEventRecord(evs[k], env->stream), "cudaEventRecord", err)))
            return drain(env, st);
        if (prev_off >= 0) {
            if ((st = od_cu_status(cudaEventSynchronize(evs[k ^ 1]), "copy device to host", err)))
                return drain(env, st);
            od_cu_host_xfer(&w, prev_off, prev_cnt, bufs[k ^ 1], false);
        }
        prev_off = off;
        prev_cnt = cnt;
    }
    if ((st = od_cu_status(cudaEventSynchronize(evs[k ^ 1]), "copy device to host", err)))
        return drain(env, st);
    od_cu_host_xfer(&w, prev_off, prev_cnt, bufs[k ^ 1], false);
    return od_cu_finish(env, "copy device to host", err);
}

/* ---- copy_ -------------------------------------------------------------------------------------- */

static bool plain_same(const od_tensor *dst, const od_tensor *src)
{
    return dst->dtype == src->dtype && od_tensor_is_contiguous(dst) && od_tensor_is_contiguous(src) &&
           od_tensor_numel(dst) == od_tensor_numel(src);
}

static od_status copy_cuda_cuda(const od_op *op, od_tensor *dst, const od_tensor *src, od_error *err)
{
    od_cu_env env;
    od_status st = od_cu_begin(dst->device.index, &env, err);
    if (st)
        return st;
    if (src->device.index == dst->device.index) {
        if ((st = od_cu_copy_same_device(&env, dst, src, err)))
            return drain(&env, st);
        return od_cu_finish(&env, od_cu_op_name(op), err);
    }
    /* Across devices: make src contiguous on its device, move the bytes
     * peer-to-peer, convert / broadcast on the destination. */
    od_cu_env senv;
    od_tensor *sc = NULL, *tmp = NULL;
    if ((st = od_cu_begin(src->device.index, &senv, err)) ||
        (st = od_cu_contiguous(&senv, (od_tensor *)src, &sc, err)) ||
        (st = od_cu_finish(&senv, "contiguous copy before a peer copy", err)))
        goto out;
    if ((st = od_cu_begin(dst->device.index, &env, err)))
        goto out;
    if (plain_same(dst, sc)) {
        tmp = dst;
        od_tensor_retain(tmp);
    } else if ((st = od_tensor_empty(sc->sizes, sc->ndim, sc->dtype, dst->device, &tmp, err))) {
        goto out;
    }
    if ((st = od_cu_status(cudaMemcpyPeerAsync(od_tensor_data(tmp), dst->device.index,
                                               od_tensor_data(sc), src->device.index,
                                               od_tensor_nbytes(sc), env.stream),
                           "cudaMemcpyPeerAsync", err)))
        goto drain_out;
    if (tmp != dst && (st = od_cu_copy_same_device(&env, dst, tmp, err)))
        goto drain_out;
    st = od_cu_finish(&env, od_cu_op_name(op), err);
    goto out;
drain_out:
    drain(&env, st);
out:
    od_tensor_release(tmp);
    od_tensor_release(sc);
    return st;
}

static od_status copy_cpu_to_cuda(const od_op *op, od_tensor *dst, const od_tensor *src, od_error *err)
{
    od_cu_env env;
    od_status st = od_cu_begin(dst->device.index, &env, err);
    if (st)
        return st;
    if (od_tensor_numel(dst) == 0)
        return OD_OK;
    if (plain_same(dst, src))
        return h2d(&env, src, od_tensor_data(dst), err);
    /* src's elements as they are, then broadcast + convert on the device. */
    od_tensor *tmp = NULL;
    if ((st = od_tensor_empty(src->sizes, src->ndim, src->dtype, dst->device, &tmp, err)))
        return st;
    if (!(st = h2d(&env, src, od_tensor_data(tmp), err)) &&
        !(st = od_cu_copy_same_device(&env, dst, tmp, err)))
        st = od_cu_finish(&env, od_cu_op_name(op), err);
    else
        drain(&env, st);
    od_tensor_release(tmp);
    return st;
}

static od_status copy_cuda_to_cpu(const od_op *op, od_tensor *dst, const od_tensor *src, od_error *err)
{
    od_cu_env env;
    od_status st = od_cu_begin(src->device.index, &env, err);
    if (st)
        return st;
    if (od_tensor_numel(dst) == 0)
        return OD_OK;
    if (plain_same(dst, src))
        return d2h(&env, od_tensor_data(src), dst, err);
    /* Broadcast + convert on the device into dst's final bytes, then move them. */
    od_tensor *tmp = NULL;
    if ((st = od_tensor_empty(dst->sizes, dst->ndim, dst->dtype, src->device, &tmp, err)))
        return st;
    if ((st = od_cu_copy_same_device(&env, tmp, src, err)))
        drain(&env, st);
    else
        st = d2h(&env, od_tensor_data(tmp), dst, err);
    (void)op;
    od_tensor_release(tmp);
    return st;
}

static bool dev_ok(const od_tensor *t)
{
    return t->device.type == OD_DEV_CUDA || t->device.type == OD_DEV_CPU;
}

od_status od_cuda_copy(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_status st;
    if (id == OD_OPID_clone) {
        int device;
        od_tensor *out = NULL;
        int n = 0;
        od_cu_env env;
        if ((st = od_cu_call_device(op, s, false, &device, err)) ||
            (st = od_cu_begin(device, &env, err)) || (st = od_cu_outputs(id, s, device, &out, &n, err)))
            return st;
        if ((st = od_cu_copy_same_device(&env, out, s->args[0].u.t, err)) ||
            (st = od_cu_finish(&env, od_cu_op_name(op), err))) {
            drain(&env, st);
            od_tensor_release(out);
            return st;
        }
        od_cu_return(s, &out, 1);
        return OD_OK;
    }
    /* copy_(self, src): shape checks, then self itself is the result. */
    od_out_spec spec;
    int n = 0;
    if ((st = od_shape_inplace(id, s, &spec, &n, err)))
        return st;
    od_tensor *dst = s->args[0].u.t, *src = s->args[1].u.t;
    if (!dev_ok(dst) || !dev_ok(src)) {
        char a[32], b[32];
        od_device_print(src->device, a, sizeof a);
        od_device_print(dst->device, b, sizeof b);
        return od_error_set(err, OD_EUNSUPPORTED, "%s: cannot copy from %s to %s on the CUDA backend",
                            od_cu_op_name(op), a, b);
    }
    if (dst->device.type == OD_DEV_CUDA && src->device.type == OD_DEV_CUDA)
        st = copy_cuda_cuda(op, dst, src, err);
    else if (dst->device.type == OD_DEV_CUDA)
        st = copy_cpu_to_cuda(op, dst, src, err);
    else if (src->device.type == OD_DEV_CUDA)
        st = copy_cuda_to_cpu(op, dst, src, err);
    else
        st = od_error_set(err, OD_EINTERNAL, "%s: the CUDA kernel got two CPU tensors", od_cu_op_name(op));
    if (st)
        return st;
    od_tensor_retain(dst);
    od_cu_return(s, &dst, 1);
    return OD_OK;
}

/* ---- cat ------------------------------------------------------------------------------------------- */

od_status od_cuda_cat(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device;
    od_cu_env env;
    od_tensor *out = NULL;
    int n = 0;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_cu_begin(device, &env, err)) ||
        (st = od_cu_outputs(id, s, device, &out, &n, err)))
        return st;
    od_tensor **ts = s->args[0].u.list.items;
    size_t nt = s->args[0].u.list.n;
    int dim = -1;
    int64_t at = 0;
    /* dim wraps against the first tensor that is not skipped, as on the CPU
     * (od_shape_cat has checked it); an empty result needs no dim at all */
    for (size_t i = 0; i < nt && od_tensor_numel(out) > 0; i++) {
        od_tensor *t = ts[i];
        if (od_cat_should_skip(t))
            continue;
        if (dim < 0 && (st = od_wrap_dim(s->args[1].u.i, t->ndim, &dim, err)))
            goto fail;
        int64_t len = t->sizes[dim];
        if (od_tensor_numel(t) > 0) {
            od_tensor *view = NULL;
            if ((st = od_tensor_slice(out, dim, at, at + len, 1, &view, err)))
                goto fail;
            st = od_cu_copy_same_device(&env, view, t, err);
            od_tensor_release(view);
            if (st)
                goto fail;
        }
        at += len;
    }
    if ((st = od_cu_finish(&env, od_cu_op_name(op), err)))
        goto fail;
    od_cu_return(s, &out, 1);
    return OD_OK;
fail:
    drain(&env, st);
    od_tensor_release(out);
    return st;
}

/* ---- index_select --------------------------------------------------------------------------------------- */

/* Every index of a.index in [0, size of a.dim), read back to the host: for
 * an empty result, where the gather kernel (which checks as it reads) has
 * nothing to do. */
static od_status check_indices_on_host(const od_cu_env *env, const od_cu_index_args *a, od_error *err)
{
    size_t es = a->index_dtype == OD_INT64 ? 8 : 4;
    size_t n = a->index_stride == 0 ? 1 : (size_t)a->n_index; /* an expanded index: one value */
    int64_t dsize = a->self_sizes[a->dim];
    char *h = malloc(es * n);
    if (!h)
        return od_error_set(err, OD_ENOMEM, "out of host memory reading %zu indices", n);
    cudaError_t e = n == 1 ? cudaMemcpyAsync(h, a->index, es, cudaMemcpyDeviceToHost, env->stream)
                           : cudaMemcpy2DAsync(h, es, a->index, es * (size_t)a->index_stride, es, n,
                                               cudaMemcpyDeviceToHost, env->stream);
    od_status st = od_cu_status(e, "cudaMemcpy2DAsync (indices to host)", err);
    if (!st)
        st = od_cu_finish(env, "index_select", err);
    for (size_t i = 0; !st && i < n; i++) {
        int64_t v = es == 8 ? ((const int64_t *)h)[i] : ((const int32_t *)h)[i];
        if (v < 0 || v >= dsize)
            st = od_error_set(err, OD_EINVAL, "index out of range in self");
    }
    free(h);
    return st;
}

od_status od_cuda_index_select(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device;
    od_cu_env env;
    od_tensor *out = NULL;
    int n = 0;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_cu_begin(device, &env, err)) ||
        (st = od_cu_outputs(id, s, device, &out, &n, err)))
        return st;
    const od_tensor *self = s->args[0].u.t, *index = s->args[2].u.t;
    od_cu_index_args a;
    memset(&a, 0, sizeof a);
    a.self = od_tensor_data(self);
    a.out = od_tensor_data(out);
    a.elem_size = (int32_t)od_dtype_size(self->dtype);
    if (self->ndim == 0) { /* a scalar indexes like a 1-element vector */
        a.ndim = 1;
        a.dim = 0;
        a.self_sizes[0] = 1;
        a.self_strides[0] = 1;
    } else {
        int d;
        if ((st = od_wrap_dim(s->args[1].u.i, self->ndim, &d, err)))
            goto fail;
        a.ndim = self->ndim;
        a.dim = d;
        memcpy(a.self_sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
        memcpy(a.self_strides, self->strides, sizeof(int64_t) * (size_t)self->ndim);
    }
    a.index = od_tensor_data(index);
    a.index_dtype = index->dtype;
    a.index_stride = index->ndim > 0 ? index->strides[0] : 0;
    a.n_index = od_tensor_numel(index);
    a.numel = od_tensor_numel(out);
    a.sm_count = env.sm_count;
    if (a.numel > 0) {
        if ((st = od_cu_flag(&env, &a.flag, err)) ||
            (st = od_cu_status(od_cu_index_select(&a, env.stream), "index_select kernel launch", err)) ||
            (st = od_cu_finish(&env, od_cu_op_name(op), err)))
            goto fail;
        if (a.flag[0]) {
            st = od_error_set(err, OD_EINVAL, "index out of range in self");
            goto fail;
        }
    } else if (a.n_index > 0 && (st = check_indices_on_host(&env, &a, err))) {
        goto fail; /* nothing to gather, but the CPU checks every index too */
    }
    od_cu_return(s, &out, 1);
    return OD_OK;
fail:
    drain(&env, st);
    od_tensor_release(out);
    return st;
}
