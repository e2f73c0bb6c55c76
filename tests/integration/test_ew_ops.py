"""The per-element operators declared by ops.def's OD_EW1 / OD_EW2 lines, over
HTTP, against numpy and PyTorch's documented rules.

Adding such an operator means adding its row to OPS: the numpy reference, its
dtype rule (kernels/od_ew.h) and its tolerance. The test then covers every
dtype (accepted or refused), broadcasting, 0-dim and empty tensors, NaN/Inf,
negative operands and integer division by zero, on CPU and, where a GPU
exists, CUDA. Strided inputs, which HTTP cannot send, are covered by
tests/unit/test_cpu_elementwise.c (layout independence) and tests/gpu.
"""

import functools
import math

import numpy as np
import pytest

from conftest import assert_bits_as_torch, error_message, from_json, tensor, torch_ref

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
FLOATS = {"float16", "float32", "float64"}


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _sign(x):
    # ATen's (0 < x) - (x < 0): NaN and -0.0 give 0 (numpy's sign keeps NaN)
    return (0 < x).astype(np.int8) - (x < 0).astype(np.int8)


def _remainder(a, b):
    # numpy's remainder is Python's %, as torch's for finite values;
    # torch keeps the sign of fmod's zero and gives nan for b == 0 (numpy too)
    return np.remainder(a, b)


def _lgamma(x):
    # log|gamma(x)|: inf at the poles (0 and negative integers) and at +-inf
    if math.isnan(x):
        return math.nan
    if math.isinf(x) or (x <= 0 and x == math.floor(x)):
        return math.inf
    return math.lgamma(x)


def _digamma(x):
    """psi(x) in double, independently of ATen's: the reflection formula,
    the recurrence up to 20 and 9 terms of the asymptotic series."""
    if math.isnan(x) or x == -math.inf:
        return math.nan
    if x == 0:
        return math.copysign(math.inf, -x)
    if x < 0:
        if x == math.floor(x):
            return math.nan
        # tan has period pi: tan(pi * frac(x)), exact, not tan(pi * x), rounded
        return _digamma(1 - x) - math.pi / math.tan(math.pi * math.modf(x)[0])
    if math.isinf(x):
        return x
    r = 0.0
    while x < 20:
        r -= 1 / x
        x += 1
    z = 1 / (x * x)
    b = [1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12, -3617 / 8160, 43867 / 14364]
    s = sum(c * z ** (k + 1) for k, c in enumerate(b))
    return r + math.log(x) - 0.5 / x - s


def _erfinv(y):
    """erf's inverse by bisection on math.erf (independent of the server's
    Halley steps): NaN outside [-1, 1], +-inf at +-1."""
    if math.isnan(y) or abs(y) > 1:
        return math.nan
    if abs(y) == 1:
        return math.copysign(math.inf, y)
    if y == 0:
        return y
    lo, hi = -6.0, 6.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if math.erf(mid) < y:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _erfc(x):
    return np.vectorize(math.erfc, otypes=[np.float64])(x).astype(x.dtype)


def _xlogy(x, y):
    # 0 where x == 0 (even for y == 0 or inf), NaN where y is NaN
    with np.errstate(all="ignore"):
        r = x * np.log(y)
    return np.where(np.isnan(y), np.nan, np.where(x == 0, 0, r)).astype(r.dtype)


def _floor_divide(a, b):
    # Python's // as torch's div(rounding_mode="floor"): numpy's floor_divide
    with np.errstate(all="ignore"):
        return np.floor_divide(a, b)


def _wrap64(x):
    x %= 1 << 64
    return x - (1 << 64) if x >= 1 << 63 else x


def _ints(f):
    """f on Python ints element by element (broadcast), as int64 with C's wrapping."""
    return lambda a, b: np.vectorize(lambda x, y: _wrap64(f(int(x), int(y))), otypes=[object])(a, b).astype(np.int64)


def _wrap(v, bits):
    v %= 1 << bits
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def _gcd(x, y, bits):
    """ATen's calc_gcd in a signed type of `bits` bits: |INT_MIN| stays
    INT_MIN and C's % keeps the dividend's sign (gcd(INT64_MIN, 6) is -2)."""
    a, b = _wrap(abs(x), bits), _wrap(abs(y), bits)
    while a != 0:
        r = abs(b) % abs(a)
        a, b = (0 if a == -1 else (-r if b < 0 else r)), a
    return b


def _lcm(x, y, bits):
    """ATen's |a / gcd * b|, the product and |.| in int for the narrower types."""
    g = _gcd(x, y, bits)
    if g == 0:
        return 0
    w = max(bits, 32)
    q = -x if g == -1 else (abs(x) // abs(g)) * (1 if (x < 0) == (g < 0) else -1)
    return _wrap(abs(_wrap(q * y, w)), w)


def _ints_w(f):
    """f(x, y, bits) element by element, bits the compute dtype's width (64 for
    uint8 and bool, which hold no negatives)."""
    def run(a, b):
        dt = np.result_type(a, b)
        bits = 64 if dt.kind in "ub" else dt.itemsize * 8
        return np.vectorize(lambda x, y: _wrap64(f(int(x), int(y), bits)), otypes=[object])(a, b).astype(np.int64)
    return run


# shifts as PyTorch 2 defines them past the width (1.13's are undefined there)
_lshift = _ints(lambda x, y: 0 if y < 0 or y >= 64 else x << y)
_rshift = _ints(lambda x, y: (-1 if x < 0 else 0) if y < 0 or y >= 64 else x >> y)


def _relu6_3(x):
    return np.minimum(np.maximum(x + 3, 0), 6)


# op: (reference on compute-dtype arrays, rule, float tolerance (rtol at float32))
OPS = {
    "exp": (np.exp, "FLOAT", 4e-7),
    "log": (np.log, "FLOAT", 4e-7),
    "sqrt": (np.sqrt, "FLOAT", 4e-7),
    "rsqrt": (lambda x: 1 / np.sqrt(x), "FLOAT", 4e-7),
    "sin": (np.sin, "FLOAT", 4e-7),
    "cos": (np.cos, "FLOAT", 4e-7),
    "tanh": (np.tanh, "FLOAT", 4e-7),
    "sigmoid": (_sigmoid, "FLOAT", 4e-7),
    "silu": (lambda x: x * _sigmoid(x), "FLOAT_ONLY", 4e-7),
    "log1p": (np.log1p, "FLOAT", 4e-7),
    "expm1": (np.expm1, "FLOAT", 4e-7),
    "erf": (_erf, "FLOAT", 4e-7),
    "floor": (np.floor, "NUMERIC", 0),
    "ceil": (np.ceil, "NUMERIC", 0),
    "round": (np.round, "NUMERIC", 0),  # half to even, as torch
    "trunc": (np.trunc, "NUMERIC", 0),
    "sign": (_sign, "ANY", 0),
    "logical_not": (np.logical_not, "LOGICAL", 0),
    "fmod.Tensor": (np.fmod, "INT_DIV", 0),
    "fmod.Scalar": (np.fmod, "INT_DIV", 0),
    "remainder.Tensor": (_remainder, "INT_DIV", 2e-7),
    "remainder.Scalar": (_remainder, "INT_DIV", 2e-7),
    "remainder.Scalar_Tensor": (_remainder, "INT_DIV", 2e-7),
    "bitwise_and.Tensor": (np.bitwise_and, "BITWISE", 0),
    "bitwise_and.Scalar": (np.bitwise_and, "BITWISE", 0),
    "bitwise_and.Scalar_Tensor": (np.bitwise_and, "BITWISE", 0),
    "logical_and": (np.logical_and, "LOGICAL", 0),
    "logical_or": (np.logical_or, "LOGICAL", 0),
    "logical_xor": (np.logical_xor, "LOGICAL", 0),
    "bitwise_or.Tensor": (np.bitwise_or, "BITWISE", 0),
    "bitwise_or.Scalar": (np.bitwise_or, "BITWISE", 0),
    "bitwise_or.Scalar_Tensor": (np.bitwise_or, "BITWISE", 0),
    "bitwise_xor.Tensor": (np.bitwise_xor, "BITWISE", 0),
    "bitwise_xor.Scalar": (np.bitwise_xor, "BITWISE", 0),
    "bitwise_xor.Scalar_Tensor": (np.bitwise_xor, "BITWISE", 0),
    "bitwise_left_shift.Tensor": (_lshift, "INT", 0),
    "bitwise_left_shift.Tensor_Scalar": (_lshift, "INT", 0),
    "bitwise_left_shift.Scalar_Tensor": (_lshift, "INT", 0),
    "bitwise_right_shift.Tensor": (_rshift, "INT", 0),
    "bitwise_right_shift.Tensor_Scalar": (_rshift, "INT", 0),
    "bitwise_right_shift.Scalar_Tensor": (_rshift, "INT", 0),
    "gcd": (_ints_w(_gcd), "INT", 0),
    "lcm": (_ints_w(_lcm), "INT", 0),
    "floor_divide": (_floor_divide, "INT_DIV", 2e-7),
    "floor_divide.Scalar": (_floor_divide, "INT_DIV", 2e-7),
    "acos": (np.arccos, "FLOAT", 4e-7),
    "asin": (np.arcsin, "FLOAT", 4e-7),
    "atan": (np.arctan, "FLOAT", 4e-7),
    "acosh": (np.arccosh, "FLOAT", 4e-7),
    "asinh": (np.arcsinh, "FLOAT", 4e-7),
    "atanh": (np.arctanh, "FLOAT", 4e-7),
    "sinh": (np.sinh, "FLOAT", 4e-7),
    "cosh": (np.cosh, "FLOAT", 4e-7),
    "tan": (np.tan, "FLOAT", 4e-7),
    "exp2": (np.exp2, "FLOAT", 4e-7),
    "log2": (np.log2, "FLOAT", 4e-7),
    "log10": (np.log10, "FLOAT", 4e-7),
    "erfc": (_erfc, "FLOAT", 4e-7),
    "reciprocal": (lambda x: 1 / x, "FLOAT", 2e-7),
    "deg2rad": (np.deg2rad, "FLOAT", 2e-7),
    "rad2deg": (np.rad2deg, "FLOAT", 2e-7),
    "frac": (lambda x: x - np.trunc(x), "FLOAT_ONLY", 0),
    "sgn": (_sign, "ANY", 0),
    "signbit": (np.signbit, "LOGICAL", 0),
    "hardsigmoid": (lambda x: _relu6_3(x) / 6, "FLOAT_ONLY", 2e-7),
    "hardswish": (lambda x: x * _relu6_3(x) / 6, "FLOAT_ONLY", 4e-7),
    "mish": (lambda x: x * np.tanh(np.log1p(np.exp(x))), "FLOAT_ONLY", 1e-6),
    "atan2": (np.arctan2, "FLOAT", 4e-7),
    "hypot": (np.hypot, "FLOAT_ONLY", 4e-7),
    "copysign.Tensor": (np.copysign, "FLOAT", 0),
    "copysign.Scalar": (np.copysign, "FLOAT", 0),
    "logaddexp": (np.logaddexp, "FLOAT_ONLY", 1e-6),  # max + log1p(exp(-d)): a few roundings
    "logaddexp2": (np.logaddexp2, "FLOAT_ONLY", 1e-6),
    "xlogy.Tensor": (_xlogy, "FLOAT", 4e-7),
    "fmax": (np.fmax, "ANY", 0),
    "heaviside": (lambda a, b: np.where(np.asarray(a) == 0, b, np.asarray(a) > 0), "SAME", 0),
    "fmin": (np.fmin, "ANY", 0),
    "lgamma": (np.vectorize(_lgamma, otypes=[np.float64]), "FLOAT", 2e-6),
    "digamma": (np.vectorize(lambda v: _digamma(v), otypes=[np.float64]), "FLOAT", 4e-6),
    "sinc": (np.sinc, "FLOAT", 4e-7),
    "erfinv": (np.vectorize(lambda v: _erfinv(v), otypes=[np.float64]), "FLOAT_NOHALF", 4e-7),
    "i0": (lambda x: np.where(np.isinf(x), np.nan, np.i0(np.where(np.isinf(x), 0, x))), "FLOAT_NOHALF", 1e-6),
    "isnan": (np.isnan, "LOGICAL", 0),
    "isinf": (np.isinf, "LOGICAL", 0),
    "isposinf": (np.isposinf, "LOGICAL", 0),
    "isneginf": (np.isneginf, "LOGICAL", 0),
    "isfinite": (np.isfinite, "LOGICAL", 0),
}

# ---- torch's dtype rules, written out independently of the server ----------

_INTS = ["uint8", "int8", "int16", "int32", "int64"]


def promote(a, b):
    """torch.promote_types for the dtypes above (numpy's differs for int+float)."""
    if a == b:
        return a
    if a == "bool":
        return b
    if b == "bool":
        return a
    if (a in FLOATS) != (b in FLOATS):
        return a if a in FLOATS else b
    return np.promote_types(a, b).name


def _cat(dt):
    return 2 if dt in FLOATS else 0 if dt == "bool" else 1


def result_type(operands):
    """torch.result_type over tensors ((dtype, ndim) pairs) and Python numbers:
    dimensioned tensors first, then 0-dim tensors, then numbers, each tier only
    raising the category (bool < integer < float) of the one before; a number
    that raises it gives the default (int64, float32)."""
    def tier(dts):
        dt = None
        for d in dts:
            dt = d if dt is None else promote(dt, d)
        return dt

    dims = tier(d for d, n in (o for o in operands if isinstance(o, tuple)) if n > 0)
    zero = tier(d for d, n in (o for o in operands if isinstance(o, tuple)) if n == 0)
    nums = [o for o in operands if not isinstance(o, tuple)]
    dt = dims
    if zero is not None and (dt is None or _cat(zero) > _cat(dt)):
        dt = zero
    for o in nums:
        c = 0 if isinstance(o, bool) else 2 if isinstance(o, float) else 1
        if c > _cat(dt):
            dt = {1: "int64", 2: "float32"}[c]
    return dt


def expected(op, operands):
    """(compute dtype, output dtype) or the refusal message torch gives."""
    rule = OPS[op][1]
    name = op.split(".")[0]
    dt = result_type(operands)
    if rule == "LOGICAL":
        return dt, "bool"  # computed in result_type, as torch's comparison_op
    if rule in ("FLOAT", "FLOAT_NOHALF"):
        dt = dt if dt in FLOATS else "float32"
    if rule == "SAME" and len({d[0] if isinstance(d, tuple) else d for d in operands}) > 1:
        return f"{name} is not yet implemented for tensors with different dtypes."
    refused = (rule == "FLOAT_ONLY" and dt not in FLOATS) or (rule == "FLOAT_NOHALF" and dt == "float16") or \
        (rule in ("NUMERIC", "INT_DIV") and dt == "bool") or (rule == "BITWISE" and dt in FLOATS) or \
        (rule == "INT" and (dt in FLOATS or dt == "bool"))
    if refused:
        return "refused", dt
    return dt, dt


@functools.lru_cache(maxsize=None)
def torch_words():
    """torch 1.13's refusal per (operator, dtype), every operand of that dtype
    (a Scalar operand 1): its kernel's AT_DISPATCH name, which the server's
    message must repeat ("frac_cpu", "floor_vml_cpu", "lshift_cpu", ...)."""
    keys, cases = [], []
    for op in OPS:
        for dt in DTYPES:
            t = {"dtype": dt, "shape": [2], "data": [True, True] if dt == "bool" else [1, 1]}
            keys.append((op, dt))
            cases.append({"op": op, "args": [1 if k in scalar_positions(op) else t for k in range(arity(op))]})
    return {k: w.get("error") for k, w in zip(keys, torch_ref(cases))}


# ---- inputs -------------------------------------------------------------------


def rand(rng, shape, dtype, positive=False):
    return np.asarray(_rand(rng, shape, dtype, positive))


def _rand(rng, shape, dtype, positive):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype in FLOATS:
        a = (rng.standard_normal(shape) * 4).astype(dtype)
        if positive:
            a = np.abs(a) + np.asarray(0.01, dtype)
        flat = a.reshape(-1)
        specials = [np.nan, np.inf, -np.inf, -0.0, 0.5, -1.5, 2.5]
        for i in range(min(len(flat) // 3, len(specials))):
            flat[rng.integers(0, len(flat))] = specials[i]
        return a
    info = np.iinfo(dtype)
    a = rng.integers(max(info.min, -50), min(info.max, 50), shape, endpoint=True).astype(dtype)
    flat = a.reshape(-1)
    if len(flat) > 4:  # the extremes too
        flat[0], flat[1] = info.min, info.max
    return a


def cuda_available(server):
    return server.get("/v1/devices").json()["cuda"]["available"]


@pytest.fixture(params=["cpu", "cuda"])
def device(request, server):
    if request.param == "cuda" and not cuda_available(server):
        pytest.skip("no CUDA device on this machine (GET /v1/devices says why)")
    return request.param


# Errors on the scale of the operands (or 1), not the result, in ulps: logaddexp's
# max + log1p(...) near 0, sinc's sin(pi x) at integers (pi x is rounded
# first), digamma's sum of terms near its root (1.46), lgamma near its roots (1, 2).
CANCELLING = {"logaddexp": 4, "logaddexp2": 4, "sinc": 4, "digamma": 16, "lgamma": 8}
BINARY = {"fmod", "remainder", "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or",
          "logical_xor", "floor_divide", "atan2", "hypot", "copysign", "logaddexp",
          "logaddexp2", "xlogy", "fmax", "fmin", "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm", "heaviside"}


def arity(op):
    return 2 if op.split(".")[0] in BINARY else 1


def scalar_positions(op):
    ov = op.split(".")[1] if "." in op else ""
    return {"Scalar": {1}, "Tensor_Scalar": {1}, "Scalar_Tensor": {0}}.get(ov, set())


def call(server, op, operands, device):
    args = [tensor(o) if isinstance(o, np.ndarray) else o for o in operands]
    return server.call(op, *args, device=device if device != "cpu" else None)


def check(op, operands, resp, rtol_f32):
    ref, rule = OPS[op][0], OPS[op][1]
    dts = [(o.dtype.name, o.ndim) if isinstance(o, np.ndarray) else o for o in operands]
    want = expected(op, dts)
    if isinstance(want, str):
        assert resp.status_code in (400, 422, 501), resp.text
        assert error_message(resp) == want
        return
    if want[0] == "refused":
        assert resp.status_code in (400, 422, 501), resp.text
        words = torch_words()[(op, want[1])]
        assert words and error_message(resp) in words, (op, want[1], error_message(resp), words)
        return
    compute, out_dt = want
    vals = [o.astype(compute) if isinstance(o, np.ndarray) else o for o in operands]
    is_int_div = rule == "INT_DIV" and compute not in FLOATS
    if is_int_div and any(np.any(np.asarray(v) == 0) for v in vals[1:2]):
        assert resp.status_code == 400, resp.text
        assert error_message(resp) == "ZeroDivisionError"
        return
    assert resp.status_code == 200, resp.text
    got = from_json(resp.json()["outputs"][0])
    with np.errstate(all="ignore"):
        if compute in FLOATS and rtol_f32:
            # transcendental: reference in float64, rounded to the compute dtype
            wide = [v.astype(np.float64) if isinstance(v, np.ndarray) else float(v) for v in vals]
            want_v = np.asarray(ref(*wide)).astype(compute)
        else:
            if compute not in FLOATS:
                # Python numbers join integer math as that dtype, like torch
                vals = [v if isinstance(v, np.ndarray) else np.asarray(v).astype(compute) for v in vals]
            want_v = np.asarray(ref(*vals))
    want_v = want_v.astype(out_dt)
    assert got.dtype.name == out_dt, (got.dtype, out_dt)
    assert got.shape == want_v.shape
    if out_dt in FLOATS:
        rtol = {"float16": 2e-3, "float32": rtol_f32, "float64": 1e-13}[out_dt] if rtol_f32 else 0
        atol = 0 if not rtol else rtol * 1e-3
        if op.split(".")[0] in CANCELLING and rtol:
            # max + log1p(...) near 0 keeps an error of a few ulps of the operands
            mag = np.broadcast_to(functools.reduce(np.maximum, [np.abs(np.asarray(v, np.float64)) for v in vals]),
                                  got.shape)
            ulps = CANCELLING[op.split(".")[0]]
            atol = ulps * np.finfo(out_dt).eps * np.where(np.isfinite(mag), np.maximum(mag, 1), 0) + atol
            with np.errstate(invalid="ignore"):  # inf - inf where both are inf
                bad = ~(np.isclose(got, want_v, rtol=rtol, atol=0, equal_nan=True) |
                        (np.abs(got.astype(np.float64) - want_v) <= atol))
            assert not bad.any(), f"{op} {dts}: {got[bad][:5]} vs {want_v[bad][:5]}"
            return
        np.testing.assert_allclose(got, want_v, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"{op} {dts}")
    else:
        np.testing.assert_array_equal(got, want_v, err_msg=f"{op} {dts}")


SHAPES = [((3, 4), (3, 4)), ((4, 1, 3), (5, 1)), ((), (3,)), ((0, 3), (1, 3)), ((7,), ())]


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_dtype(server, rng, device, op):
    """Each dtype (both operands of it): values, the output dtype, or torch's refusal."""
    pos = op in ("log", "sqrt", "rsqrt")
    for dt in DTYPES:
        shape = (5, 6)
        operands = []
        for k in range(arity(op)):
            if k in scalar_positions(op):
                operands.append(float(rng.integers(-5, 6)) + 0.5 if dt in FLOATS else int(rng.choice([-3, 2, 7])))
            else:
                a = rand(rng, shape, dt, positive=pos)
                if k == 1 and OPS[op][1] == "INT_DIV" and dt not in FLOATS:
                    a[a == 0] = 3  # zero divisors have their own test
                operands.append(a)
        if op.endswith("Scalar_Tensor") and dt not in FLOATS:
            operands[1][operands[1] == 0] = 3
        check(op, operands, call(server, op, operands, device), OPS[op][2])


@pytest.mark.parametrize("op", sorted(o for o in OPS if arity(o) == 2 and not scalar_positions(o)))
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_broadcast_and_mixed_dtypes(server, rng, device, op, sa, sb):
    """Broadcasting (0-dim and empty included) with operands of two dtypes."""
    for da, db in [("int32", "int64"), ("int8", "uint8"), ("float32", "int64"), ("float64", "float16"),
                   ("bool", "int16"), ("float32", "float32")]:
        a, b = rand(rng, sa, da), rand(rng, sb, db)
        if OPS[op][1] == "INT_DIV":
            b = np.asarray(np.where(b == 0, np.asarray(3, b.dtype), b)) if db != "bool" else b
        check(op, [a, b], call(server, op, [a, b], device), OPS[op][2])


@pytest.mark.parametrize("op", sorted(o for o in OPS if arity(o) == 1))
@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (1,), (3, 1, 4, 2)])
def test_unary_shapes(server, rng, device, op, shape):
    for dt in ("float32", "int32"):
        a = rand(rng, shape, dt, positive=op in ("log", "sqrt", "rsqrt"))
        check(op, [a], call(server, op, [a], device), OPS[op][2])


def test_division_by_zero_is_an_error_and_the_server_goes_on(server, device):
    a = np.array([5, -5, 7], np.int32)
    z = np.array([1, 0, 2], np.int32)
    for op, args in [("fmod.Tensor", [a, z]), ("remainder.Tensor", [a, z]), ("fmod.Scalar", [a, 0]),
                     ("remainder.Scalar", [a, 0]), ("remainder.Scalar_Tensor", [3, z])]:
        r = call(server, op, args, device)
        assert r.status_code == 400 and error_message(r) == "ZeroDivisionError", (op, r.text)
    # float divisors of 0 follow IEEE: nan, as in torch
    r = call(server, "fmod.Tensor", [a.astype(np.float32), z.astype(np.float32)], device)
    got = from_json(r.json()["outputs"][0])
    assert np.isnan(got[1]) and got[0] == 0 and got[2] == 1
    assert server.alive()


def test_documented_rules(server, device):
    """The cases PyTorch 1.13 documents or shows, written out."""
    f = lambda *v: np.array(v, np.float32)  # noqa: E731
    i = lambda *v: np.array(v, np.int64)  # noqa: E731

    def out(op, *args):
        r = call(server, op, list(args), device)
        assert r.status_code == 200, r.text
        return from_json(r.json()["outputs"][0])

    # fmod: the dividend's sign; remainder: the divisor's (Python's %)
    np.testing.assert_array_equal(out("fmod.Tensor", i(5, -5, 5, -5), i(3, 3, -3, -3)), [2, -2, 2, -2])
    np.testing.assert_array_equal(out("remainder.Tensor", i(5, -5, 5, -5), i(3, 3, -3, -3)), [2, 1, -1, -2])
    np.testing.assert_array_equal(out("remainder.Tensor", f(-1, 1, 5), f(np.inf, np.inf, 0)), [np.inf, 1, np.nan])
    np.testing.assert_array_equal(out("fmod.Tensor", f(np.inf, 1), f(2, np.inf)), [np.nan, 1])
    # INT64_MIN % -1 is 0 (torch 1.13 itself dies of SIGFPE there)
    np.testing.assert_array_equal(out("fmod.Tensor", i(-2**63), i(-1)), [0])
    np.testing.assert_array_equal(out("remainder.Tensor", i(-2**63), i(-1)), [0])
    # round: half to even; floor/ceil/trunc keep -0.0 and integers unchanged
    np.testing.assert_array_equal(out("round", f(0.5, 1.5, 2.5, -0.5, -2.5)), [0, 2, 2, -0.0, -2])
    assert np.signbit(out("floor", f(-0.0)))[0]
    np.testing.assert_array_equal(out("ceil", np.array([1, 254], np.uint8)), [1, 254])
    # sign: NaN and -0.0 give 0; bool stays bool
    np.testing.assert_array_equal(out("sign", f(np.nan, -0.0, -3, np.inf)), [0, 0, -1, 1])
    assert out("sign", np.array([True, False])).dtype == np.bool_
    # logical ops read NaN as true; a 0-dim float64 of 1e-50 stays true next to int64
    np.testing.assert_array_equal(out("logical_not", f(np.nan, 0, -0.0)), [False, True, True])
    np.testing.assert_array_equal(out("logical_and", np.array(1e-50), i(1, 0)), [True, False])
    # bitwise_and of bool and an int scalar is int64
    got = out("bitwise_and.Scalar", np.array([True, False]), 3)
    assert got.dtype == np.int64 and list(got) == [1, 0]
    # torch.exp of integers computes in the default float
    assert out("expm1", i(0, 1)).dtype == np.float32


def test_tables_list_the_new_operators(server):
    groups = {g["name"]: g for g in server.get("/v1/ops").json()["operators"]}
    for op in OPS:
        base, _, ov = op.partition(".")
        assert ov in [o["overload"] for o in groups[f"aten::{base}"]["overloads"]], op
    t = server.get("/v1/ops/aten::fmod.Tensor").json()
    kernels = {row["key"]: row["kernel"] for row in t["table"]}
    assert kernels["CPU"] == "od_cpu_ew" and kernels["Meta"] == "od_meta_kernel"


def test_gcd_lcm_in_the_tensors_own_width_against_torch(server, rng, device):
    """ATen's calc_gcd takes |x| in the tensor's type (|INT16_MIN| stays
    INT16_MIN, so gcd(-32768, 6) is -2 in int16) and lcm's a / g * b runs in
    int for the narrower types (lcm(10, 97) in int8 is (int8)970 = -54): the
    extremes of every integer dtype narrower than int64 (torch_ref's values
    travel as doubles, exact below 2^53) beside random values, against torch 1.13."""
    cases = []
    for dt in ("uint8", "int8", "int16", "int32"):
        info = np.iinfo(dt)
        ext = np.array([info.min, info.min + 1, info.max, 0, 1, -1 if info.min else 2, 6, 97, 10], dtype=object)
        x = np.concatenate([ext, rng.integers(info.min, info.max, 23, endpoint=True)]).astype(dt)
        y = np.concatenate([ext[::-1], rng.integers(info.min, info.max, 23, endpoint=True)]).astype(dt)
        for op in ("gcd", "lcm"):
            cases.append((op, x, y))
    # int32 over whole 64-element blocks (the CPU's AVX-512 loop), full-range and small values,
    # zeros and an INT32_MIN in one block (that block runs the scalar form)
    x = np.concatenate([rng.integers(-2**31, 2**31, 700), rng.integers(-300, 300, 300)]).astype(np.int32)
    y = np.concatenate([rng.integers(-2**31, 2**31, 700), rng.integers(-300, 300, 300)]).astype(np.int32)
    x[rng.integers(0, 1000, 20)] = 0
    x[500], y[100] = np.iinfo(np.int32).min, 0
    # INT32_MIN's partner even: torch 1.13's own lcm dies of SIGFPE on (INT32_MIN, odd) (its gcd is -1
    # there, and INT32_MIN / -1 traps), so the reference could not run (seed 2684466428 drew an odd one)
    y[500] &= ~1
    for op in ("gcd", "lcm"):
        cases.append((op, x, y))
    want = torch_ref([{"op": op, "args": [tensor(x), tensor(y)], "kwargs": {}} for op, x, y in cases])
    for (op, x, y), w in zip(cases, want):
        if "error" in w:  # INT_MIN / -1 inside lcm traps in torch's own kernel
            continue
        r = call(server, op, [x, y], device)  # CUDA too: od_math.h's _bits forms there as well
        assert r.status_code == 200, r.text[:300]
        got = from_json(r.json()["outputs"][0]).reshape(-1).astype(np.int64)
        np.testing.assert_array_equal(got, np.array(w["value"], np.int64).reshape(-1),
                                      err_msg=f"{op} {x.dtype} {x.tolist()[:40]} {y.tolist()[:40]}")


def test_pow_scalar_exponent_bit_for_bit_against_torch(server, rng):
    """pow.Tensor_Scalar on float32 and float64 as ATen 1.13's CPU kernel
    computes it: exponents 2, 3 and -2 as products rounded at each step; 0.5,
    -0.5 and -1 as sqrt, rsqrt and reciprocal; any other exponent as Sleef's
    pow on the vectorized path (the exponent as the dtype: float32's
    16777217 turns even there, so (-1)^16777217 is 1) and std::pow in double
    on the scalar tail. Lengths 7 (tail only), 40 (32 vectorized + 8 tail)
    and 1000, values in [-3, 3] and the specials, equal to torch bit for bit
    (NaN for NaN, the sign of zeros too), except that Sleef's pow may round
    one ulp apart where the server runs its SSE variant (a build without
    the AVX2 clones: ASan's, or a CPU without AVX2) and torch its AVX2 one."""
    specials = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan]
    exps = [2, 3, -2, 0.5, -0.5, -1, 2.5, -1.5, 0.3, 7, 16777217]
    cases = []
    for dt in ("float32", "float64"):
        for n in (7, 40, 1000):
            x = rng.uniform(-3, 3, n)
            x[: min(n, len(specials))] = specials[: min(n, len(specials))]
            x = rng.permutation(x).astype(dt)
            for e in exps:
                cases.append((x, e))
    want = torch_ref([{"op": "pow.Tensor_Scalar", "args": [tensor(x), e], "kwargs": {}} for x, e in cases])
    bad = []
    for (x, e), w in zip(cases, want):
        r = server.call("pow.Tensor_Scalar", tensor(x), e)
        assert r.status_code == 200, r.text[:300]
        got = from_json(r.json()["outputs"][0]).reshape(-1)
        ref = np.array(w["value"], dtype=np.float64).astype(x.dtype).reshape(-1)
        same = ((got == ref) & (np.signbit(got) == np.signbit(ref))) | (np.isnan(got) & np.isnan(ref))
        if e not in (2, 3, -2, 0.5, -0.5, -1):  # Sleef's pow: one ulp between its SSE and AVX2 variants
            with np.errstate(invalid="ignore"):
                same |= np.isfinite(ref) & (np.abs(got - ref) <= np.spacing(np.abs(ref)))
        if not same.all():
            i = int(np.argmin(same))
            bad.append(f"{x.dtype} n={x.size} e={e}: {int((~same).sum())} differ, x={x[i]!r} got {got[i]!r} "
                       f"torch {ref[i]!r}")
    assert not bad, "\n".join(bad[:20])


# Operators whose vectorized path is Sleef's function, as in ATen 1.13's
# Vectorized<float/double> (od_math.h's OD_MATH_SLEEF1_/2_ lines)
# (exp2 is Sleef's too, though torch's is libm's on both paths: within an ulp, and 10x faster)
SLEEF_OPS = ["erf", "erfc", "log", "sin", "cos", "tan", "acos", "asin", "atan", "expm1", "log2", "log10",
             "log1p", "lgamma", "atan2", "hypot", "pow.Tensor_Tensor"]


@pytest.mark.parametrize("op", SLEEF_OPS)
def test_sleef_vectorized_path_bit_for_bit_against_torch(server, rng, op):
    """A contiguous tensor's first n - n % 16 (float64: 8) elements take Sleef's
    vector function, as torch's do, and the rest libm's (erf, log, sin and the
    other vml operators of ATen 1.13: Sleef on every element, the tail too):
    lengths 7, 40 and 1003, normal values at three scales and the specials,
    equal to torch bit for bit (the sign of zeros too). A sanitizer build
    (-O1: gcc vectorises nothing) computes every element with libm, a few
    ulps from Sleef (erfc and lgamma), and absolutely so near lgamma's
    zeros: 8 ulps of the value plus 8 of 1."""
    from conftest import is_sanitized
    specials = [0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, np.nan, 1e-30, 30.0, -30.0]
    binary = op in ("atan2", "hypot", "pow.Tensor_Tensor")
    cases = []
    for dt in ("float32", "float64"):
        for n in (7, 40, 1003):
            xs = []
            for _ in range(2 if binary else 1):
                x = rng.standard_normal(n) * rng.choice([0.1, 2.0, 50.0], n)
                x[: min(n, len(specials))] = specials[: min(n, len(specials))]
                xs.append(rng.permutation(x).astype(dt))
            cases.append(xs)
    want = torch_ref([{"op": op, "args": [tensor(x) for x in xs]} for xs in cases])
    bad = []
    for xs, w in zip(cases, want):
        r = server.call(op, *[tensor(x) for x in xs])
        assert r.status_code == 200, r.text[:300]
        got = from_json(r.json()["outputs"][0]).reshape(-1)
        ref = np.array(w["value"], dtype=np.float64).astype(xs[0].dtype).reshape(-1)
        eps = np.finfo(xs[0].dtype).eps
        same = ((got == ref) & (np.signbit(got) == np.signbit(ref))) | (np.isnan(got) & np.isnan(ref))
        if is_sanitized():
            with np.errstate(invalid="ignore"):
                same |= np.isfinite(ref) & (np.abs(got - ref) <= 8 * (np.spacing(np.abs(ref)) + eps))
        if not same.all():
            i = int(np.argmin(same))
            bad.append(f"{xs[0].dtype} n={xs[0].size}: {int((~same).sum())} differ, x={xs[0][i]!r} got {got[i]!r} "
                       f"torch {ref[i]!r}")
    # a transposed self (through /v1/run): ATen's vml kernels gather it into a buffer and run the same
    # vector function; the binary operators' strided loop is libm's in both. Small finite values: torch
    # groups lanes in the input's memory order, the server in the output's, which shows where Sleef's
    # sin, cos and tan couple their lanes (od_math.h's OD_MATH_TRIG_BOUND)
    if not binary:
        for dt in ("float32", "float64"):
            a = (rng.standard_normal((37, 29)) * rng.choice([0.1, 2.0], (37, 29))).astype(dt)
            a.flat[rng.integers(0, a.size, 5)] = rng.choice([0.0, -0.0, 1.0, -1.0, 0.5, 1e-30], 5)
            want = torch_ref([{"op": op, "args": [tensor(np.ascontiguousarray(a.T))]}])[0]
            r = server.post("/v1/run", {"steps": [{"op": "transpose.int", "args": [tensor(a), 0, 1]},
                                                  {"op": op, "args": [{"ref": "$0"}]}], "device": "cpu"})
            assert r.status_code == 200, r.text[:300]
            got = from_json(r.json()["outputs"][-1]).reshape(-1)
            ref = np.array(want["value"], dtype=np.float64).astype(dt).reshape(-1)
            eps = np.finfo(dt).eps
            same = ((got == ref) & (np.signbit(got) == np.signbit(ref))) | (np.isnan(got) & np.isnan(ref))
            if is_sanitized():
                with np.errstate(invalid="ignore"):
                    same |= np.isfinite(ref) & (np.abs(got - ref) <= 8 * (np.spacing(np.abs(ref)) + eps))
            if not same.all():
                bad.append(f"{dt} transposed: {int((~same).sum())} differ")
    assert not bad, "\n".join(bad[:20])


def test_long_dtype_conversions_equal_torch(server, rng):
    """_to_copy's conversion loops (cpu/fill.c, vectorised and cloned for AVX2 and AVX-512) over 100,003
    elements, past every vector width and with a ragged end: every value equal to torch's, float32 to
    each float dtype with NaN, infinities, -0.0, denormals and values that round to infinity or to zero
    there, and to each integer dtype from values with fractions (truncation) inside its range."""
    n = 100_003
    x = (rng.standard_normal(n) * 1000).astype(np.float32)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-40, -1e-42, 7e4, -7e4, 3.4e38, 1e-8], np.float32)
    x[rng.integers(0, n, 200)] = rng.choice(specials, 200)
    small = (rng.random(n) * 120).astype(np.float32)  # in every integer dtype's range
    cases = []
    for dt in ("float64", "float16", "bfloat16"):
        cases.append((x, dt))
    for dt in ("int64", "int32", "int16", "int8", "uint8", "bool"):
        cases.append((small, dt))
    assert_bits_as_torch(server, [("_to_copy", [tensor(a)], {"dtype": dt}) for a, dt in cases])


def test_long_masked_fill_equals_numpy(server, rng):
    """masked_fill's parallel select (cpu/masked.c: dense operands of one shape, a bool mask) over
    100,003 elements in each element size, in place and out of place, and the general walk beside it
    (a broadcast mask, a uint8 mask, a transposed self): every element equal to numpy's where."""
    n = 100_003
    mask = rng.random(n) < 0.5
    for dt in ("float32", "float64", "float16", "int64", "int16", "uint8", "bool"):
        x = (rng.random(n) < 0.5) if dt == "bool" else (rng.random(n) * 100).astype(dt)
        v = True if dt == "bool" else 7
        want = np.where(mask, np.array(v, dt), x)
        for op in ("masked_fill.Scalar", "masked_fill_.Scalar"):
            r = server.post(f"/v1/ops/{op}", {"args": [tensor(x), tensor(mask), v]})
            assert r.status_code == 200, r.text[:300]
            np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), want, err_msg=f"{op} {dt}")
        r = server.post("/v1/ops/masked_fill.Tensor", {"args": [tensor(x), tensor(mask), tensor(np.array(v, dt))]})
        assert r.status_code == 200, r.text[:300]
        np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), want, err_msg=f"masked_fill.Tensor {dt}")
    x = rng.random((300, 400)).astype(np.float32)
    row = rng.random(400) < 0.5
    r = server.post("/v1/ops/masked_fill.Scalar", {"args": [tensor(x), tensor(row), -1.5]})
    np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), np.where(row, np.float32(-1.5), x))
    m8 = (rng.random((300, 400)) < 0.5).astype(np.uint8)
    r = server.post("/v1/ops/masked_fill.Scalar", {"args": [tensor(x), tensor(m8), 2.5]})
    np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), np.where(m8 == 1, np.float32(2.5), x))
    full = rng.random((300, 400)) < 0.5
    r = server.post("/v1/run", {"steps": [{"op": "transpose.int", "args": [tensor(x.T.copy()), 0, 1]},
                                          {"op": "masked_fill.Scalar", "args": [{"ref": "$0"}, tensor(full), 0.25]}]})
    np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), np.where(full, np.float32(0.25), x))
