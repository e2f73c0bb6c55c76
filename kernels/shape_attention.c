/* shape_attention.c — the plan of _scaled_dot_product_attention_forward's
 * fused kernels (od_sdpa_plan, od_shape.h) and its shape function.
 *
 * Invariants: the fused kernels take only calls whose every check they can
 * make without torch's operators: ranks >= 2, one floating dtype of theirs
 * (float32, float64, bfloat16) for query, key and value, matching E and S,
 * batch dims that broadcast (value's no wider than the scores'), a mask of
 * bool or a floating dtype that broadcasts to the scores in place (ATen's
 * add_ cannot grow them), dropout_p <= 0 and no mask with is_causal. Any
 * other call runs _scaled_dot_product_attention_math through the
 * dispatcher (od_sdpa_run_math), so its errors and odd ranks read exactly
 * as torch's math path's. The shape function describes the fused outputs
 * (the Meta kernel) and refuses what the plan does not cover.
 */
#include <math.h>
#include <string.h>

#include "od_shape.h"

static const od_tensor *opt_tensor(const od_stack *s, int i)
{
    return i < s->nargs && s->args[i].tag == OD_T_TENSOR ? s->args[i].u.t : NULL;
}

static bool fused_dtype(od_dtype dt)
{
    return dt == OD_FLOAT32 || dt == OD_FLOAT64 || dt == OD_BFLOAT16;
}

/* Aligns t's leading dims (all but its last two, or all for the mask:
 * lead == ndim) right against the nb output batch dims: writes t's stride
 * per output dim (0 where t lacks or broadcasts it) and widens bsizes. False
 * when the sizes do not broadcast. */
static bool align_batch(const od_tensor *t, int lead, int nb, int64_t *bsizes, int64_t *bs)
{
    for (int d = 0; d < nb; d++) {
        int td = d - (nb - lead);
        bs[d] = 0;
        if (td < 0)
            continue;
        int64_t n = t->sizes[td];
        if (n == 1)
            continue;
        if (bsizes[d] != 1 && bsizes[d] != n)
            return false;
        bsizes[d] = n;
        bs[d] = t->strides[td];
    }
    return true;
}

bool od_sdpa_plan_of(const od_stack *s, od_sdpa_plan *p)
{
    memset(p, 0, sizeof *p);
    if (s->nargs < 7)
        return false;
    const od_tensor *q = opt_tensor(s, 0), *k = opt_tensor(s, 1), *v = opt_tensor(s, 2), *m = opt_tensor(s, 3);
    if (!q || !k || !v || (s->args[3].tag != OD_T_NONE && !m) || !od_value_is_number(&s->args[4]) ||
        s->args[5].tag != OD_T_BOOL || s->args[6].tag != OD_T_BOOL)
        return false;
    p->need_weights = s->args[5].u.b;
    p->causal = s->args[6].u.b;
    if (od_value_as_double(&s->args[4]) > 0 || (p->causal && m))
        return false;
    if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2 || !fused_dtype(q->dtype) || k->dtype != q->dtype ||
        v->dtype != q->dtype || q->batched_value || k->batched_value || v->batched_value)
        return false;
    if (q->device.type != k->device.type || q->device.type != v->device.type ||
        q->device.index != k->device.index || q->device.index != v->device.index)
        return false;
    p->L = q->sizes[q->ndim - 2];
    p->E = q->sizes[q->ndim - 1];
    p->S = k->sizes[k->ndim - 2];
    p->Ev = v->sizes[v->ndim - 1];
    if (k->sizes[k->ndim - 1] != p->E || v->sizes[v->ndim - 2] != p->S)
        return false;
    /* The scores' batch: broadcast(query, key); value may not widen it (the
     * weights would then repeat), which the math path covers. */
    int nb = q->ndim > k->ndim ? q->ndim - 2 : k->ndim - 2;
    if (v->ndim - 2 > nb)
        return false;
    p->nb = nb;
    for (int d = 0; d < nb; d++)
        p->bsizes[d] = 1;
    if (!align_batch(q, q->ndim - 2, nb, p->bsizes, p->qb) || !align_batch(k, k->ndim - 2, nb, p->bsizes, p->kb))
        return false;
    int64_t scores[OD_MAX_DIMS];
    memcpy(scores, p->bsizes, sizeof scores);
    if (!align_batch(v, v->ndim - 2, nb, p->bsizes, p->vb) || memcmp(scores, p->bsizes, sizeof scores) != 0)
        return false;
    if (m) {
        if (m->batched_value || (m->dtype != OD_BOOL && !od_dtype_is_floating(m->dtype)) ||
            m->device.type != q->device.type || m->device.index != q->device.index || m->ndim > nb + 2)
            return false;
        /* The mask against [batch..., L, S], in place: a size of 1 broadcasts,
         * any other must equal the scores'. */
        int64_t full[OD_MAX_DIMS + 2], fs[OD_MAX_DIMS + 2];
        memcpy(full, p->bsizes, (size_t)nb * sizeof(int64_t));
        full[nb] = p->L;
        full[nb + 1] = p->S;
        for (int d = 0; d < nb + 2; d++) {
            int md = d - (nb + 2 - m->ndim);
            fs[d] = 0;
            if (md < 0 || m->sizes[md] == 1)
                continue;
            if (m->sizes[md] != full[d])
                return false;
            fs[d] = m->strides[md];
        }
        memcpy(p->mb, fs, (size_t)nb * sizeof(int64_t));
        p->mr = fs[nb];
        p->mc = fs[nb + 1];
    }
    p->nbatch = 1;
    for (int d = 0; d < nb; d++)
        p->nbatch *= p->bsizes[d];
    p->q = q;
    p->k = k;
    p->v = v;
    p->mask = m;
    p->qr = q->strides[q->ndim - 2];
    p->qc = q->strides[q->ndim - 1];
    p->kr = k->strides[k->ndim - 2];
    p->kc = k->strides[k->ndim - 1];
    p->vr = v->strides[v->ndim - 2];
    p->vc = v->strides[v->ndim - 1];
    p->scale = 1.0 / sqrt((double)p->E);
    return true;
}

od_status od_sdpa_run_math(od_stack *s, od_error *err)
{
    od_stack inner;
    od_status st = od_call_builtin(OD_OPID__scaled_dot_product_attention_math, s->args, s->nargs, &inner, err);
    if (st)
        return st;
    for (int i = 0; i < inner.nrets; i++)
        s->rets[i] = inner.rets[i];
    s->nrets = inner.nrets;
    return OD_OK;
}

od_status od_shape_sdpa(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    (void)id;
    od_sdpa_plan p;
    if (!od_sdpa_plan_of(s, &p))
        return od_error_set(err, OD_EUNSUPPORTED,
                            "_scaled_dot_product_attention_forward: the fused kernel takes float32, float64 or "
                            "bfloat16 inputs of rank >= 2 whose batch dims broadcast, a bool or floating mask "
                            "that broadcasts to the scores and no dropout; other calls run "
                            "_scaled_dot_product_attention_math");
    for (int i = 0; i < 2; i++) {
        memset(&outs[i], 0, sizeof outs[i]);
        outs[i].dtype = p.q->dtype;
        outs[i].device = p.q->device;
        outs[i].alias_of = -1;
    }
    memcpy(outs[0].sizes, p.bsizes, (size_t)p.nb * sizeof(int64_t));
    outs[0].sizes[p.nb] = p.L;
    outs[0].sizes[p.nb + 1] = p.Ev;
    outs[0].ndim = p.nb + 2;
    if (p.need_weights) {
        memcpy(outs[1].sizes, p.bsizes, (size_t)p.nb * sizeof(int64_t));
        outs[1].sizes[p.nb] = p.L;
        outs[1].sizes[p.nb + 1] = p.S;
        outs[1].ndim = p.nb + 2;
    } else {
        outs[1].ndim = 1;
    }
    *nouts = 2;
    return OD_OK;
}
