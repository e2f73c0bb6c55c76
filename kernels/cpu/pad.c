/* pad.c — reflection_pad1d/2d/3d and replication_pad1d/2d/3d on the CPU.
 *
 * Invariants: od_pad_plan_of (shape_pad.c) checked everything; each output
 * element (row-major, contiguous output) copies the input element whose
 * padded-dim indices od_pad_source_index gives (tabled once per dim), read
 * through the input's strides, so any layout works. A pure copy: element
 * bytes move unchanged. Rows of the last dim run in parallel; a row's
 * middle, where a unit-stride input runs on, is one memcpy (element by
 * element with a division per dim, 8x64x56x56 padded by 3 took 12.4 ms,
 * torch 1.2-1.7).
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_parallel.h"
#include "od_shape.h"

/* Output rows (the last dim) [begin, end): each row's input offset from
 * its index, then its padded ends element by element through the last
 * dim's table and its middle, where the input runs on, in one copy. */
typedef struct pad_job {
    const od_pad_plan *p;
    const od_tensor *x, *out;
    int64_t *const *m; /* m[k][j]: input offset (elements) of padded dim k's output index j */
    size_t es;
} pad_job;

#define PAD_GRAIN 32768 /* output elements per parallel task, at least */

static void pad_rows(void *ctx, int64_t begin, int64_t end)
{
    const pad_job *J = ctx;
    const od_pad_plan *p = J->p;
    const od_tensor *x = J->x, *out = J->out;
    int nd = out->ndim, last = p->nd - 1;
    int64_t W = out->sizes[nd - 1], in = p->in[last], pl = p->pad_l[last], xs = x->strides[nd - 1];
    const int64_t *ml = J->m[last];
    /* the middle: output indices whose input index is j - pl, contiguous when xs is 1 */
    int64_t lo = pl > 0 ? pl : 0, hi = in + pl < W ? in + pl : W;
    if (xs != 1 || hi < lo)
        lo = hi = 0;
    size_t es = J->es;
    const char *src = od_tensor_data(x);
    char *dst = (char *)od_tensor_data(out);
    for (int64_t r = begin; r < end; r++) {
        int64_t rem = r, off = 0;
        for (int k = nd - 2; k >= 0; k--) {
            int64_t c = rem % out->sizes[k];
            rem /= out->sizes[k];
            off += k >= p->lead ? J->m[k - p->lead][c] : c * x->strides[k];
        }
        const char *s = src + off * (int64_t)es;
        char *d = dst + (size_t)(r * W) * es;
#define PAD_ENDS_(T)                                       \
    for (int64_t j = 0; j < lo; j++)                       \
        ((T *)d)[j] = ((const T *)s)[ml[j]];               \
    for (int64_t j = hi > lo ? hi : 0; j < W; j++)         \
        ((T *)d)[j] = ((const T *)s)[ml[j]];
        switch (es) {
        case 1: PAD_ENDS_(uint8_t) break;
        case 2: PAD_ENDS_(uint16_t) break;
        case 4: PAD_ENDS_(uint32_t) break;
        default: PAD_ENDS_(uint64_t) break;
        }
#undef PAD_ENDS_
        if (hi > lo)
            memcpy(d + (size_t)lo * es, s + (lo - pl) * (int64_t)es, (size_t)(hi - lo) * es);
    }
}

od_status od_cpu_pad(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_pad_plan p;
    od_out_spec spec;
    int nouts = 0;
    od_status st;
    if ((st = od_pad_plan_of(id, s, &p, err)) || (st = od_shape_pad(id, s, &spec, &nouts, err)))
        return st;
    od_tensor *out = NULL;
    if ((st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err)))
        return st;
    const od_tensor *x = p.self;
    int64_t n = od_tensor_numel(out), total = 0;
    for (int k = 0; k < p.nd; k++)
        total += p.out[k];
    int64_t *map = malloc((size_t)(total > 0 ? total : 1) * sizeof *map), *m[3];
    if (!map) {
        od_tensor_release(out);
        return od_error_set(err, OD_ENOMEM, "%s: no memory for the index tables", od_op_schema(op)->name);
    }
    for (int k = 0, at = 0; k < p.nd; at += (int)p.out[k], k++) {
        m[k] = map + at;
        for (int64_t j = 0; j < p.out[k]; j++)
            m[k][j] = od_pad_source_index(p.reflect, j, p.in[k], p.pad_l[k]) * x->strides[p.lead + k];
    }
    int64_t W = out->sizes[out->ndim - 1];
    pad_job J = {&p, x, out, m, od_dtype_size(x->dtype)};
    if (n > 0 && (st = od_parallel_for(n / W, PAD_GRAIN / W + 1, pad_rows, &J))) {
        free(map);
        od_tensor_release(out);
        return st;
    }
    free(map);
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
}
