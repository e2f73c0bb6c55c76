/* linalg.c — CPU LAPACK operators: linalg_inv_ex, _linalg_solve_ex,
 * linalg_cholesky_ex, linalg_qr, _linalg_svd, _linalg_eigh, _linalg_det,
 * _linalg_slogdet, linalg_lu_factor_ex, linalg_solve_triangular and
 * linalg_lstsq.
 *
 * Invariants:
 *  - od_shape_linalg / od_linalg_parse (kernels/shape_linalg.c) validate
 *    every argument first, od_linalg_check_dtype leaves float32 and float64
 *    only; outputs come from od_alloc_outputs (contiguous, row-major).
 *  - Each matrix of a batch is gathered (any strides, broadcast batch dims
 *    read through stride 0) into a column-major work buffer of its own dtype
 *    and handed to the same OpenBLAS LAPACK routines, at the same precision,
 *    as torch 1.13's CPU kernels call (getrf/getrs, potrf, geqrf/orgqr,
 *    gesdd, syevd, trsm, gels/gelsy/gelsd/gelss), so results and info codes
 *    agree with torch's.
 *  - As ATen 1.13 does, the solvers and det/slogdet factor A^T instead of A
 *    when A is contiguous (its row-major buffer is A^T's column-major one):
 *    the LU and pivots returned are then those of A^T, and the solve is the
 *    transposed one. linalg_lu_factor_ex always factors A.
 *  - Fortran routines are declared here (Debian's libopenblas exports them;
 *    no LAPACKE header is installed), with gfortran's hidden string lengths.
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_half.h"
#include "od_shape.h"

/* ---- LAPACK (Fortran ABI: every argument by reference, string lengths last) ---- */
#define FL size_t
void sgetrf_(const int *m, const int *n, float *a, const int *lda, int *ipiv, int *info);
void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
void sgetrs_(const char *tr, const int *n, const int *nrhs, const float *a, const int *lda, const int *ipiv, float *b,
             const int *ldb, int *info, FL);
void dgetrs_(const char *tr, const int *n, const int *nrhs, const double *a, const int *lda, const int *ipiv, double *b,
             const int *ldb, int *info, FL);
void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info, FL);
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, FL);
void sgeqrf_(const int *m, const int *n, float *a, const int *lda, float *tau, float *work, const int *lwork, int *info);
void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work, const int *lwork, int *info);
void sorgqr_(const int *m, const int *n, const int *k, float *a, const int *lda, const float *tau, float *work,
             const int *lwork, int *info);
void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda, const double *tau, double *work,
             const int *lwork, int *info);
void sgesdd_(const char *jobz, const int *m, const int *n, float *a, const int *lda, float *s, float *u, const int *ldu,
             float *vt, const int *ldvt, float *work, const int *lwork, int *iwork, int *info, FL);
void dgesdd_(const char *jobz, const int *m, const int *n, double *a, const int *lda, double *s, double *u, const int *ldu,
             double *vt, const int *ldvt, double *work, const int *lwork, int *iwork, int *info, FL);
void ssyevd_(const char *jobz, const char *uplo, const int *n, float *a, const int *lda, float *w, float *work,
             const int *lwork, int *iwork, const int *liwork, int *info, FL, FL);
void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda, double *w, double *work,
             const int *lwork, int *iwork, const int *liwork, int *info, FL, FL);

void sgels_(const char *tr, const int *m, const int *n, const int *nrhs, float *a, const int *lda, float *b,
            const int *ldb, float *work, const int *lwork, int *info, FL);
void dgels_(const char *tr, const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b,
            const int *ldb, double *work, const int *lwork, int *info, FL);
void sgelsy_(const int *m, const int *n, const int *nrhs, float *a, const int *lda, float *b, const int *ldb, int *jpvt,
             const float *rcond, int *rank, float *work, const int *lwork, int *info);
void dgelsy_(const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b, const int *ldb, int *jpvt,
             const double *rcond, int *rank, double *work, const int *lwork, int *info);
void sgelsd_(const int *m, const int *n, const int *nrhs, float *a, const int *lda, float *b, const int *ldb, float *s,
             const float *rcond, int *rank, float *work, const int *lwork, int *iwork, int *info);
void dgelsd_(const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b, const int *ldb, double *s,
             const double *rcond, int *rank, double *work, const int *lwork, int *iwork, int *info);
void sgelss_(const int *m, const int *n, const int *nrhs, float *a, const int *lda, float *b, const int *ldb, float *s,
             const float *rcond, int *rank, float *work, const int *lwork, int *info);
void dgelss_(const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b, const int *ldb, double *s,
             const double *rcond, int *rank, double *work, const int *lwork, int *info);

/* ---- element access: work buffers hold the tensor's dtype (f32 / f64) ---- */
static inline double ld(const void *p, od_dtype dt, int64_t i)
{
    return dt == OD_FLOAT32 ? ((const float *)p)[i] : ((const double *)p)[i];
}
/* (float16 / bfloat16 only reach the stores of empty inputs' identities) */
static inline void st(void *p, od_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case OD_FLOAT32: ((float *)p)[i] = (float)v; break;
    case OD_FLOAT64: ((double *)p)[i] = v; break;
    case OD_FLOAT16: ((uint16_t *)p)[i] = od_float_to_half((float)v); break;
    case OD_BFLOAT16: ((uint16_t *)p)[i] = od_float_to_bf16((float)v); break;
    default: break;
    }
}

/* Element offset of batch b (row-major over bshape[0..nb)) in t, whose
 * batch dims (all but its last `mat` dims) broadcast against bshape. */
static int64_t boff(const od_tensor *t, int mat, const int64_t *bshape, int nb, int64_t b)
{
    int tb = t->ndim - mat;
    int64_t off = 0;
    for (int d = nb - 1; d >= 0; d--) {
        int64_t idx = b % bshape[d];
        b /= bshape[d];
        int e = d - (nb - tb);
        if (e >= 0 && t->sizes[e] != 1)
            off += idx * t->strides[e];
    }
    return off;
}

/* t's batch index (row-major over its own batch dims) of broadcast batch b */
static int64_t bidx(const od_tensor *t, int mat, const int64_t *bshape, int nb, int64_t b)
{
    int tb = t->ndim - mat;
    int64_t r = 0, mul = 1;
    for (int d = nb - 1; d >= 0; d--) {
        int64_t idx = b % bshape[d];
        b /= bshape[d];
        int e = d - (nb - tb);
        if (e >= 0) {
            if (t->sizes[e] != 1)
                r += idx * mul;
            mul *= t->sizes[e];
        }
    }
    return r;
}

/* buf (dtype wdt, column-major, ld = rows) = the rows x cols matrix of t at
 * element offset off, with row and column strides rs, cs; trans: buf holds
 * its transpose (cols x rows, ld = cols). */
/* dst[i * drs + j * dcs] = src[i * srs + j * scs] for a rows x cols matrix
 * of es-byte elements (4 or 8), in tiles of 16 x 16 so that a transposing
 * copy reads and writes whole cache lines (element by element through
 * ld/st, a 512x512 transpose took ~1 ms), the inner loop along dst's
 * contiguous dim: a 512x64 row-major B into column-major took 68 us
 * writing down the columns (32 lines 2 KiB apart share two L1 sets) and
 * 11-13 us along them. A transpose (one side's rows are the other's
 * columns, the copy every LAPACK call makes) is transpose.c's: blocks
 * transposed in registers on AVX-512. */
static void copy_mat(void *dst, int64_t drs, int64_t dcs, const void *src, int64_t srs, int64_t scs, int64_t rows,
                     int64_t cols, size_t es)
{
#define COPY_TILES_(T)                                                                                     \
    for (int64_t i0 = 0; i0 < rows; i0 += 16)                                                              \
        for (int64_t j0 = 0; j0 < cols; j0 += 16)                                                          \
            for (int64_t i = i0; i < rows && i < i0 + 16; i++)                                             \
                for (int64_t j = j0; j < cols && j < j0 + 16; j++)                                         \
                    ((T *)dst)[i * drs + j * dcs] = ((const T *)src)[i * srs + j * scs];
    if (drs == 1 && dcs != 1) { /* the inner loop along dst's rows: see above */
        int64_t t = rows;
        rows = cols;
        cols = t;
        t = drs, drs = dcs, dcs = t;
        t = srs, srs = scs, scs = t;
    }
    /* a transpose: one side's rows are the other's columns */
    void (*tr)(const void *, int64_t, void *, int64_t, int64_t, int64_t) =
        es == 4 ? od_cpu_transpose32 : od_cpu_transpose64;
    if (scs == 1 && drs == 1) {
        tr(src, srs, dst, dcs, rows, cols);
        return;
    }
    if (srs == 1 && dcs == 1) {
        tr(src, scs, dst, drs, cols, rows);
        return;
    }
    if (es == 4)
        COPY_TILES_(uint32_t)
    else
        COPY_TILES_(uint64_t)
#undef COPY_TILES_
}

static void gather(const od_tensor *t, int64_t off, int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool trans,
                   void *buf, od_dtype wdt)
{
    const char *base = od_tensor_data(t);
    if (!base)
        return;
    od_dtype dt = t->dtype;
    size_t es = od_dtype_size(dt);
    if (dt == wdt && (es == 4 || es == 8)) {
        copy_mat(buf, trans ? cols : 1, trans ? 1 : rows, base + (size_t)off * es, rs, cs, rows, cols, es);
        return;
    }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            double v = ld(base, dt, off + i * rs + j * cs);
            st(buf, wdt, trans ? j + i * cols : i + j * rows, v);
        }
}

/* The matrix of t (its last two dims) at batch offset off into buf. */
static void gather_mat(const od_tensor *t, int64_t off, bool trans, void *buf, od_dtype wdt)
{
    int nd = t->ndim;
    gather(t, off, t->sizes[nd - 2], t->sizes[nd - 1], t->strides[nd - 2], t->strides[nd - 1], trans, buf, wdt);
}

/* out (contiguous) matrix number b, rows x cols, from column-major buf with
 * leading dim ldb; trans: out[i][j] = buf[j + i * ldb]. */
static void scatter(od_tensor *out, int64_t b, int64_t rows, int64_t cols, const void *buf, int64_t ldb, bool trans)
{
    char *o = od_tensor_data(out);
    od_dtype dt = out->dtype;
    int64_t base = b * rows * cols;
    size_t es = od_dtype_size(dt);
    if (o && (es == 4 || es == 8)) {
        copy_mat(o + (size_t)base * es, cols, 1, buf, trans ? ldb : 1, trans ? 1 : ldb, rows, cols, es);
        return;
    }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            st(o, dt, base + i * cols + j, ld(buf, dt, trans ? j + i * ldb : i + j * ldb));
}

/* The copy-in and copy-out every kernel shares: batch b of li's (broadcast)
 * batch, A's last two dims, into column-major buf (its transpose when
 * trans); and n values of vector buf into row b of a contiguous out. */
static void load(const od_tensor *t, const od_linalg_info *li, int64_t b, bool trans, void *buf, od_dtype wdt)
{
    gather_mat(t, boff(t, 2, li->batch, li->nbatch, b), trans, buf, wdt);
}

static void store_vec(od_tensor *out, int64_t b, int64_t n, const void *buf)
{
    char *o = od_tensor_data(out);
    for (int64_t i = 0; i < n; i++)
        st(o, out->dtype, b * n + i, ld(buf, out->dtype, i));
}

/* ---- typed LAPACK calls ---- */
static void getrf(od_dtype dt, int m, int n, void *a, int *ipiv, int *info)
{
    int lda = m > 1 ? m : 1;
    if (dt == OD_FLOAT32)
        sgetrf_(&m, &n, a, &lda, ipiv, info);
    else
        dgetrf_(&m, &n, a, &lda, ipiv, info);
}

static void getrs(od_dtype dt, char tr, int n, int nrhs, const void *a, const int *ipiv, void *b)
{
    int lda = n > 1 ? n : 1, info = 0;
    if (dt == OD_FLOAT32)
        sgetrs_(&tr, &n, &nrhs, a, &lda, ipiv, b, &lda, &info, 1);
    else
        dgetrs_(&tr, &n, &nrhs, a, &lda, ipiv, b, &lda, &info, 1);
}

typedef struct scratch {
    void *p;
    size_t n;
} scratch;

static void *need(scratch *s, size_t bytes)
{
    if (!s->p || bytes > s->n) {
        void *q = realloc(s->p, bytes ? bytes : 1);
        if (!q)
            return NULL;
        s->p = q;
        s->n = bytes;
    }
    return s->p;
}

#define NOMEM() od_error_set(err, OD_ENOMEM, "linalg: out of memory for LAPACK workspace")

/* ---- the operators ---- */

/* linalg_inv_ex, _linalg_solve_ex: LU of A (or A^T), then getrs */
static od_status run_solve(od_opid id, const od_stack *s, const od_linalg_info *li, od_tensor **outs, od_error *err)
{
    const od_tensor *A = s->args[0].u.t;
    const od_tensor *B = id == OD_OPID__linalg_solve_ex ? s->args[1].u.t : NULL;
    od_dtype dt = A->dtype;
    size_t es = od_dtype_size(dt);
    int64_t n = li->n, nA = 1;
    for (int i = 0; i < A->ndim - 2; i++)
        nA *= A->sizes[i];
    bool use_AT = od_tensor_is_contiguous(A);
    od_tensor *X = outs[0], *info_t = id == OD_OPID_linalg_inv_ex ? outs[1] : outs[3];
    int32_t *info = od_tensor_data(info_t);
    scratch lu = {0}, rhs = {0};
    int *piv = NULL;
    od_status stt = OD_OK;
    if (!need(&lu, (size_t)(nA * n * n) * es) || !(piv = malloc((size_t)(nA * n + 1) * sizeof(int)))) {
        stt = NOMEM();
        goto done;
    }
    for (int64_t a = 0; a < nA; a++) {
        char *m = (char *)lu.p + (size_t)(a * n * n) * es;
        gather_mat(A, boff(A, 2, A->sizes, A->ndim - 2, a), use_AT, m, dt);
        int inf = 0;
        if (n > 0)
            getrf(dt, (int)n, (int)n, m, piv + a * n, &inf);
        info[a] = inf;
        if (B) {
            scatter(outs[1], a, n, n, m, n, false);
            int32_t *po = od_tensor_data(outs[2]);
            for (int64_t i = 0; i < n; i++)
                po[a * n + i] = piv[a * n + i];
        }
    }
    if (id == OD_OPID_linalg_inv_ex) {
        void *r = need(&rhs, (size_t)(n * n) * es);
        if (!r && n) {
            stt = NOMEM();
            goto done;
        }
        for (int64_t a = 0; a < nA; a++) {
            memset(r, 0, (size_t)(n * n) * es);
            for (int64_t i = 0; i < n; i++)
                st(r, dt, i + i * n, 1.0);
            if (n > 0)
                getrs(dt, use_AT ? 'T' : 'N', (int)n, (int)n, (char *)lu.p + (size_t)(a * n * n) * es, piv + a * n, r);
            scatter(X, a, n, n, r, n, false);
        }
        if (li->check_errors)
            stt = od_linalg_info_error("linalg.inv_ex", info, nA, A->ndim > 2, err);
        goto done;
    }
    /* _linalg_solve_ex: B_ is m x k (the vector case: B's last dim as a column) */
    int64_t m = li->m, k = li->k;
    void *r = need(&rhs, (size_t)(m * k) * es);
    if (!r && m * k != 0) {
        stt = NOMEM();
        goto done;
    }
    int bmat = li->vector_case ? 1 : 2;
    int nd = B->ndim;
    int64_t rs = li->vector_case ? B->strides[nd - 1] : B->strides[nd - 2];
    int64_t cs = li->vector_case ? 0 : B->strides[nd - 1];
    for (int64_t b = 0; b < li->nbatches; b++) {
        int64_t a = bidx(A, 2, li->batch, li->nbatch, b);
        const char *lum = (const char *)lu.p + (size_t)(a * n * n) * es;
        int64_t off = boff(B, bmat, li->batch, li->nbatch, b);
        if (li->left) {
            gather(B, off, m, k, rs, cs, false, r, dt);
            if (n > 0 && k > 0)
                getrs(dt, use_AT ? 'T' : 'N', (int)n, (int)k, lum, piv + a * n, r);
            scatter(X, b, m, k, r, m, false);
        } else { /* X A = B  <=>  A^T X^T = B^T: rhs is n x m */
            gather(B, off, m, k, rs, cs, true, r, dt);
            if (n > 0 && m > 0)
                getrs(dt, use_AT ? 'N' : 'T', (int)n, (int)m, lum, piv + a * n, r);
            scatter(X, b, m, k, r, k, true);
        }
    }
    if (li->check_errors)
        stt = od_linalg_info_error("torch.linalg.solve_ex", info, nA, A->ndim > 2, err);
done:
    free(lu.p);
    free(rhs.p);
    free(piv);
    return stt;
}

static od_status run_cholesky(const od_stack *s, const od_linalg_info *li, od_tensor **outs, od_error *err)
{
    const od_tensor *A = s->args[0].u.t;
    od_dtype dt = A->dtype;
    int64_t n = li->n;
    int32_t *info = od_tensor_data(outs[1]);
    scratch w = {0};
    if (!need(&w, (size_t)(n * n) * od_dtype_size(dt)))
        return NOMEM();
    char uplo = li->upper ? 'U' : 'L';
    for (int64_t b = 0; b < li->nbatches; b++) {
        load(A, li, b, false, w.p, dt);
        int inf = 0, nn = (int)n, lda = n > 1 ? (int)n : 1;
        if (n > 0) {
            if (dt == OD_FLOAT32)
                spotrf_(&uplo, &nn, w.p, &lda, &inf, 1);
            else
                dpotrf_(&uplo, &nn, w.p, &lda, &inf, 1);
        }
        info[b] = inf;
        for (int64_t j = 0; j < n; j++) /* tril_ / triu_ */
            for (int64_t i = 0; i < n; i++)
                if (li->upper ? i > j : i < j)
                    st(w.p, dt, i + j * n, 0.0);
        scatter(outs[0], b, n, n, w.p, n, false);
    }
    free(w.p);
    if (li->check_errors)
        return od_linalg_info_error("linalg.cholesky_ex", info, li->nbatches, A->ndim > 2, err);
    return OD_OK;
}

static od_status run_qr(const od_stack *s, const od_linalg_info *li, od_tensor **outs, od_error *err)
{
    const od_tensor *A = s->args[0].u.t;
    od_dtype dt = A->dtype;
    size_t es = od_dtype_size(dt);
    int64_t m = li->m, n = li->n, k = m < n ? m : n;
    int64_t qc = li->mode == 1 ? m : k;               /* Q's columns */
    int64_t rr = li->mode == 1 ? m : k;               /* R's rows */
    int64_t wc = n > qc ? n : qc;                     /* work matrix columns */
    if (k == 0) { /* R is empty or zeros; a complete Q is the identity */
        if (li->mode == 1)
            for (int64_t b = 0; b < li->nbatches; b++)
                for (int64_t i = 0; i < m; i++)
                    st(od_tensor_data(outs[0]), dt, (b * m + i) * m + i, 1.0);
        return OD_OK;
    }
    int mm = (int)m, nn = (int)n, kk = (int)k, qq = (int)qc, lda = m > 1 ? (int)m : 1, info = 0, lwork = -1;
    scratch a = {0}, tau = {0}, work = {0};
    od_status stt = OD_OK;
    if (!need(&a, (size_t)(m * wc) * es) || !need(&tau, (size_t)(k + 1) * es)) {
        stt = NOMEM();
        goto done;
    }
    /* workspace: the larger of geqrf's and orgqr's query */
    double q1 = 0, q2 = 0;
    char qb[16];
    if (m > 0 && n > 0) {
        if (dt == OD_FLOAT32) {
            sgeqrf_(&mm, &nn, a.p, &lda, tau.p, (float *)qb, &lwork, &info);
            q1 = *(float *)qb;
            if (li->mode != 2 && qq > 0) {
                sorgqr_(&mm, &qq, &kk, a.p, &lda, tau.p, (float *)qb, &lwork, &info);
                q2 = *(float *)qb;
            }
        } else {
            dgeqrf_(&mm, &nn, a.p, &lda, tau.p, (double *)qb, &lwork, &info);
            q1 = *(double *)qb;
            if (li->mode != 2 && qq > 0) {
                dorgqr_(&mm, &qq, &kk, a.p, &lda, tau.p, (double *)qb, &lwork, &info);
                q2 = *(double *)qb;
            }
        }
    }
    lwork = (int)(q1 > q2 ? q1 : q2);
    if (lwork < 1)
        lwork = 1;
    if (!need(&work, (size_t)lwork * es)) {
        stt = NOMEM();
        goto done;
    }
    for (int64_t b = 0; b < li->nbatches; b++) {
        memset(a.p, 0, (size_t)(m * wc) * es);
        load(A, li, b, false, a.p, dt);
        if (m > 0 && n > 0) {
            if (dt == OD_FLOAT32)
                sgeqrf_(&mm, &nn, a.p, &lda, tau.p, work.p, &lwork, &info);
            else
                dgeqrf_(&mm, &nn, a.p, &lda, tau.p, work.p, &lwork, &info);
        }
        /* R: the upper triangle of the first rr rows */
        char *o = od_tensor_data(outs[1]);
        for (int64_t i = 0; i < rr; i++)
            for (int64_t j = 0; j < n; j++)
                st(o, dt, (b * rr + i) * n + j, i <= j && i < m ? ld(a.p, dt, i + j * m) : 0.0);
        if (li->mode == 2)
            continue;
        if (m > 0 && qq > 0) {
            if (dt == OD_FLOAT32)
                sorgqr_(&mm, &qq, &kk, a.p, &lda, tau.p, work.p, &lwork, &info);
            else
                dorgqr_(&mm, &qq, &kk, a.p, &lda, tau.p, work.p, &lwork, &info);
        }
        scatter(outs[0], b, m, qc, a.p, m, false);
    }
done:
    free(a.p);
    free(tau.p);
    free(work.p);
    return stt;
}

static od_status run_svd(const od_stack *s, const od_linalg_info *li, od_tensor **outs, od_error *err)
{
    const od_tensor *A = s->args[0].u.t;
    od_dtype dt = A->dtype;
    size_t es = od_dtype_size(dt);
    int64_t m = li->m, n = li->n, k = m < n ? m : n;
    bool uv = li->compute, full = li->full;
    int64_t uc = full ? m : k, vr = full ? n : k;
    if (k == 0 || li->nbatches == 0) { /* nothing to decompose: full U / Vh are identities */
        if (uv && full) {
            for (int64_t b = 0; b < li->nbatches; b++) {
                char *u = od_tensor_data(outs[0]), *v = od_tensor_data(outs[2]);
                for (int64_t i = 0; i < m; i++)
                    st(u, dt, (b * m + i) * m + i, 1.0);
                for (int64_t i = 0; i < n; i++)
                    st(v, dt, (b * n + i) * n + i, 1.0);
            }
        }
        return OD_OK;
    }
    if (s->nargs > 3 && s->args[3].tag == OD_T_STRING) /* after the empty case, as ATen */
        return od_error_set(err, OD_EINVAL,
                            "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend.");
    char jobz = uv ? (full ? 'A' : 'S') : 'N';
    int mm = (int)m, nn = (int)n, lda = (int)m, ldu = (int)m, ldvt = (int)(vr > 1 ? vr : 1), lwork = -1, info = 0;
    scratch a = {0}, sv = {0}, u = {0}, vt = {0}, work = {0}, iw = {0};
    od_status stt = OD_OK;
    int32_t *infos = malloc((size_t)li->nbatches * sizeof(int32_t) + 1);
    if (!infos || !need(&a, (size_t)(m * n) * es) || !need(&sv, (size_t)k * es) || !need(&u, (size_t)(m * uc + 1) * es) ||
        !need(&vt, (size_t)(vr * n + 1) * es) || !need(&iw, (size_t)(8 * k) * sizeof(int))) {
        stt = NOMEM();
        goto done;
    }
    char qb[16];
    if (dt == OD_FLOAT32) {
        sgesdd_(&jobz, &mm, &nn, a.p, &lda, sv.p, u.p, &ldu, vt.p, &ldvt, (float *)qb, &lwork, iw.p, &info, 1);
        lwork = (int)*(float *)qb;
    } else {
        dgesdd_(&jobz, &mm, &nn, a.p, &lda, sv.p, u.p, &ldu, vt.p, &ldvt, (double *)qb, &lwork, iw.p, &info, 1);
        lwork = (int)*(double *)qb;
    }
    if (lwork < 1)
        lwork = 1;
    if (!need(&work, (size_t)lwork * es)) {
        stt = NOMEM();
        goto done;
    }
    for (int64_t b = 0; b < li->nbatches; b++) {
        load(A, li, b, false, a.p, dt);
        info = 0;
        if (dt == OD_FLOAT32)
            sgesdd_(&jobz, &mm, &nn, a.p, &lda, sv.p, u.p, &ldu, vt.p, &ldvt, work.p, &lwork, iw.p, &info, 1);
        else
            dgesdd_(&jobz, &mm, &nn, a.p, &lda, sv.p, u.p, &ldu, vt.p, &ldvt, work.p, &lwork, iw.p, &info, 1);
        infos[b] = info;
        store_vec(outs[1], b, k, sv.p);
        if (uv) {
            scatter(outs[0], b, m, uc, u.p, m, false);
            scatter(outs[2], b, vr, n, vt.p, ldvt, false);
        }
    }
    stt = od_linalg_info_error("linalg.svd", infos, li->nbatches, A->ndim > 2, err);
done:
    free(infos);
    free(a.p);
    free(sv.p);
    free(u.p);
    free(vt.p);
    free(work.p);
    free(iw.p);
    return stt;
}

static od_status run_eigh(const od_stack *s, const od_linalg_info *li, od_tensor **outs, od_error *err)
{
    const od_tensor *A = s->args[0].u.t;
    od_dtype dt = A->dtype;
    size_t es = od_dtype_size(dt);
    int64_t n = li->n;
    if (n == 0)
        return OD_OK;
    char jobz = li->compute ? 'V' : 'N', uplo = li->upper ? 'U' : 'L';
    int nn = (int)n, lda = (int)n, lwork = -1, liwork = -1, info = 0, iq = 0;
    scratch a = {0}, w = {0}, work = {0}, iw = {0};
    od_status stt = OD_OK;
    int32_t *infos = malloc((size_t)li->nbatches * sizeof(int32_t) + 1);
    if (!infos || !need(&a, (size_t)(n * n) * es) || !need(&w, (size_t)n * es)) {
        stt = NOMEM();
        goto done;
    }
    char qb[16];
    if (dt == OD_FLOAT32) {
        ssyevd_(&jobz, &uplo, &nn, a.p, &lda, w.p, (float *)qb, &lwork, &iq, &liwork, &info, 1, 1);
        lwork = (int)*(float *)qb;
    } else {
        dsyevd_(&jobz, &uplo, &nn, a.p, &lda, w.p, (double *)qb, &lwork, &iq, &liwork, &info, 1, 1);
        lwork = (int)*(double *)qb;
    }
    liwork = iq > 1 ? iq : 1;
    if (lwork < 1)
        lwork = 1;
    if (!need(&work, (size_t)lwork * es) || !need(&iw, (size_t)liwork * sizeof(int))) {
        stt = NOMEM();
        goto done;
    }
    for (int64_t b = 0; b < li->nbatches; b++) {
        load(A, li, b, false, a.p, dt);
        info = 0;
        if (dt == OD_FLOAT32)
            ssyevd_(&jobz, &uplo, &nn, a.p, &lda, w.p, work.p, &lwork, iw.p, &liwork, &info, 1, 1);
        else
            dsyevd_(&jobz, &uplo, &nn, a.p, &lda, w.p, work.p, &lwork, iw.p, &liwork, &info, 1, 1);
        infos[b] = info;
        store_vec(outs[0], b, n, w.p);
        if (li->compute)
            scatter(outs[1], b, n, n, a.p, n, false);
    }
    stt = od_linalg_info_error("linalg.eigh", infos, li->nbatches, A->ndim > 2, err);
done:
    free(infos);
    free(a.p);
    free(w.p);
    free(work.p);
    free(iw.p);
    return stt;
}

/* _linalg_det, _linalg_slogdet (LU of A or A^T, as the solvers), and
 * linalg_lu_factor_ex (LU of A) */
static od_status run_lu(od_opid id, const od_stack *s, const od_linalg_info *li, od_tensor **outs, od_error *err)
{
    const od_tensor *A = s->args[0].u.t;
    od_dtype dt = A->dtype;
    size_t es = od_dtype_size(dt);
    int64_t m = li->m, n = li->n, k = m < n ? m : n;
    bool lu_only = id == OD_OPID_linalg_lu_factor_ex;
    if (lu_only && !li->pivot && m * n * li->nbatches > 0)
        return od_error_set(err, OD_EUNSUPPORTED, "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
    bool use_AT = !lu_only && od_tensor_is_contiguous(A);
    int io = id == OD_OPID__linalg_det ? 1 : id == OD_OPID__linalg_slogdet ? 2 : 0; /* LU's output */
    scratch a = {0};
    int *piv = malloc((size_t)(k + 1) * sizeof(int));
    if (!piv || !need(&a, (size_t)(m * n + 1) * es)) {
        free(piv);
        free(a.p);
        return NOMEM();
    }
    int32_t *po = od_tensor_data(outs[io + 1]);
    int32_t *info = lu_only ? od_tensor_data(outs[2]) : NULL;
    for (int64_t b = 0; b < li->nbatches; b++) {
        load(A, li, b, use_AT, a.p, dt);
        int inf = 0;
        if (m > 0 && n > 0)
            getrf(dt, (int)m, (int)n, a.p, piv, &inf);
        if (info)
            info[b] = inf;
        scatter(outs[io], b, m, n, a.p, m, false);
        int odd = 0;
        for (int64_t i = 0; i < k; i++) {
            po[b * k + i] = piv[i];
            odd ^= piv[i] != i + 1;
        }
        if (lu_only)
            continue;
        double detp = odd ? -1.0 : 1.0;
        if (id == OD_OPID__linalg_det) {
            double p = 1.0; /* prod in the dtype, in order, as ATen's prod */
            for (int64_t i = 0; i < n; i++)
                p = dt == OD_FLOAT32 ? (double)((float)p * (float)ld(a.p, dt, i + i * n)) : p * ld(a.p, dt, i + i * n);
            st(od_tensor_data(outs[0]), dt, b, detp * p);
        } else {
            double sg = 1.0, la = 0.0;
            for (int64_t i = 0; i < n; i++) {
                double d = ld(a.p, dt, i + i * n);
                sg *= (d > 0) - (d < 0); /* ATen's sgn: 0 for NaN */
                la += log(fabs(d));
            }
            st(od_tensor_data(outs[0]), dt, b, sg * detp);
            st(od_tensor_data(outs[1]), dt, b, dt == OD_FLOAT32 ? (double)(float)la : la);
        }
    }
    free(piv);
    free(a.p);
    if (lu_only && li->check_errors)
        return od_linalg_info_error("torch.linalg.lu_factor_ex", info, li->nbatches, A->ndim > 2, err);
    return OD_OK;
}

/* As ATen 1.13's linalg_solve_triangular_out: the result is solved in a
 * column-major copy of B, and A is passed where it lies when either its
 * rows (as A^T in column-major terms: trsm's transpose flag, the triangle
 * flipped) or its columns are contiguous, else copied column-major first.
 * That is torch's own trsm call, so the bits agree. (It used to copy every
 * A column-major: a transpose of a 512x512 A, element by element, took
 * most of 1,349 us where torch takes 110.) */
static od_status run_triangular(const od_stack *s, const od_linalg_info *li, od_tensor **outs, od_error *err)
{
    const od_tensor *A = s->args[0].u.t;
    od_dtype dt = A->dtype;
    size_t es = od_dtype_size(dt);
    int64_t n = li->n, m = li->m, k = li->k, one = n > 1 ? n : 1;
    int64_t rs = A->strides[A->ndim - 2], cs = A->strides[A->ndim - 1];
    bool rows = cs == 1 && rs >= one && rs <= INT_MAX, cols = !rows && rs == 1 && cs >= one && cs <= INT_MAX;
    od_tensor *B = NULL; /* B in A's dtype (the result's), as ATen copies it into the result */
    od_status st_ = od_cpu_to_dtype(s->args[1].u.t, dt, &B, err);
    if (st_)
        return st_;
    scratch a = {0}, r = {0};
    if ((!rows && !cols && !need(&a, (size_t)(n * n + 1) * es)) || !need(&r, (size_t)(m * k + 1) * es)) {
        free(a.p);
        od_tensor_release(B);
        return NOMEM();
    }
    bool upper = li->upper != rows; /* A^T's triangle is the other one */
    for (int64_t b = 0; b < li->nbatches; b++) {
        load(B, li, b, false, r.p, dt);
        if (m > 0 && k > 0) {
            const void *ap = a.p;
            int lda = (int)one;
            if (rows || cols) {
                ap = (const char *)od_tensor_data(A) + (size_t)boff(A, 2, li->batch, li->nbatch, b) * es;
                lda = (int)(rows ? rs : cs);
            } else {
                load(A, li, b, false, a.p, dt);
            }
            CBLAS_SIDE side = li->left ? CblasLeft : CblasRight;
            CBLAS_UPLO up = upper ? CblasUpper : CblasLower;
            CBLAS_TRANSPOSE tr = rows ? CblasTrans : CblasNoTrans;
            CBLAS_DIAG dg = li->unitriangular ? CblasUnit : CblasNonUnit;
            if (dt == OD_FLOAT32)
                cblas_strsm(CblasColMajor, side, up, tr, dg, (int)m, (int)k, 1.0f, ap, lda, r.p, (int)m);
            else
                cblas_dtrsm(CblasColMajor, side, up, tr, dg, (int)m, (int)k, 1.0, ap, lda, r.p, (int)m);
        }
        scatter(outs[0], b, m, k, r.p, m, false);
    }
    free(a.p);
    free(r.p);
    od_tensor_release(B);
    return OD_OK;
}

/* One least-squares call of li's driver on column-major a (m x n, lda) and
 * b (ldb x nrhs); lwork < 0 is LAPACK's workspace query. */
static void lstsq_call(od_dtype dt, int drv, int m, int n, int nrhs, void *a, void *b, int ldb, int *jpvt, double rcond,
                       int *rank, void *s, void *work, int lwork, int *iwork, int *info)
{
    int lda = m > 1 ? m : 1;
    float rf = (float)rcond;
    *info = 0;
    if (dt == OD_FLOAT32) {
        switch (drv) {
        case OD_LSTSQ_GELS: sgels_("N", &m, &n, &nrhs, a, &lda, b, &ldb, work, &lwork, info, 1); break;
        case OD_LSTSQ_GELSY: sgelsy_(&m, &n, &nrhs, a, &lda, b, &ldb, jpvt, &rf, rank, work, &lwork, info); break;
        case OD_LSTSQ_GELSD: sgelsd_(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rf, rank, work, &lwork, iwork, info); break;
        default: sgelss_(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rf, rank, work, &lwork, info); break;
        }
    } else {
        switch (drv) {
        case OD_LSTSQ_GELS: dgels_("N", &m, &n, &nrhs, a, &lda, b, &ldb, work, &lwork, info, 1); break;
        case OD_LSTSQ_GELSY: dgelsy_(&m, &n, &nrhs, a, &lda, b, &ldb, jpvt, &rcond, rank, work, &lwork, info); break;
        case OD_LSTSQ_GELSD: dgelsd_(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, iwork, info); break;
        default: dgelss_(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, info); break;
        }
    }
}

/* linalg_lstsq (apply_lstsq + linalg_lstsq_out_info of ATen 1.13): each
 * broadcast batch is solved in a max(m, n) x k buffer whose first n rows are
 * the solution; residuals (the sum of squares of rows n..m) exist for m > n
 * with gels, or with gelsd/gelss when every rank is n, so they are sized
 * after the solves. gelsd/gelss with no right-hand side solve one zero
 * column (LAPACK's dlalsd refuses nrhs = 0, where torch fails) for the rank
 * and singular values. gelsy's column pivots are all fixed (no pivoting):
 * ATen 1.13 hands gelsy one uninitialised jpvt for the whole batch, so every
 * matrix after the first gets the previous one's permutation (all nonzero:
 * no pivoting), and so does the first whenever the allocator hands back an
 * old jpvt; only rank-deficient results depend on it. */
static od_status run_lstsq(const od_stack *s, const od_linalg_info *li, od_tensor **outs, od_error *err)
{
    const od_tensor *A = s->args[0].u.t, *B = s->args[1].u.t;
    od_dtype dt = A->dtype;
    size_t es = od_dtype_size(dt);
    int64_t m = li->m, n = li->n, k = li->k, mn = m < n ? m : n, ldb = m > n ? m : n;
    if (ldb < 1)
        ldb = 1;
    int drv = li->driver;
    bool svd = drv == OD_LSTSQ_GELSD || drv == OD_LSTSQ_GELSS;
    int64_t kk = svd && k == 0 ? 1 : k; /* right-hand sides handed to LAPACK */
    od_out_spec spec[4];
    od_linalg_lstsq_specs(s, li, false, spec);
    od_status stt = od_alloc_outputs(s, spec, 4, outs, err);
    if (stt)
        return stt;
    scratch a = {0}, bb = {0}, sv = {0}, work = {0}, res = {0};
    int *jpvt = NULL, *iwork = NULL;
    int32_t *infos = NULL;
    if (!need(&a, (size_t)(m * n + 1) * es) || !need(&bb, (size_t)(ldb * kk + 1) * es) ||
        !need(&sv, (size_t)(mn + 1) * es) || !need(&res, (size_t)(li->nbatches * k + 1) * sizeof(double)) ||
        !(jpvt = calloc((size_t)(n + 1), sizeof(int))) || !(infos = calloc((size_t)(li->nbatches + 1), sizeof(int32_t)))) {
        stt = NOMEM();
        goto done;
    }
    memset(a.p, 0, (size_t)(m * n + 1) * es);
    memset(bb.p, 0, (size_t)(ldb * kk + 1) * es);
    /* the workspace query (and gelsd's integer workspace) */
    char qb[16] = {0};
    int qi = 1, rank = 0, info = 0;
    lstsq_call(dt, drv, (int)m, (int)n, (int)kk, a.p, bb.p, (int)ldb, jpvt, li->rcond, &rank, sv.p, qb, -1, &qi, &info);
    int lwork = (int)(dt == OD_FLOAT32 ? *(float *)qb : *(double *)qb);
    if (lwork < 1)
        lwork = 1;
    if (!need(&work, (size_t)lwork * es) || !(iwork = malloc((size_t)(qi > 1 ? qi : 1) * sizeof(int)))) {
        stt = NOMEM();
        goto done;
    }
    int nd = B->ndim, bmat = li->vector_case ? 1 : 2;
    int64_t rs = li->vector_case ? B->strides[nd - 1] : B->strides[nd - 2];
    int64_t cs = li->vector_case ? 0 : B->strides[nd - 1];
    int64_t *ranks = od_tensor_data(outs[2]);
    bool full_rank = true;
    double *r = res.p;
    for (int64_t b = 0; b < li->nbatches; b++) {
        load(A, li, b, false, a.p, dt);
        memset(bb.p, 0, (size_t)(ldb * kk) * es);
        const char *bd = od_tensor_data(B);
        int64_t off = boff(B, bmat, li->batch, li->nbatch, b);
        for (int64_t j = 0; j < k; j++) /* B's rows, the rest of each column zero */
            for (int64_t i = 0; i < m; i++)
                st(bb.p, dt, i + j * ldb, ld(bd, dt, off + i * rs + j * cs));
        for (int64_t i = 0; i < n; i++) /* every column fixed in place: see above */
            jpvt[i] = (int)i + 1;
        lstsq_call(dt, drv, (int)m, (int)n, (int)kk, a.p, bb.p, (int)ldb, jpvt, li->rcond, &rank, sv.p, work.p, lwork,
                   iwork, &info);
        infos[b] = info;
        scatter(outs[0], b, n, k, bb.p, ldb, false);
        int64_t ai = bidx(A, 2, li->batch, li->nbatch, b);
        if (drv != OD_LSTSQ_GELS) {
            ranks[ai] = rank;
            full_rank &= rank == n;
        }
        if (svd)
            store_vec(outs[3], ai, mn, sv.p);
        for (int64_t j = 0; j < k; j++) {
            double acc = 0;
            for (int64_t i = n; i < m; i++) {
                double v = ld(bb.p, dt, i + j * ldb);
                acc += v * v;
            }
            r[b * k + j] = acc;
        }
    }
    if ((stt = od_linalg_info_error("torch.linalg.lstsq", infos, li->nbatches, li->nbatches > 1, err)))
        goto done;
    if (m == 0 && od_tensor_numel(outs[0])) /* ATen zeroes the solution of an empty system */
        memset(od_tensor_data(outs[0]), 0, (size_t)od_tensor_numel(outs[0]) * es);
    if (m > n && drv != OD_LSTSQ_GELSY && (drv == OD_LSTSQ_GELS || full_rank)) {
        od_out_spec rsp[4];
        od_tensor *rt = NULL;
        od_linalg_lstsq_specs(s, li, true, rsp);
        if ((stt = od_alloc_outputs(s, &rsp[1], 1, &rt, err)))
            goto done;
        for (int64_t i = 0; i < li->nbatches * k; i++)
            st(od_tensor_data(rt), dt, i, r[i]);
        od_tensor_release(outs[1]);
        outs[1] = rt;
    }
done:
    if (stt) {
        for (int i = 0; i < 4; i++) {
            od_tensor_release(outs[i]);
            outs[i] = NULL;
        }
    }
    free(a.p);
    free(bb.p);
    free(sv.p);
    free(work.p);
    free(res.p);
    free(jpvt);
    free(iwork);
    free(infos);
    return stt;
}

od_status od_cpu_linalg(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec[4];
    int nouts = 0;
    od_cpu_blas_enter(INFINITY); /* LAPACK: sizes its threads and steers them (blas.c) */
    od_linalg_info li;
    od_status st_;
    if (id == OD_OPID_linalg_lstsq) {
        od_tensor *lo[4] = {0};
        if ((st_ = od_linalg_parse(id, s, &li, err)))
            return st_;
        if (li.m > INT_MAX || li.n > INT_MAX || li.k > INT_MAX || li.m * li.n > INT_MAX || li.m * li.k > INT_MAX ||
            li.n * li.k > INT_MAX)
            return od_error_set(err, OD_ETOOLARGE, "linalg: matrices beyond LAPACK's 32-bit sizes");
        if ((st_ = run_lstsq(s, &li, lo, err)))
            return st_;
        for (int i = 0; i < 4; i++)
            s->rets[i] = od_tensor_v(lo[i]);
        s->nrets = 4;
        return OD_OK;
    }
    if ((st_ = od_shape_linalg(id, s, spec, &nouts, err)) || (st_ = od_linalg_parse(id, s, &li, err)) ||
        (st_ = od_linalg_check_dtype(id, s, err)))
        return st_;
    if (li.m > INT_MAX || li.n > INT_MAX || li.k > INT_MAX || li.m * li.n > INT_MAX || li.m * li.k > INT_MAX)
        return od_error_set(err, OD_ETOOLARGE, "linalg: matrices beyond LAPACK's 32-bit sizes");
    od_tensor *outs[4] = {0};
    if ((st_ = od_alloc_outputs(s, spec, nouts, outs, err)))
        return st_;
    switch (id) {
    case OD_OPID_linalg_inv_ex:
    case OD_OPID__linalg_solve_ex: st_ = run_solve(id, s, &li, outs, err); break;
    case OD_OPID_linalg_cholesky_ex: st_ = run_cholesky(s, &li, outs, err); break;
    case OD_OPID_linalg_qr: st_ = run_qr(s, &li, outs, err); break;
    case OD_OPID__linalg_svd: st_ = run_svd(s, &li, outs, err); break;
    case OD_OPID__linalg_eigh: st_ = run_eigh(s, &li, outs, err); break;
    case OD_OPID_linalg_solve_triangular: st_ = run_triangular(s, &li, outs, err); break;
    default: st_ = run_lu(id, s, &li, outs, err); break;
    }
    if (st_) {
        for (int i = 0; i < nouts; i++)
            od_tensor_release(outs[i]);
        return st_;
    }
    for (int i = 0; i < nouts; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = nouts;
    return OD_OK;
}
