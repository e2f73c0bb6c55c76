"""lerp, addcmul, addcdiv, heaviside, nextafter, isclose, allclose, equal,
isin, aminmax, nanmean, norm, linalg_vector_norm, median, nanmedian and mode
against PyTorch 1.13 (tools/torch_ref.py) on fresh random inputs.

Where torch's answer depends on its algorithm rather than on the math, the
comparison is exact: the indices median, nanmedian and mode return on
tie-heavy lines (nth_element on (value, index) for median.dim; libstdc++'s
std::sort for mode's runs; nth_element's order for an all-NaN nanmedian
line), bfloat16 nextafter on the 16 bits, integer addcmul wrapping, isin's
sorting path with assume_unique and duplicates. Gradients of the ties
(median's even split, mode's chosen index) are checked against torch's."""

import uuid

import numpy as np
import pytest

import subprocess

from conftest import TORCH_PY, binary_body, error_message, from_json, parse_binary_response, torch_ref

NAN = float("nan")


def T(a, rg=False):
    a = np.asarray(a)
    if a.dtype == np.float64 or a.dtype == np.float32 or a.dtype == np.float16:
        data = [("NaN" if np.isnan(x) else "Infinity" if x == np.inf else "-Infinity" if x == -np.inf else x)
                for x in a.reshape(-1).astype(np.float64).tolist()]
    else:
        data = a.reshape(-1).tolist()
    d = {"dtype": str(a.dtype), "shape": list(a.shape), "data": data}
    if rg:
        d["requires_grad"] = True
    return d


def bf16(a):
    """a (float64) as a bfloat16 wire tensor, rounded by truncation to 16 bits."""
    bits = (np.asarray(a, np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
    t = T(bits)
    t["dtype"] = "bfloat16"
    return t


def tie_line(rng, n, dtype):
    i = np.arange(n)
    a = [lambda: rng.integers(0, 3, n), lambda: rng.integers(-5, 5, n), lambda: np.zeros(n),
         lambda: np.minimum(i, n - 1 - i), lambda: (n - i) % 4][int(rng.integers(0, 5))]()
    a = np.asarray(a, np.float64)
    if dtype.startswith("float") and rng.random() < 0.4:
        a[rng.random(n) < 0.1] = np.nan
        if rng.random() < 0.3:
            a[rng.random(n) < 0.3] = -0.0
    return a.astype(dtype)


def wire(v):
    """An argument as the server's JSON has it: non-finite numbers as strings
    (torch_ref reads Python's Infinity/NaN literals)."""
    if isinstance(v, float) and not np.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, list):
        return [wire(x) for x in v]
    if isinstance(v, dict) and "dtype" not in v:
        return {k: wire(x) for k, x in v.items()}
    return v


def got_of(o):
    """A JSON output as a numpy array (bfloat16 read as float32, which holds it)."""
    if o["dtype"] == "bfloat16":
        data = [float(v) if isinstance(v, str) else v for v in o["data"]]
        return np.array(data, np.float32).reshape(o["shape"])
    return from_json(o)


def make_cases(rng):
    C = []
    add = lambda op, *args, nout=1, exact=True, **kw: C.append((op, list(args), kw, nout, exact))
    g = lambda *s: rng.standard_normal(s)
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38, 0.5])
    for dt in ("float32", "float64"):
        a = np.concatenate([g(20), special]).astype(dt)
        b = np.concatenate([g(20), special[::-1]]).astype(dt)
        w = np.concatenate([rng.random(20) * 2 - 0.5, special]).astype(dt)
        add("lerp.Tensor", T(a), T(b), T(w))
        add("lerp.Scalar", T(a), T(b), 0.25)
        add("lerp.Scalar", T(a), T(b), 0.75)
        add("lerp.Scalar", T(a.reshape(5, 6)), T(b[:6]), -1.5)  # broadcasting
        add("addcmul", T(a), T(b), T(w), value=0.5)
        add("addcdiv", T(a), T(b), T(w), value=-3)
        add("addcdiv", T(a.reshape(5, 6)), T(b[:6]), T(w.reshape(5, 6)[:, :1]))  # three-way broadcast
        add("nextafter", T(a), T(b))
        add("heaviside", T(a), T(b))
        add("isclose", T(a), T(b + (rng.random(30) < 0.5) * 1e-6), 1e-5, 1e-8, True)
        add("isclose", T(a), T(a), equal_nan=False)
        add("nanmean", T(a.reshape(5, 6)), [1], exact=False)  # sums: ATen's order within an ulp
        add("nanmean", T(a), exact=False)
    # bfloat16: its own arithmetic (float opmath, one rounding), nextafter on the bits
    x, y = bf16(np.concatenate([g(10), special])), bf16(np.concatenate([g(10), special[::-1]]))
    for op in ("nextafter", "heaviside"):
        add(op, x, y)
    add("lerp.Scalar", x, y, 0.3)
    add("lerp.Tensor", x, y, bf16(rng.random(20)))
    add("addcmul", x, y, x, value=0.1)
    add("addcdiv", x, y, bf16(g(20)), value=0.7)
    add("addcmul", x, y, x, value=3.4e38)  # past bfloat16's largest, within float's: the value is a float
    # integers: addcmul wraps, heaviside and isclose in the dtype
    for dt in ("int8", "uint8", "int32", "int64"):
        info = np.iinfo(dt)
        i = rng.integers(info.min, info.max, 40, dtype=dt, endpoint=True)
        j = rng.integers(info.min, info.max, 40, dtype=dt, endpoint=True)
        add("addcmul", T(i), T(j), T(i), value=3)
        add("heaviside", T(i), T(j))
        add("isclose", T(i), T(j), 0.5, 3.0)
    # isin: the brute-force path, the sorting path, assume_unique with duplicates, invert
    e = rng.integers(0, 20, (6, 7))
    for m in (3, 40, 200):
        t = rng.integers(0, 30, m)
        for au in (False, True):
            for inv in (False, True):
                add("isin.Tensor_Tensor", T(e), T(t), assume_unique=au, invert=inv)
    f = np.concatenate([g(30), [np.nan, 0.0, -0.0]])
    add("isin.Tensor_Tensor", T(f), T(np.concatenate([f[::3], [np.nan, -0.0]])))
    add("isin.Tensor_Tensor", T(e.astype(np.int32)), T(np.array([2.5, 3.0, 7.0])))  # promoted to float
    add("isin.Tensor_Scalar", T(e), 7, invert=True)
    # isin.Tensor_Scalar is eq / ne in ATen: NaN and -0.0 elements, a float Scalar on integers, a Scalar
    # out of uint8's range, long elements
    add("isin.Tensor_Scalar", T(f), 0.0)
    add("isin.Tensor_Scalar", T(f), float("nan"), invert=True)
    add("isin.Tensor_Scalar", T(e), 2.5)
    add("isin.Tensor_Scalar", T(e.astype(np.uint8) + 40), 300)
    add("isin.Tensor_Scalar", T(rng.integers(0, 9, 50000).astype(np.int16)), 3, invert=True)
    # long elements (split across threads; each searched in the sorted test elements)
    el = rng.integers(0, 500, 20000)
    add("isin.Tensor_Tensor", T(el), T(rng.integers(0, 600, 100)))
    add("isin.Tensor_Tensor", T(el), T(rng.integers(0, 600, 7)), invert=True)
    # (no NaN among these elements: torch 1.13's sorting path answers a NaN element as the first value its
    # unordered_set happens to hold, found or not; the server answers False, as the brute-force path does)
    fe = rng.integers(-40, 40, 20000) / 4.0
    fe[fe == 0] = -0.0
    add("isin.Tensor_Tensor", T(fe), T(np.concatenate([rng.integers(-40, 40, 60) / 4.0, [np.nan, 0.0]])))
    add("isin.Scalar_Tensor", 3, T(e))
    # reductions
    for dt in ("float32", "float64"):
        a = g(4, 5, 6).astype(dt)
        for dim in (None, 0, -1):
            add("aminmax", T(a), dim=dim, keepdim=dim == 0, nout=2)
        for p in (2, 1, 0, 3.5, 0.5, -1.5, float("inf"), float("-inf")):
            add("linalg_vector_norm", T(a), p, [1, 2], exact=False)
            add("norm.ScalarOpt_dim", T(a), p, [0], True, exact=False)
        add("norm.Scalar", T(a), 2, exact=False)
        add("norm.ScalarOpt_dtype", T(a), 3, dtype="float64", exact=False)
        add("norm.ScalarOpt_dim_dtype", T(a), 1, [2], False, dtype="float64", exact=False)
        add("linalg_vector_norm", T(a), 2, None, False, dtype="float64", exact=False)
        add("nanmean", T(np.where(rng.random((4, 5, 6)) < 0.3, np.nan, a)), [0, 2], True, exact=False)
    add("norm.ScalarOpt_dtype", T(rng.integers(-5, 5, (3, 4))), 2, dtype="float32", exact=False)  # int input
    add("norm.Scalar", T(np.zeros((0, 3), np.float32)), -2, exact=False)  # empty: 0, no refusal
    # linalg_vector_norm's empty-input check reads the order as a double (1e300 is finite there, though
    # its kernel reads it as a float: inf), so only ord < 0 and ord == inf are refused without dims
    for p in (1e300, -1e300, 3.0, float("inf"), -1e-50):
        add("linalg_vector_norm", T(np.zeros((1, 0, 2), np.float32)), p, None, True, exact=False)
    add("linalg_vector_norm", T(g(3, 2).astype(np.float32)), 1e300, None, exact=False)
    # median, nanmedian, mode: tie-heavy lines, exact values and indices
    for n in (1, 2, 7, 16, 17, 64, 301):
        for dt in ("float32", "float64", "int64", "int16", "uint8"):
            x = np.stack([tie_line(rng, n, dt) for _ in range(4)])
            add("median.dim", T(x), 1, nout=2)
            add("median.dim", T(x.T.copy()), 0, True, nout=2)
            add("mode", T(x), 1, nout=2)
            add("mode", T(x.T.copy()), 0, nout=2)
            add("median", T(x))
            if dt.startswith("float"):
                add("nanmedian.dim", T(x), 1, nout=2)
                add("nanmedian", T(x))
                add("nanmedian.dim", T(np.full((2, n), np.nan, dt)), 1, nout=2)  # all NaN: nth_element's pick
    add("mode", T(np.array([True, False, True, False])), nout=2)
    # median.dim of short lines of many keys that share their high bytes (cpu/sort.c's short_select
    # keeps the candidates of each byte): floats in [1, 2), int64 near 2^40, a key repeated
    for dt in ("float32", "float64", "int64"):
        x = 1 + rng.random((6, 999)) if dt.startswith("float") else rng.integers(1 << 40, (1 << 40) + 3000, (6, 999))
        x = x.astype(dt)
        x[:3, ::5] = x[:3, 2:3]  # a fifth of the line one key, in three rows
        if dt.startswith("float"):
            x[4, 10] = x[5, 0] = np.nan
        add("median.dim", T(x), 1, nout=2)
        add("median.dim", T(x[:, :200].T.copy()), 0, nout=2)
        if dt.startswith("float"):
            add("nanmedian.dim", T(x), 1, nout=2)
    # mode of lines of distinct keys (cpu/sort.c's mode_distinct: the smallest, no replay), and of lines
    # one step from it (a repeat only at the end, both zeros, a NaN, an infinity): the replay's index
    for dt in ("float32", "float64", "int64", "int16"):
        x = np.stack([rng.permutation(300) - 150 for _ in range(5)]).astype(dt)
        if dt.startswith("float"):
            x = x * 0.37 + rng.standard_normal(x.shape).astype(dt) * 1e-3
            x[1, 5], x[1, 9] = 0.0, -0.0
            x[2, 0] = x[0, 7] = np.nan
            x[3, 11] = -np.inf
        x[4, -1] = x[4, 0]
        add("mode", T(x), 1, nout=2)
        add("mode", T(x.T.copy()), 0, nout=2)
    add("mode", T(np.array([1.0, 2.0, 2.0, 1.0], np.float16)), nout=2)
    add("median", T(np.zeros(0, np.int64)))  # NaN as int64
    add("median", T(np.zeros(0, np.float32)))
    add("median", T(np.array([0.0, -0.0, 0.0, -0.0, -0.0])))  # which zero nth_element leaves
    add("median.dim", T(np.array(3.5)), 0, True, nout=2)  # 0-dim
    return C


def test_values_against_torch(server, rng):
    check_cases(server, make_cases(rng))


def long_line(rng, n, dt):
    """A line for the radix select in dtype dt (bfloat16: float32 to round): distinct values, heavy ties,
    or signed zeros around the middle, with NaNs in a float line now and then; int64 over its whole range."""
    kind = int(rng.integers(0, 3))
    if kind == 0 and dt == "int64":
        return rng.integers(-2 ** 62, 2 ** 62, n)
    a = [lambda: rng.standard_normal(n) * 1e3, lambda: rng.integers(-3, 4, n).astype(np.float64),
         lambda: np.where(rng.random(n) < 0.5, 0.0, rng.standard_normal(n))][kind]()
    if dt in ("float32", "float64", "float16", "bfloat16"):
        if kind == 2:
            a[rng.random(n) < 0.25] *= -0.0
        if rng.random() < 0.3:
            a[rng.random(n) < 0.01] = np.nan
    elif dt == "uint8":
        a = np.abs(a) % 200
    return a.astype(np.float32 if dt == "bfloat16" else dt)


def test_median_of_long_lines_against_torch(server, rng):
    """median and nanmedian of lines of 65536 elements and more take a radix select, not ATen's
    nth_element: the value, the index of a tie (median.dim's "value, then index" order), the first NaN,
    an all-NaN line's pick and median()'s zero when both zeros are present (that line is replayed) are
    torch's, in every dtype, along a contiguous and along a strided dim"""
    C = []
    add = lambda op, *args, nout=1: C.append((op, list(args), {}, nout, True))
    for dt in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "uint8"):
        W = bf16 if dt == "bfloat16" else T
        for n in (65536, 70001 + int(rng.integers(0, 1000))):
            x = np.stack([long_line(rng, n, dt) for _ in range(2)])
            add("median", W(x))
            add("median.dim", W(x), 1, nout=2)
            add("median.dim", W(x.T.copy()), 0, nout=2)
            if dt.startswith("float") or dt == "bfloat16":
                add("nanmedian", W(x))
                add("nanmedian.dim", W(x.T.copy()), 0, nout=2)
    n = 65537
    zeros = np.where(rng.random(n) < 0.5, -0.0, 0.0)
    zeros[:100], zeros[100:200] = 1.0, -1.0
    add("median", T(zeros.astype(np.float32)))  # both zeros at the median: nth_element's pick
    add("median", T(-np.abs(zeros)))  # only -0.0 there
    add("nanmedian.dim", T(np.full((2, n), np.nan, np.float32)), 1, nout=2)  # all NaN: nth_element's pick
    check_cases(server, C)


def test_median_of_a_nan_is_the_quiet_nan(server, rng):
    """median() of a tensor holding a NaN is ATen's quiet_NaN(), whatever the NaN's sign and payload
    (median.dim returns the first NaN itself): the bytes, against torch's, short and long, in float32
    and float64 (torch refuses float16)"""
    code = ("import sys, torch, numpy as np\n"
            "for line in sys.stdin:\n"
            "    dt, hx = line.split()\n"
            "    a = np.frombuffer(bytes.fromhex(hx), dt).copy()\n"
            "    print(torch.from_numpy(a).median().numpy().tobytes().hex())\n")
    arrays = []
    for dt, u in (("float32", np.uint32), ("float64", np.uint64)):
        for n in (5, 70000):
            a = rng.standard_normal(n).astype(dt)
            a[rng.integers(0, n, 3)] = np.nan
            bits = a.view(u)
            bits[np.isnan(a)] |= u(1) | (u(1) << u(8 * a.itemsize - 1))  # -NaN, a payload of 1
            arrays.append(a)
    p = subprocess.run([TORCH_PY, "-c", code], input="".join(f"{a.dtype} {a.tobytes().hex()}\n" for a in arrays),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    for a, want in zip(arrays, p.stdout.split()):
        h, body = binary_body({"args": [{"dtype": str(a.dtype), "shape": [a.size],
                                          "parameters": {"binary_data_size": a.nbytes}}]}, [a])
        r = server.post("/v1/ops/median", data=body, headers={
            "Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(h)),
            "Accept": "application/octet-stream"})
        assert r.status_code == 200, r.text[:300]
        assert parse_binary_response(r)[1][0].hex() == want, (a.dtype, a.size, want)


def cuda_available(server):
    return server.get("/v1/devices").json()["cuda"]["available"]


def test_isin_median_mode_on_cuda_against_torch(server, rng):
    """isin, median, nanmedian and mode have CUDA kernels that replay the
    CPU's choices (the selection per line, the sorted replay): the same
    cases, run on device cuda, agree exactly with torch's CPU answers."""
    if not cuda_available(server):
        pytest.skip("no CUDA device on this machine (GET /v1/devices says why)")
    cases = [c for c in make_cases(rng) if c[0].split(".")[0] in ("isin", "median", "nanmedian", "mode")]
    assert len(cases) > 20
    check_cases(server, cases, device="cuda")


def check_cases(server, cases, device=None):
    refs = []
    for op, args, kw, nout, _ in cases:
        for out in range(nout):
            refs.append({"op": op, "args": args, "kwargs": kw, "out": out})
    want = iter(torch_ref(refs))
    for op, args, kw, nout, exact in cases:
        body = {"args": wire(args), "kwargs": wire(kw)}
        if device:
            body["device"] = device
        r = server.post(f"/v1/ops/{op}", body)
        what = f"{device or 'cpu'} {op} {[a['dtype'] + str(a['shape']) if isinstance(a, dict) else a for a in args]} {kw}"
        ws = [next(want) for _ in range(nout)]
        if "error" in ws[0]:
            assert 400 <= r.status_code < 500, (what, ws[0], r.text[:300])
            assert error_message(r) in ws[0]["error"], (what, ws[0])
            continue
        assert r.status_code == 200, (what, r.text[:500])
        outs = r.json()["outputs"]
        assert len(outs) == nout, what
        for out, w in enumerate(ws):
            got = got_of(outs[out])
            assert outs[out]["dtype"] == w["dtype"] and list(got.shape) == w["shape"], (what, out, w["shape"])
            exp = np.array([float(v) if isinstance(v, str) else v for v in w["value"]], np.float64)
            g64 = got.astype(np.float64).reshape(-1)
            if exact or not got.dtype.kind == "f":
                np.testing.assert_array_equal(g64, exp, err_msg=f"{what} output {out}")
                if got.dtype.kind == "f":  # signed zeros too
                    assert np.array_equal(np.signbit(g64), np.signbit(exp)), f"{what} output {out}: signs of zero"
            else:
                # reductions: another summation order, within a few ulps of
                # the inputs' magnitude (standard normal, sums of at most 120)
                eps = np.finfo(got.dtype).eps
                np.testing.assert_allclose(g64, exp, rtol=8 * eps, atol=64 * eps, err_msg=f"{what} output {out}")


def test_equal_and_allclose_return_bools(server, rng):
    a = rng.standard_normal((3, 4))
    cases = [
        ("equal", [T(a), T(a.copy())], {}, True),
        ("equal", [T(a), T(a.astype(np.float32).astype(np.float64))], {}, False),
        ("equal", [T(np.array([1.0, 2.0])), T(np.array([1, 2]))], {}, True),  # promoted, as torch
        ("equal", [T(np.array([1.0])), T(np.array(1.0))], {}, False),  # sizes differ: no broadcasting
        ("equal", [T(np.array([NAN])), T(np.array([NAN]))], {}, False),
        ("equal", [T(np.array([0.0])), T(np.array([-0.0]))], {}, True),
        ("equal", [T(np.zeros((0, 2))), T(np.zeros((0, 2), np.int8))], {}, True),
        ("allclose", [T(a), T(a + 1e-9)], {}, True),
        ("allclose", [T(a), T(a + 1e-3)], {}, False),
        ("allclose", [T(np.array([NAN, 1.0])), T(np.array([NAN, 1.0]))], {"equal_nan": True}, True),
        ("allclose", [T(np.array([NAN, 1.0])), T(np.array([NAN, 1.0]))], {}, False),
        ("allclose", [T(np.array([0, 255], np.uint8)), T(np.array([255, 0], np.uint8))], {"atol": 1.0}, False),
    ]
    for op, args, kw, want in cases:
        r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kw})
        assert r.status_code == 200, r.text
        assert r.json()["outputs"][0]["value"] is want, (op, args, kw)
    # a program's step may return one too
    r = server.post("/v1/run", {"steps": [{"op": "transpose.int", "args": [T(a), 0, 1]},
                                          {"op": "equal", "args": [{"ref": "$0"}, T(a.T.copy())]}]})
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["value"] is True


def test_equal_long_inputs_in_each_dtype(server, rng):
    """equal of two long tensors of one dtype is compared where they lie, a
    block at a time across the worker pool: one difference anywhere makes it
    False, a NaN anywhere too (even against itself), -0.0 against 0.0 not"""
    n = 200_003  # blocks of 4096 over parallel chunks, with a ragged end
    for dt in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"):
        if dt == "bool":
            a = rng.random(n) < 0.5
        elif dt in ("float32", "float64", "float16", "bfloat16"):
            a = rng.standard_normal(n).astype(np.float32 if dt == "bfloat16" else dt)
            a[rng.integers(0, n, 50)] = 0.0
        else:
            a = rng.integers(0, 100, n).astype(dt)

        def wire(v):
            return bf16(v) if dt == "bfloat16" else T(v)

        def call(x, y):
            r = server.post("/v1/ops/equal", {"args": [wire(x), wire(y)]})
            assert r.status_code == 200, r.text
            return r.json()["outputs"][0]["value"]

        if dt == "bfloat16":
            a = (a.view(np.uint32) & 0xFFFF0000).view(np.float32)
        assert call(a, a.copy()) is True, dt
        for at in (0, 4095, 4096, int(rng.integers(0, n)), n - 1):
            b = a.copy()
            b[at] = (not b[at]) if dt == "bool" else b[at] + 1
            assert call(a, b) is False, (dt, at)
        if dt in ("float32", "float64", "float16", "bfloat16"):
            b = a.copy()
            zeros = b == 0
            b[zeros] = -0.0  # -0.0 equals 0.0
            assert call(a, b) is True, dt
            at = int(rng.integers(0, n))
            c = a.copy()
            c[at] = np.nan
            assert call(c, c.copy()) is False, (dt, at)


def test_non_contiguous_inputs(server, rng):
    x = np.stack([tie_line(rng, 40, "float64") for _ in range(3)])
    for op, extra, nout in (("median.dim", [0], 2), ("mode", [0], 2), ("nanmedian.dim", [0], 2),
                            ("lerp.Scalar", [{"ref": "$0"}, 0.3], 1)):
        r = server.post("/v1/run", {"steps": [{"op": "transpose.int", "args": [T(x), 0, 1]},
                                              {"op": op, "args": [{"ref": "$0"}] + extra}]})
        assert r.status_code == 200, r.text
        [*want] = torch_ref([{"op": op, "args": [T(x.T.copy())] + [T(x.T.copy()) if isinstance(e, dict) else e
                                                                    for e in extra], "out": k}
                             for k in range(nout)])
        for k in range(nout):
            got = from_json(r.json()["outputs"][k]).astype(np.float64).reshape(-1)
            exp = np.array([float(v) if isinstance(v, str) else v for v in want[k]["value"]])
            np.testing.assert_array_equal(got, exp, err_msg=op)


def grads(server, op, args, kw, out, weight):
    """(grad of the one requires-grad input, grad_fn) by the server."""
    hdr = {"X-OD-Session": "tr-" + uuid.uuid4().hex[:12]}
    [k] = [i for i, a in enumerate(args) if isinstance(a, dict) and a.get("requires_grad")]
    r = server.post("/v1/tensors", {"tensor": args[k]}, headers=hdr)
    assert r.status_code == 201, r.text
    leaf = r.json()["id"]
    wargs = [{"ref": leaf} if i == k else a for i, a in enumerate(args)]
    r = server.post(f"/v1/ops/{op}", {"args": wire(wargs), "kwargs": wire(kw), "keep": True}, headers=hdr)
    assert r.status_code == 200, r.text
    y = r.json()["outputs"][out]
    r = server.post("/v1/ops/mul", {"args": [{"ref": y["id"]}, T(weight.astype(y["dtype"]))], "keep": True},
                    headers=hdr)
    r = server.post("/v1/ops/sum", {"args": [{"ref": r.json()["outputs"][0]["id"]}], "keep": True}, headers=hdr)
    loss = r.json()["outputs"][0]["id"]
    r = server.post(f"/v1/tensors/{loss}/backward", {}, headers=hdr)
    assert r.status_code == 200, r.text
    gid = r.json()["grads"][0]["grad"]["id"]
    return from_json(server.get(f"/v1/tensors/{gid}", headers=hdr).json()["outputs"][0]), y.get("grad_fn")


def test_gradients_of_ties_against_torch(server, rng):
    tie = np.array([[1.0, 2.0, 2.0, 3.0, 2.0], [5.0, 5.0, 5.0, 1.0, 1.0], [0.5, -1.0, 0.5, 9.0, 0.5]])
    cases = [("median", [T(tie, rg=True)], {}, 0), ("nanmedian", [T(np.where(tie > 4, NAN, tie), rg=True)], {}, 0),
             ("median.dim", [T(tie, rg=True), 1], {}, 0), ("nanmedian.dim", [T(tie, rg=True), 0, True], {}, 0),
             ("mode", [T(tie, rg=True), 1], {}, 0), ("mode", [T(tie, rg=True), 0, True], {}, 0),
             ("norm.ScalarOpt_dim", [T(tie, rg=True), float("inf"), [1]], {}, 0),  # ties share the max's gradient
             ("linalg_vector_norm", [T(np.abs(tie), rg=True), float("-inf")], {}, 0),
             ("lerp.Tensor", [T(tie, rg=True), T(tie[::-1].copy()), T(rng.random((3, 5)))], {}, 0),
             ("addcdiv", [T(tie), T(tie, rg=True), T(tie + 0.25)], {"value": 0.5}, 0)]
    shapes = torch_ref([{"op": op, "args": a, "kwargs": kw, "out": o} for op, a, kw, o in cases])
    refs = []
    for (op, a, kw, o), s in zip(cases, shapes):
        assert "error" not in s, (op, s)
        w = rng.standard_normal(s["shape"])
        refs.append(({"op": op, "args": a, "kwargs": kw, "out": o, "weight": T(w)}, w))
    want = torch_ref([r for r, _ in refs])
    for (op, a, kw, o), (ref, w), wt in zip(cases, refs, want):
        got, grad_fn = grads(server, op, a, kw, o, w)
        np.testing.assert_allclose(got.reshape(-1), np.array(wt["grads"][0]), rtol=1e-12, atol=1e-12, err_msg=op)
        assert grad_fn == wt["grad_fn"], (op, grad_fn, wt["grad_fn"])


@pytest.mark.parametrize("op,args,kw", [
    ("lerp.Scalar", [T(np.ones(2, np.float32)), T(np.ones(2))], {"weight": 0.5}),
    ("lerp.Tensor", [T(np.ones(2, np.int64)), T(np.ones(2, np.int64)), T(np.ones(2, np.int64))], {}),
    ("addcdiv", [T(np.ones(2)), T(np.ones(2, np.int64)), T(np.ones(2, np.int32))], {}),
    ("addcmul", [T(np.ones(2, np.int8)), T(np.ones(2, np.int8)), T(np.ones(2, np.int8))], {"value": 1000}),
    # an empty result checks the value all the same (torch 1.13 converts it before the loop)
    ("addcmul", [T(np.ones((2, 0), np.int64)), T(np.ones((2, 0), np.int64)), T(np.ones(0, np.int64))], {"value": 1e30}),
    ("addcdiv", [T(np.ones(0, np.float32)), T(np.ones(0, np.float32)), T(np.ones(0, np.float32))], {"value": -1e39}),
    ("lerp.Scalar", [T(np.ones(0, np.float32)), T(np.ones(0, np.float32))], {"weight": 1e39}),
    # bfloat16 converts the value to float (its opmath type): 3.4e38 passes, 1e39 does not
    ("addcmul", [bf16(np.ones(3)), bf16(np.ones(3)), bf16(np.ones(3))], {"value": 1e39}),
    ("addcmul", [T(np.ones(2, np.float16)), T(np.ones(2, np.float16)), T(np.ones(2, np.float16))], {}),
    ("heaviside", [T(np.ones(2, np.float32)), T(np.ones(2))], {}),
    ("nextafter", [T(np.ones(2, np.int64)), T(np.ones(2, np.int64))], {}),
    ("isclose", [T(np.ones(2, np.float32)), T(np.ones(2))], {}),
    ("isclose", [T(np.ones(2)), T(np.ones(2))], {"rtol": -1.0}),
    ("isclose", [T(np.ones(2)), T(np.ones((3, 2)))], {"equal_nan": True}),
    ("isin.Tensor_Tensor", [T(np.ones(2, np.float16)), T(np.ones(2, np.float16))], {}),
    ("isin.Tensor_Tensor", [T(np.array([True])), T(np.ones(2))], {}),
    ("aminmax", [T(np.zeros((0, 3)))], {}),
    ("aminmax", [T(np.zeros((0, 3)))], {"dim": 0}),
    ("nanmean", [T(np.ones(2, np.int64))], {}),
    ("norm.Scalar", [T(np.ones(2, np.int64))], {}),
    ("linalg_vector_norm", [T(np.zeros(0))], {"ord": float("inf")}),
    ("linalg_vector_norm", [T(np.zeros((2, 0)))], {"ord": -1, "dim": [1]}),
    ("linalg_vector_norm", [T(np.ones(2))], {"dtype": "float32"}),
    ("median.dim", [T(np.zeros((0, 3))), 0], {}),
    ("median", [T(np.array([True]))], {}),
    ("mode", [T(np.zeros((2, 0))), 1], {}),
])
def test_refusals_say_what_torch_says(server, op, args, kw):
    r = server.post(f"/v1/ops/{op}", {"args": wire(args), "kwargs": wire(kw)})
    assert 400 <= r.status_code < 500, r.text
    [w] = torch_ref([{"op": op, "args": args, "kwargs": kw}])
    assert "error" in w, (op, w)
    assert error_message(r) in w["error"], (error_message(r), w["error"])
