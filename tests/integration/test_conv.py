"""Convolution (kernels/shape_conv.c, cpu/conv.c, composite/conv.c):
aten::convolution, aten::convolution_backward and the conv1d/2d/3d (+
.padding) and conv_transpose1d/2d/3d wrappers against PyTorch 1.13 on fresh
random shapes: odd sizes, batch 0 and 1, strides, padding larger than the
kernel, dilation, groups, depthwise and 1x1 (the CPU kernel's special
paths), transposed with output_padding, unbatched inputs, non-contiguous
(stored, transposed) inputs, float64 at a tight tolerance, float32 and
bfloat16; and the refusals with torch's messages. Gradients through
ConvolutionBackward0 are in test_autograd.py."""

import numpy as np

from conftest import torch_ref

TOL = {"float64": 1e-10, "float32": 2e-5, "bfloat16": 2e-2, "int64": 0, "int32": 0, "int16": 0, "int8": 0,
       "uint8": 0, "bool": 0, "float16": 1e-3}


def T(a, dtype=None):
    a = np.asarray(a)
    return {"dtype": dtype or str(a.dtype), "shape": list(a.shape), "data": a.reshape(-1).tolist()}


def R(rng, dt, shape):
    if dt in ("int64", "int32", "int16", "int8", "uint8", "bool"):
        return T(rng.integers(0 if dt in ("uint8", "bool") else -9, 2 if dt == "bool" else 10, shape).astype(
            "bool" if dt == "bool" else dt), dt)
    return T(rng.standard_normal(shape).astype(np.float32 if dt == "bfloat16" else dt), dt)


def bf16_round(a):
    """float32 values rounded to bfloat16's (nearest even), kept as float32."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def as_f32_ref(args):
    """torch 1.13's CPU bfloat16 transposed convolution is a defect (oneDNN
    runs it as a plain convolution, ignoring `transposed`): the reference
    is torch's float32 transposed convolution of the same bfloat16 values."""
    out = []
    for a in args:
        if isinstance(a, dict) and a.get("dtype") == "bfloat16":
            a = T(bf16_round(np.array(a["data"], np.float32)).reshape(a["shape"]), "float32")
        out.append(a)
    return out


def post(server, op, args, headers=None):
    return server.post(f"/v1/ops/{op}", {"args": args}, headers=headers or {})


def close(got, exp, dt):
    """Equal within the dtype's tolerance, relative to the result's scale
    (a convolution sums many products, so cancellation leaves absolute
    error at the size of the largest terms)."""
    got, exp = np.asarray(got, np.float64), np.asarray(exp, np.float64)
    if dt == "bool":
        exp = exp != 0
    scale = max(1.0, float(np.abs(exp).max())) if exp.size else 1.0
    return got.shape == exp.shape and np.allclose(got, exp, rtol=TOL[dt], atol=TOL[dt] * scale)


def check(server, cases, headers=None):
    """cases: (op, args, out index or None for the forward's one result,
    the args torch gets when they differ (stored refs replaced))."""
    reqs = []
    for op, args, k, targs in cases:
        if targs is None and op.startswith("conv") and any(isinstance(a, dict) and a.get("dtype") == "bfloat16"
                                                          for a in args) and (
                op.startswith("conv_transpose") or (op.startswith("convolution") and
                                                    args[6 if op == "convolution" else 7] is True)):
            targs = as_f32_ref(args)
        reqs.append({"op": op, "args": targs if targs is not None else args, "out": k or 0})
    want = torch_ref(reqs)
    bad = []
    for (op, args, k, _), w in zip(cases, want):
        r = post(server, op, args, headers)
        what = f"{op} {[a['dtype'] + str(a['shape']) if isinstance(a, dict) and 'dtype' in a else a for a in args]}"
        if "error" in w:
            if not 400 <= r.status_code < 500:
                bad.append(f"{what}: torch raised {w['error']!r}, server {r.status_code} {r.text[:200]}")
            elif r.json()["error"]["message"] not in w["error"]:
                bad.append(f"{what}: message {r.json()['error']['message']!r} vs torch {w['error']!r}")
            continue
        if r.status_code != 200:
            bad.append(f"{what}: torch ok, server {r.status_code} {r.text[:300]}")
            continue
        o = r.json()["outputs"][k or 0]
        if w["dtype"] == "float32" and o["dtype"] == "bfloat16":  # an as_f32_ref reference
            w["dtype"] = "bfloat16"
        if o["dtype"] != w["dtype"] or o["shape"] != w["shape"]:
            bad.append(f"{what}: {o['dtype']}{o['shape']} vs torch {w['dtype']}{w['shape']}")
            continue
        if not close(o["data"], w["value"], o["dtype"]):
            d = np.abs(np.asarray(o["data"], np.float64) - np.asarray(w["value"], np.float64))
            bad.append(f"{what}: max difference {d.max()} (of {np.abs(w['value']).max()})")
    assert not bad, f"{len(bad)} of {len(cases)} disagree:\n" + "\n".join(bad[:25])


def geometry(rng, nd, transposed):
    """A random valid convolution geometry of nd spatial dims."""
    while True:
        g = int(rng.integers(1, 4))
        cin, cout = g * int(rng.integers(1, 4)), g * int(rng.integers(1, 4))
        k = [int(rng.integers(1, 4)) for _ in range(nd)]
        size = [int(rng.integers(1, 8 if nd < 3 else 6)) for _ in range(nd)]
        stride = [int(rng.integers(1, 4)) for _ in range(nd)]
        dil = [int(rng.integers(1, 3)) for _ in range(nd)]
        pad = [int(rng.integers(0, 4)) for _ in range(nd)]  # beyond the kernel too
        opad = [int(rng.integers(0, max(s, d))) for s, d in zip(stride, dil)] if transposed else [0] * nd
        if transposed:
            out = [(i - 1) * s - 2 * p + d * (kk - 1) + o + 1 for i, s, p, d, kk, o in zip(size, stride, pad, dil, k, opad)]
            if min(out) >= 1:
                return g, cin, cout, k, size, stride, pad, dil, opad
        elif all(i + 2 * p >= d * (kk - 1) + 1 for i, p, d, kk in zip(size, pad, dil, k)):
            return g, cin, cout, k, size, stride, pad, dil, opad


def conv_case(rng, dt, nd, transposed, n=None, bias=None):
    g, cin, cout, k, size, stride, pad, dil, opad = geometry(rng, nd, transposed)
    n = int(rng.integers(0, 4)) if n is None else n
    x = R(rng, dt, [n, cin] + size)
    w = R(rng, dt, ([cin, cout // g] if transposed else [cout, cin // g]) + k)
    b = R(rng, dt, [cout]) if (rng.random() < 0.6 if bias is None else bias) else None
    return [x, w, b, stride, pad, dil, transposed, opad, g]


def out_shape(a):
    """The output shape of convolution's arguments a."""
    x, w, _, stride, pad, dil, transposed, opad, g = a
    nd = len(x["shape"]) - 2
    stride, pad, dil, opad = [(v * nd if len(v) == 1 else v) for v in (stride, pad, dil, opad)]
    size = []
    for i, (n, k) in enumerate(zip(x["shape"][2:], w["shape"][2:])):
        if transposed:
            size.append((n - 1) * stride[i] - 2 * pad[i] + dil[i] * (k - 1) + opad[i] + 1)
        else:
            size.append((n + 2 * pad[i] - dil[i] * (k - 1) - 1) // stride[i] + 1)
    return [x["shape"][0], w["shape"][1] * g if transposed else w["shape"][0]] + size


def test_convolution_random_shapes(server, rng):
    cases = []
    for dt in ("float64", "float32", "bfloat16"):
        for nd in (1, 2, 3):
            for transposed in (False, True):
                for i in range(6 if dt != "bfloat16" else 2):
                    cases.append(("convolution", conv_case(rng, dt, nd, transposed, n=1 if i == 0 else None), None, None))
    check(server, cases)


def test_convolution_special_paths(server, rng):
    """depthwise (groups == channels), 1x1 stride 1 (no columns, and the
    direct kernel's pointwise tile), batch 0, channels of zero width, larger
    odd images."""
    cases = []
    for dt in ("float64", "float32"):
        for nd, size in ((1, [17]), (2, [13, 9]), (3, [5, 6, 7])):
            c = 5
            for stride, pad, dil in ((1, 1, 1), (2, 0, 1), (1, 3, 2)):
                x = R(rng, dt, [2, c] + size)
                cases.append(("convolution", [x, R(rng, dt, [c, 1] + [3] * nd), R(rng, dt, [c]), [stride], [pad], [dil],
                                              False, [0], c], None, None))
            # depthwise with a channel multiplier goes through the GEMM path
            cases.append(("convolution", [R(rng, dt, [2, 3] + size), R(rng, dt, [6, 1] + [3] * nd), None, [1], [1], [1],
                                          False, [0], 3], None, None))
            for transposed in (False, True):
                w = R(rng, dt, [7, 4] + [1] * nd) if not transposed else R(rng, dt, [4, 7] + [1] * nd)
                cases.append(("convolution", [R(rng, dt, [3, 4] + size), w, R(rng, dt, [7]), [1], [0], [1], transposed,
                                              [0], 1], None, None))
            cases.append(("convolution", [R(rng, dt, [0, 4] + size), R(rng, dt, [6, 2] + [2] * nd), None, [1], [0], [1],
                                          False, [0], 2], None, None))
        cases.append(("convolution", [R(rng, dt, [2, 16, 28, 31]), R(rng, dt, [24, 16, 3, 3]), R(rng, dt, [24]), [2, 1],
                                      [1, 2], [1, 1], False, [0], 1], None, None))
    # 1x1 with 8+ output channels per group: conv_direct.c's pointwise GEMM tile on AVX-512 (positions
    # past a 48-wide panel, a masked tail, groups, long sums)
    for n, cin, cout, g, size in ((2, 70, 24, 1, [7, 9]), (1, 12, 34, 2, [50]), (3, 40, 16, 1, [3, 4, 5])):
        cases.append(("convolution", [R(rng, "float32", [n, cin] + size), R(rng, "float32", [cout, cin // g] +
                                      [1] * len(size)), R(rng, "float32", [cout]), [1], [0], [1], False, [0], g],
                      None, None))
    check(server, cases)


def test_wrappers(server, rng):
    cases = []
    for dt in ("float64", "float32"):
        for nd, op, top in ((1, "conv1d", "conv_transpose1d"), (2, "conv2d", "conv_transpose2d.input"),
                            (3, "conv3d", "conv_transpose3d.input")):
            size = [7, 6, 5][:nd]
            for batched in (True, False):
                lead = [2, 4] if batched else [4]
                x, w, b = R(rng, dt, lead + size), R(rng, dt, [6, 2] + [3] * nd), R(rng, dt, [6])
                cases += [(op, [x, w, b, [2], [1], [1], 2], None, None),
                          (op, [x, w], None, None),
                          (op + ".padding", [x, w, b, [1], "same", [1], 2], None, None),
                          (op + ".padding", [x, R(rng, dt, [6, 2] + [2] * nd), b, [1], "same", [3], 2], None, None),
                          (op + ".padding", [x, R(rng, dt, [6, 2] + [4] * nd), None, [1], "same", [1], 2], None, None),
                          (op + ".padding", [x, w, b, [1], "valid", [1], 2], None, None),
                          (top, [x, R(rng, dt, [4, 3] + [3] * nd), R(rng, dt, [6]), [2], [1], [1], 2, [1]], None, None),
                          (top, [x, R(rng, dt, [4, 3] + [2] * nd)], None, None)]
    check(server, cases)


def test_integer_and_other_dtypes(server, rng):
    """torch 1.13's CPU convolutions compute int64 on every path (wrapping),
    the narrower integers only without dilation or transposition; float16
    and bool nowhere, but an empty input reaches no kernel (any dtype); the
    backward takes integers through the dilated kernels (int64) and for a
    bias gradient alone."""
    cases = []
    for dt in ("int64", "int32", "int16", "int8", "uint8", "bool", "float16"):
        for nd in (1, 2, 3):
            for transposed, dil in ((False, 1), (False, 2), (True, 1)):
                g = 1 + (nd == 2)
                x = R(rng, dt, [2, 2 * g] + [5] * nd)
                w = R(rng, dt, ([2 * g, 3] if transposed else [3 * g, 2]) + [2] * nd)
                b = R(rng, dt, [3 * g])
                a = [x, w, b, [2], [1], [dil], transposed, [1 if transposed else 0], g]
                cases.append(("convolution", a, None, None))
                if nd == 2:
                    gy = R(rng, dt, out_shape(a))
                    for mask in ([True, True, True], [False, False, True]):
                        cases += [("convolution_backward", [gy, x, w, [3 * g]] + a[3:] + [mask], k, None)
                                  for k in range(3) if mask[k]]
                    # nothing asked: torch reaches no kernel but the dilated one, so no other refuses a dtype
                    # (difftest seed 7114)
                    if dil == 1:
                        r = post(server, "convolution_backward", [gy, x, w, [3 * g]] + a[3:] + [[False] * 3])
                        assert r.status_code == 200 and r.json()["outputs"] == [{"value": None}] * 3, \
                            (dt, transposed, r.text[:300])
        e = R(rng, dt, [0, 2, 4, 4])
        cases.append(("convolution", [e, R(rng, dt, [3, 2, 3, 3]), None, [1], [1], [2], False, [0], 1], None, None))
    # a float32 bias with an int64 input is cast (the slow kernels'); a float64 one with float64 too
    cases.append(("convolution", [R(rng, "int64", [1, 2, 5]), R(rng, "int64", [3, 2, 2]), R(rng, "float32", [3]),
                                  [1], [0], [1], False, [0], 1], None, None))
    cases.append(("convolution", [R(rng, "float64", [1, 2, 5]), R(rng, "float64", [3, 2, 2]),
                                  R(rng, "float32", [3]), [1], [0], [1], False, [0], 1], None, None))
    check(server, cases)


def test_errors(server, rng):
    x, w = R(rng, "float32", [2, 4, 7, 7]), R(rng, "float32", [6, 2, 3, 3])
    f = lambda *a: ("convolution", list(a), None, None)  # noqa: E731
    xt = R(rng, "float32", [2, 6, 7, 7])
    cases = [f(x, R(rng, "float32", [6, 4]), None, [1], [0], [1], False, [0], 1),
             f(x, w, None, [1], [0], [1], False, [0], 0),
             f(x, w, None, [1, 1, 1], [0], [1], False, [0], 2),
             f(x, w, None, [1], [0, 0, 0], [1], False, [0], 2),
             f(x, w, None, [1], [-1], [1], False, [0], 2),
             f(x, w, None, [0], [0], [1], False, [0], 2),
             f(x, w, None, [1], [0], [0], False, [0], 2),
             f(x, w, None, [1], [0], [1], True, [-1], 2),
             f(R(rng, "float32", [4, 7, 7]), w, None, [1], [0], [1], False, [0], 2),
             f(x, w, None, [1], [0], [1], False, [0], 7),
             f(x, w, None, [1], [0], [1], False, [0], 4),
             f(x, w, None, [1], [0], [1], False, [0], 1),
             f(x, w, R(rng, "float32", [5]), [1], [0], [1], False, [0], 2),
             f(x, w, R(rng, "float32", [6, 1]), [1], [0], [1], False, [0], 2),
             f(R(rng, "float32", [2, 4, 2, 7]), w, None, [1], [0], [1], False, [0], 2),
             f(R(rng, "float32", [2, 4, 0, 7]), w, None, [1], [1], [1], False, [0], 2),
             f(x, w, None, [1], [0], [1], True, [0], 2),
             f(xt, w, R(rng, "float32", [5]), [1], [0], [1], True, [0], 2),
             f(xt, w, None, [1], [0], [1], True, [1], 2),
             f(R(rng, "float32", [2, 6, 1, 1]), w, None, [1], [3], [1], True, [0], 2),
             f(R(rng, "float64", [2, 4, 7, 7]), w, None, [1], [0], [1], False, [0], 2),
             f(x, w, R(rng, "float64", [6]), [1], [0], [1], False, [0], 2),
             f(x, w, None, [1], [0], [1], True, [0, 0, 0], 2),
             f(R(rng, "float16", [2, 4, 7, 7]), R(rng, "float16", [6, 2, 3, 3]), None, [1], [0], [1], False, [0], 2),
             f(R(rng, "float16", [2, 4, 7]), R(rng, "float16", [6, 2, 3]), None, [1], [0], [2], False, [0], 2),
             f(R(rng, "float16", [1, 6, 3, 3, 3]), R(rng, "float16", [6, 2, 2, 2, 2]), None, [1], [0], [1], True, [0], 2),
             ("conv2d", [R(rng, "float32", [7, 7]), w], None, None),
             ("conv1d", [R(rng, "float32", [7, 7, 7, 7]), R(rng, "float32", [3, 7, 3])], None, None),
             ("conv_transpose2d.input", [R(rng, "float32", [7, 7]), w], None, None),
             ("conv2d.padding", [x, w, None, [2], "same", [1], 2], None, None),
             ("conv2d.padding", [x, w, None, [1], "foo", [1], 2], None, None)]
    check(server, cases)


def test_convolution_backward(server, rng):
    cases = []
    for dt in ("float64", "float32", "bfloat16"):
        for nd in (1, 2, 3):
            for transposed in (False, True):
                for _ in range(3 if dt != "bfloat16" else 1):
                    a = conv_case(rng, dt, nd, transposed, bias=True)
                    gy = R(rng, dt, out_shape(a))
                    args = [gy, a[0], a[1], [a[2]["shape"][0]]] + a[3:] + [[True, True, True]]
                    cases += [("convolution_backward", args, k, None) for k in range(3)]
    check(server, cases)
    # gradients not asked for are None; the others as torch's
    a = conv_case(rng, "float32", 2, False, n=2, bias=True)
    args = [R(rng, "float32", out_shape(a)), a[0], a[1], None] + a[3:] + [[False, True, False]]
    r = post(server, "convolution_backward", args)
    assert r.status_code == 200, r.text
    outs = r.json()["outputs"]
    assert outs[0] == {"value": None} and outs[2] == {"value": None}, outs
    check(server, [("convolution_backward", args, 1, None)])


def test_non_contiguous_inputs(server, rng):
    """Stored tensors transposed on the server (views with swapped strides)
    give torch's result on the transposed data."""
    s = server.post("/v1/sessions").json()["id"]
    h = {"X-OD-Session": s}
    try:
        cases = []
        for dt in ("float64", "float32", "bfloat16"):
            xa = rng.standard_normal((2, 5, 9, 4)).astype(np.float32 if dt == "bfloat16" else dt)
            wa = rng.standard_normal((3, 3, 3, 4)).astype(xa.dtype)
            refs = []
            for a in (xa, wa):
                r = server.post("/v1/ops/transpose.int", {"args": [T(a, dt), 1, 3], "keep": True}, headers=h)
                assert r.status_code == 200, r.text
                refs.append({"ref": r.json()["outputs"][0]["id"]})
            xt, wt = T(np.swapaxes(xa, 1, 3), dt), T(np.swapaxes(wa, 1, 3), dt)
            cases.append(("convolution", [refs[0], refs[1], None, [2, 1], [1], [1], False, [0], 1], None,
                          [xt, wt, None, [2, 1], [1], [1], False, [0], 1]))
            # a transposed convolution's weight [C_in, C_out, k...] as a view too
            wta = rng.standard_normal((3, 4, 2, 3)).astype(xa.dtype)
            r = server.post("/v1/ops/transpose.int", {"args": [T(wta, dt), 0, 1], "keep": True}, headers=h)
            wref = {"ref": r.json()["outputs"][0]["id"]}
            cases.append(("convolution", [refs[0], wref, None, [2, 1], [1], [1], True, [1, 0], 1], None,
                          as_f32_ref([xt, T(np.swapaxes(wta, 0, 1), dt), None, [2, 1], [1], [1], True, [1, 0], 1])))
        check(server, cases, headers=h)
    finally:
        server.session.delete(server.url + f"/v1/sessions/{s}")


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return set(next(line for line in f if line.startswith("flags")).split()[2:])
    except (OSError, StopIteration):
        return set()


def direct_cases(rng, n_cases):
    """float32 / bfloat16 forward convolutions with enough output channels per group for the direct
    kernel (kernels/cpu/conv_direct.c): 4..40 per group (blocks and tails of 8 and 16 lanes), rows up
    to 45 wide (every tile width), strides, dilation, padding beyond the kernel, 1-3 spatial dims."""
    cases = []
    for i in range(n_cases):
        nd, g = 1 + i % 3, int(rng.integers(1, 3))
        cin, cg = g * int(rng.integers(1, 6)), int(rng.integers(4, 41))
        k = [int(rng.integers(1, 4)) for _ in range(nd)]
        stride = [int(rng.integers(1, 4)) for _ in range(nd)]
        dil = [int(rng.integers(1, 3)) for _ in range(nd)]
        pad = [int(rng.integers(0, 3)) for _ in range(nd)]
        size = [max(d * (kk - 1) + 1 - 2 * p, 1) + int(rng.integers(0, 40 if j == nd - 1 else 6))
                for j, (d, kk, p) in enumerate(zip(dil, k, pad))]
        dt = "bfloat16" if i % 4 == 3 else "float32"
        x = R(rng, dt, [int(rng.integers(1, 3)), cin] + size)
        w = R(rng, dt, [g * cg, cin // g] + k)
        b = R(rng, dt, [g * cg]) if i % 2 else None
        cases.append(("convolution", [x, w, b, stride, pad, dil, False, [0] * nd, g], None, None))
    return cases


def direct_backward_cases(rng, n_cases):
    """convolution_backward of stride-1 float32 / bfloat16 convolutions with 4..40 input channels per
    group: conv.c runs grad_input as a convolution of grad_output with the flipped weights on the
    direct kernel where the padding is within the kernel's reach (dil * (k - 1)), im2col's way past it;
    and every other case's weight gradient (any stride) on conv_direct.c's AVX-512 product; dilation,
    groups and 1-3 spatial dims."""
    cases = []
    for i in range(n_cases):
        nd, g = 1 + i % 3, int(rng.integers(1, 3))
        cin, cg = g * int(rng.integers(4, 41)), int(rng.integers(1, 9))
        k = [int(rng.integers(1, 4)) for _ in range(nd)]
        dil = [int(rng.integers(1, 3)) for _ in range(nd)]
        pad = [int(rng.integers(0, d * (kk - 1) + 1 + (i % 5 == 4))) for d, kk in zip(dil, k)]
        size = [max(d * (kk - 1) + 1 - 2 * p, 1) + int(rng.integers(0, 30 if j == nd - 1 else 5))
                for j, (d, kk, p) in enumerate(zip(dil, k, pad))]
        dt = "bfloat16" if i % 4 == 3 else "float32"
        stride = [1] if i % 2 else [int(rng.integers(1, 3)) for _ in range(nd)]
        a = [R(rng, dt, [int(rng.integers(1, 3)), cin] + size), R(rng, dt, [g * cg, cin // g] + k), None, stride,
             pad, dil, False, [0] * nd, g]
        args = [R(rng, dt, out_shape(a)), a[0], a[1], None] + a[3:] + [[True, i % 2 == 0, False]]
        cases += [("convolution_backward", args, out, None) for out in ((0, 1) if i % 2 == 0 else (0,))]
    return cases


def test_direct_kernel_on_each_instruction_set(server, make_server, rng):
    """The direct kernel (forward, and backward's grad_input) against torch on the default server (the
    best instruction set the CPU has) and on one held to AVX2 (OD_CONV_DIRECT=avx2) and one to the im2col path (off). Its own
    double-precision checks on every tile width are tests/unit/test_cpu_conv_direct.c."""
    check(server, direct_cases(rng, 12) + direct_backward_cases(rng, 12))
    check(make_server(env={"OD_CONV_DIRECT": "off"}), direct_cases(rng, 6) + direct_backward_cases(rng, 6))
    if not {"avx2", "fma"} <= cpu_flags():
        import pytest
        pytest.skip("this CPU has no AVX2 and FMA: the direct kernel does not run here")
    check(make_server(env={"OD_CONV_DIRECT": "avx2"}), direct_cases(rng, 12) + direct_backward_cases(rng, 12))
