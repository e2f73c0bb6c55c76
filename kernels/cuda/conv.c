/* conv.c — convolution and convolution_backward on CUDA: im2col / col2im
 * (conv.cu) and cuBLAS GEMMs, the CPU kernel's algorithm (cpu/conv.c).
 *
 * Invariants: od_conv_plan_of checked the arguments. Operands are made
 * contiguous in the compute dtype on the device (bfloat16 widened to
 * float32 and the results rounded back once, as on the CPU); every case
 * is down (grid += W @ im2col(image)), up (image += col2im(W^T @ grid)) or
 * wgrad (gW += grid @ im2col(image)^T), per sample and group, as the CPU
 * kernel's header explains. Row-major products are issued as the
 * column-major C^T = B^T A^T (blas.c's rule). Scratch columns come from
 * the caching allocator and go back after od_cu_finish. Synchronous.
 */
#include <limits.h>
#include <string.h>

#include "conv_cu.h"
#include "cuda_internal.h"

typedef struct cu_conv {
    const od_cu_env *env;
    const od_conv_plan *p;
    od_cu_conv_geo g;
    cublasHandle_t h;
    bool f64, pointwise;
    size_t es;
    int64_t kc;
    void *col;
    const char *name;
} cu_conv;

/* row-major out[m, n] = op(a)[m, k] @ op(b)[k, n] + beta * out */
static od_status gemm(cu_conv *c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                      const void *b, int64_t ldb, double beta, void *out, int64_t ldc, od_error *err)
{
    if (m == 0 || n == 0)
        return OD_OK;
    if (k == 0) {
        if (beta != 0)
            return OD_OK;
        return od_cu_status(cudaMemset2DAsync(out, (size_t)ldc * c->es, 0, (size_t)n * c->es, (size_t)m, c->env->stream),
                            "cudaMemset2DAsync in convolution", err);
    }
    cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t cs;
    if (c->f64) {
        double one = 1.0;
        cs = cublasDgemm(c->h, ob, oa, (int)n, (int)m, (int)k, &one, b, (int)ldb, a, (int)lda, &beta, out, (int)ldc);
    } else {
        float one = 1.0f, bf = (float)beta;
        cs = cublasSgemm(c->h, ob, oa, (int)n, (int)m, (int)k, &one, b, (int)ldb, a, (int)lda, &bf, out, (int)ldc);
    }
    return od_cu_blas_status(cs, c->name, err);
}

static od_status columns(cu_conv *c, const char *image, int64_t gi, const void **col, od_error *err)
{
    const char *im = image + (size_t)(gi * c->g.c * c->g.limg) * c->es;
    if (c->pointwise) {
        *col = im;
        return OD_OK;
    }
    *col = c->col;
    return od_cu_status(od_cu_im2col(&c->g, c->f64, im, c->col, c->env->sm_count, c->env->stream), "im2col launch", err);
}

static od_status down(cu_conv *c, const char *image, const char *w, char *grid, od_error *err)
{
    int64_t G = c->p->groups, cg = c->p->C_grid / G;
    od_status st = OD_OK;
    for (int64_t gi = 0; gi < G && !st; gi++) {
        const void *col;
        if (!(st = columns(c, image, gi, &col, err)))
            st = gemm(c, false, false, cg, c->g.lgrid, c->kc, w + (size_t)(gi * cg * c->kc) * c->es, c->kc, col,
                      c->g.lgrid, 1.0, grid + (size_t)(gi * cg * c->g.lgrid) * c->es, c->g.lgrid, err);
    }
    return st;
}

static od_status up(cu_conv *c, const char *grid, const char *w, char *image, od_error *err)
{
    int64_t G = c->p->groups, cg = c->p->C_grid / G;
    od_status st = OD_OK;
    for (int64_t gi = 0; gi < G && !st; gi++) {
        char *im = image + (size_t)(gi * c->g.c * c->g.limg) * c->es;
        const char *wg = w + (size_t)(gi * cg * c->kc) * c->es, *gr = grid + (size_t)(gi * cg * c->g.lgrid) * c->es;
        if (c->pointwise) {
            st = gemm(c, true, false, c->kc, c->g.lgrid, cg, wg, c->kc, gr, c->g.lgrid, 1.0, im, c->g.lgrid, err);
            continue;
        }
        if (!(st = gemm(c, true, false, c->kc, c->g.lgrid, cg, wg, c->kc, gr, c->g.lgrid, 0.0, c->col, c->g.lgrid, err)))
            st = od_cu_status(od_cu_col2im(&c->g, c->f64, c->col, im, c->env->sm_count, c->env->stream),
                              "col2im launch", err);
    }
    return st;
}

static od_status wgrad(cu_conv *c, const char *image, const char *grid, char *gw, od_error *err)
{
    int64_t G = c->p->groups, cg = c->p->C_grid / G;
    od_status st = OD_OK;
    for (int64_t gi = 0; gi < G && !st; gi++) {
        const void *col;
        if (!(st = columns(c, image, gi, &col, err)))
            st = gemm(c, false, true, cg, c->kc, c->g.lgrid, grid + (size_t)(gi * cg * c->g.lgrid) * c->es, c->g.lgrid,
                      col, c->g.lgrid, 1.0, gw + (size_t)(gi * cg * c->kc) * c->es, c->kc, err);
    }
    return st;
}

/* t (borrowed, may be NULL) contiguous in dtype cd on env's device: *out new */
static od_status operand(const od_cu_env *env, const od_tensor *t, od_dtype cd, od_tensor **out, od_error *err)
{
    *out = NULL;
    if (!t)
        return OD_OK;
    if (t->dtype == cd)
        return od_cu_contiguous(env, (od_tensor *)t, out, err);
    od_status st = od_tensor_empty(t->sizes, t->ndim, cd, t->device, out, err);
    if (!st && (st = od_cu_copy_same_device(env, *out, t, err))) {
        od_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

od_status od_cuda_conv(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_conv_plan p;
    int device, nouts = 0;
    od_cu_env env;
    od_tensor *outs[3] = {0}, *res[3] = {0}, *x = NULL, *w = NULL, *b = NULL, *gy = NULL;
    od_status st;
    if ((st = od_conv_plan_of(id, s, &p, err)) || (st = od_cu_call_device(op, s, false, &device, err)) ||
        (st = od_cu_begin(device, &env, err)) || (st = od_cu_outputs(id, s, device, outs, &nouts, err)))
        return st;
    bool bwd = id == OD_OPID_convolution_backward;
    od_dtype dt = p.input->dtype, cd = dt == OD_BFLOAT16 ? OD_FLOAT32 : dt;
    if (!od_dtype_is_floating(dt) || dt == OD_FLOAT16) { /* floating dtypes only here (float16: as on the CPU) */
        for (int i = 0; i < nouts; i++)
            od_tensor_release(outs[i]);
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'",
                            p.transposed ? "slow_conv_transpose2d_out_cuda" : "slow_conv2d_cuda",
                            od_dtype_scalar_name(dt));
    }
    cu_conv c = {.env = &env, .p = &p, .f64 = cd == OD_FLOAT64, .es = od_dtype_size(cd), .name = od_cu_op_name(op)};
    c.g.c = p.C_img / p.groups;
    c.g.kvol = c.g.limg = c.g.lgrid = 1;
    c.pointwise = true;
    for (int k = 0; k < 3; k++) {
        c.g.img[k] = p.img[k];
        c.g.grid[k] = p.grid[k];
        c.g.k[k] = p.k[k];
        c.g.s[k] = p.stride[k];
        c.g.p[k] = p.pad[k];
        c.g.d[k] = p.dil[k];
        c.g.kvol *= p.k[k];
        c.g.limg *= p.img[k];
        c.g.lgrid *= p.grid[k];
        c.pointwise &= p.k[k] == 1 && p.stride[k] == 1 && p.pad[k] == 0 && p.img[k] == p.grid[k];
    }
    c.kc = c.g.c * c.g.kvol;
    size_t colsz = c.pointwise ? 0 : (size_t)(c.kc * c.g.lgrid) * c.es;
    bool want[3] = {!bwd || p.mask[0], bwd && p.mask[1], bwd && p.mask[2]};
    int nres = bwd ? 3 : 1;
    if (c.kc > INT_MAX || c.g.lgrid > INT_MAX || c.g.limg > INT_MAX || p.C_grid > INT_MAX) {
        st = od_error_set(err, OD_EUNSUPPORTED, "%s: the column matrix exceeds cuBLAS's 32-bit sizes", c.name);
        goto done;
    }
    if ((st = operand(&env, p.input, cd, &x, err)) || (st = operand(&env, p.weight, cd, &w, err)) ||
        (st = operand(&env, p.bias, cd, &b, err)) || (bwd && (st = operand(&env, s->args[0].u.t, cd, &gy, err))) ||
        (st = od_cu_blas_handle(&env, &c.h, err)) || (st = od_cu_scratch(&env, colsz, &c.col, err)))
        goto done;
    for (int i = 0; i < nres && !st; i++) {
        if (!want[i])
            continue;
        if (cd == dt)
            res[i] = outs[i]; /* borrowed: the output itself */
        else
            st = od_tensor_empty(outs[i]->sizes, outs[i]->ndim, cd, outs[i]->device, &res[i], err);
    }
    if (st)
        goto done;
    size_t img_n = (size_t)(p.C_img * c.g.limg) * c.es, grid_n = (size_t)(p.C_grid * c.g.lgrid) * c.es;
    const char *xd = od_tensor_data(x), *wd = od_tensor_data(w);
    if (!bwd) {
        char *yd = od_tensor_data(res[0]);
        int64_t ch = p.transposed ? p.C_img : p.C_grid, l = p.transposed ? c.g.limg : c.g.lgrid;
        /* a transposed convolution adds its bias last, as the CPU kernel */
        st = od_cu_status(od_cu_conv_bias_fill(c.f64, yd, b && !p.transposed ? od_tensor_data(b) : NULL, p.N, ch, l,
                                               env.sm_count, env.stream),
                          "bias launch", err);
        for (int64_t n = 0; n < p.N && !st; n++)
            st = p.transposed ? up(&c, xd + n * grid_n, wd, yd + n * img_n, err)
                              : down(&c, xd + n * img_n, wd, yd + n * grid_n, err);
        if (!st && b && p.transposed)
            st = od_cu_status(od_cu_conv_bias_add(c.f64, yd, od_tensor_data(b), p.N, ch, l, env.sm_count, env.stream),
                              "bias launch", err);
    } else {
        const char *gd = od_tensor_data(gy);
        const char *imd = p.transposed ? gd : xd, *grd = p.transposed ? xd : gd;
        if (res[0]) {
            char *gi = od_tensor_data(res[0]);
            st = od_cu_status(cudaMemsetAsync(gi, 0, od_tensor_nbytes(res[0]), env.stream), "cudaMemsetAsync", err);
            for (int64_t n = 0; n < p.N && !st; n++)
                st = p.transposed ? down(&c, gd + n * img_n, wd, gi + n * grid_n, err)
                                  : up(&c, gd + n * grid_n, wd, gi + n * img_n, err);
        }
        if (res[1] && !st) {
            char *gw = od_tensor_data(res[1]);
            st = od_cu_status(cudaMemsetAsync(gw, 0, od_tensor_nbytes(res[1]), env.stream), "cudaMemsetAsync", err);
            for (int64_t n = 0; n < p.N && !st; n++)
                st = wgrad(&c, imd + n * img_n, grd + n * grid_n, gw, err);
        }
        if (res[2] && !st)
            st = od_cu_status(od_cu_conv_bias_grad(c.f64, gd, od_tensor_data(res[2]), p.N,
                                                   p.transposed ? p.C_img : p.C_grid,
                                                   p.transposed ? c.g.limg : c.g.lgrid, env.stream),
                              "bias gradient launch", err);
    }
    for (int i = 0; i < nres && !st; i++)
        if (res[i] && res[i] != outs[i])
            st = od_cu_copy_same_device(&env, outs[i], res[i], err);
    if (!st)
        st = od_cu_finish(&env, c.name, err);
done:
    if (st && cudaStreamSynchronize(env.stream) != cudaSuccess)
        (void)cudaGetLastError();
    od_cu_scratch_free(&env, c.col, colsz);
    od_tensor_release(x);
    od_tensor_release(w);
    od_tensor_release(b);
    od_tensor_release(gy);
    for (int i = 0; i < 3; i++)
        if (res[i] != outs[i])
            od_tensor_release(res[i]);
    if (st) {
        for (int i = 0; i < 3; i++)
            od_tensor_release(outs[i]);
        return st;
    }
    for (int i = 0; i < nres; i++)
        if (!want[i]) {
            od_tensor_release(outs[i]);
            outs[i] = NULL;
        }
    for (int i = 0; i < nres; i++)
        s->rets[i] = outs[i] ? od_tensor_v(outs[i]) : od_none();
    s->nrets = nres;
    return OD_OK;
}
