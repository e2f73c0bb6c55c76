"""The losses (kernels/shape_loss.c + cpu/loss.c: nll_loss_forward,
nll_loss2d_forward and their _backward; composite/loss.c: nll_loss,
nll_loss2d, nll_loss_nd, cross_entropy_loss, mse_loss, mse_loss_backward, l1_loss,
smooth_l1_loss, huber_loss and their _backward)
against PyTorch 1.13 (tools/torch_ref.py) on fresh random inputs: every
reduction, class weights, ignore_index (present, absent, every target
ignored), label smoothing, probability targets, batch 1 and 0 (torch's mean
of nothing is NaN), 1-D inputs with 0-dim targets, uint8 targets, float32,
float64 and bfloat16 (float16 where torch's CPU kernel has it), transposed
inputs (through /v1/run), and torch's refusals with its messages. The
gradients are test_autograd.py's cases."""

import numpy as np

from conftest import torch_ref

FLOATS = ("float32", "float64", "bfloat16")
TOL = {"float32": 2e-6, "float64": 1e-12, "bfloat16": 1e-2, "float16": 2e-3}
# per-operator bfloat16 tolerances (none needed so far)
BF16_LOOSE = {}


def J(v):
    if isinstance(v, float) and not np.isfinite(v):
        return "NaN" if np.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def T(a, dtype=None):
    a = np.asarray(a)
    return {"dtype": dtype or str(a.dtype), "shape": list(a.shape), "data": [J(v) for v in a.reshape(-1).tolist()]}


def X(rng, dt, *shape):
    return T((rng.standard_normal(shape) * 2).astype(np.float64), dt)


def W(rng, dt, c):
    return T(rng.random(c) + 0.25, dt)


def targets(rng, shape, c, ignore=None, dtype="int64"):
    t = rng.integers(0, c, shape)
    if ignore is not None and t.size:
        t.reshape(-1)[rng.random(t.size) < 0.3] = ignore
    return T(t.astype(dtype))


def values(o):
    return np.array([float(x) if isinstance(x, str) else x for x in o["data"]], np.float64)


def compare(what, o, w, bad, op=None):
    if o["dtype"] != w["dtype"] or o["shape"] != w["shape"]:
        bad.append(f"{what}: {o['dtype']}{o['shape']} vs torch {w['dtype']}{w['shape']}")
        return
    got, exp = values(o), np.array([float(x) if isinstance(x, str) else x for x in w["value"]], np.float64)
    tol = BF16_LOOSE.get(op, TOL["bfloat16"]) if o["dtype"] == "bfloat16" else TOL.get(o["dtype"], 0)
    if not np.allclose(got, exp, rtol=tol, atol=tol, equal_nan=True):
        bad.append(f"{what}: {got[:6]} vs torch {exp[:6]}")


def check(server, cases, outs=1):
    """cases: (op, args, kwargs); each output up to outs compared with torch's."""
    reqs = [{"op": op, "args": a, "kwargs": kw, "out": k} for op, a, kw in cases for k in range(outs)]
    want = torch_ref(reqs)
    bad = []
    for req, w in zip(reqs, want):
        op, args, kw, k = req["op"], req["args"], req["kwargs"], req["out"]
        what = f"{op} {[a['dtype'] + str(a['shape']) if isinstance(a, dict) else a for a in args]} {kw} out {k}"
        r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kw})
        if "error" in w:
            if not 400 <= r.status_code < 500:
                bad.append(f"{what}: torch raised {w['error']!r}, server {r.status_code} {r.text[:200]}")
            elif r.json()["error"]["message"] not in w["error"]:
                bad.append(f"{what}: message {r.json()['error']['message']!r} vs torch {w['error']!r}")
            continue
        if r.status_code != 200:
            bad.append(f"{what}: torch ok, server {r.status_code} {r.text[:300]}")
            continue
        compare(what, r.json()["outputs"][k], w, bad, op)
    assert not bad, f"{len(bad)} of {len(reqs)} disagree:\n" + "\n".join(bad[:25])


def test_nll_loss_forward(server, rng):
    cases, nd = [], []
    for dt in FLOATS:
        for n, c in ((7, 5), (1, 3), (0, 4), (33, 11)):
            x = X(rng, dt, n, c)
            for red in (0, 1, 2):
                for ig in (-100, 2):
                    t = targets(rng, (n,), c, ignore=ig if ig >= 0 else None)
                    cases.append(("nll_loss_forward", [x, t, None, red, ig], {}))
                    cases.append(("nll_loss_forward", [x, t, W(rng, dt, c), red, ig], {}))
        # 1-D input with a 0-dim (and a 1-element) target; every target ignored; uint8 targets
        x1 = X(rng, dt, 6)
        for red in (0, 1, 2):
            # a 1-D input of 0 classes with an empty 1-D target (read past its end once, and crashed)
            for tdt in ("int64", "uint8"):
                cases.append(("nll_loss_forward", [X(rng, dt, 0), targets(rng, (0,), 1, dtype=tdt), None, red, -100], {}))
            nd.append(("nll_loss_nd", [X(rng, dt, 0), targets(rng, (0,), 1), None, red, -100], {}))
            cases += [("nll_loss_forward", [x1, T(np.int64(4)), W(rng, dt, 6), red, -100], {}),
                      ("nll_loss_forward", [x1, T(np.array([1])), None, red, -100], {}),
                      ("nll_loss_forward", [x1, T(np.int64(3)), None, red, 3], {}),
                      ("nll_loss_forward", [X(rng, dt, 4, 3), T(np.full(4, 1)), W(rng, dt, 3), red, 1], {}),
                      ("nll_loss_forward", [X(rng, dt, 5, 4), targets(rng, (5,), 4, dtype="uint8"), None, red, -100],
                       {})]
    # a batch large enough for the cascade sum's upper levels
    cases.append(("nll_loss_forward", [X(rng, "float32", 3000, 7), targets(rng, (3000,), 7, 5), None, 1, 5], {}))
    cases.append(("nll_loss_forward", [X(rng, "bfloat16", 3000, 7), targets(rng, (3000,), 7), W(rng, "bfloat16", 7), 1,
                                       -100], {}))
    check(server, cases, outs=2)
    check(server, nd)


def test_nll_loss2d_forward(server, rng):
    cases = []
    for dt in FLOATS:
        for shape in ((2, 4, 3, 5), (1, 3, 1, 1), (0, 3, 2, 2), (3, 2, 0, 4)):
            n, c, h, w = shape
            x = X(rng, dt, *shape)
            for red in (0, 1, 2):
                t = targets(rng, (n, h, w), c, ignore=1)
                cases += [("nll_loss2d_forward", [x, t, None, red, 1], {}),
                          ("nll_loss2d_forward", [x, t, W(rng, dt, c), red, -100 if c > 1 else 1], {}),
                          ("nll_loss2d_forward", [x, targets(rng, (n, h, w), c), W(rng, dt, c), red, -100], {})]
    check(server, cases, outs=2)


def test_nll_loss_backward(server, rng):
    cases = []
    for dt in FLOATS:
        tw = T(np.float64(2.5), dt)
        for red in (0, 1, 2):
            g = X(rng, dt, 6) if red == 0 else X(rng, dt)
            for w in (None, W(rng, dt, 4)):
                t = targets(rng, (6,), 4, ignore=0)
                cases.append(("nll_loss_backward", [g, X(rng, dt, 6, 4), t, w, red, 0, tw], {}))
                cases.append(("nll_loss_backward", [X(rng, dt), X(rng, dt, 4), T(np.int64(2)), w, red, -100, tw], {}))
                g2 = X(rng, dt, 2, 3, 2) if red == 0 else X(rng, dt)
                cases.append(("nll_loss2d_backward", [g2, X(rng, dt, 2, 4, 3, 2), targets(rng, (2, 3, 2), 4, ignore=3),
                                                      w, red, 3, tw], {}))
        cases.append(("nll_loss_backward", [X(rng, dt, 0), X(rng, dt, 0, 4), targets(rng, (0,), 4), None, 0, -100, tw],
                      {}))
        # a 1-D self of 0 classes with an empty 1-D target: torch 1.13 reads past the target and crashes
        # (SIGSEGV); the server reads nothing and answers the empty gradient
        for red in (0, 1, 2):
            r = server.post("/v1/ops/nll_loss_backward", {"args": [X(rng, dt), X(rng, dt, 0), targets(rng, (0,), 1), None,
                                                                 red, -100, tw]})
            assert r.status_code == 200, r.text
            assert r.json()["outputs"][0]["shape"] == [0] and r.json()["outputs"][0]["dtype"] == dt, r.text
    check(server, cases)


def test_nll_composites(server, rng):
    cases = []
    for dt in FLOATS:
        for red in (0, 1, 2):
            w = W(rng, dt, 4)
            cases += [("nll_loss", [X(rng, dt, 5, 4), targets(rng, (5,), 4, ignore=-100), w, red], {}),
                      ("nll_loss2d", [X(rng, dt, 2, 4, 3, 3), targets(rng, (2, 3, 3), 4), None, red, 0], {}),
                      ("nll_loss_nd", [X(rng, dt, 5, 4), targets(rng, (5,), 4), None, red], {}),
                      ("nll_loss_nd", [X(rng, dt, 4), T(np.int64(1)), w, red], {}),
                      ("nll_loss_nd", [X(rng, dt, 2, 4, 3), targets(rng, (2, 3), 4, ignore=2), w, red, 2], {}),
                      ("nll_loss_nd", [X(rng, dt, 2, 4, 3, 2), targets(rng, (2, 3, 2), 4), None, red], {}),
                      ("nll_loss_nd", [X(rng, dt, 2, 4, 3, 2, 2), targets(rng, (2, 3, 2, 2), 4), w, red], {}),
                      ("nll_loss_nd", [X(rng, dt, 0, 4, 3), targets(rng, (0, 3), 4), None, red], {})]
    check(server, cases)


def test_cross_entropy(server, rng):
    cases = []
    for dt in FLOATS:
        for red in (0, 1, 2):
            for ls in (0.0, 0.2, 1.0):
                w = W(rng, dt, 5)
                cases += [("cross_entropy_loss", [X(rng, dt, 6, 5), targets(rng, (6,), 5), None, red, -100, ls], {}),
                          ("cross_entropy_loss", [X(rng, dt, 6, 5), targets(rng, (6,), 5, ignore=3), w, red, 3, ls], {}),
                          ("cross_entropy_loss", [X(rng, dt, 2, 5, 3, 2), targets(rng, (2, 3, 2), 5, ignore=0), w, red,
                                                  0, ls], {}),
                          ("cross_entropy_loss", [X(rng, dt, 5), T(np.int64(2)), None, red, -100, ls], {}),
                          ("cross_entropy_loss", [X(rng, dt, 1, 5, 3), targets(rng, (1, 3), 5), w, red, -100, ls], {}),
                          # probability targets
                          ("cross_entropy_loss", [X(rng, dt, 4, 5), T(rng.dirichlet(np.ones(5), 4), dt), None, red,
                                                  -100, ls], {}),
                          ("cross_entropy_loss", [X(rng, dt, 2, 5, 3), T(rng.random((2, 5, 3)), dt), w, red, -100, ls],
                           {}),
                          ("cross_entropy_loss", [X(rng, dt, 5), T(rng.random(5), dt), w, red, -100, ls], {})]
            cases += [("cross_entropy_loss", [X(rng, dt, 0, 5), targets(rng, (0,), 5), None, red], {}),
                      ("cross_entropy_loss", [X(rng, dt, 0, 5), T(np.zeros((0, 5)), dt), W(rng, dt, 5), red], {}),
                      ("cross_entropy_loss", [X(rng, dt, 3, 5), T(np.full(3, 4)), None, red, 4, 0.1], {})]
    check(server, cases)


def test_mse_loss(server, rng):
    cases = []
    for dt in FLOATS + ("float16",):  # torch 1.13's CPU mse refuses bfloat16 (the cases check that)
        for red in (0, 1, 2):
            cases += [("mse_loss", [X(rng, dt, 7, 5), X(rng, dt, 7, 5), red], {}),
                      ("mse_loss", [X(rng, dt, 7, 5), X(rng, dt, 5), red], {}),
                      ("mse_loss", [X(rng, dt, 1, 5), X(rng, dt, 3, 1), red], {}),
                      ("mse_loss", [X(rng, dt, 0, 5), X(rng, dt, 0, 5), red], {}),
                      ("mse_loss", [X(rng, dt), X(rng, dt), red], {}),
                      ("mse_loss", [X(rng, dt, 2, 3), X(rng, "float64", 2, 3), red], {}),
                      ("mse_loss", [X(rng, dt, 4), T(np.arange(4)), red], {}),
                      ("l1_loss", [X(rng, dt, 7, 5), X(rng, dt, 5), red], {}),
                      ("l1_loss", [X(rng, dt, 0, 5), X(rng, dt, 0, 5), red], {}),
                      ("l1_loss", [X(rng, dt), X(rng, "float64", 3), red], {})]
            if dt != "float16":  # torch's CPU mse backward has no float16
                cases += [("mse_loss_backward", [X(rng, dt, 7, 5) if red == 0 else X(rng, dt), X(rng, dt, 7, 5),
                                                 X(rng, dt, 7, 5), red], {}),
                          ("mse_loss_backward", [X(rng, dt), X(rng, dt, 3, 1), X(rng, dt, 4), red], {}),
                          ("mse_loss_backward", [X(rng, dt), X(rng, dt, 0, 3), X(rng, dt, 0, 3), red], {})]
    # a bool operand is promoted by ATen's iterator (sub alone refuses one); two bools or an integer are refused
    for a, b in ((X(rng, "float32", 3, 4), T(rng.random((3, 4)) < 0.5)), (T(rng.random(4) < 0.5), X(rng, "float64", 3, 4)),
                 (X(rng, "float16", 4), T(rng.random(4) < 0.5)), (T(rng.random(4) < 0.5), T(rng.random(4) < 0.5)),
                 (T(np.arange(4)), T(rng.random(4) < 0.5))):
        cases += [("mse_loss", [a, b, red], {}) for red in (0, 1)]
    cases.append(("mse_loss", [X(rng, "float32", 1000, 37), X(rng, "float32", 1000, 37), 1], {}))
    cases.append(("l1_loss", [X(rng, "float32", 1000, 37), X(rng, "float32", 1000, 37), 1], {}))
    cases.append(("l1_loss", [X(rng, "float32", 3, 4), X(rng, "float32", 3, 4), 3], {}))  # unreduced
    cases.append(("l1_loss", [T(np.arange(4)), T(np.arange(4)), 1], {}))  # mean refuses int64
    # the integer backward kernels take norm (2 / numel for a mean) as the dtype holds it, truncated, and
    # refuse an empty mean's infinite one, as c10's checked conversion does
    I = lambda dt, *sh: T(rng.integers(0 if dt == "uint8" else -5, 6, sh), dt)
    for dt in ("int64", "int32", "int8", "uint8"):
        for red in (0, 1, 2):
            cases += [("mse_loss_backward", [I(dt), I(dt, 3, 0, 1), I(dt, 3), red], {}),
                      ("mse_loss_backward", [I(dt), I(dt, 2, 1), I(dt, 2, 1), red], {}),
                      ("smooth_l1_loss_backward", [I(dt), I(dt, 0, 2), I(dt, 0, 2), red, 1.0], {})]
            if dt != "uint8":  # torch's own uint8 loops disagree on a wrapped x - y (tests/diff's torch_bug)
                cases.append(("smooth_l1_loss_backward", [I(dt), I(dt, 1, 2), I(dt, 1, 2), red, 1.0], {}))
    check(server, cases)


def test_smooth_l1_huber(server, rng):
    cases = []
    for dt in FLOATS + ("float16",):
        for red in (0, 1, 2):
            for p in (1.0, 0.4, 2.5):
                cases += [("smooth_l1_loss", [X(rng, dt, 7, 5), X(rng, dt, 7, 5), red, p], {}),
                          ("huber_loss", [X(rng, dt, 7, 5), X(rng, dt, 5), red, p], {})]
                if dt != "float16":  # torch's CPU smooth_l1 backward has no float16
                    cases.append(("smooth_l1_loss_backward", [X(rng, dt, 7, 5) if red == 0 else X(rng, dt),
                                                              X(rng, dt, 7, 5), X(rng, dt, 7, 5), red, p], {}))
                cases.append(("huber_loss_backward", [X(rng, dt, 7, 5) if red == 0 else X(rng, dt), X(rng, dt, 7, 5),
                                                      X(rng, dt, 7, 5), red, p], {}))
            cases += [("smooth_l1_loss", [X(rng, dt, 3, 4), X(rng, dt, 3, 4), red, 0.0], {}),  # l1_loss
                      ("smooth_l1_loss", [X(rng, dt, 0, 4), X(rng, dt, 0, 4), red], {}),
                      ("huber_loss", [X(rng, dt, 0, 4), X(rng, dt, 0, 4), red], {})]
    cases += [("smooth_l1_loss", [X(rng, "float32", 3, 4), X(rng, "float64", 4), 1, 0.7], {}),  # promotes
              ("huber_loss", [X(rng, "float32", 3, 4), X(rng, "float64", 4), 1, 0.7], {}),  # keeps self's
              # huber is a binary TensorIterator into self's dtype: it computes in the inputs' result type
              ("huber_loss", [T(np.zeros(4), "float16"), T(np.array([1e-3, -8.4e7, 7.7e3, 3.4e4]), "float32"),
                              0, 1e-5], {}),
              ("huber_loss", [T(np.array([np.inf, 1.0, -2.0]), "float16"), T(np.array([1.7e7, 0.5, 729.6]), "float32"),
                              2, 1.0], {}),
              ("huber_loss", [T(np.array([0.0, 1.0, 2.0, 3.0] * 5), "bfloat16"), X(rng, "float32", 20) , 0, 0.3], {}),
              ("huber_loss", [X(rng, "float32", 4), T(np.arange(4)), 1, 1.0], {}),
              ("huber_loss", [T(np.arange(4)), X(rng, "float32", 4), 1, 1.0], {}),
              ("smooth_l1_loss_backward", [X(rng, "float64"), X(rng, "float32", 3), X(rng, "float32", 3), 1, 0.5], {}),
              ("huber_loss", [X(rng, "float32", 3, 4), X(rng, "float32", 3, 4), 3, 1.0], {}),
              ("smooth_l1_loss", [X(rng, "float32", 3), X(rng, "float32", 3), 1, -1.0], {}),
              ("huber_loss", [X(rng, "float32", 3), X(rng, "float32", 3), 1, 0.0], {}),
              ("smooth_l1_loss", [T(np.arange(3)), T(np.arange(3)), 1], {}),
              ("huber_loss", [T(np.arange(3)), T(np.arange(3)), 1], {}),
              ("smooth_l1_loss_backward", [X(rng, "float16"), X(rng, "float16", 3), X(rng, "float16", 3), 1, 1.0], {}),
              ("huber_loss_backward", [X(rng, "float64"), X(rng, "float32", 3), X(rng, "float32", 3), 1, 1.0], {}),
              ("huber_loss_backward", [T(np.int64(1)), T(np.arange(3)), T(np.arange(3)), 1, 1.0], {})]
    check(server, cases)


def test_refusals(server, rng):
    x, t = X(rng, "float32", 4, 5), T(np.array([0, 1, 4, 2]))
    tw = T(np.float32(4))
    x4, t3 = X(rng, "float32", 2, 3, 2, 2), T(np.zeros((2, 2, 2), np.int64))
    cases = [("nll_loss_forward", [x, T(np.array([0, 5, 1, 1])), None, 1, -100], {}),
             ("nll_loss_forward", [x, T(np.array([0, -3, 1, 1])), None, 1, -100], {}),
             ("nll_loss_forward", [x, T(np.array([0, 5, 1, 1])), None, 0, -100], {}),
             ("nll_loss_forward", [x, T(np.array([0, 1, 4, 2], np.int32)), None, 1, -100], {}),
             ("nll_loss_forward", [x, T(np.array([0, 1, 4, 2], np.float32)), None, 1, -100], {}),
             ("nll_loss_forward", [X(rng, "float16", 4, 5), t, None, 1, -100], {}),
             ("nll_loss_forward", [T(np.ones((2, 2), np.int64)), T(np.array([0, 1])), None, 1, -100], {}),
             ("nll_loss_forward", [x, t, T(np.ones(5)), 1, -100], {}),
             ("nll_loss_forward", [x, t, T(np.ones(4, np.float32)), 1, -100], {}),
             ("nll_loss_forward", [x, t, T(np.ones((1, 5), np.float32)), 1, -100], {}),
             ("nll_loss_forward", [X(rng, "float32", 2, 3, 4), t, None, 1, -100], {}),
             ("nll_loss_forward", [X(rng, "float32"), T(np.int64(0)), None, 1, -100], {}),
             ("nll_loss_forward", [x, T(np.zeros((2, 2), np.int64)), None, 1, -100], {}),
             ("nll_loss_forward", [x, T(np.array([0, 1, 2])), None, 1, -100], {}),
             ("nll_loss_forward", [X(rng, "float32", 5), T(np.array([0, 1])), None, 1, -100], {}),
             ("nll_loss_forward", [x, T(np.int64(0)), None, 1, -100], {}),
             ("nll_loss2d_forward", [X(rng, "float32", 2, 3, 2), t3, None, 1, -100], {}),
             ("nll_loss2d_forward", [x4, T(np.zeros((2, 2), np.int64)), None, 1, -100], {}),
             ("nll_loss2d_forward", [x4, T(np.zeros((2, 2, 3), np.int64)), None, 1, -100], {}),
             ("nll_loss2d_forward", [x4, t3, T(np.ones(4, np.float32)), 1, -100], {}),
             ("nll_loss2d_forward", [x4, T(np.full((2, 2, 2), 3)), None, 1, -100], {}),
             ("nll_loss2d_forward", [X(rng, "float16", 2, 3, 2, 2), t3, None, 1, -100], {}),
             ("nll_loss2d_forward", [x4, T(np.zeros((2, 2, 2), np.uint8)), None, 1, -100], {}),
             ("nll_loss2d_forward", [x4, t3, T(np.ones(3)), 1, -100], {}),
             ("nll_loss_backward", [T(np.ones(3, np.float32)), x, t, None, 0, -100, tw], {}),
             ("nll_loss_backward", [T(np.ones((4, 1), np.float32)), x, t, None, 0, -100, tw], {}),
             ("nll_loss_backward", [T(np.ones(2, np.float32)), x, t, None, 1, -100, tw], {}),
             ("nll_loss_backward", [T(np.float32(1)), x, t, None, 1, -100, T(np.ones(2, np.float32))], {}),
             ("nll_loss_backward", [T(np.float32(1)), x, T(np.array([0, 5, 1, 1])), None, 1, -100, tw], {}),
             ("nll_loss_backward", [T(np.float32(1)), x, t, T(np.ones(4, np.float32)), 1, -100, tw], {}),
             ("nll_loss_backward", [T(np.float64(1)), x, t, None, 1, -100, tw], {}),
             ("nll_loss_backward", [T(np.float32(1)), x, t, None, 1, -100, T(np.float64(4))], {}),
             ("nll_loss2d_backward", [T(np.ones((2, 2), np.float32)), x4, t3, None, 0, -100, tw], {}),
             ("nll_loss2d_backward", [T(np.ones(2, np.float32)), x4, t3, None, 1, -100, tw], {}),
             ("nll_loss2d_backward", [T(np.float32(1)), x4, t3, None, 1, -100, T(np.ones(2, np.float32))], {}),
             ("nll_loss2d_backward", [T(np.float32(1)), x4, T(np.full((2, 2, 2), 7)), None, 1, -100, tw], {}),
             ("nll_loss_nd", [X(rng, "float32"), T(np.int64(0))], {}),
             ("nll_loss_nd", [X(rng, "float32", 2, 3, 4), T(np.zeros((3, 4), np.int64))], {}),
             ("nll_loss_nd", [X(rng, "float32", 2, 3, 4), T(np.zeros((2, 5), np.int64))], {}),
             ("cross_entropy_loss", [x, T(np.zeros((4, 5), np.int64))], {}),
             ("cross_entropy_loss", [x, x, None, 1, 5], {}),
             ("cross_entropy_loss", [x, t, None, 1, -100, 2.0], {}),
             ("cross_entropy_loss", [x, x, T(np.ones(3, np.float32))], {}),
             ("cross_entropy_loss", [T(np.ones((2, 2), np.int64)), T(np.array([0, 1]))], {}),
             ("mse_loss", [T(np.arange(4)), T(np.arange(4)), 1], {}),
             ("mse_loss_backward", [T(np.float64(1)), x, x, 1], {}),
             ("mse_loss_backward", [T(np.float16(1)), X(rng, "float16", 3), X(rng, "float16", 3), 1], {}),
             # the meta functions' order: the broadcast, then the reduction's internal assert, then the
             # kernel's dtype (huber_loss has no assert: an unknown reduction leaves the loss unreduced)
             ("mse_loss", [T(np.arange(4)), T(np.arange(4)), 5], {}),
             ("mse_loss", [T(np.arange(4)), T(np.arange(3)), 5], {}),
             ("mse_loss", [T(np.ones(4, np.bool_)), T(np.ones(4, np.bool_)), 7], {}),
             ("smooth_l1_loss", [T(np.arange(4)), T(np.arange(4)), 5, 1.0], {}),
             ("smooth_l1_loss", [x, x, -1, 1.0], {}),
             ("smooth_l1_loss", [x, x, 3, -1.0], {}),
             ("huber_loss", [x, x, 4, 1.0], {})]
    check(server, cases)


def test_transposed_inputs(server, rng):
    """Non-contiguous self and target through /v1/run (transpose.int of a
    value sent with it), against torch on the same values made contiguous."""
    a = rng.standard_normal((5, 7))  # transposed: 7 rows of 5 classes
    b = rng.random((5, 7))  # class probabilities: a signed target's sum cancels, and bfloat16 sums then differ
    t = T(rng.integers(0, 5, 7))
    runs = []
    for dt in FLOATS:
        runs += [("nll_loss_forward", ["A", t, None, 1, -100], dt, 0),
                 ("nll_loss_forward", ["A", t, W(rng, dt, 5), 0, 2], dt, 0),
                 ("nll_loss_forward", ["A", t, W(rng, dt, 5), 1, 2], dt, 1),
                 ("cross_entropy_loss", ["A", t, None, 1, -100, 0.1], dt, 0),
                 ("cross_entropy_loss", ["A", "B", W(rng, dt, 5), 2, -100, 0.0], dt, 0)]
    runs += [("mse_loss", ["A", "B", 1], dt, 0) for dt in ("float32", "float64")]
    ref = lambda v, dt: T(a.T.copy(), dt) if v == "A" else T(b.T.copy(), dt) if v == "B" else v
    wants = torch_ref([{"op": op, "args": [ref(v, dt) for v in args], "out": k} for op, args, dt, k in runs])
    bad = []
    for (op, args, dt, k), want in zip(runs, wants):
        steps = [{"op": "transpose.int", "args": [T(a, dt), 0, 1]}, {"op": "transpose.int", "args": [T(b, dt), 0, 1]}]
        call = [{"ref": "$0"} if v == "A" else {"ref": "$1"} if v == "B" else v for v in args]
        r = server.post("/v1/run", {"steps": steps + [{"op": op, "args": call}], "device": "cpu"})
        if r.status_code != 200 or "error" in want:
            bad.append(f"{op} {dt}: {r.status_code} {r.text[:300]} / torch {want}")
            continue
        compare(f"{op} {dt} transposed", r.json()["outputs"][k], want, bad, op)
    assert not bad, "\n".join(bad)
