"""zeros_like / ones_like / full_like / empty_like and new_zeros / new_ones /
new_full / new_empty over HTTP, against PyTorch 1.13: self's dtype and
device as defaults, a dtype asked for, empty_like's layout rule, refusals."""

import numpy as np

from conftest import error_message, from_json, tensor, torch_ref


def test_like_and_new_agree_with_torch(server):
    rng = np.random.default_rng()
    x = tensor(rng.integers(-5, 5, (2, 3)).astype(np.int32))
    f = tensor(rng.standard_normal((3,)).astype(np.float32))
    calls = [
        ("zeros_like", [x], {}), ("ones_like", [f], {"dtype": "float64"}),
        ("full_like", [x, 2.75], {}), ("full_like", [f, 7], {"dtype": "int16"}),
        ("new_zeros", [f, [2, 2]], {}), ("new_ones", [x, [0, 3]], {"dtype": "bool"}),
        ("new_full", [x, [4], -3.5], {}), ("new_full", [f, [], True], {}),
        ("new_zeros", [f, [-1]], {}), ("full_like", [f, 1], {"layout": "sparse"}),
    ]
    refs = torch_ref([{"op": op, "args": a, "kwargs": k} for op, a, k in calls])
    for (op, a, k), ref in zip(calls, refs):
        r = server.post(f"/v1/ops/{op}", {"args": a, "kwargs": k})
        if "error" in ref:
            assert 400 <= r.status_code < 500, (op, a, k, r.text)
            error_message(r)
            continue
        assert r.status_code == 200, (op, r.text)
        out = r.json()["outputs"][0]
        assert (out["dtype"], out["shape"]) == (ref["dtype"], ref["shape"]), (op, out, ref)
        want = np.array([float(v) for v in ref["value"]])
        assert np.array_equal(from_json(out).astype(np.float64).ravel(), want), (op, out, ref)


def test_empty_like_keeps_a_dense_layout(server):
    # a transposed tensor keeps its strides under preserve_format, as in torch
    h = {"X-OD-Session": "like-test"}
    r = server.post("/v1/run", {"steps": [
        {"op": "transpose.int", "args": [tensor(np.zeros((2, 3), np.float32)), 0, 1]},
        {"op": "empty_like", "args": [{"ref": "$0"}]},
        {"op": "zeros_like", "args": [{"ref": "$0"}], "kwargs": {"memory_format": "contiguous_format"}}],
        "outputs": ["$1", "$2"], "keep": ["$1", "$2"]}, headers=h)
    assert r.status_code == 200, r.text
    kept = r.json()["kept"]
    meta = [server.get(f"/v1/tensors/{kept[k]}?meta=1", headers=h).json() for k in ("$1", "$2")]
    assert meta[0]["shape"] == [3, 2] and meta[0]["strides"] == [1, 3], meta[0]
    assert meta[1]["strides"] == [2, 1], meta[1]
    server.delete("/v1/sessions/like-test")


def test_pinned_memory_is_refused(server):
    r = server.post("/v1/ops/zeros_like", {"args": [tensor(np.zeros(2, np.float32))], "kwargs": {"pin_memory": True}})
    assert r.status_code >= 400 and "pinned memory" in error_message(r)
