/* conv.c — convolution and convolution_backward on the CPU.
 *
 * Invariants:
 *  - od_conv_plan_of (shape_conv.c) checked every argument; the plan's
 *    geometry is 3 spatial dims (leading ones trivial), named by side: the
 *    image (the window slides over it) and the grid (one position per
 *    window). Every case is one of three group-wise products, with
 *    Kc = C_img / groups * k-volume:
 *      down:  grid_g [C_grid/g, L]  += W_g [C_grid/g, Kc] @ im2col(image_g)
 *      up:    image_g += col2im(W_g^T @ grid_g)
 *      wgrad: gW_g [C_grid/g, Kc]  += grid_g @ im2col(image_g)^T
 *    convolution is down (+ bias), transposed convolution up (+ bias);
 *    their backward swaps them (grad_input of down is up and vice versa)
 *    and the weight gradient is wgrad with the image side the convolution's
 *    image (its input, or the transposed one's grad_output).
 *  - Operands are contiguous in the compute dtype: float32 / float64 as
 *    they are (non-contiguous ones copied), bfloat16 widened to float32,
 *    computed there and rounded back once, as torch's CPU kernels do;
 *    integers (and a float16 / bool bias gradient, the one backward torch
 *    has for them) in int64 as uint64 (modular, so the narrower results
 *    are the low bits torch's wrapping loops leave) with a plain loop GEMM.
 *  - The batch runs one sample at a time, so the column buffer is one
 *    sample's [C_img * k-volume, L] at most; a 1x1 stride-1 unpadded
 *    kernel needs no columns (the image is its own column matrix), and a
 *    depthwise convolution (groups == C_img == C_grid) runs a direct loop
 *    per channel plane, with no columns and no GEMM.
 *  - Threads: im2col / col2im and the depthwise loop split over rows or
 *    planes with od_parallel_for; the GEMMs run on OpenBLAS's own pool,
 *    never from inside a parallel region (blas.c's rule).
 */
/* As elementwise.c: gcc's default -O2 cost model vectorises no loop that needs a run-time alias check,
 * which every row loop here does (the depthwise kernel ran scalar). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math")
#endif
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_parallel.h"
#include "od_shape.h"

/* One group's geometry: c channels on the image side */
typedef struct geo {
    int64_t c, img[3], grid[3], k[3], s[3], p[3], d[3];
    int64_t kvol, limg, lgrid, kc; /* kc = c * kvol: rows of the column matrix */
    bool pointwise;                /* 1x1, stride 1, no padding: columns == image */
} geo;

static void geo_of(const od_conv_plan *p, geo *g)
{
    g->c = p->C_img / p->groups;
    g->kvol = g->limg = g->lgrid = 1;
    g->pointwise = true;
    for (int k = 0; k < 3; k++) {
        g->img[k] = p->img[k];
        g->grid[k] = p->grid[k];
        g->k[k] = p->k[k];
        g->s[k] = p->stride[k];
        g->p[k] = p->pad[k];
        g->d[k] = p->dil[k];
        g->kvol *= p->k[k];
        g->limg *= p->img[k];
        g->lgrid *= p->grid[k];
        g->pointwise &= p->k[k] == 1 && p->stride[k] == 1 && p->pad[k] == 0 && p->img[k] == p->grid[k];
    }
    g->kc = g->c * g->kvol;
}

/* The valid grid range [lo, hi) along one dim for kernel tap kk: positions
 * o with 0 <= o * s - p + kk * d < img */
static void tap_range(int64_t grid, int64_t img, int64_t s, int64_t off, int64_t *lo, int64_t *hi)
{
    /* i = o * s + (off), off = kk * d - p */
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t h = img - off <= 0 ? 0 : (img - off - 1) / s + 1;
    *lo = l < grid ? l : grid;
    *hi = h < grid ? h : grid;
    if (*hi < *lo)
        *hi = *lo;
}

/* ---- im2col / col2im / depthwise, per compute type ------------------------------------ */

typedef struct col_job {
    const geo *g;
    const void *im; /* im2col: the image (c channels); col2im: the columns */
    void *out;
    int64_t nplanes; /* depthwise: planes, c of them per sample */
    const void *w, *bias;
    const void *in;  /* depthwise input (n * c planes) */
} col_job;

#define CONV_TYPED(T, SFX)                                                                                    \
    /* rows [b, e) of the column matrix: row r = (channel, kd, kh, kw) */                                    \
    static void im2col_rows_##SFX(void *ctx, int64_t b, int64_t e)                                          \
    {                                                                                                         \
        const col_job *j = ctx;                                                                               \
        const geo *g = j->g;                                                                                  \
        const T *im = j->im;                                                                                  \
        T *col = j->out;                                                                                      \
        for (int64_t r = b; r < e; r++) {                                                                     \
            int64_t c = r / g->kvol, t = r % g->kvol;                                                         \
            int64_t kw = t % g->k[2], kh = (t / g->k[2]) % g->k[1], kd = t / (g->k[2] * g->k[1]);             \
            const T *src = im + c * g->limg;                                                                  \
            T *dst = col + r * g->lgrid;                                                                      \
            int64_t offd = kd * g->d[0] - g->p[0], offh = kh * g->d[1] - g->p[1], offw = kw * g->d[2] - g->p[2]; \
            int64_t wlo, whi;                                                                                 \
            tap_range(g->grid[2], g->img[2], g->s[2], offw, &wlo, &whi);           \
            for (int64_t od = 0; od < g->grid[0]; od++) {                                                     \
                int64_t id = od * g->s[0] + offd;                                                             \
                for (int64_t oh = 0; oh < g->grid[1]; oh++) {                                                 \
                    int64_t ih = oh * g->s[1] + offh;                                                         \
                    T *row = dst + (od * g->grid[1] + oh) * g->grid[2];                                       \
                    if (id < 0 || id >= g->img[0] || ih < 0 || ih >= g->img[1]) {                             \
                        memset(row, 0, sizeof(T) * (size_t)g->grid[2]);                                       \
                        continue;                                                                             \
                    }                                                                                         \
                    const T *srow = src + (id * g->img[1] + ih) * g->img[2];                                  \
                    for (int64_t ow = 0; ow < wlo; ow++)                                                      \
                        row[ow] = 0;                                                                          \
                    if (g->s[2] == 1)                                                                         \
                        memcpy(row + wlo, srow + wlo + offw, sizeof(T) * (size_t)(whi - wlo));                \
                    else                                                                                      \
                        for (int64_t ow = wlo; ow < whi; ow++)                                                \
                            row[ow] = srow[ow * g->s[2] + offw];                                              \
                    for (int64_t ow = whi; ow < g->grid[2]; ow++)                                             \
                        row[ow] = 0;                                                                          \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
    }                                                                                                         \
    /* channels [b, e) of the image accumulate their rows of the column matrix */                             \
    static void col2im_chans_##SFX(void *ctx, int64_t b, int64_t e)                                          \
    {                                                                                                         \
        const col_job *j = ctx;                                                                               \
        const geo *g = j->g;                                                                                  \
        const T *col = j->im;                                                                                 \
        T *im = j->out;                                                                                       \
        for (int64_t c = b; c < e; c++) {                                                                     \
            T *dst = im + c * g->limg;                                                                        \
            for (int64_t t = 0; t < g->kvol; t++) {                                                           \
                int64_t kw = t % g->k[2], kh = (t / g->k[2]) % g->k[1], kd = t / (g->k[2] * g->k[1]);         \
                const T *src = col + (c * g->kvol + t) * g->lgrid;                                            \
                int64_t offd = kd * g->d[0] - g->p[0], offh = kh * g->d[1] - g->p[1], offw = kw * g->d[2] - g->p[2]; \
                int64_t wlo, whi;                                                                             \
                tap_range(g->grid[2], g->img[2], g->s[2], offw, &wlo, &whi);                         \
                for (int64_t od = 0; od < g->grid[0]; od++) {                                                 \
                    int64_t id = od * g->s[0] + offd;                                                         \
                    if (id < 0 || id >= g->img[0])                                                            \
                        continue;                                                                             \
                    for (int64_t oh = 0; oh < g->grid[1]; oh++) {                                             \
                        int64_t ih = oh * g->s[1] + offh;                                                     \
                        if (ih < 0 || ih >= g->img[1])                                                        \
                            continue;                                                                         \
                        const T *row = src + (od * g->grid[1] + oh) * g->grid[2];                             \
                        T *drow = dst + (id * g->img[1] + ih) * g->img[2];                                    \
                        for (int64_t ow = wlo; ow < whi; ow++)                                                \
                            drow[ow * g->s[2] + offw] += row[ow];                                             \
                    }                                                                                         \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
    }                                                                                                         \
    /* depthwise planes [b, e): plane q = sample q / c, channel q % c. Row by row, every tap added to the     \
     * output row while it sits in L1 (tap by tap over the whole plane streamed it once per tap) */          \
    static void depthwise_planes_##SFX(void *ctx, int64_t b, int64_t e)                                      \
    {                                                                                                         \
        const col_job *j = ctx;                                                                               \
        const geo *g = j->g; /* c = channels per sample here */                                              \
        const T *in = j->in, *w = j->w, *bias = j->bias;                                                      \
        T *out = j->out;                                                                                      \
        for (int64_t q = b; q < e; q++) {                                                                     \
            int64_t ch = q % g->c;                                                                            \
            const T *src = in + q * g->limg, *wk = w + ch * g->kvol;                                          \
            T *dst = out + q * g->lgrid;                                                                      \
            for (int64_t od = 0; od < g->grid[0]; od++)                                                       \
                for (int64_t oh = 0; oh < g->grid[1]; oh++) {                                                 \
                    T *restrict drow = dst + (od * g->grid[1] + oh) * g->grid[2];                             \
                    for (int64_t i = 0; i < g->grid[2]; i++) /* the bias last, as torch: 0 + -0.0 is 0 */    \
                        drow[i] = (T)0;                                                                       \
                    for (int64_t t = 0; t < g->kvol; t++) {                                                   \
                        int64_t kw = t % g->k[2], kh = (t / g->k[2]) % g->k[1], kd = t / (g->k[2] * g->k[1]); \
                        int64_t id = od * g->s[0] + kd * g->d[0] - g->p[0];                                   \
                        int64_t ih = oh * g->s[1] + kh * g->d[1] - g->p[1];                                   \
                        if (id < 0 || id >= g->img[0] || ih < 0 || ih >= g->img[1])                           \
                            continue;                                                                         \
                        int64_t offw = kw * g->d[2] - g->p[2], wlo, whi;                                      \
                        tap_range(g->grid[2], g->img[2], g->s[2], offw, &wlo, &whi);                          \
                        T wv = wk[t];                                                                         \
                        const T *restrict srow = src + (id * g->img[1] + ih) * g->img[2] + offw;              \
                        if (g->s[2] == 1)                                                                     \
                            for (int64_t ow = wlo; ow < whi; ow++)                                            \
                                drow[ow] += wv * srow[ow];                                                    \
                        else                                                                                  \
                            for (int64_t ow = wlo; ow < whi; ow++)                                            \
                                drow[ow] += wv * srow[ow * g->s[2]];                                          \
                    }                                                                                         \
                    if (bias)                                                                                 \
                        for (int64_t i = 0; i < g->grid[2]; i++)                                              \
                            drow[i] += bias[ch];                                                              \
                }                                                                                             \
        }                                                                                                     \
    }

CONV_TYPED(float, f32)
CONV_TYPED(double, f64)
CONV_TYPED(uint64_t, u64) /* integers: int64 arithmetic, wrapping as torch's */

/* ---- the three products -------------------------------------------------------------- */

enum { K_F32, K_F64, K_U64 };

typedef void (*rows_fn)(void *ctx, int64_t b, int64_t e);
static const rows_fn g_im2col[3] = {im2col_rows_f32, im2col_rows_f64, im2col_rows_u64};
static const rows_fn g_col2im[3] = {col2im_chans_f32, col2im_chans_f64, col2im_chans_u64};
static const rows_fn g_depthwise[3] = {depthwise_planes_f32, depthwise_planes_f64, depthwise_planes_u64};

/* out[m, n] = op(a) @ op(b) + beta * out in uint64 (modular, no signed overflow) */
static void gemm_u64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint64_t *a, int64_t lda,
                     const uint64_t *b, int64_t ldb, double beta, uint64_t *out, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++) {
        uint64_t *row = out + i * ldc;
        if (beta == 0)
            memset(row, 0, sizeof *row * (size_t)n);
        for (int64_t q = 0; q < k; q++) {
            uint64_t av = ta ? a[q * lda + i] : a[i * lda + q];
            if (!tb)
                for (int64_t j = 0; j < n; j++)
                    row[j] += av * b[q * ldb + j];
            else
                for (int64_t j = 0; j < n; j++)
                    row[j] += av * b[j * ldb + q];
        }
    }
}

typedef struct conv_ctx {
    const od_conv_plan *p;
    geo g;
    int kind; /* K_F32, K_F64, K_U64 */
    size_t es;
    void *col; /* one sample's columns, g.kc * g.lgrid elements (NULL for pointwise) */
} conv_ctx;

static void gemm(const conv_ctx *c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                 const void *b, int64_t ldb, double beta, void *out, int64_t ldc)
{
    CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    if (m == 0 || n == 0)
        return;
    if (k == 0) { /* nothing to sum: beta * C (OpenBLAS may skip C then) */
        if (beta == 0)
            for (int64_t i = 0; i < m; i++)
                memset((char *)out + (size_t)(i * ldc) * c->es, 0, (size_t)n * c->es);
        return;
    }
    if (c->kind == K_U64)
        gemm_u64(ta, tb, m, n, k, a, lda, b, ldb, beta, out, ldc);
    else if (c->kind == K_F64)
        cblas_dgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb, beta, out, (int)ldc);
    else
        cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, (float)beta, out,
                    (int)ldc);
}

/* image (one sample, all channels) -> columns of group gi, or the image itself */
static const void *columns(conv_ctx *c, const char *image, int64_t gi)
{
    const geo *g = &c->g;
    const char *im = image + (size_t)(gi * g->c * g->limg) * c->es;
    if (g->pointwise)
        return im;
    col_job j = {.g = g, .im = im, .out = c->col};
    od_parallel_for(g->kc, 1 + 4096 / (g->lgrid + 1), g_im2col[c->kind], &j);
    return c->col;
}

/* grid [C_grid, L] (one sample) += W @ columns(image), group by group */
static void down(conv_ctx *c, const char *image, const char *w, char *grid)
{
    const geo *g = &c->g;
    int64_t G = c->p->groups, cg = c->p->C_grid / G;
    for (int64_t gi = 0; gi < G; gi++) {
        const void *col = columns(c, image, gi);
        gemm(c, false, false, cg, g->lgrid, g->kc, w + (size_t)(gi * cg * g->kc) * c->es, g->kc, col, g->lgrid, 1.0,
             grid + (size_t)(gi * cg * g->lgrid) * c->es, g->lgrid);
    }
}

/* image [C_img, limg] (one sample, zeroed or holding a bias) += col2im(W^T @ grid) */
static void up(conv_ctx *c, const char *grid, const char *w, char *image)
{
    const geo *g = &c->g;
    int64_t G = c->p->groups, cg = c->p->C_grid / G;
    for (int64_t gi = 0; gi < G; gi++) {
        char *im = image + (size_t)(gi * g->c * g->limg) * c->es;
        const char *wg = w + (size_t)(gi * cg * g->kc) * c->es, *gr = grid + (size_t)(gi * cg * g->lgrid) * c->es;
        if (g->pointwise) {
            gemm(c, true, false, g->kc, g->lgrid, cg, wg, g->kc, gr, g->lgrid, 1.0, im, g->lgrid);
            continue;
        }
        gemm(c, true, false, g->kc, g->lgrid, cg, wg, g->kc, gr, g->lgrid, 0.0, c->col, g->lgrid);
        col_job j = {.g = g, .im = c->col, .out = im};
        od_parallel_for(g->c, 1, g_col2im[c->kind], &j);
    }
}

/* gw [C_grid, kc] += grid @ columns(image)^T (one sample) */
static void wgrad(conv_ctx *c, const char *image, const char *grid, char *gw)
{
    const geo *g = &c->g;
    int64_t G = c->p->groups, cg = c->p->C_grid / G;
    for (int64_t gi = 0; gi < G; gi++) {
        const void *col = columns(c, image, gi);
        const char *gr = grid + (size_t)(gi * cg * g->lgrid) * c->es;
        char *gwg = gw + (size_t)(gi * cg * g->kc) * c->es;
        if (c->kind == K_F32 &&
            od_cpu_conv_gemm_nt_f32(cg, g->kc, g->lgrid, (const float *)gr, g->lgrid, col, g->lgrid, (float *)gwg, g->kc))
            continue; /* conv_direct.c: AVX-512, where OpenBLAS runs AVX2 kernels here */
        gemm(c, false, true, cg, g->kc, g->lgrid, gr, g->lgrid, col, g->lgrid, 1.0, gwg, g->kc);
    }
}

/* out [N, C, L]: every plane starts at bias[c] (or 0) */
static void fill_bias(const conv_ctx *c, char *out, int64_t n, int64_t ch, int64_t l, const char *bias)
{
    for (int64_t i = 0; i < n * ch; i++) {
        char *row = out + (size_t)(i * l) * c->es;
        if (!bias) {
            memset(row, 0, (size_t)l * c->es);
        } else if (c->kind == K_U64) {
            uint64_t v = ((const uint64_t *)bias)[i % ch];
            for (int64_t k = 0; k < l; k++)
                ((uint64_t *)row)[k] = v;
        } else if (c->kind == K_F64) {
            double v = ((const double *)bias)[i % ch];
            for (int64_t k = 0; k < l; k++)
                ((double *)row)[k] = v;
        } else {
            float v = ((const float *)bias)[i % ch];
            for (int64_t k = 0; k < l; k++)
                ((float *)row)[k] = v;
        }
    }
}

/* out [N, C, L] += bias[c] */
static void add_bias(const conv_ctx *c, char *out, int64_t n, int64_t ch, int64_t l, const char *bias)
{
    for (int64_t i = 0; i < n * ch; i++) {
        char *row = out + (size_t)(i * l) * c->es;
        if (c->kind == K_U64) {
            uint64_t v = ((const uint64_t *)bias)[i % ch];
            for (int64_t k = 0; k < l; k++)
                ((uint64_t *)row)[k] += v;
        } else if (c->kind == K_F64) {
            double v = ((const double *)bias)[i % ch];
            for (int64_t k = 0; k < l; k++)
                ((double *)row)[k] += v;
        } else {
            float v = ((const float *)bias)[i % ch];
            for (int64_t k = 0; k < l; k++)
                ((float *)row)[k] += v;
        }
    }
}

/* gb[c] = sum of grad [N, C, L] over N and L, accumulated in double */
static void bias_grad(const conv_ctx *c, const char *grad, int64_t n, int64_t ch, int64_t l, char *gb)
{
    for (int64_t k = 0; k < ch; k++) {
        double acc = 0;
        for (int64_t i = 0; i < n; i++) {
            const char *row = grad + (size_t)((i * ch + k) * l) * c->es;
            if (c->kind != K_U64)
                acc += c->kind == K_F64 ? od_cpu_sum_f64((const double *)row, l) : od_cpu_sum_f32((const float *)row, l);
        }
        if (c->kind == K_U64) {
            uint64_t sum = 0;
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < l; j++)
                    sum += ((const uint64_t *)grad)[(i * ch + k) * l + j];
            ((uint64_t *)gb)[k] = sum;
        } else if (c->kind == K_F64)
            ((double *)gb)[k] = acc;
        else
            ((float *)gb)[k] = (float)acc;
    }
}

/* float32 grad_input of a stride-1 convolution as a convolution itself, on
 * the direct kernel: grad_output padded by dil * (k - 1) - pad, with each
 * group's weights transposed and flipped (W'[c][o][t] = W[o][c][kvol - 1
 * - t]). im2col's way (a GEMM with K = C_grid / groups, then col2im) took
 * 10.3 ms of an 8x64x56x56 3x3 backward where the forward takes 5.2.
 * False (gi untouched) where the plan does not suit: a stride, a padding
 * past the kernel's reach, or a plan the direct kernel declines. */
static bool grad_input_direct(const od_conv_plan *p, const float *gy, const float *w, float *gi)
{
    od_conv_plan q = *p;
    int64_t G = p->groups, cin = p->C_img / G, cg = p->C_grid / G, kvol = 1;
    for (int k = 0; k < 3; k++) {
        int64_t reach = p->dil[k] * (p->k[k] - 1);
        if (p->transposed || p->stride[k] != 1 || p->pad[k] > reach)
            return false;
        q.pad[k] = reach - p->pad[k];
        q.img[k] = p->grid[k];
        q.grid[k] = p->img[k];
        kvol *= p->k[k];
    }
    q.C_img = p->C_grid;
    q.C_grid = p->C_img;
    float *wt = malloc(sizeof(float) * (size_t)(p->C_img * cg * kvol + 1));
    if (!wt)
        return false;
    for (int64_t g = 0; g < G; g++)
        for (int64_t o = 0; o < cg; o++)
            for (int64_t c = 0; c < cin; c++)
                for (int64_t t = 0; t < kvol; t++)
                    wt[((g * cin + c) * cg + o) * kvol + kvol - 1 - t] = w[((g * cg + o) * cin + c) * kvol + t];
    bool ok = od_cpu_conv_direct_f32(&q, gy, wt, NULL, gi);
    free(wt);
    return ok;
}

static bool is_depthwise(const od_conv_plan *p)
{
    return !p->transposed && p->groups == p->C_img && p->C_grid == p->C_img && p->groups > 1;
}

/* ---- the boxed kernel --------------------------------------------------------------------- */

/* t (borrowed) contiguous in the compute dtype: *out new, or NULL for NULL */
static od_status operand(const od_tensor *t, od_dtype cd, od_tensor **out, od_error *err)
{
    *out = NULL;
    return t ? od_cpu_to_dtype((od_tensor *)t, cd, out, err) : OD_OK;
}

od_status od_cpu_conv(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_conv_plan p;
    od_out_spec spec[3];
    int nouts = 0;
    od_status st;
    if ((st = od_conv_plan_of(id, s, &p, err)) || (st = od_shape_conv(id, s, spec, &nouts, err)))
        return st;
    bool bwd = id == OD_OPID_convolution_backward;
    od_dtype dt = p.input->dtype;
    od_dtype cd = dt == OD_BFLOAT16 || dt == OD_FLOAT16 ? OD_FLOAT32 : od_dtype_is_floating(dt) ? dt : OD_INT64;
    conv_ctx c = {.p = &p, .kind = cd == OD_FLOAT64 ? K_F64 : cd == OD_INT64 ? K_U64 : K_F32,
                  .es = od_dtype_size(cd)};
    geo_of(&p, &c.g);
    if (c.g.kc > INT_MAX || c.g.lgrid > INT_MAX || c.g.limg > INT_MAX || p.C_grid > INT_MAX)
        return od_error_set(err, OD_ETOOLARGE, "%s: the column matrix exceeds OpenBLAS's 32-bit sizes",
                            od_op_schema(op)->name);
    od_tensor *x = NULL, *w = NULL, *b = NULL, *gy = NULL, *res[3] = {0}, *outs[3] = {0};
    bool want[3] = {!bwd, bwd && p.mask[1], bwd && p.mask[2]};
    if (bwd)
        want[0] = p.mask[0];
    int nres = bwd ? 3 : 1;
    if ((st = operand(p.input, cd, &x, err)) || (st = operand(p.weight, cd, &w, err)) ||
        (st = operand(p.bias, cd, &b, err)) || (bwd && (st = operand(s->args[0].u.t, cd, &gy, err))))
        goto done;
    /* results: the outputs themselves, or float32 ones rounded into them at the end */
    for (int i = 0; i < nres && !st; i++)
        if (want[i])
            st = cd == dt ? od_alloc_outputs_overwrite(s, &spec[i], 1, &res[i], err)
                          : od_tensor_empty(spec[i].sizes, spec[i].ndim, cd, p.input->device, &res[i], err);
    if (st)
        goto done;
    size_t colsz = c.g.pointwise || (!bwd && is_depthwise(&p)) ? 0 : (size_t)(c.g.kc * c.g.lgrid) * c.es;
    if (colsz && !(c.col = malloc(colsz))) {
        st = od_error_set(err, OD_ENOMEM, "%s: no memory for the column buffer (%zu bytes)", od_op_schema(op)->name,
                          colsz);
        goto done;
    }
    const geo *g = &c.g;
    size_t img_n = (size_t)(p.C_img * g->limg) * c.es, grid_n = (size_t)(p.C_grid * g->lgrid) * c.es;
    const char *xd = od_tensor_data(x), *wd = od_tensor_data(w), *bd = b ? od_tensor_data(b) : NULL;
    od_cpu_blas_enter(INFINITY);
    if (!bwd) {
        char *yd = od_tensor_data(res[0]);
        if (is_depthwise(&p) && c.kind == K_F32 &&
            od_cpu_conv_depthwise_f32(&p, (const float *)xd, (const float *)wd, (const float *)bd, (float *)yd))
            ; /* conv_direct.c: vectorised along the row, any stride */
        else if (is_depthwise(&p)) {
            geo dg = *g;
            dg.c = p.C_img;
            col_job j = {.g = &dg, .in = xd, .w = wd, .bias = bd, .out = yd};
            od_parallel_for(p.N * p.C_img, 1, g_depthwise[c.kind], &j);
        } else if (!p.transposed) {
            if (c.kind == K_F32 &&
                od_cpu_conv_direct_f32(&p, (const float *)xd, (const float *)wd, (const float *)bd, (float *)yd))
                ; /* conv_direct.c: no columns (a 1x1 kernel too: faster here than its GEMM) */
            else {
                fill_bias(&c, yd, p.N, p.C_grid, g->lgrid, bd);
                for (int64_t n = 0; n < p.N; n++)
                    down(&c, xd + n * img_n, wd, yd + n * grid_n);
            }
        } else {
            /* the bias is added last, as torch does (0 + -0.0 is 0 where no
             * window reaches an element) */
            fill_bias(&c, yd, p.N, p.C_img, g->limg, NULL);
            for (int64_t n = 0; n < p.N; n++)
                up(&c, xd + n * grid_n, wd, yd + n * img_n);
            if (bd)
                add_bias(&c, yd, p.N, p.C_img, g->limg, bd);
        }
    } else {
        const char *gd = od_tensor_data(gy);
        /* the image side of the weight gradient and the grid side, per sample */
        const char *imd = p.transposed ? gd : xd, *grd = p.transposed ? xd : gd;
        if (res[0]) {
            char *gi = od_tensor_data(res[0]);
            if (!p.transposed) {
                if (!(c.kind == K_F32 && grad_input_direct(&p, (const float *)gd, (const float *)wd, (float *)gi))) {
                    fill_bias(&c, gi, p.N, p.C_img, g->limg, NULL);
                    for (int64_t n = 0; n < p.N; n++)
                        up(&c, gd + n * grid_n, wd, gi + n * img_n);
                }
            } else {
                fill_bias(&c, gi, p.N, p.C_grid, g->lgrid, NULL);
                for (int64_t n = 0; n < p.N; n++)
                    down(&c, gd + n * img_n, wd, gi + n * grid_n);
            }
        }
        if (res[1]) {
            char *gw = od_tensor_data(res[1]);
            memset(gw, 0, od_tensor_nbytes(res[1]));
            for (int64_t n = 0; n < p.N; n++)
                wgrad(&c, imd + n * img_n, grd + n * grid_n, gw);
        }
        if (res[2])
            bias_grad(&c, gd, p.N, p.transposed ? p.C_img : p.C_grid, p.transposed ? g->limg : g->lgrid,
                      od_tensor_data(res[2]));
    }
    /* results in the output dtype */
    for (int i = 0; i < nres && !st; i++) {
        if (!res[i])
            continue;
        if (cd == dt) {
            outs[i] = res[i];
            res[i] = NULL;
        } else if (!(st = od_alloc_outputs_overwrite(s, &spec[i], 1, &outs[i], err))) {
            st = od_cpu_copy_into(outs[i], res[i], err);
        }
    }
    if (st)
        goto done;
    for (int i = 0; i < nres; i++) {
        s->rets[i] = outs[i] ? od_tensor_v(outs[i]) : od_none();
        outs[i] = NULL;
    }
    s->nrets = nres;
done:
    free(c.col);
    od_tensor_release(x);
    od_tensor_release(w);
    od_tensor_release(b);
    od_tensor_release(gy);
    for (int i = 0; i < 3; i++) {
        od_tensor_release(res[i]);
        od_tensor_release(outs[i]);
    }
    return st;
}

/* ---- the column loops for im2col / col2im (fold.c): one sample, float or double ---- */

static void geo_of_cols(const od_cpu_cols *in, geo *g)
{
    memset(g, 0, sizeof *g);
    g->c = in->c;
    g->kvol = g->limg = g->lgrid = 1;
    for (int k = 0; k < 3; k++) {
        g->img[k] = in->img[k];
        g->grid[k] = in->grid[k];
        g->k[k] = in->k[k];
        g->s[k] = in->s[k];
        g->p[k] = in->p[k];
        g->d[k] = in->d[k];
        g->kvol *= in->k[k];
        g->limg *= in->img[k];
        g->lgrid *= in->grid[k];
    }
    g->kc = g->c * g->kvol;
}

void od_cpu_im2col(const od_cpu_cols *cols, bool f64, const void *im, void *col)
{
    geo g;
    geo_of_cols(cols, &g);
    col_job j = {.g = &g, .im = im, .out = col};
    od_parallel_for(g.kc, 1 + 4096 / (g.lgrid + 1), g_im2col[f64 ? K_F64 : K_F32], &j);
}

void od_cpu_col2im(const od_cpu_cols *cols, bool f64, const void *col, void *im)
{
    geo g;
    geo_of_cols(cols, &g);
    col_job j = {.g = &g, .im = col, .out = im};
    od_parallel_for(g.c, 1 + 4096 / (g.kvol * g.lgrid + 1), g_col2im[f64 ? K_F64 : K_F32], &j);
}
