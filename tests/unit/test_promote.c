/* test_promote.c — dtype names, categories, od_promote_types against
 * PyTorch's own lookup table, and od_result_type against torch.result_type.
 *
 * The promotion table below is copied verbatim (the 13x13 literal) from
 * PyTorch's c10/core/ScalarType.cpp, `_promoteTypesLookup`; the complex
 * rows and columns are kept as data and skipped, since opdispatch has no
 * complex dtypes. The result_type cases are PyTorch's documented results.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "od_tensor.h"

/* ---- PyTorch's table, as written in c10/core/ScalarType.cpp ---- */
enum { u1, i1, i2, i4, i8, f2, f4, f8, c2, c4, c8, b1, bf, NUM_TORCH };

static const int torch_promote[NUM_TORCH][NUM_TORCH] = {
    /*        u1  i1  i2  i4  i8  f2  f4  f8  c2  c4  c8  b1  bf*/
    /* u1 */ {u1, i2, i2, i4, i8, f2, f4, f8, c2, c4, c8, u1, bf},
    /* i1 */ {i2, i1, i2, i4, i8, f2, f4, f8, c2, c4, c8, i1, bf},
    /* i2 */ {i2, i2, i2, i4, i8, f2, f4, f8, c2, c4, c8, i2, bf},
    /* i4 */ {i4, i4, i4, i4, i8, f2, f4, f8, c2, c4, c8, i4, bf},
    /* i8 */ {i8, i8, i8, i8, i8, f2, f4, f8, c2, c4, c8, i8, bf},
    /* f2 */ {f2, f2, f2, f2, f2, f2, f4, f8, c2, c4, c8, f2, f4},
    /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f8, c4, c4, c8, f4, f4},
    /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, c8, c8, c8, f8, f8},
    /* c2 */ {c2, c2, c2, c2, c2, c2, c4, c8, c2, c4, c8, c2, c4},
    /* c4 */ {c4, c4, c4, c4, c4, c4, c4, c8, c4, c4, c8, c4, c4},
    /* c8 */ {c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8},
    /* b1 */ {u1, i1, i2, i4, i8, f2, f4, f8, c2, c4, c8, b1, bf},
    /* bf */ {bf, bf, bf, bf, bf, f4, f4, f8, c4, c4, c8, bf, bf},
};

/* torch ScalarType -> od_dtype; OD_NUM_DTYPES for the complex types. */
static const od_dtype torch_to_od[NUM_TORCH] = {
    [u1] = OD_UINT8,   [i1] = OD_INT8,      [i2] = OD_INT16,      [i4] = OD_INT32,
    [i8] = OD_INT64,   [f2] = OD_FLOAT16,   [f4] = OD_FLOAT32,    [f8] = OD_FLOAT64,
    [c2] = OD_NUM_DTYPES, [c4] = OD_NUM_DTYPES, [c8] = OD_NUM_DTYPES, [b1] = OD_BOOL,
    [bf] = OD_BFLOAT16,
};

Test(promote, matches_pytorch_lookup_table)
{
    int checked = 0;
    for (int a = 0; a < NUM_TORCH; a++) {
        for (int b = 0; b < NUM_TORCH; b++) {
            if (torch_to_od[a] == OD_NUM_DTYPES || torch_to_od[b] == OD_NUM_DTYPES)
                continue;
            od_dtype want = torch_to_od[torch_promote[a][b]];
            od_dtype got = od_promote_types(torch_to_od[a], torch_to_od[b]);
            cr_expect_eq(got, want, "promote(%s, %s) = %s, PyTorch says %s",
                         od_dtype_name(torch_to_od[a]), od_dtype_name(torch_to_od[b]),
                         od_dtype_name(got), od_dtype_name(want));
            checked++;
        }
    }
    cr_assert_eq(checked, OD_NUM_DTYPES * OD_NUM_DTYPES, "every pair of our dtypes is covered");
}

Test(promote, named_cases_and_invalid)
{
    cr_assert_eq(od_promote_types(OD_UINT8, OD_INT8), OD_INT16);
    cr_assert_eq(od_promote_types(OD_FLOAT16, OD_BFLOAT16), OD_FLOAT32);
    cr_assert_eq(od_promote_types(OD_BOOL, OD_BFLOAT16), OD_BFLOAT16);
    cr_assert_eq(od_promote_types(OD_INT64, OD_FLOAT16), OD_FLOAT16);
    cr_assert_eq(od_promote_types(OD_NUM_DTYPES, OD_INT8), OD_NUM_DTYPES);
    cr_assert_eq(od_promote_types(OD_INT8, (od_dtype)-1), OD_NUM_DTYPES);
}

/* ---- torch.result_type ---- */

/* A tensor with only what result_type reads (dtype, ndim). */
static od_tensor fake(od_dtype dt, int ndim)
{
    od_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t.sizes[i] = 2;
    return t;
}

static od_result_arg targ(const od_tensor *t)
{
    od_result_arg a = {t, OD_SCALAR_INT};
    return a;
}

static od_result_arg sarg(int kind)
{
    od_result_arg a = {NULL, kind};
    return a;
}

#define DIM 1
#define ZERO 0
#define TSR(dt, nd) ((struct arg_spec){1, dt, nd, 0})
#define SCL(kind) ((struct arg_spec){0, 0, 0, kind})

struct arg_spec {
    int is_tensor;
    od_dtype dt;
    int ndim;
    int kind;
};

static od_dtype result_of(int n, const struct arg_spec *spec)
{
    od_tensor ts[4];
    od_result_arg args[4];
    for (int i = 0; i < n; i++) {
        if (spec[i].is_tensor) {
            ts[i] = fake(spec[i].dt, spec[i].ndim);
            args[i] = targ(&ts[i]);
        } else {
            args[i] = sarg(spec[i].kind);
        }
    }
    return od_result_type(args, n);
}

/* Each case: torch.result_type(...) as PyTorch computes it. */
static const struct {
    const char *what;
    int n;
    struct arg_spec a[3];
    od_dtype want;
} cases[] = {
    {"int32 tensor + 2.5", 2, {TSR(OD_INT32, DIM), SCL(OD_SCALAR_FLOAT)}, OD_FLOAT32},
    {"uint8 tensor + int64 0-dim", 2, {TSR(OD_UINT8, DIM), TSR(OD_INT64, ZERO)}, OD_UINT8},
    {"int8 tensor + 1000", 2, {TSR(OD_INT8, DIM), SCL(OD_SCALAR_INT)}, OD_INT8},
    {"float16 tensor + float64 0-dim", 2, {TSR(OD_FLOAT16, DIM), TSR(OD_FLOAT64, ZERO)}, OD_FLOAT16},
    {"bool tensor + int", 2, {TSR(OD_BOOL, DIM), SCL(OD_SCALAR_INT)}, OD_INT64},
    {"int32 tensor + float16 0-dim", 2, {TSR(OD_INT32, DIM), TSR(OD_FLOAT16, ZERO)}, OD_FLOAT16},
    {"int64 0-dim + float64 0-dim", 2, {TSR(OD_INT64, ZERO), TSR(OD_FLOAT64, ZERO)}, OD_FLOAT64},
    {"int + float (scalars only)", 2, {SCL(OD_SCALAR_INT), SCL(OD_SCALAR_FLOAT)}, OD_FLOAT32},
    {"bool + int (scalars only)", 2, {SCL(OD_SCALAR_BOOL), SCL(OD_SCALAR_INT)}, OD_INT64},
    {"bool + bool (scalars only)", 2, {SCL(OD_SCALAR_BOOL), SCL(OD_SCALAR_BOOL)}, OD_BOOL},
    {"bool tensor + True", 2, {TSR(OD_BOOL, DIM), SCL(OD_SCALAR_BOOL)}, OD_BOOL},
    {"bool tensor + uint8 0-dim", 2, {TSR(OD_BOOL, DIM), TSR(OD_UINT8, ZERO)}, OD_UINT8},
    {"bool tensor + 2.5", 2, {TSR(OD_BOOL, DIM), SCL(OD_SCALAR_FLOAT)}, OD_FLOAT32},
    {"int64 tensor + 2.5", 2, {TSR(OD_INT64, DIM), SCL(OD_SCALAR_FLOAT)}, OD_FLOAT32},
    {"float64 tensor + 2.5", 2, {TSR(OD_FLOAT64, DIM), SCL(OD_SCALAR_FLOAT)}, OD_FLOAT64},
    {"float16 tensor + 2.5", 2, {TSR(OD_FLOAT16, DIM), SCL(OD_SCALAR_FLOAT)}, OD_FLOAT16},
    {"uint8 tensor + int8 tensor", 2, {TSR(OD_UINT8, DIM), TSR(OD_INT8, DIM)}, OD_INT16},
    {"float16 tensor + bfloat16 tensor", 2, {TSR(OD_FLOAT16, DIM), TSR(OD_BFLOAT16, DIM)}, OD_FLOAT32},
    {"float16 0-dim + bfloat16 0-dim", 2, {TSR(OD_FLOAT16, ZERO), TSR(OD_BFLOAT16, ZERO)}, OD_FLOAT32},
    {"bfloat16 tensor + float16 0-dim", 2, {TSR(OD_BFLOAT16, DIM), TSR(OD_FLOAT16, ZERO)}, OD_BFLOAT16},
    {"int16 tensor + uint8 0-dim", 2, {TSR(OD_INT16, DIM), TSR(OD_UINT8, ZERO)}, OD_INT16},
    {"int8 tensor + bool 0-dim", 2, {TSR(OD_INT8, DIM), TSR(OD_BOOL, ZERO)}, OD_INT8},
    {"bool 0-dim + int", 2, {TSR(OD_BOOL, ZERO), SCL(OD_SCALAR_INT)}, OD_INT64},
    {"int32 0-dim + 2.5", 2, {TSR(OD_INT32, ZERO), SCL(OD_SCALAR_FLOAT)}, OD_FLOAT32},
    {"float16 0-dim + 2.5", 2, {TSR(OD_FLOAT16, ZERO), SCL(OD_SCALAR_FLOAT)}, OD_FLOAT16},
    {"int32 0-dim + int", 2, {TSR(OD_INT32, ZERO), SCL(OD_SCALAR_INT)}, OD_INT32},
    {"uint8 0-dim + int8 0-dim", 2, {TSR(OD_UINT8, ZERO), TSR(OD_INT8, ZERO)}, OD_INT16},
    {"int32 tensor + int64 0-dim + 2.5", 3,
     {TSR(OD_INT32, DIM), TSR(OD_INT64, ZERO), SCL(OD_SCALAR_FLOAT)}, OD_FLOAT32},
    {"uint8 tensor + float64 0-dim + 2.5", 3,
     {TSR(OD_UINT8, DIM), TSR(OD_FLOAT64, ZERO), SCL(OD_SCALAR_FLOAT)}, OD_FLOAT64},
    {"bool tensor + bool 0-dim + int", 3,
     {TSR(OD_BOOL, DIM), TSR(OD_BOOL, ZERO), SCL(OD_SCALAR_INT)}, OD_INT64},
    {"single int32 tensor", 1, {TSR(OD_INT32, DIM)}, OD_INT32},
    {"single float", 1, {SCL(OD_SCALAR_FLOAT)}, OD_FLOAT32},
};

Test(result_type, pytorch_cases)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        od_dtype got = result_of(cases[i].n, cases[i].a);
        cr_expect_eq(got, cases[i].want, "%s: got %s, torch.result_type gives %s", cases[i].what,
                     od_dtype_name(got), od_dtype_name(cases[i].want));
    }
}

/* Among dimensioned tensors result_type is plain promotion (PyTorch table);
 * argument order never matters. */
Test(result_type, dimensioned_tensors_follow_the_table_and_commute)
{
    for (int a = 0; a < NUM_TORCH; a++) {
        for (int b = 0; b < NUM_TORCH; b++) {
            od_dtype da = torch_to_od[a], db = torch_to_od[b];
            if (da == OD_NUM_DTYPES || db == OD_NUM_DTYPES)
                continue;
            struct arg_spec ab[2] = {TSR(da, DIM), TSR(db, 2)};
            struct arg_spec ba[2] = {TSR(db, 3), TSR(da, DIM)};
            od_dtype want = torch_to_od[torch_promote[a][b]];
            cr_expect_eq(result_of(2, ab), want, "%s, %s", od_dtype_name(da), od_dtype_name(db));
            cr_expect_eq(result_of(2, ba), want, "%s, %s", od_dtype_name(db), od_dtype_name(da));
        }
    }
}

/* A wrapped number (a Python number passed where a Tensor is declared) is a
 * 0-dim int64/float64/bool tensor that promotes as the Scalar it was:
 * int8 + 1 stays int8, and a wrapped float counts as float32. */
Test(result_type, wrapped_numbers_promote_as_scalars)
{
    static const struct {
        od_dtype tensor, wrapped, want;
    } w[] = {
        {OD_INT8, OD_INT64, OD_INT8},       {OD_INT8, OD_FLOAT64, OD_FLOAT32},
        {OD_FLOAT16, OD_FLOAT64, OD_FLOAT16}, {OD_BOOL, OD_INT64, OD_INT64},
        {OD_UINT8, OD_BOOL, OD_UINT8},      {OD_BFLOAT16, OD_INT64, OD_BFLOAT16},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        od_tensor t = fake(w[i].tensor, 0), n = fake(w[i].wrapped, 0);
        n.wrapped_number = true;
        od_result_arg a[2] = {targ(&t), targ(&n)};
        cr_expect_eq(od_result_type(a, 2), w[i].want, "0-dim %s + wrapped %s", od_dtype_name(w[i].tensor),
                     od_dtype_name(w[i].wrapped));
        t = fake(w[i].tensor, 2);
        a[0] = targ(&t);
        cr_expect_eq(od_result_type(a, 2), w[i].want, "%s + wrapped %s", od_dtype_name(w[i].tensor),
                     od_dtype_name(w[i].wrapped));
    }
    /* wrapped numbers alone, all of one kind, keep their dtype (ATen's
     * add.Tensor(1.5, 2.5) and add.Scalar(1.5, 2.5) are float64); mixed kinds
     * promote as Python numbers (add.Tensor(1.5, 2) is float32) */
    od_tensor i = fake(OD_INT64, 0), f = fake(OD_FLOAT64, 0), f2 = fake(OD_FLOAT64, 0);
    i.wrapped_number = f.wrapped_number = f2.wrapped_number = true;
    od_result_arg b[2] = {targ(&i), targ(&f)}, ff[2] = {targ(&f), targ(&f2)};
    cr_expect_eq(od_result_type(b, 2), OD_FLOAT32);
    cr_expect_eq(od_result_type(ff, 2), OD_FLOAT64);
    od_result_arg c[2] = {targ(&f), sarg(OD_SCALAR_FLOAT)}, d[2] = {targ(&i), sarg(OD_SCALAR_INT)};
    od_result_arg e[2] = {targ(&f), sarg(OD_SCALAR_INT)};
    cr_expect_eq(od_result_type(c, 2), OD_FLOAT64);
    cr_expect_eq(od_result_type(d, 2), OD_INT64);
    cr_expect_eq(od_result_type(e, 2), OD_FLOAT32);
}

Test(result_type, no_arguments_is_undefined)
{
    cr_assert_eq(od_result_type(NULL, 0), OD_NUM_DTYPES);
}

/* ---- names and categories ---- */

Test(dtype, names_sizes_and_lookup)
{
    /* The element size in the header is the size of the C type. */
#define OD_X_(e, n, o, s, c) cr_expect_eq(od_dtype_size(OD_##e), sizeof(c), #e);
    OD_DTYPES(OD_X_)
#undef OD_X_
    static const struct {
        const char *name;
        od_dtype dt;
    } names[] = {
        {"bool", OD_BOOL},          {"uint8", OD_UINT8},         {"int8", OD_INT8},
        {"int16", OD_INT16},        {"short", OD_INT16},         {"int32", OD_INT32},
        {"int", OD_INT32},          {"int64", OD_INT64},         {"long", OD_INT64},
        {"float16", OD_FLOAT16},    {"half", OD_FLOAT16},        {"bfloat16", OD_BFLOAT16},
        {"float32", OD_FLOAT32},    {"float", OD_FLOAT32},       {"float64", OD_FLOAT64},
        {"double", OD_FLOAT64},     {"torch.float32", OD_FLOAT32}, {"torch.long", OD_INT64},
        {"torch.bool", OD_BOOL},    {"torch.bfloat16", OD_BFLOAT16}, {"BOOL", OD_BOOL},
        {"UINT8", OD_UINT8},        {"INT8", OD_INT8},           {"INT16", OD_INT16},
        {"INT32", OD_INT32},        {"INT64", OD_INT64},         {"FP16", OD_FLOAT16},
        {"BF16", OD_BFLOAT16},      {"FP32", OD_FLOAT32},        {"FP64", OD_FLOAT64},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cr_expect_eq(od_dtype_from_name(names[i].name), names[i].dt, "%s", names[i].name);
    static const char *const bad[] = {"", "float128", "Float32", "torch.", "fp32", "torch.FP32",
                                      "complex64", "uint16", "float32 ", "byte"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(od_dtype_from_name(bad[i]), OD_NUM_DTYPES, "'%s' must be unknown", bad[i]);
    cr_expect_eq(od_dtype_from_name(NULL), OD_NUM_DTYPES);
    for (int i = 0; i < OD_NUM_DTYPES; i++) {
        cr_expect_eq(od_dtype_from_name(od_dtype_name((od_dtype)i)), (od_dtype)i);
        cr_expect_eq(od_dtype_from_name(od_dtype_oip_name((od_dtype)i)), (od_dtype)i);
    }
    cr_expect_str_eq(od_dtype_name(OD_BFLOAT16), "bfloat16");
    cr_expect_str_eq(od_dtype_oip_name(OD_FLOAT32), "FP32");
    cr_expect_str_eq(od_dtype_oip_name(OD_FLOAT16), "FP16");
    cr_expect_eq(od_dtype_size(OD_NUM_DTYPES), 0);
}

Test(dtype, categories)
{
    static const od_dtype floats[] = {OD_FLOAT16, OD_BFLOAT16, OD_FLOAT32, OD_FLOAT64};
    static const od_dtype ints[] = {OD_UINT8, OD_INT8, OD_INT16, OD_INT32, OD_INT64};
    for (size_t i = 0; i < 4; i++) {
        cr_expect(od_dtype_is_floating(floats[i]));
        cr_expect(!od_dtype_is_integral(floats[i], true));
    }
    for (size_t i = 0; i < 5; i++) {
        cr_expect(!od_dtype_is_floating(ints[i]));
        cr_expect(od_dtype_is_integral(ints[i], false));
        cr_expect(od_dtype_is_integral(ints[i], true));
    }
    cr_expect(!od_dtype_is_floating(OD_BOOL));
    cr_expect(!od_dtype_is_integral(OD_BOOL, false));
    cr_expect(od_dtype_is_integral(OD_BOOL, true));
}
