"""NVIDIA's own Open Inference Protocol client (tritonclient.http, from PyPI)
against /v2: what a Triton user meets first. Results against numpy; errors
must reach the user as the server's message (the protocol's {"error": str})."""

import numpy as np
import pytest

import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException


@pytest.fixture(scope="module")
def client(server):
    c = httpclient.InferenceServerClient(url=server.url.split("://", 1)[1])
    yield c
    c.close()


def test_health_and_metadata(client):
    assert client.is_server_live() and client.is_server_ready()
    meta = client.get_server_metadata()
    assert meta["name"] and meta["version"]
    m = client.get_model_metadata("add.Tensor")
    assert [i["name"] for i in m["inputs"]][:2] == ["self", "other"]
    assert client.is_model_ready("relu")
    cfg = client.get_model_config("mm")
    assert cfg["name"].endswith("mm")


@pytest.mark.parametrize("binary", [False, True])
def test_infer_json_and_binary(client, rng, binary):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((1, 4)).astype(np.float32)  # broadcast
    inputs = [httpclient.InferInput("self", list(a.shape), "FP32"),
              httpclient.InferInput("other", list(b.shape), "FP32")]
    inputs[0].set_data_from_numpy(a, binary_data=binary)
    inputs[1].set_data_from_numpy(b, binary_data=binary)
    out = [httpclient.InferRequestedOutput("out", binary_data=binary)]
    res = client.infer("add.Tensor", inputs, outputs=out)
    np.testing.assert_allclose(res.as_numpy("out"), a + b, rtol=1e-6)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    y = rng.standard_normal((6, 2)).astype(np.float32)
    inputs = [httpclient.InferInput("self", [5, 6], "FP32"), httpclient.InferInput("mat2", [6, 2], "FP32")]
    inputs[0].set_data_from_numpy(x, binary_data=binary)
    inputs[1].set_data_from_numpy(y, binary_data=binary)
    res = client.infer("mm", inputs)
    np.testing.assert_allclose(res.as_numpy("out"), x.astype(np.float64) @ y, rtol=1e-5, atol=1e-5)


def test_statistics(client, rng):
    a = rng.standard_normal(7).astype(np.float32)
    inp = httpclient.InferInput("self", [7], "FP32")
    inp.set_data_from_numpy(a)
    before = client.get_inference_statistics("relu")
    client.infer("relu", [inp])
    after = client.get_inference_statistics("relu")
    count = lambda s: s["model_stats"][0]["inference_stats"]["success"]["count"]
    assert count(after) == count(before) + 1


def test_errors_reach_the_user_as_the_servers_message(client):
    a = np.ones((2, 2), np.float32)
    b = np.ones((3,), np.float32)  # does not broadcast
    inputs = [httpclient.InferInput("self", [2, 2], "FP32"), httpclient.InferInput("other", [3], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    with pytest.raises(InferenceServerException) as e:
        client.infer("add.Tensor", inputs)
    text = str(e.value)  # raised TypeError when the body was {"error": {...}}
    assert "must match the size of tensor" in text or "broadcast" in text, text
    assert e.value.status() == "422"
    with pytest.raises(InferenceServerException) as e:
        client.get_model_metadata("no_such_operator")
    assert "unknown operator" in str(e.value)
