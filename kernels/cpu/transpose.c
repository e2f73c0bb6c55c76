/* transpose.c — out-of-place matrix transposes of 4- and 8-byte elements,
 * the one copy that conv_direct.c (partial sums into output rows, the
 * weight gradient's packing), linalg.c (LAPACK's column-major operands) and
 * fill.c (a transposed 2-D copy) share.
 *
 * Invariants:
 *  - dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols, bit for
 *    bit (elements are moved as integers, so NaN payloads and -0 survive);
 *    nothing else of dst is written, and nothing of src outside the matrix
 *    is read (tails use masked loads and stores).
 *  - On AVX-512 a 16 x 16 (4-byte) or 8 x 8 (8-byte) block is transposed in
 *    registers: one load and one store a row of the block instead of one
 *    element at a time, which read a cache line per element on one side.
 *    Elsewhere the same blocks are copied element by element, still a
 *    block's lines at a time.
 *  - Serial: callers that want threads split rows among them.
 */
#include <immintrin.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "cpu_kernels.h"

static _Atomic int g_avx512 = -1; /* -1: not yet asked */

static bool cpu_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

static bool has_avx512(void)
{
    int v = atomic_load_explicit(&g_avx512, memory_order_relaxed);
    if (v < 0) {
        v = cpu_avx512();
        atomic_store_explicit(&g_avx512, v, memory_order_relaxed);
    }
    return v == 1;
}

bool od_cpu_transpose_avx512(bool on)
{
    atomic_store(&g_avx512, on && cpu_avx512());
    return atomic_load(&g_avx512) == 1;
}

#define SCALAR_BLOCKS_(T, B)                                                                   \
    for (int64_t i0 = 0; i0 < rows; i0 += B)                                                   \
        for (int64_t j0 = 0; j0 < cols; j0 += B)                                               \
            for (int64_t j = j0; j < cols && j < j0 + B; j++)                                  \
                for (int64_t i = i0; i < rows && i < i0 + B; i++)                              \
                    ((T *)dst)[j * ldd + i] = ((const T *)src)[i * lds + j];

static inline __attribute__((always_inline, target("avx512f"))) __m512 unpack_pd(__m512 a, __m512 b, const bool HI)
{
    __m512d x = _mm512_castps_pd(a), y = _mm512_castps_pd(b);
    return _mm512_castpd_ps(HI ? _mm512_unpackhi_pd(x, y) : _mm512_unpacklo_pd(x, y));
}

/* o[L] = 128-bit lane L of a, b, c and d, in that order (lanes are moved whole, so this serves either width) */
static inline __attribute__((always_inline, target("avx512f"))) void lanes4(__m512 a, __m512 b, __m512 c, __m512 d,
                                                                           __m512 *o0, __m512 *o1, __m512 *o2,
                                                                           __m512 *o3)
{
    __m512 v = _mm512_shuffle_f32x4(a, b, 0x88), w = _mm512_shuffle_f32x4(c, d, 0x88); /* lanes 0, 2 */
    __m512 v1 = _mm512_shuffle_f32x4(a, b, 0xdd), w1 = _mm512_shuffle_f32x4(c, d, 0xdd); /* lanes 1, 3 */
    *o0 = _mm512_shuffle_f32x4(v, w, 0x88);
    *o2 = _mm512_shuffle_f32x4(v, w, 0xdd);
    *o1 = _mm512_shuffle_f32x4(v1, w1, 0x88);
    *o3 = _mm512_shuffle_f32x4(v1, w1, 0xdd);
}

/* One block of nr <= 16 rows by nc <= 16 columns of 4-byte elements (ES 4), or of nr <= 8 by nc <= 8 of 8-byte
 * ones (ES 8), its rows in registers as 16 or 8 vectors. */
static inline __attribute__((always_inline, target("avx512f"))) void block(const char *src, int64_t lds, char *dst,
                                                                          int64_t ldd, int64_t nr, int64_t nc,
                                                                          const int ES)
{
    const int B = 64 / ES; /* a block's rows and columns */
    __m512 r[16], t[16], u[16];
    _Pragma("GCC unroll 16") for (int i = B; i < 16; i++) r[i] = _mm512_setzero_ps(); /* unused when ES is 8 */
    __mmask16 mc = nc >= B ? (__mmask16)((1u << B) - 1) : (__mmask16)((1u << nc) - 1);
    __mmask16 mr = nr >= B ? (__mmask16)((1u << B) - 1) : (__mmask16)((1u << nr) - 1);
    _Pragma("GCC unroll 16") for (int i = 0; i < B; i++)
    {
        const char *q = src + (size_t)(i * lds) * ES;
        r[i] = i >= nr ? _mm512_setzero_ps()
               : ES == 4 ? _mm512_maskz_loadu_ps(mc, q)
                         : _mm512_castpd_ps(_mm512_maskz_loadu_pd((__mmask8)mc, q));
    }
    if (ES == 4) {
        /* t[2i], t[2i+1]: rows 2i and 2i+1 interleaved, columns 4L, 4L+1 and 4L+2, 4L+3 of 128-bit lane L */
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
        {
            t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        /* u[4g+j], lane L: rows 4g..4g+3 of column 4L+j */
        _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++)
        {
            u[4 * g] = unpack_pd(t[4 * g], t[4 * g + 2], false);
            u[4 * g + 1] = unpack_pd(t[4 * g], t[4 * g + 2], true);
            u[4 * g + 2] = unpack_pd(t[4 * g + 1], t[4 * g + 3], false);
            u[4 * g + 3] = unpack_pd(t[4 * g + 1], t[4 * g + 3], true);
        }
        /* column 4L+j is lane L of u[j], u[4+j], u[8+j], u[12+j] */
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
            lanes4(u[j], u[4 + j], u[8 + j], u[12 + j], &r[j], &r[4 + j], &r[8 + j], &r[12 + j]);
    } else {
        /* u[2i+j], lane L: rows 2i, 2i+1 of column 2L+j */
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
        {
            u[2 * i] = unpack_pd(r[2 * i], r[2 * i + 1], false);
            u[2 * i + 1] = unpack_pd(r[2 * i], r[2 * i + 1], true);
        }
        /* column 2L+j is lane L of u[j], u[2+j], u[4+j], u[6+j] */
        _Pragma("GCC unroll 2") for (int j = 0; j < 2; j++)
            lanes4(u[j], u[2 + j], u[4 + j], u[6 + j], &r[j], &r[2 + j], &r[4 + j], &r[6 + j]);
    }
    _Pragma("GCC unroll 16") for (int c = 0; c < B; c++)
    {
        if (c >= nc)
            break;
        char *q = dst + (size_t)(c * ldd) * ES;
        if (ES == 4)
            _mm512_mask_storeu_ps(q, mr, r[c]);
        else
            _mm512_mask_storeu_pd(q, (__mmask8)mr, _mm512_castps_pd(r[c]));
    }
}

__attribute__((target("avx512f"))) static void transpose_avx512(const char *src, int64_t lds, char *dst, int64_t ldd,
                                                                 int64_t rows, int64_t cols, const int ES)
{
    const int64_t B = 64 / ES;
    for (int64_t i0 = 0; i0 < rows; i0 += B)
        for (int64_t j0 = 0; j0 < cols; j0 += B) {
            const char *s = src + (size_t)(i0 * lds + j0) * ES;
            char *d = dst + (size_t)(j0 * ldd + i0) * ES;
            if (rows - i0 >= B && cols - j0 >= B) /* the common full block, its masks constant */
                block(s, lds, d, ldd, B, B, ES);
            else
                block(s, lds, d, ldd, rows - i0, cols - j0, ES);
        }
}

void od_cpu_transpose32(const void *src, int64_t lds, void *dst, int64_t ldd, int64_t rows, int64_t cols)
{
    if (rows <= 0 || cols <= 0)
        return;
    if (has_avx512()) {
        transpose_avx512(src, lds, dst, ldd, rows, cols, 4);
        return;
    }
    SCALAR_BLOCKS_(uint32_t, 16)
}

void od_cpu_transpose64(const void *src, int64_t lds, void *dst, int64_t ldd, int64_t rows, int64_t cols)
{
    if (rows <= 0 || cols <= 0)
        return;
    if (has_avx512()) {
        transpose_avx512(src, lds, dst, ldd, rows, cols, 8);
        return;
    }
    SCALAR_BLOCKS_(uint64_t, 8)
}
