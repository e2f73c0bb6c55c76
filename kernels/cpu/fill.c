/* fill.c — CPU kernels that write tensors without elementwise math: clone,
 * copy_ (with broadcasting and dtype conversion), fill_, arange, rand and
 * randn; plus the conversion helpers the other CPU kernels share.
 *
 * Invariants:
 *  - Dtype conversion follows torch's casts on x86 (iter.h's traits): one
 *    generated loop per (destination, source) dtype pair.
 *  - copy_ never reads memory it has already overwritten: when source and
 *    destination overlap (other than being the very same view) the source is
 *    first copied to a temporary. Writing into a destination in which two
 *    elements share memory (an expanded view) is refused like torch does.
 *  - Random numbers come from a per-thread xoshiro256** generator seeded
 *    from /dev/urandom on first use in that thread; od_cpu_manual_seed
 *    reseeds the calling thread only. Generation is serial on the calling
 *    thread, so a seed fixes the output.
 */
/* As in elementwise.c: let gcc vectorise loops that need a run-time cost
 * check. The conversion loops (cloned for AVX2 and AVX-512) were scalar:
 * 1e6 float32 to float64 took 215 us, to int32 309, torch 108 and 68. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_kernels.h"
#include "iter.h"
#include "od_parallel.h"
#include "od_shape.h"

#define CAT OD_CPU_CAT

/* ---- conversion loops ------------------------------------------------------------- */

/* Store of a source family value into dtype DST: integers through the
 * integer path, floating values through the double path. */
#define FROM_i64(DST, x) OD_CPU_FROM_I64_##DST(x)
#define FROM_f32(DST, x) OD_CPU_FROM_F64_##DST((double)(x))
#define FROM_f64(DST, x) OD_CPU_FROM_F64_##DST(x)
#define FROM_FAM_(fam, DST, x) FROM_##fam(DST, x)
#define FROM_FAM(fam, DST, x) FROM_FAM_(fam, DST, x)

#define DEF_CONV(DST, SRC)                                                                    \
    OD_CPU_CLONES static void conv_##DST##_##SRC(void *vc, char **d, const int64_t *s, int64_t n) \
    {                                                                                         \
        typedef OD_CPU_T_##DST TD;                                                            \
        typedef OD_CPU_T_##SRC TS;                                                            \
        (void)vc;                                                                             \
        if (s[0] == (int64_t)sizeof(TD) && s[1] == (int64_t)sizeof(TS)) {                     \
            TD *restrict o = (TD *)d[0];                                                      \
            const TS *restrict x = (const TS *)d[1];                                          \
            for (int64_t i = 0; i < n; i++)                                                   \
                o[i] = FROM_FAM(OD_CPU_FAM_##SRC, DST, OD_CPU_LD_##SRC(x[i]));                \
            return;                                                                           \
        }                                                                                     \
        char *po = d[0];                                                                      \
        const char *px = d[1];                                                                \
        for (int64_t i = 0; i < n; i++, po += s[0], px += s[1])                               \
            *(TD *)po = FROM_FAM(OD_CPU_FAM_##SRC, DST, OD_CPU_LD_##SRC(*(const TS *)px));    \
    }

#define DEF_CONV_ROW(DST)                                                                     \
    DEF_CONV(DST, BOOL) DEF_CONV(DST, UINT8) DEF_CONV(DST, INT8) DEF_CONV(DST, INT16)         \
    DEF_CONV(DST, INT32) DEF_CONV(DST, INT64) DEF_CONV(DST, FLOAT16) DEF_CONV(DST, BFLOAT16)  \
    DEF_CONV(DST, FLOAT32) DEF_CONV(DST, FLOAT64)
OD_CPU_ALL_DTYPES(DEF_CONV_ROW)

#define CONV_E_(DST, SRC) [OD_##SRC] = conv_##DST##_##SRC,
#define CONV_ROW(DST)                                                                         \
    [OD_##DST] = {CONV_E_(DST, BOOL) CONV_E_(DST, UINT8) CONV_E_(DST, INT8)                   \
                  CONV_E_(DST, INT16) CONV_E_(DST, INT32) CONV_E_(DST, INT64)                 \
                  CONV_E_(DST, FLOAT16) CONV_E_(DST, BFLOAT16) CONV_E_(DST, FLOAT32)          \
                  CONV_E_(DST, FLOAT64)},
static const od_cpu_loop_fn g_conv[OD_NUM_DTYPES][OD_NUM_DTYPES] = {OD_CPU_ALL_DTYPES(CONV_ROW)};

/* A dense run whose destination lies 1 to 63 bytes past its source modulo
 * 4096 (roll's or cat's column slices of page-aligned rows): glibc 2.36's
 * memcpy took 2.5x its normal time there on an AMD EPYC (Zen 4) VM, the
 * loads 4K-aliasing the stores just made, and roll of 1000x1000 by 3 along
 * dim 1 read 10x torch. Copied back to front in 64-byte vectors, no load
 * meets the low address bits of an earlier store. */
#define ALIAS_MIN_BYTES 256
__attribute__((target("avx512f"))) static void copy_back_512(char *d, const char *s, size_t n)
{
    while (n >= 64) {
        n -= 64;
        _mm512_storeu_si512((void *)(d + n), _mm512_loadu_si512((const void *)(s + n)));
    }
    memcpy(d, s, n);
}

static void copy_dense(char *d, const char *s, size_t n)
{
    size_t ahead = ((uintptr_t)d - (uintptr_t)s) & 4095;
    if (n >= ALIAS_MIN_BYTES && ahead > 0 && ahead < 64 && __builtin_cpu_supports("avx512f"))
        copy_back_512(d, s, n);
    else
        memcpy(d, s, n);
}

/* Same-dtype copy: copy_dense for dense runs, else a strided copy by size. */
#define DEF_COPY(NAME, T)                                                                     \
    static void NAME(void *vc, char **d, const int64_t *s, int64_t n)                        \
    {                                                                                         \
        (void)vc;                                                                             \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                       \
            copy_dense(d[0], d[1], (size_t)n * sizeof(T));                                    \
            return;                                                                           \
        }                                                                                     \
        char *po = d[0];                                                                      \
        const char *px = d[1];                                                                \
        for (int64_t i = 0; i < n; i++, po += s[0], px += s[1])                               \
            *(T *)po = *(const T *)px;                                                        \
    }
DEF_COPY(copy8, uint8_t)
DEF_COPY(copy16, uint16_t)
DEF_COPY(copy32, uint32_t)
DEF_COPY(copy64, uint64_t)

static od_cpu_loop_fn copy_loop(size_t elsize)
{
    switch (elsize) {
    case 1: return copy8;
    case 2: return copy16;
    case 4: return copy32;
    default: return copy64;
    }
}

/* ---- scalars -------------------------------------------------------------------------- */

void od_cpu_scalar_to_dtype(const od_value *v, od_dtype dt, void *buf)
{
    bool is_float = v->tag == OD_T_DOUBLE;
    int64_t i = v->tag == OD_T_INT ? v->u.i : v->tag == OD_T_BOOL ? (int64_t)v->u.b : 0;
    double d = is_float ? v->u.d : (double)i;
    switch (dt) {
#define SC_(DT)                                                                        \
    case OD_##DT: {                                                                    \
        OD_CPU_T_##DT x = is_float ? OD_CPU_FROM_F64_##DT(d) : OD_CPU_FROM_I64_##DT(i); \
        memcpy(buf, &x, sizeof x);                                                     \
        break;                                                                         \
    }
        OD_CPU_ALL_DTYPES(SC_)
#undef SC_
    default:
        memset(buf, 0, 8);
        break;
    }
}

/* ---- copies ---------------------------------------------------------------------------- */

static od_status check_cpu_tensor(const od_tensor *t, const char *what, od_error *err)
{
    if (t->device.type != OD_DEV_CPU || (!od_tensor_data(t) && od_tensor_numel(t) > 0)) {
        char dev[32];
        od_device_print(t->device, dev, sizeof dev);
        return od_error_set(err, OD_EMISMATCH, "%s: expected a CPU tensor, got one on %s", what, dev);
    }
    return OD_OK;
}

/* Byte range [lo, hi) a view can touch (strides are never negative). */
static void byte_range(const od_tensor *t, const char **lo, const char **hi)
{
    const char *p = od_tensor_data(t);
    int64_t span = 1;
    for (int d = 0; d < t->ndim; d++)
        span += (t->sizes[d] - 1) * t->strides[d];
    *lo = p;
    *hi = p + span * (int64_t)od_dtype_size(t->dtype);
}

static bool same_view(const od_tensor *a, const od_tensor *b)
{
    if (od_tensor_data(a) != od_tensor_data(b) || a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] != b->sizes[d] || (a->sizes[d] > 1 && a->strides[d] != b->strides[d]))
            return false;
    return true;
}

/* ---- a transposed copy ----------------------------------------------------------------
 * dst contiguous, src of the same element size with its last two dims
 * swapped in memory (unit stride along dst's rows, ATen's
 * copy_same_type_transpose_ case, and x.transpose(-2, -1).contiguous()):
 * per matrix, transpose.c's register blocks, tasks of TC_ROWS rows of dst.
 * The iterator ran it one element at a time along the strided side: a
 * 4096x4096 float32 copy took 57 ms, torch 19. */
#define TC_ROWS 64

typedef struct tcopy {
    const od_tensor *src;
    const char *s;
    char *d;
    int64_t R, C, lds, nrb;
    size_t es;
} tcopy;

static void tcopy_run(void *ctx, int64_t b, int64_t e)
{
    const tcopy *j = ctx;
    const int nd = j->src->ndim;
    for (int64_t task = b; task < e; task++) {
        int64_t m = task / j->nrb, r0 = task % j->nrb * TC_ROWS, r1 = r0 + TC_ROWS < j->R ? r0 + TC_ROWS : j->R;
        int64_t off = 0, rest = m; /* matrix m's first element in src: its batch index through src's strides */
        for (int k = nd - 3; k >= 0; k--) {
            off += rest % j->src->sizes[k] * j->src->strides[k];
            rest /= j->src->sizes[k];
        }
        /* dst[i][c] = s[i + c * lds]: the C x R matrix at s (rows lds apart) transposed, its columns [r0, r1) */
        const char *s = j->s + (size_t)(off + r0) * j->es;
        char *d = j->d + (size_t)((m * j->R + r0) * j->C) * j->es;
        (j->es == 4 ? od_cpu_transpose32 : od_cpu_transpose64)(s, j->lds, d, j->C, j->C, r1 - r0);
    }
}

static bool transposed_copy(od_tensor *dst, const od_tensor *src)
{
    int nd = dst->ndim;
    size_t es = od_dtype_size(dst->dtype);
    if (nd < 2 || src->ndim != nd || src->dtype != dst->dtype || (es != 4 && es != 8) ||
        src->strides[nd - 2] != 1 || src->strides[nd - 1] == 1 || dst->sizes[nd - 2] < 2 || dst->sizes[nd - 1] < 2 ||
        od_tensor_numel(dst) < 4096 || !od_tensor_is_contiguous(dst))
        return false;
    for (int k = 0; k < nd; k++)
        if (src->sizes[k] != dst->sizes[k])
            return false; /* broadcast: the iterator's */
    tcopy j = {.src = src, .s = od_tensor_data(src), .d = od_tensor_data(dst), .R = dst->sizes[nd - 2],
               .C = dst->sizes[nd - 1], .lds = src->strides[nd - 1], .es = es};
    j.nrb = (j.R + TC_ROWS - 1) / TC_ROWS;
    int64_t ntasks = od_tensor_numel(dst) / (j.R * j.C) * j.nrb;
    if (od_parallel_for(ntasks, 1, tcopy_run, &j) != OD_OK)
        tcopy_run(&j, 0, ntasks);
    return true;
}

od_status od_cpu_copy_into(od_tensor *dst, const od_tensor *src, od_error *err)
{
    od_status st;
    if ((st = check_cpu_tensor(dst, "copy_ (self)", err)) || (st = check_cpu_tensor(src, "copy_ (src)", err)))
        return st;
    if (od_tensor_numel(dst) == 0)
        return OD_OK;
    if (same_view(dst, src))
        return OD_OK;
    od_tensor *tmp = NULL;
    if (dst->storage == src->storage && od_tensor_numel(src) > 0) {
        const char *dlo, *dhi, *slo, *shi;
        byte_range(dst, &dlo, &dhi);
        byte_range(src, &slo, &shi);
        if (dlo < shi && slo < dhi) { /* overlapping: read from a private copy */
            if ((st = od_tensor_empty(src->sizes, src->ndim, src->dtype, src->device, &tmp, err)))
                return st;
            if ((st = od_cpu_copy_into(tmp, src, err))) {
                od_tensor_release(tmp);
                return st;
            }
            src = tmp;
        }
    }
    if (transposed_copy(dst, src)) {
        od_tensor_release(tmp);
        return OD_OK;
    }
    od_cpu_operand ops[2] = {od_cpu_operand_of(dst), od_cpu_operand_of(src)};
    od_cpu_iter it;
    st = od_cpu_iter_build(&it, dst->sizes, dst->ndim, ops, 2, err);
    if (st == OD_OK) {
        od_cpu_loop_fn fn = dst->dtype == src->dtype ? copy_loop(od_dtype_size(dst->dtype))
                                                     : g_conv[dst->dtype][src->dtype];
        od_cpu_iter_run(&it, fn, NULL, OD_CPU_GRAIN);
    }
    od_tensor_release(tmp);
    return st;
}

od_status od_cpu_to_dtype(od_tensor *src, od_dtype dt, od_tensor **out, od_error *err)
{
    *out = NULL;
    if (src->dtype == dt && od_tensor_is_contiguous(src)) {
        od_tensor_retain(src);
        *out = src;
        return OD_OK;
    }
    od_tensor *t = NULL;
    od_status st = od_tensor_empty(src->sizes, src->ndim, dt, src->device, &t, err);
    if (st)
        return st;
    if ((st = od_cpu_copy_into(t, src, err))) {
        od_tensor_release(t);
        return st;
    }
    *out = t;
    return OD_OK;
}

od_status od_cpu_compute_target(od_tensor *out, od_dtype cdt, od_tensor **tgt, od_error *err)
{
    if (out->dtype == cdt) {
        od_tensor_retain(out);
        *tgt = out;
        return OD_OK;
    }
    return od_tensor_empty(out->sizes, out->ndim, cdt, out->device, tgt, err);
}

od_status od_cpu_finish_target(od_tensor *out, od_tensor *tgt, od_error *err)
{
    od_status st = tgt == out ? OD_OK : od_cpu_copy_into(out, tgt, err);
    od_tensor_release(tgt);
    return st;
}

static od_status ret1(od_stack *s, od_tensor *t)
{
    s->rets[0] = od_tensor_v(t);
    s->nrets = 1;
    return OD_OK;
}

/* Shape function, then the outputs it describes (one). */
static od_status prepare(od_shape_fn shape, od_opid id, od_stack *s, od_out_spec *spec, od_tensor **out,
                         od_error *err)
{
    int n = 0;
    od_status st = shape(id, s, spec, &n, err);
    if (st)
        return st;
    for (int i = 0; i < s->nargs; i++)
        if (s->args[i].tag == OD_T_TENSOR && s->args[i].u.t &&
            (st = check_cpu_tensor(s->args[i].u.t, od_op_name(od_builtin(id)), err)))
            return st;
    if (spec->device.type != OD_DEV_CPU)
        return od_error_set(err, OD_EMISMATCH, "%s: the CPU kernel cannot make a tensor on another device",
                            od_op_name(od_builtin(id)));
    /* clone and arange write every element of their new output: no clearing first */
    bool writes_all = id == OD_OPID_clone || id == OD_OPID_arange || id == OD_OPID_arange_start ||
                      id == OD_OPID_arange_start_step;
    return writes_all ? od_alloc_outputs_overwrite(s, spec, 1, out, err) : od_alloc_outputs(s, spec, 1, out, err);
}

od_status od_cpu_copy(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    od_tensor *out = NULL;
    od_status st = prepare(id == OD_OPID_clone ? od_shape_same : od_shape_inplace, id, s, &spec, &out, err);
    if (st)
        return st;
    /* clone: out is new and contiguous; copy_: out is self (retained). */
    if ((st = od_cpu_copy_into(out, s->args[id == OD_OPID_clone ? 0 : 1].u.t, err))) {
        od_tensor_release(out);
        return st;
    }
    return ret1(s, out);
}

/* ---- fill_ ------------------------------------------------------------------------------ */

typedef struct fill_ctx {
    union {
        uint64_t u64;
        char bytes[8];
    } v;
    size_t elsize;
} fill_ctx;

/* cloned for AVX2 and AVX-512: with the baseline's 16-byte stores 1e6
 * float32 took 42 us, torch 24 */
#define DEF_FILL(NAME, T)                                                                     \
    OD_CPU_CLONES static void NAME(void *vc, char **d, const int64_t *s, int64_t n)          \
    {                                                                                         \
        const fill_ctx *c = vc;                                                               \
        T v;                                                                                  \
        memcpy(&v, c->v.bytes, sizeof v);                                                     \
        if (s[0] == (int64_t)sizeof(T)) {                                                     \
            T *restrict o = (T *)d[0];                                                        \
            for (int64_t i = 0; i < n; i++)                                                   \
                o[i] = v;                                                                     \
            return;                                                                           \
        }                                                                                     \
        char *po = d[0];                                                                      \
        for (int64_t i = 0; i < n; i++, po += s[0])                                           \
            *(T *)po = v;                                                                     \
    }
DEF_FILL(fill8, uint8_t)
DEF_FILL(fill16, uint16_t)
DEF_FILL(fill32, uint32_t)
DEF_FILL(fill64, uint64_t)

od_status od_cpu_fill(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    od_tensor *out = NULL;
    od_status st = prepare(od_shape_inplace, id, s, &spec, &out, err);
    if (st)
        return st;
    fill_ctx c;
    memset(&c, 0, sizeof c);
    c.elsize = od_dtype_size(out->dtype);
    od_cpu_scalar_to_dtype(&s->args[1], out->dtype, c.v.bytes);
    od_cpu_operand o = od_cpu_operand_of(out);
    od_cpu_iter it;
    if ((st = od_cpu_iter_build(&it, out->sizes, out->ndim, &o, 1, err))) {
        od_tensor_release(out);
        return st;
    }
    od_cpu_loop_fn fn = c.elsize == 1 ? fill8 : c.elsize == 2 ? fill16 : c.elsize == 4 ? fill32 : fill64;
    od_cpu_iter_run(&it, fn, &c, OD_CPU_GRAIN);
    return ret1(s, out);
}

/* ---- arange ------------------------------------------------------------------------------ */

#define ARANGE_ALIGN 64 /* a multiple of every replayed block (16 floats, 8 doubles, 32 halves) */

typedef struct arange_ctx {
    const od_arange_params *p;
    char *data;
} arange_ctx;

/* Cloned for AVX2 and AVX-512, the integral test outside the loops, so
 * both vectorise (1e6 int64 took 249-289 us, torch 126-154). */
OD_CPU_CLONES static void arange_chunk(void *vc, int64_t begin, int64_t end)
{
    const arange_ctx *c = vc;
    const od_arange_params *p = c->p;
    const int64_t is = p->istart, ik = p->istep;
    const double fs = p->fstart, fk = p->fstep;
    /* Floating dtypes replay ATen 1.13's arange_kernel (its AVX2 build):
     * blocks of two vectors (8 floats, 4 doubles, 16 of the 16-bit types)
     * whose lanes are Vectorized::arange(base, step): base the element's
     * start + step * idx, lane j base + j * step, each in the accumulate
     * type (double; float for the 16-bit types), fused as gcc contracts them
     * there (unfused, float64 lanes 3 and 7 differ from torch's) and rounded
     * to the dtype; the last elements short of a block take the scalar
     * start + step * idx. begin is a multiple of ARANGE_ALIGN, so the blocks
     * are those of one pass (torch's threads move them past 32768). They
     * were the scalar formula throughout, which differed from torch in
     * float32, float64 and bfloat16 alike. */
#define AR_VEC_(T, V)                                                          \
    {                                                                          \
        T *o = (T *)c->data;                                                   \
        int64_t i = begin;                                                     \
        for (; i + 2 * (V) <= end; i += 2 * (V))                               \
            for (int64_t b = i; b < i + 2 * (V); b += (V)) {                   \
                T base = (T)fma(fk, (double)b, fs);                            \
                o[b] = base;                                                   \
                for (int j = 1; j < (V); j++)                                  \
                    o[b + j] = (T)fma((double)j, fk, (double)base);            \
            }                                                                  \
        for (; i < end; i++)                                                   \
            o[i] = (T)fma(fk, (double)i, fs);                                  \
        return;                                                                \
    }
    if (!p->integral && (p->dtype == OD_BFLOAT16 || p->dtype == OD_FLOAT16)) {
        /* the 16-bit types accumulate in float, in vectors of 16 */
        uint16_t *o = (uint16_t *)c->data;
        bool bf = p->dtype == OD_BFLOAT16;
        float s0 = (float)fs, k0 = (float)fk;
#define H16_(x) (bf ? od_float_to_bf16(x) : od_float_to_half(x))
#define F16_(h) (bf ? od_bf16_to_float(h) : od_half_to_float(h))
        int64_t i = begin;
        for (; i + 32 <= end; i += 32)
            for (int64_t b = i; b < i + 32; b += 16) {
                uint16_t base = H16_(fmaf(k0, (float)b, s0));
                o[b] = base;
                for (int j = 1; j < 16; j++)
                    o[b + j] = H16_(fmaf((float)j, k0, F16_(base)));
            }
        for (; i < end; i++)
            o[i] = H16_(fmaf(k0, (float)i, s0));
#undef H16_
#undef F16_
        return;
    }
    if (!p->integral && p->dtype == OD_FLOAT32)
        AR_VEC_(float, 8)
    if (!p->integral && p->dtype == OD_FLOAT64)
        AR_VEC_(double, 4)
#undef AR_VEC_
    switch (p->dtype) {
#define AR_(DT)                                                                               \
    case OD_##DT: {                                                                           \
        OD_CPU_T_##DT *o = (OD_CPU_T_##DT *)c->data;                                          \
        if (p->integral)                                                                      \
            for (int64_t i = begin; i < end; i++)                                             \
                o[i] = OD_CPU_FROM_I64_##DT(od_math_wrap_add_i64(is, od_math_wrap_mul_i64(i, ik))); \
        else                                                                                  \
            for (int64_t i = begin; i < end; i++)                                             \
                o[i] = OD_CPU_FROM_F64_##DT(fs + (double)i * fk);                             \
        break;                                                                                \
    }
        OD_CPU_ALL_DTYPES(AR_)
#undef AR_
    default:
        break;
    }
}

/* units [u0, u1) of ARANGE_ALIGN elements: the split never moves a block */
static void arange_units(void *vc, int64_t u0, int64_t u1)
{
    const arange_ctx *c = vc;
    int64_t end = u1 * ARANGE_ALIGN;
    arange_chunk(vc, u0 * ARANGE_ALIGN, end < c->p->size ? end : c->p->size);
}

od_status od_cpu_arange(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_arange_params p;
    od_out_spec spec;
    od_tensor *out = NULL;
    od_status st = od_arange_params_of(id, s, &p, err);
    if (st)
        return st;
    if ((st = prepare(od_shape_arange, id, s, &spec, &out, err)))
        return st;
    arange_ctx c = {&p, od_tensor_data(out)};
    if (p.size > 0 && od_parallel_for((p.size + ARANGE_ALIGN - 1) / ARANGE_ALIGN, OD_CPU_GRAIN / ARANGE_ALIGN,
                                      arange_units, &c) != OD_OK)
        arange_chunk(&c, 0, p.size);
    return ret1(s, out);
}

/* ---- rand / randn ------------------------------------------------------------------------- */

typedef struct xoshiro {
    uint64_t s[4];
    bool seeded;
} xoshiro;

static _Thread_local xoshiro g_rng;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(xoshiro *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
    r->seeded = true;
}

void od_cpu_manual_seed(uint64_t seed) { rng_seed(&g_rng, seed); }

static xoshiro *rng_get(void)
{
    if (!g_rng.seeded) {
        uint64_t seed = 0;
        FILE *f = fopen("/dev/urandom", "rb");
        if (!f || fread(&seed, sizeof seed, 1, f) != 1) {
            /* no /dev/urandom: time, thread and address still differ per thread */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)(uintptr_t)&g_rng ^
                   ((uint64_t)getpid() << 16);
        }
        if (f)
            fclose(f);
        rng_seed(&g_rng, seed);
    }
    return &g_rng;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(xoshiro *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with `bits` random mantissa bits, so the value is exact
 * in the output dtype and can never round up to 1. */
static inline double uniform_bits(xoshiro *r, int bits)
{
    return (double)(rng_next(r) >> (64 - bits)) * ldexp(1.0, -bits);
}

static int mantissa_bits(od_dtype dt)
{
    switch (dt) {
    case OD_FLOAT16: return 11;
    case OD_BFLOAT16: return 8;
    case OD_FLOAT32: return 24;
    default: return 53;
    }
}

static void store_double(od_dtype dt, char *data, int64_t i, double v)
{
    switch (dt) {
#define SD_(DT)                                                  \
    case OD_##DT:                                                \
        ((OD_CPU_T_##DT *)data)[i] = OD_CPU_FROM_F64_##DT(v);    \
        break;
        OD_CPU_FLOAT_DTYPES(SD_)
#undef SD_
    default:
        break;
    }
}

od_status od_cpu_random(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    od_tensor *out = NULL;
    od_status st = prepare(od_shape_factory, id, s, &spec, &out, err);
    if (st)
        return st;
    if (!od_dtype_is_floating(out->dtype)) {
        od_tensor_release(out);
        return od_error_set(err, OD_EUNSUPPORTED, "%s: expected a floating point dtype, got %s",
                            od_op_name(od_builtin(id)), od_dtype_name(out->dtype));
    }
    xoshiro *r = rng_get();
    int64_t n = od_tensor_numel(out);
    char *data = od_tensor_data(out);
    if (id == OD_OPID_rand) {
        int bits = mantissa_bits(out->dtype);
        if (out->dtype == OD_FLOAT32) {
            float *o = (float *)data;
            for (int64_t i = 0; i < n; i++)
                o[i] = (float)uniform_bits(r, 24);
        } else {
            for (int64_t i = 0; i < n; i++)
                store_double(out->dtype, data, i, uniform_bits(r, bits));
        }
    } else {
        /* Box-Muller: each pair of uniforms gives two independent normals. */
        for (int64_t i = 0; i < n; i += 2) {
            double u1 = 1.0 - uniform_bits(r, 53); /* (0, 1]: log is finite */
            double u2 = uniform_bits(r, 53);
            double rad = sqrt(-2.0 * log(u1));
            double th = 6.283185307179586476925 * u2;
            store_double(out->dtype, data, i, rad * cos(th));
            if (i + 1 < n)
                store_double(out->dtype, data, i + 1, rad * sin(th));
        }
    }
    return ret1(s, out);
}
