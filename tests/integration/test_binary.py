"""The binary tensor data extension on /v1/ops and /v2/models/{op}/infer."""

import json

import numpy as np
import pytest

from conftest import binary_body, error_message, from_json, parse_binary_response, tensor, validate

BIN = "application/octet-stream"


def post_binary(server, path, header, arrays, extra_headers=None):
    h, body = binary_body(header, arrays)
    headers = {"Content-Type": BIN, "Inference-Header-Content-Length": str(len(h))}
    headers.update(extra_headers or {})
    return server.post(path, data=body, headers=headers)


def bin_tensor(a, name=None, oip=False):
    t = {"name": name} if name else {}
    t["datatype" if oip else "dtype"] = {"float32": "FP32", "int64": "INT64", "bool": "BOOL",
                                         "float64": "FP64", "int32": "INT32"}[a.dtype.name] if oip else a.dtype.name
    t["shape"] = list(a.shape)
    t["parameters"] = {"binary_data_size": a.nbytes}
    return t


def test_oip_binary_in_and_out_literal_example(server):
    # the exact exchange of the Open Inference Protocol binary extension's own example
    a = np.array([1, 2, 3, 4], np.float32).reshape(2, 2)
    b = np.array([10, 20, 30, 40], np.float32).reshape(2, 2)
    header = {"inputs": [bin_tensor(a, "self", True), bin_tensor(b, "other", True)],
              "outputs": [{"name": "out", "parameters": {"binary_data": True}}]}
    r = post_binary(server, "/v2/models/add.Tensor/infer", header, [a, b])
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == BIN
    hdr, blobs = parse_binary_response(r)
    assert hdr["model_name"] == "add.Tensor"
    o = hdr["outputs"][0]
    assert o["name"] == "out" and o["datatype"] == "FP32" and o["shape"] == [2, 2]
    assert o["parameters"]["binary_data_size"] == 16
    np.testing.assert_array_equal(np.frombuffer(blobs[0], "<f4").reshape(2, 2), a + b)


def test_v1_binary_request_json_response(server, rng):
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal((5, 2)).astype(np.float32)
    r = post_binary(server, "/v1/ops/mm", {"args": [bin_tensor(a), bin_tensor(b)]}, [a, b])
    assert r.status_code == 200, r.text
    validate(r, "POST", "/v1/ops/mm")
    np.testing.assert_allclose(from_json(r.json()["outputs"][0]), a.astype(np.float64) @ b,
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("how", ["parameter", "accept", "per_output"])
def test_v1_binary_response(server, rng, how):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    body = {"args": [tensor(a)]}
    headers = {}
    if how == "parameter":
        body["parameters"] = {"binary_data_output": True}
    elif how == "accept":
        headers["Accept"] = BIN
    else:
        body["outputs"] = [{"name": "out", "parameters": {"binary_data": True}}]
    r = server.post("/v1/ops/relu", body, headers=headers)
    assert r.status_code == 200, r.text
    hdr, blobs = parse_binary_response(r)
    assert hdr["op"] == "aten::relu" and "dispatch" in hdr
    np.testing.assert_array_equal(np.frombuffer(blobs[0], "<f4").reshape(4, 3), np.maximum(a, 0))


def test_binary_output_of_non_contiguous_result(server, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    r = server.post("/v1/ops/t", {"args": [tensor(a)], "parameters": {"binary_data_output": True}})
    assert r.status_code == 200, r.text
    _, blobs = parse_binary_response(r)
    np.testing.assert_array_equal(np.frombuffer(blobs[0], "<f4").reshape(4, 3), a.T)


def test_mixed_dtypes_and_unaligned_offsets(server, rng):
    # a 3-byte bool tensor first puts the int64 and float64 data at odd offsets
    c = np.array([True, False, True])
    x = rng.integers(-100, 100, 3).astype(np.int64)
    y = rng.standard_normal(3)
    header = {"args": [bin_tensor(c), bin_tensor(x), bin_tensor(y)]}
    r = post_binary(server, "/v1/ops/where", header, [c, x, y])
    assert r.status_code == 200, r.text
    got = from_json(r.json()["outputs"][0])
    np.testing.assert_allclose(got, np.where(c, x, y))


def test_bool_bytes_other_than_one_are_true(server):
    raw = np.array([0, 1, 2, 255], np.uint8)
    header = {"args": [{"dtype": "bool", "shape": [4], "parameters": {"binary_data_size": 4}},
                       {"dtype": "bool", "shape": [4], "data": [True, True, True, True]}]}
    h, body = binary_body(header, [raw])
    r = server.post("/v1/ops/eq", data=body, headers={"Content-Type": BIN,
                                                      "Inference-Header-Content-Length": str(len(h))})
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == [False, True, True, True]


def test_large_relu_binary_both_ways(server, rng):
    n = 1 << 22  # 4M floats, 16 MiB each way
    a = rng.standard_normal(n).astype(np.float32)
    header = {"inputs": [bin_tensor(a, "self", True)], "parameters": {"binary_data_output": True}}
    r = post_binary(server, "/v2/models/relu/infer", header, [a])
    assert r.status_code == 200, r.text[:300]
    hdr, blobs = parse_binary_response(r)
    assert hdr["outputs"][0]["parameters"]["binary_data_size"] == a.nbytes
    np.testing.assert_array_equal(np.frombuffer(blobs[0], "<f4"), np.maximum(a, 0))


# ---- malformed binary bodies: 400, never a crash ----------------------------------

def _hdr(n=16):
    return {"args": [{"dtype": "float32", "shape": [2, 2], "parameters": {"binary_data_size": n}}]}


def test_truncated_binary_data(server):
    h = json.dumps(_hdr()).encode()
    body = h + b"\x00" * 8  # 8 of 16 bytes
    r = server.post("/v1/ops/relu", data=body,
                    headers={"Content-Type": BIN, "Inference-Header-Content-Length": str(len(h))})
    assert r.status_code == 400
    validate(r, "POST", "/v1/ops/relu")
    assert "binary_data_size" in error_message(r)


def test_extra_binary_data(server):
    h = json.dumps(_hdr()).encode()
    r = server.post("/v1/ops/relu", data=h + b"\x00" * 20,
                    headers={"Content-Type": BIN, "Inference-Header-Content-Length": str(len(h))})
    assert r.status_code == 400
    assert "add up" in error_message(r)


@pytest.mark.parametrize("delta", [-5, 7, 10**6])
def test_wrong_inference_header_content_length(server, delta):
    h = json.dumps(_hdr()).encode()
    body = h + np.arange(4, dtype=np.float32).tobytes()
    r = server.post("/v1/ops/relu", data=body,
                    headers={"Content-Type": BIN, "Inference-Header-Content-Length": str(len(h) + delta)})
    assert r.status_code == 400, r.text
    validate(r, "POST", "/v1/ops/relu")


def test_non_numeric_inference_header_content_length(server):
    r = server.post("/v1/ops/relu", data=b"{}",
                    headers={"Content-Type": BIN, "Inference-Header-Content-Length": "12x"})
    assert r.status_code == 400


def test_binary_size_does_not_match_shape(server):
    h = json.dumps(_hdr(12)).encode()
    r = server.post("/v1/ops/relu", data=h + b"\x00" * 12,
                    headers={"Content-Type": BIN, "Inference-Header-Content-Length": str(len(h))})
    assert r.status_code == 422
    assert "needs 16 bytes" in error_message(r)


def test_negative_or_non_integer_binary_size(server):
    for bad in (-4, "16", 1.5):
        hdr = {"args": [{"dtype": "float32", "shape": [1], "parameters": {"binary_data_size": bad}}]}
        h = json.dumps(hdr).encode()
        r = server.post("/v1/ops/relu", data=h,
                        headers={"Content-Type": BIN, "Inference-Header-Content-Length": str(len(h))})
        assert r.status_code == 400, (bad, r.text)


def test_binary_size_without_binary_body(server):
    r = server.post("/v1/ops/relu", _hdr())
    assert r.status_code == 400
    assert "Inference-Header-Content-Length" in error_message(r)
    assert server.alive()
