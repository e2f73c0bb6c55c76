/* index.c — CPU index_select.
 *
 * Invariants: od_shape_index_select (kernels/shape_reduce.c) has checked the
 * dim, the index's rank and dtype (int32/int64). Every index is checked
 * against the dim's size before anything is written, so a bad index leaves
 * no half-filled result: negative indices are out of range, as in torch. The
 * source is viewed as [outer, size(dim), inner] over a contiguous copy (none
 * when self already is contiguous) and each selected slab is one memcpy.
 */
#include <string.h>

#include "cpu_kernels.h"
#include "od_parallel.h"
#include "od_shape.h"

typedef struct isel_ctx {
    const char *src;
    char *dst;
    const int64_t *idx;
    int64_t n, dsize;
    size_t slab; /* bytes per selected slab (inner elements) */
} isel_ctx;

static void isel_rows(void *ctx, int64_t begin, int64_t end)
{
    const isel_ctx *c = ctx;
    for (int64_t r = begin; r < end; r++) {
        int64_t o = r / c->n, i = r % c->n;
        memcpy(c->dst + (size_t)r * c->slab, c->src + (size_t)(o * c->dsize + c->idx[i]) * c->slab,
               c->slab);
    }
}

od_status od_cpu_index_select(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_out_spec spec;
    int nouts = 0;
    od_status st = od_shape_index_select(OD_OPID_OF_CTX(ctx), s, &spec, &nouts, err);
    if (st)
        return st;
    od_tensor *self = s->args[0].u.t, *index = s->args[2].u.t;
    int d = 0;
    if ((st = od_wrap_dim(s->args[1].u.i, self->ndim, &d, err)))
        return st;
    int64_t dsize = self->ndim > 0 ? self->sizes[d] : 1;
    /* Indices as a contiguous int64 array, each checked. */
    od_tensor *idx = NULL, *src = NULL, *out = NULL;
    if ((st = od_cpu_to_dtype(index, OD_INT64, &idx, err)))
        return st;
    const int64_t *iv = od_tensor_data(idx);
    int64_t n = od_tensor_numel(idx);
    for (int64_t i = 0; i < n; i++)
        if (iv[i] < 0 || iv[i] >= dsize) {
            od_tensor_release(idx);
            return od_error_set(err, OD_EINVAL, "index out of range in self");
        }
    /* every output row is copied from self below */
    if ((st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err))) {
        od_tensor_release(idx);
        return st;
    }
    if (od_tensor_numel(out) > 0) {
        if ((st = od_cpu_to_dtype(self, self->dtype, &src, err)))
            goto done;
        int64_t outer = 1, inner = 1;
        for (int k = 0; k < self->ndim; k++) {
            if (k < d)
                outer *= self->sizes[k];
            else if (k > d)
                inner *= self->sizes[k];
        }
        isel_ctx c = {od_tensor_data(src), od_tensor_data(out), iv, n, dsize,
                      (size_t)inner * od_dtype_size(self->dtype)};
        st = od_parallel_for(outer * n, (int64_t)(65536 / (c.slab + 1)) + 1, isel_rows, &c);
    }
done:
    od_tensor_release(src);
    od_tensor_release(idx);
    if (st) {
        od_tensor_release(out);
        return st;
    }
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
}
