"""Kernels on hostile values (issue "A hostile world", item 3): integer division
and remainder by zero, INT64_MIN / -1, shifts past the bit width, pow with
negative integer exponents, index operators with out-of-range and negative
indices, views with negative or overflowing sizes, strides and offsets, and
reductions over empty dimensions.

Where PyTorch 1.13 defines a result the server gives the same one; where it
raises, the server answers a clean 4xx with the error shape; where torch's
own arithmetic is undefined (it dies of SIGFPE on INT64_MIN // -1, its sizes
wrap near 2^63) the server gives the defined answer written here. The
integration suite also runs against the ASan+UBSan server, which aborts on
any undefined behaviour, so each case doubles as a UBSan probe.
"""

import numpy as np
import pytest

from conftest import error_message, torch_ref

I64MIN, I64MAX = -(1 << 63), (1 << 63) - 1


def T(dtype, shape, data):
    return {"dtype": dtype, "shape": list(shape), "data": list(data)}


def v(dtype, *data):
    return T(dtype, [len(data)], data)


def f32(*d):
    return v("float32", *d)


M22 = T("float32", [2, 2], [1, 2, 3, 4])
IMG = T("float32", [1, 1, 2, 2], [1, 2, 3, 4])
K11 = T("float32", [1, 1, 1, 1], [1])
E03 = T("float32", [0, 3], [])

# (op, args, kwargs): compared with torch 1.13, its value or its refusal.
WITH_TORCH = [
    # division by zero raises ZeroDivisionError for every integer kernel
    ("floor_divide", [v("int64", 5, -5, 0), v("int64", 0, 0, 0)], {}),
    ("remainder.Tensor", [v("int64", 5, -5, 0), v("int64", 0, 0, 0)], {}),
    ("fmod.Tensor", [v("int32", 5, -5), v("int32", 1, 0)], {}),
    ("div.Tensor_mode", [v("int64", 5), v("int64", 0)], {"rounding_mode": "trunc"}),
    ("div.Tensor_mode", [v("int16", 5), v("int16", 0)], {"rounding_mode": "floor"}),
    ("remainder.Scalar", [v("int64", 5), 0], {}),
    ("fmod.Scalar", [v("int8", 5), 0], {}),
    ("floor_divide.Scalar", [v("int64", 5), 0], {}),
    ("div.Tensor", [v("int64", 5, 0, -5), v("int64", 0, 0, 0)], {}),  # true division: inf, nan, -inf
    # int8's -128 / -1 is promoted to int and truncated back: no trap in torch either
    ("floor_divide", [v("int8", -128), v("int8", -1)], {}),
    # pow with negative integer exponents
    ("pow.Tensor_Tensor", [v("int64", 2, 1, -1, 0), v("int64", -1, -2, -3, -1)], {}),
    ("pow.Tensor_Scalar", [v("int64", 2, 1, -1, 0), -2], {}),
    ("pow.Scalar", [2, v("int64", -1, 3)], {}),
    ("pow.Tensor_Tensor", [v("int64", 3, 2), v("int64", 63, 64)], {}),  # wraps modulo 2^64
    ("pow.Tensor_Tensor", [v("int8", 3, -2), v("int8", 5, 7)], {}),
    # the int64 edges of the integer kernels
    ("gcd", [v("int64", I64MIN, 0, I64MIN), v("int64", 0, 0, I64MIN)], {}),
    ("abs", [v("int64", I64MIN)], {}),
    ("neg", [v("int64", I64MIN)], {}),
    ("sign", [v("int64", I64MIN)], {}),
    ("add.Tensor", [v("int64", I64MAX), v("int64", 1)], {}),
    ("sub.Tensor", [v("int64", I64MIN), v("int64", 1)], {}),
    ("mul.Tensor", [v("int64", 1 << 62), v("int64", 4)], {}),
    ("cumsum", [v("int64", 1 << 62, 1 << 62, 1 << 62)], {"dim": 0}),
    ("sum", [v("int64", 1 << 62, 1 << 62, 1 << 62)], {}),
    ("prod", [v("int64", 1 << 62, 4)], {}),
    ("bitwise_right_shift.Tensor", [v("int8", -8, 8), v("int8", 9, 100)], {}),
    ("bitwise_left_shift.Tensor", [v("uint8", 1, 255), v("uint8", 8, 200)], {}),
    # index operators: out of range, negative, INT64_MIN
    ("index_select", [f32(1, 2, 3), 0, v("int64", 3)], {}),
    ("index_select", [f32(1, 2, 3), 0, v("int64", -1)], {}),
    ("gather", [f32(1, 2, 3), 0, v("int64", 5)], {}),
    ("gather", [f32(1, 2, 3), 0, v("int64", -1)], {}),
    ("take", [f32(1, 2, 3), v("int64", -4)], {}),
    ("take", [f32(1, 2, 3), v("int64", -3)], {}),
    ("index.Tensor", [f32(1, 2, 3), [v("int64", I64MIN)]], {}),
    ("index.Tensor", [f32(1, 2, 3), [v("int64", -3)]], {}),
    ("scatter.value", [f32(1, 2, 3), 0, v("int64", 7), 1.0], {}),
    ("scatter_add", [f32(1, 2, 3), 0, v("int64", -1), f32(1)], {}),
    ("index_put", [f32(1, 2, 3), [v("int64", 3)], f32(9)], {}),
    ("index_add", [f32(1, 2, 3), 0, v("int64", -4), f32(1)], {}),
    # index_add finds a bad index inside scatter_add (indexing.c): after good ones, int32, across slices, alpha
    ("index_add", [M22, 1, v("int32", 0, 2), M22], {"alpha": 2}),
    ("index_add", [M22, 0, v("int64", 1, -1), M22], {}),
    ("index_add", [M22, 1, v("int32", 1, 0), M22], {"alpha": 2}),
    # tensor.size(dim) has no scalar rule: a 0-dim tensor has no dims at all
    ("triu", [T("float32", [], [1])], {}),
    ("tril_", [T("float32", [], [1])], {}),
    ("triu", [f32(1, 2)], {}),
    ("mv", [T("float32", [], [1]), f32(1)], {}),
    ("baddbmm", [T("float32", [], [1]), T("float32", [], [1]), T("float32", [1, 1, 1], [1])], {}),
    ("addbmm", [T("float32", [], [1]), T("float32", [], [1]), T("float32", [1, 1, 1], [1])], {}),
    # softshrink's meta checks lambda before its kernel's dtype
    ("softshrink", [v("int64", 1, 2), -1], {}),
    ("softshrink", [v("int64", 1, 2), 0.5], {}),
    # torch 1.13's own words: permute's "sparse_coo" for a strided tensor, _reshape_alias's, and
    # narrow_copy's assertion for a dim past the rank (a negative one out of range is wrapped first)
    ("permute", [f32(1, 2), [0, 1]], {}),
    ("_reshape_alias", [f32(1, 2), [2, 1], [1]], {}),
    ("narrow_copy", [f32(1, 2, 3), 1, 0, 1], {}),
    ("narrow_copy", [f32(1, 2, 3), -2, 0, 1], {}),
    ("narrow_copy", [f32(1, 2, 3), 0, 1, -2], {}),
    ("narrow_copy", [f32(1, 2, 3), 0, -5, -2], {}),
    ("narrow_copy", [f32(1, 2, 3), 0, -1, 1], {}),
    # a 0-dim source into slices: ATen selects source's slice i, which a 0-dim tensor has not (empty self too)
    ("index_add", [M22, 0, v("int64", 1), T("float32", [], [5])], {}),
    ("index_add", [T("float32", [2, 0], []), 0, v("int64", 1), T("float32", [], [5])], {}),
    ("index_add", [f32(1, 2), 0, v("int64", 1), T("float32", [], [5])], {}),
    ("index_fill.int_Scalar", [f32(1, 2, 3), 0, v("int64", 3), 1.0], {}),
    ("index_copy", [f32(1, 2, 3), 0, v("int64", 3), f32(1)], {}),
    ("put", [f32(1, 2, 3), v("int64", 3), f32(1)], {}),
    ("embedding", [M22, v("int64", 2)], {}),
    ("embedding", [M22, v("int64", -1)], {}),
    ("nll_loss", [T("float32", [2, 3], [0] * 6), v("int64", 3, 0)], {}),
    ("nll_loss", [T("float32", [2, 3], [0] * 6), v("int64", -5, 0)], {}),
    # views: negative and overflowing sizes, strides and offsets
    ("as_strided", [f32(1, 2, 3), [2], [-1]], {}),
    ("as_strided", [f32(1, 2, 3), [-1], [1]], {}),
    ("as_strided", [f32(1, 2, 3), [2], [1], 2], {}),
    ("as_strided", [f32(1, 2, 3), [2], [1], -1], {}),
    ("as_strided", [f32(1, 2, 3), [0, 5], [1 << 62, 1]], {}),
    ("expand", [f32(1, 2, 3), [-1, -1]], {}),
    ("expand", [f32(1, 2, 3), [-2]], {}),
    ("select.int", [f32(1, 2, 3), 0, -4], {}),
    ("select.int", [f32(1, 2, 3), 0, I64MIN], {}),
    ("select.int", [f32(1, 2, 3), 0, I64MAX], {}),
    ("select.int", [f32(1, 2, 3), -2, 0], {}),
    ("slice.Tensor", [f32(1, 2, 3), 0, 0, 3, 0], {}),
    ("narrow_copy", [f32(1, 2, 3), 0, -4, 1], {}),
    ("narrow_copy", [f32(1, 2, 3), 0, 2, 2], {}),
    ("narrow_copy", [f32(1, 2, 3), 0, -1, 1], {}),
    ("view", [v("float32", 1, 2, 3, 4), [-1, -1]], {}),
    ("unfold", [f32(1, 2, 3), 0, 2, 0], {}),
    ("unfold", [f32(1, 2, 3), 0, 1 << 62, 1], {}),
    ("diagonal", [M22, I64MIN, 0, 1], {}),
    ("diagonal", [M22, I64MAX, 0, 1], {}),
    ("flip", [f32(1, 2, 3), [I64MIN]], {}),
    ("transpose.int", [f32(1, 2), I64MIN, 0], {}),
    ("permute", [M22, [0, 0]], {}),
    ("constant_pad_nd", [f32(1, 2, 3), [-5, 0]], {}),
    ("constant_pad_nd", [f32(1, 2, 3), [1 << 62, 1 << 62]], {}),
    # reductions over empty dimensions
    ("sum.dim_IntList", [E03, [0]], {}),
    ("prod.dim_int", [E03, 0], {}),
    ("mean.dim", [E03, [0]], {}),
    ("logsumexp", [E03, [0]], {}),
    ("amax", [E03, [0]], {}),
    ("amax", [T("float32", [3, 0], []), [0]], {}),
    ("max.dim", [E03, 0], {}),
    ("argmax", [E03, 1], {}),
    ("argmax", [E03, 0], {}),
    ("median.dim", [E03, 0], {}),
    ("mode", [E03, 0], {}),
    ("var.correction", [T("float32", [1, 3], [1, 2, 3])], {"dim": [0], "correction": 5}),
    # a correction of INT64_MIN: var's one-output reduction takes N - correction in int64 and wraps
    # (inf); var_mean and std_mean take it in double (2 / 2^63 = 2^-62), whatever the dims
    ("var.correction", [T("float32", [1, 3], [1, 2, 3])], {"dim": None, "correction": I64MIN}),
    ("var_mean.correction", [T("float32", [1, 3], [1, 2, 3])], {"dim": None, "correction": I64MIN}),
    ("var_mean.correction", [T("float32", [1, 3], [1, 2, 3])], {"dim": [], "correction": I64MIN, "keepdim": True}),
    ("var_mean.correction", [T("float64", [2, 3], [1, 2, 3, 2, 4, 6])], {"dim": [-1], "correction": I64MIN}),
    ("std_mean.correction", [T("float32", [3, 1], [1, 2, 3])], {"dim": [0, 1], "correction": I64MIN}),
    ("std_mean.correction", [T("bfloat16", [3], [1, 2, 3])], {"dim": [0], "correction": I64MIN}),
    ("std_mean.correction", [T("float64", [], [5])], {"dim": None, "correction": I64MIN}),
    ("var_mean.correction", [T("float32", [0, 2], [])], {"dim": [0], "correction": I64MIN}),
    # std of a half type is Welford's too (a double divisor), its square root taken before rounding: a
    # variance beyond bfloat16's range, 1e60 / 2^63, still gives a finite std
    ("std.correction", [T("bfloat16", [2, 3], [1e30, 2, -3, 1, 2, 3])], {"dim": [-1], "correction": I64MIN}),
    ("std.correction", [T("bfloat16", [2, 3], [1e30, 2, -3, 1, 2, 3])], {"dim": None, "correction": I64MIN}),
    ("std.correction", [T("bfloat16", [3, 1], [1e30, 2, -3])], {"dim": [0], "correction": I64MIN, "keepdim": True}),
    ("std.correction", [T("float16", [2, 3], [6e4, 2, -3, 1, 2, 3])], {"dim": [1], "correction": I64MIN}),
    ("std.correction", [T("float32", [2, 3], [1e30, 2, -3, 1, 2, 3])], {"dim": None, "correction": I64MIN}),
    ("kthvalue", [f32(1, 2, 3), 4], {}),
    ("kthvalue", [f32(1, 2, 3), 0], {}),
    ("topk", [f32(1, 2, 3), 4], {}),
    ("topk", [f32(1, 2, 3), -1], {}),
    # factories and nn parameters out of range
    ("arange.start_step", [0, 10, 0], {}),
    # float16 and bfloat16 take their bounds as float (checked), float32 as double
    ("arange.start_step", [0, 10, 1e300], {"dtype": "bfloat16"}),
    ("arange.start_step", [0, 1e39, 1], {"dtype": "float16"}),
    ("arange.start_step", [True, True, -1e39], {"dtype": "bfloat16"}),
    ("arange.start_step", [0, 10, 3e38], {"dtype": "bfloat16"}),
    ("arange.start_step", [0, 10, 1e300], {"dtype": "float32"}),
    ("arange", [-5], {}),
    ("linspace", [0, 1, -1], {}),
    ("zeros", [[-1]], {}),
    ("eye", [-1], {}),
    ("max_pool2d", [IMG, [2, 2], [0, 0]], {}),
    ("max_pool2d", [IMG, [2, 2], [1, 1], [2, 2]], {}),
    ("avg_pool2d", [IMG, [2, 2], [1, 1], [0, 0], False, True, 0], {}),
    ("conv2d", [IMG, K11], {"stride": [0, 1]}),
    ("conv2d", [IMG, K11], {"dilation": [0, 1]}),
    ("conv2d", [IMG, K11], {"groups": 0}),
    ("pixel_shuffle", [T("float32", [1, 4, 1, 1], [1, 2, 3, 4]), 0], {}),
    ("split.Tensor", [f32(1, 2, 3), 0], {}),
    ("chunk", [f32(1, 2, 3), 0], {}),
    ("polygamma", [-1, f32(1.5)], {}),
    ("round.decimals", [f32(1.5)], {"decimals": -400}),
]

# (op, args, kwargs, expected): where torch 1.13's answer is no reference.
# An expected list is the server's value; a string, the start of its 4xx message.
DEFINED_HERE = [
    # torch dies of SIGFPE (x86's idiv traps); the result wraps as two's complement does
    ("floor_divide", [v("int64", I64MIN), v("int64", -1)], {}, [I64MIN]),
    ("div.Tensor_mode", [v("int64", I64MIN), v("int64", -1)], {"rounding_mode": "trunc"}, [I64MIN]),
    ("div.Tensor_mode", [v("int64", I64MIN), v("int64", -1)], {"rounding_mode": "floor"}, [I64MIN]),
    ("remainder.Tensor", [v("int64", I64MIN), v("int64", -1)], {}, [0]),
    ("fmod.Tensor", [v("int64", I64MIN), v("int64", -1)], {}, [0]),
    ("floor_divide", [v("int32", -(1 << 31)), v("int32", -1)], {}, [-(1 << 31)]),
    ("remainder.Tensor", [v("int32", -(1 << 31)), v("int32", -1)], {}, [0]),
    # torch 1.13 shifts by the count modulo the bit width (x86's shl); a shift
    # past the width is 0 (or -1 for a negative number shifted right), as in later torch
    ("bitwise_left_shift.Tensor", [v("int64", 1, 1, 1, -1), v("int64", -1, 64, 100, 63)], {}, [0, 0, 0, I64MIN]),
    ("bitwise_right_shift.Tensor", [v("int64", 1, -8, 5, -1), v("int64", -1, 64, 100, 70)], {}, [0, -1, 0, -1]),
    ("bitwise_left_shift.Tensor", [v("int32", 1, 1, 1), v("int32", -1, 32, 40)], {}, [0, 0, 0]),
    # torch's roll computes size - shift, which wraps; INT64_MIN = 1 (mod 3)
    ("roll", [f32(1, 2, 3), [I64MIN], [0]], {}, [3.0, 1.0, 2.0]),
    # sizes that overflow int64 in torch's arithmetic are refused, not wrapped
    ("conv2d", [IMG, K11], {"padding": [1 << 62, 0]}, "convolution(): padding, stride, dilation or output_padding too large"),
    ("conv_transpose2d.input", [IMG, K11], {"stride": [I64MAX, 1]}, "convolution(): padding, stride, dilation or output_padding too large"),
    ("pixel_shuffle", [T("float32", [1, 4, 1, 1], [1, 2, 3, 4]), I64MAX], {}, "pixel_shuffle: upscale_factor"),
    ("pixel_unshuffle", [T("float32", [1, 0, 4, 4], []), 1 << 62], {}, "pixel_unshuffle: downscale_factor"),
    ("constant_pad_nd", [f32(1, 2, 3), [I64MAX, I64MAX]], {}, "The input size 3, plus negative padding"),
    ("constant_pad_nd", [f32(1, 2, 3), [I64MIN, 0]], {}, "The input size 3, plus negative padding"),
    ("as_strided", [f32(1, 2, 3), [2], [1], 1 << 62], {}, "setStorage"),
    ("as_strided", [f32(1, 2, 3), [1 << 62], [1 << 62]], {}, "setStorage"),
    ("expand", [f32(1, 2, 3), [1 << 62, 3]], {}, "shape [4611686018427387904, 3] has too many elements"),
    ("repeat", [v("float32", 1, 2), [1 << 40, 1 << 40]], {}, "shape"),
    ("full", [[1 << 40, 1 << 40], 1.0], {}, "full(): the number of elements overflows int64"),
    ("upsample_nearest2d", [IMG, [1 << 31, 1 << 31]], {}, "tensor of shape [1, 1, 2147483648, 2147483648]"),
    ("diag_embed", [v("float32", 1, 2), 1 << 62], {}, "zeros(): the number of elements overflows int64"),
    ("tril", [M22, I64MIN], {}, "tril: diagonal -9223372036854775808 is out of the range"),
    ("searchsorted.Tensor", [f32(1, 2, 3), f32(2)], {"sorter": v("int64", 5, 0, 1)}, "torch.searchsorted(): sorter index out of range"),
]


def same_values(got, want, dtype="float64"):
    """Equal values (NaN to NaN); floats of a narrower dtype compared in float32, as the wire prints
    them shortest for their dtype and torch_ref as the float64 of the same value."""
    narrow = dtype in ("float32", "bfloat16", "float16")
    g, w = np.asarray(got, dtype=object), np.asarray(want, dtype=object)
    if g.shape != w.shape:
        return False
    for a, b in zip(g.reshape(-1), w.reshape(-1)):
        a = float(a) if isinstance(a, str) else a  # "NaN", "Infinity" on the wire
        if isinstance(a, float) or isinstance(b, float):
            if narrow:
                a, b = np.float32(a), np.float32(b)
            if not (a == b or (np.isnan(float(a)) and np.isnan(float(b)))):
                return False
        elif a != b:
            return False
    return True


def call(server, op, args, kwargs):
    return server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kwargs})


def test_hostile_values_agree_with_torch(server):
    refs = torch_ref([{"op": op, "args": args, "kwargs": kw} for op, args, kw in WITH_TORCH])
    bad = []
    for (op, args, kw), ref in zip(WITH_TORCH, refs):
        r = call(server, op, args, kw)
        if "error" in ref:
            if not 400 <= r.status_code < 500:
                bad.append((op, args, kw, "torch raised", ref["error"][:120], r.status_code, r.text[:200]))
            else:
                assert error_message(r), (op, r.text)
            continue
        if r.status_code != 200:
            bad.append((op, args, kw, "torch gave", ref["value"][:8], r.status_code, r.text[:200]))
            continue
        out = r.json()["outputs"][0]
        if out["dtype"] != ref["dtype"] or out["shape"] != ref["shape"] or not same_values(out["data"], ref["value"], ref["dtype"]):
            bad.append((op, args, kw, "torch gave", ref["dtype"], ref["shape"], ref["value"][:8], "server", out))
    assert not bad, "\n".join(map(repr, bad))
    assert server.get("/v2/health/ready").status_code == 200


@pytest.mark.parametrize("op,args,kw,expect", DEFINED_HERE, ids=[c[0] for c in DEFINED_HERE])
def test_defined_where_torch_is_undefined(server, op, args, kw, expect):
    r = call(server, op, args, kw)
    if isinstance(expect, str):
        assert 400 <= r.status_code < 500, (r.status_code, r.text)
        assert error_message(r).startswith(expect), error_message(r)
    else:
        assert r.status_code == 200, r.text
        assert r.json()["outputs"][0]["data"] == expect
    assert server.get("/v2/health/ready").status_code == 200


INT_RANGE = {"int64": 64, "int32": 32, "int16": 16, "int8": 8}


def wrap(x, bits):
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def ref_division(op, a, b, bits):
    """Exact integer reference: Python's floor // and %, C's truncating / and fmod, wrapped to the width."""
    q_trunc = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return wrap({"floor_divide": a // b, "remainder.Tensor": a % b, "fmod.Tensor": a - b * q_trunc,
                 "trunc": q_trunc, "floor": a // b}[op], bits)


@pytest.mark.parametrize("dtype", list(INT_RANGE))
def test_integer_division_at_the_edges_on_fresh_random_inputs(server, rng, dtype):
    """Random operands crowded at the type's edges (MIN, MIN+1, -1, 1, MAX), no zero divisor:
    every integer division kernel against the exact reference, contiguous and broadcast."""
    bits = INT_RANGE[dtype]
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    edges = np.array([lo, lo + 1, -1, 1, hi, -2, 2], dtype=object)
    n = 64
    a = [int(x) for x in np.where(rng.random(n) < 0.5, rng.choice(edges, n), rng.integers(lo, hi, n, endpoint=True))]
    b = [int(x) for x in np.where(rng.random(n) < 0.6, rng.choice(edges, n), rng.integers(lo, hi, n, endpoint=True))]
    b = [x if x != 0 else -1 for x in b]
    for op, kw in [("floor_divide", {}), ("remainder.Tensor", {}), ("fmod.Tensor", {}),
                   ("div.Tensor_mode", {"rounding_mode": "trunc"}), ("div.Tensor_mode", {"rounding_mode": "floor"})]:
        key = kw.get("rounding_mode", op)
        r = call(server, op, [v(dtype, *a), v(dtype, *b)], kw)
        assert r.status_code == 200, (op, kw, r.text)
        assert r.json()["outputs"][0]["data"] == [ref_division(key, x, y, bits) for x, y in zip(a, b)], (op, kw)
        # broadcast: one divisor row against an [8, 8] dividend
        r = call(server, op, [T(dtype, [8, 8], a), v(dtype, *b[:8])], kw)
        assert r.status_code == 200, (op, kw, r.text)
        assert r.json()["outputs"][0]["data"] == [ref_division(key, x, b[i % 8], bits) for i, x in enumerate(a)]
    # one zero anywhere in the divisor refuses the whole call, as torch does
    bz = list(b)
    bz[int(rng.integers(n))] = 0
    for op in ("floor_divide", "remainder.Tensor", "fmod.Tensor"):
        r = call(server, op, [v(dtype, *a), v(dtype, *bz)], {})
        assert r.status_code == 400 and error_message(r) == "ZeroDivisionError", r.text


def test_expanded_zero_dim_self_in_place(server):
    """A 0-dim tensor expands with every stride 0, size-1 dims included (ATen's inferExpandGeometry): tril_
    and triu_ of it expanded to [5, 1, 1, 1] take torch 1.13's copy path, whose copy_ refuses the
    overlapping self; expanded to [1, 1] it is contiguous and works in place."""
    cases = [(op, target) for op in ("triu_", "tril_") for target in ([5, 1, 1, 1], [1, 1], [1, 3, 1])]
    refs = torch_ref([{"op": op, "args": [dict(T("float32", [], [2.5]), views=[["expand", target]])]}
                      for op, target in cases])
    for (op, target), ref in zip(cases, refs):
        r = server.post("/v1/run", {"steps": [{"op": "expand", "args": [T("float32", [], [2.5]), target]},
                                              {"op": op, "args": [{"ref": "$0"}]}]})
        if "error" in ref:
            msg = error_message(r).split("): ", 1)[-1]  # after /v1/run's "step 1 (op): "
            assert 400 <= r.status_code < 500 and msg in ref["error"], (op, target, ref, r.text[:300])
        else:
            assert r.status_code == 200, (op, target, ref, r.text[:300])
            assert r.json()["outputs"][0]["data"] == ref["value"], (op, target, ref, r.text[:300])


def test_in_place_refusals_in_torchs_order(server):
    """An in-place TensorIterator operator refuses an expanded (internally overlapping) self before it
    looks at the other operand's shape or dtype, and a result type that does not cast to self's before
    its kernel's dtype dispatch; copy_ says the iterator's words for a source that does not broadcast."""
    i64 = T("int64", [3], [1, 2, 3])
    cases = [  # (op, self's expand target or None, other args)
        ("bitwise_and_.Tensor", [4, 3], [T("int64", [2, 3], [1] * 6)]),
        ("mul_.Tensor", [4, 3], [T("float32", [5], [1] * 5)]),
        ("ne_.Tensor", [4, 3], [T("float32", [2], [1, 2])]),
        ("bitwise_or_.Scalar", [4, 3], [1.5]),
        ("add_.Tensor", [4, 3], [T("float32", [3], [1, 2, 3])]),
        ("bitwise_and_.Scalar", None, [1.5]),
        ("bitwise_left_shift_.Tensor_Scalar", None, [2.5]),
        ("gcd_", None, [T("float32", [3], [1, 2, 3])]),
        ("bitwise_xor_.Tensor", None, [T("float64", [3], [1, 2, 3])]),
        ("elu_", None, []),
        ("clamp_", None, [0.5, 2.5]),
        ("clamp_min_", None, [0.5]),
        ("clamp_.Tensor", None, [T("float32", [3], [1, 2, 3])]),
        ("lerp_.Tensor", None, [T("int32", [2], [1, 2]), T("int64", [3], [1, 2, 3])]),
        ("addcdiv_", None, [T("int64", [2], [1, 2]), T("int64", [4], [1, 2, 3, 4])]),
        ("copy_", None, [T("int64", [2, 3], [1] * 6)]),
        ("copy_", None, [T("int64", [4], [1] * 4)]),
    ]
    def self_of(target):
        base = T("int64", [1], [7]) if target else i64
        return dict(base, views=[["expand", target]]) if target else base
    refs = torch_ref([{"op": op, "args": [self_of(t)] + rest} for op, t, rest in cases])
    for (op, target, rest), ref in zip(cases, refs):
        assert "error" in ref, (op, ref)
        steps = [{"op": "expand", "args": [T("int64", [1], [7]), target]}] if target else []
        first = {"ref": "$0"} if target else i64
        r = server.post("/v1/run", {"steps": steps + [{"op": op, "args": [first] + rest}]})
        msg = error_message(r).split("): ", 1)[-1]  # after /v1/run's "step N (op): "
        assert 400 <= r.status_code < 500 and msg in ref["error"], (op, target, ref["error"], r.text[:300])


def test_in_place_build_order_against_torch(server):
    """An in-place TensorIterator operator is ATen's out= kernel with self as the output: its meta's own
    checks first (sub's bool check, div's rounding mode, clamp's cast with Scalar bounds), then the
    iterator's build (an overlapping self, the inputs' broadcast against self's shape, the result type's
    cast to self's dtype), then what its kernel refuses (a dtype it has no case for, an integer division
    by zero, add / sub's alpha, a Scalar that overflows). Each case breaks two of these; the server must
    say torch's words for the first. Found by the difftest (seed 7197)."""
    def t(dtype, shape, fill=1):
        n = int(np.prod(shape)) if shape else 1
        return T(dtype, shape, [fill] * n)
    exp = lambda dtype, target, fill=1: dict(t(dtype, [1] * len(target), fill), views=[["expand", target]])
    cases = [  # (op, self, other args, kwargs)
        ("bitwise_or_.Tensor", t("float32", []), [t("int64", [5])], {}),
        ("gcd_", t("bfloat16", []), [t("bfloat16", [1])], {}),
        ("hypot_", t("int64", []), [t("int64", [4])], {}),
        ("nextafter_", t("int64", [1]), [t("int64", [5])], {}),
        ("lerp_.Scalar", t("int64", [1]), [t("int64", [1, 2]), 0.5], {}),
        ("floor_divide_.Tensor", t("int64", [], 0), [t("int64", [3], 0)], {}),
        ("div_.Tensor_mode", t("int64", [1], 0), [t("int64", [5], 0)], {"rounding_mode": "trunc"}),
        ("fmod_.Tensor", t("bool", [2]), [t("uint8", [2], 0)], {}),
        ("sub_.Tensor", t("int64", [1]), [t("int64", [3, 1])], {"alpha": 1.5}),
        ("add_.Scalar", t("int64", [1]), [3.228], {"alpha": True}),
        ("add_.Tensor", t("float16", [4]), [t("float16", [4, 4])], {"alpha": 70000}),
        ("addcmul_", t("uint8", [1, 1]), [t("uint8", [2, 1, 3, 3]), t("uint8", [3])], {"value": 300}),
        ("addcdiv_", exp("float32", [4]), [t("float32", [4]), t("float32", [2])], {}),
        ("addcdiv_", t("bool", [2]), [t("float16", [2]), t("float16", [2])], {}),
        ("nextafter_", exp("float32", [3, 1]), [t("float32", [0])], {}),
        ("true_divide_.Tensor", exp("int16", [3]), [t("int16", [3])], {}),
        ("clamp_", exp("int64", [3]), [1.5], {}),
        ("clamp_max_.Tensor", exp("float32", [2]), [t("float32", [2, 2])], {}),
        ("div_.Scalar_mode", exp("int64", [3]), [2], {"rounding_mode": "bogus"}),
        ("div.Tensor_mode", t("int64", [4]), [t("int64", [2])], {"rounding_mode": "bogus"}),
        ("sub.Tensor", t("bool", [4]), [t("bool", [2])], {}),
        ("hardtanh_", exp("int64", [3]), [-1e300, 1], {}),
        ("selu_", exp("int32", [3]), [], {}),
        ("celu_", exp("bool", [2]), [], {}),
        ("gelu_", exp("float32", [3]), [], {"approximate": "bogus"}),
        ("div_.Tensor_mode", t("bool", [2]), [t("bool", [2])], {"rounding_mode": "trunc"}),
        ("pow_.Scalar", t("int16", [2]), [2.5], {}),
        ("square_", t("bool", [2]), [], {}),
        ("pow_.Tensor", t("int16", [2]), [t("float32", [])], {}),
        ("clamp_max_", t("bool", [5]), [1e300], {}),
        ("clamp_", exp("int16", [3, 2]), [1e300, "Infinity"], {}),
        # bool bounds stay bool as Python's torch.clamp takes them (torch.ops would make them int)
        ("clamp", t("bool", [2]), [None, True], {}),
        ("clamp", t("bool", [2]), [True, None], {}),
        ("clamp", t("bool", [2]), [False, True], {}),
    ]
    refs = torch_ref([{"op": op, "args": [s] + rest, "kwargs": kw, "python": op == "clamp"}
                      for op, s, rest, kw in cases])
    for (op, s, rest, kw), ref in zip(cases, refs):
        assert "error" in ref, (op, ref)
        if "views" in s:
            steps = [{"op": "expand", "args": [{k: s[k] for k in ("dtype", "shape", "data")}, s["views"][0][1]]}]
            first = {"ref": "$0"}
        else:
            steps, first = [], s
        r = server.post("/v1/run", {"steps": steps + [{"op": op, "args": [first] + rest, "kwargs": kw}]})
        msg = error_message(r).split("): ", 1)[-1]  # after /v1/run's "step N (op): "
        assert 400 <= r.status_code < 500 and msg in ref["error"], (op, ref["error"], r.text[:300])


def test_meta_checks_before_dims_against_torch(server):
    """Where ATen's meta function checks a dtype or an argument before it wraps the dims (std / var /
    mean's dtype, nansum's dims before its kernel, split's split_size, stack's dim before the sizes, a
    cumulative in-place op's dim before its dtype, heaviside's dtypes before the broadcast, amax's empty
    dims before duplicates), the server says torch's words for the first problem, and nanmedian.dim and
    split_with_sizes print what torch prints. Found by the difftest (seeds 7197, 7198)."""
    def t(dtype, shape, fill=1):
        n = int(np.prod(shape)) if shape else 1
        return T(dtype, shape, [fill] * n)
    cases = [  # (op, args, kwargs)
        ("std.dim", [t("int64", [2, 3]), [5]], {}),
        ("var.correction", [t("int64", [2]), [3]], {"correction": 1}),
        ("mean.dim", [t("int64", [2]), [1]], {}),
        ("amax", [t("float32", [0]), [0, 0, 3]], {}),
        ("nansum", [t("float32", [2, 3]), [15]], {"dtype": "uint8"}),
        ("split.Tensor", [t("float32", [2, 3]), -1, 5], {}),
        ("split_with_sizes", [t("float32", [2, 4, 3]), [5, 1, 4, 1], -2], {}),
        ("nanmedian.dim", [t("float32", [2, 0]), 1], {}),
        ("heaviside", [t("float32", [4]), t("float64", [3])], {}),
        ("stack", [[t("float32", [0, 1, 2]), t("float32", [5])], 2147483648], {}),
        ("cumsum_", [t("bool", []), -3], {"dtype": "int16"}),
        ("cumprod_", [t("int64", [2]), 2], {"dtype": "float32"}),
        # the structured reductions wrap every dim before they look for a repeated one (seed 7198);
        # make_reduction (var_mean) and flip go dim by dim
        ("mean.dim", [t("float32", [2, 3, 4]), [2, -1, 3]], {}),
        ("sum.dim_IntList", [t("float32", [2, 3, 4]), [0, 0, 7]], {}),
        ("var_mean.dim", [t("float32", [3, 4, 4]), [2, -1, 6]], {"keepdim": True}),
        ("flip", [t("float32", [2, 3]), [1, 1, 5]], {}),
        # the losses' iterators: their inputs' broadcast before their dtypes (seeds 7198, 7199)
        ("mse_loss_backward", [t("float32", [3]), t("float32", [2]), t("int64", [4]), 1], {}),
        ("huber_loss_backward", [t("int32", [2]), t("int64", [2]), t("int64", [3]), 1, 1.0], {}),
        ("smooth_l1_loss_backward", [t("float16", [2]), t("int64", [2]), t("int64", [4]), 1, 1.0], {}),
        ("polygamma", [-1, t("float16", [2])], {}),
        ("glu_backward", [t("int64", [1, 2, 1, 3]), t("float32", [1, 2, 1, 2]), -1], {}),
        ("binary_cross_entropy_with_logits", [t("int64", [3]), t("int64", [5])], {}),
        ("binary_cross_entropy_with_logits", [t("int64", [3]), t("float32", [3])], {"pos_weight": t("float32", [4])}),
        ("avg_pool2d", [t("float32", []), [1, 1]], {}),
        # index_add's refusal of a count that is not source.size(dim) asks a 0-dim source its size first
        ("index_add", [t("float32", [4]), 0, T("int64", [3], [0, 1, 2]), t("float32", [])], {}),
        ("huber_loss", [t("bool", [5]), t("bool", [3]), 1, 1.0], {}),
        # binary_cross_entropy's dtype checks and kernel come before the shape of its squeezed output
        ("binary_cross_entropy", [t("int16", []), t("int64", [2])], {}),
        ("binary_cross_entropy", [t("int64", []), t("int64", [5])], {}),
        ("binary_cross_entropy_backward", [t("uint8", [3]), t("uint8", []), t("int16", [3])], {}),
        # where's Scalar overloads convert the scalar (scalar_tensor) before where.self checks the condition
        ("where.ScalarSelf", [t("int32", [2]), 1e300, t("float32", [2])], {}),
        ("where.Scalar", [t("int16", [2]), 2.0, 1e300], {}),
        # ATen's CPU softmax: half_to_float first, then the kernel of the last dim or the general one
        ("log_softmax.int", [t("uint8", [2, 3]), 0], {}),
        ("softmax.int", [t("int8", [2, 3]), -1], {}),
        ("_softmax", [t("int64", [2]), -1, True], {}),
        ("_log_softmax", [t("float32", [2, 4, 1, 0]), -3, True], {}),
    ]
    refs = torch_ref([{"op": op, "args": args, "kwargs": kw} for op, args, kw in cases])
    for (op, args, kw), ref in zip(cases, refs):
        assert "error" in ref, (op, ref)
        r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kw})
        assert 400 <= r.status_code < 500 and error_message(r) in ref["error"], (op, ref["error"], r.text[:300])
