/* dist.c — _cdist_forward, _cdist_backward, _pdist_forward and
 * _pdist_backward on the CPU.
 *
 * Invariants: od_dist_plan_of (shape_dist.c) checked the call; the math is
 * od_dist.h's, shared with CUDA. Operands are contiguous copies (cdist's
 * expanded to the broadcast batch). Each distance accumulates over the
 * columns in order in the storage type, as ATen's scalar loop: the second
 * operand is transposed ([m, rows], each row padded by a cache line when it
 * is a multiple of 4 KiB) so one row of the first operand updates
 * a strip of distances per column, which vectorises across distances while
 * keeping every distance's own order. The backward ops keep ATen's order
 * per gradient element (cdist: over x2's rows; pdist: the pairs (i, j > i)
 * in order, adding into row i and subtracting from row j), split by rows
 * (cdist) or by column strips (pdist) so no two threads write one element.
 * _cdist_forward's matrix-product path is _euclidean_dist's (od_dist_mm).
 */
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math")

#include <immintrin.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_parallel.h"
#include "od_shape.h"

enum { STRIP = 256 }; /* distances per accumulator strip */

typedef struct dist_job {
    const od_dist_plan *pl;
    int kind;
    const void *a, *bt; /* a [B, r1, m]; bt [B, m, ld] (pdist: [m, ld]), its first r2 (n) columns used */
    int64_t ld;
    const void *grad, *dist, *b;
    void *out;
} dist_job;

/* float32 p = 1 and p = 2 strips with the distances held in registers
 * across all m columns, 64 at a time (then 16, masked): the strip loop
 * below loads and stores its accumulators for every column and ran scalar
 * on each row's last n % 16 distances, and a 2048 x 64 pdist took twice
 * torch's time. Each distance still adds its columns in order, d * d (or
 * |d|) then + as the strip loop's vector body does, and p = 2 ends in a
 * correctly rounded square root. */
#define STRIP512_(NAME, TERM, FIN)                                                                                   \
    __attribute__((target("avx512f"))) static void NAME(const float *a, const float *bt, int64_t ld, int64_t m, \
                                                        int64_t nj, float *acc)                                 \
    {                                                                                                           \
        int64_t j0 = 0;                                                                                         \
        for (; j0 + 64 <= nj; j0 += 64) {                                                                       \
            __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                                         \
            for (int64_t k = 0; k < m; k++) {                                                                   \
                const __m512 av = _mm512_set1_ps(a[k]);                                                         \
                const float *r = bt + k * ld + j0;                                                              \
                __m512 d0 = _mm512_sub_ps(av, _mm512_loadu_ps(r)), d1 = _mm512_sub_ps(av, _mm512_loadu_ps(r + 16)); \
                __m512 d2 = _mm512_sub_ps(av, _mm512_loadu_ps(r + 32)), d3 = _mm512_sub_ps(av, _mm512_loadu_ps(r + 48)); \
                s0 = _mm512_add_ps(s0, TERM(d0)), s1 = _mm512_add_ps(s1, TERM(d1));                             \
                s2 = _mm512_add_ps(s2, TERM(d2)), s3 = _mm512_add_ps(s3, TERM(d3));                             \
            }                                                                                                   \
            _mm512_storeu_ps(acc + j0, FIN(s0)), _mm512_storeu_ps(acc + j0 + 16, FIN(s1));                      \
            _mm512_storeu_ps(acc + j0 + 32, FIN(s2)), _mm512_storeu_ps(acc + j0 + 48, FIN(s3));                 \
        }                                                                                                       \
        for (; j0 < nj; j0 += 16) {                                                                             \
            __mmask16 mk = nj - j0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nj - j0)) - 1);              \
            __m512 s0 = _mm512_setzero_ps();                                                                    \
            for (int64_t k = 0; k < m; k++) {                                                                   \
                __m512 d0 = _mm512_sub_ps(_mm512_set1_ps(a[k]), _mm512_maskz_loadu_ps(mk, bt + k * ld + j0));   \
                s0 = _mm512_add_ps(s0, TERM(d0));                                                               \
            }                                                                                                   \
            _mm512_mask_storeu_ps(acc + j0, mk, FIN(s0));                                                       \
        }                                                                                                       \
    }
#define SQ512_(d) _mm512_mul_ps((d), (d))
#define ABS512_(d) _mm512_abs_ps(d)
#define ID512_(v) (v)
STRIP512_(strip_p2_f32_512, SQ512_, _mm512_sqrt_ps) /* sqrt as od_dist_finish: correctly rounded */
STRIP512_(strip_p1_f32_512, ABS512_, ID512_)
#undef STRIP512_

/* true when the AVX-512 strips above gave the distances (float32, p = 1
 * or 2; od_dist_finish applied) */
static bool strip512_f32(int kind, const float *a, const float *bt, int64_t ld, int64_t m, int64_t nj, float *acc)
{
    if ((kind != OD_DIST_P2 && kind != OD_DIST_P1) || !__builtin_cpu_supports("avx512f"))
        return false;
    (kind == OD_DIST_P2 ? strip_p2_f32_512 : strip_p1_f32_512)(a, bt, ld, m, nj, acc);
    return true;
}
static bool strip512_f64(int kind, const double *a, const double *bt, int64_t ld, int64_t m, int64_t nj, double *acc)
{
    (void)kind, (void)a, (void)bt, (void)ld, (void)m, (void)nj, (void)acc;
    return false;
}

/* float32 p = 2 and p = 1 pdist backward of one strip of 16 columns from
 * k0 (masked at m), as ATen's backward_down_column_pdist runs it: row i's
 * sum in a register across its pairs, each later row loaded, reduced and
 * stored. The terms and their order are PDIST_BW_LOOP_'s below, whose
 * variable-length inner loop ran at 1.6x torch's time. */
#define PDIST_BW512_(NAME, TERM)                                                                                \
    __attribute__((target("avx512f"))) static void NAME(const float *x, const float *g, const float *d,         \
                                                        float *out, int64_t n, int64_t m, int64_t k0)            \
    {                                                                                                           \
        const __mmask16 mk = m - k0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (m - k0)) - 1);            \
        const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);                                    \
        (void)one;                                                                                              \
        int64_t idx = 0;                                                                                        \
        for (int64_t i = 0; i < n; i++) {                                                                       \
            const __m512 xi = _mm512_maskz_loadu_ps(mk, x + i * m + k0);                                        \
            __m512 acc = _mm512_maskz_loadu_ps(mk, out + i * m + k0);                                           \
            for (int64_t q = i + 1; q < n; q++, idx++) {                                                        \
                const __m512 diff = _mm512_sub_ps(xi, _mm512_maskz_loadu_ps(mk, x + q * m + k0));              \
                const float gq = g[idx], dq = d[idx];                                                           \
                (void)dq;                                                                                       \
                const __m512 v = TERM;                                                                          \
                float *oq = out + q * m + k0;                                                                   \
                acc = _mm512_add_ps(acc, v);                                                                    \
                _mm512_mask_storeu_ps(oq, mk, _mm512_sub_ps(_mm512_maskz_loadu_ps(mk, oq), v));                 \
            }                                                                                                   \
            _mm512_mask_storeu_ps(out + i * m + k0, mk, acc);                                                   \
        }                                                                                                       \
    }
PDIST_BW512_(pdist_bw_p2_f32_512,
             dq == 0.0f ? zero : _mm512_div_ps(_mm512_mul_ps(_mm512_set1_ps(gq), diff), _mm512_set1_ps(dq)))
PDIST_BW512_(pdist_bw_p1_f32_512,
             _mm512_mul_ps(_mm512_set1_ps(gq), _mm512_sub_ps(_mm512_mask_mov_ps(zero, _mm512_cmp_ps_mask(diff, zero, _CMP_GT_OQ), one),
                                                             _mm512_mask_mov_ps(zero, _mm512_cmp_ps_mask(diff, zero, _CMP_LT_OQ), one))))
#undef PDIST_BW512_

/* true when the AVX-512 loops above ran the strip (float32, p = 1 or 2) */
static bool pdist_bw512_f32(int kind, const float *x, const float *g, const float *d, float *out, int64_t n, int64_t m,
                            int64_t k0)
{
    if ((kind != OD_DIST_P2 && kind != OD_DIST_P1) || !__builtin_cpu_supports("avx512f"))
        return false;
    (kind == OD_DIST_P2 ? pdist_bw_p2_f32_512 : pdist_bw_p1_f32_512)(x, g, d, out, n, m, k0);
    return true;
}
static bool pdist_bw512_f64(int kind, const double *x, const double *g, const double *d, double *out, int64_t n,
                            int64_t m, int64_t k0)
{
    (void)kind, (void)x, (void)g, (void)d, (void)out, (void)n, (void)m, (void)k0;
    return false;
}

/* The backward loops for one kind of distance, EXPR its gradient term of
 * diff (od_dist_bw's, written out for p = 1 and p = 2 so that no switch
 * sits in the innermost loop: with one there, a 2048 x 2048 x 64 cdist
 * backward took 159 ms and a 1024 x 64 pdist backward 75 ms, torch 15 and
 * 2.3). The order of each gradient element's terms is unchanged. */
#define CDIST_BW_LOOP_(T, EXPR)                                             \
    for (int64_t q = 0; q < p->r2; q++) {                                   \
        const T *row = x2 + q * p->m;                                       \
        T gq = g[q], dq = d[q];                                             \
        (void)dq; /* p = 1's term has no distance */                        \
        for (int64_t k = 0; k < p->m; k++) {                                \
            T diff = a[k] - row[k];                                         \
            out[k] += EXPR;                                                 \
        }                                                                   \
    }
/* row i's strip is summed in acc (starting from what the pairs before
 * left there, so in the same order) and stored once: through out itself,
 * which may alias row q's for all the compiler knows, each pair waited on
 * the last one's store */
#define PDIST_BW_LOOP_(T, EXPR)                                             \
    for (int64_t i = 0; i < n; i++) {                                       \
        const T *xi = x + i * m;                                            \
        T *oi = out + i * m, acc[16];                                       \
        for (int64_t k = k0; k < k1; k++)                                   \
            acc[k - k0] = oi[k];                                            \
        for (int64_t q = i + 1; q < n; q++, idx++) {                        \
            T gq = g[idx], dq = d[idx];                                     \
            (void)dq;                                                       \
            const T *xq = x + q * m;                                        \
            T *oq = out + q * m;                                            \
            for (int64_t k = k0; k < k1; k++) {                             \
                T diff = xi[k] - xq[k], v = EXPR;                           \
                acc[k - k0] += v;                                           \
                oq[k] -= v;                                                 \
            }                                                               \
        }                                                                   \
        for (int64_t k = k0; k < k1; k++)                                   \
            oi[k] = acc[k - k0];                                            \
    }

#define DIST_TYPED(T, SFX, ABS)                                                                                 \
    /* acc[0..nj) over columns k of row a against bt[k * ld + j0 ...] */                                      \
    OD_CPU_CLONES static void strip_##SFX(int kind, T p, const T *restrict a, const T *restrict bt, int64_t ld,    \
                                          int64_t m, int64_t nj, T *restrict acc)                                 \
    {                                                                                                         \
        if (strip512_##SFX(kind, a, bt, ld, m, nj, acc))                                                      \
            return;                                                                                           \
        for (int64_t j = 0; j < nj; j++)                                                                      \
            acc[j] = 0;                                                                                       \
        for (int64_t k = 0; k < m; k++) {                                                                     \
            const T av = a[k], *row = bt + k * ld;                                                            \
            switch (kind) {                                                                                   \
            case OD_DIST_P1:                                                                                  \
                for (int64_t j = 0; j < nj; j++)                                                              \
                    acc[j] += ABS(av - row[j]);                                                               \
                break;                                                                                        \
            case OD_DIST_P2:                                                                                  \
                for (int64_t j = 0; j < nj; j++) {                                                            \
                    T d = av - row[j];                                                                        \
                    acc[j] += d * d;                                                                          \
                }                                                                                             \
                break;                                                                                        \
            case OD_DIST_PINF:                                                                                \
                for (int64_t j = 0; j < nj; j++) {                                                            \
                    T d = ABS(av - row[j]);                                                                   \
                    acc[j] = acc[j] < d ? d : acc[j];                                                         \
                }                                                                                             \
                break;                                                                                        \
            default:                                                                                          \
                for (int64_t j = 0; j < nj; j++)                                                              \
                    acc[j] = od_dist_red_##SFX(kind, acc[j], od_dist_map_##SFX(kind, av - row[j], p));          \
                break;                                                                                        \
            }                                                                                                 \
        }                                                                                                     \
        for (int64_t j = 0; j < nj; j++)                                                                      \
            acc[j] = od_dist_finish_##SFX(kind, acc[j], p);                                                   \
    }                                                                                                         \
    /* cdist rows [b, e) of the flattened [B * r1] */                                                         \
    static void cdist_rows_##SFX(void *ctx, int64_t b, int64_t e)                                             \
    {                                                                                                         \
        const dist_job *j = ctx;                                                                              \
        const od_dist_plan *p = j->pl;                                                                        \
        T acc[STRIP];                                                                                         \
        for (int64_t r = b; r < e; r++) {                                                                     \
            int64_t bi = r / p->r1;                                                                           \
            const T *a = (const T *)j->a + r * p->m, *bt = (const T *)j->bt + bi * p->m * j->ld;              \
            T *out = (T *)j->out + r * p->r2;                                                                 \
            for (int64_t j0 = 0; j0 < p->r2; j0 += STRIP) {                                                   \
                int64_t nj = p->r2 - j0 < STRIP ? p->r2 - j0 : STRIP;                                         \
                strip_##SFX(j->kind, (T)p->p, a, bt + j0, j->ld, p->m, nj, acc);                              \
                memcpy(out + j0, acc, sizeof(T) * (size_t)nj);                                                \
            }                                                                                                 \
        }                                                                                                     \
    }                                                                                                         \
    /* pdist row i: the pairs (i, j > i) */                                                                   \
    static void pdist_row_##SFX(const dist_job *j, int64_t i)                                                 \
    {                                                                                                         \
        const od_dist_plan *p = j->pl;                                                                        \
        int64_t n = p->r1;                                                                                    \
        T acc[STRIP];                                                                                         \
        const T *a = (const T *)j->a + i * p->m, *bt = j->bt;                                                 \
        T *out = (T *)j->out + i * (n - 1) - i * (i - 1) / 2; /* the pair (i, i + 1) */                      \
        for (int64_t j0 = i + 1; j0 < n; j0 += STRIP) {                                                       \
            int64_t nj = n - j0 < STRIP ? n - j0 : STRIP;                                                     \
            strip_##SFX(j->kind, (T)p->p, a, bt + j0, j->ld, p->m, nj, acc);                                      \
            memcpy(out + (j0 - i - 1), acc, sizeof(T) * (size_t)nj);                                          \
        }                                                                                                     \
    }                                                                                                         \
    /* tasks [b, e): task q does rows q and n - 1 - q, so tasks weigh alike */                                \
    static void pdist_tasks_##SFX(void *ctx, int64_t b, int64_t e)                                            \
    {                                                                                                         \
        const dist_job *j = ctx;                                                                              \
        int64_t n = j->pl->r1;                                                                                \
        for (int64_t q = b; q < e; q++) {                                                                     \
            pdist_row_##SFX(j, q);                                                                            \
            if (n - 1 - q != q)                                                                               \
                pdist_row_##SFX(j, n - 1 - q);                                                                \
        }                                                                                                     \
    }                                                                                                         \
    /* cdist backward rows [b, e) of the flattened [B * r1]: out[r, k] = sum over x2's rows */                \
    OD_CPU_CLONES static void cdist_bw_rows_##SFX(void *ctx, int64_t b, int64_t e)                            \
    {                                                                                                         \
        const dist_job *j = ctx;                                                                              \
        const od_dist_plan *p = j->pl;                                                                        \
        T pp = (T)p->p;                                                                                       \
        for (int64_t r = b; r < e; r++) {                                                                     \
            int64_t bi = r / p->r1;                                                                           \
            const T *a = (const T *)j->a + r * p->m, *x2 = (const T *)j->b + bi * p->r2 * p->m;               \
            const T *g = (const T *)j->grad + r * p->r2, *d = (const T *)j->dist + r * p->r2;                 \
            T *out = (T *)j->out + r * p->m;                                                                  \
            /* the kind tested once, not per element, so each loop vectorises */                           \
            switch (j->kind) {                                                                                \
            case OD_DIST_P2: CDIST_BW_LOOP_(T, dq == (T)0 ? (T)0 : gq * diff / dq) break;                     \
            case OD_DIST_P1: CDIST_BW_LOOP_(T, gq * (T)((diff > (T)0) - (diff < (T)0))) break;                \
            default: CDIST_BW_LOOP_(T, od_dist_bw_##SFX(j->kind, diff, gq, dq, pp)) break;                    \
            }                                                                                                 \
        }                                                                                                     \
    }                                                                                                         \
    /* pdist backward column strips [b, e) of 16 columns each */                                              \
    OD_CPU_CLONES static void pdist_bw_cols_##SFX(void *ctx, int64_t b, int64_t e)                            \
    {                                                                                                         \
        const dist_job *j = ctx;                                                                              \
        const od_dist_plan *p = j->pl;                                                                        \
        int64_t n = p->r1, m = p->m;                                                                          \
        T pp = (T)p->p;                                                                                       \
        const T *x = j->a, *g = j->grad, *d = j->dist;                                                        \
        T *out = j->out;                                                                                      \
        for (int64_t strip = b; strip < e; strip++) {                                                         \
            int64_t k0 = strip * 16, k1 = k0 + 16 < m ? k0 + 16 : m, idx = 0;                                 \
            if (pdist_bw512_##SFX(j->kind, x, g, d, out, n, m, k0))                                           \
                continue;                                                                                     \
            switch (j->kind) {                                                                                \
            case OD_DIST_P2: PDIST_BW_LOOP_(T, dq == (T)0 ? (T)0 : gq * diff / dq) break;                     \
            case OD_DIST_P1: PDIST_BW_LOOP_(T, gq * (T)((diff > (T)0) - (diff < (T)0))) break;                \
            default: PDIST_BW_LOOP_(T, od_dist_bw_##SFX(j->kind, diff, gq, dq, pp)) break;                    \
            }                                                                                                 \
        }                                                                                                     \
    }

DIST_TYPED(float, f32, fabsf)
DIST_TYPED(double, f64, fabs)

/* x (borrowed) expanded to batch + its last two sizes, contiguous in its dtype: *out new */
static od_status batch_operand(const od_dist_plan *p, const od_tensor *x, od_tensor **out, od_error *err)
{
    int64_t sz[OD_MAX_DIMS];
    memcpy(sz, p->batch, sizeof(int64_t) * (size_t)p->nbatch);
    sz[p->nbatch] = x->sizes[x->ndim - 2];
    sz[p->nbatch + 1] = x->sizes[x->ndim - 1];
    od_tensor *e = NULL;
    od_status st = od_tensor_expand((od_tensor *)x, sz, p->nbatch + 2, &e, err);
    if (st)
        return st;
    st = od_cpu_to_dtype(e, x->dtype, out, err);
    od_tensor_release(e);
    return st;
}

/* [B, r, m] (contiguous, borrowed) transposed into a new [B, m, *ld] whose
 * first r columns hold it, by the CPU copy loop (an element-wise memcpy
 * here was a tenth of a pdist). A row of a multiple of 4 KiB is padded by a
 * cache line: the strips read one line from each of m rows, and rows 4 KiB
 * apart all fall in the same L1 set. */
static od_status transposed(const od_tensor *x, int64_t B, int64_t r, int64_t m, od_tensor **out, int64_t *ld,
                            od_error *err)
{
    size_t es = od_dtype_size(x->dtype);
    *ld = r * (int64_t)es % 4096 == 0 && r > 0 ? r + 64 / (int64_t)es : r;
    int64_t sz[3] = {B, r, m}, psz[3] = {B, m, *ld};
    od_tensor *v = NULL, *vt = NULL, *dst = NULL;
    *out = NULL;
    od_status st = od_tensor_view((od_tensor *)x, sz, 3, &v, err);
    if (!st)
        st = od_tensor_transpose(v, 1, 2, &vt, err);
    if (!st)
        st = od_tensor_empty_uninit(psz, 3, x->dtype, x->device, out, err);
    if (!st) /* the first r columns of each row; the padding is never read */
        st = od_tensor_slice(*out, 2, 0, r, 1, &dst, err);
    if (!st)
        st = od_cpu_copy_into(dst, vt, err);
    od_tensor_release(dst);
    od_tensor_release(vt);
    od_tensor_release(v);
    if (st) {
        od_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

static od_status run(const od_dist_plan *p, od_tensor *out, od_error *err)
{
    bool f64 = p->x1->dtype == OD_FLOAT64;
    dist_job j = {.pl = p, .kind = od_dist_kind(p->op, p->p), .out = od_tensor_data(out)};
    od_tensor *a = NULL, *b = NULL, *bt = NULL, *g = NULL, *d = NULL;
    od_status st = OD_OK;
    switch (p->op) {
    case OD_DISTOP_CDIST:
        if ((st = batch_operand(p, p->x1, &a, err)) || (st = batch_operand(p, p->x2, &b, err)) ||
            (st = transposed(b, p->B, p->r2, p->m, &bt, &j.ld, err)))
            break;
        j.a = od_tensor_data(a);
        j.bt = od_tensor_data(bt);
        st = od_parallel_for(p->B * p->r1, 1 + 65536 / (p->r2 * p->m + 1), f64 ? cdist_rows_f64 : cdist_rows_f32, &j);
        break;
    case OD_DISTOP_PDIST:
        if ((st = transposed(p->x1, 1, p->r1, p->m, &bt, &j.ld, err)))
            break;
        j.a = od_tensor_data(p->x1);
        j.bt = od_tensor_data(bt);
        st = od_parallel_for((p->r1 + 1) / 2, 1 + 65536 / (p->r1 * p->m + 1), f64 ? pdist_tasks_f64 : pdist_tasks_f32,
                             &j);
        break;
    case OD_DISTOP_CDIST_BW:
        if ((st = batch_operand(p, p->x1, &a, err)) || (st = batch_operand(p, p->x2, &b, err)) ||
            (st = od_cpu_to_dtype((od_tensor *)p->grad, p->x1->dtype, &g, err)) ||
            (st = od_cpu_to_dtype((od_tensor *)p->dist, p->x1->dtype, &d, err)))
            break;
        j.a = od_tensor_data(a);
        j.b = od_tensor_data(b);
        j.grad = od_tensor_data(g);
        j.dist = od_tensor_data(d);
        if (j.kind != OD_DIST_P0)
            st = od_parallel_for(p->B * p->r1, 1 + 65536 / (p->r2 * p->m + 1), f64 ? cdist_bw_rows_f64 : cdist_bw_rows_f32,
                                 &j);
        break;
    default:
        if ((st = od_cpu_to_dtype((od_tensor *)p->grad, p->x1->dtype, &g, err)))
            break;
        j.a = od_tensor_data(p->x1);
        j.grad = od_tensor_data(g);
        j.dist = od_tensor_data(p->dist);
        st = od_parallel_for((p->m + 15) / 16, 1 + 65536 / (p->combs * 16 + 1), f64 ? pdist_bw_cols_f64 : pdist_bw_cols_f32,
                             &j);
        break;
    }
    od_tensor_release(a);
    od_tensor_release(b);
    od_tensor_release(bt);
    od_tensor_release(g);
    od_tensor_release(d);
    return st;
}

od_status od_cpu_dist(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    (void)op;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_dist_plan p;
    od_out_spec spec;
    int nouts = 0;
    od_status st;
    if ((st = od_dist_plan_of(id, s, &p, err)))
        return st;
    od_tensor *out = NULL;
    if (p.mm && !p.empty && !p.zeros) {
        if ((st = od_dist_mm(&p, &out, err)))
            return st;
    } else {
        /* cdist and pdist write every distance; the rest (empty, all-zero, backward) rely on zeros */
        bool whole = !p.empty && !p.zeros && (p.op == OD_DISTOP_CDIST || p.op == OD_DISTOP_PDIST);
        if ((st = od_shape_dist(id, s, &spec, &nouts, err)) ||
            (st = (whole ? od_alloc_outputs_overwrite : od_alloc_outputs)(s, &spec, 1, &out, err)))
            return st;
        if (!p.empty && !p.zeros && od_tensor_numel(out) > 0 && (st = run(&p, out, err))) {
            od_tensor_release(out);
            return st;
        }
    }
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
}
