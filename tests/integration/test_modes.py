"""The mode stack over HTTP (PyTorch's TorchDispatchMode): trace inside
composite operators, the order of several modes and that a mode never sees
its own re-calls, profile counts, validate's 422, override with a reference
kernel, modes in programs and during backward, and the Mode key in the
dispatch record."""

import numpy as np
import pytest

from conftest import error_message, from_json, tensor, validate


def call(server, op, *args, **extra):
    return server.post(f"/v1/ops/{op}", {"args": list(args), **extra})


def ok(r, path):
    assert r.status_code == 200, r.text
    validate(r, "POST", path)
    return r.json()


def test_trace_sees_inside_composites(server, rng):
    a, b = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    body = ok(call(server, "matmul", tensor(a), tensor(b), modes=["trace"]), "/v1/ops/matmul")
    np.testing.assert_allclose(from_json(body["outputs"][0]), a @ b, rtol=1e-5, atol=1e-5)
    ev = body["modes"]["trace"]["events"]
    assert ev[0]["op"] == "aten::matmul" and ev[0]["depth"] == 0
    assert ev[0]["inputs"][0]["shape"] == [2, 3, 4] and ev[0]["inputs"][1]["dtype"] == "float32"
    assert ev[0]["outputs"][0]["shape"] == [2, 3, 5]
    inner = [e["op"] for e in ev[1:]]
    assert "aten::mm" in inner, inner  # the mm matmul became
    mm = next(e for e in ev if e["op"] == "aten::mm")
    assert mm["depth"] >= 1 and mm["inputs"][0]["shape"] == [6, 4] and mm["key"] == "CPU"
    assert body["dispatch"]["steps"][0]["key"] == "Mode"
    assert body["dispatch"]["path"].startswith("Mode [backend fallback]")


def test_no_modes_no_mode_key(server, rng):
    a = rng.standard_normal(4).astype(np.float32)
    body = ok(call(server, "relu", tensor(a)), "/v1/ops/relu")
    assert "Mode" not in body["dispatch"]["path"] and "modes" not in body
    body = ok(call(server, "relu", tensor(a), modes=[]), "/v1/ops/relu")
    assert "Mode" not in body["dispatch"]["path"]


def test_order_and_non_recursion(server, rng):
    a = rng.standard_normal((3, 3)).astype(np.float32)
    body = ok(call(server, "linear", tensor(a), tensor(a), modes=["profile", "trace"]), "/v1/ops/linear")
    trace = body["modes"]["trace"]["events"]
    prof = {r["op"]: r for r in body["modes"]["profile"]["ops"]}
    seen = {}
    for e in trace:
        seen[e["op"]] = seen.get(e["op"], 0) + 1
    # both modes see every operator exactly once per call: neither sees its
    # own continuation again
    assert seen == {k: v["count"] for k, v in prof.items()}, (seen, prof)
    assert seen["aten::linear"] == 1
    # a mode that re-calls the operator reaches the next mode down: override
    # innermost sees mm first and calls the replacement, which the outer
    # trace sees; never aten::mm, and override never sees its own re-call
    b = rng.standard_normal((3, 2)).astype(np.float32)
    body = ok(call(server, "mm", tensor(a), tensor(b), modes=["trace", {"override": {"mm": "mm_reference"}}]),
              "/v1/ops/mm")
    assert [e["op"] for e in body["modes"]["trace"]["events"]] == ["od::mm_reference"]
    assert body["modes"]["override"]["replaced_calls"] == 1
    np.testing.assert_allclose(from_json(body["outputs"][0]), a @ b, rtol=1e-5, atol=1e-5)
    # trace innermost: it sees aten::mm, then override (outer) replaces it
    # below, with every mode popped
    body = ok(call(server, "mm", tensor(a), tensor(b), modes=[{"override": {"mm": "mm_reference"}}, "trace"]),
              "/v1/ops/mm")
    assert [e["op"] for e in body["modes"]["trace"]["events"]] == ["aten::mm"]
    assert body["modes"]["override"]["replaced_calls"] == 1


def test_override_with_reference_kernel(server, rng):
    a, b = rng.standard_normal((5, 7)), rng.standard_normal((7, 3))
    body = ok(call(server, "mm", tensor(a), tensor(b), modes=[{"override": {"mm": "mm_reference"}}]), "/v1/ops/mm")
    np.testing.assert_allclose(from_json(body["outputs"][0]), a @ b, rtol=1e-12)
    assert any(s["op"] == "od::mm_reference" for s in body["dispatch"]["steps"])
    # inside a composite: matmul's mm is replaced
    x = rng.standard_normal((2, 4, 7))
    body = ok(call(server, "matmul", tensor(x), tensor(b), modes=[{"override": {"mm": "mm_reference"}}]),
              "/v1/ops/matmul")
    np.testing.assert_allclose(from_json(body["outputs"][0]), x @ b, rtol=1e-12)
    assert body["modes"]["override"]["replaced_calls"] == 1
    for bad in ({"override": {"mm": "no_such_op"}}, {"override": {"mm": "relu"}}, {"override": {}}):
        r = call(server, "mm", tensor(a), tensor(b), modes=[bad])
        assert r.status_code == 400, r.text


def test_validate(server, rng):
    a = np.abs(rng.standard_normal(5)) + 0.1
    body = ok(call(server, "log", tensor(a), modes=["validate"]), "/v1/ops/log")
    np.testing.assert_allclose(from_json(body["outputs"][0]), np.log(a), rtol=1e-6)
    r = call(server, "log", tensor(-a), modes=["validate"])
    assert r.status_code == 422 and "aten::log output 0" in error_message(r)
    bad = a.copy()
    bad[3] = np.inf
    r = call(server, "relu", tensor(bad), modes=["validate"])
    assert r.status_code == 422 and "aten::relu input 0" in error_message(r) and "index 3" in error_message(r)
    # inside a composite, the first operator that makes a NaN is named
    m = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    r = call(server, "matmul", tensor(m), tensor(np.array([[np.nan, 1.0], [1.0, 1.0]], np.float32)),
             modes=["validate"])
    assert r.status_code == 422 and "aten::matmul input 1" in error_message(r)


def test_modes_in_programs_and_backward(server, rng):
    s = {"X-OD-Session": "modes-prog"}
    a = rng.standard_normal((3, 4))
    r = server.post("/v1/tensors", {"tensor": dict(tensor(a), requires_grad=True)}, headers=s)
    x = r.json()["id"]
    body = {"steps": [{"op": "mul", "args": [{"ref": x}, {"ref": x}]},
                      {"op": "sum", "args": [{"ref": "$0"}]},
                      {"backward": "$1"}],
            "outputs": ["$1"], "modes": ["profile", "trace"]}
    r = server.post("/v1/run", body, headers=s)
    assert r.status_code == 200, r.text
    validate(r, "POST", "/v1/run")
    res = r.json()
    ops = [e["op"] for e in res["modes"]["trace"]["events"]]
    # the forward steps, then what MulBackward0 and SumBackward0 ran
    assert ops[:2] == ["aten::mul.Tensor", "aten::sum"]
    assert "aten::expand" in ops[2:] and ops.count("aten::mul.Tensor") >= 3, ops
    counts = {p["op"]: p["count"] for p in res["modes"]["profile"]["ops"]}
    assert counts["aten::mul.Tensor"] == ops.count("aten::mul.Tensor")
    # each mode is one visit of the Mode key, innermost first
    assert res["dispatch"][0]["record"]["path"].startswith(
        "Mode [backend fallback] \u2192 Mode [backend fallback] \u2192 AutogradCPU [autograd kernel]")
    server.delete("/v1/sessions/modes-prog")


def test_bad_modes(server, rng):
    a = tensor(rng.standard_normal(3).astype(np.float32))
    for modes, msg in ((["nope"], "unknown mode 'nope'"), ("trace", "must be a list"), ([{"trace": 3}], "modes[0]"),
                       ([{"trace": {"max_events": 0}}], "max_events"), ([{"profile": {"x": "1"}}], "no settings")):
        r = call(server, "relu", a, modes=modes)
        assert r.status_code == 400, (modes, r.text)
        assert msg in error_message(r), (msg, error_message(r))
    r = call(server, "relu", a, modes=["trace"] * 9)
    assert r.status_code == 413 and "at most 8" in error_message(r)


def test_tables_explain_and_keys_show_the_functionality_keys(server, rng):
    d = server.get("/v1/ops/aten::mm").json()
    slot = {s["key"]: s for s in d["table"]}
    assert (slot["AutogradCPU"]["provenance"], slot["AutogradCPU"]["kernel"]) == ("autograd kernel", "MmBackward0")
    assert (slot["Batched"]["provenance"], slot["Batched"]["kernel"]) == ("kernel", "batch_rule_matmul")
    assert slot["AutocastCPU"]["kernel"] == "autocast_lower_precision"
    assert (slot["Mode"]["provenance"], slot["Mode"]["kernel"]) == ("backend fallback", "mode_stack")
    # an operator without a rule or formula: the fallbacks
    slot = {s["key"]: s for s in server.get("/v1/ops/aten::cat").json()["table"]}
    assert (slot["Batched"]["provenance"], slot["Batched"]["kernel"]) == ("backend fallback", "vmap_fallback_loop")
    slot = {s["key"]: s for s in server.get("/v1/ops/aten::remainder.Scalar_Tensor").json()["table"]}
    assert slot["AutogradCPU"]["kernel"] == "autograd_not_implemented"
    dump = server.get("/v1/ops/aten::mm", params={"format": "text"}).text
    assert any(l.startswith("AutogradCPU: registered at kernels/ops.def:") and l.endswith("[autograd kernel]")
               for l in dump.splitlines()), dump
    # explain: the path a call with these settings would take
    a = tensor(rng.standard_normal(3).astype(np.float32))
    r = server.post("/v1/ops/mul/explain", {"args": [dict(a, requires_grad=True), a], "modes": ["trace"]})
    assert r.status_code == 200, r.text
    validate(r, "POST", "/v1/ops/mul/explain")
    assert r.json()["path"] == \
        "Mode [backend fallback] \u2192 AutogradCPU [autograd kernel] \u2192 CPU [kernel]", r.json()["path"]
    r = server.post("/v1/ops/mul/explain", {"args": [dict(a, requires_grad=True), a], "grad_mode": "no_grad"})
    assert r.json()["path"] == "CPU [kernel]"
    k = server.get("/v1/keys").json()["request_tls"]
    assert k["default"] == {"included": ["BackendSelect"], "excluded": ["AutocastCUDA", "AutocastCPU"]}
    assert "Mode" in k["modes=[trace]"]["included"]
    assert {"AutogradCUDA", "AutogradCPU", "AutogradOther"} <= set(k["grad_mode=no_grad"]["excluded"])
    assert "Batched" in k["vmap"]["included"]
    assert "AutocastCPU" in k["autocast=bfloat16"]["included"]
    assert "AutocastCPU" not in k["autocast=bfloat16"]["excluded"]
