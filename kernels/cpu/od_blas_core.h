/* od_blas_core.h — the OpenBLAS core to run where OpenBLAS 0.3.21 (Debian
 * 12) does not know the CPU. Shared by the server (cpu/blas.c, at load) and
 * the tests' PyTorch processes (tools/torch_quiet.c), so a test that
 * compares bits with torch's own BLAS call runs the same kernels on both
 * sides.
 *
 * Invariants: header-only, no allocation. OpenBLAS 0.3.21 runs its Prescott
 * (SSE3) kernels on CPUs newer than itself (Sapphire Rapids among them):
 * sgemm at n = 1024 measured 33 GFLOP/s against 164 with its AVX-512 ones on
 * the same machine. Where OpenBLAS fell back so and the user named no core
 * (OPENBLAS_CORETYPE), the widest core this CPU runs is chosen through
 * OpenBLAS's own dynamic-arch re-initialisation. The caller runs this while
 * the process is single-threaded (setenv) and before any BLAS call. A build
 * without DYNAMIC_ARCH (no dynamic_init / dynamic_quit: NULL) keeps its core.
 */
#ifndef OD_BLAS_CORE_H
#define OD_BLAS_CORE_H

#include <stdlib.h>
#include <strings.h>

/* corename, dynamic_init, dynamic_quit: OpenBLAS's openblas_get_corename,
 * gotoblas_dynamic_init and gotoblas_dynamic_quit (borrowed; any NULL: no
 * change) */
static inline void od_blas_core_choose(char *(*corename)(void), void (*dynamic_init)(void),
                                       void (*dynamic_quit)(void))
{
    const char *core = corename ? corename() : NULL;
    if (getenv("OPENBLAS_CORETYPE") || !core || strcasecmp(core, "Prescott") != 0 || !dynamic_init ||
        !dynamic_quit)
        return;
    __builtin_cpu_init();
    const char *want = NULL;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512cd"))
        want = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        want = "Haswell";
    if (!want)
        return; /* an SSE3-only CPU: Prescott is its core */
    setenv("OPENBLAS_CORETYPE", want, 0);
    dynamic_quit();
    dynamic_init();
}

#endif
