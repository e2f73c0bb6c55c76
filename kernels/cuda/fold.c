/* fold.c — im2col, col2im and max_unpool2d/3d on CUDA: the boxed kernel.
 *
 * Invariants: od_fold_plan_of (shape_fold.c) checked the call. im2col and
 * col2im run conv.cu's column loops (conv_cu.h) per sample on a contiguous
 * operand in the compute dtype (float16 and bfloat16 widened to float32
 * and the result rounded back once, as on the CPU); col2im gathers into a
 * zeroed image. max_unpool scatters into a zeroed output (fold.cu) and,
 * once the stream is done, refuses an out-of-range index with the CPU's
 * message and the last such index in order. Synchronous.
 */
#include <inttypes.h>
#include <string.h>

#include "conv_cu.h"
#include "cu_fold.h"
#include "cuda_internal.h"

/* t (borrowed) contiguous in dtype cd on env's device: *out new */
static od_status operand(const od_cu_env *env, const od_tensor *t, od_dtype cd, od_tensor **out, od_error *err)
{
    *out = NULL;
    if (t->dtype == cd)
        return od_cu_contiguous(env, (od_tensor *)t, out, err);
    od_status st = od_tensor_empty(t->sizes, t->ndim, cd, t->device, out, err);
    if (!st && (st = od_cu_copy_same_device(env, *out, t, err))) {
        od_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

static od_status run_fold(const od_cu_env *env, const od_fold_plan *p, od_tensor *out, od_error *err)
{
    od_dtype dt = p->self->dtype, cd = dt == OD_FLOAT64 ? OD_FLOAT64 : OD_FLOAT32;
    bool f64 = cd == OD_FLOAT64;
    size_t es = od_dtype_size(cd);
    od_tensor *x = NULL, *res = out;
    od_status st = operand(env, p->self, cd, &x, err);
    if (!st && cd != dt)
        st = od_tensor_empty(out->sizes, out->ndim, cd, out->device, &res, err);
    if (st)
        goto done;
    od_cu_conv_geo g;
    memset(&g, 0, sizeof g);
    g.c = p->c;
    g.kvol = g.limg = g.lgrid = 1;
    for (int i = 0; i < 3; i++) {
        g.img[i] = p->img[i];
        g.grid[i] = p->grid[i];
        g.k[i] = p->k[i];
        g.s[i] = p->s[i];
        g.p[i] = p->p[i];
        g.d[i] = p->d[i];
        g.kvol *= p->k[i];
        g.limg *= p->img[i];
        g.lgrid *= p->grid[i];
    }
    size_t per_img = (size_t)(g.c * g.limg) * es, per_col = (size_t)(g.c * g.kvol * g.lgrid) * es;
    const char *src = od_tensor_data(x);
    char *dst = od_tensor_data(res);
    if (p->kind == OD_FOLD_COL2IM)
        st = od_cu_status(cudaMemsetAsync(dst, 0, od_tensor_nbytes(res), env->stream), "cudaMemsetAsync in col2im",
                          err);
    for (int64_t n = 0; n < p->n && !st; n++) {
        if (p->kind == OD_FOLD_IM2COL)
            st = od_cu_status(od_cu_im2col(&g, f64, src + n * per_img, dst + n * per_col, env->sm_count, env->stream),
                              "im2col launch", err);
        else
            st = od_cu_status(od_cu_col2im(&g, f64, src + n * per_col, dst + n * per_img, env->sm_count, env->stream),
                              "col2im launch", err);
    }
    if (!st && res != out)
        st = od_cu_copy_same_device(env, out, res, err);
    if (!st)
        st = od_cu_finish(env, p->kind == OD_FOLD_IM2COL ? "aten::im2col" : "aten::col2im", err);
done:
    od_tensor_release(x);
    if (res != out)
        od_tensor_release(res);
    return st;
}

static od_status run_unpool(const od_cu_env *env, const od_fold_plan *p, od_tensor *out, od_error *err)
{
    od_tensor *x = NULL, *ix = NULL;
    int64_t *flag = NULL;
    od_status st;
    if ((st = od_cu_contiguous(env, (od_tensor *)p->self, &x, err)) ||
        (st = od_cu_contiguous(env, (od_tensor *)p->indices, &ix, err)) || (st = od_cu_flag(env, &flag, err)) ||
        (st = od_cu_status(cudaMemsetAsync(od_tensor_data(out), 0, od_tensor_nbytes(out), env->stream),
                           "cudaMemsetAsync in max_unpool", err)) ||
        (st = od_cu_status(od_cu_max_unpool(p->self->dtype == OD_FLOAT64, od_tensor_data(x), od_tensor_data(ix),
                                            od_tensor_data(out), p->planes, p->in_plane, p->out_plane, flag,
                                            env->sm_count, env->stream),
                           "max_unpool launch", err)) ||
        (st = od_cu_finish(env, p->unpool_nd == 3 ? "aten::max_unpool3d" : "aten::max_unpool2d", err)))
        goto done;
    if (flag[0]) {
        int64_t bad = 0;
        const int64_t *at = (const int64_t *)od_tensor_data(ix) + (flag[0] - 1);
        if ((st = od_cu_status(cudaMemcpy(&bad, at, sizeof bad, cudaMemcpyDeviceToHost), "cudaMemcpy in max_unpool",
                               err)))
            goto done;
        st = od_fold_unpool_bad_index(p, bad, err);
    }
done:
    od_tensor_release(x);
    od_tensor_release(ix);
    return st;
}

od_status od_cuda_fold(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_fold_plan p;
    int device, nouts = 0;
    od_cu_env env;
    od_tensor *out = NULL;
    od_status st;
    if ((st = od_fold_plan_of(id, s, &p, err)) || (st = od_cu_call_device(op, s, false, &device, err)) ||
        (st = od_cu_begin(device, &env, err)) || (st = od_cu_outputs(id, s, device, &out, &nouts, err)))
        return st;
    if (od_tensor_numel(out) > 0)
        st = p.kind == OD_FOLD_UNPOOL ? run_unpool(&env, &p, out, err) : run_fold(&env, &p, out, err);
    if (st) {
        if (cudaStreamSynchronize(env.stream) != cudaSuccess)
            (void)cudaGetLastError();
        od_tensor_release(out);
        return st;
    }
    od_cu_return(s, &out, 1);
    return OD_OK;
}
