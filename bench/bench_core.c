/* bench_core.c — dispatcher and CPU kernel benchmarks (issue 2's targets).
 *
 * Every speed is printed beside a ceiling measured in the same run on the
 * same machine: memcpy bandwidth for memory-bound kernels, OpenBLAS sgemm
 * called directly for mm. Each figure is the median of several repetitions.
 * Bytes moved count reads plus writes (memcpy of N bytes moves 2N).
 *
 * Usage: bench_core [--quick]   (--quick: fewer repetitions, for smoke runs)
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "od_ops.h"
#include "od_parallel.h"

static int g_reps = 7;


static void die(const char *what, const od_error *err)
{
    fprintf(stderr, "bench_core: %s: %s\n", what, err ? err->message : "");
    exit(1);
}

static od_tensor *rand_tensor(const int64_t *sizes, int ndim)
{
    od_tensor *t;
    od_error err;
    if (od_tensor_empty(sizes, ndim, OD_FLOAT32, (od_device){OD_DEV_CPU, 0}, &t, &err))
        die("alloc", &err);
    float *p = od_tensor_data(t);
    int64_t n = od_tensor_numel(t);
    uint64_t x = 0x9E3779B97F4A7C15u ^ (uint64_t)time(NULL);
    for (int64_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    return t;
}

/* ---- dispatch overhead ---------------------------------------------------- */

static od_status k_empty(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx, (void)op, (void)ks, (void)err;
    s->nrets = 1;
    s->rets[0] = od_none();
    return OD_OK;
}

static void bench_dispatch(const od_op *empty_op)
{
    int64_t one = 1;
    od_tensor *a = rand_tensor(&one, 1);
    od_value args[1] = {od_tensor_v(a)};
    od_stack s;
    od_error err;
    const long iters = 20 * 1000 * 1000;
    double samples[16];
    for (int r = 0; r < g_reps; r++) {
        double t0 = now_s();
        for (long i = 0; i < iters; i++) {
            od_stack_init(&s, args, 1);
            if (od_call(empty_op, &s, &err))
                die("empty call", &err);
        }
        samples[r] = (now_s() - t0) / (double)iters * 1e9;
    }
    printf("%-58s %8.1f ns   (target <= 30 ns)\n",
           "key set + lookup + boxed call of an empty kernel", median(samples, g_reps));
    od_tensor_release(a);
}

static void bench_tiny_add(void)
{
    int64_t one = 1;
    od_tensor *a = rand_tensor(&one, 1), *b = rand_tensor(&one, 1), *out;
    od_error err;
    const long iters = 2 * 1000 * 1000;
    double samples[16];
    for (int r = 0; r < g_reps; r++) {
        double t0 = now_s();
        for (long i = 0; i < iters; i++) {
            if (od_add(a, b, 1.0, &out, &err))
                die("od_add", &err);
            od_tensor_release(out);
        }
        samples[r] = (now_s() - t0) / (double)iters * 1e9;
    }
    printf("%-58s %8.1f ns   (target <= 300 ns)\n",
           "typed od_add, two 1-element float32, allocation included", median(samples, g_reps));
    od_tensor_release(a);
    od_tensor_release(b);
}

/* ---- memory bandwidth ------------------------------------------------------- */

typedef enum { EW_ADD, EW_RELU, EW_SIGMOID } ew_kind;

/* Medians of the kernel's GB/s, of memcpy's sampled beside it, and of
 * their ratio sample by sample (*ceiling, *ratio). */
static double elementwise_gbs(ew_kind kind, int64_t n, double *ceiling, double *ratio)
{
    od_tensor *a = rand_tensor(&n, 1), *b = rand_tensor(&n, 1), *out;
    od_error err;
    int inner = n <= 1000 ? 20000 : n <= 1000000 ? 200 : 10;
    double bytes = (double)n * 4.0 * (kind == EW_ADD ? 3.0 : 2.0);
    double samples[16], ceil_s[16], ratio_s[16];
    memcpy_ctx m;
    memcpy_open(&m, (size_t)n * 4, inner);
    for (int r = 0; r < g_reps; r++) {
        ceil_s[r] = memcpy_sample(&m);
        double t0 = now_s();
        for (int i = 0; i < inner; i++) {
            od_status st = kind == EW_ADD ? od_add(a, b, 1.0, &out, &err)
                           : kind == EW_RELU ? od_relu(a, &out, &err)
                                             : od_sigmoid(a, &out, &err);
            if (st)
                die("elementwise", &err);
            od_tensor_release(out); /* a fresh output each call, as a user gets it */
        }
        samples[r] = bytes * inner / (now_s() - t0) / 1e9;
        ratio_s[r] = samples[r] / ceil_s[r];
    }
    memcpy_close(&m);
    od_tensor_release(a);
    od_tensor_release(b);
    *ceiling = median(ceil_s, g_reps);
    *ratio = median(ratio_s, g_reps);
    return median(samples, g_reps);
}

static void bench_elementwise(void)
{
    static const char *names[] = {"add", "relu", "sigmoid"};
    const int64_t sizes[] = {1000, 1000000, 16000000};
    printf("\nelementwise float32, fresh output per call (GB/s = reads + writes; memcpy sampled between the\n"
           "kernel's samples, ratio the median of the pairs' ratios)\n");
    printf("%-10s %12s %10s %10s %8s\n", "op", "elements", "GB/s", "memcpy", "ratio");
    for (int si = 0; si < 3; si++) {
        for (int k = 0; k < 3; k++) {
            double ceiling, ratio, g = elementwise_gbs((ew_kind)k, sizes[si], &ceiling, &ratio);
            printf("%-10s %12lld %10.2f %10.2f %7.0f%%%s\n", names[k], (long long)sizes[si], g, ceiling,
                   100.0 * ratio, sizes[si] == 16000000 ? "   (target >= 70%)" : "");
        }
    }
}

/* ---- mm versus sgemm ----------------------------------------------------------- */

static void bench_mm(void)
{
    printf("\nmm float32 (GFLOP/s = 2n^3 / time)\n");
    printf("%-6s %12s %12s %8s\n", "n", "od mm", "sgemm", "ratio");
    const int ns[] = {64, 512, 2048};
    for (int i = 0; i < 3; i++) {
        int64_t n = ns[i], sz[2] = {n, n};
        od_tensor *a = rand_tensor(sz, 2), *b = rand_tensor(sz, 2), *out;
        float *c = aligned_alloc(64, (size_t)(n * n) * sizeof(float));
        od_error err;
        int inner = n <= 64 ? 2000 : n <= 512 ? 10 : 1;
        double flops = 2.0 * (double)n * (double)n * (double)n * inner;
        double s_od[16], s_blas[16];
        for (int r = 0; r < g_reps; r++) {
            double t0 = now_s();
            for (int j = 0; j < inner; j++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f,
                            od_tensor_data(a), (int)n, od_tensor_data(b), (int)n, 0.0f, c, (int)n);
            s_blas[r] = flops / (now_s() - t0) / 1e9;
            t0 = now_s();
            for (int j = 0; j < inner; j++) {
                if (od_mm(a, b, &out, &err))
                    die("od_mm", &err);
                od_tensor_release(out);
            }
            s_od[r] = flops / (now_s() - t0) / 1e9;
        }
        double g = median(s_od, g_reps), ceiling = median(s_blas, g_reps);
        printf("%-6lld %12.1f %12.1f %7.0f%%%s\n", (long long)n, g, ceiling, 100.0 * g / ceiling,
               n == 2048 ? "   (target >= 90%)" : "");
        free(c);
        od_tensor_release(a);
        od_tensor_release(b);
    }
}

/* ---- row reductions ------------------------------------------------------------- */

/* One call of a row operator over x (borrowed): 0 sum, 1 softmax, 2
 * log_softmax, 3 layer_norm (w and b borrowed, [D]); outputs released. */
static void row_call(int k, od_tensor *x, od_tensor *w, od_tensor *b)
{
    od_error err;
    od_tensor *out = NULL;
    int64_t last = -1, D = x->sizes[x->ndim - 1];
    od_status st;
    if (k == 0)
        st = od_sum(x, &last, 1, false, &out, &err);
    else if (k == 1)
        st = od_softmax(x, -1, &out, &err);
    else if (k == 2) {
        od_value a[3] = {od_tensor_v(x), od_int(-1), od_bool(false)};
        st = od_call_builtin1(OD_OPID__log_softmax, a, 3, &out, &err);
    } else {
        od_value a[5] = {od_tensor_v(x), od_list_v(OD_T_INT_LIST, &D, 1), od_tensor_v(w), od_tensor_v(b),
                         od_double(1e-5)};
        st = od_call_builtin1(OD_OPID_native_layer_norm, a, 5, &out, &err); /* mean and rstd released */
    }
    if (st)
        die("row operator", &err);
    od_tensor_release(out);
}

static void bench_rows(void)
{
    int64_t sz[2] = {4096, 4096};
    od_tensor *x = rand_tensor(sz, 2), *w = rand_tensor(&sz[1], 1), *b = rand_tensor(&sz[1], 1);
    static const char *const name[4] = {"sum", "softmax", "log_softmax", "layer_norm"};
    double bytes_in = (double)(sz[0] * sz[1]) * 4.0;
    /* reads + writes per call: sum writes one float per row, the others a whole output */
    double bytes[4] = {bytes_in + 4096 * 4, 2.0 * bytes_in, 2.0 * bytes_in, 2.0 * bytes_in + 2 * 4096 * 4};
    double s_k[4][16], r_k[4][16], s_cp[4][16];
    memcpy_ctx m;
    memcpy_open(&m, (size_t)(sz[0] * sz[1]) * 4, 5); /* as many as the kernels' 5 calls */
    for (int r = 0; r < g_reps; r++)
        for (int k = 0; k < 4; k++) {
            s_cp[k][r] = memcpy_sample(&m); /* right before the kernel's sample: see memcpy_ctx */
            double t0 = now_s();
            for (int j = 0; j < 5; j++)
                row_call(k, x, w, b);
            s_k[k][r] = bytes[k] * 5 / (now_s() - t0) / 1e9;
            r_k[k][r] = s_k[k][r] / s_cp[k][r];
        }
    memcpy_close(&m);
    printf("\nlast-dim row operators over 4096x4096 float32 (GB/s = reads + writes; ratio: median of the\n"
           "ratios to a memcpy sample taken right before each kernel sample)\n");
    for (int k = 0; k < 4; k++)
        printf("%-12s %8.2f GB/s  memcpy %8.2f  %5.0f%%   (target >= 60%%)\n", name[k], median(s_k[k], g_reps),
               median(s_cp[k], g_reps), 100.0 * median(r_k[k], g_reps));
    od_tensor_release(x);
    od_tensor_release(w);
    od_tensor_release(b);
}

/* ---- a transposed copy ------------------------------------------------------------
 * contiguous() of x.t() for a 4096x4096 float32 x: one read and one write of
 * each element, one side along rows and the other down columns (fill.c's
 * transposed copy); memcpy of the same bytes sampled right before each. */
static void bench_transpose(void)
{
    int64_t sz[2] = {4096, 4096};
    od_tensor *x = rand_tensor(sz, 2), *xt = NULL;
    od_error err;
    if (od_tensor_t(x, &xt, &err))
        die("t", &err);
    double bytes = 2.0 * (double)(sz[0] * sz[1]) * 4.0, s_k[16], s_cp[16], r_k[16];
    memcpy_ctx m;
    memcpy_open(&m, (size_t)(sz[0] * sz[1]) * 4, 5);
    for (int r = 0; r < g_reps; r++) {
        s_cp[r] = memcpy_sample(&m);
        double t0 = now_s();
        for (int j = 0; j < 5; j++) {
            od_value a[2] = {od_tensor_v(xt), od_int(OD_MF_CONTIGUOUS)};
            od_tensor *out = NULL;
            if (od_call_builtin1(OD_OPID_contiguous, a, 2, &out, &err))
                die("contiguous", &err);
            od_tensor_release(out);
        }
        s_k[r] = bytes * 5 / (now_s() - t0) / 1e9;
        r_k[r] = s_k[r] / s_cp[r];
    }
    memcpy_close(&m);
    printf("\ncontiguous() of a transposed 4096x4096 float32 (GB/s = reads + writes; ratio as above)\n");
    printf("%-12s %8.2f GB/s  memcpy %8.2f  %5.0f%%\n", "x.t()", median(s_k, g_reps), median(s_cp, g_reps),
           100.0 * median(r_k, g_reps));
    od_tensor_release(xt);
    od_tensor_release(x);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--quick") == 0)
        g_reps = 3;
    od_error err;
    if (od_init(&err))
        die("od_init", &err);
    od_op *empty_op = NULL;
    if (OD_DEF("bench::empty(Tensor self) -> Tensor", &empty_op, &err) ||
        OD_IMPL(empty_op, OD_KEY_CPU, k_empty, NULL, &err))
        die("define bench::empty", &err);
    od_registry_freeze();
    printf("bench_core: median of %d repetitions; ceilings measured in this run; %d threads\n\n", g_reps,
           od_get_num_threads());
    bench_dispatch(empty_op);
    bench_tiny_add();
    bench_elementwise();
    bench_mm();
    bench_rows();
    bench_transpose();
    return 0;
}
