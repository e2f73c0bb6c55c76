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
defines them. offset2bag is compared in every mode (in mode 'sum' torch's
fast path for float32/float16 without padding_idx leaves it empty, and the
server too; _embedding_bag_backward rebuilds it); bag_size and
max_indices are skipped in mode 'sum' (zeros, or for
_embedding_bag_forward_only a tensor of offsets' size, uninitialised) and
bag_size/max_indices of _embedding_bag_forward_only with include_last_offset
(torch sizes them by offsets and leaves the last uninitialised, and in mode
'max' writes past the end of its heap block). Also skipped:
include_last_offset with offsets[-1] < len(indices) in mode 'max' (the
same overrun in torch), and mode values other than 0-2 (torch segfaults).
"""

import itertools

import numpy as np

from conftest import assert_bits_as_torch, from_json, torch_ref
from test_scatter_pad_search import ALL, R, T, check, rand


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
    # float32 within 1e-5 of the largest magnitude here (its bits, and bfloat16's:
    # test_bicubic_forward_bits_as_torch)
    f32, w = bf[0][1], torch_ref([{"op": op, "args": bf[0][1]}])
    got = server.post(f"/v1/ops/{op}", {"args": f32})
    assert got.status_code == 200, got.text
    w32 = np.array(w[0]["value"], np.float64)
    assert np.abs(np.array(got.json()["outputs"][0]["data"], np.float64) - w32).max() <= 1e-5 * np.abs(w32).max()


def test_bicubic_forward_bits_as_torch(server, rng):
    """upsample_bicubic2d gives torch's bits (cpu/resample.c replays ATen's CPU forward): float32 and
    float64 with its taps' fused multiply-adds, the source index in double, the floor through floorf
    and its fused four-tap sums; bfloat16 in bfloat16 steps, every product and sum rounded, its scale
    a bfloat16 quotient. Up and down, align_corners, explicit scales (given and from scale_factors),
    signed values whose lobes cancel, sizes past 256 (not bfloat16 numbers)."""
    op, cases = "upsample_bicubic2d", []
    for dt in ("float32", "float64", "bfloat16"):
        cases.append((op, [R(rng, dt, (1, 2, 3, 257)), [5, 271], False], {}))
        x = R(rng, dt, (2, 3, 13, 17))
        for ac in (False, True):
            for out in ([29, 41], [7, 9], [40, 11], [13, 17]):
                cases.append((op, [x, out, ac], {}))
            cases += [(op, [x, [30, 35], ac, 2.3, 2.1], {}), (f"{op}.vec", [x, None, ac, [2.3, 1.7]], {}),
                      (f"{op}.vec", [x, None, ac, [0.45, 0.6]], {})]
    assert_bits_as_torch(server, cases)


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
    # float32 and the 16-bit types bit for bit: torch 1.13's CPU backward computes in the dtype itself
    # (the 16-bit gradients accumulate in it, several units in the last place from a float sum), with
    # no clamp of an explicit scale's source index past the input (2.5 / 0.5 below reach past it)
    reqs = []
    for dt in ("float32", "float16", "bfloat16"):
        for _ in range(6):
            oh, ow, ih, iw = (int(v) for v in rng.integers(1, 10, 4))
            g = T(rand(rng, "float32", (2, 3, oh, ow)) * 2, dt)
            scales = [[], [2.5, 0.5], [float(rng.uniform(0.3, 3)), float(rng.uniform(0.3, 3))]][int(rng.integers(0, 3))]
            reqs.append({"op": "upsample_bicubic2d_backward", "out": 0,
                         "args": [g, [oh, ow], [2, 3, ih, iw], bool(rng.integers(0, 2))] + scales})
    for req, w in zip(reqs, torch_ref(reqs)):
        r = server.post("/v1/ops/upsample_bicubic2d_backward", {"args": req["args"]})
        assert r.status_code == 200, r.text
        got = np.array(r.json()["outputs"][0]["data"], np.float32)  # shortest float32 text
        assert np.array_equal(got, np.array(w["value"], np.float32)), (req["args"][0]["dtype"], req["args"][1:], got, w)


def test_bicubic_strided(server, rng):
    """A transposed (non-contiguous) input resamples as its contiguous copy does."""
    a = rand(rng, "float64", (2, 4, 5, 6))
    runs = [("upsample_bicubic2d", [[7, 5], False]), ("upsample_bicubic2d", [[3, 9], True])]
    want = torch_ref([{"op": op, "args": [T(np.ascontiguousarray(np.swapaxes(a, -2, -1)))] + rest}
                      for op, rest in runs])
    for (op, rest), w in zip(runs, want):
        body = {"steps": [{"op": "transpose.int", "args": [T(a), -2, -1]},
                          {"op": op, "args": [{"ref": "$0"}] + rest}], "outputs": ["$1"]}
        r = server.post("/v1/run", body)
        assert r.status_code == 200, r.text
        got = from_json(r.json()["outputs"][0])
        np.testing.assert_allclose(got, np.array(w["value"]).reshape(w["shape"]), rtol=1e-10, atol=1e-12)


# ---- embedding_bag -----------------------------------------------------------------------


def I(a, dt="int64"):
    return T(np.asarray(a, dtype=dt), dt)


def bag_outs(op, mode, ilo):
    """The outputs torch 1.13 defines (see the module's docstring)."""
    if not op.startswith("_embedding_bag") or op.endswith("backward"):
        return [0] if op.endswith("backward") else ([0, 1, 2, 3] if mode else [0, 1])
    if mode == 0:  # offset2bag: empty on the CPU's fast path (float32 / float16, no padding_idx), else filled
        return [0, 1]
    if op == "_embedding_bag_forward_only" and ilo:
        return [0, 1]
    return [0, 1, 2, 3]


def check_bags(server, cases, rtol=1e-6):
    """cases: (op, args); compares the outputs bag_outs names, and refusals."""
    reqs, where = [], []
    for op, args in cases:
        mode = args[4] if len(args) > 4 and isinstance(args[4], int) and not isinstance(args[4], bool) else 0
        ilo = bool(args[7]) if len(args) > 7 and op.startswith(("_embedding_bag", "embedding_bag")) and \
            not op.endswith("backward") else False
        for k in bag_outs(op, mode, ilo):
            reqs.append({"op": op, "args": args, "out": k})
            where.append((op, args, k))
    want = torch_ref(reqs)
    bad, answers = [], {}
    for (op, args, k), w in zip(where, want):
        key = id(args)
        if key not in answers:
            answers[key] = server.post(f"/v1/ops/{op}", {"args": args})
        r = answers[key]
        what = f"{op} {[a['dtype'] + str(a['shape']) if isinstance(a, dict) else a for a in args]} out {k}"
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
        # a float32 bag sum that cancels keeps the rounding of its largest terms, not of its result (the
        # ASan build's order differs from the release build's): atol scales with the outputs' magnitude
        scale = max(1.0, float(np.abs(exp[np.isfinite(exp)]).max(initial=0))) if o["dtype"] == "float32" else 1.0
        if not np.allclose(got, exp, rtol=rtol, atol=(1e-6 if rtol < 1e-3 else rtol) * scale, equal_nan=True):
            bad.append(f"{what}: {got[:8]} vs torch {exp[:8]}")
    assert not bad, f"{len(bad)} of {len(reqs)} disagree:\n" + "\n".join(bad[:25])


def bag_inputs(rng, n, nbags, V, empty=True):
    """n indices in [0, V) and non-decreasing offsets starting at 0 (some bags empty)."""
    idx = rng.integers(0, V, n)
    cuts = np.sort(rng.integers(0, n + 1, nbags - 1)) if nbags > 1 else np.array([], np.int64)
    if not empty:
        cuts = np.sort(rng.choice(np.arange(1, n), nbags - 1, replace=False)) if nbags > 1 else cuts
    return idx, np.concatenate([[0], cuts]).astype(np.int64)


def test_embedding_bag_forward(server, rng):
    cases = []
    V, D = 13, 5
    for wdt in ("float64", "float32"):
        w = R(rng, wdt, (V, D))
        for n, nb in [(17, 5), (6, 1), (9, 9), (0, 3), (4, 2)]:
            idx, off = bag_inputs(rng, n, nb, V)
            for mode in (0, 1, 2):
                for pad in (-1, int(idx[0]) if n else 3):
                    cases.append(("_embedding_bag", [w, I(idx), I(off), False, mode, False, None, False, pad]))
                    cases.append(("_embedding_bag_forward_only",
                                  [w, I(idx), I(off), False, mode, False, None, False, pad]))
                # include_last_offset: offsets end at n (torch overruns in 'max' otherwise)
                off2 = np.concatenate([off, [n]])
                cases.append(("_embedding_bag", [w, I(idx), I(off2), False, mode, False, None, True, -1]))
                if mode != 2:
                    cases.append(("_embedding_bag_forward_only", [w, I(idx), I(off2), False, mode, False, None, True, -1]))
            psw = R(rng, wdt, (n,))
            cases.append(("_embedding_bag", [w, I(idx), I(off), False, 0, False, psw, False, -1]))
            cases.append(("_embedding_bag", [w, I(idx), I(off), False, 0, False, psw, False, 2]))
        # int32 indices and offsets (outputs int32), mixed (promoted to int64)
        idx, off = bag_inputs(rng, 11, 4, V)
        for mode in (0, 1, 2):
            cases.append(("_embedding_bag", [w, I(idx, "int32"), I(off, "int32"), False, mode, False, None, False, -1]))
            cases.append(("_embedding_bag", [w, I(idx, "int32"), I(off), False, mode, False, None, False, -1]))
            # the public overloads
            cases.append(("embedding_bag", [w, I(idx), I(off), False, mode, False, None, False]))
            cases.append(("embedding_bag.padding_idx", [w, I(idx), I(off), False, mode, False, None, False,
                                                        int(idx[1]) - V]))
            cases.append(("embedding_bag.padding_idx", [w, I(idx), I(off), False, mode, False, None, False, None]))
        # small integer types: indices and offsets are read as their promoted type
        # (promoteIndicesAndOffsets), which must be int32 or int64
        for idt, odt in (("int8", "int64"), ("int64", "int8"), ("int32", "int16"), ("uint8", "int64"),
                         ("int16", "int32")):
            for mode in (0, 1, 2):
                cases.append(("_embedding_bag", [w, I(idx, idt), I(off, odt), False, mode, False, None, False, -1]))
                cases.append(("embedding_bag.padding_idx", [w, I(idx, idt), I(off, odt), False, mode, False, None,
                                                            False, None]))
    # a weight with ties and NaN for 'max' (the first maximum wins; NaN never replaces)
    wt = T(np.array([[1.0, 2.0], [1.0, float("nan")], [3.0, 2.0]]), "float64")
    cases.append(("_embedding_bag", [wt, I([0, 1, 2, 1, 0]), I([0, 2]), False, 2, False, None, False, -1]))
    check_bags(server, cases)
    # float16: torch's sums in float (fast path) or half
    w = R(rng, "float16", (V, D))
    idx, off = bag_inputs(rng, 15, 4, V)
    check_bags(server, [("_embedding_bag", [w, I(idx), I(off), False, m, False, None, False, -1]) for m in (0, 1, 2)],
               rtol=1e-2)


def test_embedding_bag_errors(server, rng):
    V, D = 7, 3
    w = R(rng, "float32", (V, D))
    wd = R(rng, "float64", (V, D))
    idx = I([1, 2, 3, 4, 5])
    off = I([0, 2, 2])
    A = lambda *a: ["_embedding_bag", list(a)]  # noqa: E731
    cases = [
        A(w, idx, I([1, 2]), False, 0, False, None, False, -1),
        A(w, idx, I([0, 7]), False, 1, False, None, False, -1),
        A(w, I([1, 9]), I([0]), False, 0, False, None, False, -1),     # fbgemm's message
        A(wd, I([1, 9]), I([0]), False, 0, False, None, False, -1),    # the slow path's
        A(w, I([1, -1]), I([0]), False, 1, False, None, False, -1),
        A(w, I([1, 2, 9, 3, -1], "int32"), I([0, 2], "int32"), False, 0, False, None, False, -1),  # the first bad one
        A(w, I([4, -3], "int32"), I([0], "int32"), False, 1, False, None, False, -1),
        A(wd, I([0, 6, 7]), I([0]), False, 0, False, None, False, -1),  # V itself
        A(w, I([1, 9]), I([0]), False, 2, False, None, False, -1),
        A(w, idx, off, False, 1, False, R(rng, "float32", (5,)), False, -1),
        A(w, idx, off, False, 0, False, R(rng, "float64", (5,)), False, -1),
        A(w, idx, off, False, 0, False, R(rng, "float32", (4,)), False, -1),
        A(w, idx, off, False, 0, False, R(rng, "float32", (5, 1)), False, -1),
        A(w, idx, I([], "int64"), False, 0, False, None, True, -1),
        A(w, R(rng, "float32", (5,)), off, False, 0, False, None, False, -1),
        A(w, idx, R(rng, "float32", (3,)), False, 0, False, None, False, -1),
        A(w, I([1, 2, 3, 4, 5], "uint8"), I([0, 2, 2], "int8"), False, 0, False, None, False, -1),  # int16
        A(w, I([1, 2, 3, 4, 5], "int16"), I([0, 2, 2], "int16"), False, 1, False, None, False, -1),
        ["embedding_bag", [w, I([1, 2, 3, 4, 5], "int8"), I([0, 2, 2], "int8"), False, 0, False, None, False]],
        A(R(rng, "bfloat16", (V, D)), idx, off, False, 0, False, None, False, -1),
        A(R(rng, "int64", (V, D)), idx, off, False, 0, False, None, False, -1),
        A(R(rng, "float32", (V,)), idx, off, False, 0, False, None, False, -1),
        ["embedding_bag.padding_idx", [w, idx, off, False, 0, False, None, False, 9]],
        ["embedding_bag.padding_idx", [w, idx, off, False, 0, False, None, False, -8]],
        ["_embedding_bag_per_sample_weights_backward", [R(rng, "float32", (3, D)), w, idx, off,
                                                        I([0, 0, 2, 2, 2]), 1, -1]],
    ]
    check_bags(server, [tuple(c) for c in cases])
    # refusals of our own where torch 1.13 crashes, reads garbage or has no layout
    for op, args, text in [
        ("_embedding_bag", [w, idx, off, False, 3, False, None, False, -1], "mode has to be"),
        ("_embedding_bag", [w, I([[1, 2], [3, 4]]), off, False, 0, False, None, False, -1], "1D"),
        ("_embedding_bag", [w, idx, I([[0], [2]]), False, 0, False, None, False, -1], "1D"),
        ("_embedding_bag", [w, idx, I([0, 3, 1]), False, 0, False, None, False, -1], "non-decreasing"),
        ("_embedding_bag_backward", [R(rng, "float32", (3, D)), idx, off, I([0, 0, 2, 2, 2]), I([2, 0, 3]),
                                     I([0, 0, 0]), V, False, 0, True, None, -1], "sparse"),
    ]:
        r = server.post(f"/v1/ops/{op}", {"args": args})
        assert r.status_code == 400 or r.status_code == 422 or 400 <= r.status_code < 500, r.text
        assert text in r.json()["error"]["message"], r.text


def test_embedding_bag_backward_ops(server, rng):
    V, D = 11, 4
    cases = []
    for gdt in ("float64", "float32"):
        for n, nb in [(14, 4), (5, 1), (0, 2)]:
            idx, off = bag_inputs(rng, n, nb, V)
            o2b = np.searchsorted(off, np.arange(n), side="right") - 1
            ends = np.concatenate([off[1:], [n]])
            g = R(rng, gdt, (nb, D))
            for pad in (-1, int(idx[0]) if n else 2):
                keep = (idx != pad)
                bsz = np.array([keep[a:b].sum() for a, b in zip(off, ends)], np.int64)
                maxi = rng.integers(0, V, (nb, D))
                for mode in (0, 1, 2):
                    cases.append(("_embedding_bag_dense_backward",
                                  [g, I(idx), I(o2b), I(bsz), I(maxi), V, False, mode, None, pad]))
                    cases.append(("_embedding_bag_backward",
                                  [g, I(idx), I(off), I(o2b), I(bsz), I(maxi), V, False, mode, False, None, pad]))
                psw = R(rng, gdt, (n,))
                cases.append(("_embedding_bag_dense_backward",
                              [g, I(idx), I(o2b), I(bsz), I(maxi), V, False, 0, psw, pad]))
                cases.append(("_embedding_bag_per_sample_weights_backward",
                              [g, R(rng, gdt, (V, D)), I(idx), I(off), I(o2b), 0, pad]))
            # torch's 'sum' fast path hands back an empty offset2bag
            cases.append(("_embedding_bag_backward",
                          [g, I(idx), I(off), I([]), I(np.zeros(nb, np.int64)), I(np.zeros(nb, np.int64)), V, False,
                           0, False, None, -1]))
            cases.append(("_embedding_bag_per_sample_weights_backward",
                          [g, R(rng, gdt, (V, D)), I(idx), I(off), I([]), 0, -1]))
    # scale_grad_by_freq: torch 1.13 divides group k of the sorted indices by the count of the
    # k-th sorted index (not of its own), so the test uses indices whose counts are all equal
    idx = np.repeat(rng.permutation(V)[:4], 3)
    rng.shuffle(idx)
    off = np.array([0, 5, 5, 9])
    o2b = np.searchsorted(off, np.arange(12), side="right") - 1
    bsz = np.diff(np.concatenate([off, [12]]))
    g = R(rng, "float64", (4, D))
    for mode in (0, 1):
        cases.append(("_embedding_bag_dense_backward",
                      [g, I(idx), I(o2b), I(bsz), I(np.zeros((4, D), np.int64)), V, True, mode, None, -1]))
    check_bags(server, cases)


def test_embedding_bag_wide_rows(server, rng):
    """float32 rows of 0 to 300 columns: the AVX-512 sum / mean keeps up to 128 columns in registers per pass,
    with a masked tail (130, 300) and a second pass (300), and skips padding rows; against torch."""
    V = 50
    cases = []
    for D in (0, 16, 80, 128, 130, 300):
        w = R(rng, "float32", (V, D))
        idx, off = bag_inputs(rng, 60, 7, V)
        for mode in (0, 1, 2):
            for pad in (-1, int(idx[3])):
                cases.append(("_embedding_bag_forward_only", [w, I(idx), I(off), False, mode, False, None, False, pad]))
        cases.append(("_embedding_bag", [w, I(idx, "int32"), I(off, "int32"), False, 1, False, None, False, -1]))
    check_bags(server, cases)


def test_embedding_bag_strided(server, rng):
    """A transposed (non-contiguous) weight and a strided index vector answer as contiguous ones."""
    a = rand(rng, "float64", (5, 9))
    idx, off = bag_inputs(rng, 12, 3, 9)
    big = np.zeros(24, np.int64)
    big[::2] = idx
    want = torch_ref([{"op": "_embedding_bag", "args": [T(np.ascontiguousarray(a.T)), I(idx), I(off), False, mode,
                                                         False, None, False, -1]} for mode in (0, 1, 2)])
    for mode, w in zip((0, 1, 2), want):
        body = {"steps": [{"op": "t", "args": [T(a)]},
                          {"op": "slice.Tensor", "args": [I(big), 0, 0, 24, 2]},
                          {"op": "_embedding_bag", "args": [{"ref": "$0"}, {"ref": "$1"}, I(off), False, mode, False,
                                                            None, False, -1]}], "outputs": ["$2"]}
        r = server.post("/v1/run", body)
        assert r.status_code == 200, r.text
        got = from_json(r.json()["outputs"][0])
        np.testing.assert_allclose(got, np.array(w["value"]).reshape(w["shape"]), rtol=1e-12, atol=1e-12)


def test_embedding_bag_psw_backward_types(server, rng):
    """_embedding_bag_per_sample_weights_backward's types as torch 1.13 checks them: indices and offsets
    promoted together (offsets' own type never checked), offset2bag given or rebuilt (when empty) and read
    as the indices' type, grad's dtype choosing the kernel (bfloat16 too) and weight matching it; float16
    and bfloat16 dot products rounded at each step as c10::Half / BFloat16 arithmetic does."""
    V, D, n = 7, 3, 5
    idx, off = bag_inputs(rng, n, 2, V)
    o2b = np.searchsorted(off, np.arange(n), side="right") - 1
    g, w = R(rng, "float32", (2, D)), R(rng, "float32", (V, D))
    cases = []
    for it, ot, bt in itertools.product(("int8", "uint8", "int32", "int64"), repeat=3):
        for given in (True, False):
            cases.append(("_embedding_bag_per_sample_weights_backward",
                          [g, w, I(idx, it), I(off, ot), I(o2b if given else [], bt), 0, -1]))
    cases.append(("_embedding_bag_per_sample_weights_backward",
                  [g, w, I([], "int64"), I([0, 0]), I([], "int32"), 0, -1]))
    for gdt, wdt in itertools.product(("float16", "bfloat16", "float32", "float64"), repeat=2):
        cases.append(("_embedding_bag_per_sample_weights_backward",
                      [R(rng, gdt, (2, D)), R(rng, wdt, (V, D)), I(idx), I(off), I(o2b), 0, -1]))
    cases.append(("_embedding_bag_per_sample_weights_backward",
                  [R(rng, "int32", (2, D)), R(rng, "int32", (V, D)), I(idx), I(off), I(o2b), 0, -1]))
    check_bags(server, cases)
    # long rows in the narrow types: each partial sum rounds (exact comparison)
    n, D = 40, 96
    idx, off = bag_inputs(rng, n, 6, V)
    o2b = np.searchsorted(off, np.arange(n), side="right") - 1
    check_bags(server, [("_embedding_bag_per_sample_weights_backward",
                         [R(rng, dt, (6, D)), R(rng, dt, (V, D)), I(idx), I(off), I(o2b), 0, int(idx[3])])
                        for dt in ("float16", "bfloat16")], rtol=0)
