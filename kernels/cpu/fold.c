/* fold.c — im2col, col2im and max_unpool2d / max_unpool3d on the CPU.
 *
 * Invariants: od_fold_plan_of (shape_fold.c) checked the call. im2col and
 * col2im run conv.c's column loops per sample (od_cpu_im2col /
 * od_cpu_col2im) on a contiguous copy in the compute type: float for
 * float32, bfloat16 and float16 (converted back once at the end), double
 * for float64; col2im sums each pixel's entries in ATen's order. max_unpool
 * scatters each plane's values into a zeroed output at their flat indices;
 * it first scans every index in order and refuses the call with the last
 * one out of range, as ATen's serial loop reports it, so nothing is written
 * outside the output.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_parallel.h"
#include "od_shape.h"

static od_cpu_cols cols_of(const od_fold_plan *p)
{
    od_cpu_cols c;
    c.c = p->c;
    for (int i = 0; i < 3; i++) {
        c.img[i] = p->img[i];
        c.grid[i] = p->grid[i];
        c.k[i] = p->k[i];
        c.s[i] = p->s[i];
        c.p[i] = p->p[i];
        c.d[i] = p->d[i];
    }
    return c;
}

static od_status run_fold(const od_fold_plan *p, od_tensor *out, od_error *err)
{
    od_dtype dt = p->self->dtype, cdt = dt == OD_FLOAT64 ? OD_FLOAT64 : OD_FLOAT32;
    bool f64 = cdt == OD_FLOAT64;
    size_t es = od_dtype_size(cdt);
    od_tensor *x = NULL, *tmp = NULL;
    od_status st;
    if ((st = od_cpu_to_dtype((od_tensor *)p->self, cdt, &x, err)))
        return st;
    if (dt == cdt) {
        tmp = out;
        od_tensor_retain(tmp);
    } else if ((st = od_tensor_empty(out->sizes, out->ndim, cdt, out->device, &tmp, err))) {
        od_tensor_release(x);
        return st;
    }
    od_cpu_cols c = cols_of(p);
    int64_t limg = p->img[1] * p->img[2], lgrid = p->grid[1] * p->grid[2];
    int64_t per_img = p->c * limg, per_col = p->c * p->kvol * lgrid;
    const char *src = od_tensor_data(x);
    char *dst = od_tensor_data(tmp);
    for (int64_t n = 0; n < p->n; n++) {
        if (p->kind == OD_FOLD_IM2COL)
            od_cpu_im2col(&c, f64, src + (size_t)(n * per_img) * es, dst + (size_t)(n * per_col) * es);
        else
            od_cpu_col2im(&c, f64, src + (size_t)(n * per_col) * es, dst + (size_t)(n * per_img) * es);
    }
    if (tmp != out)
        st = od_cpu_copy_into(out, tmp, err);
    od_tensor_release(tmp);
    od_tensor_release(x);
    return st;
}

typedef struct unpool_job {
    const od_fold_plan *p;
    const char *x;
    const int64_t *ix;
    char *out;
    bool f64;
    int64_t *bad; /* per plane: 1 + the index of its last out-of-range entry, 0: none */
} unpool_job;

/* Each plane is checked, zeroed (in cache, just before its writes; the
 * output is allocated unzeroed) and written by one task. A plane with an
 * index out of range is left unwritten and marked, so nothing is ever
 * written outside the output. */
static void unpool_planes(void *ctx, int64_t b, int64_t e)
{
    const unpool_job *j = ctx;
    int64_t in = j->p->in_plane, on = j->p->out_plane;
    size_t es = j->f64 ? sizeof(double) : sizeof(float);
    for (int64_t q = b; q < e; q++) {
        const int64_t *ix = j->ix + q * in;
        int64_t last = -1;
        for (int64_t i = 0; i < in; i++)
            last = (uint64_t)ix[i] >= (uint64_t)on ? i : last; /* negative ones too */
        if (last >= 0) {
            j->bad[q] = 1 + last;
            continue;
        }
        memset(j->out + (size_t)(q * on) * es, 0, (size_t)on * es);
        if (j->f64) {
            const double *x = (const double *)j->x + q * in;
            double *y = (double *)j->out + q * on;
            for (int64_t i = 0; i < in; i++)
                y[ix[i]] = x[i];
        } else {
            const float *x = (const float *)j->x + q * in;
            float *y = (float *)j->out + q * on;
            for (int64_t i = 0; i < in; i++)
                y[ix[i]] = x[i];
        }
    }
}

static od_status run_unpool(const od_fold_plan *p, od_tensor *out, od_error *err)
{
    int64_t total = p->planes * p->out_plane;
    if (total == 0)
        return OD_OK;
    od_tensor *x = NULL, *ix = NULL;
    int64_t *bad = NULL;
    od_status st;
    if ((st = od_cpu_to_dtype((od_tensor *)p->self, p->self->dtype, &x, err)) ||
        (st = od_cpu_to_dtype((od_tensor *)p->indices, OD_INT64, &ix, err)))
        goto done;
    if (!(bad = calloc((size_t)p->planes, sizeof *bad))) {
        st = od_error_set(err, OD_ENOMEM, "max_unpool: out of memory");
        goto done;
    }
    const int64_t *iv = od_tensor_data(ix);
    unpool_job j = {p, od_tensor_data(x), iv, od_tensor_data(out), p->self->dtype == OD_FLOAT64, bad};
    if ((st = od_parallel_for(p->planes, 1 + 16384 / (p->in_plane + 1), unpool_planes, &j)))
        goto done;
    /* ATen's serial loop reports the last bad index of all: that of the last marked plane */
    for (int64_t q = p->planes - 1; q >= 0; q--)
        if (bad[q]) {
            st = od_fold_unpool_bad_index(p, iv[q * p->in_plane + bad[q] - 1], err);
            break;
        }
done:
    free(bad);
    od_tensor_release(x);
    od_tensor_release(ix);
    return st;
}

od_status od_cpu_fold(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    (void)op;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_fold_plan p;
    od_out_spec spec;
    int nouts = 0;
    od_status st;
    if ((st = od_fold_plan_of(id, s, &p, err)) || (st = od_shape_fold(id, s, &spec, &nouts, err)))
        return st;
    od_tensor *out = NULL;
    /* im2col writes every element, max_unpool zeroes each plane it writes;
     * col2im adds into zeros */
    if ((st = (p.kind == OD_FOLD_COL2IM ? od_alloc_outputs : od_alloc_outputs_overwrite)(s, &spec, 1, &out, err)))
        return st;
    if (od_tensor_numel(out) > 0)
        st = p.kind == OD_FOLD_UNPOOL ? run_unpool(&p, out, err) : run_fold(&p, out, err);
    return od_cpu_return1(s, out, st);
}
