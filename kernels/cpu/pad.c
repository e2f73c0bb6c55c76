/* pad.c — reflection_pad1d/2d/3d and replication_pad1d/2d/3d on the CPU.
 *
 * Invariants: od_pad_plan_of (shape_pad.c) checked everything; each output
 * element (row-major, contiguous output) copies the input element whose
 * padded-dim indices od_pad_source_index gives (tabled once per dim), read
 * through the input's strides, so any layout works. A pure copy: element
 * bytes move unchanged.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_shape.h"

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
    /* m[k][j]: input offset (in elements) of padded dim k's output index j */
    for (int k = 0, at = 0; k < p.nd; at += (int)p.out[k], k++) {
        m[k] = map + at;
        for (int64_t j = 0; j < p.out[k]; j++)
            m[k][j] = od_pad_source_index(p.reflect, j, p.in[k], p.pad_l[k]) * x->strides[p.lead + k];
    }
    size_t es = od_dtype_size(x->dtype);
    const char *src = od_tensor_data(x);
    char *dst = od_tensor_data(out);
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, off = 0;
        for (int k = out->ndim - 1; k >= 0; k--) {
            int64_t c = rem % out->sizes[k];
            rem /= out->sizes[k];
            off += k >= p.lead ? m[k - p.lead][c] : c * x->strides[k];
        }
        memcpy(dst + (size_t)i * es, src + off * (int64_t)es, es);
    }
    free(map);
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
}
