"""POST /v1/ops/{op} with JSON tensors, checked against numpy on fresh random inputs."""

import numpy as np
import pytest

from conftest import error_message, from_json, tensor, validate


def rand(rng, shape, dtype=np.float32):
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)


def ok(resp, path):
    assert resp.status_code == 200, resp.text
    validate(resp, "POST", path)
    return resp.json()


def out(body, i=0):
    return from_json(body["outputs"][i])


BROADCAST_SHAPES = [((2, 3), (2, 3)), ((4, 1, 3), (5, 1)), ((), (3,)), ((0, 3), (1, 3)), ((7,), ())]


@pytest.mark.parametrize("op,ref", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                                    ("div", np.divide), ("maximum", np.maximum)])
@pytest.mark.parametrize("sa,sb", BROADCAST_SHAPES)
def test_binary_broadcast(server, rng, op, ref, sa, sb):
    a, b = rand(rng, sa), rand(rng, sb)
    if op == "div":
        b = np.where(np.abs(b) < 0.1, np.float32(1), b).astype(np.float32)
    body = ok(server.call(op, tensor(a), tensor(b)), f"/v1/ops/{op}")
    got = out(body)
    want = ref(a, b)
    assert got.shape == want.shape
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_add_alpha_kwarg_and_scalar_overload(server, rng):
    a, b = rand(rng, (3, 4)), rand(rng, (3, 4))
    body = ok(server.call("add", tensor(a), tensor(b), kwargs={"alpha": 2.5}), "/v1/ops/add")
    assert body["op"] == "aten::add.Tensor"
    np.testing.assert_allclose(out(body), a + np.float32(2.5) * b, rtol=1e-6, atol=1e-6)
    body = ok(server.call("add", tensor(a), 3), "/v1/ops/add")
    assert body["op"] == "aten::add.Scalar"
    np.testing.assert_allclose(out(body), a + 3, rtol=1e-6)
    body = ok(server.call("aten::add.Tensor", tensor(a), tensor(b)), "/v1/ops/aten::add.Tensor")
    np.testing.assert_allclose(out(body), a + b, rtol=1e-6)


def test_type_promotion_int_float(server, rng):
    a = rand(rng, (5,), np.int64)
    b = rand(rng, (5,), np.float32)
    got = out(ok(server.call("add", tensor(a), tensor(b)), "/v1/ops/add"))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, a.astype(np.float32) + b, rtol=1e-6)
    c = rand(rng, (5,), np.int32)
    got = out(ok(server.call("mul", tensor(a), tensor(c)), "/v1/ops/mul"))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, a * c.astype(np.int64))


def test_int64_exact_and_large(server):
    a = np.array([2**62, -(2**62), 9007199254740993, -1], dtype=np.int64)
    b = np.array([1, -1, 2, 0], dtype=np.int64)
    got = out(ok(server.call("add", tensor(a), tensor(b)), "/v1/ops/add"))
    np.testing.assert_array_equal(got, a + b)


def test_float32_round_trip_is_exact(server, rng):
    # random bit patterns (finite): the shortest printed form must read back exactly
    bits = rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32)
    a = bits.view(np.float32)
    a = a[np.isfinite(a)]
    got = out(ok(server.call("mul", tensor(a), 1), "/v1/ops/mul"))
    np.testing.assert_array_equal(got.view(np.uint32), a.view(np.uint32))


def test_nan_inf_round_trip(server):
    a = np.array([np.nan, np.inf, -np.inf, 1.5, -0.0], dtype=np.float32)
    resp = server.call("mul", tensor(a), 1)
    body = ok(resp, "/v1/ops/mul")
    assert body["outputs"][0]["data"][:3] == ["NaN", "Infinity", "-Infinity"]
    got = out(body)
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == -np.inf and got[3] == 1.5
    # bare tokens (what Python's json module writes) are accepted on input
    raw = '{"args":[{"dtype":"float32","shape":[3],"data":[NaN, Infinity, -Infinity]}, 2]}'
    body = ok(server.post("/v1/ops/mul", data=raw, headers={"Content-Type": "application/json"}),
              "/v1/ops/mul")
    got = out(body)
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == -np.inf


@pytest.mark.parametrize("nested", [False, True])
def test_nested_and_flat_data_and_inferred_shape(server, rng, nested):
    a, b = rand(rng, (2, 3, 4)), rand(rng, (2, 3, 4))
    ta = tensor(a, nested=nested)
    if nested:
        del ta["shape"]  # inferred from the nesting
    got = out(ok(server.call("sub", ta, tensor(b)), "/v1/ops/sub"))
    np.testing.assert_allclose(got, a - b, rtol=1e-6)


def test_inferred_dtypes_like_torch_tensor(server):
    body = ok(server.call("mul", {"data": [[1, 2], [3, 4]]}, 2), "/v1/ops/mul")
    assert body["outputs"][0]["dtype"] == "int64"
    assert body["outputs"][0]["data"] == [2, 4, 6, 8]
    body = ok(server.call("mul", {"data": [1.5, 2]}, 2), "/v1/ops/mul")
    assert body["outputs"][0]["dtype"] == "float32"
    body = ok(server.call("eq", {"data": [True, False]}, {"data": [True, True]}), "/v1/ops/eq")
    assert body["outputs"][0]["dtype"] == "bool"
    assert body["outputs"][0]["data"] == [True, False]


def test_oip_datatype_names_accepted(server, rng):
    a, b = rand(rng, (3,)), rand(rng, (3,))
    got = out(ok(server.call("add", tensor(a, oip=True), tensor(b, oip=True)), "/v1/ops/add"))
    np.testing.assert_allclose(got, a + b, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64", "float64", "float16"])
def test_dtypes(server, rng, dtype):
    a = rand(rng, (6,), np.dtype(dtype).type)
    b = rand(rng, (6,), np.dtype(dtype).type)
    body = ok(server.call("maximum", tensor(a), tensor(b)), "/v1/ops/maximum")
    got = out(body)
    assert body["outputs"][0]["dtype"] == dtype
    np.testing.assert_array_equal(got, np.maximum(a, b))


def test_zero_dim_and_empty(server, rng):
    a = np.array(3.5, dtype=np.float32)
    body = ok(server.call("mul", tensor(a), 2), "/v1/ops/mul")
    assert body["outputs"][0]["shape"] == []
    assert body["outputs"][0]["data"] == [7.0]
    e = np.zeros((0, 4), dtype=np.float32)
    body = ok(server.call("relu", tensor(e)), "/v1/ops/relu")
    assert body["outputs"][0]["shape"] == [0, 4] and body["outputs"][0]["data"] == []
    # a scalar "data" with shape []
    body = ok(server.call("neg", {"dtype": "float32", "shape": [], "data": 2}), "/v1/ops/neg")
    assert body["outputs"][0]["data"] == [-2.0]


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 2), (16, 33, 8)])
def test_mm_and_matmul(server, rng, m, k, n):
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    got = out(ok(server.call("mm", tensor(a), tensor(b)), "/v1/ops/mm"))
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
    body = ok(server.call("matmul", tensor(a), tensor(b)), "/v1/ops/matmul")
    np.testing.assert_allclose(out(body), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    # matmul is a math (CompositeImplicitAutograd) kernel that calls mm
    steps = body["dispatch"]["steps"]
    assert steps[0]["op"] == "aten::matmul" and steps[0]["provenance"] == "math kernel"
    assert any(s["op"] in ("aten::mm", "aten::bmm") for s in steps[1:])


def test_unary_and_softmax_and_reduction(server, rng):
    a = rand(rng, (4, 6))
    np.testing.assert_allclose(out(ok(server.call("relu", tensor(a)), "/v1/ops/relu")),
                               np.maximum(a, 0))
    np.testing.assert_allclose(out(ok(server.call("exp", tensor(a)), "/v1/ops/exp")), np.exp(a),
                               rtol=1e-5)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out(ok(server.call("softmax", tensor(a), 1), "/v1/ops/softmax")),
                               e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    body = ok(server.call("sum", tensor(a), [1], kwargs={"keepdim": True}), "/v1/ops/sum")
    assert body["op"] == "aten::sum.dim_IntList"
    np.testing.assert_allclose(out(body), a.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)
    body = ok(server.call("sum", tensor(a)), "/v1/ops/sum")
    assert body["op"] == "aten::sum" and body["outputs"][0]["shape"] == []
    np.testing.assert_allclose(out(body), a.sum(dtype=np.float64), rtol=1e-4)


def test_views_and_factories(server, rng):
    a = rand(rng, (3, 4))
    got = out(ok(server.call("t", tensor(a)), "/v1/ops/t"))
    np.testing.assert_array_equal(got, a.T)  # a non-contiguous output, encoded row-major
    got = out(ok(server.call("reshape", tensor(a), [2, 6]), "/v1/ops/reshape"))
    np.testing.assert_array_equal(got, a.reshape(2, 6))
    body = ok(server.call("zeros", [2, 3], kwargs={"dtype": "int32"}), "/v1/ops/zeros")
    assert body["outputs"][0]["dtype"] == "int32"
    assert body["outputs"][0]["data"] == [0] * 6
    body = ok(server.call("arange", 5), "/v1/ops/arange")
    assert body["outputs"][0]["data"] == [0, 1, 2, 3, 4]


def test_dispatch_record(server, rng):
    a = rand(rng, (2,))
    body = ok(server.call("add", tensor(a), tensor(a), device="cpu"), "/v1/ops/add")
    d = body["dispatch"]
    assert d["key"] == "CPU" and d["device"] == "cpu"
    assert "CPU" in d["keyset"]
    assert d["path"].startswith("CPU [")
    s0 = d["steps"][0]
    assert s0["op"] == "aten::add.Tensor" and s0["key"] == "CPU" and s0["kernel"]
    assert s0["registered_at"]
    for k in ("receive", "decode", "dispatch", "encode"):
        assert d["timing_us"][k] >= 0


def test_requires_grad_reaches_autograd_key(server, rng):
    a = rand(rng, (3,))
    r = server.call("mul", dict(tensor(a), requires_grad=True), tensor(a))
    if r.status_code == 501:
        pytest.skip("no autograd kernel registered yet: " + error_message(r)[:100])
    body = ok(r, "/v1/ops/mul")
    d = body["dispatch"]
    assert d["keyset"][0] == "AutogradCPU"
    assert d["steps"][0]["key"] == "AutogradCPU"
    assert "\u2192 CPU [" in d["path"]
    np.testing.assert_allclose(out(body), a * a, rtol=1e-6)


def test_outputs_named_when_schema_names_them(server, rng):
    a = rand(rng, (2, 4))
    body = ok(server.call("native_layer_norm", tensor(a), [4], None, None, 1e-5),
              "/v1/ops/native_layer_norm")
    assert len(body["outputs"]) == 3
    mean = a.mean(axis=1, keepdims=True)
    var = a.var(axis=1, keepdims=True)
    np.testing.assert_allclose(out(body, 0), (a - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-4)
    # unnamed returns carry no "name" in /v1 (the schema names none)
    assert all("name" not in o for o in body["outputs"])


def test_many_concurrent_calls(server, rng):
    from concurrent.futures import ThreadPoolExecutor

    import requests

    arrays = [(rand(rng, (8,)), rand(rng, (8,))) for _ in range(64)]

    def one(pair):
        a, b = pair
        r = requests.post(server.url + "/v1/ops/add", json={"args": [tensor(a), tensor(b)]}, timeout=60)
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(from_json(r.json()["outputs"][0]), a + b, rtol=1e-6)

    with ThreadPoolExecutor(8) as ex:
        list(ex.map(one, arrays))
