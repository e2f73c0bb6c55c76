"""binary_cross_entropy (+_backward), binary_cross_entropy_with_logits,
kl_div, soft_margin_loss (+_backward), glu (+_backward) and prelu
(+_backward) (kernels/shape_act_loss.c, cpu/act_loss.c, composite/loss_more.c)
against PyTorch 1.13 (tools/torch_ref.py) on fresh random inputs: every
reduction (and an out-of-range one, which ATen treats as none), weights and
pos_weight (full and broadcast), batch 1 and 0, 0-dim and 1-D inputs,
bce's -100 clamp at inputs 0 and 1, glu along every dim, prelu with one
shared weight, a 0-dim weight and one per channel, every dtype torch's CPU
kernels take (and their refusals of the others), transposed inputs
(through /v1/run), and torch's refusals with its messages. The gradients
are test_autograd.py's cases."""

import numpy as np

from conftest import assert_bits_as_torch, tensor, torch_ref
from test_losses import T, X, check, compare

FLOATS = ("float32", "float64", "bfloat16")


def P(rng, dt, *shape, edges=False):
    """Probabilities in (0, 1); with edges, some exact 0s and 1s."""
    a = rng.random(shape)
    if edges and a.size:
        a.reshape(-1)[:2] = [0.0, 1.0][: min(2, a.size)]
    return T(a, dt)


SHAPES = ((7, 5), (1, 3), (0, 4), (2, 3, 4), (5,), ())


def test_binary_cross_entropy(server, rng):
    cases = []
    for dt in ("float32", "float64"):
        for shape in SHAPES:
            x, t = P(rng, dt, *shape, edges=True), P(rng, dt, *shape)
            c = shape[-1] if shape else 1
            for red in (0, 1, 2, 5):
                cases.append(("binary_cross_entropy", [x, t, None, red], {}))
                cases.append(("binary_cross_entropy", [x, t, T(rng.random(shape) + 0.5, dt), red], {}))
                cases.append(("binary_cross_entropy", [x, t, T(rng.random(c) + 0.5, dt), red], {}))
                g = X(rng, dt, *shape) if red in (0, 5) else X(rng, dt)
                cases.append(("binary_cross_entropy_backward", [g, x, t, None, red], {}))
                cases.append(("binary_cross_entropy_backward", [g, x, t, T(rng.random(c) + 0.5, dt), red], {}))
        # squeezed broadcasting: a [1, C] target over [N, C], a [N, C, 1] self over an [N, C] target
        cases += [("binary_cross_entropy", [P(rng, dt, 4, 3), P(rng, dt, 1, 3), None, 0], {}),
                  ("binary_cross_entropy", [P(rng, dt, 4, 3, 1), P(rng, dt, 4, 3), None, 1], {}),
                  ("binary_cross_entropy_backward", [X(rng, dt, 3), P(rng, dt, 4, 3), P(rng, dt, 4, 3), None, 0], {}),
                  # a float64 weight on float32 losses (mul_ casts back)
                  ("binary_cross_entropy", [P(rng, dt, 4, 3), P(rng, dt, 4, 3), T(rng.random(3), "float64"), 2], {})]
    # large enough for the reductions' partial sums
    cases.append(("binary_cross_entropy", [P(rng, "float32", 3000, 7), P(rng, "float32", 3000, 7), None, 1], {}))
    check(server, cases)


def test_binary_cross_entropy_with_logits(server, rng):
    cases = []
    for dt in FLOATS:
        for shape in SHAPES:
            x, t = X(rng, dt, *shape), P(rng, dt, *shape)
            c = shape[-1] if shape else 1
            for red in (0, 1, 2):
                cases += [("binary_cross_entropy_with_logits", [x, t, None, None, red], {}),
                          ("binary_cross_entropy_with_logits", [x, t, T(rng.random(shape) + 0.5, dt), None, red], {}),
                          ("binary_cross_entropy_with_logits", [x, t, None, T(rng.random(c) * 3, dt), red], {}),
                          ("binary_cross_entropy_with_logits", [x, t, T(rng.random(c) + 0.5, dt),
                                                                T(rng.random(c) * 3, dt), red], {})]
    # large logits: the max_val trick keeps them finite
    cases.append(("binary_cross_entropy_with_logits", [T(np.array([-200.0, -30, 0, 30, 200]), "float32"),
                                                       P(rng, "float32", 5), None, None, 0], {}))
    # one shape, dtype and layout for both (the out-of-place steps), past one thread's share
    x, t = X(rng, "float32", 3000, 7), P(rng, "float32", 3000, 7)
    cases += [("binary_cross_entropy_with_logits", [x, t, None, None, red], {}) for red in (0, 1)]
    check(server, cases)


def test_binary_cross_entropy_with_logits_bits(server, rng):
    """composite/loss_more.c computes -|x| and 1 - t in fewer steps than ATen 1.13, claiming the bits
    of ATen's steps: its answer is compared bit for bit (zero signs and NaNs included) with ATen's
    steps run one by one through the server, on random logits and targets (t outside [0, 1] too)
    with the values where the identities could break: +-0, +-inf, NaN, logits past exp's range and
    past half the dtype's largest, and t = 1 exactly. (Against torch itself the elementwise math
    may differ by an ulp: exp is this project's, not SLEEF's; test_binary_cross_entropy_with_logits
    compares within a tolerance.)"""
    from test_losses import values

    def run(op, *args, **kw):
        r = server.post(f"/v1/ops/{op}", {"args": list(args), "kwargs": kw})
        assert r.status_code == 200, (op, r.text)
        o = r.json()["outputs"][0]
        return T(values(o), o["dtype"])

    def bits(o):
        a = values(o).astype(np.float64 if o["dtype"] == "float64" else np.float32)  # bfloat16: exact
        return np.where(np.isnan(a), np.nan, 0), a.view(np.uint64 if a.dtype == np.float64 else np.uint32)

    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 20, -20, 88, -88, 104, -104, 1e30, -1e30, 3e38, -3e38]
    k = len(edges)
    for dt, tdt in (("float32", "float32"), ("float64", "float64"), ("bfloat16", "bfloat16"),
                    ("float32", "float64")):  # the last: the in-place steps
        n = 300
        x = rng.standard_normal(n) * rng.choice([1, 8, 40], n)
        t = rng.random(n) * 2 - 0.5
        x[:k], x[k: 2 * k], x[2 * k: 3 * k] = edges, edges, edges
        t[k: 2 * k], t[2 * k: 3 * k] = 1.0, 2.0  # t = 1 (a zero product) and t > 1 at every edge
        if dt == "float64":
            x[np.abs(x) == 3e38] *= 1.7e308 / 3e38  # past half of float64's largest
        # pos_weight below 0 too: at t = 1 its log weight times a +0 lse is -0 (difftest seed 7196)
        xs, ts, ws, pws = T(x, dt), T(t, tdt), T(rng.random(n) + 0.5, dt), T(rng.random(n) * 3 - 1, dt)
        negx = run("neg", xs)
        mv = run("clamp_min", negx, 0)
        lse = run("log", run("add", run("exp", run("neg", mv)), run("exp", run("sub", negx, mv))))
        prod = run("mul", run("add", run("neg", ts), 1), xs)
        steps = {"plain": run("add", run("add", prod, mv), lse)}
        lw = run("add", run("mul", run("sub", pws, 1), ts), 1)
        steps["pos_weight, weight"] = run("mul", run("add", prod, run("mul", lw, run("add", lse, mv))), ws)
        for what, extra in (("plain", [None, None]), ("pos_weight, weight", [ws, pws])):
            r = server.post("/v1/ops/binary_cross_entropy_with_logits", {"args": [xs, ts] + extra + [0]})
            assert r.status_code == 200, r.text
            o, want = r.json()["outputs"][0], steps[what]
            assert o["dtype"] == want["dtype"], (dt, tdt, what, o["dtype"], want["dtype"])
            (gn, gb), (wn, wb) = bits(o), bits(want)
            bad = np.flatnonzero(~((gb == wb) | (np.isnan(gn) & np.isnan(wn))))
            assert not bad.size, (dt, tdt, what, bad[:8], values(o)[bad[:8]], values(want)[bad[:8]])


def test_kl_div(server, rng):
    cases = []
    for dt in FLOATS + ("float16",):
        for shape in SHAPES:
            x = T(np.log(rng.random(shape) + 0.01), dt)
            t, lt = P(rng, dt, *shape), T(np.log(rng.random(shape) + 0.01), dt)
            for red in (0, 1, 2):
                cases += [("kl_div", [x, t, red], {"log_target": False}), ("kl_div", [x, lt, red], {"log_target": True})]
    # a target of exact zeros: xlogy's 0 * log 0 = 0
    cases.append(("kl_div", [X(rng, "float32", 4), T(np.array([0.0, 0.5, 0, 1]), "float32"), 0], {}))
    check(server, cases)


def test_soft_margin_loss(server, rng):
    cases = []
    for dt in FLOATS:
        for shape in SHAPES:
            x, t = X(rng, dt, *shape), T(rng.choice([-1.0, 1.0], shape), dt)
            for red in (0, 1, 2):
                cases.append(("soft_margin_loss", [x, t, red], {}))
                g = X(rng, dt, *shape) if red == 0 else X(rng, dt)
                cases.append(("soft_margin_loss_backward", [g, x, t, red], {}))
        # an out-of-range reduction leaves the first element (ATen resizes its output to [])
        cases.append(("soft_margin_loss", [X(rng, dt, 3, 4), T(rng.choice([-1.0, 1.0], (3, 4)), dt), 7], {}))
    check(server, cases)


def test_glu(server, rng):
    cases = []
    for dt in FLOATS:
        for shape, dims in (((4, 6), (-1, 0)), ((2, 3, 8), (0, 2, -1)), ((6,), (0,)), ((0, 4), (1,)), ((4, 0), (0,)),
                            ((1, 2), (1,))):
            x = X(rng, dt, *shape)
            for d in dims:
                cases.append(("glu", [x, d], {}))
                half = list(shape)
                half[d] //= 2
                cases.append(("glu_backward", [X(rng, dt, *half), x, d], {}))
        # a grad_output that broadcasts over the halved shape
        cases.append(("glu_backward", [X(rng, dt, 3), X(rng, dt, 4, 6), 1], {}))
    check(server, cases)


def test_prelu(server, rng):
    cases = []
    for dt in FLOATS:
        for shape in ((4, 6), (2, 3, 5, 4), (1, 3), (0, 3, 2), (5,), ()):
            x = X(rng, dt, *shape)
            ws = [T(rng.random(1) - 0.3, dt), T(np.float64(rng.random() - 0.3), dt)]
            if len(shape) > 1:
                ws.append(T(rng.random(shape[1]) - 0.3, dt))
            for w in ws:
                cases.append(("prelu", [x, w], {}))
                cases.append(("prelu_backward", [X(rng, dt, *shape), x, w], {}))
    # a grad_output of higher rank than self with a weight per channel: ATen resizes its fresh outputs to
    # the broadcast, where the weight's view [1, C, 1...] aligns at the right, and the weight gradient is
    # the collector summed over [0] + [2, self.ndim) of the broadcast's dims (its shape, not the weight's)
    for dt in ("float32", "float64"):
        for gshape, shape in (((2, 3, 4), (3, 4)), ((4, 2, 3, 5), (2, 3, 5)), ((2, 1, 3, 4), (3, 4)),
                              ((3, 2, 6, 2, 3), (2, 6, 2, 3)), ((0, 3, 4), (3, 4)), ((2, 5, 3, 4), (1, 4))):
            cases.append(("prelu_backward", [X(rng, dt, *gshape), X(rng, dt, *shape),
                                             T(rng.random(shape[1]) - 0.3, dt)], {}))
    check(server, cases)
    check(server, [c for c in cases if c[0] == "prelu_backward"][-18:], outs=2)
    cases = [("prelu_backward", [X(rng, dt, 2, 3, 5, 4), X(rng, dt, 2, 3, 5, 4), T(rng.random(3) - 0.3, dt)], {})
             for dt in ("float32", "float64")]
    # bfloat16's per-channel weight gradient sums rounded products that largely cancel, so it is compared
    # bit for bit: the server replays ATen 1.13's order (one rounding for slabs of one element, two per
    # sample's slab otherwise), and any other order differs in about half of these
    reqs = []
    for shape in ((4, 6), (2, 3, 5, 4), (3, 4, 7), (8, 3, 2, 2), (5, 2, 64), (3, 2, 1)):
        for _ in range(4):
            w = T(rng.random(shape[1]) - 0.3, rng.choice(["bfloat16", "float64"]))
            reqs.append({"op": "prelu_backward", "out": 1,
                         "args": [X(rng, "bfloat16", *shape), X(rng, "bfloat16", *shape), w]})
    for req, want in zip(reqs, torch_ref(reqs)):
        r = server.post("/v1/ops/prelu_backward", {"args": req["args"]})
        assert r.status_code == 200, r.text
        # printed shortest for float32, so compared as float32 (bfloat16 values are exact there)
        got = np.array(r.json()["outputs"][1]["data"], np.float32)
        assert np.array_equal(got, np.array(want["value"], np.float32)), (req["args"][1]["shape"], got, want)
    # a bfloat16 self takes a weight of any dtype (one shared weight's gradient comes back in its dtype);
    # a grad_output larger than self with one shared weight (ATen resizes its fresh outputs)
    check(server, [("prelu", [X(rng, "bfloat16", 4, 6), T(rng.random(6), "float64")], {}),
                   ("prelu", [X(rng, "bfloat16"), T(np.array([1]), "int8")], {})])
    cases += [("prelu_backward", [X(rng, "bfloat16", 4, 6), X(rng, "bfloat16", 4, 6), T(rng.random(1), "float64")], {}),
              ("prelu_backward", [X(rng, "bfloat16", 4, 6), X(rng, "bfloat16", 4, 6), T(rng.random(6), "float64")], {}),
              ("prelu_backward", [X(rng, "float32", 3, 1), X(rng, "float32", 1), T(np.float64(0.3), "float32")], {})]
    # an integer or float16 shared weight: ATen fills its gradient from the float sum as a Scalar,
    # truncated when it fits the dtype and refused (c10's checked conversion) when it does not
    big = T(np.array([[-3e4, 1.0], [-2.0, 5.0]]), "bfloat16")
    for wdt in ("int64", "int32", "int8", "uint8", "bool", "float16"):
        cases += [("prelu_backward", [X(rng, "bfloat16", 4, 6), X(rng, "bfloat16", 4, 6), T(np.array([0]), wdt)], {}),
                  ("prelu_backward", [T(np.array([[3e4, 1], [2, 5]]), "bfloat16"), big, T(np.array([1]), wdt)], {})]
    nan = T(np.array([[np.nan, 1.0], [-2.0, -np.inf]]), "bfloat16")
    cases += [("prelu_backward", [X(rng, "bfloat16", 2, 2), nan, T(np.array([0]), wdt)], {})
              for wdt in ("int64", "int16", "float16")]
    check(server, cases, outs=2)


def test_refusals(server, rng):
    x, t = P(rng, "float32", 3, 4), P(rng, "float32", 3, 4)
    cases = [("binary_cross_entropy", [T(np.array([[0.5, 1.5]]), "float32"), P(rng, "float32", 1, 2), None, 1], {}),
             ("binary_cross_entropy", [T(np.array([np.nan, 0.5]), "float32"), P(rng, "float32", 2), None, 0], {}),
             ("binary_cross_entropy", [x, P(rng, "float32", 2, 4), None, 1], {}),
             ("binary_cross_entropy", [x, P(rng, "float32", 12), None, 1], {}),
             ("binary_cross_entropy", [x, P(rng, "float64", 3, 4), None, 1], {}),
             ("binary_cross_entropy", [x, t, T(rng.random(5), "float32"), 1], {}),
             ("binary_cross_entropy_backward", [X(rng, "float32", 3, 5), x, t, None, 0], {}),
             ("binary_cross_entropy_backward", [X(rng, "float64", 3, 4), x, t, None, 0], {})]
    for dt in ("bfloat16", "float16", "int64"):
        R = (lambda *sh: T(rng.integers(-3, 3, sh), dt)) if dt == "int64" else (lambda *sh: X(rng, dt, *sh))
        cases += [("binary_cross_entropy", [R(3), R(3), None, 1], {}),
                  ("binary_cross_entropy_backward", [R(), R(3), R(3), None, 1], {}),
                  ("glu", [R(2, 4), -1], {}), ("glu_backward", [R(2, 2), R(2, 4), -1], {}),
                  ("prelu", [R(2, 4), R(1)], {}), ("prelu_backward", [R(2, 4), R(2, 4), R(1)], {}),
                  ("soft_margin_loss", [R(2, 4), R(2, 4), 1], {}), ("soft_margin_loss_backward", [R(), R(3), R(3), 1], {}),
                  ("binary_cross_entropy_with_logits", [R(2, 4), R(2, 4), None, None, 1], {})]
    cases += [("glu", [X(rng, "float32"), 0], {}), ("glu", [X(rng, "float32", 3, 5), 1], {}),
              ("glu", [X(rng, "float32", 3, 4), 2], {}), ("glu", [X(rng, "float32", 3, 4), -3], {}),
              ("glu_backward", [X(rng, "float32", 3, 3), X(rng, "float32", 3, 4), 1], {}),
              ("glu_backward", [X(rng, "float64", 3, 2), X(rng, "float32", 3, 4), 1], {}),
              ("glu_backward", [X(rng, "float32", 3, 2), X(rng, "float32", 3, 5), 1], {}),
              ("prelu", [X(rng, "float32", 4, 6), X(rng, "float32", 4)], {}),
              ("prelu", [X(rng, "float32", 4, 6), X(rng, "float32", 2, 2)], {}),
              ("prelu", [X(rng, "float32", 4, 6), X(rng, "float32", 1, 1)], {}),
              ("prelu", [X(rng, "float32"), X(rng, "float32", 2)], {}),
              ("prelu", [X(rng, "float32", 5), X(rng, "float32", 5)], {}),
              ("prelu", [X(rng, "float32", 4, 6), X(rng, "float64", 1)], {}),
              ("prelu_backward", [X(rng, "float32", 4, 5), X(rng, "float32", 4, 6), X(rng, "float32", 6)], {}),
              ("prelu_backward", [X(rng, "float64", 4, 6), X(rng, "float32", 4, 6), X(rng, "float32", 6)], {}),
              ("kl_div", [T(np.arange(3)), X(rng, "float32", 3), 1], {}),
              ("kl_div", [X(rng, "float32", 3, 4), X(rng, "float32", 2, 4), 1], {}),
              ("soft_margin_loss", [X(rng, "float32", 3, 4), X(rng, "float32", 2, 4), 1], {}),
              ("soft_margin_loss", [T(np.arange(3)), T(np.arange(3)), 1], {}),
              ("binary_cross_entropy_with_logits", [X(rng, "float32", 3, 4), P(rng, "float32", 1, 4), None, None, 1], {}),
              ("binary_cross_entropy_with_logits", [X(rng, "float32", 3, 4), P(rng, "float32", 3, 4), None,
                                                    X(rng, "float32", 5), 1], {}),
              ("binary_cross_entropy_with_logits", [T(np.arange(3)), T(np.arange(3)), None, None, 1], {}),
              ("binary_cross_entropy_with_logits", [X(rng, "float32", 3), T(np.array([True, False, True])),
                                                    None, None, 1], {})]
    check(server, cases)


def test_transposed_inputs(server, rng):
    """Non-contiguous inputs through /v1/run (transpose.int of values sent
    with it), against torch on the same values made contiguous."""
    a, b = rng.random((5, 6)), rng.random((5, 6))
    runs = []
    for dt in FLOATS:
        if dt != "bfloat16":
            runs += [("binary_cross_entropy", ["A", "B", None, 1], dt, 0),
                     ("binary_cross_entropy_backward", ["B", "A", "B", None, 0], dt, 0)]
        runs += [("binary_cross_entropy_with_logits", ["A", "B", None, T(rng.random(5), dt), 0], dt, 0),
                 ("kl_div", ["A", "B", 2], dt, 0), ("soft_margin_loss", ["A", "B", 1], dt, 0),
                 ("glu", ["A", 0], dt, 0),
                 ("prelu", ["A", T(rng.random(5) - 0.5, dt)], dt, 0),
                 ("prelu_backward", ["B", "A", T(rng.random(5) - 0.5, dt)], dt, 1)]
    shift = lambda op: 0.5 if op.startswith(("glu", "prelu")) else 0.0  # signed inputs where they matter
    ref = lambda op, v, dt: T(a.T.copy() - shift(op), dt) if v == "A" else T(b.T.copy(), dt) if v == "B" else v
    wants = torch_ref([{"op": op, "args": [ref(op, v, dt) for v in args], "out": k} for op, args, dt, k in runs])
    bad = []
    for (op, args, dt, k), want in zip(runs, wants):
        steps = [{"op": "transpose.int", "args": [T(a - shift(op), dt), 0, 1]},
                 {"op": "transpose.int", "args": [T(b, dt), 0, 1]}]
        call = [{"ref": "$0"} if v == "A" else {"ref": "$1"} if v == "B" else v for v in args]
        r = server.post("/v1/run", {"steps": steps + [{"op": op, "args": call}], "device": "cpu"})
        if r.status_code != 200 or "error" in want:
            bad.append(f"{op} {dt}: {r.status_code} {r.text[:300]} / torch {want}")
            continue
        compare(f"{op} {dt} transposed", r.json()["outputs"][k], want, bad, op)
    assert not bad, "\n".join(bad)


def test_binary_cross_entropy_backward_long_bit_for_bit(server, rng):
    """binary_cross_entropy_backward over 100,003 elements (cpu/act_loss.c: float32 in one vectorised loop
    per case — a one-element grad read once, not expanded; the mean's division fused into the same loop):
    every bit as torch's for each reduction, with and without weight, edge inputs (0, 1) among them;
    float64 through the generic loop too."""
    n = 100_003
    cases = []
    for dt in ("float32", "float64"):
        x, t = rng.random(n).astype(dt), rng.random(n).astype(dt)
        x[rng.integers(0, n, 40)] = rng.choice([0.0, 1.0], 40)
        w = (rng.random(n) + 0.5).astype(dt)
        for red in (0, 1, 2):
            g = rng.standard_normal(n).astype(dt) if red == 0 else np.array(rng.standard_normal(), dt)
            for weight in (None, w):
                cases.append(("binary_cross_entropy_backward",
                              [tensor(g), tensor(x), tensor(t), None if weight is None else tensor(weight), red], {}))
    assert_bits_as_torch(server, cases)
