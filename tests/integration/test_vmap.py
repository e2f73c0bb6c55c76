"""vmap over HTTP (the Batched key): batching rules and the per-sample
fallback against a loop over samples in numpy, in_dims/out_dims, nested
levels, the slow path counted in the stats and visible in the dispatch
record, and the errors."""

import numpy as np
import pytest

from conftest import error_message, from_json, tensor, validate


def vcall(server, op, args, vmap, kwargs=None, expect=200):
    body = {"args": args, "vmap": vmap}
    if kwargs:
        body["kwargs"] = kwargs
    r = server.post(f"/v1/ops/{op}", body)
    assert r.status_code == expect, r.text
    if expect == 200:
        validate(r, "POST", f"/v1/ops/{op}")
    return r.json()


def out(body, i=0):
    return from_json(body["outputs"][i])


def loop(fn, *xs, in_dims, out_dim=0):
    """The reference: fn per sample, stacked along out_dim."""
    B = next(x.shape[d] for x, d in zip(xs, in_dims) if d is not None)
    res = []
    for b in range(B):
        res.append(fn(*[x if d is None else np.take(x, b, axis=d) for x, d in zip(xs, in_dims)]))
    return np.stack(res, axis=out_dim)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def path(body):
    return body["dispatch"]["path"]


def test_elementwise_rule_broadcasting_and_out_dims(server, rng):
    x, y = f32(rng, 5, 3, 4), f32(rng, 4)
    body = vcall(server, "add", [tensor(x), tensor(y)], {"in_dims": [0, None]}, kwargs={"alpha": 2})
    np.testing.assert_allclose(out(body), loop(lambda a, b: a + 2 * b, x, y, in_dims=[0, None]), rtol=1e-6)
    assert "Batched [kernel]" in path(body) and body["dispatch"]["steps"][0]["kernel"] == "batch_rule_elementwise"
    # batch dim 1 in, 2 out; a batched 0-dim logical value against a matrix
    x, y = f32(rng, 3, 6), f32(rng, 2, 3)
    body = vcall(server, "mul", [tensor(x), tensor(y)], {"in_dims": [1, None], "out_dims": 2})
    np.testing.assert_allclose(out(body), loop(lambda a, b: a * b, x, y, in_dims=[1, None], out_dim=2), rtol=1e-6)
    x, y = f32(rng, 4, 3), f32(rng, 4, 3)
    body = vcall(server, "where", [tensor(x > 0), tensor(x), tensor(y)], {"in_dims": [0, 0, 0]})
    np.testing.assert_allclose(out(body), np.where(x > 0, x, y))
    body = vcall(server, "relu", [tensor(x)], {"in_dims": 0})
    np.testing.assert_allclose(out(body), np.maximum(x, 0))


def test_reductions_softmax_and_views(server, rng):
    x = f32(rng, 4, 3, 5)
    cases = [
        ("sum", [tensor(x)], {}, lambda a: a.sum()),
        ("sum", [tensor(x), [-1]], {}, lambda a: a.sum(-1)),
        ("mean", [tensor(x), [0], True], {}, lambda a: a.mean(0, keepdims=True)),
        ("amax", [tensor(x), [1]], {}, lambda a: a.max(1)),
        ("softmax", [tensor(x), -1], {}, lambda a: np.exp(a) / np.exp(a).sum(-1, keepdims=True)),
        ("transpose", [tensor(x), 0, 1], {}, lambda a: a.T),
        ("permute", [tensor(x), [1, 0]], {}, lambda a: a.transpose(1, 0)),
        ("view", [tensor(x), [-1]], {}, lambda a: a.reshape(-1)),
        ("reshape", [tensor(x), [5, 3]], {}, lambda a: a.reshape(5, 3)),
        ("unsqueeze", [tensor(x), -1], {}, lambda a: a[..., None]),
        ("select", [tensor(x), 1, 2], {}, lambda a: a[:, 2]),
        ("slice", [tensor(x), 1, 1, 5, 2], {}, lambda a: a[:, 1:5:2]),
        ("t", [tensor(x)], {}, lambda a: a.T),
        ("expand", [tensor(x[:, :, :1]), [2, 3, 4]], {}, lambda a: np.broadcast_to(a, (2, 3, 4))),
    ]
    for op, args, kw, fn in cases:
        src = args[0]
        xx = from_json(src)
        body = vcall(server, op, args, {"in_dims": [0] + [None] * (len(args) - 1)}, kwargs=kw)
        np.testing.assert_allclose(out(body), loop(fn, xx, in_dims=[0]), rtol=1e-5, atol=1e-6, err_msg=op)
        assert "Batched [kernel]" in path(body) or "Batched [math kernel]" in path(body), (op, path(body))


def test_matrix_products(server, rng):
    x, w, xb = f32(rng, 6, 2, 3), f32(rng, 3, 4), f32(rng, 6, 3, 4)
    for in_dims, args, ref in (([0, None], [x, w], lambda: loop(np.matmul, x, w, in_dims=[0, None])),
                               ([None, 0], [x[0], xb], lambda: loop(np.matmul, x[0], xb, in_dims=[None, 0])),
                               ([0, 0], [x, xb], lambda: loop(np.matmul, x, xb, in_dims=[0, 0]))):
        body = vcall(server, "mm", [tensor(a) for a in args], {"in_dims": in_dims})
        np.testing.assert_allclose(out(body), ref(), rtol=1e-5, atol=1e-5)
        assert body["dispatch"]["steps"][0]["kernel"] == "batch_rule_matmul"
    v = f32(rng, 6, 3)
    body = vcall(server, "dot", [tensor(v), tensor(v)], {"in_dims": [0, 0]})
    np.testing.assert_allclose(out(body), (v * v).sum(1), rtol=1e-5)
    body = vcall(server, "dot", [tensor(v[0]), tensor(v)], {"in_dims": [None, 0]})
    np.testing.assert_allclose(out(body), v @ v[0], rtol=1e-5)
    bias = f32(rng, 6, 4)
    body = vcall(server, "addmm", [tensor(bias), tensor(x), tensor(w)], {"in_dims": [0, 0, None]},
                 kwargs={"beta": 0.5, "alpha": 2})
    np.testing.assert_allclose(out(body), loop(lambda b, a, m: 0.5 * b + 2 * a @ m, bias, x, w, in_dims=[0, 0, None]),
                               rtol=1e-5, atol=1e-5)
    # composites through their decomposition: matmul of a batch of 3-D, linear
    body = vcall(server, "matmul", [tensor(xb), tensor(f32(rng, 4, 2))], {"in_dims": [0, None]})
    assert out(body).shape == (6, 3, 2)
    lw, lb = f32(rng, 5, 3), f32(rng, 5)
    body = vcall(server, "linear", [tensor(x), tensor(lw), tensor(lb)], {"in_dims": [0, None, None]})
    np.testing.assert_allclose(out(body), loop(lambda a: a @ lw.T + lb, x, in_dims=[0]), rtol=1e-5, atol=1e-5)
    assert "Batched [kernel]" in path(body)


def test_fallback_loops_and_is_counted(server, rng):
    x = f32(rng, 5, 4, 3)
    idx = np.array([2, 0, 2])

    def count():
        r = server.get("/v1/stats").json()
        return r["vmap_fallback"].get("aten::index_select", 0)

    before = count()
    body = vcall(server, "index_select", [tensor(x), 0, tensor(idx)], {"in_dims": [0, None, None]})
    np.testing.assert_allclose(out(body), loop(lambda a: a[idx], x, in_dims=[0]))
    step = body["dispatch"]["steps"][0]
    assert step["key"] == "Batched" and step["provenance"] == "backend fallback"
    assert step["kernel"] == "vmap_fallback_loop"
    assert count() == before + 1
    m = server.get("/metrics").text
    assert 'od_vmap_fallback_calls_total{op="aten::index_select"}' in m
    # a batched index: the loop handles what no rule covers
    ib = np.array([[0, 1], [3, 3], [2, 0], [1, 1], [0, 0]])
    body = vcall(server, "index_select", [tensor(x[0]), 0, tensor(ib)], {"in_dims": [None, None, 0]})
    np.testing.assert_allclose(out(body), loop(lambda i: x[0][i], ib, in_dims=[0]))
    # cat of a batched and an unbatched tensor
    a, b = f32(rng, 5, 2), f32(rng, 3)
    r = server.post("/v1/ops/cat", {"args": [[tensor(a), tensor(b)]], "vmap": {"in_dims": 0}})
    assert r.status_code == 400  # in_dims 0 names a list argument: not a Tensor


def test_nested_levels(server, rng):
    x = f32(rng, 3, 4, 5)  # outer batch on dim 0, inner on (logical) dim 1
    y = f32(rng, 4)
    vm = [{"in_dims": [0, None]}, {"in_dims": [1, None]}]
    body = vcall(server, "mul", [tensor(x), tensor(y)], vm)
    # out_dims 0 at both levels: [outer, inner, ...] = [3, 5, 4]
    ref = np.stack([np.stack([x[i][:, j] * y for j in range(5)]) for i in range(3)])
    np.testing.assert_allclose(out(body), ref, rtol=1e-6)
    body = vcall(server, "sum", [tensor(x)], [{"in_dims": [0]}, {"in_dims": [0]}])
    np.testing.assert_allclose(out(body), x.sum(-1), rtol=1e-5, atol=1e-5)


def test_errors(server, rng):
    x, y = f32(rng, 3, 2), f32(rng, 4, 2)
    r = server.post("/v1/ops/add", {"args": [tensor(x), tensor(y)], "vmap": {"in_dims": [0, 0]}})
    assert r.status_code == 422 and "same size in the mapped dimension" in error_message(r)
    for vm, msg in (({"in_dims": [0, 5]}, "in_dims[1]"), ({"in_dims": [None, None]}, "maps no tensor"),
                    ({"in_dims": [0], "randomness": "maybe"}, "randomness"), ({"in_dim": [0]}, "unknown field"),
                    ([], "1 to 4 levels"), ({"in_dims": [0, None], "out_dims": [None]}, "out_dims[0]")):
        r = server.post("/v1/ops/add", {"args": [tensor(x), tensor(x[0])], "vmap": vm})
        assert r.status_code == 400, (vm, r.text)
        assert msg in error_message(r), (msg, error_message(r))


def test_vmap_over_a_program(server, rng):
    s = {"X-OD-Session": "vmap-prog"}
    x, w, b = f32(rng, 7, 2, 3), f32(rng, 3, 4), f32(rng, 4)
    xid = server.post("/v1/tensors", {"tensor": tensor(x)}, headers=s).json()["id"]
    wid = server.post("/v1/tensors", {"tensor": tensor(w)}, headers=s).json()["id"]
    # a per-sample two-layer function of a stored batch: relu(x @ w + b).sum(0)
    body = {"steps": [{"op": "mm", "args": [{"ref": xid}, {"ref": wid}]},
                      {"op": "add", "args": [{"ref": "$0"}, tensor(b)]},
                      {"op": "relu", "args": [{"ref": "$1"}]},
                      {"op": "sum", "args": [{"ref": "$2"}, [0]]}],
            "outputs": ["$3", "$0"], "keep": ["$3"],
            "vmap": {"in_dims": {xid: 0}, "out_dims": [0, 1]}}
    r = server.post("/v1/run", body, headers=s)
    assert r.status_code == 200, r.text
    validate(r, "POST", "/v1/run")
    res = r.json()
    ref = loop(lambda a: np.maximum(a @ w + b, 0).sum(0), x, in_dims=[0])
    np.testing.assert_allclose(from_json(res["outputs"][0]), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(from_json(res["outputs"][1]), loop(lambda a: a @ w, x, in_dims=[0], out_dim=1),
                               rtol=1e-5, atol=1e-5)
    kept = res["kept"]["$3"]
    got = from_json(server.get(f"/v1/tensors/{kept}", headers=s).json()["outputs"][0])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    assert all("Batched" in d["record"]["path"] for d in res["dispatch"]), [d["record"]["path"] for d in res["dispatch"]]
    r = server.post("/v1/run", dict(body, vmap={"in_dims": [0]}), headers=s)
    assert r.status_code == 400 and "stored tensor id" in error_message(r)
    server.delete("/v1/sessions/vmap-prog")
