/* attention.c — CPU _scaled_dot_product_attention_forward: the fused,
 * FlashAttention-style kernel.
 *
 * Invariants:
 *  - od_sdpa_plan_of (kernels/shape_attention.c) decides; calls outside the
 *    plan run _scaled_dot_product_attention_math through the dispatcher.
 *  - Memory is linear in the sequence lengths: per batch a block of BR query
 *    rows meets blocks of BC keys; the scores of one block pair ([BR, BC]),
 *    the block's running max m, sum l and unnormalised output O ([BR, Ev])
 *    are all that is held, plus key/value copies of one batch where they
 *    cannot be handed to BLAS in place (bfloat16, or no unit column stride).
 *  - Online softmax: a new key block with row max mx moves m to
 *    max(m, mx), rescales l and O by exp(m_old - m) and adds exp(s - m);
 *    the output is O / l. A row whose keys are all masked is NaN (torch's
 *    softmax of -inf), a row with S == 0 keys is 0 (an empty product).
 *  - Compute: float64 in double (dgemm); float32 and bfloat16 in float
 *    (sgemm), rounded to the output dtype once. query is scaled by 1/sqrt(E)
 *    first, as ATen's math path does.
 *  - Threads: BLAS calls come from the calling thread (OpenBLAS runs its own
 *    pool, blas.c); the per-row softmax update between them runs under
 *    od_parallel_for. Neither nests in the other.
 *  - need_attn_weights: a second pass recomputes each score block and
 *    writes exp(s - m) / l; otherwise the weights are a [0] tensor (1.13:
 *    "unspecified").
 */
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math")

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_half.h"
#include "od_math.h"
#include "od_parallel.h"
#include "od_shape.h"

#define BR 128 /* query rows per block */
#define BC 256 /* keys per block */

static double load(const void *base, od_dtype dt, int64_t i)
{
    switch (dt) {
    case OD_FLOAT32: return ((const float *)base)[i];
    case OD_FLOAT64: return ((const double *)base)[i];
    case OD_BFLOAT16: return od_bf16_to_float(((const uint16_t *)base)[i]);
    case OD_FLOAT16: return od_half_to_float(((const uint16_t *)base)[i]);
    case OD_BOOL: return ((const uint8_t *)base)[i] ? 0.0 : -INFINITY;
    default: return 0;
    }
}

/* The mask value as ATen's math path adds it: a floating mask is first
 * converted to query's dtype (float for bfloat16's compute it is rounded
 * through bfloat16). */
static double mask_value(const void *base, od_dtype mdt, od_dtype qdt, int64_t i)
{
    double x = load(base, mdt, i);
    if (mdt == OD_BOOL || mdt == qdt)
        return x;
    if (qdt == OD_FLOAT32)
        return (float)x;
    if (qdt == OD_BFLOAT16)
        return od_bf16_to_float(od_double_to_bf16(x));
    return x;
}

/* One batch's operands in compute precision: a pointer BLAS reads (row
 * stride ld, unit column stride), in place or packed into buf. */
typedef struct operand {
    const void *p;
    int64_t ld;
} operand;

typedef struct sdpa_run {
    const od_sdpa_plan *pl;
    bool f64;
    /* per batch */
    const char *qp, *mp; /* element [0,0] of this batch's query / mask */
    operand K, V;
    /* per block */
    int64_t i0, br, j0, bc;
    void *Qs, *Sc, *O, *m, *l; /* [BR,E], [BR,BC], [BR,Ev], [BR], [BR] */
} sdpa_run;

/* Masks block (i0.., j0..) of the scores in place: causal keys after the
 * row, masked-out bool entries to -inf, float masks added. */
#define SDPA_MASK_ROW(T, row, i)                                                                   \
    do {                                                                                           \
        const od_sdpa_plan *pl_ = r->pl;                                                           \
        for (int64_t j = 0; j < r->bc; j++) {                                                      \
            int64_t jj = r->j0 + j;                                                                \
            if (pl_->causal && jj > (i))                                                           \
                (row)[j] = (T)-INFINITY;                                                           \
            else if (pl_->mask)                                                                    \
                (row)[j] += (T)mask_value(r->mp, pl_->mask->dtype, pl_->q->dtype,                 \
                                          (i) * pl_->mr + jj * pl_->mc);                           \
        }                                                                                          \
    } while (0)

#define SDPA_ROWS(T, SUF, EXP)                                                                     \
    static void online_rows_##SUF(void *ctx, int64_t b, int64_t e)                                 \
    {                                                                                              \
        sdpa_run *r = ctx;                                                                         \
        T *Sc = r->Sc, *O = r->O, *m = r->m, *l = r->l;                                            \
        int64_t Ev = r->pl->Ev;                                                                    \
        for (int64_t a = b; a < e; a++) {                                                          \
            T *row = Sc + a * BC;                                                                  \
            if (r->pl->causal || r->pl->mask)                                                      \
                SDPA_MASK_ROW(T, row, r->i0 + a);                                                  \
            T mx = (T)-INFINITY;                                                                   \
            for (int64_t j = 0; j < r->bc; j++)                                                    \
                mx = row[j] > mx ? row[j] : mx;                                                    \
            T mn = m[a] > mx ? m[a] : mx;                                                          \
            if (mn == (T)-INFINITY) { /* everything so far masked: adds nothing */                 \
                memset(row, 0, (size_t)r->bc * sizeof(T));                                         \
                continue;                                                                          \
            }                                                                                      \
            T alpha = EXP(m[a] - mn), sum = 0;                                                     \
            for (int64_t j = 0; j < r->bc; j++) {                                                  \
                T p = EXP(row[j] - mn);                                                            \
                row[j] = p;                                                                        \
                sum += p;                                                                          \
            }                                                                                      \
            l[a] = l[a] * alpha + sum;                                                             \
            m[a] = mn;                                                                             \
            if (alpha != (T)1)                                                                     \
                for (int64_t c = 0; c < Ev; c++)                                                   \
                    O[a * Ev + c] *= alpha;                                                        \
        }                                                                                          \
    }                                                                                              \
    /* Weights pass: exp(s - m) / l over a recomputed score block. */                             \
    static void weight_rows_##SUF(void *ctx, int64_t b, int64_t e)                                 \
    {                                                                                              \
        sdpa_run *r = ctx;                                                                         \
        T *Sc = r->Sc, *m = r->m, *l = r->l;                                                       \
        for (int64_t a = b; a < e; a++) {                                                          \
            T *row = Sc + a * BC;                                                                  \
            if (r->pl->causal || r->pl->mask)                                                      \
                SDPA_MASK_ROW(T, row, r->i0 + a);                                                  \
            if (m[a] == (T)-INFINITY) {                                                            \
                for (int64_t j = 0; j < r->bc; j++)                                                \
                    row[j] = (T)NAN;                                                               \
                continue;                                                                          \
            }                                                                                      \
            T inv = (T)1 / l[a];                                                                   \
            for (int64_t j = 0; j < r->bc; j++)                                                    \
                row[j] = EXP(row[j] - m[a]) * inv;                                                 \
        }                                                                                          \
    }

static inline float exp_f32(float x) { return od_math_exp_f32(x); }
SDPA_ROWS(float, f32, exp_f32)
SDPA_ROWS(double, f64, exp)

/* Sc[br, bc] = Qs[br, E] . K[j0 .. j0+bc, E]^T */
static void scores(sdpa_run *r)
{
    const od_sdpa_plan *pl = r->pl;
    if (pl->E == 0) { /* an empty sum: BLAS may leave C alone with k == 0 */
        memset(r->Sc, 0, (size_t)(r->br * BC) * (r->f64 ? sizeof(double) : sizeof(float)));
        return;
    }
    if (r->f64)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)r->br, (int)r->bc, (int)pl->E, 1.0, r->Qs,
                    (int)pl->E, (const double *)r->K.p + r->j0 * r->K.ld, (int)r->K.ld, 0.0, r->Sc, BC);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)r->br, (int)r->bc, (int)pl->E, 1.0f, r->Qs,
                    (int)pl->E, (const float *)r->K.p + r->j0 * r->K.ld, (int)r->K.ld, 0.0f, r->Sc, BC);
}

/* O[br, Ev] += P[br, bc] . V[j0 .. j0+bc, Ev] */
static void accumulate(sdpa_run *r)
{
    const od_sdpa_plan *pl = r->pl;
    if (pl->Ev == 0)
        return;
    if (r->f64)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)r->br, (int)pl->Ev, (int)r->bc, 1.0, r->Sc,
                    BC, (const double *)r->V.p + r->j0 * r->V.ld, (int)r->V.ld, 1.0, r->O, (int)pl->Ev);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)r->br, (int)pl->Ev, (int)r->bc, 1.0f, r->Sc,
                    BC, (const float *)r->V.p + r->j0 * r->V.ld, (int)r->V.ld, 1.0f, r->O, (int)pl->Ev);
}

/* t's [rows, cols] matrix at base for BLAS: in place when it already is
 * one in the compute dtype, else converted into buf ([rows, cols] dense). */
static operand operand_of(const od_tensor *t, const char *base, int64_t rows, int64_t cols, int64_t rs,
                          int64_t cs, bool f64, void *buf)
{
    od_dtype cdt = f64 ? OD_FLOAT64 : OD_FLOAT32;
    int64_t need = cols > 1 ? cols : 1;
    if (t->dtype == cdt && (cs == 1 || cols <= 1) && (rs >= need || rows <= 1))
        return (operand){base, rows <= 1 ? need : rs};
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            double x = load(base, t->dtype, i * rs + j * cs);
            if (f64)
                ((double *)buf)[i * cols + j] = x;
            else
                ((float *)buf)[i * cols + j] = (float)x;
        }
    return (operand){buf, need};
}

/* Stores value x of the compute precision at out[i] of dtype dt. */
static void store(void *out, od_dtype dt, int64_t i, double x)
{
    switch (dt) {
    case OD_FLOAT32: ((float *)out)[i] = (float)x; break;
    case OD_FLOAT64: ((double *)out)[i] = x; break;
    default: ((uint16_t *)out)[i] = od_float_to_bf16((float)x); break;
    }
}

static double cget(const void *buf, bool f64, int64_t i)
{
    return f64 ? ((const double *)buf)[i] : ((const float *)buf)[i];
}

static void cset(void *buf, bool f64, int64_t i, double x)
{
    if (f64)
        ((double *)buf)[i] = x;
    else
        ((float *)buf)[i] = (float)x;
}

static od_status run_plan(const od_sdpa_plan *pl, od_tensor *out, od_tensor *w, od_error *err)
{
    bool f64 = pl->q->dtype == OD_FLOAT64;
    size_t cs = f64 ? sizeof(double) : sizeof(float), es = od_dtype_size(pl->q->dtype);
    int64_t E = pl->E, Ev = pl->Ev, S = pl->S, L = pl->L;
    if (E > INT_MAX || Ev > INT_MAX || S > INT_MAX || pl->kr > INT_MAX || pl->vr > INT_MAX)
        return od_error_set(err, OD_ETOOLARGE, "_scaled_dot_product_attention_forward: sizes exceed "
                                               "OpenBLAS's 32-bit sizes");
    size_t nq = (size_t)(BR * E), ns = (size_t)BR * BC, no = (size_t)(BR * Ev);
    size_t nk = (size_t)(S * E), nv = (size_t)(S * Ev);
    char *ws = malloc(((nq + ns + no + 2 * BR + nk + nv) ? (nq + ns + no + 2 * BR + nk + nv) : 1) * cs);
    if (!ws)
        return od_error_set(err, OD_ENOMEM, "_scaled_dot_product_attention_forward: out of memory for its "
                                            "workspace");
    sdpa_run r = {.pl = pl, .f64 = f64};
    r.Qs = ws;
    r.Sc = ws + nq * cs;
    r.O = ws + (nq + ns) * cs;
    r.m = ws + (nq + ns + no) * cs;
    r.l = ws + (nq + ns + no + BR) * cs;
    void *kbuf = ws + (nq + ns + no + 2 * BR) * cs, *vbuf = ws + (nq + ns + no + 2 * BR + nk) * cs;
    od_cpu_blas_threads_init();
    const char *qd = od_tensor_data(pl->q), *kd = od_tensor_data(pl->k), *vd = od_tensor_data(pl->v);
    const char *md = pl->mask ? od_tensor_data(pl->mask) : NULL;
    size_t mes = pl->mask ? od_dtype_size(pl->mask->dtype) : 0;
    char *od = od_tensor_data(out), *wd = w ? od_tensor_data(w) : NULL;
    od_dtype odt = out->dtype;
    for (int64_t b = 0; b < pl->nbatch && !od_cancelled(); b++) {
        int64_t qo = 0, ko = 0, vo = 0, mo = 0, rem = b;
        for (int d = pl->nb - 1; d >= 0; d--) {
            int64_t ix = rem % pl->bsizes[d];
            rem /= pl->bsizes[d];
            qo += ix * pl->qb[d];
            ko += ix * pl->kb[d];
            vo += ix * pl->vb[d];
            mo += ix * pl->mb[d];
        }
        r.qp = qd + (size_t)qo * es;
        r.mp = md ? md + (size_t)mo * mes : NULL;
        r.K = operand_of(pl->k, kd + (size_t)ko * es, S, E, pl->kr, pl->kc, f64, kbuf);
        r.V = operand_of(pl->v, vd + (size_t)vo * es, S, Ev, pl->vr, pl->vc, f64, vbuf);
        for (int64_t i0 = 0; i0 < L; i0 += BR) {
            r.i0 = i0;
            r.br = L - i0 < BR ? L - i0 : BR;
            for (int64_t i = 0; i < r.br; i++) {
                for (int64_t e = 0; e < E; e++) {
                    double x = load(r.qp, pl->q->dtype, (i0 + i) * pl->qr + e * pl->qc);
                    /* ATen multiplies by the double scale as a float for float tensors */
                    cset(r.Qs, f64, i * E + e, f64 ? x * pl->scale : (double)((float)x * (float)pl->scale));
                }
                cset(r.m, f64, i, -INFINITY);
                cset(r.l, f64, i, 0);
            }
            memset(r.O, 0, (size_t)(r.br * Ev) * cs);
            /* causal: row i sees keys j <= i, so the block sees keys < i0 + br */
            int64_t kend = pl->causal && i0 + r.br < S ? i0 + r.br : S;
            for (int64_t j0 = 0; j0 < kend; j0 += BC) {
                r.j0 = j0;
                r.bc = kend - j0 < BC ? kend - j0 : BC;
                scores(&r);
                od_parallel_for(r.br, 8, f64 ? online_rows_f64 : online_rows_f32, &r);
                accumulate(&r);
            }
            for (int64_t i = 0; i < r.br; i++) {
                double mi = cget(r.m, f64, i), li = cget(r.l, f64, i);
                char *orow = od + (size_t)((b * L + i0 + i) * Ev) * es;
                for (int64_t c = 0; c < Ev; c++) {
                    double y = S == 0 ? 0.0 : mi == -INFINITY ? NAN : cget(r.O, f64, i * Ev + c) / li;
                    store(orow, odt, c, y);
                }
            }
            if (!wd)
                continue;
            for (int64_t j0 = 0; j0 < S; j0 += BC) {
                r.j0 = j0;
                r.bc = S - j0 < BC ? S - j0 : BC;
                scores(&r);
                od_parallel_for(r.br, 8, f64 ? weight_rows_f64 : weight_rows_f32, &r);
                for (int64_t i = 0; i < r.br; i++) {
                    char *wrow = wd + (size_t)((b * L + i0 + i) * S + j0) * es;
                    for (int64_t j = 0; j < r.bc; j++)
                        store(wrow, odt, j, cget(r.Sc, f64, i * BC + j));
                }
            }
        }
    }
    free(ws);
    if (od_cancelled())
        return od_error_set(err, OD_ETIMEOUT, "_scaled_dot_product_attention_forward: cancelled");
    return OD_OK;
}

od_status od_cpu_sdpa(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_sdpa_plan pl;
    if (!od_sdpa_plan_of(s, &pl))
        return od_sdpa_run_math(s, err);
    od_out_spec spec[2];
    int n = 0;
    od_status st = od_shape_sdpa(OD_OPID_OF_CTX(ctx), s, spec, &n, err);
    od_tensor *outs[2] = {NULL, NULL};
    if (st || (st = od_alloc_outputs_overwrite(s, spec, 2, outs, err)))
        return st;
    if (od_tensor_numel(outs[0]) > 0 || (pl.need_weights && od_tensor_numel(outs[1]) > 0))
        st = run_plan(&pl, outs[0], pl.need_weights ? outs[1] : NULL, err);
    if (st) {
        od_tensor_release(outs[0]);
        od_tensor_release(outs[1]);
        return st;
    }
    s->rets[0] = od_tensor_v(outs[0]);
    s->rets[1] = od_tensor_v(outs[1]);
    s->nrets = 2;
    return OD_OK;
}
