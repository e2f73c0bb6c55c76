/* conv_direct.c — the forward convolution of float32 data as a direct,
 * register-tiled loop (no column matrix, no GEMM), on AVX-512 or AVX2.
 *
 * Invariants:
 *  - Vector lanes are output channels: a block of LANES output channels
 *    times a run of TW output positions along the last spatial dim is one
 *    register tile (TW accumulators), and every (input channel, kernel
 *    tap) adds one broadcast input value times one vector of LANES
 *    weights to each accumulator, as oneDNN's direct kernels do. Any
 *    stride and dilation is only a different step between the broadcast
 *    loads; there is no per-element bounds check because the input is
 *    first copied into a zero-padded buffer covering every tap.
 *  - The weights are repacked once per call to [group][channel block]
 *    [input channel][tap][LANES], zero beyond the group's last output
 *    channel, so a block's tail lanes compute zeros that are never stored.
 *  - Each output element is the bias (or 0) plus its products summed in
 *    (input channel, tap) order in float32, with fused multiply-adds: the
 *    same sum as the im2col path's up to rounding, which torch's oneDNN
 *    kernel also orders its own way.
 *  - Work splits over (sample, group, channel block, output row) tasks on
 *    od_parallel_for; a task writes only its own output rows.
 *  - A pointwise plan (1x1, stride 1, unpadded) on AVX-512 runs its own
 *    tile instead, lanes along positions (below, pointwise_f32): the same
 *    sums in the same order. conv.c's depthwise plans run
 *    od_cpu_conv_depthwise_f32 (below, lanes along a row's positions too).
 *  - Which instruction set runs is chosen on first use (OD_CONV_DIRECT=avx512,
 *    avx2 or off, else the best the CPU has) or by od_cpu_conv_direct_use
 *    (tests, benchmarks). Without AVX2 and FMA, or when
 *    the plan does not suit (transposed, fewer than LANES / 2 output
 *    channels per group, a padded copy past its memory bound), the caller
 *    runs conv.c's im2col path.
 */
#include <immintrin.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_parallel.h"
#include "od_shape.h"

enum { ISA_UNSET = -1, ISA_OFF = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };

typedef struct direct_job {
    const od_conv_plan *p;
    const float *xp;   /* padded input [N * C_img][Dp][Hp][Wp] */
    const float *wp;   /* packed weights */
    const float *bias; /* C_grid or NULL */
    float *y;          /* [N][C_grid][OD][OH][OW] */
    int64_t Dp, Hp, Wp, cin, cg, nblk, kvol;
    int64_t rows;      /* OD * OH */
    int64_t icb, rpt;  /* input channels per chunk, output rows per task */
} direct_job;

/* Partial sums of a task live in a stack buffer of PART floats between
 * input-channel chunks: [row of the block][position of the segment][2
 * blocks][LANES], so a tile reloads its accumulators with vector loads. */
#define PART 16384
#define ROWS_PER_TASK 4
#define CHUNK_BYTES 32768 /* one chunk's weights for two blocks: an L1's worth */

/* The body of one instruction set: a tile is NB (1 or 2) channel blocks of
 * LANES times TW positions, NB * TW accumulators of VEC; two blocks share
 * each broadcast input value, halving the loads per multiply-add. TW1 and
 * TW2 are the widest tiles for one and two blocks (the register file).
 * A tile adds input channels [ic0, ic1) to its partial sums (part: block
 * 0's first position; block 1's lanes follow each position's). */
#define DIRECT_ISA(SFX, ATTR, VEC, LANES, TW1, TW2, LOADW, SET1, FMA, STORE)                                     \
    static inline __attribute__((always_inline)) ATTR void tile_##SFX(const direct_job *j, const float *in0,     \
                                                                       const float *wblk, float *part,          \
                                                                       int64_t ic0, int64_t ic1, const int NB,  \
                                                                       const int TW, const int S2)              \
    {                                                                                                            \
        const od_conv_plan *p = j->p;                                                                            \
        const int64_t s2 = S2 ? S2 : p->stride[2], d0 = p->dil[0], d1 = p->dil[1], d2 = p->dil[2];               \
        const int64_t K0 = p->k[0], K1 = p->k[1], K2 = p->k[2], plane = j->Dp * j->Hp * j->Wp;                   \
        const int64_t bstride = j->cin * j->kvol * LANES; /* the next block's packed weights */                 \
        VEC a0[TW1], a1[TW2]; /* two arrays, each small enough for gcc to keep in registers */                  \
        _Pragma("GCC unroll 32") for (int t = 0; t < TW; t++) a0[t] = LOADW(part + 2 * t * LANES);              \
        if (NB == 2)                                                                                             \
            _Pragma("GCC unroll 32") for (int t = 0; t < TW; t++) a1[t] = LOADW(part + (2 * t + 1) * LANES);    \
        for (int64_t ic = ic0; ic < ic1; ic++) {                                                                 \
            for (int64_t kd = 0; kd < K0; kd++)                                                                  \
                for (int64_t kh = 0; kh < K1; kh++) {                                                            \
                    const float *row = in0 + ic * plane + (kd * d0 * j->Hp + kh * d1) * j->Wp;                   \
                    const float *wk = wblk + ((ic * K0 + kd) * K1 + kh) * K2 * LANES;                            \
                    for (int64_t kw = 0; kw < K2; kw++) {                                                        \
                        const float *q = row + kw * d2;                                                          \
                        if (NB == 1) {                                                                           \
                            VEC wv = LOADW(wk + kw * LANES);                                                     \
                            _Pragma("GCC unroll 32") for (int t = 0; t < TW; t++)                               \
                                a0[t] = FMA(SET1(q[t * s2]), wv, a0[t]);                                         \
                        } else {                                                                                 \
                            VEC w0 = LOADW(wk + kw * LANES), w1 = LOADW(wk + bstride + kw * LANES);              \
                            _Pragma("GCC unroll 32") for (int t = 0; t < TW; t++) {                             \
                                VEC xv = SET1(q[t * s2]);                                                        \
                                a0[t] = FMA(xv, w0, a0[t]);                                                      \
                                a1[t] = FMA(xv, w1, a1[t]);                                                      \
                            }                                                                                    \
                        }                                                                                        \
                    }                                                                                            \
                }                                                                                                \
        }                                                                                                        \
        _Pragma("GCC unroll 32") for (int t = 0; t < TW; t++) STORE(part + 2 * t * LANES, a0[t]);               \
        if (NB == 2)                                                                                             \
            _Pragma("GCC unroll 32") for (int t = 0; t < TW; t++) STORE(part + (2 * t + 1) * LANES, a1[t]);     \
    }                                                                                                            \
    /* positions [w0, w1) of one output row for channels [ic0, ic1), in tiles: the widest first, the tail in    \
     * halving widths, each an unrolled body (S2: the stride along the row as a constant, 0 for any) */          \
    static inline __attribute__((always_inline)) ATTR void row_##SFX(const direct_job *j, const float *in,       \
                                                                      const float *wblk, float *part,           \
                                                                      int64_t w0, int64_t w1, int64_t ic0,      \
                                                                      int64_t ic1, const int NB, const int S2)  \
    {                                                                                                            \
        const int64_t st = j->p->stride[2], TWX = NB == 1 ? TW1 : TW2;                                           \
        for (int64_t ow = w0, tw; ow < w1; ow += tw) {                                                           \
            const float *in0 = in + ow * st;                                                                     \
            float *pt = part + 2 * (ow - w0) * LANES;                                                            \
            int64_t left = w1 - ow;                                                                              \
            if (left >= TWX) {                                                                                   \
                tw = TWX;                                                                                        \
                if (NB == 1)                                                                                     \
                    tile_##SFX(j, in0, wblk, pt, ic0, ic1, 1, TW1, S2);                                          \
                else                                                                                             \
                    tile_##SFX(j, in0, wblk, pt, ic0, ic1, 2, TW2, S2);                                          \
            } else if (left >= 8) {                                                                              \
                tw = 8;                                                                                          \
                tile_##SFX(j, in0, wblk, pt, ic0, ic1, NB, 8, S2);                                               \
            } else if (left >= 4) {                                                                              \
                tw = 4;                                                                                          \
                tile_##SFX(j, in0, wblk, pt, ic0, ic1, NB, 4, S2);                                               \
            } else if (left >= 2) {                                                                              \
                tw = 2;                                                                                          \
                tile_##SFX(j, in0, wblk, pt, ic0, ic1, NB, 2, S2);                                               \
            } else {                                                                                             \
                tw = 1;                                                                                          \
                tile_##SFX(j, in0, wblk, pt, ic0, ic1, NB, 1, S2);                                               \
            }                                                                                                    \
        }                                                                                                        \
    }                                                                                                            \
    /* one task: rows [r0, r1) of a (sample, group, block pair), a segment of positions at a time; for each     \
     * chunk of input channels, every row and tile of the segment (the chunk's weights stay in L1) */           \
    static inline __attribute__((always_inline)) ATTR void task_##SFX(const direct_job *j, int64_t n, int64_t g, \
                                                                       int64_t blk, int64_t r0, int64_t r1,     \
                                                                       const int NB, const int S2)              \
    {                                                                                                            \
        const od_conv_plan *p = j->p;                                                                            \
        const int64_t OH = p->grid[1], OW = p->grid[2], nr = r1 - r0;                                            \
        const int64_t segw = PART / (2 * LANES * nr) < OW ? PART / (2 * LANES * nr) : OW;                        \
        float part[PART] __attribute__((aligned(64)));                                                           \
        float init[2 * LANES] = {0};                                                                             \
        int64_t oc0 = g * j->cg + blk * LANES, nv[2] = {0, 0};                                                   \
        for (int k = 0; k < NB; k++) {                                                                           \
            int64_t left = j->cg - (blk + k) * LANES;                                                            \
            nv[k] = left < LANES ? left : LANES;                                                                 \
            for (int64_t l = 0; j->bias && l < nv[k]; l++)                                                       \
                init[k * LANES + l] = j->bias[oc0 + k * LANES + l];                                              \
        }                                                                                                        \
        const float *wblk = j->wp + (g * j->nblk + blk) * j->cin * j->kvol * LANES;                              \
        for (int64_t s0 = 0; s0 < OW; s0 += segw) {                                                              \
            int64_t s1 = s0 + segw < OW ? s0 + segw : OW;                                                        \
            for (int64_t i = 0; i < nr * (s1 - s0); i++) /* the bias, or 0, first */                             \
                memcpy(part + 2 * i * LANES, init, sizeof init);                                                 \
            for (int64_t ic0 = 0; ic0 < j->cin; ic0 += j->icb) {                                                 \
                int64_t ic1 = ic0 + j->icb < j->cin ? ic0 + j->icb : j->cin;                                     \
                for (int64_t r = r0; r < r1; r++) {                                                              \
                    int64_t od = r / OH, oh = r % OH;                                                            \
                    const float *in = j->xp + (n * p->C_img + g * j->cin) * j->Dp * j->Hp * j->Wp +              \
                                      (od * p->stride[0] * j->Hp + oh * p->stride[1]) * j->Wp;                   \
                    row_##SFX(j, in, wblk, part + 2 * (r - r0) * (s1 - s0) * LANES, s0, s1, ic0, ic1, NB, S2);   \
                }                                                                                                \
            }                                                                                                    \
            /* lanes are channels, 2 * LANES floats from one position to the next: transposed into the rows */  \
            for (int64_t r = r0; r < r1; r++)                                                                    \
                for (int k = 0; k < NB; k++)                                                                     \
                    od_cpu_transpose32(part + (2 * (r - r0) * (s1 - s0) + k) * LANES, 2 * LANES,                 \
                                       j->y + ((n * p->C_grid + oc0 + k * LANES) * j->rows + r) * OW + s0,       \
                                       j->rows * OW, s1 - s0, nv[k]);                                            \
        }                                                                                                        \
    }                                                                                                            \
    /* tasks [b, e): task = ((n * G + g) * npair + pair) * nrb + row block; a pair is blocks 2 pair and         \
     * 2 pair + 1, a row block ROWS_PER_TASK output rows */                                                      \
    ATTR static void tasks_##SFX(void *ctx, int64_t b, int64_t e)                                                \
    {                                                                                                            \
        const direct_job *j = ctx;                                                                               \
        const od_conv_plan *p = j->p;                                                                            \
        const int64_t G = p->groups, npair = (j->nblk + 1) / 2, nrb = (j->rows + j->rpt - 1) / j->rpt;           \
        for (int64_t task = b; task < e; task++) {                                                               \
            int64_t rb = task % nrb, rest = task / nrb;                                                          \
            int64_t pair = rest % npair, ng = rest / npair, g = ng % G, n = ng / G;                              \
            int64_t r0 = rb * j->rpt, r1 = r0 + j->rpt < j->rows ? r0 + j->rpt : j->rows, blk = 2 * pair;        \
            bool two = blk + 1 < j->nblk;                                                                        \
            if (two && p->stride[2] == 1)                                                                        \
                task_##SFX(j, n, g, blk, r0, r1, 2, 1);                                                          \
            else if (two && p->stride[2] == 2)                                                                   \
                task_##SFX(j, n, g, blk, r0, r1, 2, 2);                                                          \
            else if (two)                                                                                        \
                task_##SFX(j, n, g, blk, r0, r1, 2, 0);                                                          \
            else if (p->stride[2] == 1)                                                                          \
                task_##SFX(j, n, g, blk, r0, r1, 1, 1);                                                          \
            else if (p->stride[2] == 2)                                                                          \
                task_##SFX(j, n, g, blk, r0, r1, 1, 2);                                                          \
            else                                                                                                 \
                task_##SFX(j, n, g, blk, r0, r1, 1, 0);                                                          \
        }                                                                                                        \
    }

DIRECT_ISA(avx512, __attribute__((target("avx512f"))), __m512, 16, 28, 14, _mm512_loadu_ps, _mm512_set1_ps,
           _mm512_fmadd_ps, _mm512_storeu_ps)
DIRECT_ISA(avx2, __attribute__((target("avx2,fma"))), __m256, 8, 12, 6, _mm256_loadu_ps, _mm256_set1_ps,
           _mm256_fmadd_ps, _mm256_storeu_ps)

static atomic_int g_isa = ISA_UNSET;

bool od_cpu_conv_direct_use(const char *name)
{
    __builtin_cpu_init();
    bool has512 = __builtin_cpu_supports("avx512f"),
         has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int v;
    if (!name)
        v = has512 ? ISA_AVX512 : has2 ? ISA_AVX2 : ISA_OFF;
    else if (strcmp(name, "off") == 0)
        v = ISA_OFF;
    else if (strcmp(name, "avx2") == 0 && has2)
        v = ISA_AVX2;
    else if (strcmp(name, "avx512") == 0 && has512)
        v = ISA_AVX512;
    else
        return false;
    atomic_store(&g_isa, v);
    return true;
}

static int isa(void)
{
    int v = atomic_load_explicit(&g_isa, memory_order_relaxed);
    if (v == ISA_UNSET) {
        const char *e = getenv("OD_CONV_DIRECT");
        if (!od_cpu_conv_direct_use(e && *e ? e : NULL))
            od_cpu_conv_direct_use(NULL); /* a set the CPU lacks: the best it has */
        v = atomic_load(&g_isa);
    }
    return v;
}

/* planes [b, e) of the padded input: plane q of N * C_img */
typedef struct pad_job {
    const od_conv_plan *p;
    const float *x;
    float *xp;
    int64_t Dp, Hp, Wp;
} pad_job;

static void pad_planes(void *ctx, int64_t b, int64_t e)
{
    const pad_job *j = ctx;
    const od_conv_plan *p = j->p;
    const int64_t D = p->img[0], H = p->img[1], W = p->img[2];
    for (int64_t q = b; q < e; q++) {
        float *dst = j->xp + q * j->Dp * j->Hp * j->Wp;
        const float *src = j->x + q * D * H * W;
        memset(dst, 0, sizeof(float) * (size_t)(j->Dp * j->Hp * j->Wp));
        for (int64_t d = 0; d < D && d + p->pad[0] < j->Dp; d++)
            for (int64_t h = 0; h < H && h + p->pad[1] < j->Hp; h++) {
                int64_t w = W + p->pad[2] <= j->Wp ? W : j->Wp - p->pad[2];
                if (w > 0)
                    memcpy(dst + ((d + p->pad[0]) * j->Hp + h + p->pad[1]) * j->Wp + p->pad[2],
                           src + (d * H + h) * W, sizeof(float) * (size_t)w);
            }
    }
}

/* ---- pointwise: a 1x1 kernel, stride 1, no padding, AVX-512 ------------------------------------------------
 * Per sample and group y [cg, L] = bias + W [cg, cin] @ x [cin, L], a GEMM whose operands are already in
 * place. Here lanes are positions (x's and y's rows run along them), so each x vector is read from its own
 * row and each weight is broadcast: a tile is PW_NR output channels times PW_V vectors of positions (24
 * accumulators; per input channel 3 vector loads and 8 broadcasts for 24 multiply-adds). The channel-lane
 * tile above instead broadcast one scalar from each of cin planes per position, reading under a cache line
 * per plane per tile, and reread the input once per pair of blocks. A task is one panel of PW_V * 16
 * positions of one (sample, group): all its channel blocks run while the panel (cin rows of 192 bytes)
 * stays in L2, so the input streams from memory once. */
#define PW_NR 8
#define PW_V 3
#define PW_PFD 4

typedef struct pw_job {
    const float *x, *wp, *bias; /* wp: [g][cb][cin][PW_NR], zero past the group's channels */
    float *y;
    int64_t G, L, cin, cg, ncb, npanel, cimg, cgrid;
} pw_job;

/* one tile: channels [0, nch) of a block (nch <= PW_NR) at NV vectors of positions, the last one masked by
 * mlast; every sum starts at the bias (or 0) and adds the input channels in order, fused */
static inline __attribute__((always_inline, target("avx512f"))) void pw_tile(const pw_job *j, const float *x,
                                                                             const float *wk, const float *bias,
                                                                             float *y, int64_t nch,
                                                                             __mmask16 mlast, const int NV,
                                                                             const bool PF)
{
    __m512 acc[PW_NR][PW_V];
    _Pragma("GCC unroll 8") for (int r = 0; r < PW_NR; r++)
    {
        __m512 b = bias && r < nch ? _mm512_set1_ps(bias[r]) : _mm512_setzero_ps();
        _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) acc[r][v] = b;
    }
    for (int64_t k = 0; k < j->cin; k++) {
        const float *xr = x + k * j->L, *wr = wk + k * PW_NR;
        if (PF)
            _Pragma("GCC unroll 3") for (int v = 0; v < PW_V; v++) _mm_prefetch((const char *)(xr + 16 * (PW_V + v)), _MM_HINT_T1);
        /* the rows PW_PFD channels on into L1: 256 rows 12.5 KB apart defeat the hardware prefetcher, and
         * the loads waited on L2 (7 % of the time; a prefetch past the last row is harmless) */
        _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) _mm_prefetch((const char *)(xr + PW_PFD * j->L + 16 * v),
                                                                          _MM_HINT_T0);
        __m512 xv[PW_V];
        _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) xv[v] =
            v == NV - 1 ? _mm512_maskz_loadu_ps(mlast, xr + 16 * v) : _mm512_loadu_ps(xr + 16 * v);
        _Pragma("GCC unroll 8") for (int r = 0; r < PW_NR; r++)
        {
            __m512 wv = _mm512_set1_ps(wr[r]);
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(xv[v], wv, acc[r][v]);
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < PW_NR; r++)
    {
        if (r >= nch)
            break;
        _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++)
        {
            if (v == NV - 1)
                _mm512_mask_storeu_ps(y + r * j->L + 16 * v, mlast, acc[r][v]);
            else
                _mm512_storeu_ps(y + r * j->L + 16 * v, acc[r][v]);
        }
    }
}

/* tasks [b, e): task = (n * G + g) * npanel + panel */
__attribute__((target("avx512f"))) static void pw_tasks(void *ctx, int64_t b, int64_t e)
{
    const pw_job *j = ctx;
    for (int64_t task = b; task < e; task++) {
        int64_t panel = task % j->npanel, ng = task / j->npanel, g = ng % j->G, n = ng / j->G;
        int64_t p0 = panel * PW_V * 16, left = j->L - p0, nv = (left + 15) / 16 < PW_V ? (left + 15) / 16 : PW_V;
        int64_t rem = left - 16 * (nv - 1);
        __mmask16 mlast = rem >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << rem) - 1);
        const float *x = j->x + (n * j->cimg + g * j->cin) * j->L + p0;
        for (int64_t cb = 0; cb < j->ncb; cb++) {
            int64_t oc = g * j->cg + cb * PW_NR, nch = j->cg - cb * PW_NR < PW_NR ? j->cg - cb * PW_NR : PW_NR;
            const float *wk = j->wp + (g * j->ncb + cb) * j->cin * PW_NR, *bias = j->bias ? j->bias + oc : NULL;
            float *y = j->y + (n * j->cgrid + oc) * j->L + p0;
            if (nv == 3 && cb == 0 && panel + 1 < j->npanel)
                pw_tile(j, x, wk, bias, y, nch, mlast, 3, true);
            else if (nv == 3)
                pw_tile(j, x, wk, bias, y, nch, mlast, 3, false);
            else if (nv == 2)
                pw_tile(j, x, wk, bias, y, nch, mlast, 2, false);
            else
                pw_tile(j, x, wk, bias, y, nch, mlast, 1, false);
        }
    }
}

/* the pointwise plan on AVX-512; false (nothing written) when out of memory */
static bool pointwise_f32(const od_conv_plan *p, const float *x, const float *w, const float *bias, float *y)
{
    int64_t G = p->groups, cin = p->C_img / G, cg = p->C_grid / G, ncb = (cg + PW_NR - 1) / PW_NR;
    pw_job j = {.x = x, .bias = bias, .y = y, .G = G, .L = p->grid[0] * p->grid[1] * p->grid[2], .cin = cin,
                .cg = cg, .ncb = ncb, .cimg = p->C_img, .cgrid = p->C_grid};
    j.npanel = (j.L + PW_V * 16 - 1) / (PW_V * 16);
    float *wp = calloc((size_t)(G * ncb * cin * PW_NR), sizeof(float));
    if (!wp)
        return false;
    /* weights [C_grid][cin] -> [g][cb][cin][PW_NR] */
    for (int64_t oc = 0; oc < p->C_grid; oc++) {
        int64_t g = oc / cg, cb = (oc % cg) / PW_NR, r = (oc % cg) % PW_NR;
        for (int64_t k = 0; k < cin; k++)
            wp[((g * ncb + cb) * cin + k) * PW_NR + r] = w[oc * cin + k];
    }
    j.wp = wp;
    int64_t ntasks = p->N * G * j.npanel;
    if (od_parallel_for(ntasks, 1, pw_tasks, &j) != OD_OK)
        pw_tasks(&j, 0, ntasks);
    free(wp);
    return true;
}

/* ---- depthwise (groups == channels, one filter each), AVX-512 ------------------------------------------------
 * Per plane, every input row is first copied zero-padded and split by the stride along the row into
 * s2 phase rows (phase ph holds padded columns ph, ph + s2, ...: a stride-2 row's even and odd columns,
 * de-interleaved with two permutes per 32 columns), so tap kw reads phase (kw * d2) % s2 from column
 * ow + (kw * d2) / s2 with unit-stride vector loads; the scalar loop in conv.c gathered every strided
 * input one at a time. Each output row is up to DW_NV vectors of accumulators, summed tap by tap (taps
 * on padding rows skipped, padding columns adding zeros), the bias added last as conv.c's loop does. */
#define DW_NV 8
#define DW_LIMIT (1 << 20)           /* a bound on each factor of the scratch size (no overflow) */
#define DW_MAX_BYTES (256 << 20)     /* all slots' scratch; past it conv.c's loop runs */
#define DW_MAXK 32 /* taps along the row; more go to conv.c's loop */

typedef struct dw_job {
    const od_conv_plan *p;
    const float *x, *w, *bias;
    float *y;
    int64_t nv, sw; /* vectors per output row; a phase row's width (a multiple of 16) */
    float *scratch;  /* nslot slots of slot floats: one plane's phase rows and a padded row */
    int64_t slot, nslot, planes;
    int64_t tapoff[DW_MAXK]; /* tap kw's first column: phase (kw * d2) % s2, column (kw * d2) / s2 */
} dw_job;

/* the lanes l of a load at column a with 0 <= a + l < n (the rest read nothing: a masked load does not
 * touch them) */
static inline __mmask16 dw_mask(int64_t a, int64_t n)
{
    int64_t lo = a < 0 ? -a : 0, hi = n - a < 16 ? n - a : 16;
    if (hi <= lo)
        return 0;
    return (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* vectors [v0, v0 + NV) of output row (od, oh) of one plane */
static inline __attribute__((always_inline, target("avx512f"))) void dw_row(const dw_job *j, const float *split,
                                                                            const float *wk, const float *bias,
                                                                            float *drow, int64_t od, int64_t oh,
                                                                            int64_t v0, const int NV)
{
    const od_conv_plan *p = j->p;
    const int64_t s2 = p->stride[2], OW = p->grid[2];
    __m512 acc[DW_NV];
    _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) acc[v] = _mm512_setzero_ps();
    for (int64_t kd = 0; kd < p->k[0]; kd++) {
        int64_t id = od * p->stride[0] - p->pad[0] + kd * p->dil[0];
        if (id < 0 || id >= p->img[0])
            continue;
        for (int64_t kh = 0; kh < p->k[1]; kh++) {
            int64_t ih = oh * p->stride[1] - p->pad[1] + kh * p->dil[1];
            if (ih < 0 || ih >= p->img[1])
                continue;
            const float *rs = split + (id * p->img[1] + ih) * s2 * j->sw + v0 * 16;
            const float *wt = wk + (kd * p->k[1] + kh) * p->k[2];
            for (int64_t kw = 0; kw < p->k[2]; kw++) {
                const float *src = rs + j->tapoff[kw];
                __m512 wv = _mm512_set1_ps(wt[kw]);
                _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) acc[v] =
                    _mm512_fmadd_ps(wv, _mm512_loadu_ps(src + 16 * v), acc[v]);
            }
        }
    }
    if (bias) {
        __m512 b = _mm512_set1_ps(*bias);
        _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) acc[v] = _mm512_add_ps(acc[v], b);
    }
    _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++)
    {
        int64_t ow = (v0 + v) * 16;
        if (ow + 16 <= OW)
            _mm512_storeu_ps(drow + ow, acc[v]);
        else
            _mm512_mask_storeu_ps(drow + ow, (__mmask16)((1u << (OW - ow)) - 1), acc[v]);
    }
}

/* planes [b, e) with scratch split: plane q = sample q / C, channel q % C */
__attribute__((target("avx512f"))) static void dw_planes(const dw_job *j, float *split, int64_t b, int64_t e)
{
    const od_conv_plan *p = j->p;
    const int64_t C = p->C_img, IW = p->img[2], rows = p->img[0] * p->img[1], s2 = p->stride[2], sw = j->sw;
    const int64_t pw = s2 * sw, lgrid = p->grid[0] * p->grid[1] * p->grid[2], kvol = p->k[0] * p->k[1] * p->k[2];
    const int64_t ncopy = IW < pw - p->pad[2] ? IW : pw - p->pad[2]; /* columns of a row any tap reaches */
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    float *prow = split + rows * pw; /* one padded row (strides past 2) */
    for (int64_t q = b; q < e; q++) {
        const float *src = j->x + q * rows * IW, *wk = j->w + (q % C) * kvol;
        const float *bias = j->bias ? j->bias + q % C : NULL;
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = src + r * IW;
            float *ph = split + r * pw;
            if (s2 <= 2) /* straight from x: masked loads of padded columns [a, a + 16) */
                for (int64_t m = 0; m < sw; m += 16) {
                    int64_t a = s2 * m - p->pad[2];
                    __m512 lo = _mm512_maskz_loadu_ps(dw_mask(a, IW), xr + a);
                    if (s2 == 1) {
                        _mm512_store_ps(ph + m, lo);
                        continue;
                    }
                    __m512 hi = _mm512_maskz_loadu_ps(dw_mask(a + 16, IW), xr + a + 16);
                    _mm512_store_ps(ph + m, _mm512_permutex2var_ps(lo, even, hi));
                    _mm512_store_ps(ph + sw + m, _mm512_permutex2var_ps(lo, odd, hi));
                }
            else {
                memset(prow, 0, sizeof(float) * (size_t)pw);
                if (ncopy > 0)
                    memcpy(prow + p->pad[2], xr, sizeof(float) * (size_t)ncopy);
                for (int64_t f = 0; f < s2; f++)
                    for (int64_t m = 0; m < sw; m++)
                        ph[f * sw + m] = prow[m * s2 + f];
            }
        }
        float *dst = j->y + q * lgrid;
        for (int64_t od = 0; od < p->grid[0]; od++)
            for (int64_t oh = 0; oh < p->grid[1]; oh++) {
                float *drow = dst + (od * p->grid[1] + oh) * p->grid[2];
                for (int64_t v0 = 0; v0 < j->nv; v0 += DW_NV) {
                    switch (j->nv - v0 < DW_NV ? j->nv - v0 : DW_NV) {
                    case 1: dw_row(j, split, wk, bias, drow, od, oh, v0, 1); break;
                    case 2: dw_row(j, split, wk, bias, drow, od, oh, v0, 2); break;
                    case 3: dw_row(j, split, wk, bias, drow, od, oh, v0, 3); break;
                    case 4: dw_row(j, split, wk, bias, drow, od, oh, v0, 4); break;
                    case 5: dw_row(j, split, wk, bias, drow, od, oh, v0, 5); break;
                    case 6: dw_row(j, split, wk, bias, drow, od, oh, v0, 6); break;
                    case 7: dw_row(j, split, wk, bias, drow, od, oh, v0, 7); break;
                    default: dw_row(j, split, wk, bias, drow, od, oh, v0, 8); break;
                    }
                }
            }
    }
}

/* tasks [b, e): task t runs its share of the planes in scratch slot t */
static void dw_slots(void *ctx, int64_t b, int64_t e)
{
    const dw_job *j = ctx;
    for (int64_t t = b; t < e; t++)
        dw_planes(j, j->scratch + t * j->slot, t * j->planes / j->nslot, (t + 1) * j->planes / j->nslot);
}

bool od_cpu_conv_depthwise_f32(const od_conv_plan *p, const float *x, const float *w, const float *bias, float *y)
{
    if (p->transposed || p->groups != p->C_img || p->C_grid != p->C_img || isa() != ISA_AVX512)
        return false;
    if (p->N * p->C_grid * p->grid[0] * p->grid[1] * p->grid[2] == 0)
        return true; /* nothing to write */
    /* each factor bounded first, so the products below cannot overflow */
    int64_t rows = p->img[0] * p->img[1], nv = (p->grid[2] + 15) / 16;
    if (rows * p->img[2] == 0 || rows > DW_LIMIT || nv > DW_LIMIT || p->k[2] > DW_MAXK || p->dil[2] > DW_LIMIT ||
        p->stride[2] > 16)
        return false;
    int64_t sw = (nv * 16 + (p->k[2] - 1) * p->dil[2] / p->stride[2] + 16) / 16 * 16;
    dw_job j = {.p = p, .x = x, .w = w, .bias = bias, .y = y, .nv = nv, .sw = sw, .planes = p->N * p->C_img};
    /* a slot per task, a few tasks per thread (balance on a shared machine) */
    j.slot = (rows + 1) * p->stride[2] * sw;
    j.nslot = 4 * (int64_t)od_get_num_threads() < j.planes ? 4 * (int64_t)od_get_num_threads() : j.planes;
    if (j.slot * j.nslot > DW_MAX_BYTES / (int64_t)sizeof(float))
        j.nslot = 1;
    if (j.slot * j.nslot > DW_MAX_BYTES / (int64_t)sizeof(float) ||
        !(j.scratch = aligned_alloc(64, sizeof(float) * (size_t)(j.slot * j.nslot))))
        return false;
    for (int64_t kw = 0; kw < p->k[2]; kw++)
        j.tapoff[kw] = kw * p->dil[2] % p->stride[2] * sw + kw * p->dil[2] / p->stride[2];
    if (od_parallel_for(j.nslot, 1, dw_slots, &j) != OD_OK)
        dw_slots(&j, 0, j.nslot);
    free(j.scratch);
    return true;
}

bool od_cpu_conv_direct_f32(const od_conv_plan *p, const float *x, const float *w, const float *bias, float *y)
{
    int v = p->transposed ? ISA_OFF : isa();
    int64_t lanes = v == ISA_AVX512 ? 16 : 8, G = p->groups, cg = p->C_grid / G;
    if (v == ISA_OFF || cg < lanes / 2)
        return false;
    bool pointwise = v == ISA_AVX512;
    for (int k = 0; k < 3; k++)
        pointwise &= p->k[k] == 1 && p->stride[k] == 1 && p->pad[k] == 0 && p->img[k] == p->grid[k];
    if (pointwise && p->N * p->C_grid * p->grid[0] * p->grid[1] * p->grid[2] > 0)
        return pointwise_f32(p, x, w, bias, y);
    direct_job j = {.p = p, .bias = bias, .y = y, .cin = p->C_img / G, .cg = cg,
                    .nblk = (cg + lanes - 1) / lanes, .kvol = p->k[0] * p->k[1] * p->k[2],
                    .rows = p->grid[0] * p->grid[1]};
    /* the extent every tap reaches, from the padded origin */
    j.Dp = (p->grid[0] - 1) * p->stride[0] + (p->k[0] - 1) * p->dil[0] + 1;
    j.Hp = (p->grid[1] - 1) * p->stride[1] + (p->k[1] - 1) * p->dil[1] + 1;
    j.Wp = (p->grid[2] - 1) * p->stride[2] + (p->k[2] - 1) * p->dil[2] + 1;
    int64_t planes = p->N * p->C_img, padded = planes * j.Dp * j.Hp * j.Wp,
            input = planes * p->img[0] * p->img[1] * p->img[2];
    if (p->N * p->C_grid * j.rows * p->grid[2] == 0)
        return true; /* nothing to write */
    /* a copy far larger than the input (huge padding or dilation) is left to im2col */
    if (padded > 4 * input + (16 << 20) / (int64_t)sizeof(float))
        return false;
    /* unpadded, every tap lies inside the input itself: read it in place */
    bool copy = p->pad[0] || p->pad[1] || p->pad[2];
    if (!copy) {
        j.Dp = p->img[0];
        j.Hp = p->img[1];
        j.Wp = p->img[2];
    }
    size_t wsz = (size_t)(G * j.nblk * j.cin * j.kvol * lanes);
    float *xp = copy ? malloc(sizeof(float) * (size_t)padded) : NULL, *wp = calloc(wsz, sizeof(float));
    if ((copy && !xp) || !wp) {
        free(xp);
        free(wp);
        return false;
    }
    /* weights [C_grid][cin][kvol] -> [g][blk][cin][kvol][lanes] */
    for (int64_t oc = 0; oc < p->C_grid; oc++) {
        int64_t g = oc / cg, blk = (oc % cg) / lanes, l = (oc % cg) % lanes;
        float *dst = wp + (g * j.nblk + blk) * j.cin * j.kvol * lanes + l;
        const float *src = w + oc * j.cin * j.kvol;
        for (int64_t i = 0; i < j.cin * j.kvol; i++)
            dst[i * lanes] = src[i];
    }
    pad_job pj = {.p = p, .x = x, .xp = xp, .Dp = j.Dp, .Hp = j.Hp, .Wp = j.Wp};
    if (copy && od_parallel_for(planes, 1, pad_planes, &pj) != OD_OK)
        pad_planes(&pj, 0, planes);
    j.xp = copy ? xp : x;
    j.wp = wp;
    void (*fn)(void *, int64_t, int64_t) = v == ISA_AVX512 ? tasks_avx512 : tasks_avx2;
    /* enough tasks for the pool even for a small batch, each as many rows as that allows */
    j.rpt = ROWS_PER_TASK;
    while (j.rpt > 1 && p->N * G * ((j.nblk + 1) / 2) * ((j.rows + j.rpt - 1) / j.rpt) < 8 * od_get_num_threads())
        j.rpt--;
    j.icb = CHUNK_BYTES / (int64_t)sizeof(float) / (2 * lanes * j.kvol);
    if (j.icb < 1)
        j.icb = 1;
    int64_t ntasks = p->N * G * ((j.nblk + 1) / 2) * ((j.rows + j.rpt - 1) / j.rpt);
    if (od_parallel_for(ntasks, 1, fn, &j) != OD_OK)
        fn(&j, 0, ntasks);
    free(xp);
    free(wp);
    return true;
}

/* ---- The weight gradient's product: C += A B^T on AVX-512 ----
 * conv.c's weight gradient is gW [m, n] += grid [m, L] @ cols [n, L]^T per
 * sample. OpenBLAS 0.3.21 runs this CPU on its Haswell (AVX2) kernels: an
 * 8x64x56x56 3x3 weight gradient took 9.8 ms at ~185 GFLOP/s. Here lanes
 * run along m: A is first transposed to at [L][m] (a pass over A, shared
 * by every task), and a tile of MI * 16 rows of C by NJ of its columns
 * holds MI * NJ accumulators over all of L; each step along L loads MI
 * vectors of at, broadcasts NJ elements of B's rows and does MI * NJ
 * multiply-adds. Tasks split the columns; each element of C is one
 * task's, its products summed along L in order, then added to C: the
 * result depends on neither the thread count nor the schedule. */
#define NT_NJ 6

typedef struct nt_job {
    int64_t m, n, k, ldb, ldc, ldt;
    const float *at, *b; /* at [k][ldt]: A transposed */
    float *c;
} nt_job;

static inline __attribute__((always_inline, target("avx512f"))) void nt_tile(const nt_job *j, int64_t i0,
                                                                            int64_t j0, const int MI,
                                                                            const int NJ)
{
    __m512 acc[4][NT_NJ];
    __mmask16 mk[4];
    _Pragma("GCC unroll 4") for (int v = 0; v < MI; v++)
    {
        int64_t left = j->m - i0 - 16 * v;
        mk[v] = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        _Pragma("GCC unroll 6") for (int q = 0; q < NJ; q++) acc[v][q] = _mm512_setzero_ps();
    }
    const float *at = j->at + i0, *b = j->b + j0 * j->ldb;
    for (int64_t k = 0; k < j->k; k++, at += j->ldt) {
        __m512 a[4];
        _Pragma("GCC unroll 4") for (int v = 0; v < MI; v++) a[v] = _mm512_maskz_loadu_ps(mk[v], at + 16 * v);
        _Pragma("GCC unroll 6") for (int q = 0; q < NJ; q++)
        {
            __m512 bv = _mm512_set1_ps(b[q * j->ldb + k]);
            _Pragma("GCC unroll 4") for (int v = 0; v < MI; v++) acc[v][q] = _mm512_fmadd_ps(a[v], bv, acc[v][q]);
        }
    }
    float t[NT_NJ][64];
    _Pragma("GCC unroll 6") for (int q = 0; q < NJ; q++)
        _Pragma("GCC unroll 4") for (int v = 0; v < MI; v++) _mm512_storeu_ps(&t[q][16 * v], acc[v][q]);
    int64_t rows = j->m - i0 < 16 * MI ? j->m - i0 : 16 * MI;
    for (int64_t i = 0; i < rows; i++)
        for (int q = 0; q < NJ; q++)
            j->c[(i0 + i) * j->ldc + j0 + q] += t[q][i];
}

/* One tile with MI and NJ as constants: the accumulators in registers. */
#define NT_NJ_CASES_(MI)                                                                                      \
    switch (nj) {                                                                                             \
    case 1: nt_tile(j, i0, j0, MI, 1); break;                                                                 \
    case 2: nt_tile(j, i0, j0, MI, 2); break;                                                                 \
    case 3: nt_tile(j, i0, j0, MI, 3); break;                                                                 \
    case 4: nt_tile(j, i0, j0, MI, 4); break;                                                                 \
    case 5: nt_tile(j, i0, j0, MI, 5); break;                                                                 \
    default: nt_tile(j, i0, j0, MI, 6); break;                                                                \
    }

/* column blocks [b, e) of NT_NJ, every row */
__attribute__((target("avx512f"))) static void nt_blocks(void *ctx, int64_t b, int64_t e)
{
    const nt_job *j = ctx;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t j0 = blk * NT_NJ, nj = j->n - j0 < NT_NJ ? j->n - j0 : NT_NJ;
        for (int64_t i0 = 0; i0 < j->m; i0 += 64) {
            int64_t mi = (j->m - i0 + 15) / 16;
            if (mi >= 4) {
                NT_NJ_CASES_(4)
            } else if (mi == 3) {
                NT_NJ_CASES_(3)
            } else if (mi == 2) {
                NT_NJ_CASES_(2)
            } else {
                NT_NJ_CASES_(1)
            }
        }
    }
}
#undef NT_NJ_CASES_

/* at [k][ldt] = A [m][lda]^T for A's rows [b, e) */
typedef struct nt_pack {
    const float *a;
    int64_t lda, k, ldt;
    float *at;
} nt_pack;

static void nt_transpose(void *ctx, int64_t b, int64_t e)
{
    const nt_pack *p = ctx;
    od_cpu_transpose32(p->a + b * p->lda, p->lda, p->at + b, p->ldt, e - b, p->k);
}

bool od_cpu_conv_gemm_nt_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                             float *c, int64_t ldc)
{
    if (isa() != ISA_AVX512 || m <= 0 || n <= 0 || k <= 0)
        return isa() == ISA_AVX512; /* nothing to add */
    int64_t ldt = (m + 15) / 16 * 16;
    float *at = malloc(sizeof(float) * (size_t)(k * ldt));
    if (!at)
        return false;
    nt_pack pk = {.a = a, .lda = lda, .k = k, .ldt = ldt, .at = at};
    if (od_parallel_for(m, 16, nt_transpose, &pk) != OD_OK)
        nt_transpose(&pk, 0, m);
    nt_job j = {.m = m, .n = n, .k = k, .ldb = ldb, .ldc = ldc, .ldt = ldt, .at = at, .b = b, .c = c};
    int64_t blocks = (n + NT_NJ - 1) / NT_NJ;
    if (od_parallel_for(blocks, 1, nt_blocks, &j) != OD_OK)
        nt_blocks(&j, 0, blocks);
    free(at);
    return true;
}
