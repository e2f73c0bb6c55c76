"""upsample_bicubic2d (.vec, _backward, _backward.vec: kernels/shape_resample.c's
cubic kind, cpu/resample.c) and embedding_bag (.padding_idx, _embedding_bag,
_embedding_bag_forward_only, _embedding_bag_backward, _embedding_bag_dense_backward,
_embedding_bag_per_sample_weights_backward: kernels/shape_embedding_bag.c,
cpu/embedding_bag.c, composite/embedding_bag.c) against PyTorch 1.13 on fresh
random inputs: odd sizes, up and down, align_corners, given scales, batch 0
and 1, non-contiguous inputs, every dtype torch's CPU takes (and refuses),
and refusals that must carry torch's message. Gradients are in
test_autograd.py.

What is not compared, and why: embedding_bag's outputs 1-3 (offset2bag,
bag_size, max_indices) are compared only where torch 1.13's CPU kernel
defines them. offset2bag is skipped in mode 'sum' (torch's fast path for
float32/float16 leaves it empty, the slow path fills it; the server always
fills it, which _embedding_bag_backward accepts either way); bag_size and
max_indices are skipped in mode 'sum' (zeros, or for
_embedding_bag_forward_only a tensor of offsets' size, uninitialised) and
bag_size/max_indices of _embedding_bag_forward_only with include_last_offset
(torch sizes them by offsets and leaves the last uninitialised, and in mode
'max' writes past the end of its heap block). Also skipped:
include_last_offset with offsets[-1] < len(indices) in mode 'max' (the
same overrun in torch), and mode values other than 0-2 (torch segfaults).
"""

import numpy as np

from conftest import from_json, torch_ref
from test_scatter_pad_search import ALL, R, T, check, rand


def bf16_round(a):
    """float32 values rounded to bfloat16 (to nearest, ties to even), as float32."""
    b = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32)


# ---- upsample_bicubic2d ----------------------------------------------------------------


def test_bicubic_forward(server, rng):
    op = "upsample_bicubic2d"
    cases, bf = [], []
    for dt in ALL:
        if dt == "float32":  # positive: no cancellation magnifies the roundings
            bf.append((op, [T(np.abs(rand(rng, "float32", (2, 3, 4, 5))) + 0.5, dt), [7, 9], False], {}))
        elif dt == "bfloat16":
            continue
        else:
            cases.append((op, [R(rng, dt, (2, 3, 4, 5)), [7, 9], False], {}))
    for shape, out in [((1, 2, 5, 3), [10, 7]), ((2, 1, 7, 9), [3, 4]), ((0, 2, 3, 3), [5, 5]),
                       ((1, 3, 1, 1), [4, 3]), ((1, 1, 6, 5), [6, 5]), ((3, 2, 2, 9), [1, 1])]:
        x = R(rng, "float64", shape)
        for ac in (False, True):
            cases += [(op, [x, out, ac], {}), (f"{op}.vec", [x, out, ac, None], {}),
                      (f"{op}.vec", [x, None, ac, [1.7, 2.3]], {}), (f"{op}.vec", [x, None, ac, [0.45, 0.6]], {}),
                      (op, [x, out, ac, 3.0, 0.7], {})]
    x = R(rng, "float32", (1, 2, 3, 3))
    cases += [(op, [x, [0, 4], False], {}), (op, [R(rng, "float32", (3, 3, 3)), [4, 4], True], {}),
              (op, [R(rng, "float32", (1, 0, 3, 3)), [4, 4], True], {}), (op, [x, [4, 4, 4], False], {}),
              (f"{op}.vec", [x, None, False, None], {}), (f"{op}.vec", [x, [4, 4], True, [2.0, 2.0]], {}),
              (f"{op}.vec", [x, None, False, [2.0]], {}), (f"{op}.vec", [x, None, False, [0.1, 0.1]], {})]
    check(server, cases, rtol=1e-5)
    # float32: torch and the server round differently, and the negative lobes cancel, so the
    # error is measured against the largest magnitude
    for _, args, _ in bf:
        got = server.post(f"/v1/ops/{op}", {"args": args})
        assert got.status_code == 200, got.text
        w = np.array(torch_ref([{"op": op, "args": args}])[0]["value"], np.float64)
        assert np.abs(np.array(got.json()["outputs"][0]["data"], np.float64) - w).max() <= 1e-5 * np.abs(w).max()
    # torch 1.13's bfloat16 bicubic is off by up to 0.1 on values near 1 (its weights and sums
    # in bfloat16); the server blends in float, so bfloat16 is checked against torch's float32
    # result on the same (bfloat16-rounded) values, rounded to bfloat16
    a = bf16_round(np.abs(rand(rng, "float32", (2, 3, 4, 5))) + 0.5)
    got = server.post("/v1/ops/upsample_bicubic2d", {"args": [T(a, "bfloat16"), [7, 9], False]})
    assert got.status_code == 200 and got.json()["outputs"][0]["dtype"] == "bfloat16", got.text
    w = torch_ref([{"op": "upsample_bicubic2d", "args": [T(a), [7, 9], False]}])[0]
    np.testing.assert_allclose(np.array(got.json()["outputs"][0]["data"], np.float64),
                               bf16_round(np.array(w["value"], np.float32)), rtol=1e-2, atol=1e-2)


def test_bicubic_backward(server, rng):
    cases = []
    for insz, outsz in [([2, 3, 4, 5], [7, 3]), ([1, 1, 5, 5], [5, 5]), ([0, 2, 3, 4], [6, 6]),
                        ([1, 2, 1, 1], [3, 4]), ([2, 2, 9, 7], [4, 3])]:
        g = R(rng, "float64", tuple(insz[:2] + outsz))
        for ac in (False, True):
            cases += [("upsample_bicubic2d_backward", [g, outsz, insz, ac], {}),
                      ("upsample_bicubic2d_backward", [g, outsz, insz, ac, 2.5, 0.5], {}),
                      ("upsample_bicubic2d_backward.vec", [g, outsz, insz, ac, None], {})]
    g = R(rng, "float64", (2, 3, 7, 3))
    cases += [("upsample_bicubic2d_backward", [g, [8, 3], [2, 3, 4, 5], False], {}),
              ("upsample_bicubic2d_backward", [R(rng, "int64", (2, 3, 7, 3)), [7, 3], [2, 3, 4, 5], False], {})]
    check(server, cases, rtol=1e-6)
    lo = []
    for dt in ("float32", "float16"):
        g = T(np.abs(rand(rng, "float32", (2, 3, 7, 6))) + 0.5, dt)
        lo.append(("upsample_bicubic2d_backward", [g, [7, 6], [2, 3, 4, 5], False], {}))
    check(server, lo, rtol=3e-2)
    # torch 1.13 accumulates bfloat16's gradient in bfloat16 (off by several units in the
    # last place); the server accumulates in float and rounds once: checked against torch's
    # float32 on the same values
    a = bf16_round(np.abs(rand(rng, "float32", (2, 3, 7, 6))) + 0.5)
    rest = [[7, 6], [2, 3, 4, 5], False]
    got = server.post("/v1/ops/upsample_bicubic2d_backward", {"args": [T(a, "bfloat16")] + rest})
    assert got.status_code == 200 and got.json()["outputs"][0]["dtype"] == "bfloat16", got.text
    w = torch_ref([{"op": "upsample_bicubic2d_backward", "args": [T(a)] + rest}])[0]
    np.testing.assert_allclose(np.array(got.json()["outputs"][0]["data"], np.float64),
                               bf16_round(np.array(w["value"], np.float32)), rtol=1e-2, atol=1e-2)


def test_bicubic_strided(server, rng):
    """A transposed (non-contiguous) input resamples as its contiguous copy does."""
    a = rand(rng, "float64", (2, 4, 5, 6))
    for op, rest in [("upsample_bicubic2d", [[7, 5], False]), ("upsample_bicubic2d", [[3, 9], True])]:
        body = {"steps": [{"op": "transpose.int", "args": [T(a), -2, -1]},
                          {"op": op, "args": [{"ref": "$0"}] + rest}], "outputs": ["$1"]}
        r = server.post("/v1/run", body)
        assert r.status_code == 200, r.text
        got = from_json(r.json()["outputs"][0])
        w = torch_ref([{"op": op, "args": [T(np.ascontiguousarray(np.swapaxes(a, -2, -1)))] + rest}])[0]
        np.testing.assert_allclose(got, np.array(w["value"]).reshape(w["shape"]), rtol=1e-10, atol=1e-12)
