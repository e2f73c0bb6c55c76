"""The pooling operators (kernels/shape_pool.c, cpu/pool.c, composite/pool.c):
max_pool2d/3d_with_indices, avg_pool2d/3d, _adaptive_avg_pool2d/3d,
adaptive_max_pool2d/3d, their _backward ops, and the functional composites
F.max_pool1d ... F.adaptive_max_pool1d call, against PyTorch 1.13 on fresh
random inputs: odd sizes, ceil_mode edges, padding of half the kernel,
dilation, batch 1 and 0, unbatched inputs, every dtype torch's CPU takes
(and refuses), NaN in max pooling, strided inputs (through /v1/run), and
refusals that must carry torch's message."""

import numpy as np

from conftest import assert_bits_as_torch, from_json, torch_ref
from test_scatter_pad_search import ALL, R, T, check, rand


def test_max_pool2d(server, rng):
    cases, single = [], []
    for dt in ALL:
        cases.append(("max_pool2d_with_indices", [R(rng, dt, (2, 3, 7, 6)), [3, 3], [2, 2], [1, 1]], {}))
    for shape in [(1, 2, 9, 11), (0, 3, 5, 5), (3, 8, 7), (2, 1, 5, 13)]:
        x = R(rng, "float32", shape)
        for k, s, p, d, c in [([3, 3], [2, 2], [1, 1], [1, 1], False), ([2], [], [0], [1], False),
                              ([3, 2], [2, 1], [1, 0], [1, 1], True), ([3, 3], [3, 3], [1, 1], [2, 2], True),
                              ([2, 2], [2, 2], [1, 1], [1, 1], True), ([3, 1], [1, 2], [0, 0], [2, 1], False),
                              ([5, 5], [2, 2], [2, 2], [1, 1], True)]:
            if shape[-2] < (k[0] - 1) * d[0] + 1 - 2 * p[0]:
                continue
            cases.append(("max_pool2d_with_indices", [x, k, s, p, d, c], {}))
            single.append(("max_pool2d", [x, k, s, p, d, c], {}))
    for dt in ("float64", "bfloat16"):
        cases.append(("max_pool2d_with_indices", [R(rng, dt, (2, 3, 8, 8)), [2, 2], [2, 2], [0, 0], [1, 1], True], {}))
    nan = rand(rng, "float32", (1, 2, 5, 5))
    nan[0, 0, 1, 2] = np.nan
    nan[0, 1, 3, 3] = -np.inf
    nan[0, 1, 0, :] = np.inf
    cases.append(("max_pool2d_with_indices", [T(nan), [2, 2], [1, 1]], {}))
    x = R(rng, "float32", (2, 3, 9, 9))
    cases += [("max_pool2d_with_indices", [x, [3, 3, 3]], {}), ("max_pool2d_with_indices", [x, [3], [1, 1, 1]], {}),
              ("max_pool2d_with_indices", [x, [3], [1], [1, 1, 1]], {}),
              ("max_pool2d_with_indices", [x, [3], [1], [1], [1, 1, 1]], {}),
              ("max_pool2d_with_indices", [x, [0, 3]], {}), ("max_pool2d_with_indices", [x, [3], [0, 1]], {}),
              ("max_pool2d_with_indices", [x, [3], [-1, 1]], {}),
              ("max_pool2d_with_indices", [x, [3], [1], [0], [0, 1]], {}),
              ("max_pool2d_with_indices", [x, [3], [1], [2, 1]], {}),
              ("max_pool2d_with_indices", [x, [3], [1], [-1, 1]], {}),
              ("max_pool2d_with_indices", [x, [10, 3]], {}),
              ("max_pool2d_with_indices", [R(rng, "float32", (9, 9)), [3, 3]], {}),
              ("max_pool2d_with_indices", [R(rng, "float32", (1, 2, 3, 9, 9)), [3, 3]], {}),
              ("max_pool2d_with_indices", [R(rng, "float32", (2, 0, 9, 9)), [3, 3]], {}),
              ("max_pool2d_with_indices", [R(rng, "float32", (0, 9, 9)), [3, 3]], {}),
              ("max_pool2d_with_indices", [R(rng, "float32", (2, 2, 0, 9)), [3, 3]], {})]
    single += [("max_pool1d", [R(rng, "float32", (2, 3, 11)), [3], [2], [1], [2], True], {}),
               ("max_pool1d", [R(rng, "float64", (3, 11)), [2]], {})]
    check(server, cases, outs=2)
    check(server, single)
    check(server, [("max_pool1d_with_indices", [R(rng, "float32", (2, 3, 11)), [3], [1], [1]], {})], outs=2)


def test_max_pool2d_wide(server, rng):
    """Rows of more than 16 unclipped windows (cpu/pool.c's AVX-512 float32 rows: strides 1, 2 and 3,
    dilation, ceil_mode, a masked tail), ties among small integers (the first wins), NaN (the last wins
    its index) and -inf, against torch's values and indices."""
    cases = []
    x = R(rng, "float32", (2, 3, 21, 53))
    ties = rng.integers(-3, 3, (2, 3, 19, 70)).astype(np.float32)
    ties[0, 0, 3, 5:40:3] = np.nan
    ties[1, 2, :, 20:50] = -np.inf
    ties[0, 1, 7, 33] = np.nan
    for inp in (x, T(ties)):
        for k, s, p, d, c in [([3, 3], [2, 2], [1, 1], [1, 1], False), ([3, 3], [1, 1], [1, 1], [1, 1], False),
                              ([2, 3], [3, 3], [0, 1], [1, 2], True), ([3, 3], [2, 2], [1, 1], [2, 2], True),
                              ([5, 5], [4, 4], [2, 2], [1, 1], False), ([1, 4], [1, 2], [0, 2], [1, 1], True)]:
            cases.append(("max_pool2d_with_indices", [inp, k, s, p, d, c], {}))
    cases.append(("max_pool3d_with_indices", [R(rng, "float32", (2, 2, 5, 9, 40)), [2, 3, 3], [1, 2, 2], [1, 1, 1]],
                  {}))
    check(server, cases, outs=2)


def test_avg_pools_many_planes(server, rng):
    """More planes than cpu/pool.c's group of 8 (and a remainder): every dtype, padding, ceil_mode,
    count_include_pad, divisor_override, adaptive 2d and 3d."""
    cases = []
    for dt in ALL:
        cases.append(("avg_pool2d", [R(rng, dt, (3, 5, 9, 11)), [3, 3], [2, 2], [1, 1]], {}))
        cases.append(("_adaptive_avg_pool2d", [R(rng, dt, (4, 5, 7, 7)), [1, 1]], {}))
    x = R(rng, "float32", (2, 13, 7, 7))
    cases += [("avg_pool2d", [x, [7, 7]], {}), ("avg_pool2d", [x, [3, 2], [2, 2], [1, 1], True, False], {}),
              ("avg_pool2d", [x, [3, 3], [2, 2], [1, 1], False, True, 5], {}),
              ("_adaptive_avg_pool2d", [x, [3, 2]], {}), ("adaptive_avg_pool2d", [x, [1, 1]], {}),
              ("avg_pool3d", [R(rng, "float64", (2, 9, 4, 5, 6)), [2, 3, 3], [1, 2, 2], [1, 1, 1]], {}),
              ("_adaptive_avg_pool3d", [R(rng, "float32", (3, 4, 4, 5, 6)), [2, 3, 2]], {})]
    check(server, cases)


def test_avg_pool2d(server, rng):
    cases = []
    for dt in ALL:
        cases.append(("avg_pool2d", [R(rng, dt, (2, 3, 7, 6)), [3, 3], [2, 2], [1, 1]], {}))
    for shape in [(1, 2, 9, 11), (0, 3, 5, 5), (3, 8, 7), (2, 1, 5, 13)]:
        x = R(rng, "float64", shape)
        for k, s, p, c, cip, div in [([3, 3], [2, 2], [1, 1], False, True, None), ([2], [], [0], False, True, None),
                                     ([3, 2], [2, 1], [1, 0], True, False, None),
                                     ([3, 3], [2, 2], [1, 1], True, True, None),
                                     ([2, 2], [2, 2], [1, 1], True, False, 3), ([5, 3], [3, 2], [2, 1], True, True, -2),
                                     ([4, 4], [3, 3], [2, 2], True, False, None)]:
            cases.append(("avg_pool2d", [x, k, s, p, c, cip, div], {}))
    cases.append(("avg_pool2d", [R(rng, "int64", (2, 3, 7, 7)), [2, 2], [2, 2], [1, 1], True, False, 3], {}))
    cases.append(("avg_pool2d", [R(rng, "bfloat16", (2, 3, 8, 7)), [3, 3], [1, 1], [1, 1], True, True], {}))
    cases.append(("avg_pool1d", [R(rng, "float32", (2, 3, 10)), [3], [2], [1], True, False], {}))
    cases.append(("avg_pool1d", [R(rng, "float32", (3, 10)), [4]], {}))
    x = R(rng, "float32", (2, 3, 9, 9))
    cases += [("avg_pool2d", [x, [3, 3, 3]], {}), ("avg_pool2d", [x, [3], [1, 1, 1]], {}),
              ("avg_pool2d", [x, [3], [1], [1, 1, 1]], {}), ("avg_pool2d", [x, [3], [1], [2, 1]], {}),
              ("avg_pool2d", [x, [10, 3]], {}), ("avg_pool2d", [x, [3], [], [0], False, True, 0], {}),
              ("avg_pool2d", [R(rng, "float32", (9, 9)), [3, 3]], {}),
              ("avg_pool2d", [R(rng, "float32", (2, 0, 9, 9)), [3, 3]], {}),
              ("avg_pool1d", [R(rng, "float32", (2, 3, 4, 10)), [3]], {}),
              ("avg_pool1d", [R(rng, "float32", (2, 10)), [3, 3]], {})]
    check(server, cases)


def test_adaptive_pools_2d(server, rng):
    cases, cases2 = [], []
    for dt in ALL:
        x = R(rng, dt, (2, 3, 7, 6))
        cases.append(("_adaptive_avg_pool2d", [x, [3, 4]], {}))
        cases2.append(("adaptive_max_pool2d", [x, [3, 4]], {}))
    for shape in [(1, 2, 9, 11), (0, 3, 5, 5), (3, 8, 7), (2, 1, 5, 13), (2, 0, 5, 5)]:
        x = R(rng, "float64", shape)
        for os in ([3, 3], [1, 1], [5, 13], [8, 2], [0, 3], [2, 1]):
            cases.append(("_adaptive_avg_pool2d", [x, os], {}))
            cases.append(("adaptive_avg_pool2d", [x, os], {}))
            cases2.append(("adaptive_max_pool2d", [x, os], {}))
    nan = rand(rng, "float32", (1, 2, 5, 5))
    nan[0, 0, 1, 2] = np.nan
    cases2.append(("adaptive_max_pool2d", [T(nan), [2, 3]], {}))
    cases.append(("adaptive_avg_pool1d", [R(rng, "float32", (2, 3, 10)), [4]], {}))
    cases2.append(("adaptive_max_pool1d", [R(rng, "float32", (3, 10)), [3]], {}))
    x = R(rng, "float32", (2, 3, 9, 9))
    cases += [("_adaptive_avg_pool2d", [R(rng, "float32", (9, 9)), [3, 3]], {}),
              ("_adaptive_avg_pool2d", [R(rng, "float32", (2, 2, 0, 9)), [3, 3]], {}),
              ("_adaptive_avg_pool2d", [x, [3, 3, 3]], {}), ("_adaptive_avg_pool2d", [x, [-1, 3]], {}),
              ("adaptive_avg_pool2d", [x, [-1, 3]], {}), ("adaptive_avg_pool1d", [x, [3]], {})]
    cases2 += [("adaptive_max_pool2d", [R(rng, "float32", (9, 9)), [3, 3]], {}),
               ("adaptive_max_pool2d", [R(rng, "float32", (2, 0, 9, 9)), [3, 3]], {}),
               ("adaptive_max_pool2d", [x, [3, 3, 3]], {}), ("adaptive_max_pool2d", [x, [-1, 3]], {})]
    check(server, cases)
    check(server, cases2, outs=2)


def test_pools_3d(server, rng):
    cases, cases2 = [], []
    for dt in ALL:
        x = R(rng, dt, (2, 2, 5, 4, 6))
        cases += [("avg_pool3d", [x, [3, 2, 3], [2, 1, 2], [1, 1, 1]], {}), ("_adaptive_avg_pool3d", [x, [2, 3, 4]], {})]
        cases2 += [("max_pool3d_with_indices", [x, [3, 2, 3], [2, 1, 2], [1, 1, 1]], {}),
                   ("adaptive_max_pool3d", [x, [2, 3, 4]], {})]
    for shape in [(1, 2, 5, 7, 6), (0, 2, 4, 4, 4), (3, 5, 6, 7)]:
        x = R(rng, "float64", shape)
        cases += [("avg_pool3d", [x, [3], [2], [1], True, False], {}), ("avg_pool3d", [x, [2, 3, 2], [], [0], True, True, 5], {}),
                  ("_adaptive_avg_pool3d", [x, [3, 1, 5]], {}), ("adaptive_avg_pool3d", [x, [1, 1, 1]], {})]
        cases2 += [("max_pool3d_with_indices", [x, [3], [2], [1], [1], True], {}),
                   ("max_pool3d_with_indices", [x, [2, 2, 3], [1, 2, 2], [1, 0, 1], [2, 1, 1], False], {}),
                   ("adaptive_max_pool3d", [x, [3, 1, 5]], {})]
    cases += [("max_pool3d", [R(rng, "float32", (1, 3, 5, 5, 5)), [3], [2], [1]], {}),
              ("avg_pool3d", [R(rng, "float32", (1, 3, 5, 5, 5)), [6, 3, 3]], {}),
              ("avg_pool3d", [R(rng, "float32", (5, 5, 5)), [3]], {}),
              ("avg_pool3d", [R(rng, "float32", (1, 0, 5, 5, 5)), [3]], {}),
              ("_adaptive_avg_pool3d", [R(rng, "float32", (5, 5, 5)), [3, 3, 3]], {}),
              ("_adaptive_avg_pool3d", [R(rng, "float32", (1, 0, 5, 5, 5)), [3, 3, 3]], {})]
    cases2 += [("max_pool3d_with_indices", [R(rng, "float32", (1, 3, 5, 5, 5)), [3, 3]], {}),
               ("max_pool3d_with_indices", [R(rng, "float32", (1, 3, 5, 5, 5)), [6, 3, 3]], {}),
               ("max_pool3d_with_indices", [R(rng, "float32", (1, 3, 5, 5, 5)), [3], [1], [2]], {}),
               ("max_pool3d_with_indices", [R(rng, "float32", (5, 5, 5)), [3]], {}),
               ("adaptive_max_pool3d", [R(rng, "float32", (1, 0, 5, 5, 5)), [3, 3, 3]], {})]
    check(server, cases)
    check(server, cases2, outs=2)


def test_backward_every_bit(server, rng):
    """The backward kernels (cpu/pool.c's POOL_BWD) zero each plane of grad_input and add into it in
    ATen's order: every bit as torch's, the +0.0 of inputs no window picked or covered included (the
    server's test build fills fresh outputs with 0xA5 bytes, a float of -2.9e-16 that no allclose
    would see), over many planes (parallel tasks)."""
    cases = []
    for dt in ("float32", "float64"):
        x = rand(rng, dt, (3, 40, 9, 11))
        steps = [("max_pool2d_with_indices", [[3, 3], [3, 3], [0, 0], [1, 1], False]),
                 ("adaptive_max_pool2d", [[2, 3]])]
        for (op, rest), ref in zip(steps, torch_ref([{"op": op, "args": [T(x)] + rest, "out": 1}
                                                     for op, rest in steps])):
            idx = {"dtype": "int64", "shape": ref["shape"], "data": ref["value"]}
            g = R(rng, dt, ref["shape"])
            cases.append(("max_pool2d_with_indices_backward", [g, T(x)] + rest + [idx], {}) if op.startswith("max")
                         else ("adaptive_max_pool2d_backward", [g, T(x), idx], {}))
        cases.append(("avg_pool2d_backward", [R(rng, dt, (3, 40, 2, 3)), T(x), [3, 3], [4, 4], [0, 0], False, True, None], {}))
        cases.append(("_adaptive_avg_pool2d_backward", [R(rng, dt, (3, 40, 4, 5)), T(x)], {}))
    assert_bits_as_torch(server, cases)


def test_backward_ops(server, rng):
    """The native backward ops on their own (autograd's cases in test_autograd.py)."""
    x = rand(rng, "float64", (2, 3, 7, 8))
    steps = [("max_pool2d_with_indices", [[3, 3], [2, 2], [1, 1], [1, 1], True]),
             ("adaptive_max_pool2d", [[3, 5]])]
    cases = []
    idx_refs = torch_ref([{"op": op, "args": [T(x)] + rest, "out": 1} for op, rest in steps])
    for (op, rest), ref in zip(steps, idx_refs):
        idx = {"dtype": "int64", "shape": ref["shape"], "data": ref["value"]}
        g = R(rng, "float64", ref["shape"])
        if op.startswith("max"):
            cases.append(("max_pool2d_with_indices_backward", [g, T(x)] + rest + [idx], {}))
        else:
            cases.append(("adaptive_max_pool2d_backward", [g, T(x), idx], {}))
    cases.append(("avg_pool2d_backward", [R(rng, "float64", (2, 3, 4, 4)), T(x), [3, 3], [2, 2], [1, 1], True, False, None], {}))
    cases.append(("_adaptive_avg_pool2d_backward", [R(rng, "float64", (2, 3, 3, 5)), T(x)], {}))
    x3 = rand(rng, "float32", (2, 5, 6, 7))
    cases.append(("avg_pool3d_backward", [R(rng, "float32", (2, 3, 3, 4)), T(x3), [2], [2], [1], True, True, None], {}))
    cases.append(("_adaptive_avg_pool3d_backward", [R(rng, "float32", (2, 2, 4, 3)), T(x3)], {}))
    # empty sizes: torch 1.13's 3-d backward ops answer an empty grad_input; its 2-d ones refuse an
    # empty grad_output (and take an empty self)
    e3, e2 = R(rng, "float32", (3, 5, 1, 0)), R(rng, "float32", (2, 3, 1, 0))
    i3, i2 = ({"dtype": "int64", "shape": list(sh), "data": []} for sh in ((3, 5, 1, 0), (2, 3, 1, 0)))
    cases += [("_adaptive_avg_pool3d_backward", [e3, e3], {}), ("adaptive_max_pool3d_backward", [e3, e3, i3], {}),
              ("_adaptive_avg_pool2d_backward", [e2, e2], {}), ("adaptive_max_pool2d_backward", [e2, e2, i2], {}),
              ("_adaptive_avg_pool2d_backward", [R(rng, "float32", (2, 3, 1, 1)), e2], {})]
    # no grad_output elements: adaptive max pooling reads no index, so any indices give zeros
    g0, x0 = R(rng, "float32", (0, 2, 1, 3)), R(rng, "float32", (0, 2, 1, 1))
    i5 = {"dtype": "int64", "shape": [5], "data": [2, 0, 0, 2, 2]}
    cases += [("adaptive_max_pool2d_backward", [g0, x0, i5], {}),
              ("adaptive_max_pool3d_backward", [R(rng, "float32", (0, 2, 1, 1, 3)), R(rng, "float32", (0, 2, 1, 1, 1)),
                                                i5], {})]
    # refusals in torch's words: the 2-d adaptive backwards check grad_output's rank first (avg names
    # self's sizes, max grad_output's), then read self.size(-2); max_pool2d's backward says max_pool2d
    f = lambda *sh: R(rng, "float32", sh)
    i = lambda *sh: {"dtype": "int64", "shape": list(sh), "data": [0] * int(np.prod(sh))}
    cases += [("_adaptive_avg_pool2d_backward", [R(rng, "float64", (5,)), f(1, 2, 3)], {}),  # rank, then dtype
              ("_adaptive_avg_pool2d_backward", [R(rng, "float64", (1, 2, 3)), f(5)], {}),
              ("_adaptive_avg_pool2d_backward", [f(5), f(1, 2, 3)], {}),
              ("_adaptive_avg_pool2d_backward", [f(1, 2, 3), f(5)], {}),
              ("_adaptive_avg_pool2d_backward", [f(1, 0, 2, 3), f(1, 2, 3)], {}),
              ("adaptive_max_pool2d_backward", [f(5), f(1, 2, 3), i(5)], {}),
              ("adaptive_max_pool2d_backward", [f(1, 2, 3), f(5), i(1, 2, 3)], {}),
              ("max_pool2d_with_indices_backward", [f(1, 2, 2), f(1, 4, 4), [2, 2, 2], [2, 2], [0, 0], [1, 1], False,
                                                    i(1, 2, 2)], {}),
              ("max_pool2d_with_indices_backward", [f(1, 2, 2), f(1, 4, 4), [2, 2], [2, 2], [0, 0, 0], [1, 1], False,
                                                    i(1, 2, 2)], {})]
    check(server, cases)


def test_strided_inputs(server, rng):
    """A transposed (non-contiguous) input pools as its contiguous copy does."""
    runs, refs = [], []
    for op, rest, outs in [("max_pool2d_with_indices", [[3, 2], [2, 1], [1, 1]], 2), ("avg_pool2d", [[3, 3], [2, 2], [1, 0]], 1),
                           ("_adaptive_avg_pool2d", [[4, 3]], 1), ("adaptive_max_pool2d", [[3, 4]], 2),
                           ("avg_pool3d", [[2], [1], [1]], 1)]:
        shape = (2, 3, 4, 7, 9) if op.endswith("3d") else (2, 3, 7, 9)
        a = rand(rng, "float32", shape)
        body = {"steps": [{"op": "transpose.int", "args": [T(a), 1, -1]},
                          {"op": op, "args": [{"ref": "$0"}] + rest}],
                "outputs": ["$1.0"] + (["$1.1"] if outs == 2 else [])}
        r = server.post("/v1/run", body)
        assert r.status_code == 200, r.text
        runs += [from_json(o) for o in r.json()["outputs"]]
        at = np.ascontiguousarray(np.swapaxes(a, 1, -1))
        refs += [{"op": op, "args": [T(at)] + rest, "out": k} for k in range(outs)]
    for g, w in zip(runs, torch_ref(refs)):
        np.testing.assert_allclose(g, np.array(w["value"]).reshape(w["shape"]), rtol=1e-5, atol=1e-6)
