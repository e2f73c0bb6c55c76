"""Upsampling and pixel shuffles (kernels/shape_resample.c, cpu/resample.c,
composite/resample.c): upsample_nearest1d/2d/3d, upsample_linear1d /
bilinear2d / trilinear3d with their .vec overloads (what F.interpolate
emits) and _backward ops, pixel_shuffle / pixel_unshuffle, against PyTorch
1.13 on fresh random inputs: odd sizes, up and down, align_corners, given
scales, batch 0, every dtype torch's CPU takes (and refuses), and refusals
that must carry torch's message. Gradients are in test_autograd.py."""

import numpy as np

from conftest import assert_bits_as_torch, from_json, torch_ref
from test_scatter_pad_search import ALL, R, T, check, float32_atol, rand

LINEAR = {1: "upsample_linear1d", 2: "upsample_bilinear2d", 3: "upsample_trilinear3d"}


def test_upsample_nearest(server, rng):
    cases = []
    for nd in (1, 2, 3):
        op = f"upsample_nearest{nd}d"
        for dt in ALL:
            cases.append((op, [R(rng, dt, (2, 3) + (4,) * nd), [7] * nd], {}))
        for shape, out in [((1, 2) + (5,) * nd, [10] * nd), ((2, 1) + (7,) * nd, [3] * nd),
                           ((0, 2) + (3,) * nd, [5] * nd), ((1, 3) + (3,) * nd, [3] * nd)]:
            x = R(rng, "float32", shape)
            cases += [(op, [x, out], {}), (f"{op}.vec", [x, out, None], {}),
                      (f"{op}.vec", [x, None, [1.7] * nd], {}), (f"{op}.vec", [x, None, [0.6] * nd], {}),
                      (op, [x, out] + [2.5] * nd, {})]
        x = R(rng, "float32", (1, 2) + (3,) * nd)
        cases += [(op, [x, [0] + [4] * (nd - 1)], {}), (op, [x, [4] * (nd + 1)], {}),
                  (op, [R(rng, "float32", (2,) + (3,) * nd), [4] * nd], {}),
                  (op, [R(rng, "float32", (1, 0) + (3,) * nd), [4] * nd], {}),
                  (f"{op}.vec", [x, [4] * nd, [2.0] * nd], {}), (f"{op}.vec", [x, None, None], {}),
                  (f"{op}.vec", [x, [4] * (nd + 1), None], {}), (f"{op}.vec", [x, None, [2.0] * (nd + 1)], {}),
                  (f"{op}.vec", [x, None, [0.1] * nd], {})]
    check(server, cases)


def test_upsample_linear(server, rng):
    cases, bf = [], []
    for nd in (1, 2, 3):
        op = LINEAR[nd]
        for dt in ALL:
            if dt == "bfloat16":  # positive, so no cancellation magnifies bfloat16's rounding
                bf.append((op, [T(np.abs(rand(rng, "float32", (2, 3) + (4,) * nd)) + 0.5, dt), [7] * nd, False], {}))
            else:
                cases.append((op, [R(rng, dt, (2, 3) + (4,) * nd), [7] * nd, False], {}))
        for shape, out in [((1, 2) + (5,) * nd, [10] * nd), ((2, 1) + (7,) * nd, [3] * nd),
                           ((0, 2) + (3,) * nd, [5] * nd), ((1, 3) + (1,) * nd, [4] * nd)]:
            for dt in ("float64",):  # float32's cancellations near 0 exceed the fixed atol
                x = R(rng, dt, shape)
                for ac in (False, True):
                    cases += [(op, [x, out, ac], {}), (f"{op}.vec", [x, None, ac, [1.7] * nd], {}),
                              (f"{op}.vec", [x, None, ac, [0.45] * nd], {}), (op, [x, out, ac] + [3.0] * nd, {})]
        x = R(rng, "float32", (1, 2) + (3,) * nd)
        cases += [(op, [x, [0] + [4] * (nd - 1), False], {}), (op, [R(rng, "float32", (3,) * (nd + 1)), [4] * nd, True], {}),
                  (f"{op}.vec", [x, None, False, None], {}), (f"{op}.vec", [x, [4] * nd, True, [2.0] * nd], {})]
    check(server, cases, rtol=1e-5)
    # bfloat16 blends in bfloat16 arithmetic, each product and sum rounded, as torch's: its bits
    assert_bits_as_torch(server, bf)


def test_linear_index_just_below_an_integer(server, rng):
    """In float64 a source index like (7 + 0.5) / 3 - 0.5 lands a hair below 2 in torch 1.13, whose CPU
    kernels compute scale * (o + 0.5) - 0.5 as one fma and truncate it (index 1, weight 1 - 2^-52 on 2);
    rounding it twice gives exactly 2. Nonzero inputs only at odd positions keep every output a single
    tap's product, computed alike on both sides, so these compare exactly, 1d to 3d, float64 and float32."""
    cases = []
    for nd, op in LINEAR.items():
        for n, m in ((5, 15), (7, 21), (3, 9), (9, 27)):
            for dt in ("float64", "float32"):
                x = np.zeros((1, 2) + (n,) * nd)
                odd = (slice(None), slice(None)) + (slice(1, None, 2),) * nd
                x[odd] = rng.standard_normal(x[odd].shape) * 10.0 ** rng.integers(-6, 7, x[odd].shape)
                cases.append({"op": op, "args": [T(x.astype(dt), dt), [m] * nd, False]})
    for case, w in zip(cases, torch_ref(cases)):
        r = server.post(f"/v1/ops/{case['op']}", {"args": case["args"]})
        assert r.status_code == 200, r.text[:300]
        o = r.json()["outputs"][0]
        got, want = np.array(o["data"], np.float64), np.array(w["value"], np.float64)
        if o["dtype"] == "float32":
            got, want = got.astype(np.float32), want.astype(np.float32)
        bad = np.flatnonzero(got != want)
        assert not bad.size, (case["op"], o["dtype"], case["args"][1], bad[:5], got[bad[:5]], want[bad[:5]])


def test_linear_kept_sizes_and_infinities(server, rng):
    """ATen's linear index math copies a dim whose size is kept (index o, weights 1 and 0), whatever the
    scales argument says; every tap of the operator's own dims is summed, a zero weight too, so an
    infinite input or gradient next to a zero weight gives NaN (a trilinear3d D of 1 -> 1 as well), while
    a 1d or 2d operator has no D (nor H, for 1d) to blend: inf stays inf there. Forward and backward."""
    cases = []
    inf, nan = float("inf"), float("nan")
    for nd, op in LINEAR.items():
        for dt in ("float64", "float32"):
            x = R(rng, dt, (2, 3) + (4,) * nd)
            cases += [(op, [x, [4] * nd, False] + [2.0] * nd, {}), (op, [x, [4] * nd, True] + [3.0] * nd, {}),
                      (op, [x, [4] * (nd - 1) + [9], False] + [2.0] * nd, {})]
            g = R(rng, dt, (2, 3) + (4,) * nd)
            cases.append((f"{op}_backward", [g, [4] * nd, [2, 3] + [4] * nd, False] + [2.0] * nd, {}))
        a = rng.standard_normal((2, 3) + (3,) * nd)
        a.reshape(-1)[[0, 5, 13]] = [inf, -inf, nan]
        for shape_out in ([7] * nd, [3] * nd, [1] * (nd - 1) + [6]):
            cases.append((op, [T(a, "float64"), shape_out, False], {}))
        g = rng.standard_normal((2, 3) + (5,) * nd)
        g.reshape(-1)[[1, 7, 29]] = [inf, -inf, nan]
        for insz in ([2, 3] + [3] * nd, [2, 3] + [5] * nd, [2, 3] + [1] * (nd - 1) + [2]):
            cases.append((f"{op}_backward", [T(g, "float64"), [5] * nd, insz, False], {}))
    # width 1 -> 20 (a 1d operator blends W only) and a kept D of 1 (trilinear3d blends it)
    w1 = np.array([1.5, inf, -inf, nan]).reshape(4, 1, 1)
    cases.append(("upsample_linear1d", [T(w1, "float64"), [20], False], {}))
    d1 = rng.standard_normal((1, 2, 1, 3, 3))
    d1.reshape(-1)[[2, 10]] = [inf, -inf]
    cases.append(("upsample_trilinear3d", [T(d1, "float64"), [1, 5, 4], False], {}))
    check(server, cases, rtol=1e-5)


def test_upsample_wide(server, rng):
    """Rows wider than one AVX-512 vector (16 floats), not a multiple of it, up and down, both corner
    modes: cpu/resample.c's separable float32 path runs whole vectors and a masked tail; nearest 2d."""
    cases = []
    for dt in ("float32", "float64"):
        # positive, so float32's cancellations near 0 (torch fuses multiply-adds) stay inside the atol
        x = T(np.abs(rand(rng, dt, (2, 3, 13, 37))) + 0.5, dt)
        for out in ([26, 74], [5, 17], [13, 50], [40, 16]):
            for ac in (False, True):
                cases.append(("upsample_bilinear2d", [x, out, ac], {}))
        cases.append(("upsample_linear1d", [T(np.abs(rand(rng, dt, (2, 3, 41))) + 0.5, dt), [99], False], {}))
        cases.append(("upsample_bilinear2d.vec", [x, None, False, [2.0, 2.0]], {}))
    # nearest 2d copies a row whose source row repeats (cpu/resample.c's near2_fwd)
    for dt in ("float32", "float64", "bfloat16", "uint8"):
        x = R(rng, dt, (2, 3, 13, 37))
        # bfloat16 at 13 -> 40 rows: torch 1.13's generic kernel takes the scale in bfloat16 (0.32421875,
        # not 0.325) and picks other source rows; with one channel the input is also channels-last
        # contiguous and its channels-last kernel takes a float scale; the server follows both
        outs = ([26, 74], [5, 17], [40, 16])
        cases += [("upsample_nearest2d", [x, out], {}) for out in outs]
        cases.append(("upsample_nearest2d", [R(rng, dt, (2, 1, 13, 37)), [40, 16]], {}))
        cases.append(("upsample_nearest2d.vec", [x, None, [2.0, 2.0]], {}))
    check(server, cases, rtol=1e-5)


def test_backward_ops(server, rng):
    cases = []
    for nd in (1, 2, 3):
        insz = [2, 3] + [4, 5, 3][:nd]
        outsz = [7, 3, 6][:nd]
        g = R(rng, "float64", tuple(insz[:2] + outsz))
        cases += [(f"upsample_nearest{nd}d_backward", [g, outsz, insz], {}),
                  (f"upsample_nearest{nd}d_backward.vec", [g, outsz, insz, None], {}),
                  (f"{LINEAR[nd]}_backward", [g, outsz, insz, False], {}),
                  (f"{LINEAR[nd]}_backward", [g, outsz, insz, True], {}),
                  (f"{LINEAR[nd]}_backward.vec", [g, outsz, insz, False, None], {}),
                  (f"upsample_nearest{nd}d_backward", [g, [o + 1 for o in outsz], insz], {}),
                  (f"upsample_nearest{nd}d_backward", [R(rng, "int64", (2, 3) + tuple(outsz)), outsz, insz], {})]
    check(server, cases)


def test_pixel_shuffle(server, rng):
    cases = []
    for dt in ALL:
        cases += [("pixel_shuffle", [R(rng, dt, (2, 8, 3, 5)), 2], {}),
                  ("pixel_unshuffle", [R(rng, dt, (2, 3, 4, 6)), 2], {})]
    cases += [("pixel_shuffle", [R(rng, "float32", (9, 2, 3)), 3], {}),
              ("pixel_shuffle", [R(rng, "float32", (2, 1, 4, 3, 3)), 2], {}),
              ("pixel_shuffle", [R(rng, "float32", (0, 4, 3, 3)), 2], {}),
              ("pixel_unshuffle", [R(rng, "float32", (2, 1, 2, 6, 9)), 3], {}),
              ("pixel_shuffle", [R(rng, "float32", (1, 3, 3, 3)), 2], {}),
              ("pixel_shuffle", [R(rng, "float32", (3, 3)), 2], {}),
              ("pixel_shuffle", [R(rng, "float32", (1, 4, 3, 3)), 0], {}),
              ("pixel_unshuffle", [R(rng, "float32", (1, 3, 3, 3)), 2], {}),
              ("pixel_unshuffle", [R(rng, "float32", (1, 3, 4, 3)), 2], {}),
              ("pixel_unshuffle", [R(rng, "float32", (1, 3, 4, 4)), -1], {})]
    check(server, cases)


def test_strided_inputs(server, rng):
    """A transposed (non-contiguous) input resamples as its contiguous copy does."""
    runs, refs = [], []
    for op, rest in [("upsample_nearest2d", [[7, 5]]), ("upsample_bilinear2d", [[7, 5], False]),
                     ("upsample_nearest2d_backward", [[6, 5], [2, 4, 3, 2]]),
                     ("upsample_trilinear3d", [[3, 7, 5], True]), ("pixel_shuffle", [2])]:
        shape = (2, 4, 3, 5, 4) if op.endswith("3d") else (2, 4, 5, 6)
        a = rand(rng, "float32", shape)
        body = {"steps": [{"op": "transpose.int", "args": [T(a), -2, -1]},
                          {"op": op, "args": [{"ref": "$0"}] + rest}], "outputs": ["$1"]}
        r = server.post("/v1/run", body)
        assert r.status_code == 200, r.text
        runs.append(from_json(r.json()["outputs"][0]))
        refs.append({"op": op, "args": [T(np.ascontiguousarray(np.swapaxes(a, -2, -1)))] + rest})
    for got, w, req in zip(runs, torch_ref(refs), refs):
        np.testing.assert_allclose(got, np.array(w["value"]).reshape(w["shape"]), rtol=1e-5,
                                   atol=float32_atol(req["args"][:1]))


def test_linear_forward_bit_for_bit(server, rng):
    """The linear forwards (cpu/resample.c: linear1d and bilinear2d through LIN2_FWD's row cache and AVX-512
    rows, trilinear3d through TRI_FWD's W-blended rows) do ATen's operations in their order, fused as
    torch's build fuses them: in float32 and float64 every bit as torch's, up and down, align_corners or
    not, the .vec overload with scales, planes across parallel tasks; bfloat16 in bfloat16 steps (every
    product and sum rounded, the scale a bfloat16 quotient of bfloat16 sizes: 257 and 271 are not
    bfloat16 numbers), as torch's scalar_t BFloat16 computes it."""
    cases = []
    for dt in ("float32", "float64", "bfloat16"):
        cases.append(("upsample_linear1d", [R(rng, dt, (1, 2, 257)), [271], False], {}))
        for shape, out in (((2, 5, 7, 9, 11), [13, 5, 20]), ((1, 3, 16, 28, 28), [32, 56, 56]), ((2, 2, 9, 6, 30), [4, 11, 17])):
            x = R(rng, dt, shape)
            for ac in (False, True):
                cases.append(("upsample_trilinear3d", [x, out, ac], {}))
        for shape, out in (((2, 3, 17, 23), [40, 31]), ((1, 4, 56, 56), [112, 112]), ((3, 2, 30, 40), [11, 57])):
            x = R(rng, dt, shape)
            for ac in (False, True):
                cases.append(("upsample_bilinear2d", [x, out, ac], {}))
            cases.append(("upsample_bilinear2d.vec", [x, None, False, [1.7, 2.3]], {}))
        for shape, out in (((2, 3, 57), [130]), ((4, 8, 300), [71])):
            x = R(rng, dt, shape)
            for ac in (False, True):
                cases.append(("upsample_linear1d", [x, out, ac], {}))
    assert_bits_as_torch(server, cases)


def test_backward_1d_2d_bit_for_bit(server, rng):
    """The 1d and 2d backward kernels (cpu/resample.c's RS_BWD2: taps read once per row and column, the
    linear ones added as fma((wh * ww), g, grad_input) as ATen's build contracts them; NEAR_BWD2: each
    grad_input element summed from its run of outputs, the 2x float32 runs by AVX-512 pairs with masked
    tails, rows no output reads zeroed, -0.0 sums +0.0): every bit as
    torch's in float32 and float64, nearest, linear1d and bilinear2d, up and down, align_corners or not,
    planes across parallel tasks; bfloat16 too, linear1d / bilinear2d / trilinear3d through RS_BWD in
    bfloat16 steps (every product and sum rounded, taps as the forward's), as torch's scalar_t BFloat16
    loop computes them."""
    cases = []
    for dt in ("float32", "float64", "bfloat16"):
        if dt == "bfloat16":
            for ac in (False, True):
                cases += [("upsample_linear1d_backward", [R(rng, dt, (1, 2, 271)), [271], [1, 2, 257], ac], {}),
                          ("upsample_trilinear3d_backward", [R(rng, dt, (1, 2, 5, 29, 41)), [5, 29, 41],
                                                             [1, 2, 3, 13, 17], ac], {})]
        for (n, c, ih, iw), (oh, ow) in (((2, 3, 17, 23), (40, 31)), ((1, 40, 28, 28), (56, 56)), ((3, 2, 30, 40), (11, 57)),
                                         ((2, 3, 9, 23), (18, 46)), ((1, 2, 5, 9), (10, 18))):
            a = rand(rng, dt, (n, c, oh, ow))
            a[:, :, :2] = -0.0  # grad_input's first row sums 0 + -0.0 + ...: +0.0, as torch's zeroed start gives
            g = T(a, dt)
            cases.append(("upsample_nearest2d_backward", [g, [oh, ow], [n, c, ih, iw]], {}))
            for ac in (False, True):
                cases.append(("upsample_bilinear2d_backward", [g, [oh, ow], [n, c, ih, iw], ac], {}))
        for (n, c, iw), ow in (((2, 3, 57), 130), ((4, 8, 300), 71)):
            g = R(rng, dt, (n, c, ow))
            cases.append(("upsample_nearest1d_backward", [g, [ow], [n, c, iw]], {}))
            for ac in (False, True):
                cases.append(("upsample_linear1d_backward", [g, [ow], [n, c, iw], ac], {}))
    assert_bits_as_torch(server, cases)
