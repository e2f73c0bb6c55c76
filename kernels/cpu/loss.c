/* loss.c — CPU nll_loss_forward, nll_loss2d_forward and their _backward.
 *
 * Invariants:
 *  - od_nll_plan_of (shape_loss.c) validated the call; self, target and
 *    weight are read through contiguous copies (no copy when already so).
 *  - Every value is computed in double and rounded to self's dtype after
 *    each operation (float32: (float); bfloat16: through float, as c10's
 *    BFloat16 operators do), which is ATen's scalar_t arithmetic exactly:
 *    a product or sum of two float32 values is exact in double.
 *  - The reduced forward replays ATen 1.13's cascade sum (8 levels of
 *    partial sums, 2^max(4, ceil(log2 n) / 8) elements per step), so float32
 *    and bfloat16 sums round as torch's do.
 *  - A target value other than ignore_index outside [0, classes) is refused
 *    with torch's IndexError text before anything is returned (ATen's
 *    per-element backward writes past the row there instead).
 */
#include <inttypes.h>
#include <string.h>

#include "cpu_kernels.h"
#include "iter.h"
#include "od_half.h"
#include "od_shape.h"

#define NLL_LEVELS 8

/* target element i; td: od_tensor_data(t), taken once per loop (that call
 * per element, with x_offset's two divisions, was half of a 8192 x 32000
 * forward) */
static inline int64_t target_at(const od_tensor *t, const void *td, int64_t i)
{
    return t->dtype == OD_UINT8 ? (int64_t)((const uint8_t *)td)[i] : ((const int64_t *)td)[i];
}

/* self's element (class c) of target element i, batch-major over batch * map */
static inline int64_t x_offset(const od_nll_plan *p, int64_t sample, int64_t c, int64_t i)
{
    if (p->map == 1) /* [N, C]: no division */
        return i * sample + c;
    return i / p->map * sample + c * p->map + i % p->map;
}

/* Target elements to read: batch * map, except that a 1-D self of 0
 * classes counts as a batch of one while its 1-D target is empty (ATen's
 * target.numel() == 0 case: nothing read; the mean is then 0 / 0, NaN).
 * Reading target[0] there read past the tensor and crashed the server. */
static int64_t elements(const od_nll_plan *p, const od_tensor *t)
{
    return od_tensor_numel(t) == 0 ? 0 : p->batch * p->map;
}

static int64_t ceil_log2(int64_t n)
{
    int64_t r = 0;
    while (r < 63 && ((int64_t)1 << r) < n)
        r++;
    return r;
}

/* The checked class of element i (batch-major over batch * map), or -1 for
 * an ignored one. */
static od_status class_of(const od_nll_plan *p, const od_tensor *t, const void *td, int64_t i, int64_t *cls,
                          od_error *err)
{
    int64_t c = target_at(t, td, i);
    if (c == p->ignore_index) {
        *cls = -1;
        return OD_OK;
    }
    if (c < 0 || c >= p->classes)
        return od_error_set(err, OD_EINVAL, "Target %" PRId64 " is out of bounds.", c);
    *cls = c;
    return OD_OK;
}

static od_status forward(const od_nll_plan *p, const od_tensor *x, const od_tensor *t, const od_tensor *w,
                         od_tensor *out, od_tensor *tw_out, od_error *err)
{
    od_dtype dt = x->dtype;
    const void *xd = od_tensor_data(x), *wd = w ? od_tensor_data(w) : NULL, *td = od_tensor_data(t);
    int64_t n = elements(p, t), sample = p->classes * p->map;
    od_status st;
    if (p->per_element) {
        void *od = od_tensor_data(out);
        for (int64_t i = 0; i < n; i++) {
            int64_t c = -1;
            if ((st = class_of(p, t, td, i, &c, err)))
                return st;
            double x = c < 0 ? 0.0 : od_cpu_flt_at(xd, dt, x_offset(p, sample, c, i));
            double v = c < 0 ? 0.0 : od_cpu_flt_round(dt, -x * (wd ? od_cpu_flt_at(wd, dt, c) : 1.0));
            od_cpu_flt_set(od, dt, i, v);
        }
        od_cpu_flt_set(od_tensor_data(tw_out), dt, 0, 0.0);
        return OD_OK;
    }
    double wsum[NLL_LEVELS] = {0}, lsum[NLL_LEVELS] = {0};
    int64_t lc = ceil_log2(n) / NLL_LEVELS;
    int64_t power = lc > 4 ? lc : 4, mask = ((int64_t)1 << power) - 1, ignored = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = -1;
        if ((st = class_of(p, t, td, i, &c, err)))
            return st;
        if (c < 0) {
            ignored++;
            continue;
        }
        double v = od_cpu_flt_at(xd, dt, x_offset(p, sample, c, i));
        if (wd) {
            double wv = od_cpu_flt_at(wd, dt, c);
            lsum[0] = od_cpu_flt_round(dt, lsum[0] - od_cpu_flt_round(dt, v * wv));
            wsum[0] = od_cpu_flt_round(dt, wsum[0] + wv);
        } else {
            lsum[0] = od_cpu_flt_round(dt, lsum[0] - v);
        }
        for (int j = 0; j + 1 < NLL_LEVELS; j++) {
            if ((i & (mask << (j * power))) != 0)
                break;
            wsum[j + 1] = od_cpu_flt_round(dt, wsum[j + 1] + wsum[j]);
            lsum[j + 1] = od_cpu_flt_round(dt, lsum[j + 1] + lsum[j]);
            wsum[j] = lsum[j] = 0;
        }
    }
    double total = 0, loss = 0;
    if (wd) {
        for (int j = 0; j < NLL_LEVELS; j++)
            total = od_cpu_flt_round(dt, total + wsum[j]);
    } else {
        total = od_cpu_flt_round(dt, (double)(n - ignored));
    }
    for (int j = 0; j < NLL_LEVELS; j++)
        loss = od_cpu_flt_round(dt, loss + lsum[j]);
    if (p->reduction == 1)
        loss = od_cpu_flt_round(dt, loss / total);
    od_cpu_flt_set(od_tensor_data(out), dt, 0, loss);
    od_cpu_flt_set(od_tensor_data(tw_out), dt, 0, total);
    return OD_OK;
}

/* gi: zeroed, self's shape, contiguous. */
static od_status backward(const od_nll_plan *p, const od_tensor *t, const od_tensor *w, const od_tensor *g,
                          const od_tensor *tw, od_tensor *gi, od_error *err)
{
    od_dtype dt = gi->dtype;
    const void *wd = w ? od_tensor_data(w) : NULL, *gd = od_tensor_data(g), *td = od_tensor_data(t);
    void *gid = od_tensor_data(gi);
    int64_t n = elements(p, t), sample = p->classes * p->map;
    double grad = 0;
    if (!p->per_element) {
        double gv = od_cpu_flt_at(gd, dt, 0);
        grad = -(p->reduction == 1 ? od_cpu_flt_round(dt, gv / od_cpu_flt_at(od_tensor_data(tw), dt, 0)) : gv);
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t c = -1;
        od_status st = class_of(p, t, td, i, &c, err);
        if (st)
            return st;
        if (c < 0)
            continue;
        double wv = wd ? od_cpu_flt_at(wd, dt, c) : 1.0;
        double v = p->per_element ? od_cpu_flt_round(dt, -wv * od_cpu_flt_at(gd, dt, i))
                   : wd           ? od_cpu_flt_round(dt, wv * grad)
                                  : grad;
        od_cpu_flt_set(gid, dt, x_offset(p, sample, c, i), v);
    }
    return OD_OK;
}

od_status od_cpu_nll_loss(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec[2];
    int nouts = 0;
    od_nll_plan p;
    od_status st;
    if ((st = od_nll_plan_of(id, s, &p, err)) || (st = od_shape_nll_loss(id, s, spec, &nouts, err)))
        return st;
    od_tensor *outs[2] = {NULL, NULL}, *x = NULL, *t = NULL, *w = NULL, *g = NULL, *tw = NULL;
    /* the forward writes every element; the backward only the targets' */
    st = p.backward ? od_alloc_outputs(s, spec, nouts, outs, err)
                    : od_alloc_outputs_overwrite(s, spec, nouts, outs, err);
    if (st)
        return st;
    if ((st = od_cpu_to_dtype((od_tensor *)p.target, p.target->dtype, &t, err)) ||
        (p.weight && (st = od_cpu_to_dtype((od_tensor *)p.weight, p.weight->dtype, &w, err))))
        goto done;
    if (p.backward) {
        if ((st = od_cpu_to_dtype((od_tensor *)p.grad_output, p.grad_output->dtype, &g, err)) ||
            (st = od_cpu_to_dtype((od_tensor *)p.total_weight, p.total_weight->dtype, &tw, err)))
            goto done;
        st = backward(&p, t, w, g, tw, outs[0], err);
    } else {
        if ((st = od_cpu_to_dtype((od_tensor *)p.self, p.self->dtype, &x, err)))
            goto done;
        st = forward(&p, x, t, w, outs[0], outs[1], err);
    }
done:
    od_tensor_release(x);
    od_tensor_release(t);
    od_tensor_release(w);
    od_tensor_release(g);
    od_tensor_release(tw);
    if (st) {
        for (int i = 0; i < nouts; i++)
            od_tensor_release(outs[i]);
        return st;
    }
    for (int i = 0; i < nouts; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = nouts;
    return OD_OK;
}
