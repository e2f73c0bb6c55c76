"""Scaled dot-product attention (kernels/composite/attention.c, the fused
kernels kernels/cpu/attention.c and kernels/cuda/attention.cu behind
_scaled_dot_product_attention_forward) against PyTorch 1.13 on fresh random
inputs: float64 tightly, float32 and bfloat16, shapes (batch, heads, L, S, E,
Ev) with L != S, odd sizes and sizes past one tile, batch 0, empty
sequences, 3-D and 4-D inputs with broadcast batch dims, bool, float and
causal masks, fully masked rows, transposed (non-contiguous) heads; the
fused kernel against the math path; which kernel the dispatch record names;
and the refusals, with torch's messages."""

import numpy as np

from conftest import from_json, torch_ref

SDPA, FWD, MATH = "_scaled_dot_product_attention", "_scaled_dot_product_attention_forward", \
    "_scaled_dot_product_attention_math"
TOL = {"float64": dict(rtol=1e-10, atol=1e-12), "float32": dict(rtol=2e-5, atol=2e-6),
       "bfloat16": dict(rtol=3e-2, atol=2e-2)}


def T(a, dtype=None):
    a = np.asarray(a)
    data = ["NaN" if isinstance(x, float) and np.isnan(x) else "-Infinity" if x == -np.inf else x
            for x in a.reshape(-1).tolist()]
    return {"dtype": dtype or str(a.dtype), "shape": list(a.shape), "data": data}


def R(rng, shape, dt):
    a = rng.standard_normal(shape)
    if dt == "bfloat16":  # values a bfloat16 holds exactly, so both sides read the same inputs
        a = (a.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
        return T(a, "bfloat16")
    return T(a.astype(dt))


def qkv(rng, dt, bq, bk, bv, L, S, E, Ev):
    return R(rng, bq + (L, E), dt), R(rng, bk + (S, E), dt), R(rng, bv + (S, Ev), dt)


def vals(o):
    return np.array([float(x) if isinstance(x, str) else x for x in o["data"]], np.float64)


def as_float64(a):
    """a bfloat16 tensor argument as float64 (the same values: R makes them exact)"""
    return dict(a, dtype="float64") if isinstance(a, dict) and a.get("dtype") == "bfloat16" else a


def compare(server, cases, outs=(0, 1)):
    """cases: (op, args, kwargs, dtype); each output in outs against torch.
    bfloat16 outputs also against torch on the same values in float64: a
    value torch's bfloat16 steps round away from (a cancelling sum of
    rounded weights) passes when the server is at least as close to it."""
    reqs = [{"op": op, "args": a, "kwargs": kw, "out": k} for op, a, kw, _ in cases for k in outs]
    reqs += [{"op": op, "args": [as_float64(x) for x in a], "kwargs": kw, "out": k}
             for op, a, kw, dt in cases if dt == "bfloat16" for k in outs]
    res = torch_ref(reqs)
    want, ref64 = iter(res[:len(cases) * len(outs)]), iter(res[len(cases) * len(outs):])
    bad = []
    for op, args, kw, dt in cases:
        r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kw})
        what = f"{op} {[a['shape'] if isinstance(a, dict) else a for a in args]} {kw} {dt}"
        for k in outs:
            w = next(want)
            w64 = next(ref64) if dt == "bfloat16" else None
            if r.status_code != 200:
                bad.append(f"{what}: server {r.status_code} {r.text[:300]}")
                continue
            assert "error" not in w, (what, w)
            o = r.json()["outputs"][k]
            if o["dtype"] != w["dtype"] or o["shape"] != w["shape"]:
                bad.append(f"{what} out {k}: {o['dtype']}{o['shape']} vs torch {w['dtype']}{w['shape']}")
                continue
            got, exp = vals(o), np.array(w["value"], np.float64)
            off = ~np.isclose(got, exp, equal_nan=True, **TOL[dt])
            if w64 is not None and "error" not in w64 and off.any():
                r64 = np.array(w64["value"], np.float64).reshape(got.shape)
                off &= ~(np.abs(got - r64) <= np.abs(exp - r64) + TOL[dt]["atol"])
            if off.any():
                i = int(np.argmax(off))
                bad.append(f"{what} out {k}: element {i}: {got[i]} vs torch {exp[i]}")
    assert not bad, f"{len(bad)} disagree:\n" + "\n".join(bad[:20])


# (batch dims of q, k, v), L, S, E, Ev
SHAPES = [((2, 3), (2, 3), (2, 3), 5, 7, 4, 6), ((1, 1), (1, 1), (1, 1), 1, 1, 1, 1),
          ((4,), (4,), (4,), 9, 3, 8, 8), ((2, 3), (3,), (1, 3), 6, 5, 3, 2),  # broadcast batch dims
          ((), (), (), 4, 6, 5, 7),                                          # plain matrices
          ((1, 2), (1, 2), (1, 2), 130, 300, 16, 9),                         # several query and key tiles
          ((0, 2), (0, 2), (0, 2), 3, 4, 5, 5), ((2,), (2,), (2,), 0, 4, 3, 3),  # batch 0, L == 0
          ((2,), (2,), (2,), 3, 0, 3, 3), ((2,), (2,), (2,), 3, 4, 0, 2)]     # S == 0, E == 0


def test_values_against_torch(server, rng):
    cases = []
    for dt in ("float64", "float32", "bfloat16"):
        for bq, bk, bv, L, S, E, Ev in SHAPES:
            q, k, v = qkv(rng, dt, bq, bk, bv, L, S, E, Ev)
            cases.append((SDPA, [q, k, v], {"need_attn_weights": True}, dt))
            if S and L:
                cases.append((SDPA, [q, k, v], {"need_attn_weights": True, "is_causal": True}, dt))
                bm = rng.random((L, S)) < 0.6
                cases.append((SDPA, [q, k, v, T(bm)], {"need_attn_weights": True}, dt))
                cases.append((SDPA, [q, k, v, R(rng, (L, S), dt), 0.0, True], {}, dt))
        q, k, v = qkv(rng, dt, (2, 3), (2, 3), (2, 3), 4, 6, 5, 5)
        cases += [(SDPA, [q, k, v, T(rng.random((2, 1, 4, 6)) < 0.5), 0.0, True], {}, dt),  # per-batch mask
                  (SDPA, [q, k, v, T(rng.standard_normal((6,)).astype(np.float64)), 0.0, True], {}, dt),
                  (FWD, [q, k, v, None, 0.0, True, True], {}, dt),
                  (MATH, [q, k, v, T(rng.random((4, 6)) < 0.5)], {}, dt)]
    # rows whose keys are all masked out are NaN, as torch's softmax of -inf
    q, k, v = qkv(rng, "float64", (2,), (2,), (2,), 3, 4, 5, 5)
    m = rng.random((3, 4)) < 0.6
    m[1] = False
    cases.append((SDPA, [q, k, v, T(m), 0.0, True], {}, "float64"))
    compare(server, cases)


def test_without_weights(server, rng):
    """need_attn_weights=False: the output as torch's, the weights unspecified
    (1.13's documentation): the fused kernel returns an empty tensor."""
    cases = []
    for dt in ("float64", "float32"):
        for bq, bk, bv, L, S, E, Ev in SHAPES:
            q, k, v = qkv(rng, dt, bq, bk, bv, L, S, E, Ev)
            cases.append((SDPA, [q, k, v], {}, dt))
            cases.append((SDPA, [q, k, v], {"is_causal": True}, dt))
    compare(server, cases, outs=(0,))
    q, k, v = qkv(rng, "float32", (2,), (2,), (2,), 3, 4, 5, 5)
    r = server.post(f"/v1/ops/{SDPA}", {"args": [q, k, v]})
    assert r.status_code == 200 and r.json()["outputs"][1]["shape"] == [0], r.text[:300]


def test_fused_equals_math(server, rng):
    for dt, tol in (("float64", 1e-13), ("float32", 2e-6)):
        q, k, v = qkv(rng, dt, (3, 2), (3, 2), (3, 2), 133, 270, 24, 17)
        m = T(rng.standard_normal((133, 270)).astype(dt))
        for extra in ([None, 0.0, True, True], [m, 0.0, True, False]):
            a = server.post(f"/v1/ops/{FWD}", {"args": [q, k, v] + extra})
            b = server.post(f"/v1/ops/{MATH}", {"args": [q, k, v] + extra})
            assert a.status_code == b.status_code == 200, (a.text[:300], b.text[:300])
            for i in (0, 1):
                np.testing.assert_allclose(from_json(a.json()["outputs"][i]).astype(np.float64),
                                           from_json(b.json()["outputs"][i]).astype(np.float64), rtol=tol, atol=tol)


def test_transposed_heads(server, rng):
    """[B, L, H, E] inputs viewed as [B, H, L, E] (strided, not contiguous)
    through /v1/run, against torch on the same values made contiguous."""
    kw = {"need_attn_weights": True, "is_causal": True}
    got, refs = [], []
    for dt in ("float64", "float32"):
        B, H, L, S, E = 2, 3, 5, 7, 4
        q, k, v = (rng.standard_normal(s).astype(dt) for s in ((B, L, H, E), (B, S, H, E), (B, S, H, E)))
        steps = [{"op": "transpose.int", "args": [T(x), 1, 2]} for x in (q, k, v)]
        steps.append({"op": SDPA, "args": [{"ref": "$0"}, {"ref": "$1"}, {"ref": "$2"}], "kwargs": kw})
        r = server.post("/v1/run", {"steps": steps, "device": "cpu"})
        assert r.status_code == 200, r.text[:300]
        got += [(dt, o) for o in r.json()["outputs"][-2:]]
        ct = [T(np.ascontiguousarray(np.swapaxes(x, 1, 2))) for x in (q, k, v)]
        refs += [{"op": SDPA, "args": ct, "kwargs": kw, "out": i} for i in (0, 1)]
    for (dt, o), w in zip(got, torch_ref(refs)):
        assert o["shape"] == w["shape"]
        np.testing.assert_allclose(vals(o), np.array(w["value"]), **TOL[dt])


def test_dispatch_record_names_the_kernel(server, rng):
    q, k, v = qkv(rng, "float32", (2,), (2,), (2,), 3, 4, 5, 5)
    body = server.post(f"/v1/ops/{SDPA}", {"args": [q, k, v]}).json()
    steps = body["dispatch"]["steps"]
    fused = [s for s in steps if s["op"] == f"aten::{FWD}"]
    assert fused and fused[0]["kernel"] == "od_cpu_sdpa", steps
    assert not any(s["op"] == "aten::bmm" for s in steps), steps
    # with an input that requires grad the math path runs, and records the graph
    body = server.post(f"/v1/ops/{SDPA}", {"args": [dict(q, requires_grad=True), k, v]}).json()
    ops = [s["op"] for s in body["dispatch"]["steps"]]
    assert f"aten::{MATH}" in ops and "aten::bmm" in ops and f"aten::{FWD}" not in ops, ops


def test_errors(server, rng):
    q, k, v = qkv(rng, "float32", (2,), (2,), (2,), 3, 4, 5, 5)
    bad = [[q, k, v, T(rng.random((3, 4)) < 0.5), 0.0, False, True],  # a mask with is_causal
           [q, R(rng, (2, 4, 6), "float32"), v],                       # E differs
           [q, k, R(rng, (2, 5, 5), "float32")],                       # S differs
           [R(rng, (2, 3, 5), "float64"), k, v],                       # dtypes differ
           [T(np.arange(30).reshape(2, 3, 5)), T(np.arange(40).reshape(2, 4, 5)), T(np.arange(40).reshape(2, 4, 5))],
           [R(rng, (), "float32"), k, v],                              # a 0-dim query
           [R(rng, (5,), "float32"), k, v, None, 0.0, False, True],    # causal needs L
           [q, k, v, T(np.zeros((3, 2, 4), np.float32))]]              # a mask that does not broadcast
    want = torch_ref([{"op": SDPA, "args": a} for a in bad])
    for a, w in zip(bad, want):
        assert "error" in w, a
        r = server.post(f"/v1/ops/{SDPA}", {"args": a})
        assert 400 <= r.status_code < 500, (w, r.status_code, r.text[:300])
        msg = r.json()["error"]["message"]
        assert msg in w["error"] or w["error"] in msg, (msg, w["error"])
    # dropout is random: refused, on the fused and the math path alike
    for op in (SDPA, FWD, MATH):
        r = server.post(f"/v1/ops/{op}", {"args": [q, k, v, None, 0.25]})
        assert r.status_code == 422 and "dropout_p" in r.json()["error"]["message"], r.text[:300]


def test_modes_and_vmap_see_through(server, rng):
    """The trace mode sees the composite, then the fused _forward it chose
    (what torch 1.13's TorchDispatchMode records); vmap runs it per sample
    (the per-sample fallback) with the output of the batched call."""
    q, k, v = (rng.standard_normal(s) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 6)))
    body = server.post(f"/v1/ops/{SDPA}", {"args": [T(q), T(k), T(v)], "modes": ["trace"]}).json()
    ops = [e["op"] for e in body["modes"]["trace"]["events"]]
    assert ops[:2] == [f"aten::{SDPA}", f"aten::{FWD}"], ops
    whole = server.post(f"/v1/ops/{SDPA}", {"args": [T(q), T(k), T(v)]}).json()["outputs"][0]
    r = server.post(f"/v1/ops/{SDPA}", {"args": [T(q), T(k), T(v)], "vmap": {"in_dims": [0, 0, 0]}})
    assert r.status_code == 200, r.text[:300]
    np.testing.assert_allclose(from_json(r.json()["outputs"][0]), from_json(whole), rtol=1e-12, atol=1e-12)


def test_float16_computes_in_float32(server, rng):
    """torch 1.13's CPU has no float16 matmul; the server runs float16 attention in float32 and rounds
    once, so it equals torch's float64 result of the same values, rounded, within one float16 step,
    also where a score passes float16's 65504 (which per-step rounding would make inf, then NaN)."""
    cases = []
    for L, S, E, Ev in ((3, 5, 4, 6), (1, 1, 1, 1), (7, 2, 3, 2)):
        q, k, v = (rng.standard_normal(sh).astype(np.float16) for sh in ((2, L, E), (2, S, E), (2, S, Ev)))
        cases.append((q, k, v))
    q, k, v = cases[0]
    q = q.copy()
    q[0, 0, 0] = 60000.0
    k = k.copy()
    k[0, :, 0] = np.abs(k[0, :, 0]) + 1.0  # every score of that row beyond 65504
    cases.append((q, k, v))
    reqs = [{"op": SDPA, "args": [T(a.astype(np.float64)) for a in c] + [None, 0.0, True], "out": i}
            for c in cases for i in (0, 1)]
    want = iter(torch_ref(reqs))
    for c in cases:
        r = server.post(f"/v1/ops/{SDPA}", {"args": [T(a) for a in c] + [None, 0.0, True]})
        assert r.status_code == 200, r.text
        for i in (0, 1):
            o, w = r.json()["outputs"][i], next(want)
            assert o["dtype"] == "float16"
            got = vals(o).astype(np.float16)
            exp = np.array(w["value"], np.float64).astype(np.float16)
            assert np.isfinite(got).all(), (c[0].shape, i, got)
            step = np.spacing(np.abs(exp)).astype(np.float64)
            assert (np.abs(got.astype(np.float64) - exp.astype(np.float64)) <= step).all(), (c[0].shape, i, got, exp)


def test_integral_query_masks_in_float32(server):
    """An integral query scaled by 1 / sqrt(E) is float32 (int * double), and so is the additive mask a
    bool or causal mask becomes (torch 1.13's zeros_like(mask, query.dtype) after the scaling): empty
    calls answer float32, and a float mask meeting integral scores is refused as add_ refuses it."""
    i = lambda *s: T(np.ones(s, np.int64))
    cases = [[i(0, 1, 4), i(1, 4), i(1, 4), None, 0.0, False, True],
             [i(0, 3, 4), i(0, 2, 4), i(0, 2, 4), T(np.ones((3, 2), bool)), 0.0],
             [i(0, 3, 4), i(0, 2, 4), i(0, 2, 4), None, 0.0, False, True]]
    for op in (SDPA, MATH):
        want = torch_ref([{"op": op, "args": a, "out": 0} for a in cases])
        for a, w in zip(cases, want):
            r = server.post(f"/v1/ops/{op}", {"args": a})
            if "error" in w:
                assert 400 <= r.status_code < 500 and r.json()["error"]["message"] in w["error"], (w, r.text[:300])
                continue
            assert r.status_code == 200, (op, a, w, r.text[:300])
            o = r.json()["outputs"][0]
            assert (o["dtype"], o["shape"]) == (w["dtype"], w["shape"]), (op, o, w)
