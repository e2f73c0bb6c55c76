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

/* od_cpu_copy_into from a source whose last two dims are swapped in memory (fill.c's transposed copy, which
 * runs transpose.c in tasks of 64 rows) into a contiguous dst: 2-D and 3-D, the batch dim itself permuted
 * or not, 4- and 8-byte dtypes, shapes on both sides of the 4096-element threshold and of a task's rows;
 * every element against the source read through its strides */
Test(cpu_transpose, transposed_copy_into_contiguous)
{
    const od_dtype dts[4] = {OD_FLOAT32, OD_INT32, OD_FLOAT64, OD_INT64};
    const od_device cpu = {OD_DEV_CPU, 0};
    for (int it = 0; it < 60; it++) {
        od_dtype dt = dts[it % 4];
        size_t es = od_dtype_size(dt);
        int nd = 2 + it % 2;
        int64_t R = rng_int(2, 150), C = rng_int(2, 150), Bn = nd == 3 ? rng_int(1, 3) : 1;
        /* base holds [Bn][C][R] (or [C][R]); its permute (0, 2, 1) (or transpose) is [Bn][R][C] with unit stride
         * along dim -2; with batch_outer false the base is [C][Bn][R] so the batch stride is R */
        bool batch_outer = rng_int(0, 1);
        int64_t bs[3] = {Bn, C, R}, bs2[3] = {C, Bn, R}, s2[2] = {C, R};
        od_tensor *base = NULL, *src = NULL, *dst = NULL;
        od_error e;
        OKCALL(od_tensor_empty(nd == 2 ? s2 : batch_outer ? bs : bs2, nd, dt, cpu, &base, &e));
        uint8_t *bp = od_tensor_data(base);
        for (int64_t i = 0; i < od_tensor_numel(base) * (int64_t)es; i++)
            bp[i] = (uint8_t)rng_next();
        if (nd == 2) {
            OKCALL(od_tensor_transpose(base, 0, 1, &src, &e));
        } else {
            int64_t perm[3] = {0, 2, 1}, perm2[3] = {1, 2, 0};
            OKCALL(od_tensor_permute(base, batch_outer ? perm : perm2, 3, &src, &e));
        }
        OKCALL(od_tensor_empty(src->sizes, nd, dt, cpu, &dst, &e));
        OKCALL(od_cpu_copy_into(dst, src, &e));
        const uint8_t *sp = od_tensor_data(src), *dp = od_tensor_data(dst);
        for (int64_t b = 0; b < Bn; b++)
            for (int64_t i = 0; i < R; i++)
                for (int64_t j = 0; j < C; j++) {
                    int64_t so = (nd == 3 ? b * src->strides[0] : 0) + i * src->strides[nd - 2] + j * src->strides[nd - 1];
                    int64_t dof = (b * R + i) * C + j;
                    TCHECK(memcmp(sp + so * (int64_t)es, dp + dof * (int64_t)es, es) == 0,
                           "%s %dd batch %lld (outer %d) R %lld C %lld: [%lld][%lld][%lld] differs",
                           od_dtype_name(dt), nd, (long long)Bn, batch_outer, (long long)R, (long long)C,
                           (long long)b, (long long)i, (long long)j);
                }
        od_tensor_release(dst);
        od_tensor_release(src);
        od_tensor_release(base);
    }
}

/* od_cpu_copy_into between column slices whose rows lie t bytes apart modulo 4096, t from 0 to 80 (fill.c
 * copies a dense run that starts 1-63 bytes past its source back to front, where glibc's memcpy 4K-aliased):
 * uint8 rows of 1000 random bytes, so every distance occurs; each slot against its source, and the bytes of
 * dst's rows outside the slot keep their sentinel */
Test(cpu_transpose, copy_into_near_aliased_rows)
{
    const od_device cpu = {OD_DEV_CPU, 0};
    const int64_t R = 9, N = 1000, ss[2] = {R, 4096}, ds[2] = {R, 8192};
    od_tensor *sbase = NULL, *dbase = NULL;
    od_error e;
    OKCALL(od_tensor_empty(ss, 2, OD_UINT8, cpu, &sbase, &e));
    OKCALL(od_tensor_empty(ds, 2, OD_UINT8, cpu, &dbase, &e));
    uint8_t *sp = od_tensor_data(sbase), *dp = od_tensor_data(dbase);
    for (int64_t i = 0; i < R * 4096; i++)
        sp[i] = (uint8_t)rng_next();
    int64_t delta = (int64_t)(((uintptr_t)dp - (uintptr_t)sp) & 4095);
    for (int64_t t = 0; t <= 80; t++) {
        int64_t b = ((t - delta) % 4096 + 4096) % 4096;
        memset(dp, 0xA5, (size_t)(R * 8192));
        od_tensor *src = NULL, *dst = NULL;
        OKCALL(od_tensor_slice(sbase, 1, 0, N, 1, &src, &e));
        OKCALL(od_tensor_slice(dbase, 1, b, b + N, 1, &dst, &e));
        OKCALL(od_cpu_copy_into(dst, src, &e));
        for (int64_t r = 0; r < R; r++)
            for (int64_t j = 0; j < 8192; j++) {
                bool in = j >= b && j < b + N;
                uint8_t want = in ? sp[r * 4096 + j - b] : 0xA5;
                TCHECK(dp[r * 8192 + j] == want, "distance %lld: row %lld byte %lld is %d, want %d", (long long)t,
                       (long long)r, (long long)j, dp[r * 8192 + j], want);
            }
        od_tensor_release(dst);
        od_tensor_release(src);
    }
    od_tensor_release(dbase);
    od_tensor_release(sbase);
}
