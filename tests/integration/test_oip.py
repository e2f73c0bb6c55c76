"""The Open Inference Protocol surface (/v2), shaped as Triton serves it."""

import numpy as np

from conftest import error_message, from_json, tensor, validate


def test_server_metadata_and_health(server):
    r = server.get("/v2")
    assert r.status_code == 200
    validate(r, "GET", "/v2")
    assert "binary_tensor_data" in r.json()["extensions"]
    for path in ("/v2/health/live", "/v2/health/ready"):
        r = server.get(path)
        assert r.status_code == 200 and r.content == b""
        validate(r, "GET", path)


def test_model_metadata_from_schema(server):
    r = server.get("/v2/models/add.Tensor")
    assert r.status_code == 200
    validate(r, "GET", "/v2/models/add.Tensor")
    m = r.json()
    assert m["name"] == "add.Tensor" and m["versions"] == ["1"]
    names = [i["name"] for i in m["inputs"]]
    assert names == ["self", "other", "alpha"]
    assert m["inputs"][0] == {"name": "self", "datatype": "FP32", "shape": [-1]}
    assert m["outputs"] == [{"name": "out", "datatype": "FP32", "shape": [-1]}]
    # the same through the version path and the qualified name
    r2 = server.get("/v2/models/aten::add.Tensor/versions/1")
    assert r2.status_code == 200 and r2.json() == m
    # schema-named returns become output names
    m = server.get("/v2/models/native_layer_norm").json()
    assert [o["name"] for o in m["outputs"]] == ["out0", "out1", "out2"]


def test_model_config_ready_and_unknown(server):
    r = server.get("/v2/models/mm/config")
    assert r.status_code == 200
    validate(r, "GET", "/v2/models/mm/config")
    c = r.json()
    assert c["max_batch_size"] == 0
    assert [i["name"] for i in c["input"]] == ["self", "mat2"]
    assert all(i["dims"] == [-1] for i in c["input"])
    assert server.get("/v2/models/mm/ready").status_code == 200
    assert server.get("/v2/models/mm/versions/1/ready").status_code == 200
    r = server.get("/v2/models/mm/versions/2/ready")
    assert r.status_code == 404
    validate(r, "GET", "/v2/models/mm/versions/2/ready")
    r = server.get("/v2/models/no_such_op")
    assert r.status_code == 404 and "unknown operator" in error_message(r)
    validate(r, "GET", "/v2/models/no_such_op")
    r = server.get("/v2/models/add")  # several overloads, no default
    assert r.status_code == 404 and "add.Tensor" in error_message(r)


def test_infer_json(server, rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((2, 3)).astype(np.float32)
    body = {"id": "r1", "inputs": [tensor(a, oip=True, name="self"), tensor(b, oip=True, name="other")]}
    r = server.post("/v2/models/mul.Tensor/infer", body)
    assert r.status_code == 200, r.text
    validate(r, "POST", "/v2/models/mul.Tensor/infer")
    res = r.json()
    assert res["id"] == "r1" and res["model_name"] == "mul.Tensor" and res["model_version"] == "1"
    o = res["outputs"][0]
    assert o["name"] == "out" and o["datatype"] == "FP32"
    np.testing.assert_allclose(from_json(o), a * b, rtol=1e-6)


def test_infer_scalar_inputs_and_parameters(server, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    alpha = {"name": "alpha", "datatype": "FP32", "shape": [1], "data": [0.5]}
    r = server.post("/v2/models/add.Tensor/infer",
                    {"inputs": [tensor(a, oip=True, name="self"), tensor(b, oip=True, name="other"), alpha]})
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(from_json(r.json()["outputs"][0]), a + 0.5 * b, rtol=1e-6)
    # a non-tensor argument in "parameters"
    r = server.post("/v2/models/softmax.int/infer",
                    {"inputs": [tensor(a, oip=True, name="self")], "parameters": {"dim": 0}})
    assert r.status_code == 200, r.text
    e = np.exp(a - a.max(axis=0))
    np.testing.assert_allclose(from_json(r.json()["outputs"][0]), e / e.sum(axis=0), rtol=1e-5,
                               atol=1e-6)
    # "add" picks the overload from the inputs
    r = server.post("/v2/models/add/infer",
                    {"inputs": [tensor(a, oip=True, name="self"), tensor(b, oip=True, name="other")]})
    assert r.status_code == 200, r.text
    assert r.json()["model_name"] == "add.Tensor"


def test_infer_requested_outputs(server, rng):
    a = rng.standard_normal((2, 4)).astype(np.float32)
    inputs = [tensor(a, oip=True, name="input"),
              {"name": "normalized_shape", "datatype": "INT64", "shape": [1], "data": [4]}]
    r = server.post("/v2/models/native_layer_norm/infer",
                    {"inputs": inputs, "parameters": {"eps": 1e-5}, "outputs": [{"name": "out1"}]})
    assert r.status_code == 200, r.text
    outs = r.json()["outputs"]
    assert [o["name"] for o in outs] == ["out1"]
    np.testing.assert_allclose(from_json(outs[0]).reshape(-1), a.mean(axis=1), rtol=1e-5, atol=1e-6)
    r = server.post("/v2/models/native_layer_norm/infer",
                    {"inputs": inputs, "parameters": {"eps": 1e-5}, "outputs": [{"name": "nope"}]})
    assert r.status_code == 400 and "nope" in error_message(r)


def test_infer_errors(server):
    r = server.post("/v2/models/relu/infer", {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1],
                                                         "data": [1]}]})
    assert r.status_code == 422 and "has no input 'x'" in error_message(r)
    validate(r, "POST", "/v2/models/relu/infer")
    r = server.post("/v2/models/relu/infer", {"inputs": []})
    assert r.status_code == 422 and "self" in error_message(r)
    r = server.post("/v2/models/relu/infer", {"nothing": 1})
    assert r.status_code == 400
    r = server.post("/v2/models/relu/versions/7/infer", {"inputs": []})
    assert r.status_code == 404


def test_triton_statistics_shape(server, rng):
    a = rng.standard_normal(3).astype(np.float32)
    before = server.get("/v2/models/neg/stats").json()["model_stats"][0]
    for _ in range(3):
        assert server.post("/v2/models/neg/infer", {"inputs": [tensor(a, oip=True, name="self")]}).status_code == 200
    r = server.get("/v2/models/neg/stats")
    assert r.status_code == 200
    validate(r, "GET", "/v2/models/neg/stats")
    s = r.json()["model_stats"][0]
    assert s["name"] == "neg" and s["version"] == "1"
    assert s["inference_count"] - before["inference_count"] == 3
    assert s["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"] == 3
    assert s["inference_stats"]["compute_infer"]["ns"] > before["inference_stats"]["compute_infer"]["ns"]
    assert s["last_inference"] > 0
    r = server.get("/v2/models/stats")
    assert r.status_code == 200
    validate(r, "GET", "/v2/models/stats")
    names = {m["name"] for m in r.json()["model_stats"]}
    assert {"neg", "add.Tensor", "mm"} <= names


def test_repository_index(server):
    r = server.post("/v2/repository/index", {})
    assert r.status_code == 200
    validate(r, "POST", "/v2/repository/index")
    idx = r.json()
    assert {"name": "relu", "version": "1", "state": "READY"} in idx
    assert len(idx) == len(server.get("/v2/models/stats").json()["model_stats"])
