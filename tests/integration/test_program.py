"""POST /v1/run: programs of operator calls in one round trip, with "$k"
references to earlier results, stored tensors, kept results, binary
outputs and errors that name their step. Checked against numpy."""

import numpy as np

from conftest import binary_body, error_message, from_json, parse_binary_response, tensor, validate


def run(server, body, session=None, **kw):
    headers = {"X-OD-Session": session} if session else {}
    headers.update(kw.pop("headers", {}))
    return server.post("/v1/run", body, headers=headers, **kw)


def test_chain_with_step_refs(server, rng):
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((7, 3)).astype(np.float32)
    c = rng.standard_normal((3,)).astype(np.float32)
    body = {"steps": [
        {"op": "mm", "args": [tensor(a), tensor(b)]},
        {"op": "add", "args": [{"ref": "$0"}, tensor(c)], "kwargs": {"alpha": 2}},
        {"op": "relu", "args": [{"ref": "$1"}]},
        {"op": "native_layer_norm", "args": [{"ref": "$2"}, [3], None, None, 1e-5]},
        {"op": "sum", "args": [{"ref": "$3.1"}]},
    ], "outputs": ["$2", "$3.0", "$4"]}
    r = run(server, body)
    assert r.status_code == 200, r.text
    validate(r, "POST", "/v1/run")
    doc = r.json()
    assert doc["steps"] == 5 and [d["op"] for d in doc["dispatch"]] == [
        "aten::mm", "aten::add.Tensor", "aten::relu", "aten::native_layer_norm", "aten::sum"]
    outs = {o["name"]: from_json(o) for o in doc["outputs"]}
    relu = np.maximum(a.astype(np.float64) @ b + 2 * c, 0)
    np.testing.assert_allclose(outs["$2"], relu, rtol=1e-5, atol=1e-5)
    mean = relu.mean(-1, keepdims=True)
    ln = (relu - mean) / np.sqrt(relu.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(outs["$3.0"], ln, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(outs["$4"], mean.sum(), rtol=1e-4, atol=1e-5)


def test_default_output_is_the_last_step_and_binary(server, rng):
    a = rng.standard_normal(1000).astype(np.float32)
    body = {"steps": [{"op": "exp", "args": [tensor(a)]}, {"op": "log", "args": [{"ref": "$0"}]}],
            "parameters": {"binary_data_output": True}}
    r = run(server, body)
    assert r.status_code == 200, r.text
    head, blobs = parse_binary_response(r)
    assert head["outputs"][0]["name"] == "$1.0"
    np.testing.assert_allclose(np.frombuffer(blobs[0], np.float32), a, rtol=1e-5, atol=1e-6)


def test_stored_inputs_and_kept_results(server, rng):
    sid = server.post("/v1/sessions").json()["id"]
    a = rng.standard_normal((4, 4)).astype(np.float32)
    ia = server.post("/v1/tensors", {"tensor": tensor(a)}, headers={"X-OD-Session": sid}).json()["id"]
    body = {"steps": [{"op": "mm", "args": [{"ref": ia}, {"ref": ia}]},
                      {"op": "t", "args": [{"ref": "$0"}]}],
            "outputs": [], "keep": ["$1"]}
    r = run(server, body, sid)
    assert r.status_code == 200, r.text
    kept = r.json()["kept"]["$1"]
    got = server.get(f"/v1/tensors/{kept}", headers={"X-OD-Session": sid}).json()
    np.testing.assert_allclose(from_json(got["outputs"][0]), (a @ a).T, rtol=1e-5, atol=1e-5)
    # the kept view's metadata: the transpose of the product, sharing its storage
    meta = server.get(f"/v1/tensors/{kept}?meta=1", headers={"X-OD-Session": sid}).json()
    assert meta["strides"] == [1, 4] and not meta["contiguous"]
    # another session cannot use the stored input
    r = run(server, body, "someone-else")
    assert r.status_code == 404 and error_message(r).startswith("step 0 (mm): no tensor")
    server.session.delete(server.url + f"/v1/sessions/{sid}")


def test_errors_name_the_step_and_free_everything(server, rng):
    a = tensor(rng.standard_normal((2, 3)).astype(np.float32))
    sid = "prog-errors"
    cases = [
        ({"steps": [{"op": "relu", "args": [a]}, {"op": "mm", "args": [{"ref": "$0"}, {"ref": "$0"}]}],
          "keep": ["$0"]}, 422, "step 1 (mm):"),
        ({"steps": [{"op": "relu", "args": [{"ref": "$1"}]}, {"op": "relu", "args": [a]}]}, 400,
         "step 0 (relu): \"$1\" names step 1, which has not run before this one"),
        ({"steps": [{"op": "nope", "args": [a]}]}, 404, "step 0 (nope):"),
        ({"steps": [{"op": "relu", "args": [a], "extra": 1}]}, 400, "unknown field 'extra'"),
        ({"steps": []}, 400, "the body must be"),
        ({"steps": [{"op": "relu", "args": [a]}], "outputs": ["$7"]}, 400, "the program has 1 steps"),
        ({"steps": [{"op": "relu", "args": [a]}], "outputs": ["$0.1"]}, 400, "has no tensor output 1"),
        ({"steps": [{"op": "relu", "args": [a]}] * 257}, 413, "at most 256 steps"),
    ]
    for body, status, msg in cases:
        r = run(server, body, sid)
        assert r.status_code == status, (body, r.text)
        assert msg in error_message(r), (msg, error_message(r))
    # nothing was kept by the failed programs
    assert server.get("/v1/tensors", headers={"X-OD-Session": sid}).json()["count"] == 0
    assert server.alive()


def test_each_step_counts_in_the_statistics(server, rng):
    server.post("/v1/stats/reset", {})
    a = tensor(rng.standard_normal(8).astype(np.float32))
    body = {"steps": [{"op": "neg", "args": [a]}, {"op": "neg", "args": [{"ref": "$0"}]},
                      {"op": "abs", "args": [{"ref": "$1"}]}]}
    assert run(server, body).status_code == 200
    ops = {o["op"]: o for o in server.get("/v1/stats").json()["ops"]}
    assert ops["aten::neg"]["requests"] == 2 and ops["aten::abs"]["requests"] == 1


def test_the_time_budget_covers_the_whole_program(make_server):
    """--max-call-seconds bounds the program, not each step: steps that each
    fit the budget but together pass it are cancelled (504, naming the step)."""
    from conftest import slow_mm_size

    srv = make_server("--max-call-seconds", "2")
    n = slow_mm_size(srv, 0.8)  # each step well inside the 2 s budget
    ones = np.ones((n, n), np.int64)
    a = {"dtype": "int64", "shape": [n, n], "parameters": {"binary_data_size": ones.nbytes}}
    steps = [{"op": "clone", "args": [a]}] + [{"op": "mm", "args": [{"ref": "$0"}, {"ref": "$0"}]}] * 8
    h, body = binary_body({"steps": steps, "outputs": []}, [ones])
    r = srv.post("/v1/run", data=body, timeout=120,
                 headers={"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(h))})
    assert r.status_code == 504, r.text[:500]
    assert error_message(r).startswith("step ") and "time budget" in error_message(r)
    assert srv.alive()


def test_results_no_later_step_names_are_freed_early(server):
    """40 steps of 8 MiB results that no later step uses: each is freed after
    the last step that names it, so the CPU block cache serves the next
    outputs from it. Counted by the allocator's misses (fresh blocks): a few,
    not 40."""
    def misses():
        return server.get("/v1/devices").json()["cpu"]["allocator"]["misses"]

    x = np.ones(2 * 1024 * 1024, np.float32)  # 8 MiB
    a = {"dtype": "float32", "shape": [x.size], "parameters": {"binary_data_size": x.nbytes}}
    steps = [{"op": "clone", "args": [a]}]
    steps += [{"op": "neg", "args": [{"ref": f"${k}"}]} for k in range(40)]
    h, body = binary_body({"steps": steps, "outputs": ["$40"], "parameters": {"binary_data_output": True}}, [x])
    hdrs = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(h))}
    before = misses()
    r = server.post("/v1/run", data=body, headers=hdrs)
    assert r.status_code == 200
    fresh = misses() - before
    _, blobs = parse_binary_response(r)
    np.testing.assert_array_equal(np.frombuffer(blobs[0], np.float32), x)  # neg 40 times
    assert fresh <= 8, f"{fresh} fresh 8 MiB blocks for a program that needs 3 at a time"
