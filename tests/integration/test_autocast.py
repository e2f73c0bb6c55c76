"""Autocast over HTTP against torch.autocast on the CPU (PyTorch 1.13,
bfloat16): which operators run in lower precision, the values they give,
float64 and other operators left alone, and the errors."""

import numpy as np

from conftest import error_message, from_json, tensor, torch_ref, validate


def T(a):
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.reshape(-1).tolist()}


MATMULS = ("mm", "addmm", "bmm", "matmul", "linear")


def bf16(a):
    """a rounded to bfloat16 (to nearest even), as float64."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def test_autocast_matches_torch_on_cpu(server, rng):
    x, w = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 3)).astype(np.float32)
    xb = rng.standard_normal((2, 4, 8)).astype(np.float32)
    cases = [
        ("mm", [x, w]), ("matmul", [x, w]), ("bmm", [xb, np.stack([w, w])]),
        ("addmm", [rng.standard_normal(3).astype(np.float32), x, w]), ("linear", [x, w.T.copy()]),
        ("mm", [x.astype(np.float64), w.astype(np.float64)]),  # float64 is not cast
        ("relu", [x]),  # not on a list
        ("softmax.int", [x, 1]), ("sum", [x]),  # fp32-list ops keep their dtype on the CPU
    ]
    refs = torch_ref([{"op": op, "args": [T(a) if isinstance(a, np.ndarray) else a for a in args],
                       "autocast": "bfloat16"} for op, args in cases])
    for (op, args), ref in zip(cases, refs):
        assert "error" not in ref, (op, ref)
        r = server.post(f"/v1/ops/{op}", {"args": [tensor(a) if isinstance(a, np.ndarray) else a for a in args],
                                          "autocast": "bfloat16"})
        assert r.status_code == 200, (op, r.text)
        validate(r, "POST", f"/v1/ops/{op}")
        body = r.json()
        got = body["outputs"][0]
        assert got["dtype"] == ref["dtype"], (op, got["dtype"], ref["dtype"])
        value = np.array(got["data"], dtype=np.float64).reshape(-1)
        atol = 2e-2
        if ref["dtype"] == "bfloat16" and op in MATMULS:
            # torch 1.13's CPU bfloat16 matmul at these sizes rounds every product and partial sum to bfloat16
            # (bit for bit on 200 random 2x4x8 @ 2x8x3 batches); the server sums in float32 and rounds once. Both
            # are within the standard bound of a length-K dot product, K * u * (|A| @ |B|), u = 2^-8 for bfloat16.
            a, b = (args[1], args[2]) if op == "addmm" else (args[0], args[1].T if op == "linear" else args[1])
            a, b = bf16(a), bf16(b)
            atol = 2e-2 + a.shape[-1] * 2.0 ** -8 * (np.abs(a) @ np.abs(b)).reshape(-1)
        assert np.all(np.abs(value - np.asarray(ref["value"])) <= atol + 2e-2 * np.abs(ref["value"])), \
            (op, value, ref["value"])
        assert body["dispatch"]["autocast"] == "bfloat16"
        if ref["dtype"] == "bfloat16" and op in MATMULS:
            assert "AutocastCPU [kernel]" in body["dispatch"]["path"], body["dispatch"]["path"]


def test_autocast_off_by_default_and_errors(server, rng):
    x = rng.standard_normal((3, 3)).astype(np.float32)
    r = server.post("/v1/ops/mm", {"args": [tensor(x), tensor(x)]})
    assert r.json()["outputs"][0]["dtype"] == "float32" and "Autocast" not in r.json()["dispatch"]["path"]
    r = server.post("/v1/ops/mm", {"args": [tensor(x), tensor(x)], "autocast": "float16"})
    assert r.status_code == 422 and "bfloat16 only" in error_message(r)
    r = server.post("/v1/ops/mm", {"args": [tensor(x), tensor(x)], "autocast": "int8"})
    assert r.status_code == 400 and "autocast" in error_message(r)
    # autograd records the casts: the gradient comes back in float32
    s = {"X-OD-Session": "autocast-grad"}
    xid = server.post("/v1/tensors", {"tensor": dict(tensor(x), requires_grad=True)}, headers=s).json()["id"]
    body = {"steps": [{"op": "mm", "args": [{"ref": xid}, tensor(x)]},
                      {"op": "sum", "args": [{"ref": "$0"}]},
                      {"backward": "$1"}], "outputs": ["$0"], "autocast": "bfloat16"}
    r = server.post("/v1/run", body, headers=s)
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["dtype"] == "bfloat16"
    meta = server.get(f"/v1/tensors/{xid}", params={"meta": 1}, headers=s).json()
    g = from_json(server.get(f"/v1/tensors/{meta['grad']}", headers=s).json()["outputs"][0])
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, np.ones((3, 3)) @ x.T, rtol=3e-2, atol=3e-2)
    server.delete("/v1/sessions/autocast-grad")
