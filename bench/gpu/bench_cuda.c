/* bench_cuda.c — CUDA kernel timings against the device's own ceilings
 * (make bench-gpu).
 *
 * Method: the ceilings are measured in the
 * same run — memory bandwidth by a large device-to-device cudaMemcpy
 * (bytes read + bytes written), matrix throughput by cublasSgemm and
 * cublasGemmEx(bf16) called directly. Kernel times come from CUDA events
 * around each launch on the stream the kernels use, the median of many runs
 * after a warm-up, with inputs rotated among enough copies that the working
 * set exceeds the L2 cache. Element-wise, reduction and softmax kernels are
 * timed through their launchers (the exact kernels the dispatcher runs,
 * without its per-call synchronization); matrix products through the
 * dispatcher (od_mm), whose fixed host cost is small beside a 4096^3 GEMM.
 * The tiny-op line is the end-to-end host time of od_add on 16-element CUDA
 * tensors through the typed C API (median, including the synchronization).
 * Prints one table; without a GPU prints a skip line and exits 0.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_internal.h"
#include "od_cuda.h"

#define CHECK(expr)                                                                          \
    do {                                                                                     \
        cudaError_t e_ = (expr);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "bench_cuda: %s failed: %s\n", #expr, cudaGetErrorString(e_));   \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)
#define OKD(expr)                                                                            \
    do {                                                                                     \
        od_error e_;                                                                         \
        od_status s_ = (expr);                                                               \
        if (s_ != OD_OK) {                                                                   \
            fprintf(stderr, "bench_cuda: %s failed: %s\n", #expr, e_.message);               \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static od_cu_env g_env;
static size_t g_l2;

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static double now_us(void);

typedef struct {
    od_tensor *x, *y;
} tiny_ctx;

static void tiny_add(tiny_ctx *c)
{
    od_tensor *out = NULL;
    OKD(od_add(c->x, c->y, 1.0, &out, &e_));
    od_tensor_release(out);
}

static void tiny_roundtrip(tiny_ctx *c)
{
    CHECK(cudaMemsetAsync(od_tensor_data(c->x), 0, 4, g_env.stream));
    CHECK(cudaStreamSynchronize(g_env.stream));
}

/* Prints and returns the median host microseconds of fn over 5000 calls. */
static float tiny_us(const char *label, void (*fn)(tiny_ctx *), tiny_ctx *c, const char *target)
{
    enum { WARM = 200, N = 5000 };
    float *us = malloc(sizeof *us * N);
    if (!us)
        exit(1);
    for (int i = 0; i < WARM + N; i++) {
        double t0 = now_us();
        fn(c);
        double t1 = now_us();
        if (i >= WARM)
            us[i - WARM] = (float)(t1 - t0);
    }
    qsort(us, N, sizeof *us, cmp_f);
    float med = us[N / 2];
    printf("%-26s %-18s %10.4f  %9.2f %-7s %7s  %s (p90 %.2f us, p99 %.2f us)\n", label, "16 f32", med / 1e3,
           (double)med, "us", "", target, (double)us[N * 9 / 10], (double)us[N * 99 / 100]);
    free(us);
    return med;
}

/* Median milliseconds of reps runs of fn(ctx, i) on the benchmark stream. */
typedef void (*run_fn)(void *ctx, int i);
static double time_ms(run_fn fn, void *ctx, int reps)
{
    for (int i = 0; i < 5; i++)
        fn(ctx, i);
    CHECK(cudaStreamSynchronize(g_env.stream));
    cudaEvent_t *ev = malloc(sizeof *ev * (size_t)(2 * reps));
    float *ms = malloc(sizeof *ms * (size_t)reps);
    for (int i = 0; i < 2 * reps; i++)
        CHECK(cudaEventCreate(&ev[i]));
    for (int i = 0; i < reps; i++) {
        CHECK(cudaEventRecord(ev[2 * i], g_env.stream));
        fn(ctx, i);
        CHECK(cudaEventRecord(ev[2 * i + 1], g_env.stream));
    }
    CHECK(cudaStreamSynchronize(g_env.stream));
    for (int i = 0; i < reps; i++)
        CHECK(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
    qsort(ms, (size_t)reps, sizeof *ms, cmp_f);
    double med = ms[reps / 2];
    for (int i = 0; i < 2 * reps; i++)
        cudaEventDestroy(ev[i]);
    free(ev);
    free(ms);
    return med;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* A CUDA tensor of random values (rand through the dispatcher, then cast). */
static od_tensor *dev_rand(const int64_t *sizes, int ndim, od_dtype dt)
{
    od_value args[5] = {od_list_v(OD_T_INT_LIST, (void *)sizes, (size_t)ndim), od_dtype_v(dt), od_none(),
                        od_device_v((od_device){OD_DEV_CUDA, 0}), od_none()};
    od_stack s;
    OKD(od_call_builtin(OD_OPID_randn, args, 5, &s, &e_));
    return s.rets[0].u.t;
}

/* Copies enough to rotate through more than 4x the L2 cache. */
static int rotation(size_t bytes_per_set)
{
    size_t want = 4 * g_l2 / (bytes_per_set ? bytes_per_set : 1) + 1;
    return want < 2 ? 2 : want > 16 ? 16 : (int)want;
}

/* ---- ceilings ---------------------------------------------------------------------------- */

typedef struct copy_ctx {
    void *a, *b;
    size_t bytes;
} copy_ctx;
static void run_copy(void *p, int i)
{
    copy_ctx *c = p;
    CHECK(cudaMemcpyAsync(i & 1 ? c->a : c->b, i & 1 ? c->b : c->a, c->bytes, cudaMemcpyDeviceToDevice,
                          g_env.stream));
}

typedef struct gemm_ctx {
    cublasHandle_t h;
    void *a, *b, *c;
    int n;
    int batch; /* > 1: the strided-batched GEMM (bmm's cuBLAS call) */
    int bf16;
} gemm_ctx;
static void run_gemm(void *p, int i)
{
    (void)i;
    gemm_ctx *g = p;
    float one = 1, zero = 0;
    cublasStatus_t s;
    long long st = (long long)g->n * g->n;
    if (g->batch > 1 && g->bf16)
        s = cublasGemmStridedBatchedEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->a, CUDA_R_16BF,
                                       g->n, st, g->b, CUDA_R_16BF, g->n, st, &zero, g->c, CUDA_R_16BF, g->n, st,
                                       g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    else if (g->batch > 1)
        s = cublasSgemmStridedBatched(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->a, g->n, st,
                                      g->b, g->n, st, &zero, g->c, g->n, st, g->batch);
    else if (g->bf16)
        s = cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->a, CUDA_R_16BF, g->n, g->b,
                         CUDA_R_16BF, g->n, &zero, g->c, CUDA_R_16BF, g->n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT);
    else
        s = cublasSgemm(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->a, g->n, g->b, g->n, &zero,
                        g->c, g->n);
    if (s != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "bench_cuda: cuBLAS failed: %s\n", cublasGetStatusString(s));
        exit(1);
    }
}

/* ---- kernels through their launchers ------------------------------------------------------------ */

typedef struct ew_ctx {
    od_cu_iter it[16];
    od_cu_ew_args a;
    int nsets;
} ew_ctx;
static void run_ew(void *p, int i)
{
    ew_ctx *c = p;
    CHECK(od_cu_elementwise(&c->it[i % c->nsets], &c->a, g_env.stream));
}

typedef struct red_ctx {
    od_cu_reduce_args a[16];
    void *ws;
    int nsets;
} red_ctx;
static void run_red(void *p, int i)
{
    red_ctx *c = p;
    CHECK(od_cu_reduce(&c->a[i % c->nsets], c->ws, g_env.stream));
}

enum { ROW_SOFTMAX, ROW_LOG_SOFTMAX, ROW_LAYER_NORM };
typedef struct sm_ctx {
    od_tensor *in[16], *out[16];
    od_tensor *w, *b, *mean, *rstd; /* layer_norm's affine and statistics */
    int nsets, kind;
    int64_t rows, cols;
} sm_ctx;
static void run_rows(void *p, int i)
{
    sm_ctx *c = p;
    int k = i % c->nsets;
    if (c->kind == ROW_LAYER_NORM)
        CHECK(od_cu_layer_norm(od_tensor_data(c->in[k]), OD_FLOAT32, od_tensor_data(c->w), od_tensor_data(c->b),
                               OD_FLOAT32, od_tensor_data(c->out[k]), od_tensor_data(c->mean),
                               od_tensor_data(c->rstd), OD_FLOAT32, c->rows, c->cols, 1e-5, g_env.sm_count,
                               g_env.stream));
    else
        CHECK(od_cu_softmax(od_tensor_data(c->in[k]), c->in[k]->dtype, od_tensor_data(c->out[k]),
                            c->out[k]->dtype, c->rows, c->cols, 1, c->kind == ROW_LOG_SOFTMAX, g_env.sm_count,
                            g_env.stream));
}

typedef struct mm_ctx {
    od_tensor *a, *b;
} mm_ctx;
/* od_mm for matrices, od_matmul (bmm) for batches */
static void run_mm(void *p, int i)
{
    (void)i;
    mm_ctx *c = p;
    od_tensor *out = NULL;
    OKD(c->a->ndim == 2 ? od_mm(c->a, c->b, &out, &e_) : od_matmul(c->a, c->b, &out, &e_));
    od_tensor_release(out);
}

static void row(const char *op, const char *size, double ms, const char *unit, double achieved, double ceiling,
                const char *target)
{
    printf("%-26s %-18s %10.4f  %9.1f %-7s %6.1f%%  %s\n", op, size, ms, achieved, unit,
           100.0 * achieved / ceiling, target);
}

static void bench_ew(const char *name, od_cu_ew op, od_dtype dt, int64_t n, int nin, double bw_ceiling,
                     const char *target)
{
    size_t es = od_dtype_size(dt);
    size_t set_bytes = (size_t)n * es * (size_t)(nin + 1);
    ew_ctx *c = calloc(1, sizeof *c);
    c->nsets = rotation(set_bytes);
    od_tensor *keep[16 * 3];
    int nkeep = 0;
    for (int s = 0; s < c->nsets; s++) {
        od_tensor *out = dev_rand(&n, 1, dt), *x = dev_rand(&n, 1, dt), *y = nin > 1 ? dev_rand(&n, 1, dt) : NULL;
        od_cu_iter_init(&c->it[s], out);
        OKD(od_cu_iter_add_tensor(&c->it[s], x, &e_));
        if (y)
            OKD(od_cu_iter_add_tensor(&c->it[s], y, &e_));
        od_cu_iter_coalesce(&c->it[s]);
        keep[nkeep++] = out;
        keep[nkeep++] = x;
        if (y)
            keep[nkeep++] = y;
    }
    c->a = (od_cu_ew_args){.op = op, .compute = dt, .alpha_d = 1.0, .alpha_i = 1, .sm_count = g_env.sm_count};
    double ms = time_ms(run_ew, c, 200);
    double gbs = (double)set_bytes / (ms * 1e-3) / 1e9;
    char sz[32];
    snprintf(sz, sizeof sz, "%lld %s", (long long)n, od_dtype_name(dt));
    row(name, sz, ms, "GB/s", gbs, bw_ceiling, target);
    for (int i = 0; i < nkeep; i++)
        od_tensor_release(keep[i]);
    free(c);
}

static void bench_sum_rows(int64_t rows, int64_t cols, double bw_ceiling, const char *target)
{
    red_ctx *c = calloc(1, sizeof *c);
    size_t set_bytes = (size_t)(rows * cols + rows) * 4;
    c->nsets = rotation(set_bytes);
    od_tensor *keep[32];
    int nkeep = 0;
    int64_t sz[2] = {rows, cols};
    size_t wsb = 0;
    for (int s = 0; s < c->nsets; s++) {
        od_tensor *in = dev_rand(sz, 2, OD_FLOAT32), *out = dev_rand(&rows, 1, OD_FLOAT32);
        od_cu_reduce_args *a = &c->a[s];
        memset(a, 0, sizeof *a);
        a->kind = OD_CU_RED_SUM;
        a->in_dtype = a->out_dtype = OD_CU_FLOAT32;
        a->in = od_tensor_data(in);
        a->out = od_tensor_data(out);
        a->nkept = 1;
        a->kept_sizes[0] = rows;
        a->kept_strides[0] = cols;
        a->nred = 1;
        a->red_sizes[0] = cols;
        a->red_strides[0] = 1;
        a->m = rows;
        a->r = cols;
        a->sm_count = g_env.sm_count;
        wsb = od_cu_reduce_workspace(a);
        keep[nkeep++] = in;
        keep[nkeep++] = out;
    }
    if (wsb)
        CHECK(cudaMalloc(&c->ws, wsb));
    double ms = time_ms(run_red, c, 100);
    double gbs = (double)set_bytes / (ms * 1e-3) / 1e9;
    char s[32];
    snprintf(s, sizeof s, "%lldx%lld f32", (long long)rows, (long long)cols);
    row("sum(dim=-1)", s, ms, "GB/s", gbs, bw_ceiling, target);
    if (c->ws)
        cudaFree(c->ws);
    for (int i = 0; i < nkeep; i++)
        od_tensor_release(keep[i]);
    free(c);
}

/* softmax, log_softmax or layer_norm over the last dim of rows x cols
 * float32: bytes are the input read and the output written. */
static void bench_rows(const char *label, int kind, int64_t rows, int64_t cols, double bw_ceiling,
                       const char *target)
{
    sm_ctx *c = calloc(1, sizeof *c);
    c->kind = kind;
    c->w = dev_rand(&cols, 1, OD_FLOAT32);
    c->b = dev_rand(&cols, 1, OD_FLOAT32);
    c->mean = dev_rand(&rows, 1, OD_FLOAT32);
    c->rstd = dev_rand(&rows, 1, OD_FLOAT32);
    size_t set_bytes = (size_t)(rows * cols) * 4 * 2;
    c->nsets = rotation(set_bytes);
    c->rows = rows;
    c->cols = cols;
    int64_t sz[2] = {rows, cols};
    for (int s = 0; s < c->nsets; s++) {
        c->in[s] = dev_rand(sz, 2, OD_FLOAT32);
        c->out[s] = dev_rand(sz, 2, OD_FLOAT32);
    }
    double ms = time_ms(run_rows, c, 100);
    double gbs = (double)set_bytes / (ms * 1e-3) / 1e9;
    char s[32];
    snprintf(s, sizeof s, "%lldx%lld f32", (long long)rows, (long long)cols);
    row(label, s, ms, "GB/s", gbs, bw_ceiling, target);
    for (int i = 0; i < c->nsets; i++) {
        od_tensor_release(c->in[i]);
        od_tensor_release(c->out[i]);
    }
    od_tensor *aux[] = {c->w, c->b, c->mean, c->rstd};
    for (int i = 0; i < 4; i++)
        od_tensor_release(aux[i]);
    free(c);
}

int main(void)
{
    char why[512];
    if (!od_cuda_available(why, sizeof why)) {
        printf("bench-gpu: SKIPPED: %s\n", why);
        return 0;
    }
    OKD(od_init(&e_));
    od_registry_freeze();
    od_cuda_info info;
    if (od_cuda_device_info(0, &info) != OD_OK) {
        fprintf(stderr, "bench_cuda: cannot read device 0\n");
        return 1;
    }
    g_l2 = info.l2_bytes ? info.l2_bytes : (size_t)50 << 20;
    OKD(od_cu_begin(0, &g_env, &e_));
    printf("device: %s, cc %d.%d, %d SMs, %.1f GiB, L2 %.0f MiB, driver %d, runtime %d\n", info.name,
           info.cc_major, info.cc_minor, info.sm_count, (double)info.total_mem_bytes / (1 << 30),
           (double)g_l2 / (1 << 20), info.driver_version, info.runtime_version);

    /* Ceiling 1: device-to-device copy of 1 GiB, bytes read + written. */
    copy_ctx cc = {NULL, NULL, (size_t)1 << 30};
    CHECK(cudaMalloc(&cc.a, cc.bytes));
    CHECK(cudaMalloc(&cc.b, cc.bytes));
    CHECK(cudaMemsetAsync(cc.a, 1, cc.bytes, g_env.stream));
    double copy_ms = time_ms(run_copy, &cc, 30);
    double bw = 2.0 * (double)cc.bytes / (copy_ms * 1e-3) / 1e9;
    cudaFree(cc.a);
    cudaFree(cc.b);

    /* Ceilings 2 and 3: cuBLAS SGEMM (no TF32) and bf16 GEMM at 4096. */
    gemm_ctx g = {0};
    g.n = 4096;
    cublasHandle_t h;
    OKD(od_cu_blas_handle(&g_env, &h, &e_));
    g.h = h;
    int64_t sq[2] = {4096, 4096};
    od_tensor *a32 = dev_rand(sq, 2, OD_FLOAT32), *b32 = dev_rand(sq, 2, OD_FLOAT32), *c32 = dev_rand(sq, 2, OD_FLOAT32);
    od_tensor *a16 = dev_rand(sq, 2, OD_BFLOAT16), *b16 = dev_rand(sq, 2, OD_BFLOAT16), *c16 = dev_rand(sq, 2, OD_BFLOAT16);
    double flops = 2.0 * 4096.0 * 4096.0 * 4096.0;
    g.a = od_tensor_data(a32), g.b = od_tensor_data(b32), g.c = od_tensor_data(c32), g.bf16 = 0;
    double sgemm_tf = flops / (time_ms(run_gemm, &g, 20) * 1e-3) / 1e12;
    g.a = od_tensor_data(a16), g.b = od_tensor_data(b16), g.c = od_tensor_data(c16), g.bf16 = 1;
    double bgemm_tf = flops / (time_ms(run_gemm, &g, 20) * 1e-3) / 1e12;
    /* ...and their strided-batched forms on bmm's shapes: 8 x 2048^3, the same flops */
    int64_t cube[3] = {8, 2048, 2048};
    od_tensor *ba32 = dev_rand(cube, 3, OD_FLOAT32), *bb32 = dev_rand(cube, 3, OD_FLOAT32);
    od_tensor *ba16 = dev_rand(cube, 3, OD_BFLOAT16), *bb16 = dev_rand(cube, 3, OD_BFLOAT16);
    od_tensor *bc32 = dev_rand(cube, 3, OD_FLOAT32), *bc16 = dev_rand(cube, 3, OD_BFLOAT16);
    gemm_ctx gb = {h, od_tensor_data(ba32), od_tensor_data(bb32), od_tensor_data(bc32), 2048, 8, 0};
    double sbatch_tf = flops / (time_ms(run_gemm, &gb, 20) * 1e-3) / 1e12;
    gb.a = od_tensor_data(ba16), gb.b = od_tensor_data(bb16), gb.c = od_tensor_data(bc16), gb.bf16 = 1;
    double bbatch_tf = flops / (time_ms(run_gemm, &gb, 20) * 1e-3) / 1e12;

    printf("ceilings: D2D copy %.1f GB/s (1 GiB, read+write); cublasSgemm %.1f TFLOP/s; cublasGemmEx bf16 %.1f "
           "TFLOP/s (4096^3); strided-batched 8x2048^3: %.1f / %.1f TFLOP/s\n\n",
           bw, sgemm_tf, bgemm_tf, sbatch_tf, bbatch_tf);
    printf("%-26s %-18s %10s  %17s %7s  %s\n", "op", "size", "median ms", "achieved", "of ceil", "target");

    const int64_t big = 16777216, small = 1 << 20;
    bench_ew("add (float32)", OD_CU_EW_ADD, OD_FLOAT32, big, 2, bw, ">= 80% of D2D");
    bench_ew("relu (float32)", OD_CU_EW_RELU, OD_FLOAT32, big, 1, bw, ">= 80% of D2D");
    bench_ew("sigmoid (float32)", OD_CU_EW_sigmoid, OD_FLOAT32, big, 1, bw, ">= 80% of D2D");
    bench_ew("add (bfloat16)", OD_CU_EW_ADD, OD_BFLOAT16, big, 2, bw, "");
    bench_ew("add (float32)", OD_CU_EW_ADD, OD_FLOAT32, small, 2, bw, "");
    bench_sum_rows(8192, 8192, bw, ">= 70% of D2D");
    bench_rows("softmax(dim=-1)", ROW_SOFTMAX, 8192, 8192, bw, "");
    bench_rows("softmax(dim=-1)", ROW_SOFTMAX, 4096, 4096, bw, ">= 60% of D2D");
    bench_rows("log_softmax(dim=-1)", ROW_LOG_SOFTMAX, 4096, 4096, bw, ">= 60% of D2D");
    bench_rows("layer_norm(last dim)", ROW_LAYER_NORM, 4096, 4096, bw, ">= 60% of D2D");

    mm_ctx m32 = {a32, b32}, m16 = {a16, b16};
    double ms32 = time_ms(run_mm, &m32, 20), ms16 = time_ms(run_mm, &m16, 20);
    row("mm via od_mm", "4096^3 f32", ms32, "TFLOP/s", flops / (ms32 * 1e-3) / 1e12, sgemm_tf, ">= 90% of cuBLAS");
    row("mm via od_mm", "4096^3 bf16", ms16, "TFLOP/s", flops / (ms16 * 1e-3) / 1e12, bgemm_tf, ">= 90% of cuBLAS");
    mm_ctx bm32 = {ba32, bb32}, bm16 = {ba16, bb16};
    double bms32 = time_ms(run_mm, &bm32, 20), bms16 = time_ms(run_mm, &bm16, 20);
    row("bmm via od_matmul", "8x2048^3 f32", bms32, "TFLOP/s", flops / (bms32 * 1e-3) / 1e12, sbatch_tf,
        ">= 90% of cuBLAS batched");
    row("bmm via od_matmul", "8x2048^3 bf16", bms16, "TFLOP/s", flops / (bms16 * 1e-3) / 1e12, bbatch_tf,
        ">= 90% of cuBLAS batched");

    /* Tiny op: end-to-end host time of od_add through the typed C API, and
     * the floor under it: one GPU round trip (a 4-byte memset and the stream
     * synchronization every call ends with, so an error belongs to its call). */
    int64_t n16 = 16;
    od_tensor *x = dev_rand(&n16, 1, OD_FLOAT32), *y = dev_rand(&n16, 1, OD_FLOAT32);
    tiny_ctx tx = {x, y};
    float add_us = tiny_us("tiny od_add (host e2e)", tiny_add, &tx, "<= 10 us");
    float rt_us = tiny_us("GPU round trip (floor)", tiny_roundtrip, &tx, "");
    printf("%-26s %-18s %10s  %9.0f %-7s\n", "  of which the round trip", "", "", 100.0 * rt_us / add_us, "%");

    od_cuda_alloc_info ai;
    if (od_cuda_alloc_stats(0, &ai) == OD_OK)
        printf("\nallocator: %llu allocations, %llu cache hits, %llu cudaMalloc, in use %.1f MiB, cached %.1f MiB\n",
               (unsigned long long)ai.allocs, (unsigned long long)ai.cache_hits,
               (unsigned long long)ai.device_mallocs, (double)ai.in_use_bytes / (1 << 20),
               (double)ai.cached_bytes / (1 << 20));
    od_tensor *all[] = {a32, b32, c32, a16, b16, c16, x, y, ba32, bb32, ba16, bb16, bc32, bc16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        od_tensor_release(all[i]);
    return 0;
}
