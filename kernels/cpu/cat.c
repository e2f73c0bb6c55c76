/* cat.c — CPU torch.cat.
 *
 * Invariants: od_shape_cat (kernels/shape_reduce.c) has checked ranks, sizes,
 * devices and computed the promoted dtype; legacy 1-D empty tensors (shape
 * [0]) are skipped. Each remaining input is copied into its slice of the
 * fresh, contiguous result with od_cpu_copy_into, which converts dtypes and
 * walks any strides, so inputs need no contiguous copy first.
 */
#include "cpu_kernels.h"
#include "od_shape.h"

od_status od_cpu_cat(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_out_spec spec;
    int nouts = 0;
    od_status st = od_shape_cat(OD_OPID_OF_CTX(ctx), s, &spec, &nouts, err);
    if (st)
        return st;
    od_tensor *out = NULL;
    /* the inputs' slices tile the output: every element is written */
    if ((st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err)))
        return st;
    od_tensor **ts = s->args[0].u.list.items;
    size_t n = s->args[0].u.list.n;
    int d = -1;
    int64_t off = 0;
    for (size_t i = 0; i < n && !st && od_tensor_numel(out) > 0; i++) {
        od_tensor *t = ts[i];
        if (od_cat_should_skip(t))
            continue;
        if (d < 0 && (st = od_wrap_dim(s->args[1].u.i, t->ndim, &d, err)))
            break;
        int64_t len = t->sizes[d];
        if (len == 0)
            continue;
        od_tensor *slot = NULL;
        if (!(st = od_tensor_slice(out, d, off, off + len, 1, &slot, err)))
            st = od_cpu_copy_into(slot, t, err);
        od_tensor_release(slot);
        off += len;
    }
    return od_cpu_return1(s, out, st);
}
