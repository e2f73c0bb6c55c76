"""Batch, instance, group and layer normalisation (kernels/shape_reduce.c's od_norm_plan,
cpu/norm.c, composite/nn.c) against PyTorch 1.13 on fresh random inputs:
training and evaluation, momentum, with and without weight, bias and running
statistics, 2-D to 5-D inputs, batch 1 and empty batches, channels that
groups do not divide, strided inputs (a transpose step of a program), every
dtype torch's CPU takes and the refusals with torch's messages; the running
statistics written in place, stored tensors included; the backward
operators against torch's."""

import json
import subprocess

import numpy as np

from conftest import TORCH_PY

# Runs cases under PyTorch 1.13: each output, and the tensor arguments the
# call wrote (the running statistics), or the error.
TORCH = r"""
import json, sys, torch
DT = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
      "float16": torch.float16, "int64": torch.int64, "bool": torch.bool}
def arg(v):
    if isinstance(v, dict) and "dtype" in v:
        return torch.tensor([float(x) for x in v["data"]], dtype=torch.float64).to(DT[v["dtype"]]).reshape(v["shape"])
    return v
def out(t):
    if not isinstance(t, torch.Tensor):
        return None
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
            "value": t.detach().double().reshape(-1).tolist()}
res = []
for c in json.load(sys.stdin):
    try:
        a = [arg(v) for v in c["args"]]
        if c.get("tr"):
            a[0] = a[0].transpose(*c["tr"])
        name, _, ov = c["op"].partition(".")
        r = getattr(getattr(torch.ops.aten, name), ov or "default")(*a)
        r = list(r) if isinstance(r, (tuple, list)) else [r]
        res.append({"outs": [out(t) for t in r], "after": {str(i): out(a[i]) for i in c.get("mut", [])}})
    except Exception as e:
        res.append({"error": str(e).split("\n")[0]})
print(json.dumps(res))
"""


def torch_run(cases):
    p = subprocess.run([TORCH_PY, "-c", TORCH], input=json.dumps(cases), capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def T(a, dtype=None):
    a = np.asarray(a)
    return {"dtype": dtype or str(a.dtype), "shape": list(a.shape), "data": a.reshape(-1).tolist()}


def R(rng, shape, dt="float32", scale=2.0, shift=0.5):
    return T((rng.standard_normal(shape) * scale + shift).astype(np.float64), dt)


def P(rng, shape, dt="float32"):
    """Positive values (variances)."""
    return T(np.abs(rng.standard_normal(shape)) + 0.5, dt)


TOL = {"float64": 1e-10, "float32": 2e-5, "bfloat16": 2e-2}


def close(got, want, dt, what, bad, scaled=False):
    """scaled: the absolute tolerance is tol of the largest output, for results that torch sums in
    float and then cancels (group norm backward's c2 * x + c3): near zero they carry the error of
    the largest terms"""
    if got is None or want is None:
        if (got is None) != (want is None):
            bad.append(f"{what}: {got and 'tensor'} vs torch {want and 'tensor'}")
        return
    if got["dtype"] != want["dtype"] or got["shape"] != want["shape"]:
        bad.append(f"{what}: {got['dtype']}{got['shape']} vs torch {want['dtype']}{want['shape']}")
        return
    g = np.array([float(x) for x in got["data"]], np.float64)
    w = np.array(want["value"], np.float64)
    tol = TOL.get(dt, 2e-5)
    largest = float(np.max(np.abs(w[np.isfinite(w)]))) if np.isfinite(w).any() else 0.0
    atol = tol
    if dt == "bfloat16":
        # a bfloat16 batch keeps var_sum and invstd in bfloat16 as torch 1.13 does, but its float sum runs
        # in another order, so invstd can land one bfloat16 step from torch's: an output near zero then
        # differs by 2^-8 of |x - mean| * invstd * |w|, within 2^-7 of the largest output
        atol = max(tol, 2.0 ** -7 * largest)
    elif scaled:
        atol = max(tol, tol * largest)
    if not np.allclose(g, w, rtol=tol, atol=atol, equal_nan=True):
        over = np.abs(g - w) - atol - tol * np.abs(w)  # the element furthest outside the tolerance
        i = int(np.argmax(np.where(np.isnan(over), -np.inf, over)))
        bad.append(f"{what}: at {i} {g[i]} vs torch {w[i]} (of {len(g)})")


def call(server, case):
    """The server's answer: a program when the input is transposed first."""
    if not case.get("tr"):
        return server.post(f"/v1/ops/{case['op']}", {"args": case["args"]})
    steps = [{"op": "transpose.int", "args": [case["args"][0], *case["tr"]]},
             {"op": case["op"], "args": [{"ref": "$0"}, *case["args"][1:]]}]
    return server.post("/v1/run", {"steps": steps, "outputs": [f"$1.{k}" for k in range(case.get("nout", 1))]})


def outputs_of(case, body):
    if case.get("tr"):
        return [body["outputs"][k] if "data" in body["outputs"][k] else None for k in range(len(body["outputs"]))]
    return [o if "data" in o else None for o in body["outputs"]]


def check(server, cases, mutated=True):
    """cases: dicts {op, args, [tr], [mut], [dt], [nout]}; running statistics
    (mut) go through the session store, so the kernel writes stored tensors."""
    want = torch_run(cases)
    bad = []
    for case, w in zip(cases, want):
        what = f"{case['op']} {[a['dtype'] + str(a['shape']) if isinstance(a, dict) else a for a in case['args']]}"
        what += f" tr={case.get('tr')}"
        ids = {}
        args = list(case["args"])
        for i in case.get("mut", []):
            r = server.post("/v1/tensors", {"tensor": args[i]})
            assert r.status_code == 201, r.text
            ids[i] = r.json()["id"]
            args[i] = {"ref": ids[i]}
        r = call(server, dict(case, args=args))
        if "error" in w:
            if not 400 <= r.status_code < 500:
                bad.append(f"{what}: torch raised {w['error']!r}, server {r.status_code} {r.text[:200]}")
            elif r.json()["error"]["message"] not in w["error"]:
                bad.append(f"{what}: message {r.json()['error']['message']!r} vs torch {w['error']!r}")
        elif r.status_code != 200:
            bad.append(f"{what}: torch ok, server {r.status_code} {r.text[:300]}")
        else:
            got = outputs_of(case, r.json())
            for k in range(min(len(got), case.get("nout", len(w["outs"])))):
                close(got[k], w["outs"][k], case.get("dt", "float32"), f"{what} out {k}", bad,
                      scaled=case.get("scaled", False))
            for i, tid in ids.items():
                after = server.get(f"/v1/tensors/{tid}").json()["outputs"][0]
                close(after, w["after"][str(i)], case.get("dt", "float32"), f"{what} running arg {i}", bad)
        for tid in ids.values():
            server.delete(f"/v1/tensors/{tid}")
    assert not bad, f"{len(bad)} of {len(cases)} disagree:\n" + "\n".join(bad[:25])


BN = "native_batch_norm"


def test_batch_norm_training_and_evaluation(server, rng):
    cases = []
    # a channel of one repeated value with eps 0 (or -0.0): ATen's InvStd gives invstd 0, so y is 0, not NaN
    for dt in ("float32", "float64", "bfloat16"):
        x = np.repeat(rng.standard_normal((1, 3)), 4, 0)
        x[:, 2] = rng.standard_normal(4)
        for eps in (0.0, -0.0):
            cases.append({"op": BN, "dt": dt, "nout": 3, "args": [T(x, dt), None, None, None, None, True, 0.1, eps]})
        cases.append({"op": "instance_norm", "dt": dt,
                      "args": [T(rng.standard_normal((1, 3)), dt), None, None, None, None, True, 0.1, 0.0, False]})
    for dt in ("float32", "float64", "bfloat16"):
        for shape in ((5, 3), (4, 3, 7), (2, 3, 4, 5), (2, 2, 3, 2, 3), (1, 4, 9), (7, 1)):
            C = shape[1]
            for train in (True, False):
                for affine in (True, False):
                    for stats in (True, False) if train else (True,):
                        momentum = float(rng.choice([0.1, 0.3, 1.0]))
                        args = [R(rng, shape, dt), R(rng, (C,), dt) if affine else None,
                                R(rng, (C,), dt) if affine else None, R(rng, (C,), dt) if stats else None,
                                P(rng, (C,), dt) if stats else None, train, momentum, 1e-5]
                        cases.append({"op": BN, "args": args, "dt": dt, "nout": 3,
                                      "mut": [3, 4] if stats and train else []})
    # strided input: the channel dim comes from a transpose
    for dt in ("float32", "float64"):
        cases.append({"op": BN, "args": [R(rng, (6, 3, 4), dt), R(rng, (6,), dt), None, R(rng, (6,), dt),
                                         P(rng, (6,), dt), True, 0.1, 1e-3], "tr": [0, 1], "dt": dt, "nout": 3})
        cases.append({"op": BN, "args": [R(rng, (5, 4, 3), dt), None, R(rng, (5,), dt), R(rng, (5,), dt),
                                         P(rng, (5,), dt), False, 0.1, 1e-5], "tr": [1, 0], "dt": dt, "nout": 1})
    # batch 1 with one value per channel: torch's unbiased variance is NaN
    cases.append({"op": BN, "args": [R(rng, (1, 4)), None, None, R(rng, (4,)), P(rng, (4,)), True, 0.1, 1e-5],
                  "nout": 3, "mut": [3, 4]})
    # a bfloat16 input takes float32 parameters (torch's mixed type)
    cases.append({"op": BN, "args": [R(rng, (3, 4, 5), "bfloat16"), R(rng, (4,)), R(rng, (4,)), R(rng, (4,)),
                                     P(rng, (4,)), True, 0.2, 1e-5], "dt": "bfloat16", "nout": 3, "mut": [3, 4]})
    # rows of no element (N > 0, spatial size 0): torch's statistics are 0 / 0 = NaN, its running mean
    # becomes NaN and its running var (1 - momentum) * var; evaluation computes nothing
    for dt in ("float32", "float64", "bfloat16"):
        for shape in ((2, 3, 0), (1, 3, 0, 4)):
            for train, stats in ((True, True), (True, False), (False, True)):
                cases.append({"op": BN, "args": [R(rng, shape, dt), None, None, R(rng, (3,), dt) if stats else None,
                                                 P(rng, (3,), dt) if stats else None, train, 0.3, 1e-5],
                              "dt": dt, "nout": 3, "mut": [3, 4] if stats and train else []})
    check(server, cases)


def test_batch_norm_refusals(server, rng):
    x = R(rng, (3, 4, 5))
    cases = [{"op": BN, "args": [R(rng, (4,)), None, None, None, None, True, 0.1, 1e-5]},
             {"op": BN, "args": [R(rng, (3, 4), "float16"), None, None, None, None, True, 0.1, 1e-5]},
             {"op": BN, "args": [T(np.arange(12).reshape(3, 4)), None, None, None, None, True, 0.1, 1e-5]},
             {"op": BN, "args": [x, R(rng, (4,), "float64"), None, None, None, True, 0.1, 1e-5]},
             {"op": BN, "args": [x, R(rng, (4,)), None, R(rng, (4,), "float64"), P(rng, (4,), "float64"), True,
                                 0.1, 1e-5]},
             {"op": BN, "args": [R(rng, (3, 4), "bfloat16"), R(rng, (4,), "bfloat16"), R(rng, (4,)), None, None,
                                 True, 0.1, 1e-5]},
             {"op": "batch_norm", "args": [x, R(rng, (3,)), None, None, None, True, 0.1, 1e-5, False]},
             {"op": "batch_norm", "args": [x, None, R(rng, (5,)), None, None, True, 0.1, 1e-5, False]},
             {"op": "batch_norm", "args": [x, None, None, R(rng, (3,)), P(rng, (4,)), True, 0.1, 1e-5, False]},
             {"op": "batch_norm", "args": [x, None, None, R(rng, (4,)), P(rng, (2,)), True, 0.1, 1e-5, False]},
             {"op": "batch_norm", "args": [T(np.float32(1.0)), None, None, None, None, True, 0.1, 1e-5, False]},
             {"op": "batch_norm", "args": [R(rng, (3, 4), "float16"), None, None, None, None, True, 0.1, 1e-5,
                                           False]},
             {"op": "instance_norm", "args": [x, None, None, None, None, False, 0.1, 1e-5, False]}]
    check(server, cases)


def test_batch_norm_composites(server, rng):
    cases = []
    for dt in ("float32", "float64", "bfloat16"):
        for shape in ((4, 3), (2, 3, 5), (3, 2, 4, 3), (1, 2, 2, 2, 3)):
            C = shape[1]
            for train in (True, False):
                cases.append({"op": "batch_norm", "dt": dt, "mut": [3, 4],
                              "args": [R(rng, shape, dt), R(rng, (C,), dt), R(rng, (C,), dt), R(rng, (C,), dt),
                                       P(rng, (C,), dt), train, 0.1, 1e-5, False]})
                cases.append({"op": "_batch_norm_impl_index", "dt": dt, "nout": 3,
                              "args": [R(rng, shape, dt), None, R(rng, (C,), dt), R(rng, (C,), dt),
                                       P(rng, (C,), dt), train, 0.3, 1e-4, False]})
            if len(shape) > 2:
                cases.append({"op": "instance_norm", "dt": dt, "mut": [3, 4],
                              "args": [R(rng, shape, dt), R(rng, (C,), dt), R(rng, (C,), dt), R(rng, (C,), dt),
                                       P(rng, (C,), dt), True, 0.1, 1e-5, False]})
                cases.append({"op": "instance_norm", "dt": dt,
                              "args": [R(rng, shape, dt), None, None, None, None, True, 0.1, 1e-5, False]})
                cases.append({"op": "instance_norm", "dt": dt,
                              "args": [R(rng, shape, dt), R(rng, (C,), dt), None, R(rng, (C,), dt),
                                       P(rng, (C,), dt), False, 0.1, 1e-5, False]})
    # empty batch: _batch_norm_impl_index answers it without native_batch_norm
    cases.append({"op": "batch_norm", "args": [R(rng, (0, 3)), R(rng, (3,)), R(rng, (3,)), None, None, True, 0.1,
                                               1e-5, False]})
    cases.append({"op": "batch_norm", "args": [R(rng, (0, 3, 2)), None, None, R(rng, (3,)), P(rng, (3,)), True,
                                               0.1, 1e-5, False], "mut": [3, 4]})
    check(server, cases)


def test_group_norm(server, rng):
    cases = []
    for dt in ("float32", "float64", "bfloat16"):
        for shape, G in (((2, 6, 5), 3), ((3, 4), 2), ((1, 8, 3, 3), 4), ((2, 6, 2, 2, 2), 6), ((4, 5, 7), 1),
                         ((0, 4, 3), 2), ((2, 4, 0), 2)):  # the last: groups of no element, NaN statistics
            N, C = shape[:2]
            HxW = int(np.prod(shape[2:])) if len(shape) > 2 else 1
            for affine in (True, False):
                w = R(rng, (C,), dt) if affine else None
                b = R(rng, (C,), dt) if affine else None
                cases.append({"op": "group_norm", "dt": dt, "args": [R(rng, shape, dt), G, w, b, 1e-5, True]})
                cases.append({"op": "native_group_norm", "dt": dt, "nout": 3,
                              "args": [R(rng, shape, dt), w, b, N, C, HxW, G, 1e-4]})
    # groups of two nearly equal values far from zero: rstd * mean is large, so where the rounding falls in
    # bias = -scale * mean + b and x * scale + bias shows in y
    for dt in ("float32", "float64"):
        a = rng.standard_normal((16, 2)) + 300.0
        x = np.stack([a[:, 0], a[:, 0] + 0.01 * a[:, 1] - 3.0, a[:, 1], a[:, 1] + 0.01 * a[:, 0] - 3.0], 1)
        cases.append({"op": "native_group_norm", "dt": dt, "nout": 3,
                      "args": [T(x, dt), R(rng, (4,), dt), R(rng, (4,), dt), 16, 4, 1, 2, 1e-4]})
    # a group whose squares overflow: the variance is NaN, and torch's max(var, 0) keeps it (rstd NaN)
    for dt, big in (("float32", 3e38), ("float64", 1e300), ("bfloat16", 3e38)):
        x = rng.standard_normal((3, 5)) * 3
        x[1, 2], x[1, 4] = big, -big
        cases.append({"op": "native_group_norm", "dt": dt, "nout": 3,
                      "args": [T(x, dt), None, None, 3, 5, 1, 1, 0.9551]})
    cases.append({"op": "group_norm", "args": [R(rng, (3, 4, 5)), 2, None, None, 1e-5, True], "tr": [0, 2]})
    x = R(rng, (3, 4, 5))
    cases += [{"op": "group_norm", "args": [x, 3, None, None, 1e-5, True]},
              {"op": "group_norm", "args": [x, 0, None, None, 1e-5, True]},
              {"op": "group_norm", "args": [x, 2, R(rng, (3,)), None, 1e-5, True]},
              {"op": "group_norm", "args": [x, 2, R(rng, (2, 2)), None, 1e-5, True]},
              {"op": "group_norm", "args": [R(rng, (4,)), 2, None, None, 1e-5, True]},
              {"op": "group_norm", "args": [R(rng, (3, 4), "float16"), 2, None, None, 1e-5, True]},
              {"op": "group_norm", "args": [T(np.arange(12).reshape(3, 4)), 2, None, None, 1e-5, True]},
              {"op": "native_group_norm", "args": [x, None, None, 3, 4, 4, 2, 1e-5]},
              {"op": "native_group_norm", "args": [x, R(rng, (4,), "float64"), None, 3, 4, 5, 2, 1e-5]}]
    check(server, cases)


def test_backward_operators(server, rng):
    cases = []
    for dt in ("float32", "float64"):
        # spatial sizes 35 and 256: batch norm backward's eight-lane sums, with and without a ragged end
        for shape in ((5, 3), (4, 3, 6), (2, 3, 2, 3), (2, 3, 5, 7), (3, 2, 16, 16)):
            C = shape[1]
            for train in (True, False):
                for mask in ([True, True, True], [True, False, True], [False, True, False]):
                    cases.append({"op": "native_batch_norm_backward", "dt": dt, "nout": 3,
                                  "args": [R(rng, shape, dt), R(rng, shape, dt), R(rng, (C,), dt),
                                           R(rng, (C,), dt), P(rng, (C,), dt),
                                           R(rng, (C,), dt) if train else None, P(rng, (C,), dt) if train else None,
                                           train, 1e-5, mask]})
        # HxW of 35 and 256: group norm backward's eight-lane sums, with and without a ragged end
        for shape, G in (((2, 6, 5), 3), ((3, 4, 2, 2), 2), ((1, 4, 3), 4), ((2, 6, 5, 7), 3), ((2, 4, 16, 16), 2)):
            N, C = shape[:2]
            HxW = int(np.prod(shape[2:]))
            for mask in ([True, True, True], [True, False, False], [False, True, True]):
                cases.append({"op": "native_group_norm_backward", "dt": dt, "nout": 3, "scaled": True,
                              "args": [R(rng, shape, dt), R(rng, shape, dt), R(rng, (N, G), dt), P(rng, (N, G), dt),
                                       R(rng, (C,), dt), N, C, HxW, G, mask]})
    check(server, cases)


def test_bfloat16_batch_statistics(server, rng):
    """A bfloat16 training batch norm with bfloat16 parameters keeps save_mean, var_sum and save_invstd
    in bfloat16, as torch 1.13 does, and normalises with those rounded values: save_mean equals torch's,
    save_invstd is within one bfloat16 step (var_sum's float sum runs in another order, so its rounding
    can land one step apart) and y follows. With float32 parameters (torch's mixed type) the statistics
    are float32 and never rounded to bfloat16: they agree to float32 rounding."""
    cases = []
    for shape in ((4, 8, 16, 16), (8, 3, 5), (2, 16, 7, 9), (16, 4)):
        C = shape[1]
        for pdt in ("bfloat16", "float32"):
            cases.append({"op": BN, "args": [R(rng, shape, "bfloat16", scale=3.0, shift=1.0), R(rng, (C,), pdt),
                                             R(rng, (C,), pdt), T(np.zeros(C), pdt), T(np.ones(C), pdt),
                                             True, 0.1, 1e-5], "pdt": pdt})
    want = torch_run(cases)
    bad = []
    for case, w in zip(cases, want):
        r = server.post(f"/v1/ops/{BN}", {"args": case["args"]})
        assert r.status_code == 200, r.text
        got = r.json()["outputs"]
        for k in range(3):
            # both as float32: the server prints a bfloat16 as the shortest float32 text
            g = np.array([float(x) for x in got[k]["data"]], np.float64).astype(np.float32)
            t = np.array(w["outs"][k]["value"], np.float64).astype(np.float32)
            assert got[k]["dtype"] == w["outs"][k]["dtype"], (k, got[k]["dtype"], w["outs"][k]["dtype"])
            if case["pdt"] == "float32":  # y is bfloat16: one step apart where the float stats differ
                ok = (np.allclose(g, t, rtol=2.0 ** -7, atol=2.0 ** -8 * float(np.abs(t).max())) if k == 0
                      else np.allclose(g, t, rtol=1e-6, atol=0))
            elif k == 1:
                ok = np.array_equal(g, t)
            elif k == 2:
                ok = np.allclose(g, t, rtol=2.0 ** -7, atol=0)
            else:
                ok = np.allclose(g, t, rtol=2.0 ** -7, atol=2.0 ** -7 * float(np.abs(t).max()))
            if not ok:
                i = int(np.argmax(np.abs(g - t)))
                bad.append(f"{case['args'][0]['shape']} params {case['pdt']} out {k}: at {i} {g[i]!r} vs "
                           f"torch {t[i]!r} ({int((g != t).sum())} of {len(g)} differ)")
    assert not bad, "\n".join(bad)


def test_layer_and_group_norm_bits_against_torch(server, rng):
    """float32 and float64 native_layer_norm and native_group_norm (whose
    groups go through the same row moments) equal torch 1.13's bit for bit:
    mean, rstd and output, over rows short (the scalar tail), of whole chunks
    (the AVX-512 float32 path runs 16 chunks of 128 at once: 2048 elements and
    up) and with a tail, offset and huge rows, with and without weight and
    bias. The moments must not fuse a multiply-add where torch's build does
    not: with fmas there, a quarter to half of these rows had a mean one ulp
    off, and 8 of 10 group_norm cases an output."""
    cases = []
    for dt in ("float32", "float64"):
        for n in (1, 9, 127, 300, 2047, 2048, 2100, 4096 + 13):
            for scale, shift in ((1.0, 0.0), (0.03, 300.0), (1e18, 5.0)):
                x = R(rng, (2, n), dt, scale, shift)
                w = R(rng, (n,), dt) if n % 3 else None
                b = R(rng, (n,), dt) if n % 2 else None
                cases.append({"op": "native_layer_norm", "args": [x, [n], w, b, 1e-5]})
        for N, C, HxW, G in ((2, 4, 9, 2), (3, 8, 300, 4), (2, 6, 1000, 3), (1, 4, 4100, 2), (2, 32, 64, 8)):
            for scale, shift in ((1.0, 0.0), (0.03, 300.0)):
                w = R(rng, (C,), dt) if G != 4 else None
                cases.append({"op": "native_group_norm",
                              "args": [R(rng, (N, C, HxW), dt, scale, shift), w, w, N, C, HxW, G, 1e-5]})
    want = torch_run(cases)
    bad = []
    for case, w in zip(cases, want):
        x = case["args"][0]
        assert "outs" in w, w
        r = server.post(f"/v1/ops/{case['op']}", {"args": case["args"]})
        assert r.status_code == 200, r.text
        for k, (got, ref) in enumerate(zip(r.json()["outputs"], w["outs"])):
            npdt = np.float32 if x["dtype"] == "float32" else np.float64
            g = np.array([float(v) for v in got["data"]], npdt)
            t = np.array(ref["value"], np.float64).astype(npdt)
            same = (g == t) | (np.isnan(g) & np.isnan(t))
            if not same.all():
                i = int(np.argmin(same))
                bad.append(f"{case['op']} {x['dtype']}{x['shape']} w={case['args'][2] is not None} "
                           f"out {k}: at {i} {g[i]!r} vs torch {t[i]!r}")
    assert not bad, f"{len(bad)} outputs of {3 * len(cases)} differ from torch:\n" + "\n".join(bad[:20])


def test_batch_norm_bits_against_torch(server, rng):
    """native_batch_norm's evaluation-mode output, and in training its
    save_invstd and output, equal torch 1.13's bit for bit. Evaluation:
    beta = b - mean * alpha is one fused multiply-add in torch's build, as
    y = x * alpha + beta is. Training: the variance is var_sum / n in the
    input's type before InvStd takes it to double, and a float64 square is
    fused into its double sum (a float32 one is rounded first). The
    per-channel sums run in another order than torch's one sequential double
    sum (eight accumulators, for speed), so a training mean can land one ulp
    away, and a float64 var_sum too; 2-D inputs take torch's channels-last
    path, which sums in float. So training is compared for float32 inputs of
    3 or more dims, where the means agree (most channels), and there invstd
    and the output must agree too."""
    cases = []
    for dt in ("float32", "float64"):
        for shape in ((8, 3), (4, 5, 9), (2, 6, 300), (3, 4, 33, 35)):
            C = shape[1]
            for scale, shift in ((1.0, 0.0), (0.03, 300.0)):
                for train in (False, True):
                    cases.append({"op": "native_batch_norm", "train": train,
                                  "args": [R(rng, shape, dt, scale, shift), R(rng, (C,), dt), R(rng, (C,), dt),
                                           R(rng, (C,), dt), P(rng, (C,), dt), train, 0.1, 1e-5]})
    want = torch_run(cases)
    bad, compared, channels = [], 0, 0
    for case, w in zip(cases, want):
        x = case["args"][0]
        npdt = np.float32 if x["dtype"] == "float32" else np.float64
        r = server.post("/v1/ops/native_batch_norm", {"args": case["args"]})
        assert r.status_code == 200, r.text
        got = [np.array([float(v) for v in o["data"]], npdt) for o in r.json()["outputs"]]
        ref = [np.array(o["value"], np.float64).astype(npdt) for o in w["outs"]]
        what = f"{x['dtype']}{x['shape']} train={case['train']}"
        if not case["train"]:
            compared += 1
            if not np.array_equal(got[0], ref[0]):
                bad.append(f"{what}: output differs at {int(np.argmax(got[0] != ref[0]))}")
            continue
        if x["dtype"] != "float32" or len(x["shape"]) < 3:
            continue
        C = x["shape"][1]
        y, ty = got[0].reshape(x["shape"][0], C, -1), ref[0].reshape(x["shape"][0], C, -1)
        for c in range(C):
            channels += 1
            if got[1][c] != ref[1][c]:
                continue
            compared += 1
            if got[2][c] != ref[2][c] or not np.array_equal(y[:, c], ty[:, c]):
                bad.append(f"{what} channel {c}: same mean, invstd {got[2][c]!r} vs torch {ref[2][c]!r}")
    assert not bad, f"{len(bad)} differ from torch:\n" + "\n".join(bad[:20])
    assert compared >= 16 + channels // 2, (compared, channels)  # 16 evaluation cases
