"""The scatter-like, padding and search operators (kernels/composite/scatters.c,
kernels/shape_pad.c + cpu/pad.c, kernels/shape_search.c + cpu/search.c,
round.decimals, index_fill.int_Tensor) against PyTorch 1.13 on fresh random
inputs of every dtype torch's CPU takes for each (and the ones it refuses),
with empty and 0-dim tensors, broadcasting masks, strided views (a view's
strides come from rot90, whose quarter turns are transposes), and refusals
that must carry torch's message; then their gradients against torch's."""

import numpy as np

from conftest import assert_bits_as_torch, from_json, torch_ref

ALL = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


def J(v):
    """A value as JSON holds it: NaN and the infinities as strings."""
    if isinstance(v, float) and not np.isfinite(v):
        return "NaN" if np.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def T(a, dtype=None):
    a = np.asarray(a)
    return {"dtype": dtype or str(a.dtype), "shape": list(a.shape), "data": [J(v) for v in a.reshape(-1).tolist()]}


def rand(rng, dt, shape):
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in ("int64", "int32", "int16", "int8", "uint8"):
        return rng.integers(0 if dt == "uint8" else -9, 10, shape).astype(dt)
    return (rng.standard_normal(shape) * 3).astype(np.float32 if dt == "bfloat16" else dt)


def R(rng, dt, shape):
    return T(rand(rng, dt, shape), dt)


def float32_atol(args):
    """1e-6, or 8 float32 ulps of the largest input where that is more: an output that is a short weighted
    sum of inputs (an interpolation, a pad's copy) and lands near zero keeps the rounding of its terms,
    which differs from torch's when the order differs."""
    big = max((abs(float(x)) for a in args if isinstance(a, dict) for x in a.get("data", ())
               if not isinstance(x, str)), default=0.0)
    return max(1e-6, 8 * float(np.finfo(np.float32).eps) * big)


def check(server, cases, rtol=1e-6, outs=1):
    reqs = [{"op": op, "args": a, "kwargs": kw, "out": k} for op, a, kw in cases for k in range(outs)]
    want = torch_ref(reqs)
    bad = []
    for req, w in zip(reqs, want):
        op, args, kw, k = req["op"], req["args"], req["kwargs"], req["out"]
        r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kw})
        what = f"{op} {[a['dtype'] + str(a['shape']) if isinstance(a, dict) else a for a in args]} {kw} out {k}"
        if "error" in w:
            if not 400 <= r.status_code < 500:
                bad.append(f"{what}: torch raised {w['error']!r}, server {r.status_code} {r.text[:200]}")
            elif r.json()["error"]["message"] not in w["error"]:
                bad.append(f"{what}: message {r.json()['error']['message']!r} vs torch {w['error']!r}")
            continue
        if r.status_code != 200:
            bad.append(f"{what}: torch ok, server {r.status_code} {r.text[:300]}")
            continue
        o = r.json()["outputs"][k]
        if o["dtype"] != w["dtype"] or o["shape"] != w["shape"]:
            bad.append(f"{what}: {o['dtype']}{o['shape']} vs torch {w['dtype']}{w['shape']}")
            continue
        got = np.array([float(x) if isinstance(x, str) else x for x in o["data"]], np.float64)
        exp = np.array([float(x) if isinstance(x, str) else x for x in w["value"]], np.float64)
        if o["dtype"] in ("float32", "float16", "bfloat16"):  # the JSON holds the shortest float32 text
            got, exp = got.astype(np.float32), exp.astype(np.float32)
        if not np.allclose(got, exp, rtol=rtol, atol=float32_atol(args), equal_nan=True):
            bad.append(f"{what}: {got[:8]} vs torch {exp[:8]}")
    assert not bad, f"{len(bad)} of {len(cases)} disagree:\n" + "\n".join(bad[:25])


def test_slice_select_scatter(server, rng):
    cases = []
    for dt in ALL:
        x = R(rng, dt, (4, 5))
        cases += [("slice_scatter", [x, R(rng, dt, (2, 5)), 0, 1, 3], {}),
                  ("slice_scatter", [x, R(rng, dt, (4, 2)), 1, None, None, 3], {}),
                  ("slice_scatter", [x, R(rng, dt, (4, 2)), -1, -2], {}),
                  ("slice_scatter", [x, R(rng, dt, (4, 5))], {}),
                  ("slice_scatter", [x, R(rng, dt, (0, 5)), 0, 3, 1], {}),
                  ("select_scatter", [x, R(rng, dt, (5,)), 0, -1], {}),
                  ("select_scatter", [x, R(rng, dt, (4,)), 1, 2], {})]
    x = R(rng, "float32", (4, 5))
    cases += [("slice_scatter", [x, R(rng, "float64", (4, 5))], {}),  # src dtype is cast by copy_
              ("slice_scatter", [x, R(rng, "float32", (3, 5)), 0, 0, 2], {}),
              ("slice_scatter", [x, R(rng, "float32", (4, 5)), 2], {}),
              ("select_scatter", [x, R(rng, "float32", (4,)), 0, 1], {}),
              ("select_scatter", [x, R(rng, "float32", (5,)), 0, 4], {}),
              ("select_scatter", [T(np.float32(2)), T(np.float32(1)), 0, 0], {}),
              ("slice_scatter", [R(rng, "float32", (0, 3)), R(rng, "float32", (0, 3))], {})]
    check(server, cases)


def test_rot90(server, rng):
    cases = []
    for dt in ALL:
        x = R(rng, dt, (3, 4, 2))
        for k in (-3, -1, 0, 1, 2, 3, 5):
            cases.append(("rot90", [x, k, [0, 1]], {}))
        cases += [("rot90", [x, 1, [2, 0]], {}), ("rot90", [x, 3, [-1, -2]], {}), ("rot90", [x], {})]
    x = R(rng, "float32", (3, 4))
    cases += [("rot90", [x, 1, [0]], {}), ("rot90", [R(rng, "float32", (3,)), 1, [0, 1]], {}),
              ("rot90", [x, 1, [0, 0]], {}), ("rot90", [x, 1, [0, -2]], {}), ("rot90", [x, 1, [0, 2]], {}),
              ("rot90", [x, 1, [-3, 1]], {}), ("rot90", [x, 1, [0, -3]], {}),
              ("rot90", [R(rng, "float32", (0, 3)), 1, [0, 1]], {})]
    check(server, cases)


def test_masked_scatter(server, rng):
    cases = []
    for dt in ALL:
        x = R(rng, dt, (3, 4))
        m = T(rng.random((3, 4)) < 0.5)
        cases += [("masked_scatter", [x, m, R(rng, dt, (12,))], {}),
                  ("masked_scatter", [x, T(rng.random(4) < 0.5), R(rng, dt, (3, 5))], {}),  # mask broadcasts
                  ("masked_scatter", [R(rng, dt, (4,)), T(rng.random((2, 4)) < 0.5), R(rng, dt, (8,))], {}),
                  ("masked_scatter", [R(rng, dt, ()), T(np.bool_(True)), R(rng, dt, (2,))], {}),
                  ("masked_scatter", [R(rng, dt, (0, 4)), T(np.zeros((0, 4), bool)), R(rng, dt, (0,))], {})]
    x = R(rng, "float32", (3, 4))
    cases += [("masked_scatter", [x, T(np.ones((3, 4), bool)), R(rng, "float32", (5,))], {}),
              ("masked_scatter", [x, T(np.ones((3, 4), bool)), R(rng, "float64", (12,))], {}),
              ("masked_scatter", [x, T(rng.integers(0, 2, (3, 4)).astype(np.uint8)), R(rng, "float32", (12,))], {}),
              ("masked_scatter", [x, T(rng.integers(0, 2, (3, 4)).astype(np.int64)), R(rng, "float32", (12,))], {}),
              ("masked_scatter", [x, T(np.array([0, 1, 2, 0], np.int64)), R(rng, "float32", (12,))], {}),
              ("masked_scatter", [x, T(np.ones(5, bool)), R(rng, "float32", (12,))], {})]
    check(server, cases)


def test_scatter_and_scatter_add_along_every_dim(server, rng):
    """scatter.src, scatter_add and scatter_reduce (their fast loops: one line
    of the index's last dim at a time, the index checked as it is read)
    against torch: every dim of a 3-d self, an index smaller than self and
    src, duplicates (the order of the writes and sums is torch's), NaNs for
    amax and amin, and an out-of-range index at a random position, whose
    message must be torch's."""
    cases = []
    for dt in ("float32", "float64", "int64", "int32", "float16"):
        for dim in (0, 1, 2, -1):
            self_, src = R(rng, dt, (4, 5, 6)), R(rng, dt, (4, 5, 7))
            ishape = (3, 4, 5)
            idx = rng.integers(0, (4, 5, 6)[dim], ishape)
            for op in ("scatter_add", "scatter.src"):
                cases.append((op, [self_, dim, T(idx), src], {}))
            for red in ("prod", "amax", "amin"):
                cases.append(("scatter_reduce.two", [self_, dim, T(idx), src, red], {}))
            cases.append(("scatter_reduce.two", [self_, dim, T(idx), src, "amax"], {"include_self": False}))
            bad = idx.copy()
            bad.flat[rng.integers(0, bad.size)] = rng.choice([-1, (4, 5, 6)[dim]])
            cases.append(("scatter_add", [self_, dim, T(bad), src], {}))
        cases.append(("scatter_add", [R(rng, dt, (50,)), 0, T(rng.integers(0, 50, 200)), R(rng, dt, (300,))], {}))
        cases.append(("scatter_add", [R(rng, dt, ()), 0, T(np.array(0)), R(rng, dt, ())], {}))
    # amax and amin let a NaN of src in and keep one of self
    for dt in ("float32", "float64"):
        x, v = rand(rng, dt, (40,)), rand(rng, dt, (300,))
        x[rng.random(40) < 0.2], v[rng.random(300) < 0.05] = np.nan, np.nan
        for red in ("amax", "amin", "prod"):
            cases.append(("scatter_reduce.two", [T(x), 0, T(rng.integers(0, 40, 300)), T(v), red], {}))
    check(server, cases, rtol=1e-6)


def test_scatter_one_long_line_in_parts(server, rng):
    """A 1-d scatter of 65536 indices or more from src (cpu/scatter.c's scatter_ranges): the pool's threads
    each write a part of the destinations, each reading every index in order, so heavy duplicates still
    end as torch's (the last write wins; sums and products in sequence, bit for bit); a bad index is
    reported as the first in order, whichever part meets it."""
    n = 70_000 + int(rng.integers(0, 5000))
    cases = []
    for dt in ("float32", "float64", "int64"):
        self_, src = R(rng, dt, (3000,)), R(rng, dt, (n,))
        idx = T(rng.integers(0, 3000, n))
        cases += [("scatter.src", [self_, 0, idx, src], {}), ("scatter_add", [self_, 0, idx, src], {}),
                  ("scatter_reduce.two", [self_, 0, idx, src, "prod"], {}),
                  ("scatter_reduce.two", [self_, 0, idx, src, "amax"], {})]
    assert_bits_as_torch(server, [c for c in cases if c[1][0]["dtype"] != "int64"])
    check(server, [c for c in cases if c[1][0]["dtype"] == "int64"])
    idx = rng.integers(0, 3000, n)
    first, second = sorted(rng.choice(np.arange(n // 2, n), 2, replace=False))
    idx[first], idx[second] = -1 - int(rng.integers(0, 50)), 3000 + int(rng.integers(0, 50))
    r = server.post("/v1/ops/scatter.src", {"args": [R(rng, "float32", (3000,)), 0, T(idx), R(rng, "float32", (n,))]})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["message"] == f"index {idx[first]} is out of bounds for dimension 0 with size 3000"


def test_scatter_add_strided_index_and_src(server, rng):
    """scatter_add along the last dim with a strided index or a transposed src
    (the fast loop's strided form; contiguous operands take its unit-stride
    one), through /v1/run, against np.add.at (the same order of sums)."""
    self_, idx, src = rand(rng, "float64", (4, 7)), rng.integers(0, 7, (4, 12)), rand(rng, "float64", (6, 4))
    for strided_idx, transposed_src in ((True, False), (False, True), (True, True)):
        steps = [{"op": "slice.Tensor", "args": [T(idx), 1, 0, 12, 2]} if strided_idx
                 else {"op": "clone", "args": [T(np.ascontiguousarray(idx[:, ::2]))]},
                 {"op": "t", "args": [T(src)]} if transposed_src
                 else {"op": "clone", "args": [T(np.ascontiguousarray(src.T))]},
                 {"op": "scatter_add", "args": [T(self_), 1, {"ref": "$0"}, {"ref": "$1"}]}]
        r = server.post("/v1/run", {"steps": steps, "outputs": ["$2"]})
        assert r.status_code == 200, r.text
        want = self_.copy()
        for i in range(4):
            np.add.at(want[i], idx[i, ::2], src.T[i])
        np.testing.assert_allclose(from_json(r.json()["outputs"][0]), want, rtol=1e-15, atol=0,
                                   err_msg=f"strided index {strided_idx}, transposed src {transposed_src}")


def test_take_long_index_against_torch(server, rng):
    """take with an index long enough to be split across threads (the
    contiguous path checks each index as it reads it), negative indices,
    elements of 1, 2, 4 and 8 bytes, an index of other shape than self, and
    a strided self (the general path); bad indices at two random positions:
    the message names the first, as torch's does."""
    cases = []
    for dt in ("bool", "int16", "float32", "float64", "int64", "bfloat16"):
        x = R(rng, dt, (40, 50))
        idx = rng.integers(-2000, 2000, (3, 25000))
        cases.append(("take", [x, T(idx)], {}))
        bad = idx.copy()
        first, second = sorted(rng.choice(bad.size, 2, replace=False))
        bad.flat[first], bad.flat[second] = rng.choice([-2001, 2000, 10**9]), -10**9
        cases.append(("take", [x, T(bad)], {}))
    cases.append(("take", [R(rng, "float32", (7,)), T(np.zeros((0, 3), np.int64))], {}))
    check(server, cases, rtol=0)
    a, idx = rand(rng, "float64", (30, 40)), rng.integers(-1200, 1200, 50000)
    body = {"steps": [{"op": "t", "args": [T(a)]}, {"op": "take", "args": [{"ref": "$0"}, T(idx)]}], "outputs": ["$1"]}
    r = server.post("/v1/run", body)
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), np.take(a.T.reshape(-1), idx))


def test_nonzero_against_torch(server, rng):
    """nonzero over more elements than one parallel block (the contiguous
    path counts blocks, then each writes from its offset), 1-d and 3-d, every
    dtype of its typed tests (NaN nonzero, -0.0 zero), all zeros, 0-dim and
    empty; a transposed tensor through the general path."""
    cases = []
    for dt in ALL:
        a = (rng.random(200_000) < 0.3) * rand(rng, dt, (200_000,))
        if dt in ("float32", "float64", "float16", "bfloat16"):
            a = a.astype(np.float32 if dt == "bfloat16" else dt)
            a[rng.random(a.size) < 0.01] = np.nan
            a[(a == 0) & (rng.random(a.size) < 0.5)] = -0.0
        cases.append(("nonzero", [T(a, dt)], {}))
        cases.append(("nonzero", [T(a[:140_000].reshape(35, 40, 100), dt)], {}))
    cases += [("nonzero", [T(np.zeros(70_000, np.float32))], {}),
              ("nonzero", [T(np.float32(2))], {}), ("nonzero", [T(np.float32(0))], {}),
              ("nonzero", [T(np.zeros((3, 0), np.int64))], {})]
    check(server, cases, rtol=0)
    m = (rng.random((300, 400)) < 0.5).astype(np.float64)
    r = server.post("/v1/run", {"steps": [{"op": "t", "args": [T(m)]}, {"op": "nonzero", "args": [{"ref": "$0"}]}],
                                "outputs": ["$1"]})
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), np.argwhere(m.T))


def test_index_select_and_flip_against_torch(server, rng):
    """index_select along every dim (slabs of one element take typed copies,
    longer ones memcpy), long indices split across threads, duplicates,
    int32 and int64 indices, an empty index, a bad index anywhere (torch's
    message, no result); flip (index_select with reversed indices) over one
    and several dims; a transposed self through /v1/run."""
    cases = []
    for dt in ("bool", "int16", "float32", "float64", "int64", "bfloat16"):
        x = R(rng, dt, (6, 7, 8))
        for dim in (0, 1, 2, -1):
            size = (6, 7, 8)[dim]
            idx = rng.integers(0, size, 30)
            cases.append(("index_select", [x, dim, T(idx)], {}))
            cases.append(("index_select", [x, dim, T(idx.astype(np.int32))], {}))
            bad = idx.copy()
            bad[rng.integers(0, 30)] = rng.choice([-1, size])
            cases.append(("index_select", [x, dim, T(bad)], {}))
        cases.append(("index_select", [x, 1, T(np.zeros(0, np.int64))], {}))
        cases.append(("index_select", [R(rng, dt, (40000,)), 0, T(rng.integers(0, 40000, 70000))], {}))
        for dims in ([0], [2], [0, 2], [-1, 1]):
            cases.append(("flip", [x, dims], {}))
    cases.append(("flip", [R(rng, "float32", (50000,)), [0]], {}))
    check(server, cases, rtol=0)
    a, idx = rand(rng, "float64", (30, 40)), rng.integers(0, 30, 25)
    body = {"steps": [{"op": "t", "args": [T(a)]}, {"op": "index_select", "args": [{"ref": "$0"}, 1, T(idx)]}],
            "outputs": ["$1"]}
    r = server.post("/v1/run", body)
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), a.T[:, idx])


def test_roll_against_torch(server, rng):
    """roll (a cat of two narrowed views of self per dim that moves, as
    ATen's roll_cpu; a copy when none moves) over one and several dims,
    shifts past the size and negative, a zero shift, flattened, empty; a
    transposed self through /v1/run."""
    cases = []
    for dt in ("float32", "int64", "bool", "bfloat16"):
        x = R(rng, dt, (4, 5, 6))
        cases += [("roll", [x, [2], [1]], {}), ("roll", [x, [-7], [2]], {}), ("roll", [x, [13, -1], [0, -1]], {}),
                  ("roll", [x, [0], [1]], {}), ("roll", [x, [5, 6], [1, 2]], {}), ("roll", [x, [7]], {}),
                  ("roll", [R(rng, dt, (0, 3)), [1], [1]], {})]
    cases.append(("roll", [R(rng, "float32", (1000, 300)), [3], [1]], {}))
    check(server, cases, rtol=0)
    a = rand(rng, "float64", (30, 40))
    body = {"steps": [{"op": "t", "args": [T(a)]}, {"op": "roll", "args": [{"ref": "$0"}, [7, -3], [0, 1]]}],
            "outputs": ["$1"]}
    r = server.post("/v1/run", body)
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), np.roll(a.T, (7, -3), (0, 1)))
    # a roll that moves nothing is still a new tensor: writing it leaves self alone
    body = {"steps": [{"op": "clone", "args": [T(a)]}, {"op": "roll", "args": [{"ref": "$0"}, [40], [1]]},
                      {"op": "add_.Scalar", "args": [{"ref": "$1"}, 1.0]}], "outputs": ["$0", "$1"]}
    r = server.post("/v1/run", body)
    assert r.status_code == 200, r.text
    outs = r.json()["outputs"]
    np.testing.assert_array_equal(from_json(outs[0]), a)
    np.testing.assert_array_equal(from_json(outs[1]), a + 1.0)


def test_gather_along_every_dim(server, rng):
    """gather (one line of the index's last dim at a time in parallel, the index checked as it is read) against
    torch: every dim of a 3-d self, strided selves and indices, a 0-dim case, and an out-of-range index at a
    random position, whose message must be torch's."""
    cases = []
    for dt in ("float32", "float64", "int64", "int32", "float16", "bool", "uint8"):
        for dim in (0, 1, 2, -1):
            self_ = R(rng, dt, (4, 5, 6))
            idx = rng.integers(0, (4, 5, 6)[dim], (3, 4, 5))
            cases.append(("gather", [self_, dim, T(idx)], {}))
            bad = idx.copy()
            bad.flat[rng.integers(0, bad.size)] = rng.choice([-1, (4, 5, 6)[dim]])
            cases.append(("gather", [self_, dim, T(bad)], {}))
        cases.append(("gather", [R(rng, dt, ()), 0, T(np.array(0))], {}))
        cases.append(("gather", [R(rng, dt, (7,)), 0, T(np.zeros(0, np.int64))], {}))
    check(server, cases, rtol=0)
    # strided: a transposed self and an every-other-element index, through /v1/run
    a, idx = rand(rng, "float64", (6, 9)), rng.integers(0, 6, (9, 10))
    body = {"steps": [{"op": "t", "args": [T(a)]},
                      {"op": "slice.Tensor", "args": [T(idx), 1, 0, 10, 2]},
                      {"op": "gather", "args": [{"ref": "$0"}, 1, {"ref": "$1"}]}], "outputs": ["$2"]}
    r = server.post("/v1/run", body)
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), np.take_along_axis(a.T, idx[:, ::2], 1))


def test_gather_reports_the_first_bad_index(server, rng):
    """An index long enough to be split across threads, with bad values in two chunks: the message names the
    first in row-major order, whichever thread finds its own first."""
    n = 200_000
    idx = rng.integers(0, 1000, n)
    first, second = sorted(rng.choice(np.arange(20_000, n), 2, replace=False))
    idx[first], idx[second] = 1000 + int(rng.integers(0, 50)), -1 - int(rng.integers(0, 50))
    r = server.post("/v1/ops/gather", {"args": [R(rng, "float32", (1000,)), 0, T(idx)]})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["message"] == f"index {idx[first]} is out of bounds for dimension 0 with size 1000"


def test_put(server, rng):
    cases = []
    for dt in ALL:
        x = R(rng, dt, (3, 4))
        idx = T(rng.permutation(12)[:5] - 6)  # distinct, some negative
        dup = T(rng.integers(-12, 12, 7))
        cases += [("put", [x, idx, R(rng, dt, (5,))], {}),
                  ("put", [x, T(np.array([[1, 2], [3, 4]])), R(rng, dt, (4,))], {}),
                  ("put", [x, idx, R(rng, dt, (5,)), True], {}),
                  ("put", [x, T(np.zeros(0, np.int64)), R(rng, dt, (0,))], {}),
                  ("put", [R(rng, dt, ()), T(np.array([0, -1])), R(rng, dt, (2,)), True], {})]
        if dt not in ("float16", "bfloat16", "bool"):  # accumulation order of duplicates is torch's own
            cases.append(("put", [x, dup, R(rng, dt, (7,)), True], {}))
    x = R(rng, "float32", (3, 4))
    cases += [("put", [x, T(np.array([0, 12])), R(rng, "float32", (2,))], {}),
              ("put", [x, T(np.array([0, -13])), R(rng, "float32", (2,))], {}),
              ("put", [x, T(np.array([0, 1])), R(rng, "float32", (3,))], {}),
              ("put", [x, T(np.array([0, 1])), R(rng, "float64", (2,))], {}),
              ("put", [x, T(np.array([0, 1], np.int32)), R(rng, "float32", (2,))], {}),
              ("put", [R(rng, "float32", (0,)), T(np.array([0])), R(rng, "float32", (1,))], {})]
    check(server, cases, rtol=1e-5)


def test_put_with_duplicates_walks_torchs_order(server, rng):
    """Where an index repeats, put keeps the last write (accumulate: sums in order) in the order ATen's
    TensorIterator walks source and index: a strided source's memory order, an index's where source's
    strides tie or broadcast. Strided views through /v1/run, torch given the same views (torch_ref's
    "views"); 3 to 5 positions for 12 or 24 writes, so nearly every position is written several times."""
    views = {"t": (("transpose.int", [0, 1]), ["transpose", 0, 1]),
             "p": (("permute", [[2, 0, 1]]), ["permute", [2, 0, 1]]),
             "e": (("expand", [[3, 4]]), ["expand", [3, 4]])}
    # (source's base shape, its view, the index's shape as put sees it, its view: "t" transposes a base of
    # the reversed shape)
    layouts = [((3, 4), "t", (4, 3), None), ((3, 4), None, (3, 4), "t"), ((3, 4), "t", (3, 4), "t"),
               ((2, 3, 4), "p", (4, 2, 3), None), ((2, 3, 4), "p", (2, 3, 4), "p"),
               ((3, 1), "e", (3, 4), "t"), ((3, 4), "t", (12,), None)]
    cases = []
    for dt in ("int64", "float32", "float64"):
        for (sb, sv, ib, iv) in layouts:
            for acc in (False, True):
                n = int(np.prod(sb)) if sv != "e" else 12
                size = int(rng.integers(3, 6))
                src = (rng.standard_normal(sb) * 3).astype(dt) if dt != "int64" else rng.integers(-9, 10, sb)
                idx = rng.integers(-size, size, ib if iv != "t" else ib[::-1])
                assert idx.size == n
                cases.append((dt, src, sv, idx, iv, acc, R(rng, dt, (size,))))
    reqs = [{"op": "put", "args": [x, dict(T(idx), **({"views": [views[iv][1]]} if iv else {})),
                                   dict(T(src, dt), **({"views": [views[sv][1]]} if sv else {})), acc]}
            for dt, src, sv, idx, iv, acc, x in cases]
    bad = []
    for (dt, src, sv, idx, iv, acc, x), want in zip(cases, torch_ref(reqs)):
        steps = [{"op": views[iv][0][0], "args": [T(idx)] + views[iv][0][1]} if iv else
                 {"op": "clone", "args": [T(idx)]},
                 {"op": views[sv][0][0], "args": [T(src, dt)] + views[sv][0][1]} if sv else
                 {"op": "clone", "args": [T(src, dt)]},
                 {"op": "put", "args": [x, {"ref": "$0"}, {"ref": "$1"}, acc]}]
        r = server.post("/v1/run", {"steps": steps, "device": "cpu", "outputs": ["$2"]})
        assert r.status_code == 200 and "error" not in want, (r.text[:300], want)
        ndt = np.float32 if dt == "float32" else np.float64  # float32 printed shortest
        got, exp = np.array(r.json()["outputs"][0]["data"], ndt), np.array(want["value"], ndt)
        if not np.array_equal(got, exp):  # exact: the same writes, the same sums, in order
            bad.append(f"{dt} source base {src.shape} {sv}, index base {idx.shape} {iv}, accumulate={acc}: "
                       f"{got} vs torch {exp}")
    assert not bad, f"{len(bad)} of {len(cases)} differ:\n" + "\n".join(bad[:12])


def test_index_fill_int_tensor(server, rng):
    cases = []
    for dt in ALL:
        x = R(rng, dt, (3, 4))
        for vdt in ("float64", "int64", "bool"):
            cases.append(("index_fill.int_Tensor", [x, 1, T(np.array([0, -1])), R(rng, vdt, ())], {}))
        cases += [("index_fill.int_Tensor", [x, 0, T(np.array([2])), R(rng, dt, ())], {}),
                  ("index_fill.int_Tensor", [R(rng, dt, ()), 0, T(np.array([0])), R(rng, dt, ())], {})]
    x = R(rng, "float32", (3, 4))
    cases += [("index_fill.int_Tensor", [x, 0, T(np.array([0])), R(rng, "float32", (2,))], {}),
              ("index_fill.int_Tensor", [x, 0, T(np.array([3])), R(rng, "float32", ())], {}),
              ("index_fill.int_Tensor", [x, 2, T(np.array([0])), R(rng, "float32", ())], {}),
              ("index_fill.int_Tensor", [x, 0, T(np.array([0], np.int32)), R(rng, "float32", ())], {})]
    check(server, cases)


def test_index_copy_bounds_only_where_elements_move(server, rng):
    """ATen checks index_copy's indices inside its kernel loop, which never
    runs when one of self's other dims is empty: no error there, and the
    refusals elsewhere (index past the dim, an empty indexed dim)."""
    cases = []
    for dt in ("float32", "int64", "float16"):
        e = R(rng, dt, (0, 2, 3))
        cases += [("index_copy", [e, 1, T(np.array([2, 2])), R(rng, dt, (0, 2, 3))], {}),
                  ("index_copy", [e, -1, T(np.array([-1, 7, 3])), R(rng, dt, (0, 2, 3))], {}),
                  ("index_copy", [R(rng, dt, (2, 0)), 0, T(np.array([5])), R(rng, dt, (1, 0))], {}),
                  ("index_copy", [R(rng, dt, (0, 3)), 0, T(np.array([0])), R(rng, dt, (1, 3))], {}),
                  ("index_copy", [R(rng, dt, (2, 3)), 0, T(np.array([2])), R(rng, dt, (1, 3))], {}),
                  ("index_copy", [R(rng, dt, (2, 3)), 1, T(np.array([2, 0])), R(rng, dt, (2, 2))], {})]
    check(server, cases)


def test_round_decimals(server, rng):
    cases = []
    for dt in ALL:
        x = T(rand(rng, dt, (5, 6)) * (100 if dt in ("float32", "float64") else 1), dt)
        for d in (-2, -1, 0, 1, 2, 3):
            cases.append(("round.decimals", [x], {"decimals": d}))
    half = T(np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.125, 1.25, 25.0, 35.0, np.nan, np.inf]))
    for d in (0, 1, 2, -1):
        cases.append(("round.decimals", [half], {"decimals": d}))
    cases.append(("round.decimals", [T(np.zeros((0, 3), np.float32))], {"decimals": 2}))
    cases.append(("round.decimals", [T(np.float64(2.345))], {"decimals": 2}))
    check(server, cases, rtol=0)


def test_reflection_replication_pad(server, rng):
    cases = []
    for nd in (1, 2, 3):
        for kind in ("reflection", "replication"):
            op = f"{kind}_pad{nd}d"
            for dt in ALL:
                cases.append((op, [R(rng, dt, (2,) + (4,) * nd), [1, 2] * nd], {}))
            for shape in [(3,) + (4,) * nd, (2, 3) + (5,) * nd, (0, 2) + (4,) * nd]:
                x = R(rng, "float64", shape)
                cases += [(op, [x, [3, 0] + [1, 2] * (nd - 1)], {}), (op, [x, [-1, 2] * nd], {}),
                          (op, [x, [0, 0] * nd], {})]
            x = R(rng, "float32", (2,) + (4,) * nd)
            cases += [(op, [x, [4, 1] + [0, 0] * (nd - 1)], {}), (op, [x, [0, 0] * (nd - 1) + [1, 4]], {}),
                      (op, [x, [6, 1] * nd], {}), (op, [x, [-3, -3] + [0, 0] * (nd - 1)], {}),
                      (op, [x, [-2, -2] + [0, 0] * (nd - 1)], {}),
                      (op, [R(rng, "float32", (2, 0) + (4,) * nd), [1, 1] * nd], {}),
                      # a list of the wrong length: torch's reflection 1d/2d read the first pairs of a
                      # longer one (and past a shorter one); the others refuse either
                      (op, [x, [1] * (2 * nd + 2)], {})]
            if kind == "replication" or nd == 3:
                cases.append((op, [x, [1] * (2 * nd - 1)], {}))
            # every spatial output empty is refused, some of them empty is not
            cases += [(op, [x, [-2] * (2 * nd)], {}), (op, [x, [0, 0] * (nd - 1) + [-2, -2]], {})]
            if nd == 1 or kind == "replication":  # torch's reflection 2d/3d read past it as an IndexError
                cases.append((op, [R(rng, "float32", (4,) * nd), [1, 1] * nd], {}))
    check(server, cases)
    # a shorter list than reflection 1d/2d's pairs: torch reads past it (an answer that
    # varies between runs); the server refuses it as replication does
    for op, n in (("reflection_pad1d", 2), ("reflection_pad2d", 4)):
        r = server.post(f"/v1/ops/{op}", {"args": [R(rng, "float32", (2,) * (n // 2 + 1)), [0] * (n - 1)]})
        assert r.status_code == 400 and r.json()["error"]["message"] == f"padding size is expected to be {n}", r.text


def np_pad(x, pads, kind):
    """numpy's reference for torch's [left, right] * nd pads of the last dims (the last dim first), negative
    ones cropping: reflection is numpy's "reflect", replication its "edge"."""
    nd = len(pads) // 2
    width = [(0, 0)] * (x.ndim - nd) + [(max(pads[2 * k], 0), max(pads[2 * k + 1], 0)) for k in reversed(range(nd))]
    y = np.pad(x, width, mode="reflect" if kind == "reflection" else "edge")
    crop = [slice(None)] * (x.ndim - nd) + [slice(-min(pads[2 * k], 0), y.shape[x.ndim - nd + i] + min(pads[2 * k + 1], 0))
                                            for i, k in enumerate(reversed(range(nd)))]
    return y[tuple(crop)]


def test_pad_long_rows_many_rows_and_strided_inputs(server, rng):
    """cpu/pad.c's rows: a row's padded ends element by element, its middle in one copy when the input's
    last dim is unit-stride, rows across parallel tasks; every element equal to numpy's pad, in each
    element size torch takes (float16 in reflection_pad3d only), for an input whose last dim is strided
    (a transposed view) too"""
    for kind in ("reflection", "replication"):
        for dt in ("float32", "float64"):
            for shape, pads in (((3, 20011), [5, 7]), ((4, 8, 60, 70), [3, 3, 3, 3]), ((2, 3, 9, 40, 50), [2, 1, 0, 3, 4, 2]),
                                ((5, 300, 300), [-2, 4, 3, -1])):
                nd = len(pads) // 2
                x = rand(rng, dt, shape)
                r = server.post(f"/v1/ops/{kind}_pad{nd}d", {"args": [T(x, dt), pads]})
                assert r.status_code == 200, r.text[:300]
                got = from_json(r.json()["outputs"][0])
                np.testing.assert_array_equal(got, np_pad(x, pads, kind), err_msg=f"{kind} {dt} {shape} {pads}")
        if kind == "reflection":
            x = rand(rng, "float16", (2, 3, 9, 40, 50))
            r = server.post("/v1/ops/reflection_pad3d", {"args": [T(x, "float16"), [2, 1, 0, 3, 4, 2]]})
            assert r.status_code == 200, r.text[:300]
            np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), np_pad(x, [2, 1, 0, 3, 4, 2], kind))
        # the last dim strided: a transposed input takes the element-by-element path for the whole row
        x = rand(rng, "float32", (6, 200, 150))
        r = server.post("/v1/run", {"steps": [{"op": "transpose.int", "args": [T(x, "float32"), 1, 2]},
                                              {"op": f"{kind}_pad2d", "args": [{"ref": "$0"}, [4, 2, 3, 5]]}]})
        assert r.status_code == 200, r.text[:300]
        np.testing.assert_array_equal(from_json(r.json()["outputs"][0]),
                                      np_pad(x.transpose(0, 2, 1), [4, 2, 3, 5], kind), err_msg=kind)


def test_searchsorted_bucketize(server, rng):
    cases = []
    for dt in ALL:
        bd = np.sort(rand(rng, dt, (6,)).astype(np.float64)).astype(rand(rng, dt, (1,)).dtype)
        b = T(bd, dt)
        v = R(rng, dt, (3, 4))
        b2 = T(np.sort(rand(rng, dt, (3, 5)).astype(np.float64), axis=1).astype(rand(rng, dt, (1,)).dtype), dt)
        for right in (False, True):
            cases += [("searchsorted.Tensor", [b, v], {"right": right}),
                      ("searchsorted.Tensor", [b2, v], {"right": right, "out_int32": True}),
                      ("bucketize.Tensor", [v, b], {"right": right}),
                      ("searchsorted.Scalar", [b, 1], {"right": right}),
                      ("bucketize.Scalar", [2, b], {"right": right})]
        perm = rng.permutation(6)
        unsorted = np.asarray(rand(rng, dt, (6,)))
        cases += [("searchsorted.Tensor", [T(unsorted, dt), v], {"sorter": T(np.argsort(unsorted, kind="stable"))}),
                  ("searchsorted.Tensor", [b, v], {"side": "right"}),
                  ("searchsorted.Tensor", [b, R(rng, dt, ())], {}),
                  ("searchsorted.Tensor", [b, R(rng, dt, (0,))], {}),
                  ("searchsorted.Tensor", [T(bd[perm], dt), v], {"sorter": T(np.argsort(perm))})]
    f = T(np.array([1.0, 2.0, 2.0, 3.0, np.nan], np.float32))
    cases += [("searchsorted.Tensor", [f, T(np.array([2.0, np.nan, 0.5, 9.0], np.float32))], {}),
              ("searchsorted.Tensor", [f, T(np.array([2.0, np.nan, 0.5, 9.0], np.float32))], {"right": True}),
              ("searchsorted.Tensor", [T(np.array([1, 3, 5, 7])), T(np.array([2.5, 3.0]))], {}),
              ("searchsorted.Scalar", [T(np.array([1, 3, 5, 7])), 3.5], {}),
              ("searchsorted.Scalar", [T(np.array([1.0, 3.0], np.float32)), 3], {}),
              # a Scalar is a wrapped number: cast to the boundaries' int32 (-1), not compared as int64
              ("bucketize.Scalar", [2**63 - 1, T(np.array([1, 1], np.int32))], {}),
              ("searchsorted.Scalar", [T(np.array([-3, 0, 5], np.int8)), 300], {}),
              # so is a 0-dim input of a wider dtype (result_type: the boundaries' dtype stands)
              ("searchsorted.Tensor", [T(np.array([0, 2, 3, 200], np.uint8)), T(np.int32(-9))], {}),
              ("searchsorted.Tensor", [T(np.array([-3, 0, 5], np.int8)), T(np.int64(300))], {"right": True}),
              ("bucketize.Tensor", [T(np.int64(-1)), T(np.array([0, 7, 255], np.uint8))], {}),
              ("searchsorted.Tensor", [T(np.array([0, 2, 3, 200], np.uint8)), T(np.array([-9, 250], np.int32))], {}),
              ("bucketize.Tensor", [T(np.array([True])), T(np.array([1, 3]))], {}),
              ("searchsorted.Tensor", [T(np.array([True, False])), T(np.array([True]))], {}),
              ("searchsorted.Tensor", [T(np.int64(3)), T(np.array([3]))], {}),
              ("searchsorted.Tensor", [T(np.arange(4).reshape(2, 2)), T(np.int64(3))], {}),
              ("searchsorted.Tensor", [T(np.arange(4).reshape(2, 2)), T(np.array([[3]]))], {}),
              ("searchsorted.Tensor", [T(np.arange(4)), T(np.array([3]))], {"side": "middle"}),
              ("searchsorted.Tensor", [T(np.arange(4)), T(np.array([3]))], {"side": "left", "right": True}),
              ("searchsorted.Tensor", [T(np.arange(4)), T(np.array([3]))], {"sorter": T(np.arange(3))}),
              ("searchsorted.Tensor", [T(np.arange(4)), T(np.array([3]))], {"sorter": T(np.arange(4, dtype=np.int32))}),
              ("bucketize.Tensor", [T(np.array([3])), T(np.arange(4).reshape(2, 2))], {}),
              ("searchsorted.Tensor", [T(np.zeros(0, np.float32)), T(np.array([1.0], np.float32))], {})]
    # long inputs (split across threads) into tie-heavy boundaries, NaNs among both, one row and one per row
    for dt in ("float32", "float64", "int64", "int32"):
        bl = np.sort(rng.integers(-50, 50, 1000)).astype(dt)
        ql = rng.integers(-60, 60, 20000).astype(dt)
        rows = np.sort(rng.integers(-50, 50, (4, 300)), axis=1).astype(dt)
        qr = rng.integers(-60, 60, (4, 5000)).astype(dt)
        if dt.startswith("float"):
            bl[-3:], rows[1, -2:] = np.nan, np.nan
            ql[rng.random(ql.size) < 0.01] = np.nan
        for right in (False, True):
            cases += [("searchsorted.Tensor", [T(bl), T(ql)], {"right": right}),
                      ("searchsorted.Tensor", [T(rows), T(qr)], {"right": right, "out_int32": right}),
                      ("bucketize.Tensor", [T(ql), T(bl)], {"right": right})]
    check(server, cases)


def test_long_repeat_interleave_equals_numpy(server, rng):
    """repeat_interleave.Tensor's writes split across the pool (cpu/unique.c): 100,003 repeats of 0..19
    (zeros among them), int64 and int32, contiguous and every other element of a longer tensor: the
    result equal to numpy's repeat of the indices"""
    for rdt in ("int64", "int32"):
        r = rng.integers(0, 20, 100_003).astype(rdt)
        want = np.repeat(np.arange(r.size), r)
        res = server.post("/v1/ops/repeat_interleave.Tensor", {"args": [T(r, rdt)]})
        assert res.status_code == 200, res.text[:300]
        got = from_json(res.json()["outputs"][0])
        assert got.dtype == np.dtype(rdt) and np.array_equal(got, want), rdt
        r2 = rng.integers(0, 20, 2 * 50_001).astype(rdt)
        res = server.post("/v1/run", {"steps": [{"op": "slice.Tensor", "args": [T(r2, rdt), 0, 0, r2.size, 2]},
                                                {"op": "repeat_interleave.Tensor", "args": [{"ref": "$0"}]}]})
        assert res.status_code == 200, res.text[:300]
        assert np.array_equal(from_json(res.json()["outputs"][0]), np.repeat(np.arange(50_001), r2[::2])), rdt


def test_repeat_interleave(server, rng):
    cases = []
    for rdt in ("int64", "int32", "int16", "float32", "bool"):
        r = T(rng.integers(0, 4, 5).astype(rdt if rdt != "bool" else "int64"), rdt)
        cases += [("repeat_interleave.Tensor", [r], {}), ("repeat_interleave.Tensor", [T(np.zeros(0, rdt))], {})]
    cases += [("repeat_interleave.Tensor", [T(np.array([1, -1, 2]))], {}),
              ("repeat_interleave.Tensor", [T(np.int64(2))], {}),
              ("repeat_interleave.Tensor", [T(np.array([[2]]))], {}),
              ("repeat_interleave.Tensor", [T(np.array([1, 0, 2]))], {"output_size": 3})]
    for dt in ALL:
        x = R(rng, dt, (3, 4))
        cases += [("repeat_interleave.self_int", [x, 2], {}), ("repeat_interleave.self_int", [x, 3, 1], {}),
                  ("repeat_interleave.self_int", [x, 0, -2], {}),
                  ("repeat_interleave.self_Tensor", [x, T(rng.integers(0, 3, 3))], {"dim": 0}),
                  ("repeat_interleave.self_Tensor", [x, T(np.array([2]))], {"dim": 1}),
                  ("repeat_interleave.self_Tensor", [x, T(np.int64(2))], {}),
                  ("repeat_interleave.self_Tensor", [R(rng, dt, ()), T(np.array([3]))], {}),
                  ("repeat_interleave.self_int", [R(rng, dt, (0, 2)), 2, 1], {})]
    x = R(rng, "float32", (3, 4))
    cases += [("repeat_interleave.self_int", [x, -1], {}),
              ("repeat_interleave.self_Tensor", [x, T(np.array([1, 2]))], {"dim": 0}),
              ("repeat_interleave.self_Tensor", [x, T(np.array([[1, 2, 1]]))], {"dim": 0}),
              ("repeat_interleave.self_Tensor", [x, T(np.array([1, 2, 1], np.int32))], {"dim": 0}),
              ("repeat_interleave.self_int", [x, 2, 2], {}),
              # a dim on a 0-dim self: ATen asks for its size there, which it has none of
              ("repeat_interleave.self_int", [R(rng, "bfloat16", ()), 1, -1], {}),
              ("repeat_interleave.self_Tensor", [R(rng, "float32", ()), T(np.array([2]))], {"dim": 0})]
    check(server, cases)


def test_unique_consecutive(server, rng):
    cases = []
    for dt in ALL:
        v = np.repeat(rand(rng, dt, (6,)), rng.integers(1, 3, 6))
        x = T(v, dt)
        m = np.repeat(np.repeat(rand(rng, dt, (3, 2)), [2, 1, 2], axis=0), [1, 2], axis=1)
        for inv, cnt in ((False, False), (True, False), (False, True), (True, True)):
            cases.append(("unique_consecutive", [x, inv, cnt], {}))
        for d in (0, 1, -1):
            cases.append(("unique_consecutive", [T(m, dt), True, True, d], {}))
        cases += [("unique_consecutive", [T(m, dt), True, True], {}),
                  ("unique_consecutive", [R(rng, dt, ()), True, True], {}),
                  ("unique_consecutive", [T(np.zeros(0), dt), True, True], {}),
                  ("unique_consecutive", [T(np.zeros((0, 3)), dt), True, True, 0], {})]
    # long runs (the contiguous typed path): zeros of both signs in one run, each NaN a run of its own
    for dt in ("float32", "float64", "int64", "int32", "int16", "uint8", "bool"):
        v = np.repeat(rand(rng, dt, (3000,)), rng.integers(1, 4, 3000))[:5000]
        if dt.startswith("float"):
            v[rng.random(v.size) < 0.02] = np.nan
            v[rng.random(v.size) < 0.05] = 0.0
            v[(v == 0) & (rng.random(v.size) < 0.5)] = -0.0
        for inv, cnt in ((False, False), (True, False), (False, True), (True, True)):
            cases.append(("unique_consecutive", [T(v.reshape(2, -1) if inv else v, dt), inv, cnt], {}))
    # more elements than one parallel block (65536): runs that cross block boundaries, with the
    # values alone (their own loop) and with inverse and counts
    for dt in ("float32", "int64"):
        v = np.repeat(rand(rng, dt, (100_000,)), rng.integers(1, 5, 100_000))[:200_000]
        for both in (True, False):
            cases.append(("unique_consecutive", [T(v, dt), both, both], {}))
    nan = T(np.array([0.0, -0.0, np.nan, np.nan, 1.0, 1.0]))
    cases += [("unique_consecutive", [nan, True, True], {}),
              ("unique_consecutive", [T(np.array([[0.0, np.nan], [0.0, np.nan]])), True, True, 0], {}),
              ("unique_consecutive", [T(np.zeros((0, 3))), True, True, 1], {}),
              ("unique_consecutive", [T(np.float32(3)), True, True, 0], {}),
              ("unique_consecutive", [T(np.ones((1, 2))), True, True, 2], {})]
    check(server, cases, outs=3)
