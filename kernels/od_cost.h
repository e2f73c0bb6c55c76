/* od_cost.h — the cost model of a call: floating-point operations and bytes
 * moved, from the shapes, as ops.def's OD_COST lines declare it.
 *
 * Invariants: bytes count every tensor argument read once and every result
 * written once (a result that is one of the arguments, in place, counts
 * once); flops follow the kind:
 *   EW    factor x output elements
 *   RED   factor x input elements
 *   MM    2mnk (bmm x batch; addmm adds 2mn; dot 2k)
 *   NORM  factor x elements of the normalised input (batch / group norm and
 *         their backward)
 *   ATTN  factor/2 x query rows x S x (E + Ev) (4BHLSE at factor 4, E == Ev)
 *   LOSS  factor x elements of the argument named target
 *   POOL  output elements x window elements (factor: the spatial dims)
 *   CONV  factor x 2 x N x C_out x out-spatial x C_in/groups x k-spatial
 *         (per gradient asked for, for convolution_backward)
 *   DIST  factor x row pairs x columns (cdist: result elements x m; pdist:
 *         n(n-1)/2 x m; the _backward ops: grad's elements x m)
 *   BAG   factor x indices x features (x2 with per_sample_weights; mean adds
 *         one divide per output element)
 * An operator without a line (or a plugin's) has bytes and no flops.
 */
#ifndef OD_COST_H
#define OD_COST_H

#include "od_ops.h"

typedef struct od_cost {
    double flops, bytes;
    bool has_flops;
} od_cost;

/* The cost of one call of op on s's arguments and results (s->rets filled
 * by a successful call). *out: caller's. */
void od_op_cost(const od_op *op, const od_stack *s, od_cost *out);

#endif
