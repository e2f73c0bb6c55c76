"""How much dispatch record an answer carries (issue 14, "a leaner tiny call"):
"dispatch": "full" | "summary" | "none" on /v1, parameters.dispatch on /v2.
The call runs, and is counted, the same whatever the choice."""

import numpy as np
import pytest

from conftest import binary_body, error_message, from_json, parse_binary_response, tensor, validate

SUMMARY_KEYS = {"key", "kernel", "path", "timing_us"}


def add_body(a, b, **extra):
    return dict({"args": [tensor(a), tensor(b)]}, **extra)


@pytest.mark.parametrize("detail", [None, "full", "summary", "none"])
def test_v1_detail_levels(server, rng, detail):
    a, b = rng.standard_normal(5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    extra = {} if detail is None else {"dispatch": detail}
    r = server.post("/v1/ops/add.Tensor", add_body(a, b, **extra))
    assert r.status_code == 200, r.text
    validate(r, "POST", "/v1/ops/add.Tensor")
    body = r.json()
    np.testing.assert_array_equal(from_json(body["outputs"][0]), a + b)
    if detail == "none":
        assert "dispatch" not in body
    elif detail == "summary":
        assert set(body["dispatch"]) == SUMMARY_KEYS
        assert body["dispatch"]["key"] == "CPU" and body["dispatch"]["path"] == "CPU [kernel]"
        assert set(body["dispatch"]["timing_us"]) == {"receive", "decode", "dispatch", "encode"}
    else:
        assert {"keyset", "steps", "provenance", "device"} <= set(body["dispatch"])
        assert SUMMARY_KEYS <= set(body["dispatch"])


def test_summary_agrees_with_full_and_none_is_smallest(server, rng):
    a, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    sizes = {}
    for d in ("full", "summary", "none"):
        r = server.post("/v1/ops/mul.Tensor", add_body(a, b, dispatch=d))
        assert r.status_code == 200
        sizes[d] = len(r.content)
        if d != "none":
            rec = r.json()["dispatch"]
            assert (rec["key"], rec["kernel"], rec["path"]) == ("CPU", "od_cpu_binary", "CPU [kernel]")
    assert sizes["none"] < sizes["summary"] < sizes["full"], sizes
    assert sizes["full"] - sizes["none"] > 300  # the record is what the tiny call was paying for


def test_binary_call_with_no_record(server, rng):
    a, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    header = {"args": [{"dtype": "float32", "shape": [64], "parameters": {"binary_data_size": 256}}] * 2,
              "parameters": {"binary_data_output": True}, "dispatch": "none"}
    h, body = binary_body(header, [a, b])
    r = server.post("/v1/ops/add.Tensor", data=body,
                    headers={"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(h))})
    assert r.status_code == 200, r.text
    head, blobs = parse_binary_response(r)
    assert "dispatch" not in head
    np.testing.assert_array_equal(np.frombuffer(blobs[0], "<f4"), a + b)


@pytest.mark.parametrize("bad", ["all", "", 1, None, ["none"], True])
def test_v1_bad_detail_is_400(server, bad):
    r = server.post("/v1/ops/add.Tensor", add_body(np.ones(2, np.float32), np.ones(2, np.float32), dispatch=bad))
    assert r.status_code == 400, r.text
    assert error_message(r) == '"dispatch" must be "full", "summary" or "none"'


def oip_add(a, b, params=None):
    body = {"inputs": [{"name": "self", "datatype": "FP32", "shape": list(a.shape), "data": a.tolist()},
                       {"name": "other", "datatype": "FP32", "shape": list(b.shape), "data": b.tolist()}]}
    if params is not None:
        body["parameters"] = params
    return body


@pytest.mark.parametrize("detail", [None, "summary", "full", "none"])
def test_v2_detail_levels(server, rng, detail):
    a, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    r = server.post("/v2/models/add.Tensor/infer", oip_add(a, b, None if detail is None else {"dispatch": detail}))
    assert r.status_code == 200, r.text
    validate(r, "POST", "/v2/models/add.Tensor/infer")
    body = r.json()
    np.testing.assert_array_equal(np.array(body["outputs"][0]["data"], np.float32), a + b)
    if detail == "none":
        assert "parameters" not in body
        return
    assert body["parameters"]["dispatch_key"] == "CPU" and body["parameters"]["kernel"] == "od_cpu_binary"
    if detail == "full":
        assert body["parameters"]["dispatch"]["steps"][0]["op"] == "aten::add.Tensor"
    else:
        assert "dispatch" not in body["parameters"]


def test_v2_bad_detail_is_400(server):
    r = server.post("/v2/models/add.Tensor/infer", oip_add(np.ones(1, np.float32), np.ones(1, np.float32),
                                                          {"dispatch": "verbose"}))
    assert r.status_code == 400
    assert error_message(r) == 'parameters.dispatch must be "full", "summary" or "none"'


def test_counted_the_same_whatever_the_detail(make_server, rng):
    s = make_server()
    for d in ("full", "summary", "none"):
        assert s.post("/v1/ops/add.Tensor", add_body(np.ones(2, np.float32), np.ones(2, np.float32),
                                                     dispatch=d)).status_code == 200
    st = s.get("/v1/stats").json()
    add = next(o for o in st["ops"] if o["op"] == "aten::add.Tensor")
    assert add["requests"] == 3 and add["errors"] == 0
