"""GET /v1/ops, /v1/ops/{op}, /v1/keys, /v1/devices, explain, the index, and
the OpenAPI document itself."""

import numpy as np
from openapi_spec_validator import validate as validate_spec

from conftest import spec, tensor, validate


def test_openapi_document_is_valid():
    validate_spec(spec())
    # every route the server has is documented
    for path in ("/", "/v1/ops", "/v1/ops/{op}", "/v1/ops/{op}/explain", "/v1/keys", "/v1/devices",
                 "/v1/stats", "/v1/stats/reset", "/metrics", "/v2", "/v2/health/live",
                 "/v2/health/ready", "/v2/models/stats", "/v2/repository/index", "/v2/models/{op}",
                 "/v2/models/{op}/config", "/v2/models/{op}/ready", "/v2/models/{op}/stats",
                 "/v2/models/{op}/infer", "/v2/models/{op}/versions/{version}/infer"):
        assert path in spec()["paths"], path


def test_index_lists_endpoints(server):
    r = server.get("/")
    assert r.status_code == 200
    validate(r, "GET", "/")
    paths = {e["path"] for e in r.json()["endpoints"]}
    assert "/v1/ops/{op}" in paths and "/v2/models/{op}/infer" in paths


def test_ops_list(server):
    r = server.get("/v1/ops")
    assert r.status_code == 200
    validate(r, "GET", "/v1/ops")
    body = r.json()
    groups = {g["name"]: g for g in body["operators"]}
    assert sum(len(g["overloads"]) for g in body["operators"]) == body["count"]
    add = groups["aten::add"]
    assert [o["overload"] for o in add["overloads"]] == ["Tensor", "Scalar"]
    t = add["overloads"][0]
    assert t["schema"] == "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    assert "CPU" in t["kernels"] and t["table"]["CPU"] == "kernel"
    mm = groups["aten::matmul"]["overloads"][0]
    assert "CompositeImplicitAutograd" in mm["kernels"]
    assert mm["table"]["CPU"] == "math kernel"


def test_op_detail_json(server):
    r = server.get("/v1/ops/add.Tensor")
    assert r.status_code == 200
    validate(r, "GET", "/v1/ops/add.Tensor")
    d = r.json()
    assert d["name"] == "aten::add.Tensor" and d["model"] == "add.Tensor"
    assert [a["name"] for a in d["arguments"]] == ["self", "other", "alpha"]
    alpha = d["arguments"][2]
    assert alpha["kwarg_only"] and alpha["has_default"] and alpha["default"] == 1
    assert d["returns"] == [{"name": None, "type": "Tensor"}]
    keys = [s["key"] for s in d["table"]]
    assert keys[0] == "Mode" and keys[-1] == "Undefined"  # every runtime key, highest first
    cpu = next(s for s in d["table"] if s["key"] == "CPU")
    assert cpu["provenance"] == "kernel" and cpu["kernel"] and ":" in cpu["registered_at"]
    regs = {x["key"] for x in d["registrations"]}
    assert "CPU" in regs
    # a name with several overloads
    r = server.get("/v1/ops/add")
    validate(r, "GET", "/v1/ops/add")
    assert [o["name"] for o in r.json()["overloads"]] == ["aten::add.Tensor", "aten::add.Scalar"]


def test_op_detail_text_dumps(server):
    r = server.get("/v1/ops/add.Tensor?format=text")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
    validate(r, "GET", "/v1/ops/add.Tensor")
    text = r.text
    assert "CPU: " in text and "[kernel]" in text
    assert "name: aten::add.Tensor" in text and "schema: aten::add.Tensor(" in text
    r = server.get("/v1/ops/add.Tensor?format=yaml")
    assert r.status_code == 400


def test_keys(server):
    r = server.get("/v1/keys")
    assert r.status_code == 200
    validate(r, "GET", "/v1/keys")
    k = r.json()
    names = [x["name"] for x in k["runtime_keys"]]
    assert names == ["Mode", "Batched", "AutocastCUDA", "AutocastCPU", "AutogradCUDA", "AutogradCPU",
                     "AutogradOther", "BackendSelect", "CUDA", "CPU", "Meta", "Undefined"]
    prio = [x["priority"] for x in k["runtime_keys"]]
    assert prio == sorted(prio, reverse=True)
    aliases = {a["name"]: a for a in k["alias_keys"]}
    assert set(aliases["Autograd"]["expands_to"]) == {"AutogradCUDA", "AutogradCPU", "AutogradOther"}
    assert set(aliases["CompositeExplicitAutograd"]["expands_to"]) == {"CUDA", "CPU", "Meta"}
    assert k["default_included"] == ["BackendSelect"]
    assert set(k["default_excluded"]) == {"AutocastCPU", "AutocastCUDA"}


def test_devices(server):
    r = server.get("/v1/devices")
    assert r.status_code == 200
    validate(r, "GET", "/v1/devices")
    d = r.json()
    assert d["cpu"]["cores"] >= 1 and "OpenBLAS" in d["cpu"]["blas"]["config"]
    if not d["cuda"]["available"]:
        assert d["cuda"]["reason"].startswith("CUDA unavailable")
        assert d["cuda"]["devices"] == []
    else:
        dev = d["cuda"]["devices"][0]
        assert dev["total_memory_bytes"] > 0 and dev["sm_count"] > 0


def test_explain(server, rng):
    a = {"dtype": "float32", "shape": [2, 5]}  # no data needed
    b = {"dtype": "float32", "shape": [5, 3]}
    r = server.post("/v1/ops/matmul/explain", {"args": [a, b], "device": "cpu"})
    assert r.status_code == 200, r.text
    validate(r, "POST", "/v1/ops/matmul/explain")
    e = r.json()
    assert e["key"] == "CPU" and e["provenance"] == "math kernel" and e["kernel"]
    assert e["outputs"] == [{"name": "out", "dtype": "float32", "shape": [2, 3], "bytes": 24}]
    assert e["within_limits"] is True
    assert any(s["op"] == "aten::mm" for s in e["meta_steps"])
    # broadcasting and promotion, against numpy
    x = rng.standard_normal((4, 1, 3)).astype(np.float32)
    y = rng.integers(0, 5, (2, 1)).astype(np.int64)
    r = server.post("/v1/ops/add/explain", {"args": [tensor(x), tensor(y)]})
    o = r.json()["outputs"][0]
    assert o["shape"] == list((x + y).shape) and o["dtype"] == "float32"
    # huge shapes are fine to explain (no data), and say they would not fit
    r = server.post("/v1/ops/relu/explain", {"args": [{"dtype": "float32", "shape": [1 << 20, 1 << 20]}]})
    assert r.status_code == 200, r.text
    assert r.json()["within_limits"] is False and r.json()["output_bytes"] == 4 << 40
    # a shape error is reported like the real call's
    r = server.post("/v1/ops/mm/explain", {"args": [a, a]})
    assert r.status_code == 422
    validate(r, "POST", "/v1/ops/mm/explain")
    # explaining a CUDA call works without a GPU
    r = server.post("/v1/ops/relu/explain", {"args": [a], "device": "cuda"})
    assert r.status_code == 200 and r.json()["key"] == "CUDA"
