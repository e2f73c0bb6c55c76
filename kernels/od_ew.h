/* od_ew.h — the dtype rules of per-element operators (ops.def's OD_EW1 and
 * OD_EW2 lines), shared by the shape function, the CPU loops and the CUDA
 * kernels.
 *
 * Invariants:
 *  - A per-element operator is declared once, by its ops.def line:
 *      OD_EW1(id, schema, fn, rule)   one input   (self)
 *      OD_EW2(id, schema, fn, rule)   two inputs  (self, other; either may be
 *                                     a Scalar where the schema says so)
 *    fn names its math in od_math.h (od_math_<fn>_f32/_f64/_i64, the
 *    families the rule computes in); rule is one of the rules below. From
 *    that line, kernels/shape_elementwise.c, kernels/cpu/elementwise.c and
 *    kernels/cuda/ew_*.cu generate the shape rule, the CPU loop table and
 *    the CUDA enum entry, kernel and launch switch.
 *  - A rule fixes three things: the dtypes accepted (others are torch's
 *    "\"<op>\" not implemented for '<dtype>'"), the compute dtype (the one
 *    loop dtype the kernels run in) and the output dtype:
 *
 *    rule        accepts            computes in                    returns
 *    FLOAT       every dtype        self's if floating, else the   as computed
 *                                   default float (torch.exp(int))
 *    FLOAT_ONLY  floating dtypes    self's                         as computed
 *    NUMERIC     all but bool       result_type of the inputs      as computed
 *    ANY         every dtype        self's                         as computed
 *    LOGICAL     every dtype        result_type (torch's           bool
 *                                   comparison_op)
 *    BITWISE     integers and bool  result_type                    as computed
 *    INT_DIV     all but bool       result_type                    as computed;
 *                an integer divisor of 0 is "ZeroDivisionError", as in torch
 *    INT         integers           result_type                    as computed
 *    FLOAT_NOHALF, FLOAT_ONLY_NOHALF, NUMERIC_NOHALF
 *                as FLOAT, FLOAT_ONLY, NUMERIC without float16 (torch 1.13's
 *                CPU kernels of the activations and special functions
 *                dispatch FLOATING_TYPES_AND(BFloat16): no Half)
 *    SAME        every dtype, the   self's                         as computed
 *                inputs' alike (heaviside: "not yet implemented for
 *                tensors with different dtypes")
 *
 *  - OD_EWP(id, schema, fn, rule, ag) declares a per-element operator of one
 *    tensor input (the schema's Tensor argument) and parameters (its other
 *    arguments: Scalar, float?, int), which do not take part in type
 *    promotion: the rule applies to the tensor alone. od_ew_params_of
 *    (kernels/shape_elementwise.c) checks them and converts them as the ATen
 *    kernel holds them for the compute dtype (to<scalar_t>, dtype defaults);
 *    the math is od_math_<fn>_<family>(x, const T *p), p[k] parameter k in
 *    the compute family (at most OD_EW_MAX_PARAMS).
 *
 *  - The OD_EWR_DTYPES_<rule>(X, ...) lists name the loop dtypes of a rule
 *    (X(DT, ...) per dtype suffix: BOOL, UINT8, ..., FLOAT64), and
 *    OD_EWR_I64_<rule>(x) expands to x only for rules with an integer
 *    family, so the backends instantiate exactly the math that exists.
 *  - This header is C11 and C++17 (nvcc) alike and holds no state.
 */
#ifndef OD_EW_H
#define OD_EW_H

typedef enum od_ew_rule {
    OD_EWR_NONE = 0, /* not a per-element operator of ops.def */
    OD_EWR_FLOAT,
    OD_EWR_FLOAT_ONLY,
    OD_EWR_NUMERIC,
    OD_EWR_ANY,
    OD_EWR_LOGICAL,
    OD_EWR_BITWISE,
    OD_EWR_INT_DIV,
    OD_EWR_INT,
    OD_EWR_FLOAT_NOHALF,
    OD_EWR_FLOAT_ONLY_NOHALF,
    OD_EWR_NUMERIC_NOHALF,
    OD_EWR_SAME
} od_ew_rule;

#define OD_EW_MAX_PARAMS 4

#define OD_EWR_INT_DTYPES_(X, ...) \
    X(UINT8, __VA_ARGS__) X(INT8, __VA_ARGS__) X(INT16, __VA_ARGS__) X(INT32, __VA_ARGS__) X(INT64, __VA_ARGS__)
#define OD_EWR_FLT_DTYPES_(X, ...) \
    X(FLOAT16, __VA_ARGS__) OD_EWR_FLT_NOHALF_DTYPES_(X, __VA_ARGS__)
#define OD_EWR_FLT_NOHALF_DTYPES_(X, ...) X(BFLOAT16, __VA_ARGS__) X(FLOAT32, __VA_ARGS__) X(FLOAT64, __VA_ARGS__)

#define OD_EWR_DTYPES_FLOAT(X, ...) OD_EWR_FLT_DTYPES_(X, __VA_ARGS__)
#define OD_EWR_DTYPES_FLOAT_ONLY(X, ...) OD_EWR_FLT_DTYPES_(X, __VA_ARGS__)
#define OD_EWR_DTYPES_NUMERIC(X, ...) OD_EWR_INT_DTYPES_(X, __VA_ARGS__) OD_EWR_FLT_DTYPES_(X, __VA_ARGS__)
#define OD_EWR_DTYPES_ANY(X, ...) X(BOOL, __VA_ARGS__) OD_EWR_DTYPES_NUMERIC(X, __VA_ARGS__)
#define OD_EWR_DTYPES_LOGICAL(X, ...) OD_EWR_DTYPES_ANY(X, __VA_ARGS__)
#define OD_EWR_DTYPES_BITWISE(X, ...) X(BOOL, __VA_ARGS__) OD_EWR_INT_DTYPES_(X, __VA_ARGS__)
#define OD_EWR_DTYPES_INT_DIV(X, ...) OD_EWR_DTYPES_NUMERIC(X, __VA_ARGS__)
#define OD_EWR_DTYPES_INT(X, ...) OD_EWR_INT_DTYPES_(X, __VA_ARGS__)
#define OD_EWR_DTYPES_FLOAT_NOHALF(X, ...) OD_EWR_FLT_NOHALF_DTYPES_(X, __VA_ARGS__)
#define OD_EWR_DTYPES_FLOAT_ONLY_NOHALF(X, ...) OD_EWR_FLT_NOHALF_DTYPES_(X, __VA_ARGS__)
#define OD_EWR_DTYPES_NUMERIC_NOHALF(X, ...) OD_EWR_INT_DTYPES_(X, __VA_ARGS__) OD_EWR_FLT_NOHALF_DTYPES_(X, __VA_ARGS__)
#define OD_EWR_DTYPES_SAME(X, ...) OD_EWR_DTYPES_ANY(X, __VA_ARGS__)

/* Whether a rule has the integer (i64) / floating (f32, f64) families. */
#define OD_EWR_I64_FLOAT(x)
#define OD_EWR_I64_FLOAT_ONLY(x)
#define OD_EWR_I64_NUMERIC(x) x
#define OD_EWR_I64_ANY(x) x
#define OD_EWR_I64_LOGICAL(x) x
#define OD_EWR_I64_BITWISE(x) x
#define OD_EWR_I64_INT_DIV(x) x
#define OD_EWR_I64_INT(x) x
#define OD_EWR_I64_FLOAT_NOHALF(x)
#define OD_EWR_I64_FLOAT_ONLY_NOHALF(x)
#define OD_EWR_I64_NUMERIC_NOHALF(x) x
#define OD_EWR_I64_SAME(x) x
#define OD_EWR_FLT_FLOAT(x) x
#define OD_EWR_FLT_FLOAT_ONLY(x) x
#define OD_EWR_FLT_NUMERIC(x) x
#define OD_EWR_FLT_ANY(x) x
#define OD_EWR_FLT_LOGICAL(x) x
#define OD_EWR_FLT_BITWISE(x)
#define OD_EWR_FLT_INT_DIV(x) x
#define OD_EWR_FLT_INT(x)
#define OD_EWR_FLT_FLOAT_NOHALF(x) x
#define OD_EWR_FLT_FLOAT_ONLY_NOHALF(x) x
#define OD_EWR_FLT_NUMERIC_NOHALF(x) x
#define OD_EWR_FLT_SAME(x) x

/* The output is bool (1) or the compute dtype (0). */
#define OD_EWR_BOOL_OUT_FLOAT 0
#define OD_EWR_BOOL_OUT_FLOAT_ONLY 0
#define OD_EWR_BOOL_OUT_NUMERIC 0
#define OD_EWR_BOOL_OUT_ANY 0
#define OD_EWR_BOOL_OUT_LOGICAL 1
#define OD_EWR_BOOL_OUT_BITWISE 0
#define OD_EWR_BOOL_OUT_INT_DIV 0
#define OD_EWR_BOOL_OUT_INT 0
#define OD_EWR_BOOL_OUT_FLOAT_NOHALF 0
#define OD_EWR_BOOL_OUT_FLOAT_ONLY_NOHALF 0
#define OD_EWR_BOOL_OUT_NUMERIC_NOHALF 0
#define OD_EWR_BOOL_OUT_SAME 0

/* An integer divisor of 0 is an error (1) or cannot occur (0). */
#define OD_EWR_ZERO_DIV_FLOAT 0
#define OD_EWR_ZERO_DIV_FLOAT_ONLY 0
#define OD_EWR_ZERO_DIV_NUMERIC 0
#define OD_EWR_ZERO_DIV_ANY 0
#define OD_EWR_ZERO_DIV_LOGICAL 0
#define OD_EWR_ZERO_DIV_BITWISE 0
#define OD_EWR_ZERO_DIV_INT_DIV 1
#define OD_EWR_ZERO_DIV_INT 0
#define OD_EWR_ZERO_DIV_FLOAT_NOHALF 0
#define OD_EWR_ZERO_DIV_FLOAT_ONLY_NOHALF 0
#define OD_EWR_ZERO_DIV_NUMERIC_NOHALF 0
#define OD_EWR_ZERO_DIV_SAME 0

#endif
