/* sort.c — CPU sort, sort.stable, topk and kthvalue.
 *
 * Invariants:
 *  - od_shape_scan / od_scan_parse (kernels/shape_scan.c) validate every
 *    argument first; od_scan_check_dtype then refuses what ATen's CPU
 *    dispatch refuses. Outputs come from od_alloc_outputs (contiguous).
 *  - Each line along dim is gathered into (key, index) pairs and ordered by
 *    kernels/od_sort_algo.h (ATen 1.13's CPU algorithms replayed, so equal
 *    keys come out in torch's order); values are then copied byte for byte
 *    from self at the chosen indices, so NaN payloads and -0.0 survive.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_shape.h"
#include "od_sort_algo.h"

od_status od_cpu_sort(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec[2];
    int nouts = 0;
    od_scan_info info;
    od_status st;
    if ((st = od_shape_scan(id, s, spec, &nouts, err)) || (st = od_scan_parse(id, s, &info, err)) ||
        (st = od_scan_check_dtype(id, s, &info, err)))
        return st;
    od_tensor *self = s->args[0].u.t, *outs[2] = {NULL, NULL}, *x = NULL, *keys = NULL;
    od_sort_elem *buf = NULL;
    if ((st = od_alloc_outputs(s, spec, nouts, outs, err)))
        return st;
    int64_t n = info.size;
    /* Lines of the outputs: sort n per line, topk k, kthvalue 1. */
    int64_t on = id == OD_OPID_topk ? info.k : id == OD_OPID_kthvalue ? 1 : n;
    if (self->ndim == 0)
        on = 1; /* ATen copies a 0-dim self, even for topk with k == 0 */
    if (od_tensor_numel(self) == 0 || on == 0)
        goto done;
    bool fl = od_dtype_is_floating(self->dtype);
    if ((st = od_cpu_to_dtype(self, self->dtype, &x, err)) ||
        (st = od_cpu_to_dtype(self, fl ? OD_FLOAT64 : OD_INT64, &keys, err)))
        goto fail;
    buf = malloc((size_t)(2 * n) * sizeof *buf);
    if (!buf) {
        st = od_error_set(err, OD_ENOMEM, "%s: out of memory", od_op_name(op));
        goto fail;
    }
    size_t es = od_dtype_size(self->dtype);
    const char *xd = od_tensor_data(x);
    const void *kd = od_tensor_data(keys);
    char *vd = od_tensor_data(outs[0]);
    int64_t *id_out = od_tensor_data(outs[1]);
    int sop = id == OD_OPID_topk       ? OD_SORT_OP_TOPK
              : id == OD_OPID_kthvalue ? OD_SORT_OP_KTHVALUE
              : id == OD_OPID_sort_stable && info.stable ? OD_SORT_OP_SORT_STABLE
                                                          : OD_SORT_OP_SORT;
    for (int64_t o = 0; o < info.outer; o++)
        for (int64_t j = 0; j < info.inner; j++) {
            int64_t base = o * n * info.inner + j;
            for (int64_t k = 0; k < n; k++) {
                if (fl)
                    buf[k].k.d = ((const double *)kd)[base + k * info.inner];
                else
                    buf[k].k.i = ((const int64_t *)kd)[base + k * info.inner];
                buf[k].idx = k;
            }
            int64_t first = od_sort_line(buf, buf + n, n, sop, info.k, info.descending, info.sorted, fl);
            int64_t obase = o * on * info.inner + j;
            for (int64_t k = 0; k < on; k++) {
                int64_t src = buf[first + k].idx;
                memcpy(vd + (size_t)(obase + k * info.inner) * es, xd + (size_t)(base + src * info.inner) * es, es);
                id_out[obase + k * info.inner] = src;
            }
        }
done:
    free(buf);
    od_tensor_release(x);
    od_tensor_release(keys);
    for (int i = 0; i < nouts; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = nouts;
    return OD_OK;
fail:
    free(buf);
    od_tensor_release(x);
    od_tensor_release(keys);
    for (int i = 0; i < nouts; i++)
        od_tensor_release(outs[i]);
    return st;
}
