/* test_cpu_transpose.c — od_cpu_transpose32 / 64 (kernels/cpu/transpose.c)
 * on AVX-512 and on the element loop, against the definition: fresh random
 * bit patterns (NaN payloads and -0 included, compared as integers), every
 * shape from 0 to 70 rows and columns (so full blocks, tails and blocks of
 * one row or column all occur), leading dims with random padding; every
 * element of dst outside the matrix must keep its sentinel, and src is
 * never written. The seed is printed on failure; OD_TEST_SEED=<n> reruns it.
 */
#include "composite_testutil.h"
#include "cpu/cpu_kernels.h"

TestSuite(cpu_transpose, .init = test_setup);

static void sweep(size_t es, bool avx512)
{
    if (avx512 && !od_cpu_transpose_avx512(true)) {
        od_cpu_transpose_avx512(true);
        cr_skip_test("this CPU has no AVX-512F");
    }
    if (!avx512)
        TCHECK(!od_cpu_transpose_avx512(false), "the element loop could not be chosen");
    for (int it = 0; it < 400; it++) {
        int64_t rows = rng_int(0, 70), cols = rng_int(0, 70);
        if (it < 4) /* the empty shapes for sure */
            rows = it & 1 ? 0 : rows, cols = it & 2 ? 0 : cols;
        int64_t lds = cols + rng_int(0, 20), ldd = rows + rng_int(0, 20);
        size_t ns = (size_t)(rows * lds + 1), nd = (size_t)(cols * ldd + 1);
        uint64_t *s = malloc(ns * sizeof *s), *s0 = malloc(ns * sizeof *s), *d = malloc(nd * sizeof *d);
        TCHECK(s && s0 && d, "out of memory");
        for (size_t i = 0; i < ns; i++)
            s0[i] = s[i] = es == 4 ? (uint32_t)rng_next() : rng_next();
        for (size_t i = 0; i < nd; i++)
            d[i] = 0xA5A5A5A5A5A5A5A5ull;
        /* as es-byte arrays: element k of an array of 4-byte elements is the low half of s[k] packed */
        void *src = s, *dst = d;
        if (es == 4) {
            uint32_t *s32 = malloc(ns * 4), *d32 = malloc(nd * 4);
            TCHECK(s32 && d32, "out of memory");
            for (size_t i = 0; i < ns; i++)
                s32[i] = (uint32_t)s[i];
            for (size_t i = 0; i < nd; i++)
                d32[i] = 0xA5A5A5A5u;
            od_cpu_transpose32(s32, lds, d32, ldd, rows, cols);
            for (size_t i = 0; i < ns; i++)
                TCHECK(s32[i] == (uint32_t)s0[i], "src[%zu] written", i);
            for (int64_t j = 0; j < cols; j++)
                for (int64_t i = 0; i < ldd; i++) {
                    uint32_t want = i < rows ? s32[i * lds + j] : 0xA5A5A5A5u;
                    TCHECK(d32[j * ldd + i] == want, "32 %s: %lldx%lld lds %lld ldd %lld: dst[%lld][%lld] = %08x, want %08x",
                           avx512 ? "avx512" : "loop", (long long)rows, (long long)cols, (long long)lds,
                           (long long)ldd, (long long)j, (long long)i, d32[j * ldd + i], want);
                }
            TCHECK(d32[cols * ldd] == 0xA5A5A5A5u, "written past the matrix");
            free(s32);
            free(d32);
        } else {
            od_cpu_transpose64(src, lds, dst, ldd, rows, cols);
            for (size_t i = 0; i < ns; i++)
                TCHECK(s[i] == s0[i], "src[%zu] written", i);
            for (int64_t j = 0; j < cols; j++)
                for (int64_t i = 0; i < ldd; i++) {
                    uint64_t want = i < rows ? s[i * lds + j] : 0xA5A5A5A5A5A5A5A5ull;
                    TCHECK(d[j * ldd + i] == want, "64 %s: %lldx%lld lds %lld ldd %lld: dst[%lld][%lld] = %016llx, want %016llx",
                           avx512 ? "avx512" : "loop", (long long)rows, (long long)cols, (long long)lds,
                           (long long)ldd, (long long)j, (long long)i, (unsigned long long)d[j * ldd + i],
                           (unsigned long long)want);
                }
            TCHECK(d[cols * ldd] == 0xA5A5A5A5A5A5A5A5ull, "written past the matrix");
        }
        free(s);
        free(s0);
        free(d);
    }
    od_cpu_transpose_avx512(true);
}

Test(cpu_transpose, avx512_32) { sweep(4, true); }
Test(cpu_transpose, avx512_64) { sweep(8, true); }
Test(cpu_transpose, element_loop_32) { sweep(4, false); }
Test(cpu_transpose, element_loop_64) { sweep(8, false); }
