/* test_cpu_elementwise.c — the CPU elementwise kernels, copies, fill_,
 * arange and rand/randn, called through the dispatcher (od_init +
 * od_call_builtin, so registration and the shape functions are exercised).
 *
 * Every numeric check compares with a reference computed here: in double
 * (long double for rounding divisions) for floating results, in exact
 * 64-bit modular arithmetic for integers, after casting the inputs to the
 * common dtype the test computes with its own promotion table (torch's
 * result_type rules). Inputs are fresh random tensors of random rank (0-4),
 * sizes (0 included), dtypes and layouts (permuted, sliced with a step,
 * expanded), with NaN/Inf and integer extremes mixed in; a few cases are
 * large enough to take the parallel path. The seed is printed on failure;
 * OD_TEST_SEED=<n> reruns it.
 */
/* cpu_testutil.h's helpers are plain static functions; not all are used here. */
#pragma GCC diagnostic ignored "-Wunused-function"

#include <float.h>

#include "cpu/cpu_kernels.h"
#include "cpu_testutil.h"
#include "od_shape.h"

TestSuite(cpu_ew, .init = test_setup);

/* ---- independent dtype rules ----------------------------------------------------- */

static bool isflt(od_dtype dt)
{
    return dt == OD_FLOAT16 || dt == OD_BFLOAT16 || dt == OD_FLOAT32 || dt == OD_FLOAT64;
}
static int bytes_of(od_dtype dt)
{
    switch (dt) {
    case OD_BOOL: case OD_UINT8: case OD_INT8: return 1;
    case OD_INT16: case OD_FLOAT16: case OD_BFLOAT16: return 2;
    case OD_INT32: case OD_FLOAT32: return 4;
    default: return 8;
    }
}

/* torch.promote_types */
static od_dtype ref_promote(od_dtype a, od_dtype b)
{
    if (a == b)
        return a;
    if (a == OD_BOOL)
        return b;
    if (b == OD_BOOL)
        return a;
    if (isflt(a) != isflt(b))
        return isflt(a) ? a : b;
    if (isflt(a)) {
        if ((a == OD_FLOAT16 && b == OD_BFLOAT16) || (a == OD_BFLOAT16 && b == OD_FLOAT16))
            return OD_FLOAT32;
        return bytes_of(a) >= bytes_of(b) ? a : b;
    }
    if (a == OD_UINT8 || b == OD_UINT8) {
        od_dtype o = a == OD_UINT8 ? b : a;
        return o == OD_INT8 ? OD_INT16 : o;
    }
    return bytes_of(a) >= bytes_of(b) ? a : b;
}

/* One participant of result_type: a tensor's dtype and rank, or a number. */
typedef struct part {
    enum { P_TENSOR, P_BOOL, P_INT, P_FLOAT, P_NONE } kind;
    od_dtype dt;
    int ndim;
} part;

#define UNDEF OD_NUM_DTYPES
static od_dtype prom_u(od_dtype a, od_dtype b) { return a == UNDEF ? b : b == UNDEF ? a : ref_promote(a, b); }
static od_dtype combine(od_dtype hi, od_dtype lo)
{
    if (hi == UNDEF)
        return lo;
    if (lo == UNDEF)
        return hi;
    if (isflt(hi))
        return hi;
    if (hi == OD_BOOL || isflt(lo))
        return ref_promote(hi, lo);
    return hi;
}
static od_dtype ref_result_type(const part *p, int n)
{
    od_dtype dim = UNDEF, zero = UNDEF, wrapped = UNDEF;
    for (int i = 0; i < n; i++) {
        switch (p[i].kind) {
        case P_TENSOR:
            if (p[i].ndim > 0)
                dim = prom_u(dim, p[i].dt);
            else
                zero = prom_u(zero, p[i].dt);
            break;
        case P_BOOL: wrapped = prom_u(wrapped, OD_BOOL); break;
        case P_INT: wrapped = prom_u(wrapped, OD_INT64); break;
        case P_FLOAT: wrapped = prom_u(wrapped, OD_FLOAT32); break;
        default: break;
        }
    }
    return combine(dim, combine(zero, wrapped));
}

/* ---- reference values ------------------------------------------------------------------ */

/* A value in the test's own representation: exact int64 or double. */
typedef struct rv {
    bool is_int;
    int64_t i;
    double d;
} rv;

static rv RI(int64_t i) { return (rv){true, i, (double)i}; }
static rv RD(double d) { return (rv){false, 0, d}; }

static int64_t wrapi(int64_t v, od_dtype dt) { return wrap_to(v, dt); }

/* Float -> integer as torch casts on x86 (via int32 for <= 32-bit dtypes). */
static int64_t f2i(double d, od_dtype dt)
{
    if (dt == OD_BOOL)
        return d != 0;
    if (dt == OD_INT64)
        return (d >= -9223372036854775808.0 && d < 9223372036854775808.0) ? (int64_t)d : INT64_MIN;
    int64_t v = (d > -2147483649.0 && d < 2147483648.0) ? (int64_t)d : (int64_t)INT32_MIN;
    return wrapi(v, dt);
}

static double round_fp(double d, od_dtype dt)
{
    switch (dt) {
    case OD_FLOAT16: return to_half_value(d);
    case OD_BFLOAT16: return to_bf16_value(d);
    case OD_FLOAT32: return (double)(float)d;
    default: return d;
    }
}

static rv ref_cast(rv v, od_dtype to)
{
    if (!isflt(to))
        return RI(v.is_int ? wrapi(v.i, to) : f2i(v.d, to));
    if (v.is_int) /* int -> double is direct; -> half goes through float, like c10::Half(float) */
        return RD(to == OD_FLOAT64 ? (double)v.i : round_fp((double)(float)v.i, to));
    return RD(round_fp(v.d, to));
}

static rv get_rv(const od_tensor *t, const int64_t *idx)
{
    return isflt(t->dtype) ? RD(get_d(t, idx)) : RI(get_i(t, idx));
}

/* ---- random inputs ---------------------------------------------------------------------- */

static int64_t int_min_of(od_dtype dt)
{
    switch (dt) {
    case OD_BOOL: case OD_UINT8: return 0;
    case OD_INT8: return INT8_MIN;
    case OD_INT16: return INT16_MIN;
    case OD_INT32: return INT32_MIN;
    default: return INT64_MIN;
    }
}
static int64_t int_max_of(od_dtype dt)
{
    switch (dt) {
    case OD_BOOL: return 1;
    case OD_UINT8: return 255;
    case OD_INT8: return INT8_MAX;
    case OD_INT16: return INT16_MAX;
    case OD_INT32: return INT32_MAX;
    default: return INT64_MAX;
    }
}

/* Random value of dt; `special` percent of them NaN/Inf/zero/huge/tiny for
 * floats, or extremes (min, max, -1, 0, 1) for integers. */
static rv gen_value(od_dtype dt, int special)
{
    if ((int)(rng_next() % 100) < special) {
        if (isflt(dt)) {
            static const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-3, 50, -50, 100, -100, 1e4, -1e-4};
            return RD(round_fp(sp[rng_next() % (sizeof sp / sizeof sp[0])], dt));
        }
        switch (rng_next() % 5) {
        case 0: return RI(int_min_of(dt));
        case 1: return RI(int_max_of(dt));
        case 2: return RI(dt == OD_BOOL || dt == OD_UINT8 ? 0 : -1);
        case 3: return RI(0);
        default: return RI(1);
        }
    }
    if (isflt(dt))
        return RD(rand_value(dt));
    return RI((int64_t)rand_value(dt));
}

static void put_rv(od_tensor *t, const int64_t *idx, rv v)
{
    if (v.is_int)
        set_i(t, idx, v.i);
    else
        set_d(t, idx, v.d);
}

/* Fills every element of t (a view: writes go through its strides). */
static void fill_gen(od_tensor *t, int special, int64_t lo, int64_t hi, bool nonzero)
{
    if (od_tensor_numel(t) == 0)
        return;
    int64_t idx[OD_MAX_DIMS] = {0};
    do {
        rv v;
        if (lo <= hi) /* bounded integers (exponents) */
            v = isflt(t->dtype) ? RD(round_fp((double)rng_int(lo, hi), t->dtype)) : RI(rng_int(lo, hi));
        else
            v = gen_value(t->dtype, special);
        if (nonzero && ((v.is_int && v.i == 0) || (!v.is_int && v.d == 0)))
            v = v.is_int ? RI(1) : RD(1.0);
        put_rv(t, idx, v);
    } while (next_index(idx, t->sizes, t->ndim));
}

/* A tensor of the given shape with layout 0 contiguous, 1 permuted/strided,
 * 2 expanded (stride-0 dims; read-only use). Values from fill_gen. */
static od_tensor *gen_tensor(const int64_t *sizes, int nd, od_dtype dt, int layout, int special)
{
    if (layout == 2 && nd > 0) {
        int64_t small[OD_MAX_DIMS];
        for (int d = 0; d < nd; d++)
            small[d] = rng_next() % 2 ? 1 : sizes[d];
        od_tensor *base = t_rand_layout(small, nd, dt, 1);
        fill_gen(base, special, 1, 0, false);
        od_tensor *e = NULL;
        OKCALL(od_tensor_expand(base, sizes, nd, &e, &e_));
        od_tensor_release(base);
        return e;
    }
    od_tensor *t = t_rand_layout(sizes, nd, dt, layout);
    fill_gen(t, special, 1, 0, false);
    return t;
}

static int rand_layout(void) { return (int)(rng_next() % 3); }

/* Random output shape: rank 0-4, sizes 0-5 (0 rarely); big => ~40-100K elements. */
static int rand_shape(int64_t *sizes, bool big)
{
    int nd = (int)rng_int(0, 4);
    if (big) {
        nd = (int)rng_int(1, 3);
        int64_t target = rng_int(40000, 100000);
        for (int d = 0; d < nd; d++)
            sizes[d] = d == nd - 1 ? target : rng_int(1, 4);
        if (nd > 1) {
            int64_t rest = 1;
            for (int d = 0; d < nd - 1; d++)
                rest *= sizes[d];
            sizes[nd - 1] = target / rest;
        }
        return nd;
    }
    for (int d = 0; d < nd; d++)
        sizes[d] = rng_next() % 12 == 0 ? 0 : rng_int(1, 5);
    return nd;
}

/* A shape that broadcasts to out: leading dims dropped, some dims set to 1. */
static int bcast_shape(const int64_t *out, int nd, int64_t *s)
{
    int drop = nd > 0 && rng_next() % 3 == 0 ? (int)rng_int(0, nd) : 0;
    int n = nd - drop;
    for (int d = 0; d < n; d++)
        s[d] = rng_next() % 3 == 0 ? 1 : out[d + drop];
    return n;
}

static od_dtype rand_dtype(void) { return PICK(ALL_DTS); }

/* ---- comparison helpers ------------------------------------------------------------------ */

static double abs_floor(od_dtype dt)
{
    switch (dt) {
    case OD_FLOAT16: return ldexp(1.0, -23);
    case OD_BFLOAT16: return 1e-37;
    case OD_FLOAT32: return 1e-37;
    default: return 1e-300;
    }
}

/* got (in dtype dt) matches the unrounded reference r within ulps * eps * mag. */
static bool fp_match(double got, double r, od_dtype dt, double ulps, double mag)
{
    if (isnan(r))
        return isnan(got);
    double rr = round_fp(r, dt);
    if (isinf(rr) || isinf(r))
        return got == rr || got == r || (isinf(got) && fabs(r) > 1e300) ||
               (!isinf(got) && fabs(got - r) <= ulps * dtype_eps(dt) * fabs(r));
    if (got == rr)
        return true;
    double m = fmax(fabs(r), mag);
    return fabs(got - r) <= ulps * dtype_eps(dt) * m + abs_floor(dt);
}

static void idx_str(const int64_t *idx, int nd, char *buf, size_t cap)
{
    od_shape_print(idx, nd, buf, cap);
}

/* Index of out element idx into a broadcast operand t (aligned right). */
static void bidx(const od_tensor *t, const int64_t *idx, int nd, int64_t *ti)
{
    for (int d = 0; d < t->ndim; d++) {
        int od = d + nd - t->ndim;
        ti[d] = t->sizes[d] == 1 ? 0 : idx[od];
    }
}

/* An argument: a tensor, or a Python number. */
typedef struct arg {
    od_tensor *t; /* NULL: a number */
    int kind;     /* P_BOOL / P_INT / P_FLOAT for numbers */
    rv v;
} arg;

static od_value arg_value(const arg *a)
{
    if (a->t)
        return tv(a->t);
    if (a->kind == P_BOOL)
        return od_bool(a->v.i != 0);
    if (a->kind == P_INT)
        return od_int(a->v.i);
    return od_double(a->v.d);
}

static part arg_part(const arg *a)
{
    if (a->t)
        return (part){P_TENSOR, a->t->dtype, a->t->ndim};
    return (part){a->kind, UNDEF, 0};
}

/* The argument's value at output index idx. */
static rv arg_at(const arg *a, const int64_t *idx, int nd)
{
    if (!a->t)
        return a->v;
    int64_t ti[OD_MAX_DIMS];
    bidx(a->t, idx, nd, ti);
    return get_rv(a->t, ti);
}

static arg scalar_arg(od_dtype like, int special)
{
    arg a = {NULL, P_INT, RI(0)};
    switch (rng_next() % 3) {
    case 0:
        a.kind = P_BOOL;
        a.v = RI((int64_t)(rng_next() & 1));
        break;
    case 1:
        a.kind = P_INT;
        a.v = gen_value(isflt(like) ? OD_INT16 : like == OD_BOOL ? OD_INT8 : like, special);
        if (!a.v.is_int)
            a.v = RI((int64_t)a.v.d);
        break;
    default:
        a.kind = P_FLOAT;
        a.v = gen_value(OD_FLOAT64, special);
        break;
    }
    return a;
}

static arg tensor_arg(const int64_t *out, int nd, od_dtype dt, int special)
{
    int64_t s[OD_MAX_DIMS];
    int n = bcast_shape(out, nd, s);
    arg a = {gen_tensor(s, n, dt, rand_layout(), special), P_TENSOR, RI(0)};
    return a;
}

static void arg_release(arg *a) { od_tensor_release(a->t); }

/* Broadcast shape of the tensor arguments (numbers are 0-dim); false when
 * they do not broadcast. Written here, independently of the library. */
static bool ref_bshape(const arg *const *as, int n, int64_t *out, int *nd)
{
    *nd = 0;
    for (int k = 0; k < n; k++) {
        const od_tensor *t = as[k] ? as[k]->t : NULL;
        if (!t)
            continue;
        int m = t->ndim > *nd ? t->ndim : *nd;
        int64_t r[OD_MAX_DIMS];
        for (int d = 0; d < m; d++) {
            int da = d - (m - *nd), db = d - (m - t->ndim);
            int64_t x = da >= 0 ? out[da] : 1, y = db >= 0 ? t->sizes[db] : 1;
            if (x != y && x != 1 && y != 1)
                return false;
            r[d] = x == 1 ? y : x;
        }
        memcpy(out, r, sizeof(int64_t) * (size_t)m);
        *nd = m;
    }
    return true;
}

/* ---- binary arithmetic ------------------------------------------------------------------ */

typedef enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_DIVT, OP_DIVF, OP_POW, OP_MAX, OP_MIN } binop;
static const char *const BNAME[] = {"add", "sub", "mul", "div", "div_trunc", "div_floor", "pow", "maximum", "minimum"};

static uint64_t upow(uint64_t b, int64_t e)
{
    uint64_t r = 1;
    for (int64_t k = 0; k < e; k++)
        r *= b;
    return r;
}

/* Reference of one element in compute dtype ct. *zero: integer division by 0. */
/* v rounded to a 16-bit float dtype, as c10::Half / c10::BFloat16 arithmetic
 * rounds each operation; other dtypes unchanged. */
static double r16(od_dtype ct, double v)
{
    if (ct == OD_FLOAT16)
        return od_half_to_float(od_float_to_half((float)v));
    if (ct == OD_BFLOAT16)
        return od_bf16_to_float(od_float_to_bf16((float)v));
    return v;
}

static rv ref_binary(binop op, rv a, rv b, rv alpha, od_dtype ct, bool *zero)
{
    if (!isflt(ct)) {
        uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i, al = (uint64_t)(alpha.is_int ? alpha.i : (int64_t)alpha.d);
        switch (op) {
        case OP_ADD: return RI(wrapi((int64_t)(x + al * y), ct));
        case OP_SUB: return RI(wrapi((int64_t)(x - al * y), ct));
        case OP_MUL: return RI(wrapi((int64_t)(x * y), ct));
        case OP_DIVT:
        case OP_DIVF: {
            if (b.i == 0) {
                *zero = true;
                return RI(0);
            }
            if (b.i == -1)
                return RI(wrapi((int64_t)(0 - x), ct));
            int64_t q = a.i / b.i;
            if (op == OP_DIVF && a.i % b.i != 0 && ((a.i < 0) != (b.i < 0)))
                q--;
            return RI(wrapi(q, ct));
        }
        case OP_POW:
            if (b.i < 0)
                return RI(a.i == 1 ? 1 : a.i == -1 ? ((b.i % 2) ? -1 : 1) : 0);
            return RI(wrapi((int64_t)upow(x, b.i), ct));
        case OP_MAX: return RI(a.i > b.i ? a.i : b.i);
        case OP_MIN: return RI(a.i < b.i ? a.i : b.i);
        default: return RI(0);
        }
    }
    double x = a.d, y = b.d, al = alpha.is_int ? (double)alpha.i : alpha.d;
    switch (op) {
    case OP_ADD: return RD(x + r16(ct, r16(ct, al) * y)); /* ATen rounds alpha and alpha * y on halves */
    case OP_SUB: return RD(x - r16(ct, r16(ct, al) * y));
    case OP_MUL: return RD(x * y);
    case OP_DIV: return RD(x / y);
    case OP_DIVT: /* torch: trunc of the quotient rounded in the dtype (16 bits for halves) */
        return RD(ct == OD_FLOAT64 ? trunc(x / y) : (double)truncf((float)r16(ct, (float)x / (float)y)));
    case OP_DIVF:
        if (y == 0)
            return RD(x / y);
        if (isinf(x) || isnan(x) || isnan(y))
            return RD(NAN);
        if (isinf(y)) /* ATen: fmod(a, inf) = a, then one is subtracted for opposite signs */
            return RD(x == 0 ? copysign(0.0, x / y) : ((x < 0) != (y < 0) ? -1.0 : copysign(0.0, x / y)));
        {
            long double q = floorl((long double)x / (long double)y);
            return RD(q == 0 ? copysign(0.0, x / y) : (double)q);
        }
    case OP_POW: return RD(pow(x, y));
    case OP_MAX: return RD(isnan(x) || isnan(y) ? NAN : fmax(x, y));
    case OP_MIN: return RD(isnan(x) || isnan(y) ? NAN : fmin(x, y));
    }
    return RD(0);
}

static od_opid binop_id(binop op, bool scalar, int div_mode_overload)
{
    switch (op) {
    case OP_ADD: return scalar ? OD_OPID_add_Scalar : OD_OPID_add_Tensor;
    case OP_SUB: return scalar ? OD_OPID_sub_Scalar : OD_OPID_sub_Tensor;
    case OP_MUL: return scalar ? OD_OPID_mul_Scalar : OD_OPID_mul_Tensor;
    case OP_DIV:
        if (div_mode_overload)
            return scalar ? OD_OPID_div_Scalar_mode : OD_OPID_div_Tensor_mode;
        return scalar ? OD_OPID_div_Scalar : OD_OPID_div_Tensor;
    case OP_DIVT:
    case OP_DIVF: return scalar ? OD_OPID_div_Scalar_mode : OD_OPID_div_Tensor_mode;
    case OP_POW: return scalar ? OD_OPID_pow_Tensor_Scalar : OD_OPID_pow_Tensor_Tensor;
    case OP_MAX: return OD_OPID_maximum;
    default: return OD_OPID_minimum;
    }
}

/* Runs one random case of op; returns false when the combination is one
 * torch rejects (the caller then checks that the call fails). */
static void binary_case(binop op, bool big)
{
    int64_t out[OD_MAX_DIMS];
    int nd = rand_shape(out, big);
    bool scalar = (op != OP_MAX && op != OP_MIN) && rng_next() % 3 == 0;
    bool pow_scalar_base = op == OP_POW && !scalar && rng_next() % 5 == 0;
    int special = rng_next() % 2 ? 0 : 8;
    arg a, b;
    a = tensor_arg(out, nd, rand_dtype(), special);
    if (pow_scalar_base) {
        arg_release(&a);
        a = scalar_arg(OD_FLOAT32, 0);
    }
    b = scalar ? scalar_arg(a.t->dtype, special) : tensor_arg(out, nd, rand_dtype(), special);
    if (rng_next() % 4 == 0 && !scalar && a.t && nd > 0) { /* 0-dim tensor operand */
        arg_release(&b);
        b.t = gen_tensor(NULL, 0, rand_dtype(), 0, special);
    }
    part ps[2] = {arg_part(&a), arg_part(&b)};
    od_dtype rt = ref_result_type(ps, 2);
    /* Combinations torch rejects are covered by the error tests. */
    bool a_bool = a.t ? a.t->dtype == OD_BOOL : a.kind == P_BOOL;
    bool b_bool = b.t ? b.t->dtype == OD_BOOL : b.kind == P_BOOL;
    if ((op == OP_SUB && (a_bool || b_bool)) || ((op == OP_DIVT || op == OP_DIVF || op == OP_POW) && rt == OD_BOOL) ||
        (op == OP_POW && scalar && !isflt(a.t->dtype) && b.kind == P_INT && b.v.i < 0)) {
        arg_release(&a);
        arg_release(&b);
        return;
    }
    od_dtype ct = rt, ot = rt;
    if (op == OP_DIV && !isflt(rt))
        ct = ot = OD_FLOAT32;
    /* Integer exponents stay small; integer divisors non-zero (zero is its own test). */
    if (!isflt(ct) && b.t && op == OP_POW)
        fill_gen(b.t, 0, 0, 12, false);
    if (!isflt(ct) && a.t && op == OP_POW && a.t->dtype == OD_BOOL)
        fill_gen(a.t, 0, 0, 1, false);
    if (!isflt(ct) && (op == OP_DIVT || op == OP_DIVF)) {
        if (b.t) /* small values stay non-zero after the cast to ct */
            fill_gen(b.t, 0, b.t->dtype == OD_UINT8 || b.t->dtype == OD_BOOL ? 1 : -100, 100, true);
        else if (b.v.i == 0 && b.v.is_int)
            b.v = RI(b.kind == P_BOOL ? 1 : 3);
    }
    if (op == OP_POW && scalar && !isflt(ct) && b.v.i < 0)
        b.v = RI(2);
    if (op == OP_POW && scalar && !isflt(ct))
        b.v = RI(b.v.i % 13 < 0 ? -(b.v.i % 13) : b.v.i % 13);
    /* alpha: bool only for bool results, floats only for floating results */
    arg alpha = {NULL, P_INT, RI(1)};
    if (op == OP_ADD || op == OP_SUB) {
        int r = (int)(rng_next() % 3);
        if (ct == OD_BOOL)
            alpha = r == 0 ? (arg){NULL, P_BOOL, RI(rng_next() & 1)} : (arg){NULL, P_INT, RI(rng_int(0, 2))};
        else if (isflt(ct) && r == 0)
            alpha = (arg){NULL, P_FLOAT, RD(rng_uniform(-3, 3))};
        else
            alpha = (arg){NULL, P_INT, RI(rng_int(-3, 3))};
    }
    int mode_overload = op == OP_DIV && rng_next() % 2;
    od_value args[3] = {arg_value(&a), arg_value(&b), od_none()};
    int nargs = 2;
    if (op == OP_ADD || op == OP_SUB) {
        args[2] = arg_value(&alpha);
        nargs = 3;
    } else if (op == OP_DIVT || op == OP_DIVF || mode_overload) {
        args[2] = op == OP_DIVT ? od_str("trunc") : op == OP_DIVF ? od_str("floor") : od_none();
        nargs = 3;
    }
    od_opid id = pow_scalar_base ? OD_OPID_pow_Scalar : binop_id(op, scalar, mode_overload);
    od_tensor *o = call1_ok(id, args, nargs);
    const arg *ab[2] = {&a, &b};
    TCHECK(ref_bshape(ab, 2, out, &nd), "test bug: shapes do not broadcast");
    char sb[128], sw[128];
    TCHECK(same_shape(o, out, nd), "%s: shape %s, want %s", BNAME[op], shape_str(o->sizes, o->ndim, sb, sizeof sb),
           shape_str(out, nd, sw, sizeof sw));
    TCHECK(o->dtype == ot, "%s(%s, %s): dtype %s, want %s", BNAME[op],
           a.t ? dtn(a.t->dtype) : "number", b.t ? dtn(b.t->dtype) : "number", dtn(o->dtype), dtn(ot));
    if (od_tensor_numel(o) > 0) {
        int64_t idx[OD_MAX_DIMS] = {0};
        double ulps = op == OP_POW ? 8 : (op == OP_ADD || op == OP_SUB) ? 4 : 2;
        do {
            rv x = ref_cast(arg_at(&a, idx, nd), ct), y = ref_cast(arg_at(&b, idx, nd), ct);
            /* pow.Tensor_Scalar on float32 keeps the exponent a double on ATen's
             * scalar path (std::pow) and takes it as a float on the vectorized one
             * (Sleef's powf): either reference, by the element's place */
            bool pow32 = op == OP_POW && id == OD_OPID_pow_Tensor_Scalar && ct == OD_FLOAT32;
            rv yf = y;
            if (pow32)
                y = ref_cast(arg_at(&b, idx, nd), OD_FLOAT64);
            bool zero = false;
            rv r = ref_binary(op, x, y, alpha.v, ct, &zero);
            int64_t oi[OD_MAX_DIMS];
            memcpy(oi, idx, sizeof oi);
            rv g = get_rv(o, oi);
            char is[64];
            idx_str(idx, nd, is, sizeof is);
            if (!isflt(ot)) {
                int64_t want = ct == OD_BOOL ? (r.i != 0) : r.i;
                TCHECK(g.i == want, "%s %s at %s: %" PRId64 " op %" PRId64 " = %" PRId64 ", want %" PRId64,
                       BNAME[op], dtn(ct), is, x.i, y.i, g.i, want);
            } else {
                double mag = fmax(fabs(x.d), fabs(y.d) * (alpha.v.is_int ? fabs((double)alpha.v.i) : fabs(alpha.v.d)));
                if (op == OP_MUL || op == OP_DIV || op == OP_POW || op == OP_DIVT || op == OP_DIVF || op == OP_MAX || op == OP_MIN)
                    mag = 0;
                bool ok = fp_match(g.d, r.d, ot, ulps, isfinite(mag) ? mag : 0);
                if (!ok && pow32) {
                    bool zf = false;
                    ok = fp_match(g.d, ref_binary(op, x, yf, alpha.v, ct, &zf).d, ot, ulps, 0);
                }
                TCHECK(ok, "%s %s at %s: %.17g op %.17g = %.17g, want %.17g", BNAME[op], dtn(ct), is, x.d, y.d,
                       g.d, r.d);
            }
        } while (next_index(idx, out, nd));
    }
    od_tensor_release(o);
    arg_release(&a);
    arg_release(&b);
}

#define BINARY_TEST(name, op, reps)                            \
    Test(cpu_ew, name)                                         \
    {                                                          \
        for (int r = 0; r < (reps); r++)                       \
            binary_case(op, r % 25 == 24);                     \
    }
BINARY_TEST(add_random, OP_ADD, 300)
BINARY_TEST(sub_random, OP_SUB, 300)
BINARY_TEST(mul_random, OP_MUL, 300)
BINARY_TEST(div_true_random, OP_DIV, 300)
BINARY_TEST(div_trunc_random, OP_DIVT, 300)
BINARY_TEST(div_floor_random, OP_DIVF, 300)
BINARY_TEST(pow_random, OP_POW, 300)
BINARY_TEST(maximum_random, OP_MAX, 200)
BINARY_TEST(minimum_random, OP_MIN, 200)

/* ---- comparisons ------------------------------------------------------------------------- */

static const od_opid CMP_T[6] = {OD_OPID_eq_Tensor, OD_OPID_ne_Tensor, OD_OPID_lt_Tensor,
                                 OD_OPID_le_Tensor, OD_OPID_gt_Tensor, OD_OPID_ge_Tensor};
static const od_opid CMP_S[6] = {OD_OPID_eq_Scalar, OD_OPID_ne_Scalar, OD_OPID_lt_Scalar,
                                 OD_OPID_le_Scalar, OD_OPID_gt_Scalar, OD_OPID_ge_Scalar};

static bool ref_cmp(int k, rv a, rv b)
{
    if (a.is_int && b.is_int) {
        switch (k) {
        case 0: return a.i == b.i;
        case 1: return a.i != b.i;
        case 2: return a.i < b.i;
        case 3: return a.i <= b.i;
        case 4: return a.i > b.i;
        default: return a.i >= b.i;
        }
    }
    switch (k) {
    case 0: return a.d == b.d;
    case 1: return a.d != b.d;
    case 2: return a.d < b.d;
    case 3: return a.d <= b.d;
    case 4: return a.d > b.d;
    default: return a.d >= b.d;
    }
}

Test(cpu_ew, comparisons_random)
{
    for (int rep = 0; rep < 600; rep++) {
        int k = (int)(rng_next() % 6);
        int64_t out[OD_MAX_DIMS];
        int nd = rand_shape(out, rep % 50 == 49);
        bool scalar = rng_next() % 3 == 0;
        int special = rng_next() % 2 ? 0 : 10;
        arg a = tensor_arg(out, nd, rand_dtype(), special);
        arg b = scalar ? scalar_arg(a.t->dtype, special) : tensor_arg(out, nd, rand_dtype(), special);
        if (!scalar && rng_next() % 3 == 0) { /* equal values appear: compare a with itself, cast */
            arg_release(&b);
            b.t = a.t;
            od_tensor_retain(b.t);
        }
        part ps[2] = {arg_part(&a), arg_part(&b)};
        od_dtype ct = ref_result_type(ps, 2);
        od_value args[2] = {arg_value(&a), arg_value(&b)};
        od_tensor *o = call1_ok(scalar ? CMP_S[k] : CMP_T[k], args, 2);
        const arg *ab[2] = {&a, &b};
        TCHECK(ref_bshape(ab, 2, out, &nd), "test bug: shapes do not broadcast");
        TCHECK(o->dtype == OD_BOOL && same_shape(o, out, nd), "compare %d: dtype %s", k, dtn(o->dtype));
        if (od_tensor_numel(o) > 0) {
            int64_t idx[OD_MAX_DIMS] = {0};
            do {
                rv x = ref_cast(arg_at(&a, idx, nd), ct), y = ref_cast(arg_at(&b, idx, nd), ct);
                bool want = ref_cmp(k, x, y);
                TCHECK(get_i(o, idx) == want, "compare %d in %s: %.17g vs %.17g gave %d", k, dtn(ct), x.d, y.d,
                       (int)get_i(o, idx));
            } while (next_index(idx, out, nd));
        }
        od_tensor_release(o);
        arg_release(&a);
        arg_release(&b);
    }
}

/* ---- where ---------------------------------------------------------------------------------- */

/* c10's overflows<To, From> for a Scalar converted to dt (torch raises
 * "value cannot be converted to type ... without overflow" when false):
 * floating dtypes take any non-finite value and finite ones up to their
 * largest; integers their range, uint8 also -255..-1 (they wrap). */
static bool ref_scalar_fits(const arg *a, od_dtype dt)
{
    if (a->t || a->kind == P_BOOL || dt == OD_BOOL)
        return true;
    if (isflt(dt)) {
        double lim = dt == OD_FLOAT16 ? 65504.0 : dt == OD_BFLOAT16 ? 3.3895313892515355e38
                     : dt == OD_FLOAT32 ? 3.4028234663852886e38 : INFINITY;
        double d = a->v.is_int ? (double)a->v.i : a->v.d;
        return !isfinite(d) || fabs(d) <= lim;
    }
    int64_t lo = dt == OD_UINT8 ? -255 : int_min_of(dt), hi = int_max_of(dt);
    return a->v.is_int && a->v.i >= lo && a->v.i <= hi;
}

Test(cpu_ew, where_all_overloads)
{
    static const od_opid W[4] = {OD_OPID_where_self, OD_OPID_where_ScalarOther, OD_OPID_where_ScalarSelf,
                                 OD_OPID_where_Scalar};
    for (int rep = 0; rep < 400; rep++) {
        int ov = (int)(rng_next() % 4);
        int64_t out[OD_MAX_DIMS];
        int nd = rand_shape(out, rep % 50 == 49);
        arg c = tensor_arg(out, nd, rng_next() % 4 ? OD_BOOL : OD_UINT8, 0);
        if (c.t->dtype == OD_UINT8) /* any nonzero byte is true (2 and 3 too, as in torch's cond ? a : b) */
            fill_gen(c.t, 0, 0, 3, false);
        int special = rng_next() % 2 ? 0 : 10;
        od_dtype d1 = rand_dtype(), d2 = rand_dtype();
        arg a = (ov == 0 || ov == 1) ? tensor_arg(out, nd, d1, special) : scalar_arg(d1, special);
        arg b = (ov == 0 || ov == 2) ? tensor_arg(out, nd, d2, special) : scalar_arg(d2, special);
        part ps[2] = {arg_part(&a), arg_part(&b)};
        od_dtype rt = ref_result_type(ps, 2);
        od_value args[3] = {tv(c.t), arg_value(&a), arg_value(&b)};
        if (!ref_scalar_fits(&a, rt) || !ref_scalar_fits(&b, rt)) { /* torch raises */
            call_fails(W[ov], args, 3, OD_EINVAL, "without overflow");
            arg_release(&a);
            arg_release(&b);
            arg_release(&c);
            continue;
        }
        od_tensor *o = call1_ok(W[ov], args, 3);
        /* the output shape broadcasts all three */
        int64_t want[OD_MAX_DIMS];
        int wn;
        const arg *cab[3] = {&c, &a, &b};
        TCHECK(ref_bshape(cab, 3, want, &wn), "test bug: shapes do not broadcast");
        TCHECK(same_shape(o, want, wn) && o->dtype == rt, "where overload %d: dtype %s, want %s", ov, dtn(o->dtype),
               dtn(rt));
        if (od_tensor_numel(o) > 0) {
            int64_t idx[OD_MAX_DIMS] = {0};
            do {
                rv m = arg_at(&c, idx, wn);
                rv src = m.i ? arg_at(&a, idx, wn) : arg_at(&b, idx, wn);
                rv w = ref_cast(src, rt);
                rv g = get_rv(o, idx);
                TCHECK(isflt(rt) ? (g.d == w.d || (isnan(g.d) && isnan(w.d))) : g.i == w.i,
                       "where %s: got %.17g want %.17g", dtn(rt), g.d, w.d);
            } while (next_index(idx, want, wn));
        }
        od_tensor_release(o);
        arg_release(&a);
        arg_release(&b);
        arg_release(&c);
    }
}

/* where with each source either read in place or broadcast along the loop
 * (stride 0: an expanded tensor, as the gradient a backward pass starts
 * from, or a Scalar): the four patterns, every element size, lengths in
 * and past the vector body with its tail, half-true conditions. Each
 * output element must be the chosen source's, byte for byte. */
Test(cpu_ew, where_broadcast_sources)
{
    static const od_dtype DT[4] = {OD_UINT8, OD_INT16, OD_FLOAT32, OD_FLOAT64};
    for (int k = 0; k < 4; k++)
        for (int pat = 0; pat < 4; pat++)
            for (int rep = 0; rep < 12; rep++) {
                int64_t n = rep < 10 ? rng_int(0, 70) : rng_int(1000, 5000), one = 1;
                size_t es = od_dtype_size(DT[k]);
                od_tensor *c = t_rand(&n, 1, OD_BOOL), *src[2];
                for (int j = 0; j < 2; j++) {
                    if ((pat >> j) & 1) {
                        od_tensor *b1 = t_rand(&one, 1, DT[k]);
                        OKCALL(od_tensor_expand(b1, &n, 1, &src[j], &e_));
                        od_tensor_release(b1);
                    } else {
                        src[j] = t_rand(&n, 1, DT[k]);
                    }
                }
                od_value args[3] = {od_tensor_v(c), od_tensor_v(src[0]), od_tensor_v(src[1])};
                od_tensor *o = call1_ok(OD_OPID_where_self, args, 3);
                TCHECK(same_shape(o, &n, 1) && o->dtype == DT[k], "where: shape or dtype");
                const uint8_t *m = od_tensor_data(c);
                for (int64_t i = 0; i < n; i++) {
                    const od_tensor *from = m[i] ? src[0] : src[1];
                    const char *want = (const char *)od_tensor_data(from) + (size_t)(i * from->strides[0]) * es;
                    TCHECK(!memcmp((const char *)od_tensor_data(o) + (size_t)i * es, want, es),
                           "where %s, sources %s/%s, n %lld: element %lld is not the %s source's",
                           dtn(DT[k]), pat & 1 ? "broadcast" : "in place", pat & 2 ? "broadcast" : "in place",
                           (long long)n, (long long)i, m[i] ? "first" : "second");
                }
                od_tensor_release(o);
                od_tensor_release(c);
                od_tensor_release(src[0]);
                od_tensor_release(src[1]);
            }
}

/* ---- unary -------------------------------------------------------------------------------------- */

typedef enum { U_NEG, U_ABS, U_RELU, U_EXP, U_LOG, U_SQRT, U_RSQRT, U_SIN, U_COS, U_TANH, U_SIGMOID, U_GELU,
               U_GELU_TANH, U_SILU, NUM_UOPS } uop;
static const char *const UNAME[] = {"neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "sin", "cos",
                                    "tanh", "sigmoid", "gelu", "gelu_tanh", "silu"};
static const od_opid UID[] = {OD_OPID_neg, OD_OPID_abs, OD_OPID_relu, OD_OPID_exp, OD_OPID_log, OD_OPID_sqrt,
                              OD_OPID_rsqrt, OD_OPID_sin, OD_OPID_cos, OD_OPID_tanh, OD_OPID_sigmoid,
                              OD_OPID_gelu, OD_OPID_gelu, OD_OPID_silu};

static double ref_unary_f(uop op, double x)
{
    switch (op) {
    case U_NEG: return -x;
    case U_ABS: return fabs(x);
    case U_RELU: return isnan(x) ? x : x < 0 ? 0.0 : x;
    case U_EXP: return exp(x);
    case U_LOG: return log(x);
    case U_SQRT: return sqrt(x);
    case U_RSQRT: return 1.0 / sqrt(x);
    case U_SIN: return sin(x);
    case U_COS: return cos(x);
    case U_TANH: return tanh(x);
    case U_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case U_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case U_GELU_TANH: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    default: return x / (1.0 + exp(-x));
    }
}

static void unary_case(uop op, bool big)
{
    int64_t sz[OD_MAX_DIMS];
    int nd = rand_shape(sz, big);
    bool keeps = op == U_NEG || op == U_ABS || op == U_RELU;
    bool float_only = op >= U_GELU;
    od_dtype dt = rand_dtype();
    if ((dt == OD_BOOL && keeps) || (float_only && !isflt(dt)))
        dt = PICK(FLOAT_DTS);
    int special = rng_next() % 2 ? 0 : 10;
    od_tensor *x = gen_tensor(sz, nd, dt, rand_layout(), special);
    od_dtype ot = keeps || isflt(dt) ? dt : OD_FLOAT32;
    od_value args[2] = {tv(x), od_str(op == U_GELU_TANH ? "tanh" : "none")};
    od_tensor *o = call1_ok(UID[op], args, op == U_GELU || op == U_GELU_TANH ? 2 : 1);
    TCHECK(o->dtype == ot && same_shape(o, sz, nd), "%s(%s): dtype %s, want %s", UNAME[op], dtn(dt), dtn(o->dtype),
           dtn(ot));
    if (od_tensor_numel(o) > 0) {
        int64_t idx[OD_MAX_DIMS] = {0};
        do {
            rv v = ref_cast(get_rv(x, idx), ot);
            rv g = get_rv(o, idx);
            if (!isflt(ot)) {
                int64_t w = op == U_NEG ? (int64_t)(0 - (uint64_t)v.i) : op == U_ABS ? (v.i < 0 ? (int64_t)(0 - (uint64_t)v.i) : v.i)
                                                                                  : (v.i < 0 ? 0 : v.i);
                w = wrapi(w, ot);
                TCHECK(g.i == w, "%s(%s %" PRId64 ") = %" PRId64 ", want %" PRId64, UNAME[op], dtn(ot), v.i, g.i, w);
            } else {
                double r = ref_unary_f(op, v.d);
                double ulps = keeps ? 0.5 : op == U_SIN || op == U_COS ? 4 : 8;
                /* gelu/silu near their zero crossings lose relative accuracy; scale by |x| */
                double mag = (op == U_GELU || op == U_GELU_TANH || op == U_SILU) && isfinite(v.d) ? fabs(v.d) * 0.1 : 0;
                TCHECK(fp_match(g.d, r, ot, ulps, mag), "%s(%s %.17g) = %.17g, want %.17g", UNAME[op], dtn(ot), v.d,
                       g.d, r);
            }
        } while (next_index(idx, sz, nd));
    }
    od_tensor_release(o);
    od_tensor_release(x);
}

Test(cpu_ew, unary_random_all_ops)
{
    for (int rep = 0; rep < 1400; rep++)
        unary_case((uop)(rep % NUM_UOPS), rep % 70 >= 56);
}

/* exp/sigmoid over the whole float32 range, where the vectorised exp
 * changes regime (overflow, subnormal results, underflow to 0). */
Test(cpu_ew, exp_sigmoid_float32_extremes)
{
    int64_t n = 70001;
    od_tensor *x = t_empty(&n, 1, OD_FLOAT32, CPU);
    float *p = od_tensor_data(x);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(-110.0 + 220.0 * (double)i / (double)(n - 1)) + (float)rng_uniform(-1e-3, 1e-3);
    p[0] = NAN;
    p[1] = INFINITY;
    p[2] = -INFINITY;
    for (int k = 0; k < 3; k++) {
        uop op = k == 0 ? U_EXP : k == 1 ? U_SIGMOID : U_SILU;
        od_value a = tv(x);
        od_tensor *o = call1_ok(UID[op], &a, 1);
        const float *q = od_tensor_data(o);
        for (int64_t i = 0; i < n; i++) {
            double r = ref_unary_f(op, p[i]);
            /* silu = x / (1 + e^-x): like ATen, e^-x overflows below -88.7 and gives -0 */
            bool flushed = op == U_SILU && p[i] < -88.72f && q[i] == 0;
            TCHECK(flushed || fp_match(q[i], r, OD_FLOAT32, 4, 0),
                   "%s(%.9g) = %.9g, want %.9g", UNAME[op], p[i], q[i], r);
        }
        od_tensor_release(o);
    }
    od_tensor_release(x);
}

/* op over tensors of each length 2..40 drawn from p[0..n) gives q's values
 * bit for bit: whichever vector lane or scalar tail computes an element,
 * the result is the same. extra: a second argument (none: no argument). */
static void tails_agree(od_opid op, od_value extra, const float *p, const float *q, int64_t n)
{
    for (int64_t len = 2; len <= 40; len++) {
        od_tensor *xs = t_empty(&len, 1, OD_FLOAT32, CPU);
        float *ps = od_tensor_data(xs);
        for (int64_t i = 0; i < len; i++)
            ps[i] = p[(len * 7919 + i * 104729) % n];
        od_value as[2] = {tv(xs), extra};
        od_tensor *os = call1_ok(op, as, extra.tag == OD_T_NONE ? 1 : 2);
        const float *qs = od_tensor_data(os);
        for (int64_t i = 0; i < len; i++) {
            const float *qi = q + (len * 7919 + i * 104729) % n;
            TCHECK(memcmp(&qs[i], qi, sizeof(float)) == 0, "length %" PRId64 ", element %" PRId64 ": %.9g vs %.9g",
                   len, i, qs[i], *qi);
        }
        od_tensor_release(os);
        od_tensor_release(xs);
    }
}

/* |q - r| in ulps of r rounded to float32 (the step above it; subnormal
 * steps below FLT_MIN). */
static double f32_ulps(float q, double r)
{
    float a = fabsf((float)r);
    double ulp = a < FLT_MIN ? ldexp(1.0, -149) : (double)(nextafterf(a, INFINITY) - a);
    return fabs((double)q - r) / ulp;
}

/* float32 gelu on torch's oneDNN path (contiguous, more than one element):
 * the vectorised x * Phi(x) against a double reference over [-16, 16],
 * subnormal results and the tail where 1 + erf would be 0 included (within
 * 6 ulp of the result, or one subnormal step; 2.5 ulp for |x| < 4 where
 * vmath512.c's polynomial runs), torch's specials, and the same value for
 * an element whichever lane or scalar tail computes it. */
Test(cpu_ew, gelu_float32_vectorized_accuracy)
{
    int64_t n = 400003;
    od_tensor *x = t_empty(&n, 1, OD_FLOAT32, CPU);
    float *p = od_tensor_data(x);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(-16.0 + 32.0 * (double)i / (double)(n - 1)) + (float)rng_uniform(-1e-4, 1e-4);
    const float sp[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 14.4f, -14.4f, -14.399999f, 1e-30f, -1e-30f,
                        1e-40f, -1e-40f, FLT_MAX, -FLT_MAX};
    const int nsp = (int)(sizeof sp / sizeof sp[0]);
    memcpy(p, sp, sizeof sp);
    od_value a[2] = {tv(x), od_str("none")};
    od_tensor *o = call1_ok(OD_OPID_gelu, a, 2);
    const float *q = od_tensor_data(o);
    TCHECK(isnan(q[0]) && q[1] == INFINITY && isnan(q[2]), "gelu(NaN, inf, -inf) = %g, %g, %g", q[0], q[1], q[2]);
    TCHECK(q[3] == 0 && !signbit(q[3]) && q[4] == 0 && !signbit(q[4]), "gelu(-0.0), gelu(0.0) are +0.0");
    TCHECK(q[12] == FLT_MAX && q[13] == 0 && !signbit(q[13]), "gelu(+-FLT_MAX) = %g, %g", q[12], q[13]);
    bool poly = od_cpu_vm512_enable(true); /* |x| < 4 on the polynomial: within 2.4 ulp over every float */
    double worst = 0, worst_poly = 0;
    for (int64_t i = 4; i < n; i++) {
        if (i == 12 || i == 13)
            continue;
        double r = 0.5 * (double)p[i] * erfc(-(double)p[i] / sqrt(2.0));
        double err = fabs((double)q[i] - r);
        TCHECK(err <= 6 * ldexp(1.0, -23) * fabs(r) + ldexp(1.0, -149), "gelu(%.9g) = %.9g, want %.17g", p[i],
               q[i], r);
        if (fabs(r) >= FLT_MIN)
            worst = fmax(worst, err / fabs(r));
        if (poly && fabsf(p[i]) < 4.0f) {
            double u = f32_ulps(q[i], r);
            TCHECK(u <= 2.5, "gelu(%.9g) = %.9g, want %.17g: %.2f ulp on vmath512.c's polynomial", p[i], q[i], r, u);
            worst_poly = fmax(worst_poly, u);
        }
    }
    cr_log_info("gelu float32: worst relative error (normal results) %.3g (%.2f x 2^-23)", worst, worst / ldexp(1.0, -23));
    if (poly)
        cr_log_info("gelu float32 on |x| < 4 (vmath512.c's polynomial): worst %.2f ulp", worst_poly);
    tails_agree(OD_OPID_gelu, od_str("none"), p + nsp, q + nsp, n - nsp);
    od_tensor_release(o);
    od_tensor_release(x);
}

/* float32 tanh (od_math_tanh_f32, vectorised): every 509th float from 0 to
 * 10 with both signs (4.3 million values, both of its formulas and the
 * switch between them at 1), plus a random stride offset so each run sees
 * other floats, against double tanh within 1.25 ulp of the float result
 * (measured over every float: 0.96 ulp with FMA, 1.10 without, as under
 * ASan); specials as torch gives them; and the vector body and scalar tail
 * bit for bit the same. */
Test(cpu_ew, tanh_float32_vectorized_accuracy)
{
    const uint32_t stride = 509, off = (uint32_t)(rng_next() % stride), top = 0x41200000u; /* 10.0f */
    const float sp[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 1e-40f, -1e-40f, 1.0f, -1.0f,
                        nextafterf(1.0f, 0.0f), 9.5f, -9.5f, 88.0f, FLT_MAX, -FLT_MAX};
    const int64_t nsp = (int64_t)(sizeof sp / sizeof sp[0]);
    int64_t half = (int64_t)((top - off) / stride), n = nsp + 2 * half;
    od_tensor *x = t_empty(&n, 1, OD_FLOAT32, CPU);
    float *p = od_tensor_data(x);
    memcpy(p, sp, sizeof sp);
    for (int64_t i = 0; i < half; i++) {
        uint32_t u = off + (uint32_t)i * stride;
        memcpy(&p[nsp + 2 * i], &u, 4);
        p[nsp + 2 * i + 1] = -p[nsp + 2 * i];
    }
    od_value a = tv(x);
    od_tensor *o = call1_ok(OD_OPID_tanh, &a, 1);
    const float *q = od_tensor_data(o);
    TCHECK(isnan(q[0]) && q[1] == 1.0f && q[2] == -1.0f, "tanh(NaN, inf, -inf) = %g, %g, %g", q[0], q[1], q[2]);
    TCHECK(q[3] == 0 && signbit(q[3]) && q[4] == 0 && !signbit(q[4]), "tanh(-0.0) is -0.0, tanh(0.0) is +0.0");
    TCHECK(q[5] == 1e-40f && q[6] == -1e-40f, "tanh(+-1e-40) = %g, %g", q[5], q[6]);
    TCHECK(q[10] == 1.0f && q[11] == -1.0f && q[12] == 1.0f && q[13] == 1.0f && q[14] == -1.0f,
           "tanh(+-9.5, 88, +-FLT_MAX) = %g %g %g %g %g", q[10], q[11], q[12], q[13], q[14]);
    double worst = 0;
    int64_t inexact = 0;
    for (int64_t i = 7; i < n; i++) {
        if (i >= 10 && i < nsp)
            continue;
        double r = tanh((double)p[i]);
        float rf = (float)r;
        double ulp = fabsf(rf) >= 1.0f ? ldexp(1.0, -24) : fabsf(rf) < FLT_MIN ? ldexp(1.0, -149)
                                                                                 : nextafterf(fabsf(rf), INFINITY) - fabsf(rf);
        double err = fabs((double)q[i] - r) / ulp;
        TCHECK(err <= 1.25, "tanh(%.9g) = %.9g, want %.17g (%.3f ulp)", p[i], q[i], r, err);
        worst = fmax(worst, err);
        inexact += q[i] != rf;
    }
    cr_log_info("tanh float32 (stride offset %u): worst %.3f ulp, %" PRId64 " of %" PRId64
                " not the correctly rounded float", off, worst, inexact, n - 7);
    tails_agree(OD_OPID_tanh, od_none(), p + nsp, q + nsp, n - nsp);
    od_tensor_release(o);
    od_tensor_release(x);
}

/* exp, sigmoid, silu, tanh and gelu (both forms) of a contiguous float32
 * tensor run vmath512.c's AVX-512 loops where the CPU has them, and
 * elementwise.c's own loops (od_math.h per element, vector body and scalar
 * tail) with those turned off. Both must give the same bits (but gelu's,
 * either form, for |x| < 4, vmath512.c's own polynomials there: within
 * 2.5 and 3 ulp of double instead): random bit patterns (every exponent,
 * NaN payloads, subnormals), [-110, 110] where the exp changes regime,
 * (-1, 1) where tanh's and gelu's blocks take one formula, and the clamps'
 * edges, at every length up to two 64-float blocks (the padded last
 * block), and in a call of over OD_CPU_STREAM_BYTES (its stores streamed,
 * each thread's part from its first 64-byte line on). An element's value
 * must not depend on its neighbours: the short calls equal the long one's
 * elements. */
static od_tensor *vm512_call(od_opid op, const char *form, od_tensor *x, bool vm)
{
    od_cpu_vm512_enable(vm);
    od_value a[2] = {tv(x), od_str(form ? form : "")};
    od_tensor *y = call1_ok(op, a, form ? 2 : 1);
    od_cpu_vm512_enable(true);
    return y;
}
Test(cpu_ew, exp_family_vmath512_equals_loops)
{
    static const od_opid ops[] = {OD_OPID_exp, OD_OPID_sigmoid, OD_OPID_silu, OD_OPID_tanh, OD_OPID_gelu, OD_OPID_gelu};
    static const char *const forms[] = {NULL, NULL, NULL, NULL, "none", "tanh"};
    static const char *const names[] = {"exp", "sigmoid", "silu", "tanh", "gelu", "gelu tanh"};
    const float sp[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, FLT_MAX, -FLT_MAX,
                        88.72f, 88.8f, 89.0f, -87.33f, -86.0f, -88.8f, -103.9f, -104.0f, -104.1f, 1.0f,
                        nextafterf(1.0f, 0.0f), -1.0f, 44.0f, 9.01f, 14.4f, -14.4f, -14.5f, -6.2f};
    const int64_t nsp = (int64_t)(sizeof sp / sizeof sp[0]);
    int64_t n = OD_CPU_STREAM_BYTES / 4 + 15;
    od_tensor *x = t_empty(&n, 1, OD_FLOAT32, CPU);
    float *p = od_tensor_data(x);
    memcpy(p, sp, sizeof sp);
    for (int64_t i = nsp; i < n; i++) {
        int64_t run = i / 1000 % 4; /* runs of 1000: whole blocks of one kind, and mixed ones */
        if (run == 0 || (run == 1 && i % 3 == 0)) {
            uint32_t u = (uint32_t)rng_next();
            memcpy(&p[i], &u, 4);
        } else {
            p[i] = (float)(run == 2 ? rng_uniform(-1.0, 1.0) : rng_uniform(-110.0, 110.0));
        }
    }
    bool on = od_cpu_vm512_enable(true);
    cr_log_info("exp family: %s", on ? "vmath512.c's AVX-512 loops against elementwise.c's"
                                     : "no AVX-512 loops in this build or CPU: elementwise.c's on both sides");
    for (int f = 0; f < 6; f++) {
        od_tensor *yv = vm512_call(ops[f], forms[f], x, true), *yl = vm512_call(ops[f], forms[f], x, false);
        const float *qv = od_tensor_data(yv), *ql = od_tensor_data(yl);
        int64_t bad = 0, poly = 0;
        for (int64_t i = 0; i < n; i++) {
            if (on && f >= 4 && fabsf(p[i]) < 4.0f) {
                double xd = p[i], u = sqrt(2.0 / M_PI) * (xd + 0.044715 * xd * xd * xd);
                double r = f == 4 ? 0.5 * xd * erfc(-xd / sqrt(2.0)) : xd / (1.0 + exp(-2.0 * u));
                poly++;
                if (f32_ulps(qv[i], r) > (f == 4 ? 2.5 : 3) && bad++ == 0)
                    TCHECK(false, "%s(%a): %a with vmath512, want %.17g", names[f], p[i], qv[i], r);
            } else if (memcmp(&qv[i], &ql[i], 4) != 0 && bad++ == 0) {
                TCHECK(false, "%s(%a): %a with vmath512, %a without", names[f], p[i], qv[i], ql[i]);
            }
        }
        TCHECK(bad == 0, "%s: %" PRId64 " of %" PRId64 " elements differ", names[f], bad, n);
        TCHECK(f < 4 || !on || poly > n / 4, "%s: only %" PRId64 " elements on the polynomial", names[f], poly);
        for (int64_t len = 1; len <= 128; len++) {
            int64_t at = len * 757 % (n - 128);
            od_tensor *xs = t_empty(&len, 1, OD_FLOAT32, CPU);
            memcpy(od_tensor_data(xs), p + at, (size_t)len * 4);
            od_tensor *sv = vm512_call(ops[f], forms[f], xs, true), *sl = vm512_call(ops[f], forms[f], xs, false);
            /* one element is not gelu's oneDNN path */
            TCHECK((f == 4 && len == 1) || memcmp(od_tensor_data(sv), qv + at, (size_t)len * 4) == 0,
                   "%s over %" PRId64 " elements differs from the same elements of the long call", names[f], len);
            TCHECK((on && f >= 4) || memcmp(od_tensor_data(sv), od_tensor_data(sl), (size_t)len * 4) == 0,
                   "%s over %" PRId64 " elements differs with vmath512", names[f], len);
            od_tensor_release(sl);
            od_tensor_release(sv);
            od_tensor_release(xs);
        }
        od_tensor_release(yl);
        od_tensor_release(yv);
    }
    od_tensor_release(x);
}

/* acosh below 1 and atanh beyond +-1 skip glibc's call (its error
 * handler) for glibc's own answer: the same bits as acoshf / atanhf (what
 * torch calls) over those domains and at +-1, in both float types,
 * contiguous (vector loop and tail) and strided. Inside the domains,
 * within 2 ulp of double (glibc's bound; float32 atanh's vectorized path
 * is not glibc's). */
Test(cpu_ew, acosh_atanh_domain_edges_equal_glibc_bits)
{
    const double sp[] = {-INFINITY, -3e38, -2.0, -1.0000001, -1.0, -0.9999999, -0.5, -0.0, 0.0, 1e-40, 0.5,
                         0.99999994, 1.0, 1.0000001, 1.5, 2.0, 3e38, INFINITY, NAN, -NAN};
    const int64_t nsp = (int64_t)(sizeof sp / sizeof sp[0]);
    int64_t n = 4 * nsp + 3;
    static const od_opid ops[2] = {OD_OPID_acosh, OD_OPID_atanh};
    for (int dt = 0; dt < 2; dt++) {
        od_tensor *x = t_empty(&n, 1, dt ? OD_FLOAT64 : OD_FLOAT32, CPU);
        for (int64_t i = 0; i < n; i++) {
            double v = sp[i % nsp];
            if (dt)
                ((double *)od_tensor_data(x))[i] = v;
            else
                ((float *)od_tensor_data(x))[i] = (float)v;
        }
        for (int f = 0; f < 2; f++)
            for (int strided = 0; strided < 2; strided++) {
                od_tensor *in = x;
                int64_t m = n;
                if (strided) { /* every other element: the strided loop */
                    int64_t size = n / 2, stride = 2;
                    TCHECK(od_tensor_as_strided(x, &size, &stride, 1, 0, &in, NULL) == OD_OK, "as_strided");
                    m = size;
                }
                od_value a[1] = {tv(in)};
                od_tensor *o = call1_ok(ops[f], a, 1);
                for (int64_t i = 0; i < m; i++) {
                    int64_t k = strided ? 2 * i : i;
                    bool same;
                    if (dt) {
                        double xv = ((double *)od_tensor_data(x))[k], want = f ? atanh(xv) : acosh(xv);
                        same = memcmp(&want, (double *)od_tensor_data(o) + i, 8) == 0;
                    } else {
                        float xv = ((float *)od_tensor_data(x))[k], want = f ? atanhf(xv) : acoshf(xv);
                        float got = ((float *)od_tensor_data(o))[i];
                        same = isfinite(want) && want != 0 ? f32_ulps(got, f ? atanh((double)xv) : acosh((double)xv)) <= 2.0
                                                           : memcmp(&want, &got, 4) == 0;
                    }
                    if (!same) {
                        TCHECK(false, "%s %s(%g)%s: not glibc's bits", dt ? "float64" : "float32",
                               f ? "atanh" : "acosh", sp[k % nsp], strided ? " strided" : "");
                        break;
                    }
                }
                od_tensor_release(o);
                if (strided)
                    od_tensor_release(in);
            }
        od_tensor_release(x);
    }
}

/* float32 asinh and atanh on the vectorized path (double around Sleef's
 * log1p): within 1 ulp of the double result (over every float when written:
 * asinh 4 floats 1 ulp off the double result rounded, atanh none; glibc's
 * up to 2), on random bits of every exponent and on [-1, 1]; the specials
 * (NaN, +-0, +-inf, atanh's +-1 and beyond) with glibc's bits. */
Test(cpu_ew, asinh_atanh_float32_vectorized_within_an_ulp)
{
    const float sp[] = {NAN, -NAN, 0.0f, -0.0f, INFINITY, -INFINITY, 1.0f, -1.0f, 1.0000001f, -2.0f, FLT_MAX,
                        -FLT_MAX, 1e-45f, -1e-38f};
    const int64_t nsp = (int64_t)(sizeof sp / sizeof sp[0]);
    int64_t n = 200000; /* it and its halves (two threads' parts) are whole 16-element steps: no scalar tail */
    od_tensor *x = t_empty(&n, 1, OD_FLOAT32, CPU);
    float *p = od_tensor_data(x);
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)rng_next();
        if (i % 2)
            p[i] = (float)rng_uniform(-1.0, 1.0);
        else
            memcpy(&p[i], &u, 4);
    }
    memcpy(p + 1000, sp, sizeof sp); /* inside the vectorized part */
    static const od_opid ops[2] = {OD_OPID_asinh, OD_OPID_atanh};
    for (int f = 0; f < 2; f++) {
        od_value a[1] = {tv(x)};
        od_tensor *o = call1_ok(ops[f], a, 1);
        const float *q = od_tensor_data(o);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            double r = f ? atanh((double)p[i]) : asinh((double)p[i]);
            float g = f ? atanhf(p[i]) : asinhf(p[i]);
            bool ok = isnan(r) || isinf(r) || (r == 0 && i >= 1000 && i < 1000 + nsp)
                          ? memcmp(&q[i], &g, 4) == 0 /* the specials: glibc's bits */
                          : f32_ulps(q[i], r) <= 1.0;
            if (!ok && bad++ == 0)
                TCHECK(false, "%s(%a) = %a, want %.17g (glibc %a)", f ? "atanh" : "asinh", p[i], q[i], r, g);
        }
        TCHECK(bad == 0, "%s: %" PRId64 " of %" PRId64 " elements more than an ulp off", f ? "atanh" : "asinh", bad,
               n);
        od_tensor_release(o);
    }
    od_tensor_release(x);
}

/* ATen's int32 gcd, Euclid on |a| and |b| taken in int32 (|INT32_MIN|
 * stays INT32_MIN, and the steps go negative from there) */
static int32_t ref_gcd32(int32_t a, int32_t b)
{
    int32_t x = a < 0 ? (int32_t)(0u - (uint32_t)a) : a, y = b < 0 ? (int32_t)(0u - (uint32_t)b) : b;
    while (x != 0) {
        int32_t c = x;
        x = x == -1 ? 0 : y % x;
        y = c;
    }
    return y;
}

/* ATen's int32 lcm: |a / g * b| with the product and |.| wrapping in int32 */
static int32_t ref_lcm32(int32_t a, int32_t b)
{
    int32_t g = ref_gcd32(a, b);
    if (g == 0)
        return 0;
    int32_t q = g == -1 ? (int32_t)(0u - (uint32_t)a) : a / g;
    int32_t p = (int32_t)((uint32_t)q * (uint32_t)b);
    return p < 0 ? (int32_t)(0u - (uint32_t)p) : p;
}

/* int32 gcd and lcm, contiguous, with vmath512.c's 16-lane binary gcd and
 * without (elementwise.c's scalar loop), against Euclid: full-range and
 * small values, zeros, ones, powers of two, equal pairs, negatives and
 * INT32_MIN (whose block goes to the scalar form), at every length up to
 * three 64-element blocks (the scalar tail), and in place (gcd_, lcm_). */
Test(cpu_ew, gcd_lcm_int32_vmath512_equals_euclid)
{
    int64_t n = 100000;
    od_tensor *x = t_empty(&n, 1, OD_INT32, CPU), *y = t_empty(&n, 1, OD_INT32, CPU);
    int32_t *a = od_tensor_data(x), *b = od_tensor_data(y);
    for (int64_t i = 0; i < n; i++) {
        int kind = (int)(i / 640 % 6); /* runs of ten blocks of one kind */
        uint32_t u = (uint32_t)rng_next(), v = (uint32_t)rng_next();
        switch (kind) {
        case 0: a[i] = (int32_t)u, b[i] = (int32_t)v; break;
        case 1: a[i] = (int32_t)(u % 1000) - 500, b[i] = (int32_t)(v % 1000) - 500; break;
        case 2: a[i] = (int32_t)(u % 3), b[i] = (int32_t)(v % 2); break; /* zeros and ones */
        case 3: a[i] = (int32_t)(1u << (u % 31)) * (int32_t)(v % 7 + 1), b[i] = (int32_t)(1u << (v % 31)); break;
        case 4: a[i] = (int32_t)(u % 100000), b[i] = i % 2 ? a[i] : -a[i]; break;
        default: a[i] = i % 97 == 0 ? INT32_MIN : (int32_t)u, b[i] = i % 89 == 0 ? INT32_MIN : (int32_t)(v % 4096) * 6; break;
        }
    }
    bool on = od_cpu_vm512_enable(true);
    cr_log_info("gcd, lcm int32: %s", on ? "vmath512.c's AVX-512 loop and elementwise.c's against Euclid"
                                         : "no AVX-512 loops in this build or CPU: elementwise.c's against Euclid");
    static const od_opid ops[2] = {OD_OPID_gcd, OD_OPID_lcm}, inplace[2] = {OD_OPID_gcd_, OD_OPID_lcm_};
    static const char *const names[2] = {"gcd", "lcm"};
    int32_t (*const ref[2])(int32_t, int32_t) = {ref_gcd32, ref_lcm32};
    for (int f = 0; f < 2; f++)
        for (int vm = 0; vm < 2; vm++) {
            od_cpu_vm512_enable(vm == 1);
            od_value args[2] = {tv(x), tv(y)};
            od_tensor *o = call1_ok(ops[f], args, 2);
            const int32_t *q = od_tensor_data(o);
            int64_t bad = 0;
            for (int64_t i = 0; i < n; i++)
                if (q[i] != ref[f](a[i], b[i]) && bad++ == 0)
                    TCHECK(false, "%s(%d, %d) = %d (vmath512 %s), want %d", names[f], a[i], b[i], q[i],
                           vm ? "on" : "off", ref[f](a[i], b[i]));
            TCHECK(bad == 0, "%s: %" PRId64 " of %" PRId64 " elements wrong (vmath512 %s)", names[f], bad, n,
                   vm ? "on" : "off");
            od_tensor_release(o);
            for (int64_t len = 1; len <= 192; len++) {
                int64_t at = len * 523 % (n - 192);
                od_tensor *xs = t_empty(&len, 1, OD_INT32, CPU), *ys = t_empty(&len, 1, OD_INT32, CPU);
                memcpy(od_tensor_data(xs), a + at, (size_t)len * 4);
                memcpy(od_tensor_data(ys), b + at, (size_t)len * 4);
                od_value ia[2] = {tv(xs), tv(ys)};
                od_tensor *r = call1_ok(inplace[f], ia, 2); /* in place: xs = f(xs, ys) */
                const int32_t *qs = od_tensor_data(xs);
                for (int64_t i = 0; i < len; i++)
                    if (qs[i] != ref[f](a[at + i], b[at + i])) {
                        TCHECK(false, "%s_ over %" PRId64 " elements: (%d, %d) gives %d, want %d", names[f], len,
                               a[at + i], b[at + i], qs[i], ref[f](a[at + i], b[at + i]));
                        break;
                    }
                od_tensor_release(r);
                od_tensor_release(ys);
                od_tensor_release(xs);
            }
        }
    od_cpu_vm512_enable(true);
    od_tensor_release(y);
    od_tensor_release(x);
}

/* float32 gelu(approximate='tanh'), computed as x * sigmoid(2u): against a
 * double reference of the same formula over [-12, 4] (random steps), where
 * torch's 1 + tanh(u) cancels to 0 below x = -6.1. The error grows with
 * |2u| (u's own rounding goes through the exp): within (6 + 3 |2u|) ulp
 * of each normal result (measured: 169 ulp at 2u = 88, 2 ulp for x > 0),
 * and 3 ulp for |x| < 4 where vmath512.c's polynomial runs (2.6 over every
 * float there); torch's specials; vector body against scalar tail bit for
 * bit. */
Test(cpu_ew, gelu_tanh_float32_tail_accuracy)
{
    const float sp[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, -1e13f, 1e13f, -40.0f, 1e-40f};
    const int64_t nsp = (int64_t)(sizeof sp / sizeof sp[0]);
    int64_t n = nsp + 200000;
    od_tensor *x = t_empty(&n, 1, OD_FLOAT32, CPU);
    float *p = od_tensor_data(x);
    memcpy(p, sp, sizeof sp);
    for (int64_t i = nsp; i < n; i++)
        p[i] = (float)(-12.0 + 16.0 * (double)(i - nsp) / (double)(n - nsp)) + (float)rng_uniform(0, 8e-5);
    od_value a[2] = {tv(x), od_str("tanh")};
    od_tensor *o = call1_ok(OD_OPID_gelu, a, 2);
    const float *q = od_tensor_data(o);
    TCHECK(isnan(q[0]) && q[1] == INFINITY && isnan(q[2]), "gelu_tanh(NaN, inf, -inf) = %g, %g, %g", q[0], q[1],
           q[2]);
    TCHECK(q[3] == 0 && signbit(q[3]) && q[4] == 0 && !signbit(q[4]), "gelu_tanh(-0.0) is -0.0, (0.0) is +0.0");
    TCHECK(q[5] == 0 && signbit(q[5]) && q[6] == 1e13f && q[7] == 0 && signbit(q[7]),
           "gelu_tanh(-1e13, 1e13, -40) = %g, %g, %g", q[5], q[6], q[7]);
    TCHECK(q[8] == 0.5f * sp[8], "gelu_tanh(1e-40) = %g", q[8]);
    bool poly = od_cpu_vm512_enable(true);
    double worst = 0, worst_poly = 0;
    for (int64_t i = nsp; i < n; i++) {
        double xd = p[i], u = sqrt(2.0 / M_PI) * (xd + 0.044715 * xd * xd * xd);
        double r = xd / (1.0 + exp(-2.0 * u));
        if (fabs(r) < FLT_MIN)
            continue;
        double ulps = f32_ulps(q[i], r);
        TCHECK(ulps <= 6 + 3 * fabs(2 * u), "gelu_tanh(%.9g) = %.9g, want %.17g (%.1f ulp, 2u = %.1f)", p[i], q[i], r,
               ulps, 2 * u);
        worst = fmax(worst, ulps);
        if (poly && fabsf(p[i]) < 4.0f) {
            TCHECK(ulps <= 3, "gelu_tanh(%.9g) = %.9g, want %.17g: %.2f ulp on vmath512.c's polynomial", p[i], q[i],
                   r, ulps);
            worst_poly = fmax(worst_poly, ulps);
        }
    }
    cr_log_info("gelu tanh float32 over [-12, 4]: worst %.1f ulp", worst);
    if (poly)
        cr_log_info("gelu tanh float32 on |x| < 4 (vmath512.c's polynomial): worst %.2f ulp", worst_poly);
    tails_agree(OD_OPID_gelu, od_str("tanh"), p + nsp, q + nsp, n - nsp);
    od_tensor_release(o);
    od_tensor_release(x);
}

/* ---- clamp ---------------------------------------------------------------------------------------- */

static rv ref_clamp(rv x, bool has_lo, rv lo, bool has_hi, rv hi)
{
    if (!x.is_int) {
        if (isnan(x.d) || (has_lo && isnan(lo.d)) || (has_hi && isnan(hi.d)))
            return RD(NAN);
        /* (a NaN Scalar bound reaches here as absent: see the caller) */
        double v = x.d;
        if (has_lo && v < lo.d)
            v = lo.d;
        if (has_hi && v > hi.d)
            v = hi.d;
        return RD(v);
    }
    int64_t v = x.i;
    if (has_lo && v < lo.i)
        v = lo.i;
    if (has_hi && v > hi.i)
        v = hi.i;
    return RI(v);
}

Test(cpu_ew, clamp_scalar_and_tensor_bounds)
{
    for (int rep = 0; rep < 500; rep++) {
        bool tensors = rng_next() % 2;
        int64_t out[OD_MAX_DIMS];
        int nd = rand_shape(out, rep % 50 == 49);
        od_dtype dt = rand_dtype();
        int special = rng_next() % 2 ? 0 : 8;
        arg x = tensor_arg(out, nd, dt, special);
        int which = (int)(rng_next() % 3); /* 0 both, 1 min only, 2 max only */
        bool has_lo = which != 2, has_hi = which != 1;
        arg lo = {0}, hi = {0};
        if (tensors) {
            if (has_lo)
                lo = tensor_arg(out, nd, rng_next() % 2 ? dt : rand_dtype(), special);
            if (has_hi)
                hi = tensor_arg(out, nd, rng_next() % 2 ? dt : rand_dtype(), special);
        } else {
            if (has_lo)
                lo = scalar_arg(dt == OD_BOOL ? OD_INT8 : dt, special);
            if (has_hi)
                hi = scalar_arg(dt == OD_BOOL ? OD_INT8 : dt, special);
        }
        part ps[3] = {arg_part(&x), has_lo ? arg_part(&lo) : (part){P_NONE, UNDEF, 0},
                      has_hi ? arg_part(&hi) : (part){P_NONE, UNDEF, 0}};
        od_dtype rt = !tensors && isflt(dt) ? dt : ref_result_type(ps, 3);
        od_value args[3] = {tv(x.t), has_lo ? arg_value(&lo) : od_none(), has_hi ? arg_value(&hi) : od_none()};
        od_opid id = tensors ? OD_OPID_clamp_Tensor : OD_OPID_clamp;
        /* scalar bounds must fit the result dtype (c10's checked conversion) */
        bool fits = true;
        for (int k = 0; !tensors && k < 2; k++) {
            const arg *bnd = k ? &hi : &lo;
            if (!(k ? has_hi : has_lo) || bnd->kind == P_BOOL)
                continue;
            if (!isflt(rt) && (bnd->kind == P_FLOAT || bnd->v.i < int_min_of(rt) - (rt == OD_UINT8 ? 255 : 0) ||
                               bnd->v.i > int_max_of(rt)))
                fits = false;
            if (isflt(rt) && bnd->kind == P_FLOAT && isfinite(bnd->v.d) && rt == OD_FLOAT16 && fabs(bnd->v.d) > 65504)
                fits = false;
        }
        /* bool: only clamp.Tensor with one bound (clamp_min / clamp_max), as in torch */
        bool bool_ok = rt == OD_BOOL && tensors && which != 0;
        if ((rt == OD_BOOL && !bool_ok) || !fits) {
            call_fails(id, args, 3, OD_OK, NULL);
        } else {
            od_tensor *o = call1_ok(id, args, 3);
            int64_t want[OD_MAX_DIMS];
            int wn;
            const arg *xs[3] = {&x, has_lo ? &lo : NULL, has_hi ? &hi : NULL};
            TCHECK(ref_bshape(xs, 3, want, &wn), "test bug: shapes do not broadcast");
            TCHECK(o->dtype == rt && same_shape(o, want, wn), "clamp: dtype %s, want %s", dtn(o->dtype), dtn(rt));
            if (od_tensor_numel(o) > 0) {
                int64_t idx[OD_MAX_DIMS] = {0};
                do {
                    rv v = ref_cast(arg_at(&x, idx, o->ndim), rt);
                    rv l = has_lo ? ref_cast(arg_at(&lo, idx, o->ndim), rt) : RI(0);
                    rv h = has_hi ? ref_cast(arg_at(&hi, idx, o->ndim), rt) : RI(0);
                    /* a NaN Scalar bound leaves the input (std::min/max in ATen's
                     * clamp_scalar kernel); a NaN in a Tensor bound gives NaN */
                    bool both = !tensors && has_lo && has_hi; /* then a NaN bound fills NaN */
                    bool lo_on = has_lo && (tensors || both || l.is_int || !isnan(l.d));
                    bool hi_on = has_hi && (tensors || both || h.is_int || !isnan(h.d));
                    rv w = ref_clamp(v, lo_on, l, hi_on, h);
                    rv g = get_rv(o, idx);
                    TCHECK(isflt(rt) ? (g.d == w.d || (isnan(g.d) && isnan(w.d))) : g.i == w.i,
                           "clamp %s(%.17g, %.17g, %.17g) = %.17g, want %.17g", dtn(rt), v.d, l.d, h.d, g.d, w.d);
                } while (next_index(idx, o->sizes, o->ndim));
            }
            od_tensor_release(o);
        }
        arg_release(&x);
        arg_release(&lo);
        arg_release(&hi);
    }
}

Test(cpu_ew, clamp_min_greater_than_max_gives_max)
{
    int64_t n = 5;
    od_tensor *x = t_empty(&n, 1, OD_FLOAT32, CPU);
    float *p = od_tensor_data(x);
    for (int i = 0; i < 5; i++)
        p[i] = (float)rng_uniform(-10, 10);
    od_value args[3] = {tv(x), od_double(3.0), od_double(1.0)};
    od_tensor *o = call1_ok(OD_OPID_clamp, args, 3);
    for (int i = 0; i < 5; i++)
        TCHECK(((float *)od_tensor_data(o))[i] == 1.0f, "clamp(min=3, max=1) must give 1");
    od_tensor_release(o);
    od_tensor_release(x);
}

/* ---- special cases with fixed meaning ---------------------------------------------------------- */

static od_tensor *vec_i(od_dtype dt, const int64_t *v, int64_t n)
{
    od_tensor *t = t_empty(&n, 1, dt, CPU);
    for (int64_t i = 0; i < n; i++)
        set_i(t, &i, v[i]);
    return t;
}

static od_tensor *vec_d(od_dtype dt, const double *v, int64_t n)
{
    od_tensor *t = t_empty(&n, 1, dt, CPU);
    for (int64_t i = 0; i < n; i++)
        set_d(t, &i, round_fp(v[i], dt));
    return t;
}

Test(cpu_ew, integer_division_by_zero_is_an_error)
{
    static const od_dtype ints[] = {OD_UINT8, OD_INT8, OD_INT16, OD_INT32, OD_INT64};
    for (int k = 0; k < 5; k++) {
        int64_t n = 40000 + (int64_t)rng_int(0, 1000);
        od_tensor *a = t_rand(&n, 1, ints[k]);
        od_tensor *b = t_empty(&n, 1, ints[k], CPU);
        for (int64_t i = 0; i < n; i++)
            set_i(b, &i, rng_int(1, 5));
        int64_t z = rng_int(0, n - 1);
        set_i(b, &z, 0);
        const char *modes[2] = {"trunc", "floor"};
        for (int m = 0; m < 2; m++) {
            od_value args[3] = {tv(a), tv(b), od_str(modes[m])};
            call_fails(OD_OPID_div_Tensor_mode, args, 3, OD_EINVAL, "ZeroDivisionError");
            od_value sargs[3] = {tv(a), od_int(0), od_str(modes[m])};
            call_fails(OD_OPID_div_Scalar_mode, sargs, 3, OD_EINVAL, "ZeroDivisionError");
        }
        /* true division of integers is floating: x / 0 is inf or nan */
        od_value args[2] = {tv(a), od_int(0)};
        od_tensor *o = call1_ok(OD_OPID_div_Scalar, args, 2);
        TCHECK(o->dtype == OD_FLOAT32, "int / 0 must be float32");
        for (int64_t i = 0; i < n; i++) {
            double av = (double)get_i(a, &i), g = get_d(o, &i);
            TCHECK(av == 0 ? isnan(g) : isinf(g) && (g > 0) == (av > 0), "%g / 0 gave %g", av, g);
        }
        od_tensor_release(o);
        od_tensor_release(a);
        od_tensor_release(b);
    }
}

Test(cpu_ew, rounding_modes_with_negatives)
{
    /* integers: trunc rounds toward zero, floor toward -inf */
    int64_t av[] = {7, -7, 7, -7, 0, 6, -6, INT64_MIN, INT64_MIN};
    int64_t bv[] = {2, 2, -2, -2, 3, -3, 3, -1, 1};
    int64_t n = 9;
    od_tensor *a = vec_i(OD_INT64, av, n), *b = vec_i(OD_INT64, bv, n);
    od_value ta[3] = {tv(a), tv(b), od_str("trunc")}, fa[3] = {tv(a), tv(b), od_str("floor")};
    od_tensor *t = call1_ok(OD_OPID_div_Tensor_mode, ta, 3), *f = call1_ok(OD_OPID_div_Tensor_mode, fa, 3);
    for (int64_t i = 0; i < n; i++) {
        int64_t wt, wf;
        if (bv[i] == -1) {
            wt = wf = (int64_t)(0 - (uint64_t)av[i]);
        } else {
            wt = av[i] / bv[i];
            wf = wt - ((av[i] % bv[i] != 0) && ((av[i] < 0) != (bv[i] < 0)));
        }
        TCHECK(get_i(t, &i) == wt && get_i(f, &i) == wf, "%" PRId64 " / %" PRId64 ": trunc %" PRId64 " floor %" PRId64,
               av[i], bv[i], get_i(t, &i), get_i(f, &i));
    }
    TCHECK(get_i(f, &(int64_t){1}) == -4 && get_i(t, &(int64_t){1}) == -3, "-7 // 2 must be -4, trunc -3");
    od_tensor_release(t);
    od_tensor_release(f);
    od_tensor_release(a);
    od_tensor_release(b);
    /* floats, incl. signed zeros and infinities */
    double fx[] = {7.5, -7.5, 7.5, -7.5, -0.5, 0.5, 1.0, -1.0, 5.0, INFINITY};
    double fy[] = {2, 2, -2, -2, 3, -3, INFINITY, INFINITY, 0.0, 2};
    int64_t m = 10;
    for (int k = 0; k < 4; k++) {
        od_dtype dt = FLOAT_DTS[k];
        od_tensor *x = vec_d(dt, fx, m), *y = vec_d(dt, fy, m);
        od_value tf[3] = {tv(x), tv(y), od_str("floor")}, tt[3] = {tv(x), tv(y), od_str("trunc")};
        od_tensor *of = call1_ok(OD_OPID_div_Tensor_mode, tf, 3), *ot = call1_ok(OD_OPID_div_Tensor_mode, tt, 3);
        for (int64_t i = 0; i < m; i++) {
            bool z = false;
            rv rf = ref_binary(OP_DIVF, RD(fx[i]), RD(fy[i]), RI(1), dt, &z);
            rv rt = ref_binary(OP_DIVT, RD(fx[i]), RD(fy[i]), RI(1), dt, &z);
            double gf = get_d(of, &i), gt = get_d(ot, &i);
            TCHECK((gf == rf.d && signbit(gf) == signbit(rf.d)) || (isnan(gf) && isnan(rf.d)),
                   "%s floor(%g / %g) = %g, want %g", dtn(dt), fx[i], fy[i], gf, rf.d);
            TCHECK(gt == rt.d || (isnan(gt) && isnan(rt.d)), "%s trunc(%g / %g) = %g, want %g", dtn(dt), fx[i], fy[i],
                   gt, rt.d);
        }
        od_tensor_release(of);
        od_tensor_release(ot);
        od_tensor_release(x);
        od_tensor_release(y);
    }
}

Test(cpu_ew, integer_overflow_wraps)
{
    static const od_dtype ints[] = {OD_UINT8, OD_INT8, OD_INT16, OD_INT32, OD_INT64};
    for (int k = 0; k < 5; k++) {
        od_dtype dt = ints[k];
        int64_t av[] = {int_max_of(dt), int_min_of(dt), int_max_of(dt), int_min_of(dt)};
        int64_t bv[] = {1, -1 + (dt == OD_UINT8), int_max_of(dt), int_min_of(dt)};
        int64_t n = 4;
        od_tensor *a = vec_i(dt, av, n), *b = vec_i(dt, bv, n);
        for (int op = 0; op < 3; op++) {
            od_value args[3] = {tv(a), tv(b), od_int(1)};
            od_opid id = op == 0 ? OD_OPID_add_Tensor : op == 1 ? OD_OPID_sub_Tensor : OD_OPID_mul_Tensor;
            od_tensor *o = call1_ok(id, args, op == 2 ? 2 : 3);
            for (int64_t i = 0; i < n; i++) {
                uint64_t x = (uint64_t)av[i], y = (uint64_t)bv[i];
                int64_t w = wrapi((int64_t)(op == 0 ? x + y : op == 1 ? x - y : x * y), dt);
                TCHECK(get_i(o, &i) == w, "%s op %d: %" PRId64 ", %" PRId64 " -> %" PRId64 ", want %" PRId64, dtn(dt), op,
                       av[i], bv[i], get_i(o, &i), w);
            }
            od_tensor_release(o);
        }
        /* neg / abs of the minimum wrap to itself; pow wraps */
        od_value na = tv(a);
        od_tensor *ng = call1_ok(OD_OPID_neg, &na, 1), *ab = call1_ok(OD_OPID_abs, &na, 1);
        int64_t i1 = 1;
        if (dt != OD_UINT8) {
            TCHECK(get_i(ng, &i1) == int_min_of(dt) && get_i(ab, &i1) == int_min_of(dt), "%s: -min must wrap", dtn(dt));
        }
        od_value pa[2] = {tv(a), od_int(3)};
        od_tensor *pw = call1_ok(OD_OPID_pow_Tensor_Scalar, pa, 2);
        for (int64_t i = 0; i < n; i++)
            TCHECK(get_i(pw, &i) == wrapi((int64_t)upow((uint64_t)av[i], 3), dt), "%s pow wraps", dtn(dt));
        od_tensor_release(pw);
        od_tensor_release(ng);
        od_tensor_release(ab);
        od_tensor_release(a);
        od_tensor_release(b);
    }
}

Test(cpu_ew, integer_pow_negative_exponents)
{
    int64_t base[] = {1, -1, -1, 2, -3, 0, 5};
    int64_t ex[] = {-3, -3, -2, -1, -2, 2, 0};
    int64_t n = 7;
    od_tensor *a = vec_i(OD_INT32, base, n), *b = vec_i(OD_INT32, ex, n);
    od_value args[2] = {tv(a), tv(b)};
    od_tensor *o = call1_ok(OD_OPID_pow_Tensor_Tensor, args, 2);
    for (int64_t i = 0; i < n; i++) {
        bool z;
        rv w = ref_binary(OP_POW, RI(base[i]), RI(ex[i]), RI(1), OD_INT32, &z);
        TCHECK(get_i(o, &i) == w.i, "%" PRId64 " ** %" PRId64 " = %" PRId64 ", want %" PRId64, base[i], ex[i],
               get_i(o, &i), w.i);
    }
    od_tensor_release(o);
    od_value sargs[2] = {tv(a), od_int(-2)};
    call_fails(OD_OPID_pow_Tensor_Scalar, sargs, 2, OD_EINVAL, "Integers to negative integer powers are not allowed.");
    /* a float exponent promotes instead */
    od_value fargs[2] = {tv(a), od_double(-2.0)};
    o = call1_ok(OD_OPID_pow_Tensor_Scalar, fargs, 2);
    TCHECK(o->dtype == OD_FLOAT32, "int ** -2.0 must be float32");
    od_tensor_release(o);
    od_tensor_release(a);
    od_tensor_release(b);
}

Test(cpu_ew, maximum_minimum_propagate_nan)
{
    double av[] = {NAN, 1.0, NAN, -INFINITY, 2.0};
    double bv[] = {1.0, NAN, NAN, INFINITY, -0.0};
    for (int k = 0; k < 4; k++) {
        od_tensor *a = vec_d(FLOAT_DTS[k], av, 5), *b = vec_d(FLOAT_DTS[k], bv, 5);
        od_value args[2] = {tv(a), tv(b)};
        od_tensor *mx = call1_ok(OD_OPID_maximum, args, 2), *mn = call1_ok(OD_OPID_minimum, args, 2);
        for (int64_t i = 0; i < 5; i++) {
            bool nan = isnan(av[i]) || isnan(bv[i]);
            TCHECK(nan ? isnan(get_d(mx, &i)) && isnan(get_d(mn, &i))
                       : get_d(mx, &i) == fmax(av[i], bv[i]) && get_d(mn, &i) == fmin(av[i], bv[i]),
                   "%s maximum/minimum element %" PRId64, dtn(FLOAT_DTS[k]), i);
        }
        od_tensor_release(mx);
        od_tensor_release(mn);
        od_tensor_release(a);
        od_tensor_release(b);
    }
}

/* ---- type promotion and errors ---------------------------------------------------------------- */

Test(cpu_ew, promotion_of_results)
{
    int64_t two = 2;
    struct { od_dtype a; int bkind; od_dtype b; int bnd; od_opid id; od_dtype want; } cases[] = {
        {OD_INT32, P_TENSOR, OD_FLOAT16, 1, OD_OPID_add_Tensor, OD_FLOAT16},
        {OD_UINT8, P_TENSOR, OD_INT8, 1, OD_OPID_add_Tensor, OD_INT16},
        {OD_FLOAT16, P_TENSOR, OD_BFLOAT16, 1, OD_OPID_mul_Tensor, OD_FLOAT32},
        {OD_INT32, P_FLOAT, OD_NUM_DTYPES, 0, OD_OPID_mul_Scalar, OD_FLOAT32},
        {OD_FLOAT16, P_FLOAT, OD_NUM_DTYPES, 0, OD_OPID_mul_Scalar, OD_FLOAT16},
        {OD_INT8, P_INT, OD_NUM_DTYPES, 0, OD_OPID_add_Scalar, OD_INT8},
        {OD_BOOL, P_INT, OD_NUM_DTYPES, 0, OD_OPID_add_Scalar, OD_INT64},
        {OD_INT16, P_TENSOR, OD_FLOAT64, 0, OD_OPID_add_Tensor, OD_FLOAT64}, /* 0-dim float lifts the category */
        {OD_FLOAT16, P_TENSOR, OD_FLOAT64, 0, OD_OPID_add_Tensor, OD_FLOAT16}, /* but not the width */
        {OD_INT8, P_TENSOR, OD_INT64, 0, OD_OPID_add_Tensor, OD_INT8},
        {OD_INT64, P_TENSOR, OD_INT64, 1, OD_OPID_div_Tensor, OD_FLOAT32},
        {OD_BOOL, P_TENSOR, OD_BOOL, 1, OD_OPID_div_Tensor, OD_FLOAT32},
        {OD_UINT8, P_TENSOR, OD_INT64, 1, OD_OPID_maximum, OD_INT64},
        {OD_BOOL, P_TENSOR, OD_BOOL, 1, OD_OPID_add_Tensor, OD_BOOL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        od_tensor *a = t_rand(&two, 1, cases[k].a);
        od_tensor *b = cases[k].bkind == P_TENSOR ? t_rand(cases[k].bnd ? &two : NULL, cases[k].bnd, cases[k].b) : NULL;
        od_value args[3] = {tv(a), b ? tv(b) : cases[k].bkind == P_FLOAT ? od_double(1.5) : od_int(3), od_int(1)};
        int na = cases[k].id == OD_OPID_add_Tensor || cases[k].id == OD_OPID_add_Scalar ? 3 : 2;
        od_tensor *o = call1_ok(cases[k].id, args, na);
        TCHECK(o->dtype == cases[k].want, "case %zu: %s, want %s", k, dtn(o->dtype), dtn(cases[k].want));
        od_tensor_release(o);
        od_tensor_release(a);
        od_tensor_release(b);
    }
    /* unary float ops on integers and bools compute in float32; abs keeps the dtype */
    od_tensor *i = t_rand(&two, 1, OD_INT64), *bl = t_rand(&two, 1, OD_BOOL);
    od_value ai = tv(i), ab = tv(bl);
    od_tensor *o = call1_ok(OD_OPID_sqrt, &ai, 1);
    TCHECK(o->dtype == OD_FLOAT32, "sqrt(int64) must be float32");
    od_tensor_release(o);
    o = call1_ok(OD_OPID_sigmoid, &ab, 1);
    TCHECK(o->dtype == OD_FLOAT32, "sigmoid(bool) must be float32");
    od_tensor_release(o);
    o = call1_ok(OD_OPID_abs, &ai, 1);
    TCHECK(o->dtype == OD_INT64, "abs keeps int64");
    od_tensor_release(o);
    od_tensor_release(i);
    od_tensor_release(bl);
}

Test(cpu_ew, bad_inputs_report_statuses)
{
    int64_t two = 2, three = 3;
    od_tensor *f = t_rand(&two, 1, OD_FLOAT32), *g = t_rand(&three, 1, OD_FLOAT32);
    od_tensor *bl = t_rand(&two, 1, OD_BOOL), *in = t_rand(&two, 1, OD_INT32);
    {
        od_value a[3] = {tv(bl), tv(bl), od_int(1)};
        call_fails(OD_OPID_sub_Tensor, a, 3, OD_EINVAL,
                   "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                   "`logical_xor()` operator instead.");
        od_value b[3] = {tv(f), tv(bl), od_int(1)};
        call_fails(OD_OPID_sub_Tensor, b, 3, OD_EINVAL, "with a bool tensor is not supported");
        od_value c[3] = {tv(f), od_bool(true), od_int(1)};
        call_fails(OD_OPID_sub_Scalar, c, 3, OD_EINVAL, "with a bool tensor is not supported");
    }
    {
        od_value a[3] = {tv(in), tv(in), od_bool(true)};
        call_fails(OD_OPID_add_Tensor, a, 3, OD_EINVAL, "Boolean alpha only supported for Boolean results.");
        od_value b[3] = {tv(in), tv(in), od_double(0.5)};
        call_fails(OD_OPID_add_Tensor, b, 3, OD_EINVAL, "alpha must not be a floating point number");
    }
    {
        od_value a[3] = {tv(f), tv(f), od_str("round")};
        call_fails(OD_OPID_div_Tensor_mode, a, 3, OD_EINVAL,
                   "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'");
        od_value b[2] = {tv(f), tv(g)};
        call_fails(OD_OPID_mul_Tensor, b, 2, OD_OK, NULL); /* [2] and [3] do not broadcast */
        od_value c[2] = {tv(f), od_str("x")};
        call_fails(OD_OPID_mul_Tensor, c, 2, OD_OK, NULL);
    }
    {
        od_value a = tv(bl);
        call_fails(OD_OPID_neg, &a, 1, OD_EINVAL, "Negation, the `-` operator, on a bool tensor is not supported.");
        call_fails(OD_OPID_relu, &a, 1, OD_EINVAL, "Boolean inputs not supported for relu");
        call_fails(OD_OPID_abs, &a, 1, OD_EUNSUPPORTED, NULL);
        od_value gi[2] = {tv(in), od_str("none")};
        call_fails(OD_OPID_gelu, gi, 2, OD_EUNSUPPORTED, "not implemented for 'Int'");
        od_value gb[2] = {tv(f), od_str("fast")};
        call_fails(OD_OPID_gelu, gb, 2, OD_EINVAL, "approximate argument must be either none or tanh.");
        od_value si = tv(in);
        call_fails(OD_OPID_silu, &si, 1, OD_EUNSUPPORTED, NULL);
    }
    {
        od_value a[3] = {tv(f), od_none(), od_none()};
        call_fails(OD_OPID_clamp, a, 3, OD_EINVAL, "torch.clamp: At least one of 'min' or 'max' must not be None");
        call_fails(OD_OPID_clamp_Tensor, a, 3, OD_EINVAL, "torch.clamp: At least one of 'min' or 'max' must not be None");
        od_value w[3] = {tv(f), tv(f), tv(f)};
        call_fails(OD_OPID_where_self, w, 3, OD_EMISMATCH, "where expected condition to be a boolean tensor");
        od_value p[2] = {tv(bl), od_bool(true)};
        call_fails(OD_OPID_pow_Tensor_Scalar, p, 2, OD_EUNSUPPORTED, NULL);
    }
    {
        /* tensors on two devices (meta and cpu): torch's message */
        od_tensor *m = t_empty(&two, 1, OD_FLOAT32, META);
        od_value a[3] = {tv(m), tv(f), od_int(1)};
        call_fails(OD_OPID_add_Tensor, a, 3, OD_EMISMATCH,
                   "Expected all tensors to be on the same device, but found at least two devices, meta and cpu!");
        od_tensor_release(m);
    }
    od_tensor_release(f);
    od_tensor_release(g);
    od_tensor_release(bl);
    od_tensor_release(in);
}

/* 0-dim CPU tensors mix with tensors of any device in the shape rules. */
Test(cpu_ew, zero_dim_cpu_tensor_is_a_scalar_for_device_checks)
{
    int64_t two = 2;
    od_tensor *m = t_empty(&two, 1, OD_FLOAT32, META);
    od_tensor *s = t_rand(NULL, 0, OD_FLOAT32);
    od_value args[3] = {tv(m), tv(s), od_int(1)};
    od_out_spec spec[1];
    int n = 0;
    od_error err;
    od_stack st;
    od_stack_init(&st, args, 3);
    od_status rc = od_shape_binary(OD_OPID_add_Tensor, &st, spec, &n, &err);
    TCHECK(rc == OD_OK && spec[0].device.type == OD_DEV_META && spec[0].ndim == 1, "meta + 0-dim cpu: %s",
           rc ? err.message : "wrong spec");
    od_tensor_release(m);
    od_tensor_release(s);
}

/* ---- clone / copy_ / fill_ --------------------------------------------------------------------- */

Test(cpu_ew, clone_copies_in_the_asked_layout)
{
    for (int rep = 0; rep < 200; rep++) {
        int64_t sz[OD_MAX_DIMS];
        int nd = rand_shape(sz, rep % 40 == 39);
        od_dtype dt = rand_dtype();
        od_tensor *x = gen_tensor(sz, nd, dt, rand_layout(), 10);
        /* preserve_format (None) keeps a dense layout (empty_like); contiguous_format does not */
        bool preserve = rep % 2;
        od_value args[2] = {tv(x), preserve ? od_none() : od_int(OD_MF_CONTIGUOUS)};
        od_tensor *o = call1_ok(OD_OPID_clone, args, 2);
        bool keeps = preserve && od_tensor_is_non_overlapping_and_dense(x) && !od_tensor_is_contiguous(x);
        bool layout_ok = od_tensor_is_contiguous(o) == !keeps;
        for (int d = 0; keeps && d < nd; d++)
            layout_ok &= sz[d] == 1 || o->strides[d] == x->strides[d];
        TCHECK(o->dtype == dt && same_shape(o, sz, nd) && layout_ok &&
                   (od_tensor_numel(o) == 0 || od_tensor_data(o) != od_tensor_data(x)),
               "clone: wrong metadata");
        if (od_tensor_numel(o) > 0) {
            int64_t idx[OD_MAX_DIMS] = {0};
            do {
                rv a = get_rv(x, idx), b = get_rv(o, idx);
                TCHECK(a.is_int ? a.i == b.i : (a.d == b.d || (isnan(a.d) && isnan(b.d))), "clone value differs");
            } while (next_index(idx, sz, nd));
        }
        od_tensor_release(o);
        od_tensor_release(x);
    }
}

Test(cpu_ew, copy_broadcasts_and_converts)
{
    for (int rep = 0; rep < 300; rep++) {
        int64_t sz[OD_MAX_DIMS], ssz[OD_MAX_DIMS];
        int nd = rand_shape(sz, rep % 40 == 39);
        int snd = bcast_shape(sz, nd, ssz);
        od_dtype dd = rand_dtype(), sd = rand_dtype();
        int lay = (int)(rng_next() % 2); /* destination: contiguous or strided, never expanded */
        od_tensor *dst = gen_tensor(sz, nd, dd, lay, 0);
        /* float -> int casts of NaN/Inf/huge values are platform-defined: keep them finite there */
        od_tensor *src = gen_tensor(ssz, snd, sd, rand_layout(), isflt(dd) ? 10 : 0);
        od_value args[3] = {tv(dst), tv(src), od_bool(false)};
        od_tensor *o = call1_ok(OD_OPID_copy_, args, 3);
        TCHECK(o == dst, "copy_ must return self");
        if (od_tensor_numel(dst) > 0) {
            int64_t idx[OD_MAX_DIMS] = {0};
            do {
                int64_t si[OD_MAX_DIMS];
                bidx(src, idx, nd, si);
                rv w = ref_cast(get_rv(src, si), dd), g = get_rv(dst, idx);
                TCHECK(isflt(dd) ? (g.d == w.d || (isnan(g.d) && isnan(w.d))) : g.i == w.i,
                       "copy_ %s <- %s: got %.17g want %.17g", dtn(dd), dtn(sd), g.d, w.d);
            } while (next_index(idx, sz, nd));
        }
        od_tensor_release(o);
        od_tensor_release(dst);
        od_tensor_release(src);
    }
}

Test(cpu_ew, copy_between_overlapping_views)
{
    int64_t n = 50000 + (int64_t)rng_int(0, 999);
    od_tensor *x = t_rand(&n, 1, OD_INT32);
    int32_t *orig = malloc((size_t)n * sizeof *orig);
    memcpy(orig, od_tensor_data(x), (size_t)n * sizeof *orig);
    od_tensor *hi = NULL, *lo = NULL;
    OKCALL(od_tensor_slice(x, 0, 1, n, 1, &hi, &e_));
    OKCALL(od_tensor_slice(x, 0, 0, n - 1, 1, &lo, &e_));
    od_value args[3] = {tv(hi), tv(lo), od_bool(false)}; /* x[1:] = x[:-1] */
    od_tensor *o = call1_ok(OD_OPID_copy_, args, 3);
    const int32_t *p = od_tensor_data(x);
    TCHECK(p[0] == orig[0], "x[0] must be untouched");
    for (int64_t i = 1; i < n; i++)
        TCHECK(p[i] == orig[i - 1], "overlapping copy_ read an overwritten element at %" PRId64, i);
    od_tensor_release(o);
    /* copy_ into an expanded view is refused */
    int64_t one = 1, four[2] = {4, 3};
    od_tensor *small = t_rand(&one, 1, OD_FLOAT32), *e = NULL, *src = t_rand(four, 2, OD_FLOAT32);
    OKCALL(od_tensor_expand(small, four, 2, &e, &e_));
    od_value bad[3] = {tv(e), tv(src), od_bool(false)};
    call_fails(OD_OPID_copy_, bad, 3, OD_EINVAL, "more than one element of the written-to tensor");
    od_value bad2[3] = {tv(src), tv(x), od_bool(false)};
    call_fails(OD_OPID_copy_, bad2, 3, OD_EMISMATCH, NULL);
    od_tensor_release(e);
    od_tensor_release(small);
    od_tensor_release(src);
    od_tensor_release(hi);
    od_tensor_release(lo);
    od_tensor_release(x);
    free(orig);
}

Test(cpu_ew, fill_every_dtype_and_layout)
{
    for (int rep = 0; rep < 200; rep++) {
        int64_t sz[OD_MAX_DIMS];
        int nd = rand_shape(sz, rep % 40 == 39);
        od_dtype dt = rand_dtype();
        od_tensor *x = gen_tensor(sz, nd, dt, (int)(rng_next() % 2), 0);
        arg v = scalar_arg(dt, 0);
        if (v.kind == P_FLOAT && !isflt(dt)) /* in range: c10 refuses out-of-range doubles */
            v.v = RD(trunc(rng_uniform(dt == OD_UINT8 ? 0 : -100, 100)));
        if (v.kind == P_INT && !isflt(dt) && dt != OD_BOOL)
            v.v = RI(rng_int(int_min_of(dt) > -1000 ? int_min_of(dt) : -1000, int_max_of(dt) < 1000 ? int_max_of(dt) : 1000));
        od_value args[2] = {tv(x), arg_value(&v)};
        od_tensor *o = call1_ok(OD_OPID_fill__Scalar, args, 2);
        TCHECK(o == x, "fill_ must return self");
        rv w = ref_cast(v.v, dt);
        if (od_tensor_numel(x) > 0) {
            int64_t idx[OD_MAX_DIMS] = {0};
            do {
                rv g = get_rv(x, idx);
                TCHECK(isflt(dt) ? g.d == w.d : g.i == w.i, "fill_ %s: got %.17g want %.17g", dtn(dt), g.d, w.d);
            } while (next_index(idx, sz, nd));
        }
        od_tensor_release(o);
        od_tensor_release(x);
    }
    int64_t two = 2;
    od_tensor *i8 = t_rand(&two, 1, OD_INT8), *u8 = t_rand(&two, 1, OD_UINT8), *h = t_rand(&two, 1, OD_FLOAT16);
    od_value a[2] = {tv(i8), od_int(300)};
    call_fails(OD_OPID_fill__Scalar, a, 2, OD_EINVAL, "value cannot be converted to type int8_t without overflow");
    od_value b[2] = {tv(h), od_double(1e6)};
    call_fails(OD_OPID_fill__Scalar, b, 2, OD_EINVAL, "without overflow");
    od_value c[2] = {tv(u8), od_int(-1)}; /* wraps, like torch */
    od_tensor *o = call1_ok(OD_OPID_fill__Scalar, c, 2);
    TCHECK(get_i(u8, &(int64_t){0}) == 255, "uint8 fill_(-1) must wrap to 255");
    od_tensor_release(o);
    od_tensor_release(i8);
    od_tensor_release(u8);
    od_tensor_release(h);
}

/* ---- arange ---------------------------------------------------------------------------------------- */

/* Element i of a floating arange of size n as torch 1.13's CPU kernel (its
 * AVX2 build) computes it, measured against torch: blocks of two vectors
 * of V lanes (8 float32, 4 float64, 16 of the 16-bit types) from 0, each
 * vector's base start + step * b and lane j base + j * step, fused, in the
 * accumulate type (float for the 16-bit types, else double) and rounded to
 * the dtype; the elements after the last whole block start + step * i. */
static rv arange_ref(double s0, double st, int64_t i, int64_t n, od_dtype dt)
{
    int V = dt == OD_FLOAT64 ? 4 : dt == OD_FLOAT32 ? 8 : 16;
    bool f32acc = dt == OD_FLOAT16 || dt == OD_BFLOAT16;
    int64_t blocks_end = n / (2 * V) * (2 * V);
    if (i >= blocks_end)
        return ref_cast(RD(f32acc ? (double)fmaf((float)st, (float)i, (float)s0) : fma(st, (double)i, s0)), dt);
    int64_t b = i - i % V;
    rv base = ref_cast(RD(f32acc ? (double)fmaf((float)st, (float)b, (float)s0) : fma(st, (double)b, s0)), dt);
    if (i == b)
        return base;
    double j = (double)(i - b);
    return ref_cast(RD(f32acc ? (double)fmaf((float)j, (float)st, (float)base.d) : fma(j, st, base.d)), dt);
}

Test(cpu_ew, arange_sizes_values_and_dtypes)
{
    for (int rep = 0; rep < 400; rep++) {
        int ov = (int)(rng_next() % 3); /* arange(end), .start, .start_step */
        bool ints = rng_next() % 2;     /* Python ints or floats as bounds */
        double s0, e0, st0;
        if (ints) {
            st0 = ov == 2 ? (double)(rng_int(1, 7) * (rng_next() % 2 ? 1 : -1)) : 1;
            s0 = ov == 0 ? 0 : (double)rng_int(-50, 50);
            e0 = s0 + st0 * (double)rng_int(0, 40) + (st0 > 0 ? 1 : -1) * (double)rng_int(0, (int64_t)fabs(st0) - 1);
            if (rng_next() % 10 == 0) /* wrong direction */
                e0 = s0 - st0 * 3;
        } else {
            st0 = ov == 2 ? rng_uniform(0.05, 3) * (rng_next() % 2 ? 1 : -1) : 1;
            s0 = ov == 0 ? 0 : rng_uniform(-10, 10);
            e0 = s0 + st0 * rng_uniform(0, 60);
            if (rng_next() % 10 == 0)
                e0 = s0 - st0 * 3;
        }
        od_value args[7];
        int k = 0;
#define NUM_(x) (ints ? od_int((int64_t)(x)) : od_double(x))
        if (ov > 0)
            args[k++] = NUM_(s0);
        args[k++] = NUM_(e0);
        if (ov == 2)
            args[k++] = NUM_(st0);
#undef NUM_
        bool give_dt = rng_next() % 2 == 0;
        od_dtype want = ints ? OD_INT64 : OD_FLOAT32;
        if (give_dt)
            do
                want = PICK(ALL_DTS);
            while (want == OD_BOOL);
        args[k++] = give_dt ? od_dtype_v(want) : od_none();
        args[k++] = od_none();
        args[k++] = rng_next() % 2 ? od_none() : od_device_v(CPU);
        args[k++] = od_none();
        od_opid id = ov == 0 ? OD_OPID_arange : ov == 1 ? OD_OPID_arange_start : OD_OPID_arange_start_step;
        /* ATen: integer dtypes take the bounds as int64 (truncated); the size
         * comes from int64 arithmetic for int64 and from the original doubles
         * for every other dtype. */
        double xs = s0, xe = e0, xst = st0;
        if (!isflt(want)) {
            xs = trunc(s0);
            xe = trunc(e0);
            xst = trunc(st0);
        }
        if (xst == 0) {
            call_fails(id, args, k, OD_EINVAL, "step must be nonzero");
            continue;
        }
        if ((xst > 0 && xe < xs) || (xst < 0 && xe > xs)) {
            call_fails(id, args, k, OD_EINVAL, "upper bound and larger bound inconsistent with step sign");
            continue;
        }
        int64_t size;
        if (want == OD_INT64) {
            int64_t is = (int64_t)xs, ie = (int64_t)xe, ist = (int64_t)xst;
            size = (ie - is + ist - (ist > 0 ? 1 : -1)) / ist;
        } else {
            size = (int64_t)ceil((e0 - s0) / st0);
        }
        od_tensor *o = call1_ok(id, args, k);
        TCHECK(o->dtype == want && o->ndim == 1 && o->sizes[0] == size,
               "arange(%g, %g, %g, %s): got %s size %" PRId64 ", want size %" PRId64, s0, e0, st0, dtn(want),
               dtn(o->dtype), o->ndim ? o->sizes[0] : -1, size);
        for (int64_t i = 0; i < size; i++) {
            rv w = isflt(want) ? arange_ref(xs, xst, i, size, want) : RI(wrapi((int64_t)xs + i * (int64_t)xst, want));
            rv g = get_rv(o, &i);
            TCHECK(isflt(want) ? g.d == w.d : g.i == w.i, "arange(%g, %g, %g, %s)[%" PRId64 "] = %.17g, want %.17g", s0,
                   e0, st0, dtn(want), i, g.d, w.d);
        }
        od_tensor_release(o);
    }
}

Test(cpu_ew, arange_errors)
{
    od_value a[7] = {od_int(0), od_int(5), od_int(0), od_none(), od_none(), od_none(), od_none()};
    call_fails(OD_OPID_arange_start_step, a, 7, OD_EINVAL, "step must be nonzero");
    od_value b[7] = {od_int(5), od_int(0), od_int(1), od_none(), od_none(), od_none(), od_none()};
    call_fails(OD_OPID_arange_start_step, b, 7, OD_EINVAL, "upper bound and larger bound inconsistent with step sign");
    od_value c[6] = {od_double(0), od_double(INFINITY), od_none(), od_none(), od_none(), od_none()};
    call_fails(OD_OPID_arange_start, c, 6, OD_EINVAL, "unsupported range");
    od_value d[5] = {od_double(NAN), od_none(), od_none(), od_none(), od_none()};
    call_fails(OD_OPID_arange, d, 5, OD_EINVAL, NULL);
    od_value e[5] = {od_int(4), od_dtype_v(OD_BOOL), od_none(), od_none(), od_none()};
    call_fails(OD_OPID_arange, e, 5, OD_EUNSUPPORTED, NULL);
    /* a large range takes the parallel path */
    od_value f[5] = {od_int(100000), od_none(), od_none(), od_none(), od_none()};
    od_tensor *o = call1_ok(OD_OPID_arange, f, 5);
    const int64_t *p = od_tensor_data(o);
    for (int64_t i = 0; i < 100000; i++)
        TCHECK(p[i] == i, "arange(100000)[%" PRId64 "] = %" PRId64, i, p[i]);
    od_tensor_release(o);
}

/* ---- rand / randn ------------------------------------------------------------------------------- */

static od_tensor *call_random(od_opid id, const int64_t *sz, int nd, od_value dtype)
{
    od_value args[5] = {ilist(sz, nd), dtype, od_none(), od_none(), od_none()};
    return call1_ok(id, args, 5);
}

Test(cpu_ew, rand_uniform_in_unit_interval)
{
    for (int k = 0; k < 4; k++) {
        od_dtype dt = FLOAT_DTS[k];
        int64_t sz[2] = {300, 400};
        od_tensor *o = call_random(OD_OPID_rand, sz, 2, od_dtype_v(dt));
        TCHECK(o->dtype == dt && same_shape(o, sz, 2), "rand: metadata");
        double sum = 0, sq = 0;
        int64_t n = 120000, idx[2] = {0, 0};
        do {
            double v = get_d(o, idx);
            TCHECK(v >= 0 && v < 1, "rand %s gave %g", dtn(dt), v);
            sum += v;
            sq += v * v;
        } while (next_index(idx, sz, 2));
        double mean = sum / n, var = sq / n - mean * mean;
        TCHECK(fabs(mean - 0.5) < 0.01 && fabs(var - 1.0 / 12) < 0.01, "rand %s: mean %g var %g", dtn(dt), mean, var);
        od_tensor_release(o);
    }
    int64_t one = 3;
    od_tensor *o = call_random(OD_OPID_rand, &one, 1, od_none());
    TCHECK(o->dtype == OD_FLOAT32, "rand defaults to float32");
    od_tensor_release(o);
    od_value bad[5] = {ilist(&one, 1), od_dtype_v(OD_INT64), od_none(), od_none(), od_none()};
    call_fails(OD_OPID_rand, bad, 5, OD_EUNSUPPORTED, NULL);
    int64_t neg = -1;
    od_value bad2[5] = {ilist(&neg, 1), od_none(), od_none(), od_none(), od_none()};
    call_fails(OD_OPID_randn, bad2, 5, OD_EINVAL, "negative dimension");
}

Test(cpu_ew, randn_normal_and_manual_seed)
{
    int64_t n = 200001;
    od_tensor *o = call_random(OD_OPID_randn, &n, 1, od_dtype_v(OD_FLOAT64));
    const double *p = od_tensor_data(o);
    double sum = 0, sq = 0, c3 = 0;
    for (int64_t i = 0; i < n; i++) {
        TCHECK(isfinite(p[i]), "randn gave %g", p[i]);
        sum += p[i];
        sq += p[i] * p[i];
        c3 += p[i] * p[i] * p[i];
    }
    double mean = sum / n, var = sq / n - mean * mean;
    TCHECK(fabs(mean) < 0.015 && fabs(var - 1) < 0.02 && fabs(c3 / n) < 0.05, "randn: mean %g var %g skew %g", mean,
           var, c3 / n);
    od_tensor_release(o);
    /* the seed fixes the stream; another seed changes it */
    uint64_t seed = rng_next();
    int64_t m = 1000;
    od_cpu_manual_seed(seed);
    od_tensor *a = call_random(OD_OPID_randn, &m, 1, od_none());
    od_cpu_manual_seed(seed);
    od_tensor *b = call_random(OD_OPID_randn, &m, 1, od_none());
    od_cpu_manual_seed(seed + 1);
    od_tensor *c = call_random(OD_OPID_randn, &m, 1, od_none());
    TCHECK(!memcmp(od_tensor_data(a), od_tensor_data(b), (size_t)m * 4), "same seed, different stream");
    TCHECK(memcmp(od_tensor_data(a), od_tensor_data(c), (size_t)m * 4), "different seeds, same stream");
    od_tensor_release(a);
    od_tensor_release(b);
    od_tensor_release(c);
    int64_t zero = 0;
    o = call_random(OD_OPID_rand, &zero, 1, od_none());
    TCHECK(od_tensor_numel(o) == 0, "rand([0]) is empty");
    od_tensor_release(o);
}

/* ---- every OD_EW1 / OD_EW2 operator of ops.def (found by od_ew_arity) ----
 * Their values are checked against numpy over HTTP (tests/integration/
 * test_ew_ops.py, contiguous inputs); here the same calls on random
 * non-contiguous, expanded, broadcast, 0-dim and empty inputs of every dtype
 * (NaN/Inf and integer extremes mixed in) must give what the operator gives
 * on contiguous copies of those inputs: same status and message, same
 * dtype and shape, the same integers and bools exactly and the same floats
 * within 4 ulps (the contiguous loops are vectorised, with FMA). The
 * contiguous loops of some operators run ATen's Sleef path and the strided
 * ones libm's, as torch's do, so two allowances: where the result cancels
 * terms of order 1 (logaddexp's max + log1p(...), lgamma near 1 and 2) the
 * 4 ulps are of 1 rather than of the result (scale_floor 1); and a
 * subnormal result, whose intermediates kept only a few bits (mish of
 * -100 is -100 * exp(-100)), may differ by 256 of the smallest subnormals. */

static bool ew_same(rv a, rv b, od_dtype dt, double scale_floor)
{
    if (!isflt(dt))
        return a.i == b.i;
    if (isnan(a.d) || isnan(b.d))
        return isnan(a.d) && isnan(b.d);
    if (a.d == b.d)
        return true;
    double eps = dt == OD_FLOAT64 ? 0x1p-52 : dt == OD_FLOAT32 ? 0x1p-23 : dt == OD_FLOAT16 ? 0x1p-10 : 0x1p-7;
    double tiny = dt == OD_FLOAT64 ? 0x1p-1074 : dt == OD_FLOAT32 ? 0x1p-149 : dt == OD_FLOAT16 ? 0x1p-24 : 0x1p-133;
    double normal = dt == OD_FLOAT64 ? 0x1p-1022 : dt == OD_FLOAT16 ? 0x1p-14 : 0x1p-126;
    if (fabs(a.d) < normal && fabs(b.d) < normal && fabs(a.d - b.d) <= 256 * tiny)
        return true;
    return fabs(a.d - b.d) <= 4 * eps * fmax(fmax(fabs(a.d), fabs(b.d)), scale_floor);
}

Test(cpu_ew, per_element_ops_are_layout_independent)
{
    for (int o = 0; o < OD_NUM_BUILTIN_OPS; o++) {
        od_opid id = (od_opid)o;
        int arity = od_ew_arity(id);
        if (!arity)
            continue;
        const od_schema *sc = od_op_schema(od_builtin(id));
        for (int rep = 0; rep < 40; rep++) {
            int64_t out[OD_MAX_DIMS], sh[OD_MAX_DIMS];
            int nd = rand_shape(out, rep == 0);
            od_dtype dt = rand_dtype();
            int special = rng_next() % 2 ? 0 : 8;
            od_value args[2], cargs[2];
            for (int k = 0; k < arity; k++) {
                if (sc->args[k].type->kind == OD_TY_SCALAR) {
                    arg s = scalar_arg(dt, special);
                    args[k] = cargs[k] = arg_value(&s);
                    continue;
                }
                int n = k == 0 ? nd : bcast_shape(out, nd, sh);
                od_tensor *t = gen_tensor(k == 0 ? out : sh, n, k == 0 ? dt : rand_dtype(), rand_layout(), special);
                od_tensor *c = NULL;
                OKCALL(od_cpu_to_dtype(t, t->dtype, &c, &e_));
                args[k] = od_tensor_v(t);
                cargs[k] = od_tensor_v(c);
            }
            od_stack s1, s2;
            od_error e1, e2;
            od_error_clear(&e1);
            od_error_clear(&e2);
            od_status st1 = od_call_builtin(id, args, arity, &s1, &e1);
            od_status st2 = od_call_builtin(id, cargs, arity, &s2, &e2);
            const char *name = od_op_name(od_builtin(id));
            double scale_floor =
                id == OD_OPID_logaddexp || id == OD_OPID_logaddexp2 || id == OD_OPID_lgamma ? 1.0 : 0.0;
            TCHECK(st1 == st2 && (st1 == OD_OK || !strcmp(e1.message, e2.message)),
                   "%s: strided says %s (%s), contiguous says %s (%s)", name, od_status_code(st1), e1.message,
                   od_status_code(st2), e2.message);
            if (st1 == OD_OK && st2 == OD_OK) {
                od_tensor *a = s1.rets[0].u.t, *b = s2.rets[0].u.t;
                TCHECK(a->dtype == b->dtype && same_shape(a, b->sizes, b->ndim), "%s: dtype/shape differ", name);
                int64_t idx[OD_MAX_DIMS] = {0};
                if (od_tensor_numel(a) > 0) {
                    do {
                        rv x = get_rv(a, idx), y = get_rv(b, idx);
                        if (!ew_same(x, y, a->dtype, scale_floor)) {
                            char where[128];
                            idx_str(idx, a->ndim, where, sizeof where);
                            TCHECK(false, "%s (%s) at %s: strided %.17g, contiguous %.17g", name,
                                   od_dtype_name(a->dtype), where, x.d, y.d);
                        }
                    } while (next_index(idx, a->sizes, a->ndim));
                }
                od_stack_release_rets(&s1);
                od_stack_release_rets(&s2);
            }
            for (int k = 0; k < arity; k++) {
                if (args[k].tag == OD_T_TENSOR) {
                    od_tensor_release(args[k].u.t);
                    od_tensor_release(cargs[k].u.t);
                }
            }
        }
    }
}

/* Scalars that torch converts to the result dtype with c10's checks: alpha
 * of add/sub, beta/alpha of addmm, pow's exponent into an integral result,
 * where's Scalar branches. The other operand of add.Scalar is a wrapped
 * number and wraps. sub is add with alpha negated (wrapping at -2^63), and a
 * bool result takes alpha as a bool (issue 17, classes 1-3). Cases and
 * messages as PyTorch 1.13 gives them. */
Test(cpu_ew, scalars_converted_with_overflow_checks_and_alpha_as_torch_has_it)
{
    od_tensor *i8 = vec_i(OD_INT8, (int64_t[]){1, 2}, 2);
    od_tensor *u8 = vec_i(OD_UINT8, (int64_t[]){1}, 1);
    od_tensor *f32 = vec_d(OD_FLOAT32, (double[]){1, 2}, 2);
    od_tensor *f16 = vec_d(OD_FLOAT16, (double[]){1, 2}, 2);
    od_tensor *bf = vec_d(OD_BFLOAT16, (double[]){1, 2}, 2);
    od_value a1[3] = {tv(i8), tv(i8), od_int(300)};
    call_fails(OD_OPID_add_Tensor, a1, 3, OD_EINVAL, "value cannot be converted to type int8_t without overflow");
    call_fails(OD_OPID_sub_Tensor, a1, 3, OD_EINVAL, "int8_t without overflow");
    a1[2] = od_int(-129);
    call_fails(OD_OPID_add_Tensor, a1, 3, OD_EINVAL, "int8_t without overflow");
    a1[2] = od_int(127); /* fits: 1 + 127 wraps to -128 */
    od_tensor *o = call1_ok(OD_OPID_add_Tensor, a1, 3);
    TCHECK(((int8_t *)od_tensor_data(o))[0] == -128, "int8 1 + 127*1");
    od_tensor_release(o);
    /* sub adds the negated alpha, and checks that: 128 fits as -128, -128 does not */
    a1[2] = od_int(128);
    o = call1_ok(OD_OPID_sub_Tensor, a1, 3);
    TCHECK(((int8_t *)od_tensor_data(o))[0] == -127 && ((int8_t *)od_tensor_data(o))[1] == 2, "int8 sub alpha=128");
    od_tensor_release(o);
    a1[2] = od_int(-128);
    call_fails(OD_OPID_sub_Tensor, a1, 3, OD_EINVAL, "int8_t without overflow");
    /* bool results take alpha as a bool: true + (-1) * true is true */
    od_tensor *bt = vec_i(OD_BOOL, (int64_t[]){1, 0}, 2), *bo = vec_i(OD_BOOL, (int64_t[]){1, 1}, 2);
    od_value ab[3] = {tv(bt), tv(bo), od_int(-1)};
    o = call1_ok(OD_OPID_add_Tensor, ab, 3);
    TCHECK(((bool *)od_tensor_data(o))[0] && ((bool *)od_tensor_data(o))[1], "bool add with alpha -1");
    od_tensor_release(o);
    ab[2] = od_int(0);
    o = call1_ok(OD_OPID_add_Tensor, ab, 3);
    TCHECK(((bool *)od_tensor_data(o))[0] && !((bool *)od_tensor_data(o))[1], "bool add with alpha 0");
    od_tensor_release(o);
    od_tensor_release(bt);
    od_tensor_release(bo);
    /* alpha = -2^63 in sub: negated with wraparound, as torch does */
    od_tensor *one = vec_d(OD_FLOAT32, (double[]){1}, 1);
    od_value am[3] = {tv(one), od_int(1), od_int(INT64_MIN)};
    o = call1_ok(OD_OPID_sub_Scalar, am, 3);
    TCHECK(((float *)od_tensor_data(o))[0] == -9223372036854775808.0f, "sub.Scalar(1, 1, alpha=-2^63) = %g",
           ((float *)od_tensor_data(o))[0]);
    od_tensor_release(o);
    od_tensor_release(one);
    od_tensor *five = vec_i(OD_INT64, (int64_t[]){5}, 1), *o1 = vec_i(OD_INT64, (int64_t[]){1}, 1);
    od_value ai[3] = {tv(five), tv(o1), od_int(INT64_MIN)};
    o = call1_ok(OD_OPID_sub_Tensor, ai, 3);
    TCHECK(((int64_t *)od_tensor_data(o))[0] == -9223372036854775803LL, "int64 5 - (-2^63) * 1 wraps");
    od_tensor_release(o);
    od_tensor_release(five);
    od_tensor_release(o1);
    od_value a2[3] = {tv(i8), od_int(300), od_int(1)}; /* a wrapped number wraps */
    o = call1_ok(OD_OPID_add_Scalar, a2, 3);
    TCHECK(((int8_t *)od_tensor_data(o))[0] == 45, "int8 1 + 300 wraps to 45");
    od_tensor_release(o);
    a2[1] = od_int(3);
    a2[2] = od_int(300);
    call_fails(OD_OPID_sub_Scalar, a2, 3, OD_EINVAL, "int8_t without overflow");
    od_value a3[3] = {tv(u8), tv(u8), od_int(-1)}; /* uint8 takes -255..-1 */
    o = call1_ok(OD_OPID_add_Tensor, a3, 3);
    TCHECK(((uint8_t *)od_tensor_data(o))[0] == 0, "uint8 1 + (-1)*1");
    od_tensor_release(o);
    a3[2] = od_int(256);
    call_fails(OD_OPID_add_Tensor, a3, 3, OD_EINVAL, "uint8_t without overflow");
    od_value a4[3] = {tv(f32), tv(f32), od_double(1e300)};
    call_fails(OD_OPID_add_Tensor, a4, 3, OD_EINVAL, "value cannot be converted to type float without overflow");
    a4[0] = a4[1] = tv(f16);
    a4[2] = od_double(1e5);
    call_fails(OD_OPID_add_Tensor, a4, 3, OD_EINVAL, "type at::Half without overflow");
    a4[0] = a4[1] = tv(bf);
    a4[2] = od_double(1e300);
    call_fails(OD_OPID_add_Tensor, a4, 3, OD_EINVAL, "type at::BFloat16 without overflow");
    od_value p1[2] = {tv(i8), od_int(300)};
    call_fails(OD_OPID_pow_Tensor_Scalar, p1, 2, OD_EINVAL, "int8_t without overflow");
    od_value p2[2] = {tv(f32), od_double(1e300)}; /* a floating result: inf, no error */
    o = call1_ok(OD_OPID_pow_Tensor_Scalar, p2, 2);
    TCHECK(isinf(((float *)od_tensor_data(o))[1]), "2^1e300 in float32");
    od_tensor_release(o);
    od_tensor *cond = vec_i(OD_BOOL, (int64_t[]){1, 0}, 2);
    od_value w[3] = {tv(cond), tv(i8), od_int(300)};
    call_fails(OD_OPID_where_ScalarOther, w, 3, OD_EINVAL, "int8_t without overflow");
    int64_t sz[2] = {2, 2};
    od_tensor *m = t_rand(sz, 2, OD_INT8);
    od_value mm[5] = {tv(m), tv(m), tv(m), od_int(300), od_int(1)};
    call_fails(OD_OPID_addmm, mm, 5, OD_EINVAL, "int8_t without overflow");
    od_tensor_release(m);
    od_tensor_release(cond);
    od_tensor_release(i8);
    od_tensor_release(u8);
    od_tensor_release(f32);
    od_tensor_release(f16);
    od_tensor_release(bf);
}

/* clamp.Tensor on bool with one bound is clamp_min / clamp_max (torch 1.13
 * has them for bool); with both bounds it is not implemented, as in torch
 * (issue 17, class 7). */
Test(cpu_ew, clamp_tensor_on_bool_with_one_bound)
{
    od_tensor *b = vec_i(OD_BOOL, (int64_t[]){1, 0}, 2);
    od_tensor *t = vec_i(OD_BOOL, (int64_t[]){1, 1}, 2), *f = vec_i(OD_BOOL, (int64_t[]){0, 0}, 2);
    od_value lo[3] = {tv(b), tv(t), od_none()};
    od_tensor *o = call1_ok(OD_OPID_clamp_Tensor, lo, 3);
    TCHECK(o->dtype == OD_BOOL && ((bool *)od_tensor_data(o))[0] && ((bool *)od_tensor_data(o))[1],
           "clamp(min=true) is all true");
    od_tensor_release(o);
    od_value hi[3] = {tv(b), od_none(), tv(f)};
    o = call1_ok(OD_OPID_clamp_Tensor, hi, 3);
    TCHECK(!((bool *)od_tensor_data(o))[0] && !((bool *)od_tensor_data(o))[1], "clamp(max=false) is all false");
    od_tensor_release(o);
    od_value lo2[3] = {tv(b), tv(f), od_none()}; /* min=false keeps the input */
    o = call1_ok(OD_OPID_clamp_Tensor, lo2, 3);
    TCHECK(((bool *)od_tensor_data(o))[0] && !((bool *)od_tensor_data(o))[1], "clamp(min=false) keeps it");
    od_tensor_release(o);
    od_value both[3] = {tv(b), tv(f), tv(t)};
    call_fails(OD_OPID_clamp_Tensor, both, 3, OD_EUNSUPPORTED, "not implemented for 'Bool'");
    od_tensor_release(b);
    od_tensor_release(t);
    od_tensor_release(f);
}

/* Cases where torch 1.13's CPU kernels round or branch in a way a plain
 * float evaluation does not (issue 17, classes 4, 5, 6 and 14); each value
 * below is what torch returns. */
static double first_d(od_tensor *o, int64_t i) { return get_d(o, &i); }

Test(cpu_ew, torch_rounding_and_branches)
{
    /* float16: alpha * other is rounded to 16 bits first, so 2 * 40000 is inf */
    od_tensor *a = vec_d(OD_FLOAT16, (double[]){-60000}, 1), *b = vec_d(OD_FLOAT16, (double[]){40000}, 1);
    od_value add[3] = {tv(a), tv(b), od_int(2)};
    od_tensor *o = call1_ok(OD_OPID_add_Tensor, add, 3);
    TCHECK(isinf(first_d(o, 0)) && first_d(o, 0) > 0, "float16 -60000 + 2 * 40000 is inf");
    od_tensor_release(o);
    /* bfloat16: the quotient is rounded before trunc, -10.99 -> -11.0 -> -11 */
    od_tensor *n = vec_d(OD_BFLOAT16, (double[]){1.3046875}, 1), *d = vec_d(OD_BFLOAT16, (double[]){-0.11865234375}, 1);
    od_value dv[3] = {tv(n), tv(d), od_str("trunc")};
    o = call1_ok(OD_OPID_div_Tensor_mode, dv, 3);
    TCHECK(first_d(o, 0) == -11.0, "bfloat16 trunc division gives %g, torch -11", first_d(o, 0));
    od_tensor_release(o);
    /* pow(x, 0.5) is sqrt on float32 (-0.0 stays -0.0, -inf is NaN), not on float16 */
    od_tensor *x32 = vec_d(OD_FLOAT32, (double[]){-INFINITY, -0.0, 4}, 3);
    od_tensor *x16 = vec_d(OD_FLOAT16, (double[]){-INFINITY, -0.0, 4}, 3);
    od_value p32[2] = {tv(x32), od_double(0.5)}, p16[2] = {tv(x16), od_double(0.5)};
    o = call1_ok(OD_OPID_pow_Tensor_Scalar, p32, 2);
    TCHECK(isnan(first_d(o, 0)) && first_d(o, 1) == 0.0 && signbit(first_d(o, 1)) && first_d(o, 2) == 2.0,
           "float32 pow(x, 0.5) is sqrt");
    od_tensor_release(o);
    o = call1_ok(OD_OPID_pow_Tensor_Scalar, p16, 2);
    TCHECK(isinf(first_d(o, 0)) && first_d(o, 1) == 0.0 && !signbit(first_d(o, 1)), "float16 pow(x, 0.5) is powf");
    od_tensor_release(o);
    /* an odd integer exponent above 2^24 stays odd on float32 */
    od_tensor *m1 = vec_d(OD_FLOAT32, (double[]){-1}, 1);
    od_value pe[2] = {tv(m1), od_int(16777217)};
    o = call1_ok(OD_OPID_pow_Tensor_Scalar, pe, 2);
    TCHECK(first_d(o, 0) == -1.0, "(-1)^16777217 is -1");
    od_tensor_release(o);
    /* a NaN Scalar bound alone leaves the input (an integer input is
     * promoted); with the other bound given, ATen fills the output with NaN */
    od_tensor *c = vec_d(OD_FLOAT32, (double[]){4, 5}, 2), *ci = vec_i(OD_INT64, (int64_t[]){4, 5}, 2);
    od_value cl[3] = {tv(c), od_double(NAN), od_double(4.5)}, cli[3] = {tv(ci), od_none(), od_double(NAN)};
    od_value c1[3] = {tv(c), od_double(NAN), od_none()}, cbig[3] = {tv(ci), od_double(1e300), od_double(NAN)};
    o = call1_ok(OD_OPID_clamp, c1, 3);
    TCHECK(first_d(o, 0) == 4 && first_d(o, 1) == 5, "clamp(min=NaN)");
    od_tensor_release(o);
    o = call1_ok(OD_OPID_clamp, cl, 3);
    TCHECK(isnan(first_d(o, 0)) && isnan(first_d(o, 1)), "clamp(min=NaN, max=4.5) is NaN");
    od_tensor_release(o);
    o = call1_ok(OD_OPID_clamp, cbig, 3); /* no range check then: the fill comes first */
    TCHECK(o->dtype == OD_FLOAT32 && isnan(first_d(o, 0)), "int clamp(1e300, NaN) is float32 NaN");
    od_tensor_release(o);
    o = call1_ok(OD_OPID_clamp, cli, 3);
    TCHECK(o->dtype == OD_FLOAT32 && first_d(o, 0) == 4 && first_d(o, 1) == 5, "int clamp(max=NaN)");
    od_tensor_release(o);
    /* gelu(-0.0) is +0.0 on a contiguous float32 tensor of more than one
     * element (torch's oneDNN path), -0.0 on float64 and on a single element */
    od_tensor *z32 = vec_d(OD_FLOAT32, (double[]){-0.0, 1}, 2), *z64 = vec_d(OD_FLOAT64, (double[]){-0.0, 1}, 2);
    od_value g32[2] = {tv(z32), od_str("none")}, g64[2] = {tv(z64), od_str("none")};
    o = call1_ok(OD_OPID_gelu, g32, 2);
    TCHECK(first_d(o, 0) == 0.0 && !signbit(first_d(o, 0)), "float32 gelu(-0.0) is +0.0");
    od_tensor_release(o);
    o = call1_ok(OD_OPID_gelu, g64, 2);
    TCHECK(first_d(o, 0) == 0.0 && signbit(first_d(o, 0)), "float64 gelu(-0.0) is -0.0");
    od_tensor_release(o);
    od_tensor *z1 = vec_d(OD_FLOAT32, (double[]){-0.0}, 1);
    od_value g1[2] = {tv(z1), od_str("none")};
    o = call1_ok(OD_OPID_gelu, g1, 2);
    TCHECK(first_d(o, 0) == 0.0 && signbit(first_d(o, 0)), "a single float32 gelu(-0.0) is -0.0");
    od_tensor_release(o);
    od_tensor_release(z1);
    od_tensor *ts[] = {a, b, n, d, x32, x16, m1, c, ci, z32, z64};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        od_tensor_release(ts[i]);
}

/* ATen's contiguous loops run Vectorized (Sleef) on the first n - n % 16
 * float32 elements and the scalar function on the rest; the two differ near
 * overflow. Values are torch 1.13's. */
Test(cpu_ew, vectorized_and_scalar_paths_by_position)
{
    double v[17];
    for (int i = 0; i < 17; i++)
        v[i] = 89.0;
    od_tensor *x = vec_d(OD_FLOAT32, v, 17);
    od_value a[1] = {tv(x)};
    od_tensor *o = call1_ok(OD_OPID_sinh, a, 1);
    TCHECK(isinf(first_d(o, 0)) && isinf(first_d(o, 15)), "sinh(89) overflows on the vectorized path");
    TCHECK(fabs(first_d(o, 16) - 2.2448063889081578e+38) < 1e31, "sinh(89) in the tail is %g, torch 2.2448e38",
           first_d(o, 16));
    od_tensor_release(o);
    /* remainder and floor division: NaN where Sleef's fmod meets an
     * overflowing quotient, the exact answer in the tail */
    double r[18];
    for (int i = 0; i < 18; i++)
        r[i] = 3.4e38;
    od_tensor *big = vec_d(OD_FLOAT32, r, 18);
    od_value ra[2] = {tv(big), od_double(0.5)};
    o = call1_ok(OD_OPID_remainder_Scalar, ra, 2);
    TCHECK(isnan(first_d(o, 0)) && isnan(first_d(o, 15)) && first_d(o, 16) == 0.0 && first_d(o, 17) == 0.0,
           "remainder(3.4e38, 0.5): NaN, then 0 in the tail");
    od_tensor_release(o);
    o = call1_ok(OD_OPID_floor_divide_Scalar, ra, 2);
    TCHECK(isnan(first_d(o, 0)) && isinf(first_d(o, 17)), "floor_divide(3.4e38, 0.5): NaN, then inf in the tail");
    od_tensor_release(o);
    /* float add is one fma: -inf + 1e300 * 1e300 is -inf, not inf - inf */
    od_tensor *m = vec_d(OD_FLOAT64, (double[]){-INFINITY}, 1), *h = vec_d(OD_FLOAT64, (double[]){1e300}, 1);
    od_value ad[3] = {tv(m), tv(h), od_double(1e300)};
    o = call1_ok(OD_OPID_add_Tensor, ad, 3);
    TCHECK(isinf(first_d(o, 0)) && first_d(o, 0) < 0, "-inf + 1e300 * 1e300 is %g", first_d(o, 0));
    od_tensor_release(o);
    /* fmax/fmin of equal zeros return self */
    od_tensor *pz = vec_d(OD_FLOAT32, (double[]){0.0, -0.0}, 2), *nz = vec_d(OD_FLOAT32, (double[]){-0.0, 0.0}, 2);
    od_value fm[2] = {tv(pz), tv(nz)};
    o = call1_ok(OD_OPID_fmin, fm, 2);
    TCHECK(!signbit(first_d(o, 0)) && signbit(first_d(o, 1)), "fmin(+0, -0) is +0, fmin(-0, +0) is -0");
    od_tensor_release(o);
    od_tensor_release(x);
    od_tensor_release(big);
    od_tensor_release(m);
    od_tensor_release(h);
    od_tensor_release(pz);
    od_tensor_release(nz);
}
