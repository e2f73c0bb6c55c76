/* dtype.c — dtype names, categories, PyTorch's type promotion and
 * torch.result_type.
 *
 * Invariants: every table is generated from OD_DTYPES, so a dtype added there
 * appears everywhere at once. Promotion is written as PyTorch's rules (the
 * unit test checks it against PyTorch's literal lookup table); an invalid
 * dtype promotes to OD_NUM_DTYPES ("undefined").
 */
#include <string.h>

#include "od_tensor.h"

static const size_t dtype_sizes[OD_NUM_DTYPES] = {
#define OD_X_(e, n, o, s, c) [OD_##e] = s,
    OD_DTYPES(OD_X_)
#undef OD_X_
};

static const char *const dtype_names[OD_NUM_DTYPES] = {
#define OD_X_(e, n, o, s, c) [OD_##e] = n,
    OD_DTYPES(OD_X_)
#undef OD_X_
};

static const char *const dtype_oip_names[OD_NUM_DTYPES] = {
#define OD_X_(e, n, o, s, c) [OD_##e] = o,
    OD_DTYPES(OD_X_)
#undef OD_X_
};

/* torch's second names (torch.float, torch.long, ...). */
static const struct {
    const char *name;
    od_dtype dt;
} dtype_aliases[] = {
    {"float", OD_FLOAT32}, {"double", OD_FLOAT64}, {"half", OD_FLOAT16}, {"long", OD_INT64},
    {"int", OD_INT32},     {"short", OD_INT16},
};

size_t od_dtype_size(od_dtype dt) { return (unsigned)dt < OD_NUM_DTYPES ? dtype_sizes[dt] : 0; }

const char *od_dtype_name(od_dtype dt)
{
    return (unsigned)dt < OD_NUM_DTYPES ? dtype_names[dt] : "undefined";
}

const char *od_dtype_oip_name(od_dtype dt)
{
    return (unsigned)dt < OD_NUM_DTYPES ? dtype_oip_names[dt] : "INVALID";
}

od_dtype od_dtype_from_name(const char *name)
{
    if (!name)
        return OD_NUM_DTYPES;
    for (int i = 0; i < OD_NUM_DTYPES; i++)
        if (strcmp(name, dtype_oip_names[i]) == 0)
            return (od_dtype)i;
    if (strncmp(name, "torch.", 6) == 0)
        name += 6;
    for (int i = 0; i < OD_NUM_DTYPES; i++)
        if (strcmp(name, dtype_names[i]) == 0)
            return (od_dtype)i;
    for (size_t i = 0; i < sizeof dtype_aliases / sizeof dtype_aliases[0]; i++)
        if (strcmp(name, dtype_aliases[i].name) == 0)
            return dtype_aliases[i].dt;
    return OD_NUM_DTYPES;
}

bool od_dtype_is_floating(od_dtype dt)
{
    return dt == OD_FLOAT16 || dt == OD_BFLOAT16 || dt == OD_FLOAT32 || dt == OD_FLOAT64;
}

bool od_dtype_can_cast(od_dtype from, od_dtype to)
{
    if (od_dtype_is_floating(from) && od_dtype_is_integral(to, false))
        return false;
    return !(from != OD_BOOL && to == OD_BOOL);
}

bool od_dtype_is_integral(od_dtype dt, bool include_bool)
{
    switch (dt) {
    case OD_BOOL: return include_bool;
    case OD_UINT8:
    case OD_INT8:
    case OD_INT16:
    case OD_INT32:
    case OD_INT64: return true;
    default: return false;
    }
}

/* Bit width of an integral or floating dtype, for "the wider one wins". */
static int dtype_bits(od_dtype dt) { return (int)od_dtype_size(dt) * 8; }

od_dtype od_promote_types(od_dtype a, od_dtype b)
{
    if ((unsigned)a >= OD_NUM_DTYPES || (unsigned)b >= OD_NUM_DTYPES)
        return OD_NUM_DTYPES;
    if (a == b)
        return a;
    if (a == OD_BOOL) /* bool is the identity of promotion */
        return b;
    if (b == OD_BOOL)
        return a;
    bool fa = od_dtype_is_floating(a), fb = od_dtype_is_floating(b);
    if (fa && !fb)
        return a; /* floating beats any integer, whatever its width */
    if (fb && !fa)
        return b;
    if (fa && fb) {
        /* float16 and bfloat16 have no common 16-bit type: float32. */
        if (dtype_bits(a) == 16 && dtype_bits(b) == 16)
            return OD_FLOAT32;
        return dtype_bits(a) > dtype_bits(b) ? a : b;
    }
    /* Two integers. uint8 with a signed type needs a sign bit on top of 8
     * value bits: at least int16. */
    if (a == OD_UINT8 || b == OD_UINT8) {
        od_dtype other = a == OD_UINT8 ? b : a;
        return dtype_bits(other) > 8 ? other : OD_INT16;
    }
    return dtype_bits(a) > dtype_bits(b) ? a : b;
}

/* ---- torch.result_type ---- */

typedef enum { CAT_BOOL, CAT_INT, CAT_FLOAT } category;

static category category_of(od_dtype dt)
{
    return od_dtype_is_floating(dt) ? CAT_FLOAT : dt == OD_BOOL ? CAT_BOOL : CAT_INT;
}

/* OD_NUM_DTYPES is "undefined" (no participant of this priority yet). */
static od_dtype promote_skip_undefined(od_dtype a, od_dtype b)
{
    if (a == OD_NUM_DTYPES)
        return b;
    if (b == OD_NUM_DTYPES)
        return a;
    return od_promote_types(a, b);
}

/* PyTorch's combine_categories: the higher-priority result stands unless the
 * lower-priority one is of a higher category. */
static od_dtype combine_categories(od_dtype higher, od_dtype lower)
{
    if (higher == OD_NUM_DTYPES)
        return lower;
    if (lower == OD_NUM_DTYPES)
        return higher;
    if (category_of(higher) == CAT_FLOAT)
        return higher;
    if (higher == OD_BOOL || category_of(lower) == CAT_FLOAT)
        return od_promote_types(higher, lower);
    return higher;
}

od_dtype od_result_type(const od_result_arg *args, int n)
{
    od_dtype dim_result = OD_NUM_DTYPES, zero_result = OD_NUM_DTYPES, wrapped_result = OD_NUM_DTYPES;
    /* Only wrapped numbers (and Scalars) in the call, all of one dtype: ATen
     * keeps it, so add.Tensor(1.5, 2.5) is float64; mixed kinds promote as
     * Python numbers do (add.Tensor(1.5, 2) is float32). */
    bool wrapped = false, real = false;
    for (int i = 0; i < n; i++)
        if (args[i].tensor) {
            wrapped |= args[i].tensor->wrapped_number;
            real |= !args[i].tensor->wrapped_number;
        }
    if (wrapped && !real) {
        od_dtype r = OD_NUM_DTYPES;
        bool same = true;
        for (int i = 0; i < n; i++) {
            od_dtype dt = args[i].tensor ? args[i].tensor->dtype
                          : args[i].scalar_kind == OD_SCALAR_FLOAT ? OD_FLOAT64
                          : args[i].scalar_kind == OD_SCALAR_INT   ? OD_INT64
                                                                   : OD_BOOL;
            same &= r == OD_NUM_DTYPES || r == dt;
            r = dt;
        }
        if (same)
            return r;
    }
    for (int i = 0; i < n; i++) {
        const od_result_arg *a = &args[i];
        if (a->tensor && a->tensor->wrapped_number) {
            /* like a Python number, a wrapped float counts as the default dtype */
            od_dtype dt = od_dtype_is_floating(a->tensor->dtype) ? OD_DEFAULT_FLOAT : a->tensor->dtype;
            wrapped_result = promote_skip_undefined(wrapped_result, dt);
        } else if (a->tensor) {
            if (a->tensor->ndim > 0)
                dim_result = promote_skip_undefined(dim_result, a->tensor->dtype);
            else
                zero_result = promote_skip_undefined(zero_result, a->tensor->dtype);
        } else {
            /* A Python number: its dtype is the default of its kind. */
            od_dtype dt = a->scalar_kind == OD_SCALAR_FLOAT ? OD_DEFAULT_FLOAT
                          : a->scalar_kind == OD_SCALAR_INT ? OD_INT64
                                                            : OD_BOOL;
            wrapped_result = promote_skip_undefined(wrapped_result, dt);
        }
    }
    return combine_categories(dim_result, combine_categories(zero_result, wrapped_result));
}

const char *od_dtype_scalar_name(od_dtype dt)
{
    static const char *const names[OD_NUM_DTYPES] = {
        [OD_BOOL] = "Bool",    [OD_UINT8] = "Byte",         [OD_INT8] = "Char",
        [OD_INT16] = "Short",  [OD_INT32] = "Int",          [OD_INT64] = "Long",
        [OD_FLOAT16] = "Half", [OD_BFLOAT16] = "BFloat16",  [OD_FLOAT32] = "Float",
        [OD_FLOAT64] = "Double",
    };
    return (unsigned)dt < OD_NUM_DTYPES ? names[dt] : "Undefined";
}
