"""Distances, folds and max_unpool (kernels/shape_fold.c + cpu/fold.c,
kernels/shape_dist.c + cpu/dist.c, composite/dist.c): im2col / col2im (what
F.unfold / F.fold call), max_unpool2d/3d, _cdist_forward / _cdist_backward,
_euclidean_dist and the composite cdist, _pdist_forward / _pdist_backward and
pdist, against PyTorch 1.13 on fresh random inputs: odd sizes, dilation,
padding and stride, batch 1 and 0, unbatched inputs, broadcast batch dims,
every dtype torch's CPU takes (and refuses), strided inputs (through
/v1/run), and refusals that must carry torch's message."""

import numpy as np

from conftest import assert_bits_as_torch, from_json, torch_ref
from test_scatter_pad_search import R, T, check, rand

FLOATS = ("float32", "float64", "float16", "bfloat16")


class Wire:
    """The server as check() sees it, sending p=inf as JSON's "Infinity" (torch_ref's JSON keeps a float)."""

    def __init__(self, server):
        self.server = server

    def post(self, url, body):
        def fix(v):
            if isinstance(v, float) and np.isinf(v):
                return "Infinity" if v > 0 else "-Infinity"
            if isinstance(v, list):
                return [fix(x) for x in v]
            if isinstance(v, dict) and "dtype" not in v:
                return {k: fix(x) for k, x in v.items()}
            return v
        return self.server.post(url, fix(body))


def test_im2col(server, rng):
    cases = []
    for dt in FLOATS + ("int64",):
        cases.append(("im2col", [R(rng, dt, (2, 3, 7, 6)), [3, 2], [1, 1], [1, 0], [2, 1]], {}))
    for shape in [(1, 2, 9, 11), (0, 3, 5, 5), (3, 8, 7), (2, 1, 5, 13)]:
        x = R(rng, "float64", shape)
        for k, d, p, s in [([3, 3], [1, 1], [0, 0], [1, 1]), ([2, 3], [2, 1], [1, 2], [2, 3]),
                           ([1, 1], [1, 1], [0, 0], [1, 1]), ([3, 1], [1, 3], [2, 0], [1, 2]), (3, 1, 1, 2)]:
            cases.append(("im2col", [x, k, d, p, s], {}))
    x = R(rng, "float32", (2, 3, 5, 5))
    cases += [("im2col", [x, [0, 3], [1, 1], [0, 0], [1, 1]], {}), ("im2col", [x, [3, 3], [0, 1], [0, 0], [1, 1]], {}),
              ("im2col", [x, [3, 3], [1, 1], [-1, 0], [1, 1]], {}), ("im2col", [x, [3, 3], [1, 1], [0, 0], [1, 0]], {}),
              ("im2col", [x, [3, 3], [1, 1], [0, -1], [1, 0]], {}),
              ("im2col", [x, [3], [1, 1], [0, 0], [1, 1]], {}), ("im2col", [x, [3, 3], [1, 1, 1], [0, 0], [1, 1]], {}),
              ("im2col", [x, [3, 3], [1, 1], [0], [1, 1]], {}), ("im2col", [x, [3, 3], [1, 1], [0, 0], [1, 1, 1]], {}),
              ("im2col", [x, [7, 3], [1, 1], [0, 0], [1, 1]], {}), ("im2col", [x, [3, 3], [3, 1], [0, 0], [1, 1]], {}),
              ("im2col", [R(rng, "float32", (5, 5)), [3, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("im2col", [R(rng, "float32", (5,)), [3, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("im2col", [R(rng, "float32", (1, 2, 5, 5, 5)), [3, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("im2col", [R(rng, "float32", (2, 0, 5, 5)), [3, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("im2col", [R(rng, "float32", (0, 5, 5)), [3, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("im2col", [R(rng, "float32", (2, 2, 5, 0)), [3, 3], [1, 1], [0, 0], [1, 1]], {})]
    check(server, cases[:5], rtol=1e-2)
    check(server, cases[5:])


def test_col2im(server, rng):
    cases = []
    for dt in FLOATS + ("int64",):
        cases.append(("col2im", [R(rng, dt, (2, 12, 12)), [5, 7], [2, 2], [1, 1], [0, 0], [2, 2]], {}))
    for os, k, d, p, s in [([5, 5], [3, 3], [1, 1], [0, 0], [1, 1]), ([7, 6], [2, 3], [2, 1], [1, 2], [2, 3]),
                           ([9, 4], [3, 1], [1, 3], [2, 0], [1, 2]), ([4, 4], [1, 1], [1, 1], [0, 0], [1, 1])]:
        nb = [(os[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
        for lead in [(2,), (1,), (0,), ()]:
            shape = lead + (3 * k[0] * k[1], nb[0] * nb[1])
            cases.append(("col2im", [R(rng, "float64", shape), os, k, d, p, s], {}))
    c = R(rng, "float32", (2, 27, 9))
    cases += [("col2im", [c, [5, 5], [0, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("col2im", [c, [5, 5], [3, 3], [0, 1], [0, 0], [0, 1]], {}),
              ("col2im", [c, [5, 5], [3, 3], [1, 1], [0, -1], [1, 1]], {}),
              ("col2im", [c, [5], [3, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("col2im", [c, [5, 5], [3, 3, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("col2im", [R(rng, "float32", (27,)), [5, 5], [3, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("col2im", [R(rng, "float32", (1, 27, 9, 1)), [5, 5], [3, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("col2im", [R(rng, "float32", (2, 0, 9)), [5, 5], [3, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("col2im", [R(rng, "float32", (2, 26, 9)), [5, 5], [3, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("col2im", [R(rng, "float32", (2, 27, 8)), [5, 5], [3, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("col2im", [R(rng, "float32", (2, 27, 1)), [1, 1], [3, 3], [1, 1], [0, 0], [1, 1]], {}),
              ("col2im", [R(rng, "float32", (2, 9, 9)), [0, 5], [3, 3], [1, 1], [2, 0], [1, 1]], {})]
    check(server, cases[:5], rtol=1e-2)
    check(server, cases[5:])


def unpool_args(rng, dt, shape, nd, out):
    """A max-pool-like (values, indices) pair: distinct flat indices per plane into out."""
    lead, inner = shape[:-nd], int(np.prod(shape[-nd:]))
    total = int(np.prod(out))
    planes = int(np.prod(lead)) if lead else 1
    ix = np.array([rng.permutation(total)[:inner] for _ in range(planes)], np.int64).reshape(shape)
    return R(rng, dt, shape), T(ix)


def test_max_unpool(server, rng):
    cases = []
    for dt in FLOATS + ("int64",):
        x, i = unpool_args(rng, dt, (2, 3, 3, 3), 2, (6, 7))
        cases.append(("max_unpool2d", [x, i, [6, 7]], {}))
        x, i = unpool_args(rng, dt, (2, 2, 2, 3, 3), 3, (3, 5, 4))
        cases.append(("max_unpool3d", [x, i, [3, 5, 4], [2, 2, 2], [0, 0, 0]], {}))
    for shape, out in [((1, 2, 4, 5), (8, 11)), ((0, 3, 2, 2), (4, 4)), ((3, 5, 4), (9, 5)), ((2, 1, 1, 1), (1, 1))]:
        x, i = unpool_args(rng, "float64", shape, 2, out)
        cases.append(("max_unpool2d", [x, i, list(out)], {}))
    for shape, out in [((1, 2, 2, 3, 2), (4, 5, 3)), ((0, 2, 2, 2, 2), (3, 3, 3)), ((3, 2, 2, 3), (2, 5, 6))]:
        x, i = unpool_args(rng, "float32", shape, 3, out)
        cases.append(("max_unpool3d", [x, i, list(out), [1, 2, 3], [1, 0, 1]], {}))
    x, i = unpool_args(rng, "float32", (2, 3, 3, 3), 2, (6, 6))
    bad = np.array(i["data"]).reshape(2, 3, 3, 3)
    bad[1, 2, 0, 1] = 36
    neg = bad.copy()
    neg[1, 2, 0, 1] = -3
    x3, i3 = unpool_args(rng, "float32", (2, 2, 2, 3, 3), 3, (4, 6, 6))
    bad3 = np.array(i3["data"]).reshape(2, 2, 2, 3, 3)
    bad3[0, 1, 1, 2, 2] = 400
    cases += [("max_unpool2d", [x, T(bad), [6, 6]], {}), ("max_unpool2d", [x, T(neg), [6, 6]], {}),
              ("max_unpool2d", [x, T(np.zeros((2, 3, 3, 3), np.int32)), [6, 6]], {}),
              ("max_unpool2d", [x, i, [6, 6, 6]], {}), ("max_unpool2d", [x, i, [0, 6]], {}),
              ("max_unpool2d", [x, i, [-1, 6]], {}),
              ("max_unpool2d", [R(rng, "float32", (3, 3)), T(np.zeros((3, 3), np.int64)), [6, 6]], {}),
              ("max_unpool2d", [x, T(np.zeros((1, 3, 3, 3), np.int64)), [6, 6]], {}),
              ("max_unpool2d", [R(rng, "float32", (2, 0, 3, 3)), T(np.zeros((2, 0, 3, 3), np.int64)), [6, 6]], {}),
              ("max_unpool3d", [x3, T(bad3), [4, 6, 6], [2, 2, 2], [0, 0, 0]], {}),
              ("max_unpool3d", [x3, i3, [1, 1, 1], [2, 2, 2], [0, 0, 0]], {}),
              ("max_unpool3d", [x3, T(np.zeros((2, 2, 2, 3, 3), np.int32)), [4, 6, 6], [2, 2, 2], [0, 0, 0]], {}),
              ("max_unpool3d", [x, i, [4, 6, 6], [2, 2, 2], [0, 0, 0]], {}),
              ("max_unpool3d", [x3, i3, [4, 6], [2, 2, 2], [0, 0, 0]], {}),
              ("max_unpool3d", [x3, i3, [4, 6, 6], [2, 2], [0, 0, 0]], {}),
              ("max_unpool3d", [x3, i3, [4, 6, 6], [2, 2, 2], [0, 0]], {}),
              ("max_unpool3d", [x3, i3, [4, 6, 6], [2, 0, 2], [0, 0, 0]], {})]
    check(server, cases)
    # bad indices in two planes (and twice in one): torch names the last of all in flat order
    two = bad.copy()
    two[0, 1, 2, 2] = 50
    two[0, 0, 0, 0] = -1
    two[1, 0, 1, 1] = 41
    check(server, [("max_unpool2d", [x, T(two), [6, 6]], {})])
    # each plane's zeros are written by the kernel (the output is allocated
    # unzeroed): float32 and float64 bits, -0.0 and larger planes included
    cases = []
    for dt, shape, out in [("float32", (2, 4, 7, 7), (14, 14)), ("float64", (3, 5, 4), (9, 5)),
                           ("float32", (1, 1, 1, 1), (3, 3))]:
        x, i = unpool_args(rng, dt, shape, 2, out)
        x["data"][0] = -0.0
        cases.append(("max_unpool2d", [x, i, list(out)], {}))
    assert_bits_as_torch(server, cases)


def test_fold_strided(server, rng):
    """Transposed (non-contiguous) inputs through /v1/run."""
    runs, refs = [], []
    for op, shape, rest in [("im2col", (2, 5, 7, 3), [[2, 3], [1, 2], [1, 0], [2, 1]])]:
        a = rand(rng, "float32", shape)
        body = {"steps": [{"op": "transpose.int", "args": [T(a), 1, -1]},
                          {"op": op, "args": [{"ref": "$0"}] + rest}],
                "outputs": ["$1"]}
        r = server.post("/v1/run", body)
        assert r.status_code == 200, r.text
        runs += [from_json(o) for o in r.json()["outputs"]]
        refs.append({"op": op, "args": [T(np.ascontiguousarray(np.swapaxes(a, 1, -1)))] + rest, "out": 0})
    a = rand(rng, "float64", (2, 6, 12))  # transposed: [2, 12, 6], 12 = 3 * 2 * 2 rows, 6 = 2 * 3 blocks
    rest = [[5, 7], [2, 2], [1, 1], [0, 0], [2, 2]]
    body = {"steps": [{"op": "transpose.int", "args": [T(a), 1, 2]}, {"op": "col2im", "args": [{"ref": "$0"}] + rest}],
            "outputs": ["$1"]}
    r = server.post("/v1/run", body)
    assert r.status_code == 200, r.text
    runs += [from_json(o) for o in r.json()["outputs"]]
    refs.append({"op": "col2im", "args": [T(np.ascontiguousarray(np.swapaxes(a, 1, 2)))] + rest, "out": 0})
    for g, w in zip(runs, torch_ref(refs)):
        np.testing.assert_allclose(g, np.array(w["value"]).reshape(w["shape"]), rtol=1e-6, atol=1e-6)


def test_cdist(server, rng):
    cases, loose = [], []
    for p in (0.0, 1.0, 2.0, float("inf"), 0.5, 1.5, 3.0):
        for s1, s2 in [((5, 3), (4, 3)), ((1, 7), (6, 7)), ((2, 1, 4, 5), (3, 6, 5)), ((3, 0, 4), (3, 2, 4))]:
            cases.append(("cdist", [R(rng, "float64", s1), R(rng, "float64", s2), p], {}))
            cases.append(("_cdist_forward", [R(rng, "float32", s1), R(rng, "float32", s2), p, None], {}))
    # the matrix-product path: more than 25 rows, or compute_mode 1; 2 forbids it
    for s1, s2, mode in [((30, 5), (7, 5), None), ((4, 5), (27, 5), None), ((3, 4), (2, 4), 1),
                         ((2, 30, 3), (1, 9, 3), None), ((40, 6), (26, 6), 2)]:
        loose.append(("cdist", [R(rng, "float64", s1), R(rng, "float64", s2), 2.0, mode], {}))
        loose.append(("_cdist_forward", [R(rng, "float32", s1), R(rng, "float32", s2), 2.0, mode], {}))
    loose.append(("_euclidean_dist", [R(rng, "float64", (2, 6, 4)), R(rng, "float64", (1, 5, 4))], {}))
    x, y = R(rng, "float32", (4, 3)), R(rng, "float32", (5, 3))
    cases += [("cdist", [R(rng, dt, (4, 3)), R(rng, dt, (5, 3)), 1.0], {}) for dt in ("bfloat16", "float16", "int64")]
    cases += [("cdist", [x, R(rng, "float64", (5, 3))], {}), ("cdist", [R(rng, "float32", (3,)), y], {}),
              ("cdist", [x, R(rng, "float32", (3,))], {}), ("cdist", [x, R(rng, "float32", (5, 4))], {}),
              ("cdist", [x, R(rng, "int32", (5, 3))], {}), ("cdist", [x, y, -1.0], {}),
              ("_cdist_forward", [x, y, 2.0, 3], {}), ("cdist", [x, y, 1.0, 3], {}), ("cdist", [x, y, 2.0, -1], {}),
              ("cdist", [R(rng, "float32", (2, 4, 3)), R(rng, "float32", (3, 5, 3))], {}),
              ("cdist", [R(rng, "float32", (0, 3)), y], {}), ("cdist", [R(rng, "float32", (4, 0)), R(rng, "float32", (5, 0))], {}),
              ("cdist", [R(rng, "bfloat16", (4, 0)), R(rng, "bfloat16", (5, 0)), 1.0], {}),
              ("cdist", [R(rng, "float32", (30, 3)), R(rng, "float64", (5, 3))], {}),
              ("_euclidean_dist", [R(rng, "float32", (3,)), R(rng, "float32", (3,))], {}),
              ("_euclidean_dist", [R(rng, "int64", (3,)), R(rng, "int64", (1, 3))], {}),
              ("_euclidean_dist", [R(rng, "float16", (2, 3)), R(rng, "float16", (4, 3))], {})]
    check(Wire(server), cases, rtol=1e-5)
    check(server, loose, rtol=1e-3)
    # bfloat16 goes through the matrix product (torch's CPU has no direct bfloat16 kernel)
    check(server, [("cdist", [R(rng, "bfloat16", (30, 4)), R(rng, "bfloat16", (6, 4))], {})], rtol=5e-2)


def test_cdist_backward(server, rng):
    cases = []
    for p in (0.0, 1.0, 2.0, float("inf"), 0.5, 1.5, 3.0):
        for s1, s2 in [((5, 3), (4, 3)), ((2, 1, 4, 5), (3, 6, 5))]:
            a, b = rand(rng, "float64", s1), rand(rng, "float64", s2)
            out = np.broadcast_shapes(s1[:-2], s2[:-2]) + (s1[-2], s2[-2])
            d = np.abs(rng.standard_normal(out)) + 0.5
            cases.append(("_cdist_backward", [T(rng.standard_normal(out)), T(a), T(b), p, T(d)], {}))
    check(Wire(server), cases, rtol=1e-6)
    cases = []
    a, b = R(rng, "float32", (4, 3)), R(rng, "float32", (5, 3))
    cases += [("_cdist_backward", [R(rng, "float32", (4, 5)), R(rng, "float32", (4, 0)), R(rng, "float32", (5, 0)), 1.0,
                                   R(rng, "float32", (4, 5))], {}),
              ("_cdist_backward", [R(rng, "bfloat16", (4, 5)), R(rng, "bfloat16", (4, 3)), R(rng, "bfloat16", (5, 3)), 1.0,
                                   R(rng, "bfloat16", (4, 5))], {})]
    check(server, cases, rtol=1e-6)


def test_pdist(server, rng):
    cases = []
    for p in (0.0, 1.0, 2.0, float("inf"), 0.5, 1.5, 3.0):
        for shape in [(5, 3), (1, 4), (2, 7), (9, 1), (4, 0), (0, 3)]:
            cases.append(("pdist", [R(rng, "float64", shape), p], {}))
        cases.append(("_pdist_forward", [R(rng, "float32", (6, 5)), p], {}))
        a = rand(rng, "float64", (5, 3))
        cases.append(("_pdist_backward", [T(rng.standard_normal(10)), T(a), p, T(np.abs(rng.standard_normal(10)) + .5)],
                      {}))
    # a NaN at p = inf: pdist's vectorised max keeps it, cdist's std::max(agg, NaN) drops it
    for dt in ("float32", "float64"):
        for m in (3, 9, 20):
            a = rand(rng, dt, (4, m))
            a[1, int(rng.integers(0, m))] = np.nan
            cases += [("_pdist_forward", [T(a), float("inf")], {}), ("_cdist_forward", [T(a), T(a), float("inf"), None], {})]
    x = R(rng, "float32", (4, 3))
    cases += [("pdist", [R(rng, dt, (4, 3))], {}) for dt in ("bfloat16", "float16", "int64")]
    cases += [("pdist", [R(rng, "float32", (3,))], {}), ("pdist", [R(rng, "float32", (2, 3, 4))], {}),
              ("pdist", [x, -1.0], {}), ("_pdist_forward", [R(rng, "float32", (3,)), 2.0], {}),
              ("_pdist_forward", [R(rng, "int64", (3, 2)), 2.0], {}), ("_pdist_forward", [x, -1.0], {}),
              ("_pdist_forward", [R(rng, "int64", (1, 2)), 2.0], {}),
              ("_pdist_backward", [R(rng, "bfloat16", (6,)), R(rng, "bfloat16", (4, 3)), 2.0, R(rng, "bfloat16", (6,))], {})]
    check(Wire(server), cases, rtol=1e-5)


def test_dist_float32_long_rows(server, rng):
    """float32 p = 1 and 2 on the AVX-512 strips: rows of distances in blocks of 64, then of 16, then a
    masked tail (pdist's row i has n - 1 - i distances, so every tail length occurs); and operands whose
    transposed rows are padded off a multiple of 4 KiB."""
    cases = []
    for p in (1.0, 2.0):
        for shape in [(150, 7), (67, 64), (17, 3)]:
            cases.append(("_pdist_forward", [R(rng, "float32", shape), p], {}))
        for n2 in (64, 130, 200):
            # compute_mode 2: never the matrix-product path
            cases.append(("_cdist_forward", [R(rng, "float32", (5, 9)), R(rng, "float32", (n2, 9)), p, 2], {}))
        cases.append(("_cdist_forward", [R(rng, "float32", (2, 3, 33)), R(rng, "float32", (2, 81, 33)), p, 2], {}))
        # rows of 4 KiB (1024 float32, 512 float64): the transposed operand is padded by a cache line
        cases.append(("_pdist_forward", [R(rng, "float32", (1024, 3)), p], {}))
        cases.append(("_pdist_forward", [R(rng, "float64", (512, 2)), p], {}))
        cases.append(("_cdist_forward", [R(rng, "float32", (2, 4, 5)), R(rng, "float32", (2, 1024, 5)), p, 2], {}))
        cases.append(("_cdist_forward", [R(rng, "float64", (3, 5)), R(rng, "float64", (512, 5)), p, 2], {}))
    check(Wire(server), cases, rtol=1e-5)


def test_dist_strided(server, rng):
    """Transposed inputs through /v1/run (cdist reads any layout; pdist's composite makes it contiguous)."""
    a, b = rand(rng, "float64", (3, 7)), rand(rng, "float64", (5, 3))
    runs, refs = [], []
    for op, args, ref in [("cdist", [{"ref": "$0"}, T(b), 1.5], [T(np.ascontiguousarray(a.T)), T(b), 1.5]),
                          ("pdist", [{"ref": "$0"}, 2.0], [T(np.ascontiguousarray(a.T)), 2.0])]:
        body = {"steps": [{"op": "transpose.int", "args": [T(a), 0, 1]}, {"op": op, "args": args}], "outputs": ["$1"]}
        r = server.post("/v1/run", body)
        assert r.status_code == 200, r.text
        runs += [from_json(o) for o in r.json()["outputs"]]
        refs.append({"op": op, "args": ref, "out": 0})
    body = {"steps": [{"op": "transpose.int", "args": [T(a), 0, 1]}, {"op": "_pdist_forward", "args": [{"ref": "$0"}, 2.0]}],
            "outputs": ["$1"]}
    r = server.post("/v1/run", body)
    assert r.status_code == 400 and "_pdist_forward requires contiguous input" in r.text
    for g, w in zip(runs, torch_ref(refs)):
        np.testing.assert_allclose(g, np.array(w["value"]).reshape(w["shape"]), rtol=1e-10, atol=1e-12)


def test_cdist_pdist_against_float64(server, rng):
    """float32 results against a float64 numpy reference: the direct kernels within float32 rounding, the
    matrix-product path (more than 25 rows) within its cancellation error, no worse than torch's own."""
    runs = []
    for s1, s2 in [((40, 16), (33, 16)), ((3, 30, 5), (1, 7, 5)), ((6, 9), (5, 9))]:
        a, b = rand(rng, "float32", s1), rand(rng, "float32", s2)
        diff = a.astype(np.float64)[..., :, None, :] - b.astype(np.float64)[..., None, :, :]
        for p in (1.0, 2.0, 3.0):
            ref = (np.abs(diff) ** p).sum(-1) ** (1 / p)
            r = server.post("/v1/ops/cdist", {"args": [T(a), T(b), p]})
            assert r.status_code == 200, r.text
            mm = p == 2.0 and max(s1[-2], s2[-2]) > 25
            runs.append((s1, s2, p, mm, ref, from_json(r.json()["outputs"][0]), [T(a), T(b), p]))
    wants = torch_ref([{"op": "cdist", "args": args} for *_, args in runs])
    for (s1, s2, p, mm, ref, got, _), want in zip(runs, wants):
        theirs = np.array(want["value"]).reshape(want["shape"])
        err, terr = np.abs(got - ref).max(), np.abs(theirs - ref).max()
        assert err <= (2e-3 if mm else 2e-5) * max(1.0, np.abs(ref).max()), (s1, s2, p, err)
        assert err <= 4 * terr + 1e-5 * np.abs(ref).max(), (s1, s2, p, err, terr)
    x = rand(rng, "float32", (37, 11))
    d = x.astype(np.float64)[:, None, :] - x.astype(np.float64)[None, :, :]
    iu = np.triu_indices(37, 1)
    for p in (1.0, 2.0, 0.5):
        ref = ((np.abs(d) ** p).sum(-1) ** (1 / p))[iu]
        r = server.post("/v1/ops/pdist", {"args": [T(x), p]})
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(from_json(r.json()["outputs"][0]), ref, rtol=2e-5, atol=1e-6)


def test_dist_backward_many_rows(server, rng):
    """_cdist_backward and _pdist_backward over many rows and columns (cpu/dist.c: one loop per kind of
    distance; pdist's column strips of 16, a short last one, row i's strip summed in registers and
    stored once): p = 1 and p = 2 every bit as torch's (each gradient element adds its terms in torch's
    order), the other p within rounding; float32 and float64; zero distances among them."""
    exact, loose = [], []
    for dt in ("float32", "float64"):
        for p in (1.0, 2.0, 1.5, 0.0, float("inf")):
            a, b = rand(rng, dt, (60, 37)), rand(rng, dt, (50, 37))
            d = (np.abs(rng.standard_normal((60, 50))) + 0.5).astype(dt)
            d[rng.integers(0, 60, 20), rng.integers(0, 50, 20)] = 0  # a zero distance's gradient is zero
            (exact if p in (1.0, 2.0) else loose).append(
                ("_cdist_backward", [T(rng.standard_normal((60, 50)).astype(dt)), T(a), T(b), p, T(d)], {}))
            x = rand(rng, dt, (70, 40))
            k = 70 * 69 // 2
            dp = (np.abs(rng.standard_normal(k)) + 0.5).astype(dt)
            dp[rng.integers(0, k, 30)] = 0
            (exact if p in (1.0, 2.0) else loose).append(
                ("_pdist_backward", [T(rng.standard_normal(k).astype(dt)), T(x), p, T(dp)], {}))
    assert_bits_as_torch(server, exact)
    check(Wire(server), loose, rtol=1e-5)
