/* cost.c — the cost model of ops.def's OD_COST lines (see od_cost.h). */
#include <string.h>

#include "od_cost.h"
#include "od_shape.h"

enum { K_NONE, K_EW, K_RED, K_MM, K_NORM, K_ATTN, K_LOSS, K_POOL, K_CONV, K_BAG, K_DIST };

static const struct {
    int kind;
    double factor;
} g_cost[OD_NUM_BUILTIN_OPS] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag)
#define OD_COST(id, kind, factor) [OD_OPID_##id] = {K_##kind, factor},
#include "ops.def"
#undef OD_COST
#undef OD_OP
};

static double tensor_bytes(const od_value *v)
{
    if (v->tag == OD_T_TENSOR && v->u.t)
        return (double)od_tensor_nbytes(v->u.t);
    double b = 0;
    if (v->tag == OD_T_TENSOR_LIST)
        for (size_t i = 0; i < v->u.list.n; i++)
            if (((od_tensor **)v->u.list.items)[i])
                b += (double)od_tensor_nbytes(((od_tensor **)v->u.list.items)[i]);
    return b;
}

static bool is_arg(const od_stack *s, const od_tensor *t)
{
    for (int i = 0; i < s->nargs; i++)
        if (s->args[i].tag == OD_T_TENSOR && s->args[i].u.t == t)
            return true;
    return false;
}

static const od_tensor *arg_t(const od_stack *s, int i)
{
    return i < s->nargs && s->args[i].tag == OD_T_TENSOR ? s->args[i].u.t : NULL;
}

void od_op_cost(const od_op *op, const od_stack *s, od_cost *out)
{
    out->flops = out->bytes = 0;
    out->has_flops = false;
    for (int i = 0; i < s->nargs; i++)
        out->bytes += tensor_bytes(&s->args[i]);
    for (int i = 0; i < s->nrets; i++)
        if (!(s->rets[i].tag == OD_T_TENSOR && is_arg(s, s->rets[i].u.t)))
            out->bytes += tensor_bytes(&s->rets[i]);
    int id = od_op_id(op);
    if (id >= OD_NUM_BUILTIN_OPS || g_cost[id].kind == K_NONE)
        return;
    const od_tensor *r0 = s->nrets && s->rets[0].tag == OD_T_TENSOR ? s->rets[0].u.t : NULL, *a0 = arg_t(s, 0);
    switch (g_cost[id].kind) {
    case K_EW:
        out->flops = r0 ? g_cost[id].factor * (double)od_tensor_numel(r0) : 0;
        break;
    case K_RED:
        out->flops = a0 ? g_cost[id].factor * (double)od_tensor_numel(a0) : 0;
        break;
    case K_MM: {
        int first = id == OD_OPID_addmm ? 1 : 0;
        const od_tensor *a = arg_t(s, first), *b = arg_t(s, first + 1);
        if (!a || !b)
            return;
        if (id == OD_OPID_dot) {
            out->flops = 2.0 * (double)od_tensor_numel(a);
        } else if (id == OD_OPID_bmm && a->ndim == 3 && b->ndim == 3) {
            out->flops = 2.0 * (double)a->sizes[0] * (double)a->sizes[1] * (double)a->sizes[2] * (double)b->sizes[2];
        } else if (a->ndim == 2 && b->ndim == 2) {
            out->flops = 2.0 * (double)a->sizes[0] * (double)a->sizes[1] * (double)b->sizes[1];
            if (id == OD_OPID_addmm) /* beta * self + alpha * product */
                out->flops += 2.0 * (double)a->sizes[0] * (double)b->sizes[1];
        }
        break;
    }
    case K_NORM: /* batch / group norm: factor flops per element of the input (backward: of input) */
        a0 = id == OD_OPID_native_batch_norm_backward || id == OD_OPID_native_group_norm_backward ? arg_t(s, 1) : a0;
        out->flops = a0 ? g_cost[id].factor * (double)od_tensor_numel(a0) : 0;
        break;
    case K_ATTN: { /* scores q.k^T and P.v: factor/2 x rows x S x (E + Ev), 4BHLSE for E == Ev */
        const od_tensor *q = a0, *k = arg_t(s, 1);
        if (!r0 || !q || !k || q->ndim < 1 || k->ndim < 2 || r0->ndim < 1)
            return;
        double rows = 1, ev = (double)r0->sizes[r0->ndim - 1];
        for (int d = 0; d < r0->ndim - 1; d++)
            rows *= (double)r0->sizes[d];
        out->flops = g_cost[id].factor / 2 * rows * (double)k->sizes[k->ndim - 2] *
                     ((double)q->sizes[q->ndim - 1] + ev);
        break;
    }
    case K_LOSS: { /* factor flops per element of the argument named target */
        const od_schema *sch = od_op_schema(op);
        const od_tensor *t = NULL;
        for (int i = 0; i < sch->nargs && !t; i++)
            if (sch->args[i].name && !strcmp(sch->args[i].name, "target"))
                t = arg_t(s, i);
        out->flops = t ? g_cost[id].factor * (double)od_tensor_numel(t) : 0;
        break;
    }
    case K_POOL: {
        /* factor: spatial dims; flops = output elements x window elements
         * (kernel_size, one int meaning a cube; adaptive: input elements per
         * output element, rounded up) */
        if (!r0 || !a0)
            return;
        double on = (double)od_tensor_numel(r0), win = 1;
        const od_value *k = s->nargs > 1 ? &s->args[1] : NULL;
        if (k && k->tag == OD_T_INT_LIST && id != OD_OPID__adaptive_avg_pool2d && id != OD_OPID__adaptive_avg_pool3d &&
            id != OD_OPID_adaptive_max_pool2d && id != OD_OPID_adaptive_max_pool3d) {
            const int64_t *kv = k->u.list.items;
            for (int d = 0; d < (int)g_cost[id].factor; d++)
                win *= (double)kv[k->u.list.n == 1 ? 0 : (size_t)d < k->u.list.n ? d : 0];
        } else if (on > 0) {
            win = (double)od_tensor_numel(a0) / on;
            win = win < 1 ? 1 : (double)(int64_t)(win + 0.999999);
        }
        out->flops = on * win;
        break;
    }
    case K_CONV: {
        /* 2 x N x C_out x out-spatial x C_in / groups x k-spatial per product
         * (grid side x image side per group, either direction); the backward
         * computes one product per gradient asked for of input and weight */
        od_conv_plan p;
        if (od_conv_plan_of((od_opid)id, s, &p, NULL))
            return;
        double grid = 1, kvol = 1;
        for (int k = 0; k < 3; k++) {
            grid *= (double)p.grid[k];
            kvol *= (double)p.k[k];
        }
        double products = id == OD_OPID_convolution_backward ? (double)p.mask[0] + (double)p.mask[1] : 1.0;
        out->flops = g_cost[id].factor * products * 2.0 * (double)p.N * (double)p.C_grid * grid *
                     (double)(p.C_img / p.groups) * kvol;
        break;
    }
    case K_BAG: {
        /* one add per index and feature (two with per_sample_weights), plus
         * the mean's divide per output element */
        const od_tensor *w = arg_t(s, 0), *ix = arg_t(s, 1), *psw = arg_t(s, 6);
        if (!w || !ix || w->ndim != 2)
            return;
        out->flops = g_cost[id].factor * (psw ? 2.0 : 1.0) * (double)od_tensor_numel(ix) * (double)w->sizes[1];
        if (r0 && s->args[4].tag == OD_T_INT && s->args[4].u.i == 1)
            out->flops += (double)od_tensor_numel(r0);
        break;
    }
    case K_DIST: {
        /* factor x row pairs x columns: cdist's B x r1 x r2 (its result's
         * elements), pdist's n(n-1)/2 pairs; backward: the same pairs */
        const od_tensor *x = id == OD_OPID__cdist_backward || id == OD_OPID__pdist_backward ? arg_t(s, 1) : a0;
        const od_tensor *pairs = id == OD_OPID__cdist_backward || id == OD_OPID__pdist_backward ? arg_t(s, 0) : r0;
        if (!x || !pairs || x->ndim < 1)
            return;
        out->flops = g_cost[id].factor * (double)od_tensor_numel(pairs) * (double)x->sizes[x->ndim - 1];
        break;
    }
    default:
        return;
    }
    out->has_flops = true;
}
