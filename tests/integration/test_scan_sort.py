"""The scans and the sort family on long lines, against PyTorch 1.13 (the
differential tester's tensors have at most 5 elements per dim).

Long lines are where ATen's algorithms show: cumsum's float32 accumulation
in double, the order std::sort (introsort), std::nth_element and
std::partial_sort leave equal keys in (the indices of sort, topk and
kthvalue), NaN runs in cummax/cummin. Inputs are tie-heavy on purpose
(small integer ranges, constant, sorted and organ-pipe lines, zeros of
both signs) and every output is compared exactly (logcumsumexp within an
ulp or two)."""

import numpy as np
import pytest

from conftest import from_json, torch_ref


def T(a):
    a = np.asarray(a)
    data = [("NaN" if np.isnan(x) else x) for x in a.reshape(-1).tolist()] if a.dtype.kind == "f" else \
        a.reshape(-1).tolist()
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": data}


def line(rng, n, dtype):
    """One tie-heavy line of n keys."""
    i = np.arange(n)
    kind = rng.integers(0, 6)
    a = [lambda: rng.integers(0, 3, n), lambda: rng.integers(-50, 50, n), lambda: np.zeros(n),
         lambda: np.minimum(i, n - 1 - i), lambda: i // max(1, n // 8), lambda: (n - i) % 7][kind]()
    a = np.asarray(a, dtype=np.float64)
    if dtype.startswith("float") and rng.random() < 0.3:
        a[rng.random(n) < 0.05] = np.nan
    if dtype.startswith("float") and rng.random() < 0.5:
        a[(a == 0) & (rng.random(n) < 0.5)] = -0.0  # ties 0.0 in ATen's order: the indices tell
    return a.astype(dtype)


def make_cases(rng):
    C = []
    for n in (17, 100, 1000, 3000):
        for dtype in ("float32", "float64", "int64", "int16"):
            x = np.stack([line(rng, n, dtype) for _ in range(3)])
            desc = bool(rng.random() < 0.5)
            C.append(("sort", [T(x), -1, desc], {}, 2))
            C.append(("sort.stable", [T(x)], {"stable": True, "dim": -1, "descending": desc}, 2))
            C.append(("sort", [T(x.T.copy()), 0, desc], {}, 2))
            # along dim 0 (lines strided by 3): topk's heap reads the keys where they lie
            C.append(("topk", [T(x.T.copy()), max(1, n // 64), 0, desc, True], {}, 2))
            for k in (1, max(1, n // 64), n // 2, n):
                C.append(("topk", [T(x), k, -1, bool(rng.random() < 0.5), bool(rng.random() < 0.7)], {}, 2))
                C.append(("kthvalue", [T(x), k, -1], {}, 2))
            C.append(("cummax", [T(x), 1], {}, 2))
            C.append(("cummin", [T(x), 1], {}, 2))
            C.append(("cumsum", [T(x), 1], {}, 1))
    g = rng.standard_normal((4, 5000))
    C.append(("cumsum", [T(g.astype(np.float32)), 1], {}, 1))  # accumulated in double by ATen
    C.append(("cumsum", [T(g), 1], {"dtype": "float32"}, 1))
    C.append(("cumprod", [T((1 + g / 100).astype(np.float32)), 1], {}, 1))
    C.append(("cumsum", [T(rng.integers(-2**31, 2**31, (2, 3000)).astype(np.int32)), 1], {}, 1))  # int64 result
    C.append(("cumprod", [T(rng.integers(-3, 4, (2, 30)).astype(np.int16)), 1], {}, 1))  # int64, below 2**53
    C.append(("logcumsumexp", [T((g * 10).astype(np.float32)), 1], {}, 1))
    C.append(("logcumsumexp", [T(g * 10), 0], {}, 1))
    return C


def test_long_lines_against_torch(server, rng):
    check(server, make_cases(rng))


def test_one_long_line_sorted_on_the_pool(server, rng):
    """sort and mode of a single line of 65536 keys or more: cpu/sort.c's ps_sort replays std::sort on the
    pool's threads, a range each; values and indices (where std::sort leaves equal keys: mode's index is
    the last of its run) are torch's, ascending and descending, in several dtypes; a float line with a NaN
    (mode's plain < leaves it unordered) takes the one-thread replay."""
    C = []
    for dtype in ("float32", "float64", "int64", "int16"):
        for n in (65536, 150001 + int(rng.integers(0, 1000))):
            x = line(rng, n, dtype)
            shape = (n,) if rng.random() < 0.5 else (1, n)
            C.append(("sort", [T(x.reshape(shape)), -1, bool(rng.random() < 0.5)], {}, 2))
            C.append(("mode", [T(x.reshape(shape)), -1], {}, 2))
    # mode over a few distinct values: long runs, the index from deep in the sort
    C.append(("mode", [T(rng.integers(0, 1000, 200000))], {}, 2))
    C.append(("argsort", [T(rng.integers(-5, 5, 100000).astype(np.float32)), -1, True], {}, 1))
    for share in (0.0001, 0.3):
        nan = rng.integers(-3, 4, 70000).astype(np.float64)
        nan[rng.random(70000) < share] = np.nan
        C.append(("mode", [T(nan)], {}, 2))
    check(server, C)


def check(server, cases):
    refs = []
    for op, args, kw, nout in cases:
        for out in range(nout):
            refs.append({"op": op, "args": args, "kwargs": kw, "out": out})
    want = iter(torch_ref(refs))
    for op, args, kw, nout in cases:
        r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kw})
        assert r.status_code == 200, (op, r.text[:500])
        outs = r.json()["outputs"]
        assert len(outs) == nout, op
        for out in range(nout):
            w = next(want)
            assert "error" not in w, (op, w)
            got = from_json(outs[out])
            exp = np.array([float(v) if isinstance(v, str) else v for v in np.asarray(w["value"], dtype=object).reshape(-1)],
                           dtype=got.dtype).reshape(w["shape"])
            assert list(got.shape) == list(w["shape"]) and outs[out]["dtype"] == w["dtype"], (op, out)
            what = f"{op} {args[0]['dtype']}{args[0]['shape']} {args[1:]} {kw} output {out}"
            if op == "logcumsumexp":
                np.testing.assert_allclose(got, exp, rtol=4 * np.finfo(got.dtype).eps, atol=0, err_msg=what)
            else:
                np.testing.assert_array_equal(got, exp, err_msg=what)


@pytest.mark.parametrize("op,args,kw,msg", [
    ("cumsum", [{"dtype": "float16", "shape": [2], "data": [1, 2]}, 0], {}, "\"cumsum_out_cpu\" not implemented for 'Half'"),
    ("cumsum_", [{"dtype": "float32", "shape": [2], "data": [1, 2]}, 0], {"dtype": "int64"},
     "Bad in-place call: input tensor dtype float and output tensor dtype long int should match"),
    ("topk", [{"dtype": "float32", "shape": [2], "data": [1, 2]}, 3], {}, "selected index k out of range"),
    ("kthvalue", [{"dtype": "float32", "shape": [2, 0], "data": []}, 1, 1], {},
     "kthvalue(): Expected reduction dim 1 to have non-zero size."),
    ("kthvalue", [{"dtype": "float32", "shape": [2], "data": [1, 2]}, 3], {},
     "kthvalue(): selected number k out of range for dimension 0"),
    ("topk", [{"dtype": "bool", "shape": [2], "data": [True, False]}, 1], {}, "\"topk_cpu\" not implemented for 'Bool'"),
])
def test_refusals_say_what_torch_says(server, op, args, kw, msg):
    r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kw})
    assert 400 <= r.status_code < 500, r.text
    assert r.json()["error"]["message"] == msg
    [w] = torch_ref([{"op": op, "args": args, "kwargs": kw}])
    assert msg in w["error"], w
