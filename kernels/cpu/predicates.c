/* predicates.c — CPU equal and isin.
 *
 * Invariants:
 *  - equal is ATen's cpu_equal: false unless the sizes are the same (no
 *    broadcasting), else every element pair equal in the inputs' common
 *    dtype (NaN never equals; -0.0 equals 0.0). Its return is a bool value.
 *  - isin.Tensor_Scalar is eq.Scalar (ne.Scalar inverted), as in ATen.
 *  - isin follows ATen 1.13's isin_Tensor_Tensor_out: its size heuristic
 *    picks the brute-force kernel (which has no float16 loop) or the sorting
 *    one (which runs unique() unless assume_unique, and unique has no
 *    float16 either). Both give plain membership, except the sorting one
 *    with assume_unique, which is replayed step for step (stable sort of
 *    elements then test elements, each element "found" when its sorted
 *    neighbour is equal), so duplicate elements answer as in torch.
 *  - Values are compared as int64 (integers) or double (floating dtypes,
 *    after rounding to the common dtype), both exact; equal of two
 *    contiguous tensors of one dtype compares them where they lie.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_parallel.h"
#include "od_shape.h"
#include "od_sort_algo.h"

/* t (borrowed) rounded to dtype ct, then widened to exact keys: double for
 * floating ct, int64 otherwise. *out new, contiguous. */
static od_status keys_of(od_tensor *t, od_dtype ct, od_tensor **out, od_error *err)
{
    od_tensor *r = NULL;
    od_status st = od_cpu_to_dtype(t, ct, &r, err);
    if (st)
        return st;
    st = od_cpu_to_dtype(r, od_dtype_is_floating(ct) ? OD_FLOAT64 : OD_INT64, out, err);
    od_tensor_release(r);
    return st;
}

static bool key_eq(const void *a, int64_t i, const void *b, int64_t j, bool fl)
{
    return fl ? ((const double *)a)[i] == ((const double *)b)[j] : ((const int64_t *)a)[i] == ((const int64_t *)b)[j];
}

/* equal of two contiguous tensors of one dtype, where they lie: blocks
 * split across the worker pool, each compared whole (a loop the compiler
 * vectorises) and none started once one has differed, as ATen's loop stops
 * at the first difference. Integers and bool are equal exactly when their
 * bytes are; floats by value (NaN never, -0.0 == 0.0). */
typedef struct equal_job {
    const char *a, *b;
    od_dtype dt;
    int differs; /* set (atomically) by the first block that differs */
} equal_job;

#define EQUAL_BLOCK 4096 /* elements compared before the flag is looked at again */

/* 1 where half-precision bits x and y are equal values: the same bits and
 * not a NaN (magnitude above inf's, nan_above), or both zeros */
static inline int half_eq(uint16_t x, uint16_t y, uint16_t nan_above)
{
    return (x == y && (x & 0x7fff) <= nan_above) | (((x | y) & 0x7fff) == 0);
}

/* 1 where a pair of one whole block differs. A fixed trip count, so gcc
 * vectorises the loop at -O2 (a block of m elements stayed scalar: 1e6
 * float32 took 657 us in cache, torch 438 from memory). */
#define NE_BLOCK(T, name)                                                      \
    OD_CPU_CLONES static int name(const T *restrict a, const T *restrict b)    \
    {                                                                          \
        int ne = 0;                                                            \
        for (int k = 0; k < EQUAL_BLOCK; k++)                                  \
            ne |= !(a[k] == b[k]);                                             \
        return ne;                                                             \
    }
NE_BLOCK(float, ne_block_f32)
NE_BLOCK(double, ne_block_f64)

static void equal_chunk(void *ctx, int64_t begin, int64_t end)
{
    equal_job *j = ctx;
    size_t es = od_dtype_size(j->dt);
    for (int64_t i = begin; i < end && !__atomic_load_n(&j->differs, __ATOMIC_RELAXED); i += EQUAL_BLOCK) {
        int64_t m = end - i < EQUAL_BLOCK ? end - i : EQUAL_BLOCK;
        const char *pa = j->a + (size_t)i * es, *pb = j->b + (size_t)i * es;
        int ne = 0;
        switch (j->dt) {
        case OD_FLOAT32:
            if (m == EQUAL_BLOCK)
                ne = ne_block_f32((const float *)pa, (const float *)pb);
            else /* the last, partial block */
                for (int64_t k = 0; k < m; k++)
                    ne |= !(((const float *)pa)[k] == ((const float *)pb)[k]);
            break;
        case OD_FLOAT64:
            if (m == EQUAL_BLOCK)
                ne = ne_block_f64((const double *)pa, (const double *)pb);
            else /* the last, partial block */
                for (int64_t k = 0; k < m; k++)
                    ne |= !(((const double *)pa)[k] == ((const double *)pb)[k]);
            break;
        case OD_FLOAT16:
        case OD_BFLOAT16: {
            uint16_t nan_above = j->dt == OD_FLOAT16 ? 0x7c00 : 0x7f80;
            for (int64_t k = 0; k < m; k++)
                ne |= !half_eq(((const uint16_t *)pa)[k], ((const uint16_t *)pb)[k], nan_above);
            break;
        }
        default:
            ne = memcmp(pa, pb, (size_t)m * es) != 0;
        }
        if (ne)
            __atomic_store_n(&j->differs, 1, __ATOMIC_RELAXED);
    }
}

/* equal_chunk past the first block, which the caller compares itself */
static void equal_rest(void *ctx, int64_t begin, int64_t end)
{
    equal_chunk(ctx, begin + EQUAL_BLOCK, end + EQUAL_BLOCK);
}

od_status od_cpu_equal(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx;
    (void)ks;
    (void)op;
    if (s->nargs != 2 || s->args[0].tag != OD_T_TENSOR || s->args[1].tag != OD_T_TENSOR)
        return od_error_set(err, OD_EINVAL, "equal(): expected two tensors");
    od_tensor *a = s->args[0].u.t, *b = s->args[1].u.t;
    if (!od_device_eq(a->device, b->device) || a->device.type != OD_DEV_CPU) {
        char da[32], db[32];
        od_device_print(a->device, da, sizeof da);
        od_device_print(b->device, db, sizeof db);
        return od_error_set(err, OD_EMISMATCH,
                            "Expected all tensors to be on the same device, but found at least two "
                            "devices, %s and %s!", da, db);
    }
    bool same = a->ndim == b->ndim && (a->ndim == 0 || !memcmp(a->sizes, b->sizes, (size_t)a->ndim * sizeof a->sizes[0]));
    if (same && od_tensor_numel(a) > 0 && a->dtype == b->dtype && od_tensor_is_contiguous(a) &&
        od_tensor_is_contiguous(b)) {
        equal_job j = {od_tensor_data(a), od_tensor_data(b), a->dtype, 0};
        int64_t n = od_tensor_numel(a), first = n < EQUAL_BLOCK ? n : EQUAL_BLOCK;
        equal_chunk(&j, 0, first); /* most unequal pairs differ early: no handoff to the pool */
        if (!j.differs && first < n) {
            od_status st = od_parallel_for(n - first, 65536, equal_rest, &j);
            if (st)
                return st;
        }
        same = !j.differs;
    } else if (same && od_tensor_numel(a) > 0) {
        od_result_arg ra[2] = {{a, OD_SCALAR_BOOL}, {b, OD_SCALAR_BOOL}};
        od_dtype ct = od_result_type(ra, 2);
        bool fl = od_dtype_is_floating(ct);
        od_tensor *ka = NULL, *kb = NULL;
        od_status st;
        if ((st = keys_of(a, ct, &ka, err)) || (st = keys_of(b, ct, &kb, err))) {
            od_tensor_release(ka);
            return st;
        }
        const void *pa = od_tensor_data(ka), *pb = od_tensor_data(kb);
        for (int64_t i = 0, n = od_tensor_numel(a); i < n && same; i++)
            same = key_eq(pa, i, pb, i, fl);
        od_tensor_release(ka);
        od_tensor_release(kb);
    }
    s->rets[0] = od_bool(same);
    s->nrets = 1;
    return OD_OK;
}

static int cmp_f64(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}
static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* out[i] = (key i of e is among the m keys of t) != invert, by binary search
 * over t's sorted keys (NaN dropped: it equals nothing), elements split
 * across the worker pool. */
typedef struct member_job {
    const void *e, *sorted;
    int64_t k;
    bool fl, invert;
    bool *out;
} member_job;

#define MEMBER_GRAIN 4096 /* elements per parallel task, at least */

static void member_chunk(void *ctx, int64_t begin, int64_t end)
{
    const member_job *j = ctx;
    /* a lower bound that halves the range by a mask each step (no branch to
     * mispredict on random elements); a NaN element finds nothing */
#define MEMBER_LOOP_(T)                                                                  \
    for (int64_t i = begin; i < end; i++) {                                              \
        const T x = ((const T *)j->e)[i], *b = j->sorted;                                \
        for (int64_t n = j->k; n > 1;) {                                                 \
            int64_t h = n / 2;                                                           \
            b += h & -(int64_t)(b[h] < x);                                               \
            n -= h;                                                                      \
        }                                                                                \
        bool found = j->k > 0 && (*b == x || (b + 1 < (const T *)j->sorted + j->k && b[1] == x)); \
        j->out[i] = found != j->invert;                                                  \
    }
    if (j->fl)
        MEMBER_LOOP_(double)
    else
        MEMBER_LOOP_(int64_t)
#undef MEMBER_LOOP_
}

static od_status membership(const void *e, int64_t n, const void *t, int64_t m, bool fl, bool invert, bool *out,
                            od_error *err)
{
    size_t es = fl ? sizeof(double) : sizeof(int64_t);
    char *sorted = malloc((size_t)(m ? m : 1) * es);
    if (!sorted)
        return od_error_set(err, OD_ENOMEM, "isin: out of memory");
    int64_t k = 0;
    for (int64_t j = 0; j < m; j++) {
        if (fl && isnan(((const double *)t)[j]))
            continue;
        memcpy(sorted + (size_t)k * es, (const char *)t + (size_t)j * es, es);
        k++;
    }
    qsort(sorted, (size_t)k, es, fl ? cmp_f64 : cmp_i64);
    member_job job = {e, sorted, k, fl, invert, out};
    od_status st = od_parallel_for(n, MEMBER_GRAIN, member_chunk, &job);
    free(sorted);
    return st;
}

/* isin_sorting with assume_unique: stable sort of cat(elements, test), each
 * position equal (invert: unequal) to its successor, the last invert. */
static od_status sorted_replay(const void *e, int64_t n, const void *t, int64_t m, bool fl, bool invert, bool *out,
                               od_error *err)
{
    int64_t all = n + m;
    od_sort_elem *f = malloc((size_t)(2 * all) * sizeof *f);
    if (!f)
        return od_error_set(err, OD_ENOMEM, "isin: out of memory");
    for (int64_t i = 0; i < all; i++) {
        const void *src = i < n ? e : t;
        int64_t j = i < n ? i : i - n;
        if (fl)
            f[i].k.d = ((const double *)src)[j];
        else
            f[i].k.i = ((const int64_t *)src)[j];
        f[i].idx = i;
    }
    od_sort_cmp asc = {fl, false, false, false};
    sa_merge_sort(&asc, f, f + all, all);
    for (int64_t i = 0; i < all; i++) {
        bool v = invert;
        if (i + 1 < all) {
            bool eq = fl ? f[i + 1].k.d == f[i].k.d : f[i + 1].k.i == f[i].k.i;
            v = invert ? !eq : eq;
        }
        if (f[i].idx < n)
            out[f[i].idx] = v;
    }
    free(f);
    return OD_OK;
}

od_status od_cpu_isin(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    (void)op;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    int nouts = 0;
    od_isin_plan p;
    od_status st;
    if ((st = od_shape_isin(id, s, &spec, &nouts, err)) || (st = od_isin_plan_of(id, s, true, &p, err)))
        return st;
    if (id == OD_OPID_isin_Tensor_Scalar) {
        /* ATen's isin_Tensor_Scalar_out redirects one test element to eq /
         * ne (the membership search, over keys widened to double, took 2x
         * torch's time) */
        od_value a[2] = {s->args[0], s->args[1]};
        od_tensor *r = NULL;
        st = od_call_builtin1(p.invert ? OD_OPID_ne_Scalar : OD_OPID_eq_Scalar, a, 2, &r, err);
        return od_cpu_return1(s, r, st);
    }
    od_tensor *out = NULL, *e = NULL, *t = NULL, *ke = NULL, *kt = NULL;
    /* the Scalar operand as a wrapped number (0-dim), as ATen wraps it */
    for (int i = 0; i < 2; i++) {
        const od_value *v = &s->args[i];
        od_tensor **dst = i == 0 ? &e : &t;
        if (v->tag == OD_T_TENSOR) {
            od_tensor_retain(v->u.t);
            *dst = v->u.t;
            continue;
        }
        od_dtype dt = v->tag == OD_T_INT ? OD_INT64 : OD_FLOAT64;
        char b8[8];
        od_cpu_scalar_to_dtype(v, dt, b8);
        if ((st = od_tensor_empty(NULL, 0, dt, (od_device){OD_DEV_CPU, 0}, dst, err)))
            goto done;
        memcpy(od_tensor_data(*dst), b8, 8);
        (*dst)->wrapped_number = true;
    }
    if ((st = od_alloc_outputs(s, &spec, 1, &out, err)))
        goto done;
    if (p.n == 0)
        goto done;
    bool fl = od_dtype_is_floating(p.common), *o = od_tensor_data(out);
    if ((st = keys_of(e, p.common, &ke, err)) || (st = keys_of(t, p.common, &kt, err)))
        goto done;
    st = p.replay ? sorted_replay(od_tensor_data(ke), p.n, od_tensor_data(kt), p.m, fl, p.invert, o, err)
                  : membership(od_tensor_data(ke), p.n, od_tensor_data(kt), p.m, fl, p.invert, o, err);
done:
    od_tensor_release(e);
    od_tensor_release(t);
    od_tensor_release(ke);
    od_tensor_release(kt);
    return od_cpu_return1(s, out, st);
}
