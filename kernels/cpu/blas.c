/* blas.c — CPU mm, bmm, addmm, addmv, baddbmm, addbmm and dot.
 *
 * Invariants:
 *  - od_shape_matmul (kernels/shape_reduce.c) has validated ranks, sizes and
 *    dtypes; the result comes from od_alloc_outputs (contiguous).
 *  - float32 / float64 go to OpenBLAS (sgemm/dgemm, sdot/ddot). An operand
 *    that is row-major or column-major with a usable leading dimension (a
 *    transpose, a slice of rows or columns) is passed as it is, through the
 *    trans flag and lda; only other layouts are copied, so contiguous and
 *    transposed operands cost no copy.
 *  - float16 / bfloat16 are widened exactly to float32, multiplied by sgemm
 *    (float accumulation, as torch's opmath) and rounded back once.
 *  - Integer dtypes multiply in uint64 (modular, so truncating to the output
 *    width gives torch's wraparound, with no signed-overflow UB). bool is
 *    rejected, as torch's CPU matmuls do.
 *  - addmm: out = beta * self + alpha * (mat1 @ mat2) with self broadcast to
 *    the output; beta == 0 never reads self, so NaN/inf there do not leak
 *    (BLAS ignores C when beta is 0).
 *  - addmv (float32, float64) is ATen's gemv call, the same bits as torch's;
 *    otherwise it is the product with the vector as a [k, 1] matrix; baddbmm the
 *    batched one; addbmm one addmm per batch into the same output (beta on
 *    the first), as ATen sums them. An empty product is beta * self, or
 *    zeros when beta is 0.
 *  - Threads: OpenBLAS (pthreads build) runs its own pool. It is sized once,
 *    on the first BLAS call, to od_get_num_threads(), so BLAS and
 *    od_parallel_for each use every core and never more; neither nests in the
 *    other (no BLAS call is made from inside an od_parallel_for region here).
 *    Every BLAS or LAPACK call is preceded by od_cpu_blas_enter, which also
 *    keeps OpenBLAS's workers off the caller's CPU (see there).
 */
#include <cblas.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_blas_core.h"
#include "od_half.h"
#include "od_parallel.h"
#include "od_shape.h"

/* At load: before main() for the server and programs linked with the
 * library, while the process is single-threaded and no BLAS call has been
 * made (od_blas_core.h says why and what). A program that dlopens
 * libopdispatch.so while other threads call OpenBLAS should set
 * OPENBLAS_CORETYPE itself. Weak, so a build without DYNAMIC_ARCH (neither
 * function) keeps its core. */
extern char *openblas_get_corename(void);
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));

__attribute__((constructor)) static void blas_core_init(void)
{
    od_blas_core_choose(openblas_get_corename, gotoblas_dynamic_init, gotoblas_dynamic_quit);
}

static pthread_once_t g_blas_threads_once = PTHREAD_ONCE_INIT;
static cpu_set_t g_blas_allowed; /* the process's CPUs, at init */
static int g_blas_workers;       /* OpenBLAS's threads besides the caller; 0: never steered */
static pthread_mutex_t g_blas_steer_m = PTHREAD_MUTEX_INITIALIZER;
static int g_blas_away = -1; /* under g_blas_steer_m: the CPU its workers were last kept off */

static void blas_threads_init(void)
{
    openblas_set_num_threads(od_get_num_threads());
    /* the pthreads build only: the OpenMP one has no workers of its own */
    if (openblas_get_parallel() == OPENBLAS_THREAD && sched_getaffinity(0, sizeof g_blas_allowed, &g_blas_allowed) == 0)
        g_blas_workers = openblas_get_num_threads() - 1;
}

/* OpenBLAS's idle workers poll, yielding, for 2^28 cycles after a call, and
 * so does a caller waiting for them. When the kernel wakes a worker onto the
 * caller's CPU (it does on a busy 2-vCPU VM, the other CPU idle), the two
 * take turns there, each yielding to the other, and the load balancer leaves
 * both alone for milliseconds since both are cache-hot: a 1000x1000 sgemv
 * took 137-150 us instead of 34-50 in half the requests made after a pause.
 * So the workers are kept off the caller's CPU, by od_parallel's rule for its
 * own pool (od_keep_off_caller_cpu: 2 to 8 CPUs, a system call per worker
 * only when the caller's CPU changed), and only for calls big enough for
 * OpenBLAS to use them (below, it runs gemm and gemv on the caller alone). */
#define BLAS_STEER_MIN 262144.0 /* OpenBLAS 0.3.21: 65536 * GEMM_MULTITHREAD_THRESHOLD (4) */

void od_cpu_blas_enter(double work)
{
    pthread_once(&g_blas_threads_once, blas_threads_init);
    if (g_blas_workers <= 0 || work <= BLAS_STEER_MIN)
        return;
    cpu_set_t set;
    pthread_mutex_lock(&g_blas_steer_m);
    if (od_keep_off_caller_cpu(&g_blas_allowed, &g_blas_away, &set))
        for (int i = 0; i < g_blas_workers; i++) /* 0 .. n-2 are the workers, n-1 the caller */
            openblas_setaffinity(i, sizeof set, &set);
    pthread_mutex_unlock(&g_blas_steer_m);
}

/* Operands are 2-D matrices or 3-D batches of them (bmm): the matrix is the
 * last two dims, the batch stride 0 for a plain matrix. Read in place, no
 * view objects, so a small mm costs no extra allocation. */
static inline int64_t rows_of(const od_tensor *t) { return t->sizes[t->ndim - 2]; }
static inline int64_t cols_of(const od_tensor *t) { return t->sizes[t->ndim - 1]; }
static inline int64_t batches_of(const od_tensor *t) { return t->ndim == 3 ? t->sizes[0] : 1; }
static inline int64_t batch_stride(const od_tensor *t) { return t->ndim == 3 ? t->strides[0] : 0; }

/* BLAS view of t's matrix: no copy needed when one of its dims has unit
 * stride and the other a leading dimension at least as large as the
 * unit-stride dim's size. Size-1 dims may have any stride. */
static bool blas_layout(const od_tensor *t, CBLAS_TRANSPOSE *tr, int64_t *ld)
{
    int nd = t->ndim;
    int64_t r = t->sizes[nd - 2], c = t->sizes[nd - 1], s0 = t->strides[nd - 2], s1 = t->strides[nd - 1];
    int64_t lr = r > 1 ? r : 1, lc = c > 1 ? c : 1;
    if ((c == 1 || s1 == 1) && (r == 1 || s0 >= lc)) {
        *tr = CblasNoTrans;
        *ld = r == 1 ? lc : s0;
    } else if ((r == 1 || s0 == 1) && (c == 1 || s1 >= lr)) {
        *tr = CblasTrans;
        *ld = c == 1 ? lr : s1;
    } else {
        return false;
    }
    return *ld <= INT_MAX;
}

/* alpha / beta as the dtype's compute type. An integral dtype truncates a
 * float toward zero (torch 1.13's Scalar::to<int64_t>; the shape function
 * has range-checked it), so uint8 with beta=0.2 ignores self. */
static void scalar_arg(const od_value *v, double *d, int64_t *i)
{
    *d = od_value_as_double(v);
    *i = v->tag == OD_T_INT ? v->u.i : v->tag == OD_T_BOOL ? (int64_t)v->u.b : od_double_to_i64(*d);
}

/* ---- float32 / float64 through cblas ------------------------------------------------ */

/* C[b] = alpha * A[b] @ B[b] + beta * C[b] for every batch b. a, b: f32/f64
 * matrices or batches (the batch dim may have any stride, 0 included); c:
 * contiguous, same dtype. */
static od_status gemm_blas(od_tensor *a, od_tensor *b, od_tensor *c, double alpha, double beta,
                           od_error *err)
{
    od_tensor *ac = NULL, *bc = NULL;
    CBLAS_TRANSPOSE ta, tb;
    int64_t lda, ldb;
    od_status st = OD_OK;
    if (!blas_layout(a, &ta, &lda)) {
        if ((st = od_cpu_to_dtype(a, a->dtype, &ac, err)))
            return st;
        a = ac;
        blas_layout(a, &ta, &lda);
    }
    if (!blas_layout(b, &tb, &ldb)) {
        if ((st = od_cpu_to_dtype(b, b->dtype, &bc, err))) {
            od_tensor_release(ac);
            return st;
        }
        b = bc;
        blas_layout(b, &tb, &ldb);
    }
    int64_t batch = batches_of(c), n = rows_of(c), m = cols_of(c), k = cols_of(a);
    if (n > INT_MAX || m > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX) {
        st = od_error_set(err, OD_ETOOLARGE,
                          "matrix product of %lldx%lld and %lldx%lld exceeds OpenBLAS's 32-bit sizes",
                          (long long)n, (long long)k, (long long)k, (long long)m);
    } else {
        od_cpu_blas_enter((double)n * (double)m * (double)k);
        size_t es = od_dtype_size(c->dtype);
        const char *pa = od_tensor_data(a), *pb = od_tensor_data(b);
        char *pc = od_tensor_data(c);
        for (int64_t i = 0; i < batch; i++) {
            const void *ai = pa + (size_t)(i * batch_stride(a)) * es;
            const void *bi = pb + (size_t)(i * batch_stride(b)) * es;
            void *ci = pc + (size_t)(i * n * m) * es;
            if (c->dtype == OD_FLOAT32)
                cblas_sgemm(CblasRowMajor, ta, tb, (int)n, (int)m, (int)k, (float)alpha, ai, (int)lda,
                            bi, (int)ldb, (float)beta, ci, (int)m);
            else
                cblas_dgemm(CblasRowMajor, ta, tb, (int)n, (int)m, (int)k, alpha, ai, (int)lda, bi,
                            (int)ldb, beta, ci, (int)m);
        }
    }
    od_tensor_release(ac);
    od_tensor_release(bc);
    return st;
}

/* addmv's product y = alpha * A x + beta * y (A [n, k], x a [k, 1] view of
 * vec, y a [n, 1] view of the result) as ATen 1.13's addmv_out_cpu makes
 * it: gemv on A where it lies ('n' with a column-major A, 't' with a
 * row-major one, else on a row-major copy), lda = the dimension when A has
 * one column, vec's and the result's strides as the increments. The same
 * OpenBLAS call, so the same bits; sgemm with one column packed A on every
 * call (1000x1000: 83 us, torch 24). false (nothing done) where ATen's
 * fast path would not take it either (a zero-stride vec, sizes past int):
 * the caller's sgemm then serves. */
static bool gemv_blas(od_tensor *a, od_tensor *x, od_tensor *y, double alpha, double beta, od_status *st,
                      od_error *err)
{
    int64_t n = a->sizes[0], k = a->sizes[1], s0 = a->strides[0], s1 = a->strides[1];
    int64_t incx = x->strides[0], incy = y->strides[0];
    if (k == 1)
        incx = 1; /* one element: its stride is never read */
    if (n == 1)
        incy = 1;
    od_tensor *ac = NULL;
    bool col = s0 == 1 && (k == 1 || s1 >= (n > 1 ? n : 1));
    bool row = !col && s1 == 1 && (n == 1 || s0 >= (k > 1 ? k : 1));
    char tr = col ? 'n' : 't';
    int64_t M = col ? n : k, N = col ? k : n, lda = col ? s1 : row ? s0 : k; /* else a row-major copy */
    if (N == 1)
        lda = M;
    if (incx <= 0 || incy <= 0 || M > INT_MAX || N > INT_MAX || lda > INT_MAX || incx > INT_MAX || incy > INT_MAX)
        return false;
    if (!col && !row) {
        if ((*st = od_cpu_to_dtype(a, a->dtype, &ac, err)))
            return true;
        a = ac;
    }
    od_cpu_blas_enter((double)M * (double)N);
    CBLAS_TRANSPOSE t = tr == 'n' ? CblasNoTrans : CblasTrans;
    if (y->dtype == OD_FLOAT32)
        cblas_sgemv(CblasColMajor, t, (int)M, (int)N, (float)alpha, od_tensor_data(a), (int)lda, od_tensor_data(x),
                    (int)incx, (float)beta, od_tensor_data(y), (int)incy);
    else
        cblas_dgemv(CblasColMajor, t, (int)M, (int)N, alpha, od_tensor_data(a), (int)lda, od_tensor_data(x),
                    (int)incx, beta, od_tensor_data(y), (int)incy);
    od_tensor_release(ac);
    *st = OD_OK;
    return true;
}

/* ---- integer dtypes: uint64 loop --------------------------------------------------- */

typedef struct igemm_ctx {
    const uint64_t *a, *b; /* contiguous int64 [batch, n, k], [batch, k, m] */
    uint64_t *c;           /* contiguous int64 [batch, n, m], holds self when use_beta */
    int64_t n, m, k;
    uint64_t alpha, beta;
    bool use_beta;
} igemm_ctx;

static void igemm_rows(void *ctx, int64_t begin, int64_t end)
{
    const igemm_ctx *g = ctx;
    for (int64_t r = begin; r < end; r++) {
        int64_t bt = r / g->n;
        const uint64_t *a = g->a + r * g->k;
        const uint64_t *b = g->b + bt * g->k * g->m;
        uint64_t *c = g->c + r * g->m;
        for (int64_t j = 0; j < g->m; j++)
            c[j] = g->use_beta ? g->beta * c[j] : 0u;
        for (int64_t kk = 0; kk < g->k; kk++) {
            uint64_t av = g->alpha * a[kk];
            const uint64_t *brow = b + kk * g->m;
            for (int64_t j = 0; j < g->m; j++)
                c[j] += av * brow[j];
        }
    }
}

/* ---- the kernel ---------------------------------------------------------------------- */

static od_status matmul(od_opid id, od_tensor *A, od_tensor *B, od_tensor *self, const od_value *beta_v,
                        const od_value *alpha_v, od_tensor *out, od_error *err)
{
    od_dtype dt = out->dtype;
    bool integral = od_dtype_is_integral(dt, false);
    double alpha = 1.0, beta = 0.0;
    int64_t ialpha = 1, ibeta = 0;
    od_status st;
    if (alpha_v)
        scalar_arg(alpha_v, &alpha, &ialpha);
    if (beta_v)
        scalar_arg(beta_v, &beta, &ibeta);
    bool use_beta = self && (integral ? ibeta != 0 : beta != 0.0);
    if (od_tensor_numel(out) == 0)
        return OD_OK;
    if (use_beta && (st = od_cpu_copy_into(out, self, err)))
        return st;

    od_tensor *aw = NULL, *bw = NULL, *cw = NULL;
    od_dtype wdt = integral ? OD_INT64 : dt == OD_FLOAT64 ? OD_FLOAT64 : OD_FLOAT32;
    /* Working copies only where the dtype differs (half types, narrow ints) or
     * the integer loop wants contiguous rows. */
    if (wdt != dt || integral) {
        if ((st = od_cpu_to_dtype(A, wdt, &aw, err)) || (st = od_cpu_to_dtype(B, wdt, &bw, err)))
            goto done;
        if (use_beta || out->dtype == wdt) { /* out itself when it is already int64 */
            st = od_cpu_to_dtype(out, wdt, &cw, err);
        } else {
            st = od_tensor_empty(out->sizes, out->ndim, wdt, out->device, &cw, err);
        }
        if (st)
            goto done;
    } else {
        od_tensor_retain(A);
        od_tensor_retain(B);
        od_tensor_retain(out);
        aw = A;
        bw = B;
        cw = out;
    }
    int64_t k = cols_of(aw);
    if (integral) {
        igemm_ctx g = {od_tensor_data(aw), od_tensor_data(bw), od_tensor_data(cw), rows_of(cw),
                       cols_of(cw), k, (uint64_t)ialpha, (uint64_t)ibeta, use_beta};
        int64_t rows = batches_of(cw) * rows_of(cw);
        st = od_parallel_for(rows, 65536 / (g.m * k + 1) + 1, igemm_rows, &g);
    } else if (k == 0) {
        /* An empty sum: out = beta * self (or 0); BLAS wants lda >= 1 here. */
        int64_t n = od_tensor_numel(cw);
        if (wdt == OD_FLOAT32) {
            float *c = od_tensor_data(cw);
            for (int64_t i = 0; i < n; i++)
                c[i] = use_beta ? (float)beta * c[i] : 0.0f;
        } else {
            double *c = od_tensor_data(cw);
            for (int64_t i = 0; i < n; i++)
                c[i] = use_beta ? beta * c[i] : 0.0;
        }
    } else if (!(id == OD_OPID_addmv && cw == out && gemv_blas(aw, bw, cw, alpha, use_beta ? beta : 0.0, &st, err))) {
        st = gemm_blas(aw, bw, cw, alpha, use_beta ? beta : 0.0, err);
    }
    if (!st && cw != out)
        st = od_cpu_copy_into(out, cw, err);
done:
    od_tensor_release(aw);
    od_tensor_release(bw);
    od_tensor_release(cw);
    return st;
}

static od_status dot(od_tensor *x, od_tensor *y, od_tensor *out, od_error *err)
{
    int64_t n = x->sizes[0];
    od_dtype dt = out->dtype;
    od_status st = OD_OK;
    if (od_dtype_is_integral(dt, false)) {
        od_tensor *xw = NULL, *yw = NULL;
        if ((st = od_cpu_to_dtype(x, OD_INT64, &xw, err)) ||
            (st = od_cpu_to_dtype(y, OD_INT64, &yw, err))) {
            od_tensor_release(xw);
            return st;
        }
        const uint64_t *a = od_tensor_data(xw), *b = od_tensor_data(yw);
        uint64_t acc = 0;
        for (int64_t i = 0; i < n; i++)
            acc += a[i] * b[i];
        od_tensor_release(xw);
        od_tensor_release(yw);
        int64_t v = (int64_t)acc;
        od_tensor *t = NULL;
        if ((st = od_tensor_scalar(0.0, OD_INT64, &t, err)))
            return st;
        *(int64_t *)od_tensor_data(t) = v;
        st = od_cpu_copy_into(out, t, err);
        od_tensor_release(t);
        return st;
    }
    od_tensor *xw = x, *yw = y, *own_x = NULL, *own_y = NULL;
    /* Half types widen exactly to float32; a broadcast (stride 0) vector is
     * copied, since BLAS leaves incx == 0 undefined. */
    if ((dt != OD_FLOAT32 && dt != OD_FLOAT64) || (n > 1 && (x->strides[0] == 0 || y->strides[0] == 0))) {
        od_dtype wdt = dt == OD_FLOAT64 ? OD_FLOAT64 : OD_FLOAT32;
        if ((st = od_cpu_to_dtype(x, wdt, &own_x, err)) || (st = od_cpu_to_dtype(y, wdt, &own_y, err))) {
            od_tensor_release(own_x);
            return st;
        }
        xw = own_x;
        yw = own_y;
    }
    if (n > INT_MAX || xw->strides[0] > INT_MAX || yw->strides[0] > INT_MAX) {
        st = od_error_set(err, OD_ETOOLARGE, "dot: %lld elements exceed OpenBLAS's 32-bit sizes",
                          (long long)n);
    } else {
        od_cpu_blas_enter((double)n);
        double r;
        if (xw->dtype == OD_FLOAT64)
            r = cblas_ddot((int)n, od_tensor_data(xw), (int)xw->strides[0], od_tensor_data(yw),
                           (int)yw->strides[0]);
        else
            r = cblas_sdot((int)n, od_tensor_data(xw), (int)xw->strides[0], od_tensor_data(yw),
                           (int)yw->strides[0]);
        od_tensor *t = NULL;
        if (!(st = od_tensor_scalar(r, xw->dtype, &t, err))) {
            st = od_cpu_copy_into(out, t, err);
            od_tensor_release(t);
        }
    }
    od_tensor_release(own_x);
    od_tensor_release(own_y);
    return st;
}

/* ---- addmv, baddbmm, addbmm ----------------------------------------------------------- */

static bool beta_is_zero(const od_value *v)
{
    return od_value_as_double(v) == 0.0; /* ATen's beta.toComplexDouble() == 0 */
}

/* beta as a Scalar of dt's kind, rounded to dt: ATen's scalar_tensor(beta, dt)
 * (checked by the caller) as a value mul.Scalar will not promote. */
static od_value scalar_in(const od_value *beta_v, od_dtype dt)
{
    double b;
    int64_t ib;
    scalar_arg(beta_v, &b, &ib);
    switch (dt) {
    case OD_BOOL: return od_bool(b != 0.0);
    case OD_FLOAT16: return od_double(od_half_to_float(od_float_to_half((float)b)));
    case OD_BFLOAT16: return od_double(od_bf16_to_float(od_double_to_bf16(b)));
    case OD_FLOAT32: return od_double((float)b);
    case OD_FLOAT64: return od_double(b);
    default: return od_int(ib);
    }
}

/* out = beta * self when there is nothing to multiply, by ATen's shortcuts,
 * which differ per operator (beta == 0 gives zeros and reads nothing):
 *  - addmv: mul_out(result, self, scalar_tensor(beta, self.dtype)): beta
 *    converted (checked) to self's dtype, the product in self's dtype, then
 *    cast to the result (checked), even when the result is empty;
 *  - addmm and baddbmm (a non-empty result only) and addbmm (no batches):
 *    result = self, then result.mul_(beta), whose type promotion refuses a
 *    float beta on an integral result and an integer one on bool;
 *  - addbmm with nb batches (a non-empty result only): one addmm_ per batch,
 *    each an empty sum, so mul_(beta) (or zeros) and then nb - 1 times
 *    mul_(1), which refuses a bool result. */
static od_status empty_product(od_opid id, od_tensor *self, int64_t nb, const od_value *beta_v, od_tensor *out,
                               od_error *err)
{
    od_status st;
    bool zero = beta_is_zero(beta_v);
    if (zero && od_tensor_numel(out)) /* an empty tensor may have no storage at all */
        memset(od_tensor_data(out), 0, od_tensor_nbytes(out));
    if (zero && (id != OD_OPID_addbmm || nb < 2))
        return OD_OK;
    if (id == OD_OPID_addmv) {
        if ((st = od_scalar_check_fits(beta_v, self->dtype, err)) ||
            (st = od_check_result_cast(self->dtype, out->dtype, err)))
            return st;
        od_value a[2] = {od_tensor_v(self), scalar_in(beta_v, self->dtype)};
        od_tensor *prod = NULL;
        if ((st = od_call_builtin1(OD_OPID_mul_Scalar, a, 2, &prod, err)))
            return st;
        st = od_tensor_numel(out) ? od_cpu_copy_into(out, prod, err) : OD_OK;
        od_tensor_release(prod);
        return st;
    }
    if ((id != OD_OPID_addbmm || nb > 0) && od_tensor_numel(out) == 0)
        return OD_OK;
    if (!zero && od_tensor_numel(out) && (st = od_cpu_copy_into(out, self, err)))
        return st;
    for (int64_t i = zero; i < (nb > 1 ? nb : 1); i++) {
        od_value a[2] = {od_tensor_v(out), i ? od_int(1) : *beta_v};
        od_stack fs;
        if ((st = od_call_builtin(OD_OPID_mul__Scalar, a, 2, &fs, err)))
            return st;
        od_stack_release_rets(&fs);
    }
    return OD_OK;
}

/* addmv as the [n, k] @ [k, 1] product into out viewed as [n, 1]. */
static od_status addmv(od_tensor *self, od_tensor *mat, od_tensor *vec, const od_value *beta_v,
                       const od_value *alpha_v, od_tensor *out, od_error *err)
{
    od_tensor *v2 = NULL, *o2 = NULL, *s2 = NULL;
    od_status st;
    if ((st = od_tensor_unsqueeze(vec, 1, &v2, err)) || (st = od_tensor_unsqueeze(out, 1, &o2, err)))
        goto done;
    if (self->ndim == 1) {
        if ((st = od_tensor_unsqueeze(self, 1, &s2, err)))
            goto done;
    } else {
        od_tensor_retain(self);
        s2 = self;
    }
    st = matmul(OD_OPID_addmv, mat, v2, s2, beta_v, alpha_v, o2, err);
done:
    od_tensor_release(v2);
    od_tensor_release(o2);
    od_tensor_release(s2);
    return st;
}

/* addbmm as ATen computes it: out = self, then one addmm_ per batch, beta
 * applied by the first only. */
static od_status addbmm(od_tensor *self, od_tensor *b1, od_tensor *b2, const od_value *beta_v,
                        const od_value *alpha_v, od_tensor *out, od_error *err)
{
    od_status st = OD_OK;
    od_value one = od_int(1);
    for (int64_t i = 0; i < b1->sizes[0] && !st; i++) {
        od_tensor *x = NULL, *y = NULL;
        if (!(st = od_tensor_select(b1, 0, i, &x, err)) && !(st = od_tensor_select(b2, 0, i, &y, err)))
            st = matmul(OD_OPID_addbmm, x, y, i ? out : self, i ? &one : beta_v, alpha_v, out, err);
        od_tensor_release(x);
        od_tensor_release(y);
    }
    return st;
}

/* addmv, baddbmm and addbmm; addmm too when its sum is empty (k == 0), for
 * empty_product's shortcut. */
static od_status addmv_bmm(od_opid id, od_stack *s, const od_out_spec *spec, od_error *err)
{
    od_tensor *self = s->args[0].u.t, *a = s->args[1].u.t, *b = s->args[2].u.t;
    const od_value *beta_v = &s->args[3], *alpha_v = &s->args[4];
    int64_t k = id == OD_OPID_addmv || id == OD_OPID_addmm ? a->sizes[1] : a->sizes[2]; /* addmm: 0 */
    int64_t numel = 1;
    for (int i = 0; i < spec->ndim; i++)
        numel *= spec->sizes[i];
    bool empty = numel == 0 || k == 0 || (id == OD_OPID_addbmm && a->sizes[0] == 0);
    od_dtype dt = spec->dtype;
    /* ATen's CPU kernels dispatch without bool and float16, after their
     * empty shortcuts */
    if (!empty && (dt == OD_BOOL || dt == OD_FLOAT16))
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'",
                            id == OD_OPID_addmv ? "addmv_impl_cpu" : id == OD_OPID_baddbmm ? "baddbmm" : "addmm_impl_cpu_",
                            od_dtype_scalar_name(dt));
    od_tensor *out = NULL;
    od_status st = od_alloc_outputs_overwrite(s, spec, 1, &out, err);
    if (st)
        return st;
    if (empty)
        st = empty_product(id, self, id == OD_OPID_addbmm ? a->sizes[0] : 0, beta_v, out, err);
    else if (id == OD_OPID_addmv)
        st = addmv(self, a, b, beta_v, alpha_v, out, err);
    else if (id == OD_OPID_baddbmm)
        st = matmul(id, a, b, self, beta_v, alpha_v, out, err);
    else
        st = addbmm(self, a, b, beta_v, alpha_v, out, err);
    return od_cpu_return1(s, out, st);
}

od_status od_cpu_blas(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    int nouts = 0;
    od_status st = od_shape_matmul(id, s, &spec, &nouts, err);
    if (st)
        return st;
    if (id == OD_OPID_addmv || id == OD_OPID_baddbmm || id == OD_OPID_addbmm)
        return addmv_bmm(id, s, &spec, err);
    bool trivial = (id == OD_OPID_mm || id == OD_OPID_bmm) && od_mm_is_trivial(s->args[0].u.t, s->args[1].u.t);
    int64_t numel = 1;
    for (int i = 0; i < spec.ndim; i++)
        numel *= spec.sizes[i];
    if (id == OD_OPID_addmm && numel > 0 && s->args[1].u.t->sizes[1] == 0)
        return addmv_bmm(id, s, &spec, err); /* an empty sum: ATen's mul_ shortcut, before the dtype */
    /* ATen returns before dispatching on the dtype when the result is empty */
    if (spec.dtype == OD_BOOL && !trivial && numel > 0)
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for 'Bool'",
                            id == OD_OPID_dot   ? "dot"
                            : id == OD_OPID_bmm ? "bmm"
                                                : "addmm_impl_cpu_");
    od_tensor *out = NULL;
    if ((st = trivial ? od_alloc_outputs(s, &spec, 1, &out, err) /* zeros */
                      : od_alloc_outputs_overwrite(s, &spec, 1, &out, err))) /* beta = 0, and k == 0 fills */
        return st;
    switch (id) {
    case OD_OPID_mm:
    case OD_OPID_bmm:
        if (!trivial)
            st = matmul(id, s->args[0].u.t, s->args[1].u.t, NULL, NULL, NULL, out, err);
        break;
    case OD_OPID_addmm:
        st = matmul(id, s->args[1].u.t, s->args[2].u.t, s->args[0].u.t, &s->args[3], &s->args[4],
                    out, err);
        break;
    default:
        st = dot(s->args[0].u.t, s->args[1].u.t, out, err);
        break;
    }
    return od_cpu_return1(s, out, st);
}
