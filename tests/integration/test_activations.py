"""The parameterised activations and special functions (ops.def's
"parameterised activations" section: hardtanh, elu, celu, selu, leaky_relu,
softplus, softshrink, hardshrink, threshold, log_sigmoid(_forward), logit,
nan_to_num, bitwise_not, erfinv, i0, polygamma and their in-place variants)
over HTTP, against PyTorch 1.13 (tools/torch_ref.py) and double-precision
references, on fresh random inputs: every dtype (accepted or refused as
torch's CPU kernels are), parameter extremes, NaN/Inf/-0.0, empty, 0-dim and
non-contiguous (transposed, expanded) tensors, and their gradients.
"""

import math
import uuid

import numpy as np
import pytest

from conftest import from_json, torch_ref
from test_autograd import RG, g, server_grads

INF, NAN = math.inf, math.nan
ALL = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
# (rtol, atol) against torch computed in the same dtype; torch's bfloat16
# kernels round every intermediate to bfloat16 (logit's x / (1 - x)) where
# the server rounds once, so near a zero of the result an absolute 2^-6
TOL = {"float64": (1e-13, 1e-300), "float32": (4e-6, 1e-30), "bfloat16": (1.6e-2, 2.0 ** -6)}


def bf16_round(a):
    """float64 values rounded to the nearest bfloat16 (ties to even), as float64."""
    f = np.asarray(a, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out = rounded.view(np.float32).astype(np.float64)
    return np.where(np.isnan(f), np.nan, out)


def W(a, dtype):
    """A wire tensor of dtype from float64 values (rounded as that dtype)."""
    a = np.asarray(a, dtype=np.float64)
    if dtype == "bfloat16":
        a = bf16_round(a)
    elif dtype == "bool":
        a = a != 0
    elif dtype not in ("float16", "float32", "float64"):
        info = np.iinfo(dtype)
        with np.errstate(invalid="ignore"):  # int64's max is not a double: the cast saturates
            a = np.clip(np.nan_to_num(a, nan=0, posinf=100, neginf=-100).round(), info.min, info.max).astype(dtype)
    else:
        with np.errstate(over="ignore"):
            a = a.astype(dtype)
    data = []
    for x in a.reshape(-1).tolist():
        if isinstance(x, float) and not math.isfinite(x):
            x = "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")
        data.append(x)
    return {"dtype": dtype, "shape": list(a.shape), "data": data}


def values(rng, *shape):
    """Random values with NaN, +-Inf, +-0.0 and large magnitudes mixed in."""
    a = rng.standard_normal(shape) * 2.5
    if a.size:
        specials = np.array([NAN, INF, -INF, 0.0, -0.0, 1e30, -1e30, 0.5, -0.5, 1.0, -1.0])
        k = rng.integers(0, a.size, size=max(1, a.size // 4))
        a.flat[k] = rng.choice(specials, size=k.size)
    return a


# op, the parameter sets (positional, after self), the dtypes torch 1.13's CPU
# kernels accept (others must be refused by both)
FLOATS3 = ["bfloat16", "float32", "float64"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]
CASES = [
    ("hardtanh", [[], [-0.5, 0.25], [0, 6], [2.0, -2.0], [-INF, INF], [-1e300, 1e300]], INTS + FLOATS3),
    ("elu", [[], [0.5, 2.0, 0.25], [-1.5, 1.0, 1.0], [0, 0, 0], [1e30, 1.0, 1.0], [1, 1, -3]], FLOATS3),
    ("celu", [[], [0.3], [-2.0], [1e-30]], FLOATS3),
    ("selu", [[]], FLOATS3),
    ("leaky_relu", [[], [0.3], [-2.0], [0], [1e30]], FLOATS3),
    ("softplus", [[], [2.0, 3.0], [-1.0, 20], [0.5, -INF], [1e-30, 20], [1.0, INF]], FLOATS3),
    ("softshrink", [[], [0.0], [2.5], [INF], [1e-30]], FLOATS3),
    ("hardshrink", [[], [0.0], [2.5], [-1.0], [INF]], FLOATS3),
    ("threshold", [[0.1, 20.0], [-0.5, -3], [0, 0], [INF, -1.0], [-INF, 7], [2, 5]], INTS + FLOATS3),
    ("log_sigmoid", [[]], FLOATS3),
    ("logit", [[], [0.1], [0.7], [0.0], [-0.2], [0.5]], ALL[:6] + FLOATS3),
    ("nan_to_num", [[], [1.5, 100.0, -100.0], [None, None, 7.0], [NAN, INF, -INF], [1e300, -1e300, 1e300]], ALL),
    ("bitwise_not", [[]], ["bool"] + INTS),
    ("erfinv", [[]], ALL[:6] + FLOATS3),
    ("i0", [[]], ALL[:6] + FLOATS3),
]


def exp_minus_one_atol(op, p, dtype):
    """elu, celu and selu compute coef * (exp(x) - 1) as torch 1.13 does, not with expm1: near x = 0 the
    result keeps exp's rounding on the scale of 1, and torch's own vectorised (Sleef) and scalar (libm)
    exp differ there by an ulp. Two ulps of a value below 1, times coef, absolute."""
    if dtype not in ("float32", "float64"):
        return 0.0
    coef = {"elu": lambda: abs(p[0] * p[1]) if p else 1.0, "celu": lambda: abs(p[0]) if p else 1.0,
            "selu": lambda: 1.0507009873554805 * 1.6732632423543772}.get(op, lambda: 0.0)()
    return coef * 2.0 ** (-23 if dtype == "float32" else -52)


def compare(op, got, want, dtype, extra_atol=0.0):
    assert got.shape == tuple(want["shape"]), (op, got.shape, want["shape"])
    w = np.array(want["value"], dtype=np.float64).reshape(want["shape"])
    gf = got.astype(np.float64)
    if dtype not in TOL:
        np.testing.assert_array_equal(gf, w, err_msg=f"{op} {dtype}")
        return
    rtol, atol = TOL[dtype]
    atol = max(atol, extra_atol)
    np.testing.assert_array_equal(np.isnan(gf), np.isnan(w), err_msg=f"{op} {dtype}: NaN positions")
    fin = np.isfinite(w)
    np.testing.assert_array_equal(gf[~fin & ~np.isnan(w)], w[~fin & ~np.isnan(w)], err_msg=f"{op} {dtype}: inf")
    np.testing.assert_allclose(gf[fin], w[fin], rtol=rtol, atol=atol, err_msg=f"{op} {dtype}")


def got_tensor(out):
    if out["dtype"] == "bfloat16":
        return np.array([float(x) if isinstance(x, str) else x for x in out["data"]]).reshape(out["shape"])
    return from_json(out)


def jnum(v):
    """A Scalar argument as JSON carries it (NaN and infinities as strings)."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    return v


def call(server, op, args):
    return server.post(f"/v1/ops/{op}", {"args": [jnum(a) for a in args], "device": "cpu"})


@pytest.mark.parametrize("op,params,accepted", CASES, ids=[c[0] for c in CASES])
def test_values_and_dtypes_against_torch(server, rng, op, params, accepted):
    shapes = [(3, 5), (17,), (), (0, 3), (2, 1, 4)]
    calls = []
    for dt in ALL:
        for shape in shapes:
            for p in params:
                calls.append((dt, shape, list(p)))
    wires = [[W(values(rng, *shape), dt)] + p for dt, shape, p in calls]
    refs = torch_ref([{"op": op, "args": w} for w in wires])
    for (dt, shape, p), w, want in zip(calls, wires, refs):
        r = call(server, op, w)
        if "error" in want:
            assert r.status_code in (400, 422), (op, dt, shape, p, r.status_code, want["error"])
            continue
        assert dt in accepted, (op, dt, "torch accepted a dtype the test says it refuses")
        assert r.status_code == 200, (op, dt, shape, p, r.text)
        out = r.json()["outputs"][0]
        assert out["dtype"] == want["dtype"], (op, dt, out["dtype"], want["dtype"])
        compare(f"{op}{p}", got_tensor(out), want, want["dtype"], exp_minus_one_atol(op, p, want["dtype"]))


def test_polygamma_against_torch(server, rng):
    calls = []
    for n in (0, 1, 2, 3, 5):
        for dt in ("float64", "float32", "bfloat16", "int64", "bool", "float16"):
            calls.append((n, dt, values(rng, 4, 3)))
    refs = torch_ref([{"op": "polygamma", "args": [n, W(a, dt)]} for n, dt, a in calls])
    for (n, dt, a), want in zip(calls, refs):
        r = call(server, "polygamma", [n, W(a, dt)])
        if "error" in want:
            assert r.status_code in (400, 422), (n, dt, r.text)
            continue
        assert r.status_code == 200, r.text
        out = r.json()["outputs"][0]
        got = got_tensor(out)
        w = np.array(want["value"]).reshape(want["shape"])
        np.testing.assert_array_equal(np.isnan(got), np.isnan(w), err_msg=f"polygamma({n}) {dt}")
        fin = np.isfinite(w) & (np.abs(w) < 1e30)
        # torch's float32 zeta sums in float32: a few more ulps than elementwise math
        rtol = {"float64": 1e-12, "bfloat16": 2e-2}.get(want["dtype"], 2e-5)
        np.testing.assert_allclose(got[fin], w[fin], rtol=rtol, atol=1e-6, err_msg=f"polygamma({n}) {dt}")
    r = call(server, "polygamma", [-1, W([1.0], "float64")])
    assert r.status_code == 400 and "does not support negative n" in r.text


def test_trigamma_long_tensor_blocks_against_torch_and_the_scalar_path(server, rng):
    """polygamma(1, x) on a long contiguous tensor, whose blocks of 64 the
    server computes in two passes (the reflection's sin alone, then the rest
    vectorised): against torch, and bit for bit against the same values
    sent as a 3-element tensor (the one-pass scalar path), across the
    reflection's edge at 1/2, the poles and the specials."""
    for dt in ("float32", "float64"):
        x = np.concatenate([rng.uniform(-4, 4, 300), rng.uniform(0.45, 0.55, 100), rng.standard_normal(100) * 20,
                            [0.5, 0.49999997, 0.0, -0.0, -1.0, -2.5, 1e-30, 1e30, INF, -INF, NAN]])
        x = rng.permutation(x).astype(dt)
        want = torch_ref([{"op": "polygamma", "args": [1, W(x, dt)]}])[0]
        r = call(server, "polygamma", [1, W(x, dt)])
        assert r.status_code == 200, r.text
        got = got_tensor(r.json()["outputs"][0]).astype(np.float64)
        w = np.array(want["value"], dtype=np.float64)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(w), err_msg=f"trigamma {dt}: NaN positions")
        fin = np.isfinite(w) & (np.abs(w) < 1e30)
        np.testing.assert_allclose(got[fin], w[fin], rtol=2e-5 if dt == "float32" else 1e-12, atol=1e-6,
                                   err_msg=f"trigamma {dt}")
        for k in range(0, x.size - 3, 37):  # a few elements through the scalar path
            one = got_tensor(call(server, "polygamma", [1, W(x[k:k + 3], dt)]).json()["outputs"][0])
            same = (one == got[k:k + 3]) | (np.isnan(one) & np.isnan(got[k:k + 3]))
            assert same.all(), (dt, x[k:k + 3], one, got[k:k + 3])


def test_refusals_name_torch_reasons(server):
    x = W([1.0, -2.0], "float32")
    cases = [
        ("hardtanh", [W([1, 0], "bool")], "Bool inputs not supported for hardtanh"),
        ("hardtanh", [W([1, 2], "uint8"), -1, 1], "cannot do hardtanh on an unsigned type with negative limits"),
        ("hardtanh", [W([1, 2], "int8"), -1000, 1], "value cannot be converted to type int8_t without overflow"),
        ("softshrink", [x, -0.5], "lambda must be greater or equal to 0, but found to be -0.5."),
        ("celu", [x, 0], "ZeroDivisionError: alpha cannot be 0 for CELU"),
        ("elu", [W([1.0], "float16")], "not implemented for 'Half'"),
        ("elu", [x, 1e39], "value cannot be converted to type float without overflow"),
        ("threshold", [W([1.0], "bfloat16"), 1e39, 0], "value cannot be converted to type at::BFloat16"),
        ("leaky_relu", [W([1, 2], "int64")], "not implemented for 'Long'"),
        ("bitwise_not", [x], "not implemented for 'Float'"),
        ("polygamma", [-2, x], "polygamma(n, x) does not support negative n."),
    ]
    for op, args, msg in cases:
        r = call(server, op, args)
        assert r.status_code in (400, 422), (op, r.status_code, r.text)
        assert msg in r.json()["error"]["message"], (op, r.text)
    # a NaN limit fills hardtanh's result with NaN before clamp's dtype check, float16 too
    r = call(server, "hardtanh", [W([1.0, 2.0], "float16"), NAN, 1.0])
    assert r.status_code == 200 and np.isnan(from_json(r.json()["outputs"][0])).all(), r.text


def test_non_contiguous_and_in_place_against_torch(server, rng):
    """A transposed self (through /v1/run) and the in-place variants, with an
    expanded self where ATen allows it (threshold_)."""
    ops = [("hardtanh", [-0.4, 0.9]), ("elu", [0.7]), ("leaky_relu", [0.1]), ("softplus", [1.5, 2.0]),
           ("softshrink", [0.3]), ("hardshrink", [0.3]), ("threshold", [0.2, -1.0]), ("logit", [0.05]),
           ("nan_to_num", [0.0, 9.0, -9.0]), ("erfinv", []), ("i0", []), ("selu", []), ("celu", [1.5]),
           ("log_sigmoid", [])]
    for op, p in ops:
        a = values(rng, 4, 6)
        want = torch_ref([{"op": op, "args": [W(a.T.copy(), "float64")] + p}])[0]
        r = server.post("/v1/run", {"steps": [{"op": "transpose.int", "args": [W(a, "float64"), 0, 1]},
                                              {"op": op, "args": [{"ref": "$0"}] + [jnum(v) for v in p]}],
                                    "device": "cpu"})
        assert r.status_code == 200, (op, r.text)
        compare(op, got_tensor(r.json()["outputs"][-1]), want, "float64")
        if op in ("log_sigmoid", "softplus", "softshrink", "hardshrink"):  # no op_ in torch 1.13
            continue
        # in place: the result is written into self, which is returned
        r = call(server, op + "_", [W(a, "float32")] + p)
        want = torch_ref([{"op": op + "_", "args": [W(a, "float32")] + p}])[0]
        assert r.status_code == 200, (op, r.text)
        compare(op + "_", got_tensor(r.json()["outputs"][0]), want, "float32")
    # threshold_ writes an expanded self (ATen skips the overlap check there)
    r = server.post("/v1/run", {"steps": [{"op": "expand", "args": [W([0.5], "float32"), [3]]},
                                          {"op": "threshold_", "args": [{"ref": "$0"}, 1.0, -2.0]}], "device": "cpu"})
    assert r.status_code == 200, r.text
    assert from_json(r.json()["outputs"][-1]).tolist() == [-2.0, -2.0, -2.0]
    # an in-place float result cannot go into an integer self (logit_ of int64)
    r = call(server, "logit_", [W([1, 2], "int64")])
    assert r.status_code in (400, 409, 422), r.text
    # polygamma_(self, n) is polygamma(n, self)
    r = call(server, "polygamma_", [W([0.5, 2.0], "float64"), 1])
    assert r.status_code == 200, r.text
    # (ATen's trigamma, six recurrence steps and four asymptotic terms, is
    # good to about 1e-9, and the server computes what torch does)
    np.testing.assert_allclose(from_json(r.json()["outputs"][0]), [math.pi ** 2 / 2, math.pi ** 2 / 6 - 1], rtol=1e-8)


# ---- double-precision references (independent of ATen's algorithms) ----

def _hurwitz_zeta(s, q):
    """zeta(s, q) for s > 1, q > 0: 30 terms, then Euler-Maclaurin with 8
    Bernoulli corrections."""
    n = 30
    total = sum((q + k) ** -s for k in range(n))
    a = q + n
    total += a ** (1 - s) / (s - 1) + 0.5 * a ** -s
    b2 = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510]
    fact, rise = 1.0, 1.0
    for j, b in enumerate(b2, start=1):
        fact *= (2 * j - 1) * (2 * j)
        rise *= (s + 2 * j - 3) * (s + 2 * j - 2) if j > 1 else s  # s (s+1) ... (s+2j-2)
        total += b / fact * rise * a ** (-s - 2 * j + 1)
    return total


def test_special_functions_against_double_references(server, rng):
    y = np.concatenate([np.tanh(rng.standard_normal(200)), [0.999999999, -0.9999999999999, 1e-300, 0.5, -0.5]])
    r = call(server, "erfinv", [W(y, "float64")])
    x = from_json(r.json()["outputs"][0])
    back = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(back, y, rtol=4e-16, atol=4e-16 * 3)
    x = np.concatenate([rng.standard_normal(100) * 20, [0.0, 29.9, 30.1, 700.0, -700.0]])
    r = call(server, "i0", [W(x, "float64")])
    np.testing.assert_allclose(from_json(r.json()["outputs"][0]), np.i0(x), rtol=1e-14)
    x = np.abs(rng.standard_normal(50)) * 5 + 0.05
    for n in (2, 3, 6):
        r = call(server, "polygamma", [n, W(x, "float64")])
        want = [(-1) ** (n + 1) * math.factorial(n) * _hurwitz_zeta(n + 1, v) for v in x]
        np.testing.assert_allclose(from_json(r.json()["outputs"][0]), want, rtol=1e-12)
    # elu, softplus and logit at parameter extremes, in double
    x = rng.standard_normal(64) * 3
    r = call(server, "softplus", [W(x, "float64"), 0.25, 4.0])
    want = np.where(x * 0.25 > 4.0, x, np.log1p(np.exp(x * 0.25)) / 0.25)
    np.testing.assert_allclose(from_json(r.json()["outputs"][0]), want, rtol=1e-15)
    r = call(server, "elu", [W(x, "float64"), 2.0, 0.5, 3.0])
    # ATen's formula is exp(x * 3) - 1, with Sleef's exp (1 ulp) on the vectorized path, so
    # beside the true value (expm1) the server may be off by an ulp of 1 where the
    # subtraction cancels; numpy's exp - 1 would add its own ulp to the reference
    want = np.where(x <= 0, np.expm1(x * 3.0) * 1.0, x * 0.5)
    np.testing.assert_allclose(from_json(r.json()["outputs"][0]), want, rtol=1e-15, atol=2.0**-52)


def test_erfinv_float32_vectorized_path_against_double(server, rng):
    """A long contiguous float32 tensor takes the vectorized loop (its own
    formula: Giles' guess and a Halley step on Sleef) on all but its last
    n % 16 elements: every element within 1 ulp of torch's float64 erfinv
    rounded to float32, near +-1, tiny and special values included."""
    u = rng.uniform(-1, 1, 3000)
    near = 1.0 - rng.integers(1, 2 ** 16, 1000) * 2.0 ** -24
    tiny = rng.uniform(-1, 1, 200) * 2.0 ** -rng.integers(20, 149, 200)
    specials = [0.0, -0.0, 1.0, -1.0, 1.0000001, -2.0, NAN, INF, -INF, 0.5, -0.5, 0.49999997, 0.99999994]
    y = np.concatenate([u, near, -near[:500], tiny, specials] * 2).astype(np.float32)[:8195]
    r = call(server, "erfinv", [W(y, "float32")])
    assert r.status_code == 200, r.text
    got = from_json(r.json()["outputs"][0]).astype(np.float64)
    want = np.array(torch_ref([{"op": "erfinv", "args": [W(y, "float64")]}])[0]["value"], dtype=np.float64)
    want = want.astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin], want[~fin])
    np.testing.assert_array_equal(np.signbit(got[fin]), np.signbit(want[fin]))
    ulp = np.spacing(np.abs(want[fin]).astype(np.float32)).astype(np.float64)
    assert (np.abs(got[fin] - want[fin]) <= ulp).all(), np.max(np.abs(got[fin] - want[fin]) / ulp)


def test_elu_family_vectorized_blocks_against_torch(server, rng):
    """elu, celu and selu on long contiguous tensors, where the server skips
    the exp for each block of 64 elements that are all > 0 (ATen skips it
    per vector): blocks all positive, all negative, mixed, and positive but
    for one -0.0, +0.0, NaN, -inf or tiny negative, with 13 elements of
    scalar tail; against torch in the same dtype, positive elements and
    signed zeros bit for bit, the rest within exp's rounding."""
    blocks = [np.abs(rng.standard_normal(64)) + 1e-3, -np.abs(rng.standard_normal(64)) * 3,
              rng.standard_normal(64) * 2]
    for odd in (-0.0, 0.0, NAN, -INF, INF, -1e-30, 1e-30):
        b = np.abs(rng.standard_normal(64)) + 1e-3
        b[rng.integers(0, 64)] = odd
        blocks.append(b)
    blocks = [blocks[k] for k in rng.permutation(np.arange(len(blocks)).repeat(3))]
    y = np.concatenate(blocks + [rng.standard_normal(13)])
    for op, p in (("elu", []), ("elu", [0.6, 1.7, 0.4]), ("elu", [-1.5, 1.0, 1.0]), ("celu", [2.5]), ("selu", [])):
        for dt in ("float32", "float64", "bfloat16"):
            w = [W(y, dt)] + p
            want = torch_ref([{"op": op, "args": w}])[0]
            r = call(server, op, w)
            assert r.status_code == 200, (op, dt, r.text)
            got = got_tensor(r.json()["outputs"][0]).astype(np.float64)
            tw = np.array(want["value"], dtype=np.float64)
            if dt == "bfloat16":  # both sides' bfloat16 values come printed as floats: round them back
                got, tw = bf16_round(got), bf16_round(tw)
            compare(f"{op}{p} {dt}", got, want, dt, exp_minus_one_atol(op, p, dt))
            x = np.array([v if not isinstance(v, str) else float(v.replace("Infinity", "inf")) for v in w[0]["data"]])
            pos = x > 0
            np.testing.assert_array_equal(got[pos], tw[pos], err_msg=f"{op}{p} {dt}: x > 0")
            zero = tw == 0
            np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(tw[zero]), err_msg=f"{op}{p} {dt}: zeros")


def test_gelu_float32_vectorized_path_against_torch_and_double(server, rng):
    """gelu(approximate='none') on a long contiguous float32 tensor (torch's
    oneDNN path; the server's x * Phi(x) with an exp and a rational, its
    last n % 16 elements scalar): within 6 ulp of x Phi(x) in double (erfc)
    everywhere, the tail where 1 + erf rounds to 0 included, and within
    float32's (2e-6, 1e-6) of torch's own float32 answer, which loses that
    tail; NaN, +-inf and -0.0 as torch (gelu(-inf) NaN, gelu(-0.0) +0.0)."""
    specials = [0.0, -0.0, NAN, INF, -INF, 14.4, -14.4, -14.3, -13.0, -5.5, 5.5, 1e-30, -1e-30, 1e-40, -1e-40,
                3.4e38, -3.4e38]
    y = np.concatenate([rng.standard_normal(4000) * 4, rng.uniform(-16, 16, 4000), specials])
    y = y.astype(np.float32)[:8195]
    r = call(server, "gelu", [W(y, "float32")])  # approximate="none", the default
    assert r.status_code == 200, r.text
    got = from_json(r.json()["outputs"][0]).astype(np.float64)
    t32 = np.array(torch_ref([{"op": "gelu", "args": [W(y, "float32")]}])[0]["value"], dtype=np.float64)
    # x Phi(x) through erfc: torch's float64 gelu (1 + erf) loses the tail too
    want = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) if math.isfinite(v) else NAN for v in y.tolist()])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(t32))
    fin = np.isfinite(t32)
    np.testing.assert_array_equal(got[~fin], t32[~fin])
    zero = fin & (got == 0) & (t32 == 0)
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(t32[zero]))
    assert (np.abs(got[fin] - t32[fin]) <= 1e-6 + 2e-6 * np.abs(t32[fin])).all()
    err = np.abs(got[fin] - want[fin])
    bound = 6 * 2.0 ** -23 * np.abs(want[fin]) + 2.0 ** -149
    assert (err <= bound).all(), (y[fin][err > bound][:5], got[fin][err > bound][:5], want[fin][err > bound][:5])


# ---- gradients (the server's autograd against torch's) ----

GRAD_CASES = [
    ("hardtanh", [-0.3, 0.8]), ("hardtanh", [2.0, -2.0]), ("elu", [0.6, 1.7, 0.4]), ("elu", [-1.0, 1.0, 1.0]),
    ("celu", [2.5]), ("selu", []), ("leaky_relu", [-0.5]), ("softplus", [0.5, 0.75]), ("softplus", [3.0, 20]),
    ("softshrink", [0.0]), ("hardshrink", [1.2]), ("threshold", [-0.2, 4.0]), ("log_sigmoid", []),
    ("logit", []), ("logit", [0.3]), ("nan_to_num", [0.0, 1.0, -1.0]), ("erfinv", []),
]


def test_gradients_against_torch(server, rng):
    cases = []
    for op, p in GRAD_CASES:
        for shape in ((3, 4), (), (0, 2)):
            a = g(rng, *shape, away=0.05)
            if op in ("logit", "erfinv"):
                a = np.tanh(a) * 0.45 + (0.5 if op == "logit" else 0.0)
            cases.append((op, [RG(a)] + p))
    cases.append(("polygamma", [3, RG(np.abs(g(rng, 3, 2)) + 0.3)]))
    refs = []
    for op, args in cases:
        refs.append({"op": op, "args": [{"dtype": "float64", "shape": list(v.a.shape),
                                         "data": v.a.reshape(-1).tolist(), "requires_grad": True}
                                        if isinstance(v, RG) else v for v in args]})
    shapes = torch_ref([dict(c, weight={"dtype": "float64", "shape": [1], "data": [1.0]}) for c in refs])
    weights = []
    for c, s in zip(refs, shapes):
        assert "error" not in s, (c["op"], s)
        w = rng.standard_normal(s["shape"])
        weights.append(w)
        c["weight"] = {"dtype": "float64", "shape": list(w.shape), "data": w.reshape(-1).tolist()}
    expect = torch_ref(refs)
    for (op, args), w, want in zip(cases, weights, expect):
        got, grad_fn, _ = server_grads(server, op, args, {}, 0, w, "act-" + uuid.uuid4().hex[:12])
        leaf = next(v for v in args if isinstance(v, RG))
        gt = np.array(want["grads"][0]).reshape(leaf.a.shape)
        np.testing.assert_allclose(got[0], gt, rtol=1e-12, atol=1e-15, err_msg=f"{op}{args[1:]}")
        assert grad_fn == want["grad_fn"], (op, grad_fn, want["grad_fn"])
