/* torch_quiet.c — LD_PRELOADed into the PyTorch reference processes of the
 * tests (tools/torch_ref.py, tests/diff/difftest.py's and opinfo.py's torch
 * children), never into opdispatchd.
 *
 * Why: every c10::Error that libtorch 1.13 throws records a symbolised C++
 * backtrace (backtrace, then backtrace_symbols, whose dladdr scans libtorch's
 * half a million symbols per frame): about 6 ms a raised error, where the
 * call itself takes microseconds. The differential tests ask torch for tens of
 * thousands of refusals, so this was most of their time. Python never shows
 * that trace (only with TORCH_SHOW_CPP_STACKTRACES=1), so an empty one changes
 * no message the tests compare.
 *
 * Also: the server runs OpenBLAS on the core od_blas_core.h chooses where
 * OpenBLAS 0.3.21 does not know the CPU; the same choice is made here, so
 * the tests that compare bits with torch's own BLAS calls (trsm, gemv, svd)
 * compare the same kernels. OpenBLAS is opened first for it; torch's
 * libblas.so.3 is the same file, which the loader then maps only once.
 */
#include <dlfcn.h>

#include "cpu/od_blas_core.h"
int backtrace(void **buffer, int size);

int backtrace(void **buffer, int size)
{
    (void)buffer;
    (void)size;
    return 0;
}

__attribute__((constructor)) static void blas_core_as_the_server(void)
{
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_GLOBAL);
    if (!h)
        return; /* no OpenBLAS here: nothing to align */
    od_blas_core_choose((char *(*)(void))dlsym(h, "openblas_get_corename"),
                        (void (*)(void))dlsym(h, "gotoblas_dynamic_init"),
                        (void (*)(void))dlsym(h, "gotoblas_dynamic_quit"));
}
