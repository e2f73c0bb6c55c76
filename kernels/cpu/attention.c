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
 *    the output is O / l. Causal rows skip the key blocks past the diagonal
 *    only where no score can be NaN or inf. A row whose keys are all masked is NaN (torch's
 *    softmax of -inf), a row with S == 0 keys is 0 (an empty product).
 *  - Compute: float64 in double (dgemm); float32 and bfloat16 in float
 *    (sgemm), rounded to the output dtype once. query is scaled by 1/sqrt(E)
 *    first, as ATen's math path does.
 *  - Threads: od_parallel_for over (batch, query block) tasks; each runs its
 *    gemms itself, with blocks small enough (m*n*k <= 2^18) that OpenBLAS
 *    does not thread them, so no pool nests in the other and a block never
 *    waits for another thread (a sync per block costs a scheduler quantum
 *    on a loaded machine).
 *  - need_attn_weights: a second pass recomputes each score block and
 *    writes exp(s - m) / l; otherwise the weights are a [0] tensor (1.13:
 *    "unspecified").
 */
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math")

#include <cblas.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_half.h"
#include "od_math.h"
#include "od_parallel.h"
#include "od_shape.h"

#define BR 64 /* query rows per block */
/* Keys per block: at most 256, and few enough that each block product stays
 * under OpenBLAS's size for threading one gemm (m*n*k <= 65536*4 in 0.3.x),
 * so the gemms run on the calling worker and blocks parallelise outside. */
#define BC_MAX 256
#define BLAS_SERIAL_MNK 262144

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
 * converted to query's dtype (rounded through bfloat16 for a bfloat16
 * query, whose compute is float). */
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

/* One batch's key or value matrix in compute precision: a pointer BLAS
 * reads (row stride ld, unit column stride), in place or packed. */
typedef struct operand {
    const void *p;
    int64_t ld;
} operand;

/* One worker's state: its workspace and the block it is on. */
typedef struct sdpa_run {
    const od_sdpa_plan *pl;
    bool f64;
    int64_t bcmax;       /* keys per block, and the scores' row stride */
    const char *qp, *mp; /* element [0,0] of this batch's query / mask */
    operand K, V;
    double kmax;         /* max |key| of this batch (NaN when any is NaN) */
    int64_t i0, br, j0, bc;
    void *Qs, *Sc, *O, *m, *l, *kbuf, *vbuf; /* [BR,E] [BR,bcmax] [BR,Ev] [BR] [BR] [S,E] [S,Ev] */
} sdpa_run;

/* Masks row a of the block's scores as ATen's math path does, by adding
 * -inf (causal keys after the row, false bool entries) or the floating
 * mask: a NaN or +inf score under the mask still makes its row NaN. */
#define SDPA_MASK_ROW(T, row, a)                                                                   \
    do {                                                                                           \
        const od_sdpa_plan *pl_ = r->pl;                                                           \
        int64_t i_ = r->i0 + (a);                                                                  \
        for (int64_t j = 0; j < r->bc; j++) {                                                      \
            int64_t jj = r->j0 + j;                                                                \
            if (pl_->causal && jj > i_) /* ATen adds -inf: NaN and +inf scores give NaN */        \
                (row)[j] += (T)-INFINITY;                                                          \
            else if (pl_->mask)                                                                    \
                (row)[j] += (T)mask_value(r->mp, pl_->mask->dtype, pl_->q->dtype,                 \
                                          i_ * pl_->mr + jj * pl_->mc);                            \
        }                                                                                          \
    } while (0)

/* Row kernels, float: fixed 8-wide lanes (gcc vectorises loops it covers
 * without an epilogue; softmax.c's pattern), exp of od_math.h. */
OD_CPU_CLONES static float rowmax_f32(const float *restrict x, int64_t n)
{
    float a[8];
    for (int j = 0; j < 8; j++)
        a[j] = -INFINITY;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            a[j] = x[i + j] > a[j] ? x[i + j] : a[j];
    float m = a[0];
    for (int j = 1; j < 8; j++)
        m = a[j] > m ? a[j] : m;
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

/* x[i] = exp(x[i] - m) (times scale); returns their sum (double lanes). m is
 * the row's max, so the argument is <= 0 or NaN: od_math_exp_nonpos_f32 serves. */
OD_CPU_CLONES static double expsum_f32(float *restrict x, int64_t n, float m, float scale)
{
    double s8[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            float e = od_math_exp_nonpos_f32(x[i + j] - m) * scale;
            x[i + j] = e;
            s8[j] += (double)e;
        }
    double s = ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
    for (; i < n; i++) {
        float e = od_math_exp_nonpos_f32(x[i] - m) * scale;
        x[i] = e;
        s += (double)e;
    }
    return s;
}

static double rowmax_f64(const double *x, int64_t n)
{
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

static double expsum_f64(double *x, int64_t n, double m, double scale)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = exp(x[i] - m) * scale;
        s += x[i];
    }
    return s;
}

#define SDPA_ROWS(T, SUF)                                                                          \
    /* Online update of the block's rows with the new key block. */                                \
    static void online_rows_##SUF(sdpa_run *r)                                                     \
    {                                                                                              \
        T *Sc = r->Sc, *O = r->O, *m = r->m, *l = r->l;                                            \
        int64_t Ev = r->pl->Ev;                                                                    \
        for (int64_t a = 0; a < r->br; a++) {                                                      \
            T *row = Sc + a * r->bcmax;                                                            \
            if (r->pl->causal || r->pl->mask)                                                      \
                SDPA_MASK_ROW(T, row, a);                                                          \
            T mx = rowmax_##SUF(row, r->bc);                                                       \
            T mn = m[a] > mx ? m[a] : mx;                                                          \
            if (mn == (T)-INFINITY) { /* everything so far masked: adds nothing */                 \
                memset(row, 0, (size_t)r->bc * sizeof(T));                                         \
                continue;                                                                          \
            }                                                                                      \
            T alpha = m[a] == (T)-INFINITY ? (T)0 : (T)exp((double)(m[a] - mn));                   \
            l[a] = l[a] * alpha + (T)expsum_##SUF(row, r->bc, mn, (T)1);                           \
            m[a] = mn;                                                                             \
            if (alpha != (T)1)                                                                     \
                for (int64_t c = 0; c < Ev; c++)                                                   \
                    O[a * Ev + c] *= alpha;                                                        \
        }                                                                                          \
    }                                                                                              \
    /* Weights pass: exp(s - m) / l over a recomputed score block. */                             \
    static void weight_rows_##SUF(sdpa_run *r)                                                     \
    {                                                                                              \
        T *Sc = r->Sc, *m = r->m, *l = r->l;                                                       \
        for (int64_t a = 0; a < r->br; a++) {                                                      \
            T *row = Sc + a * r->bcmax;                                                            \
            if (r->pl->causal || r->pl->mask)                                                      \
                SDPA_MASK_ROW(T, row, a);                                                          \
            if (m[a] == (T)-INFINITY) {                                                            \
                for (int64_t j = 0; j < r->bc; j++)                                                \
                    row[j] = (T)NAN;                                                               \
                continue;                                                                          \
            }                                                                                      \
            expsum_##SUF(row, r->bc, m[a], (T)1 / l[a]);                                           \
        }                                                                                          \
    }

SDPA_ROWS(float, f32)
SDPA_ROWS(double, f64)

/* Sc[br, bc] = Qs[br, E] . K[j0 .. j0+bc, E]^T */
static void scores(sdpa_run *r)
{
    const od_sdpa_plan *pl = r->pl;
    if (pl->E == 0) { /* an empty sum: BLAS may leave C alone with k == 0 */
        memset(r->Sc, 0, (size_t)(r->br * r->bcmax) * (r->f64 ? sizeof(double) : sizeof(float)));
        return;
    }
    if (r->f64)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)r->br, (int)r->bc, (int)pl->E, 1.0, r->Qs,
                    (int)pl->E, (const double *)r->K.p + r->j0 * r->K.ld, (int)r->K.ld, 0.0, r->Sc, (int)r->bcmax);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)r->br, (int)r->bc, (int)pl->E, 1.0f, r->Qs,
                    (int)pl->E, (const float *)r->K.p + r->j0 * r->K.ld, (int)r->K.ld, 0.0f, r->Sc, (int)r->bcmax);
}

/* O[br, Ev] += P[br, bc] . V[j0 .. j0+bc, Ev] */
static void accumulate(sdpa_run *r)
{
    const od_sdpa_plan *pl = r->pl;
    if (pl->Ev == 0)
        return;
    if (r->f64)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)r->br, (int)pl->Ev, (int)r->bc, 1.0, r->Sc,
                    (int)r->bcmax, (const double *)r->V.p + r->j0 * r->V.ld, (int)r->V.ld, 1.0, r->O, (int)pl->Ev);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)r->br, (int)pl->Ev, (int)r->bc, 1.0f, r->Sc,
                    (int)r->bcmax, (const float *)r->V.p + r->j0 * r->V.ld, (int)r->V.ld, 1.0f, r->O, (int)pl->Ev);
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

/* Stores x at out[i] of dtype dt. */
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

/* max |x| over a [rows, cols] matrix (row stride ld) in compute precision;
 * NaN if any element is NaN. */
static double absmax(const void *p, bool f64, int64_t rows, int64_t cols, int64_t ld)
{
    double m = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            double x = fabs(cget(p, f64, i * ld + j));
            if (!(x <= m))
                m = x; /* NaN sticks: nothing compares above it */
            if (m != m)
                return m;
        }
    return m;
}

/* The whole call: tasks (batch, query block), batch-major, so a worker's
 * consecutive tasks share the batch's packed keys and values. */
typedef struct sdpa_job {
    const od_sdpa_plan *pl;
    bool f64;
    int64_t nqb, bcmax;
    const char *qd, *kd, *vd, *md;
    char *od, *wd;
    atomic_bool failed; /* a worker found no memory for its workspace */
} sdpa_job;

/* One query block of batch b: online softmax over the key blocks, then the
 * output rows, then (asked for) the weights. */
static void run_block(sdpa_run *r, int64_t b, const sdpa_job *jb)
{
    const od_sdpa_plan *pl = r->pl;
    bool f64 = r->f64;
    int64_t E = pl->E, Ev = pl->Ev, S = pl->S, L = pl->L;
    size_t cs = f64 ? sizeof(double) : sizeof(float), es = od_dtype_size(pl->q->dtype);
    for (int64_t i = 0; i < r->br; i++) {
        for (int64_t e = 0; e < E; e++) {
            double x = load(r->qp, pl->q->dtype, (r->i0 + i) * pl->qr + e * pl->qc);
            /* ATen multiplies a float tensor by the double scale as a float */
            cset(r->Qs, f64, i * E + e, f64 ? x * pl->scale : (double)((float)x * (float)pl->scale));
        }
        cset(r->m, f64, i, -INFINITY);
        cset(r->l, f64, i, 0);
    }
    memset(r->O, 0, (size_t)(r->br * Ev) * cs);
    /* causal: row i sees keys j <= i, so the block needs keys < i0 + br only
     * when no later score can be NaN or inf (ATen's masked NaN/+inf makes a
     * row NaN): |score| <= E * max|q| * max|k| bounds them all */
    int64_t kend = S;
    if (pl->causal && r->i0 + r->br < S) {
        double qmax = absmax(r->Qs, f64, r->br, E, E), bound = (double)E * qmax * r->kmax;
        if (bound == bound && bound < (f64 ? DBL_MAX : FLT_MAX) / 4)
            kend = r->i0 + r->br;
    }
    for (int64_t j0 = 0; j0 < kend; j0 += r->bcmax) {
        r->j0 = j0;
        r->bc = kend - j0 < r->bcmax ? kend - j0 : r->bcmax;
        scores(r);
        if (f64)
            online_rows_f64(r);
        else
            online_rows_f32(r);
        accumulate(r);
    }
    for (int64_t i = 0; i < r->br; i++) {
        double mi = cget(r->m, f64, i), inv = 1.0 / cget(r->l, f64, i);
        char *orow = jb->od + (size_t)((b * L + r->i0 + i) * Ev) * es;
        for (int64_t c = 0; c < Ev; c++)
            store(orow, pl->q->dtype, c,
                  S == 0 ? 0.0 : mi == -INFINITY ? NAN : cget(r->O, f64, i * Ev + c) * (f64 ? inv : (float)inv));
    }
    if (!jb->wd)
        return;
    for (int64_t j0 = 0; j0 < S; j0 += r->bcmax) {
        r->j0 = j0;
        r->bc = S - j0 < r->bcmax ? S - j0 : r->bcmax;
        scores(r);
        if (f64)
            weight_rows_f64(r);
        else
            weight_rows_f32(r);
        for (int64_t i = 0; i < r->br; i++) {
            char *wrow = jb->wd + (size_t)((b * L + r->i0 + i) * S + j0) * es;
            for (int64_t j = 0; j < r->bc; j++)
                store(wrow, pl->q->dtype, j, cget(r->Sc, f64, i * r->bcmax + j));
        }
    }
}

static void run_tasks(void *ctx, int64_t t0, int64_t t1)
{
    sdpa_job *jb = ctx;
    const od_sdpa_plan *pl = jb->pl;
    bool f64 = jb->f64;
    size_t cs = f64 ? sizeof(double) : sizeof(float), es = od_dtype_size(pl->q->dtype);
    size_t mes = pl->mask ? od_dtype_size(pl->mask->dtype) : 0;
    size_t nq = (size_t)(BR * pl->E), ns = (size_t)(BR * jb->bcmax), no = (size_t)(BR * pl->Ev);
    size_t nk = (size_t)(pl->S * pl->E), nv = (size_t)(pl->S * pl->Ev), tot = nq + ns + no + 2 * BR + nk + nv;
    char *ws = malloc(tot * cs);
    if (!ws) {
        atomic_store(&jb->failed, true);
        return;
    }
    sdpa_run r = {.pl = pl, .f64 = f64, .bcmax = jb->bcmax};
    r.Qs = ws;
    r.Sc = ws + nq * cs;
    r.O = ws + (nq + ns) * cs;
    r.m = ws + (nq + ns + no) * cs;
    r.l = ws + (nq + ns + no + BR) * cs;
    r.kbuf = ws + (nq + ns + no + 2 * BR) * cs;
    r.vbuf = ws + (nq + ns + no + 2 * BR + nk) * cs;
    int64_t cur = -1;
    for (int64_t t = t0; t < t1; t++) {
        int64_t b = t / jb->nqb;
        if (b != cur) {
            int64_t qo = 0, ko = 0, vo = 0, mo = 0, rem = b;
            for (int d = pl->nb - 1; d >= 0; d--) {
                int64_t ix = rem % pl->bsizes[d];
                rem /= pl->bsizes[d];
                qo += ix * pl->qb[d];
                ko += ix * pl->kb[d];
                vo += ix * pl->vb[d];
                mo += ix * pl->mb[d];
            }
            r.qp = jb->qd + (size_t)qo * es;
            r.mp = jb->md ? jb->md + (size_t)mo * mes : NULL;
            r.K = operand_of(pl->k, jb->kd + (size_t)ko * es, pl->S, pl->E, pl->kr, pl->kc, f64, r.kbuf);
            r.V = operand_of(pl->v, jb->vd + (size_t)vo * es, pl->S, pl->Ev, pl->vr, pl->vc, f64, r.vbuf);
            r.kmax = pl->causal ? absmax(r.K.p, f64, pl->S, pl->E, r.K.ld) : 0;
            cur = b;
        }
        r.i0 = (t % jb->nqb) * BR;
        r.br = pl->L - r.i0 < BR ? pl->L - r.i0 : BR;
        run_block(&r, b, jb);
    }
    free(ws);
}

static od_status run_plan(const od_sdpa_plan *pl, od_tensor *out, od_tensor *w, od_error *err)
{
    int64_t wide = pl->E > pl->Ev ? pl->E : pl->Ev;
    if (wide > INT_MAX || pl->S > INT_MAX || pl->kr > INT_MAX || pl->vr > INT_MAX)
        return od_error_set(err, OD_ETOOLARGE, "_scaled_dot_product_attention_forward: sizes exceed "
                                               "OpenBLAS's 32-bit sizes");
    int64_t bcmax = BLAS_SERIAL_MNK / (BR * (wide > 1 ? wide : 1)) / 16 * 16;
    bcmax = bcmax < 16 ? 16 : bcmax > BC_MAX ? BC_MAX : bcmax;
    sdpa_job jb = {.pl = pl, .f64 = pl->q->dtype == OD_FLOAT64, .nqb = (pl->L + BR - 1) / BR, .bcmax = bcmax,
                   .qd = od_tensor_data(pl->q), .kd = od_tensor_data(pl->k), .vd = od_tensor_data(pl->v),
                   .md = pl->mask ? od_tensor_data(pl->mask) : NULL, .od = od_tensor_data(out),
                   .wd = w ? od_tensor_data(w) : NULL};
    atomic_init(&jb.failed, false);
    od_cpu_blas_enter(INFINITY);
    od_parallel_for(pl->nbatch * jb.nqb, 1, run_tasks, &jb);
    if (atomic_load(&jb.failed))
        return od_error_set(err, OD_ENOMEM, "_scaled_dot_product_attention_forward: out of memory for its "
                                            "workspace");
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
