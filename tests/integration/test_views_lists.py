"""Operators that return Tensor[] (split, split_with_sizes, unbind, chunk,
where(condition)) and the remaining views and their composites (diagonal,
diag, diag_embed, as_strided, unfold, narrow_copy, diagonal_scatter,
as_strided_scatter, squeeze_, unsqueeze_, transpose_, resize_) against
PyTorch 1.13 on fresh random inputs of every dtype, non-contiguous, empty
and 0-dim ones; refusals say what torch says. A Tensor[] return comes back
as one output per element ("out.<i>", "return", "index") in /v1 JSON, the
binary protocol, /v2, programs ("$k.i.e"), kept results and vmap; views
share storage where a program can see it; autograd through split and
unbind matches torch's gradients."""

import json
import subprocess

import numpy as np

from conftest import TORCH_PY, parse_binary_response, tensor
from conftest import from_json as _from_json


def from_json(o):
    if o.get("dtype") == "bfloat16":  # exact in float32
        o = dict(o, dtype="float32")
    return _from_json(o)

DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")

# every output of a case (a Tensor[] return in full), or torch's error
_REF = r"""
import json, sys, torch
DT = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "bool": torch.bool,
      "float16": torch.float16, "bfloat16": torch.bfloat16, "int32": torch.int32, "int16": torch.int16,
      "int8": torch.int8, "uint8": torch.uint8}
def val(v):
    if isinstance(v, dict) and "dtype" in v:
        t = torch.tensor([float(x) if isinstance(x, str) else x for x in v["data"]], dtype=torch.float64)
        t = t.to(DT[v["dtype"]]).reshape(v["shape"])
        if v.get("transpose"):
            t = t.t()
        return t
    return v
out = []
for c in json.load(sys.stdin):
    name, _, ovl = c["op"].partition(".")
    fn = getattr(getattr(torch.ops.aten, name), ovl or "default")
    try:
        r = fn(*[val(a) for a in c["args"]])
        rs = list(r) if isinstance(r, (list, tuple)) else [r]
        out.append({"outs": [{"value": t.double().reshape(-1).tolist(), "shape": list(t.shape),
                              "dtype": str(t.dtype).replace("torch.", "")} for t in rs],
                    "list": isinstance(r, (list, tuple))})
    except Exception as e:
        out.append({"error": str(e)})
json.dump(out, sys.stdout)
"""


def ref(cases):
    p = subprocess.run([TORCH_PY, "-c", _REF], input=json.dumps(cases), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def T(a, transpose=False):
    """a (numpy) as a request tensor; transpose: sent as a.T's transpose,
    so the server and torch both see a non-contiguous a."""
    a = np.asarray(a)
    dt = str(a.dtype)
    if transpose:
        t = tensor(np.ascontiguousarray(a.T).astype(np.float64))
        t["dtype"] = dt
        t["transpose"] = True
        return t
    t = tensor(a.astype(np.float64))
    t["dtype"] = dt
    return t


def rand(rng, shape, dt):
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in ("uint8",):
        return rng.integers(0, 100, shape).astype(np.float64)
    return np.round(rng.standard_normal(shape) * 5, 0 if dt.startswith(("int", "uint")) else 3)


def _server_args(args):
    """Request arguments: a transposed tensor is sent as t() of its
    transpose, through a program, so the operator sees a strided view."""
    steps, out = [], []
    for a in args:
        if isinstance(a, dict) and a.get("transpose"):
            a = {k: v for k, v in a.items() if k != "transpose"}
            steps.append({"op": "t", "args": [a]})
            out.append({"ref": f"${len(steps) - 1}"})
        else:
            out.append(a)
    return steps, out


def call(server, op, args):
    steps, sargs = _server_args(args)
    if not steps:
        r = server.post(f"/v1/ops/{op}", {"args": sargs})
        return r, (r.json().get("outputs") if r.status_code == 200 else None)
    steps.append({"op": op, "args": sargs})
    r = server.post("/v1/run", {"steps": steps})
    return r, (r.json().get("outputs") if r.status_code == 200 else None)


def check(server, cases):
    want = ref([{"op": op, "args": a} for op, a in cases])
    for (op, args), w in zip(cases, want):
        what = f"{op} {[(a['dtype'], a['shape'], bool(a.get('transpose'))) if isinstance(a, dict) else a for a in args]}"
        r, outs = call(server, op, args)
        if "error" in w:
            assert 400 <= r.status_code < 500, (what, r.text[:300], w)
            msg = r.json()["error"]["message"]
            if msg.startswith("step ") and "): " in msg:  # through a program: "step k (op): ..."
                msg = msg.split("): ", 1)[1]
            assert msg in w["error"], (what, r.json(), w["error"])
            continue
        assert r.status_code == 200, (what, r.text[:400])
        assert len(outs) == len(w["outs"]), (what, len(outs), len(w["outs"]))
        for i, (o, e) in enumerate(zip(outs, w["outs"])):
            assert o["dtype"] == e["dtype"] and o["shape"] == e["shape"], (what, i, o["dtype"], o["shape"], e)
            np.testing.assert_array_equal(from_json(o).astype(np.float64).reshape(-1), np.array(e["value"]),
                                          err_msg=f"{what} output {i}")
            if w["list"] and "name" in o and not o["name"].startswith("$"):
                assert o["name"] == f"out.{i}" and o["return"] == 0 and o["index"] == i, (what, o)


def test_list_returns_against_torch(server, rng):
    cases = []
    for dt in DTYPES:
        x = rand(rng, (5, 4), dt).astype(dt if dt != "bfloat16" else "float32")
        X = T(x)
        if dt == "bfloat16":
            X["dtype"] = "bfloat16"
        Xt = dict(T(x.T, transpose=True), dtype=X["dtype"])  # x.T, non-contiguous [4, 5]
        cases += [("split.Tensor", [X, 2]), ("split.Tensor", [X, 3, 1]), ("split.Tensor", [Xt, 2, -1]),
                  ("split_with_sizes", [X, [1, 4], 0]), ("split_with_sizes", [Xt, [2, 0, 3], 1]),
                  ("unbind.int", [X]), ("unbind.int", [Xt, 1]), ("chunk", [X, 3]), ("chunk", [Xt, 3, 1]),
                  ("where", [X]), ("where", [Xt])]
    e = T(np.zeros((0, 3), np.float32))
    z = T(np.array(2.5, np.float32))
    cases += [("split.Tensor", [e, 0]), ("split.Tensor", [e, 2]), ("split.Tensor", [e, 2, 1]),
              ("unbind.int", [e]), ("unbind.int", [e, 1]), ("chunk", [e, 3]), ("chunk", [e, 2, 1]),
              ("where", [e]), ("where", [z]), ("where", [T(np.array(0.0, np.float32))]),
              ("split_with_sizes", [e, [0]]),
              # refusals
              ("split.Tensor", [T(np.zeros(3, np.float32)), 0]), ("split.Tensor", [T(np.zeros(3, np.float32)), -1]),
              ("split.Tensor", [z, 1]), ("split.Tensor", [T(np.zeros(3, np.float32)), 1, 1]),
              ("split_with_sizes", [T(np.zeros(3, np.float32)), [1, 1]]),
              ("split_with_sizes", [T(np.zeros(3, np.float32)), [4, -1]]),
              ("chunk", [T(np.zeros(3, np.float32)), 0]), ("chunk", [z, 2]),
              ("unbind.int", [z]), ("unbind.int", [T(np.zeros(3, np.float32)), 2])]
    check(server, cases)


def test_views_against_torch(server, rng):
    cases = []
    for dt in DTYPES:
        x = rand(rng, (4, 5), dt).astype(dt if dt != "bfloat16" else "float32")
        X = T(x)
        if dt == "bfloat16":
            X["dtype"] = "bfloat16"
        Xt = dict(T(x.T, transpose=True), dtype=X["dtype"])
        v = dict(T(rand(rng, (3,), dt).astype(dt if dt != "bfloat16" else "float32")), dtype=X["dtype"])
        x3 = dict(T(rand(rng, (2, 3, 4), dt).astype(dt if dt != "bfloat16" else "float32")), dtype=X["dtype"])
        cases += [("diagonal", [X]), ("diagonal", [X, 1]), ("diagonal", [Xt, -2]), ("diagonal", [X, 7]),
                  ("diagonal", [x3, 0, 2, 0]), ("diagonal", [x3, -1, -1, 1]),
                  ("diag", [X]), ("diag", [Xt, 1]), ("diag", [v]), ("diag", [v, -2]),
                  ("diag_embed", [v]), ("diag_embed", [X, 1]), ("diag_embed", [Xt, -1, 0, 2]),
                  ("as_strided", [X, [3, 2], [1, 3]]), ("as_strided", [X, [2, 2], [5, 1], 3]),
                  ("as_strided", [Xt, [4], [6]]),
                  ("unfold", [X, 0, 2, 1]), ("unfold", [Xt, 1, 3, 2]), ("unfold", [x3, -1, 4, 1]),
                  ("narrow_copy", [X, 0, 1, 2]), ("narrow_copy", [Xt, 1, -3, 3]), ("narrow_copy", [X, 1, 5, 0]),
                  ("diagonal_scatter", [X, dict(T(rand(rng, (4,), dt).astype("float32")), dtype=X["dtype"])]),
                  ("diagonal_scatter", [Xt, dict(T(rand(rng, (3,), dt).astype("float32")), dtype=X["dtype"]), 2]),
                  ("as_strided_scatter", [X, dict(T(rand(rng, (3, 2), dt).astype("float32")), dtype=X["dtype"]),
                                          [3, 2], [1, 3]])]
    z = T(np.array(1.5, np.float32))
    e = T(np.zeros((0, 3), np.float32))
    x = T(np.arange(12, dtype=np.float32).reshape(3, 4))
    cases += [("diagonal", [e]), ("diag", [e]), ("diag_embed", [e]), ("unfold", [z, 0, 1, 1]),
              ("unfold", [e, 1, 2, 1]), ("narrow_copy", [e, 1, 0, 2]),
              # refusals
              ("diagonal", [z]), ("diagonal", [x, 0, 0, 0]), ("diagonal", [x, 0, 0, 2]),
              ("diag", [z]), ("diag", [T(np.zeros((2, 2, 2), np.float32))]),
              ("diag_embed", [z]), ("diag_embed", [x, 0, 1, 1]),
              ("as_strided", [x, [3, 5], [4, 1]]), ("as_strided", [x, [2], [1], 11]),
              ("as_strided", [x, [2], [-1]]), ("as_strided", [x, [2, 2], [1]]),
              ("unfold", [x, 0, 4, 1]), ("unfold", [x, 0, 2, 0]), ("unfold", [x, 2, 1, 1]),
              ("narrow_copy", [x, 0, 2, 2]), ("narrow_copy", [z, 0, 0, 1]),
              ("diagonal_scatter", [x, T(np.zeros(2, np.float32))]),
              ("as_strided_scatter", [x, T(np.zeros(2, np.float32)), [3], [5]])]
    check(server, cases)


def test_inplace_view_changes(server, rng):
    x = rng.standard_normal((3, 1, 4)).astype(np.float32)
    for op, args, shape in [("squeeze_", [], [3, 4]), ("squeeze_.dim", [1], [3, 4]), ("squeeze_.dim", [0], [3, 1, 4]),
                            ("unsqueeze_", [0], [1, 3, 1, 4]), ("unsqueeze_", [-1], [3, 1, 4, 1]),
                            ("transpose_", [0, 2], [4, 1, 3]), ("resize_", [[2, 3]], [2, 3]),
                            ("resize_", [[4, 5]], [4, 5])]:
        r = server.post(f"/v1/ops/{op}", {"args": [tensor(x)] + args})
        assert r.status_code == 200, (op, r.text)
        o = r.json()["outputs"][0]
        assert o["shape"] == shape, (op, o["shape"])
        got = from_json(o)
        if op == "transpose_":
            np.testing.assert_array_equal(got, x.transpose(2, 1, 0))
        elif op == "resize_":
            np.testing.assert_array_equal(got.reshape(-1)[:min(12, got.size)], x.reshape(-1)[:min(12, got.size)])
        else:
            np.testing.assert_array_equal(got.reshape(-1), x.reshape(-1))
    for op, args, msg in [("squeeze_.dim", [3], "Dimension out of range (expected to be in range of [-3, 2], but got 3)"),
                          ("transpose_", [0, 3], "Dimension out of range"),
                          ("resize_", [[-1, 2]], "negative dimension -1")]:
        r = server.post(f"/v1/ops/{op}", {"args": [tensor(x)] + args})
        assert 400 <= r.status_code < 500 and msg in r.json()["error"]["message"], (op, r.text)


def test_resize_to_channels_last(server, rng):
    """resize_(memory_format=channels_last) restrides self as torch does:
    the storage keeps its order and the result reads it NHWC."""
    x = rng.standard_normal(24).astype(np.float32)
    r = server.post("/v1/ops/resize_", {"args": [tensor(x), [1, 2, 3, 4]], "kwargs": {"memory_format": "channels_last"}})
    assert r.status_code == 200, r.text
    got = from_json(r.json()["outputs"][0])
    want = np.lib.stride_tricks.as_strided(x, (1, 2, 3, 4), tuple(4 * s for s in (24, 1, 8, 2)))
    np.testing.assert_array_equal(got, want)
    r = server.post("/v1/ops/resize_", {"args": [tensor(x), [4, 6]], "kwargs": {"memory_format": "channels_last"}})
    assert r.status_code == 400 and "required rank 4 tensor to use channels_last format" in r.text, r.text


def test_inplace_view_change_is_seen_by_later_steps(server, rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    body = {"steps": [{"op": "clone", "args": [tensor(x)]},
                      {"op": "transpose_", "args": [{"ref": "$0"}, 0, 1]},
                      {"op": "unsqueeze_", "args": [{"ref": "$0"}, 0]},
                      {"op": "mul", "args": [{"ref": "$0"}, 2]}],
            "outputs": ["$0", "$3"]}
    r = server.post("/v1/run", body)
    assert r.status_code == 200, r.text
    o = {t["name"]: t for t in r.json()["outputs"]}
    assert o["$0"]["shape"] == [1, 3, 2] and o["$3"]["shape"] == [1, 3, 2]
    np.testing.assert_array_equal(from_json(o["$0"])[0], x.T)
    np.testing.assert_allclose(from_json(o["$3"])[0], 2 * x.T)
    # a stored tensor keeps the change
    s = {"X-OD-Session": "views-lists"}
    tid = server.post("/v1/tensors", {"tensor": tensor(x)}, headers=s).json()["id"]
    r = server.post("/v1/ops/squeeze_", {"args": [{"ref": tid}]}, headers=s)
    assert r.status_code == 200
    r = server.post("/v1/ops/unsqueeze_", {"args": [{"ref": tid}, 1]}, headers=s)
    assert r.status_code == 200, r.text
    meta = server.get(f"/v1/tensors/{tid}", headers=s, params={"meta": 1}).json()
    assert meta["shape"] == [2, 1, 3], meta
    server.delete("/v1/sessions/views-lists")


def test_views_share_storage_in_a_program(server, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    body = {"steps": [{"op": "clone", "args": [tensor(x)]},
                      {"op": "split", "args": [{"ref": "$0"}, 2, 1]},
                      {"op": "fill_", "args": [{"ref": "$1.0.1"}, 7.0]},
                      {"op": "unbind", "args": [{"ref": "$0"}]},
                      {"op": "mul_", "args": [{"ref": "$3.0.3"}, 0.0]},
                      {"op": "diagonal", "args": [{"ref": "$0"}]},
                      {"op": "fill_", "args": [{"ref": "$5"}, -1.0]},
                      {"op": "as_strided", "args": [{"ref": "$0"}, [2], [7], 1]},
                      {"op": "fill_", "args": [{"ref": "$7"}, 5.0]},
                      {"op": "unfold", "args": [{"ref": "$0"}, 1, 2, 2]},
                      {"op": "add_", "args": [{"ref": "$9"}, 0.5]}],
            "outputs": ["$0"]}
    r = server.post("/v1/run", body)
    assert r.status_code == 200, r.text
    want = x.copy()
    want[:, 2:4] = 7.0
    want[3] = 0.0
    np.fill_diagonal(want, -1.0)
    flat = want.reshape(-1)
    flat[[1, 8]] = 5.0
    want += 0.5
    np.testing.assert_allclose(from_json(r.json()["outputs"][0]), want)


def test_empty_slice_keeps_its_offset(server, rng):
    """ATen's slice moves the storage offset by start * stride even when the
    slice is empty, so a later as_strided or _reshape_alias of it (which
    keep the view's offset) reads from there; past the storage, setStorage
    refuses."""
    x = rng.standard_normal((4, 6)).astype(np.float32)
    flat = x.reshape(-1)
    for dim, k in ((1, 4), (0, 2), (1, 6), (0, 3)):
        off = k * (6 if dim == 0 else 1)
        body = {"steps": [{"op": "slice.Tensor", "args": [tensor(x), dim, k, k]},
                          {"op": "_reshape_alias", "args": [{"ref": "$0"}, [], []]},
                          {"op": "as_strided", "args": [{"ref": "$0"}, [2], [1]]}],
                "outputs": ["$0", "$1", "$2"]}
        r = server.post("/v1/run", body)
        assert r.status_code == 200, (dim, k, r.text)
        outs = r.json()["outputs"]
        assert outs[0]["shape"] == ([0, 6] if dim == 0 else [4, 0]), (dim, k, outs[0])
        np.testing.assert_array_equal(from_json(outs[1]), flat[off], err_msg=f"{dim} {k}")
        np.testing.assert_array_equal(from_json(outs[2]), flat[off:off + 2], err_msg=f"{dim} {k}")
    body = {"steps": [{"op": "slice.Tensor", "args": [tensor(x), 0, 4, 4]},
                      {"op": "as_strided", "args": [{"ref": "$0"}, [2], [1]]}]}
    r = server.post("/v1/run", body)
    assert 400 <= r.status_code < 500 and "storage offset 24" in r.json()["error"]["message"], r.text


def test_list_outputs_in_every_protocol(server, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    # /v1 JSON: one output per element, in order, with its place
    r = server.post("/v1/ops/unbind", {"args": [tensor(x)]})
    assert r.status_code == 200, r.text
    outs = r.json()["outputs"]
    assert [(o["name"], o["return"], o["index"]) for o in outs] == [("out.0", 0, 0), ("out.1", 0, 1), ("out.2", 0, 2)]
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(from_json(o), x[i])
    # selecting one element, or the whole list by its return's name
    r = server.post("/v1/ops/unbind", {"args": [tensor(x)], "outputs": [{"name": "out.1"}]})
    assert [o["name"] for o in r.json()["outputs"]] == ["out.1"]
    r = server.post("/v1/ops/unbind", {"args": [tensor(x)], "outputs": [{"name": "out"}]})
    assert len(r.json()["outputs"]) == 3
    r = server.post("/v1/ops/unbind", {"args": [tensor(x)], "outputs": [{"name": "out.3"}]})
    assert r.status_code == 400 and "unknown output 'out.3'" in r.json()["error"]["message"]
    # binary: one blob per element
    r = server.post("/v1/ops/split", {"args": [tensor(x), 3, 1], "parameters": {"binary_data_output": True}})
    assert r.status_code == 200, r.text
    head, blobs = parse_binary_response(r)
    assert [o["shape"] for o in head["outputs"]] == [[3, 3], [3, 1]]
    np.testing.assert_array_equal(np.frombuffer(blobs[0], np.float32).reshape(3, 3), x[:, :3])
    np.testing.assert_array_equal(np.frombuffer(blobs[1], np.float32).reshape(3, 1), x[:, 3:])
    # /v2: each tensor its own named output
    body = {"inputs": [{"name": "self", "datatype": "FP32", "shape": [3, 4], "data": x.reshape(-1).tolist()},
                       {"name": "split_size", "datatype": "INT64", "shape": [1], "data": [2]}]}
    r = server.post("/v2/models/split.Tensor/infer", body)
    assert r.status_code == 200, r.text
    outs = r.json()["outputs"]
    assert [o["name"] for o in outs] == ["out.0", "out.1"]
    np.testing.assert_array_equal(from_json(outs[1]), x[2:])
    # kept: each element stored
    s = {"X-OD-Session": "views-lists-keep"}
    r = server.post("/v1/ops/chunk", {"args": [tensor(x), 2, 1], "keep": True}, headers=s)
    assert r.status_code == 200, r.text
    kept = r.json()["outputs"]
    assert [k["name"] for k in kept] == ["out.0", "out.1"] and all(k["id"] for k in kept)
    got = server.get(f"/v1/tensors/{kept[1]['id']}", headers=s).json()["outputs"][0]
    np.testing.assert_array_equal(from_json(got), x[:, 2:])
    server.delete("/v1/sessions/views-lists-keep")
    # a program's default output: every element of the last step's list
    r = server.post("/v1/run", {"steps": [{"op": "unbind", "args": [tensor(x), 1]}]})
    assert r.status_code == 200, r.text
    assert [o["name"] for o in r.json()["outputs"]] == ["$0.0.0", "$0.0.1", "$0.0.2", "$0.0.3"]
    r = server.post("/v1/run", {"steps": [{"op": "unbind", "args": [tensor(x)]},
                                          {"op": "neg", "args": [{"ref": "$0"}]}]})
    assert r.status_code == 400 and "name one as" in r.json()["error"]["message"], r.text


def test_modes_see_list_outputs(server, rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    r = server.post("/v1/ops/unbind", {"args": [tensor(x)], "modes": ["trace", "validate"]})
    assert r.status_code == 200, r.text
    assert len(r.json()["outputs"]) == 2


def test_vmap_over_unbind_and_split(server, rng):
    x = rng.standard_normal((5, 3, 4)).astype(np.float32)
    r = server.post("/v1/ops/unbind", {"args": [tensor(x), 1], "vmap": {"in_dims": [0, None]}})
    assert r.status_code == 200, r.text
    outs = r.json()["outputs"]
    assert len(outs) == 4
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(from_json(o), x[:, :, i])
    # per sample x[:, :, b] is [5, 3]: split(2) gives 3 pieces; out_dims 1 puts the batch second
    r = server.post("/v1/ops/split", {"args": [tensor(x), 2], "vmap": {"in_dims": [2, None], "out_dims": 1}})
    assert r.status_code == 200, r.text
    outs = r.json()["outputs"]
    assert [o["shape"] for o in outs] == [[2, 4, 3], [2, 4, 3], [1, 4, 3]]
    for e, o in enumerate(outs):
        np.testing.assert_array_equal(from_json(o), x[2 * e:2 * e + 2].transpose(0, 2, 1))


_GRAD_REF = r"""
import json, sys, torch
c = json.load(sys.stdin)
x = torch.tensor(c["x"], dtype=torch.float64).requires_grad_()
parts = getattr(torch, c["op"])(x, *c["args"])
loss = sum((p * torch.tensor(w, dtype=torch.float64)).sum() for p, w in zip(parts, c["w"]) if w is not None)
loss.backward()
json.dump(x.grad.tolist(), sys.stdout)
"""


def test_autograd_through_split_and_unbind(server, rng):
    x = rng.standard_normal((4, 6))
    for op, args, pieces in [("split", [4, 1], [(4, 4), (4, 2)]), ("unbind", [0], [(6,)] * 4),
                             ("chunk", [3, 1], [(4, 2)] * 3), ("split_with_sizes", [[1, 3], 0], [(1, 6), (3, 6)])]:
        ws = [rng.standard_normal(p) for p in pieces]
        ws[-1] = None  # an unused piece: its gradient counts as zeros
        p = subprocess.run([TORCH_PY, "-c", _GRAD_REF],
                           input=json.dumps({"x": x.tolist(), "op": op, "args": args,
                                             "w": [None if w is None else w.tolist() for w in ws]}),
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        want = np.array(json.loads(p.stdout))
        s = {"X-OD-Session": "views-lists-ag"}
        xt = tensor(x.astype(np.float64))
        xt["requires_grad"] = True
        xid = server.post("/v1/tensors", {"tensor": xt}, headers=s).json()["id"]
        steps = [{"op": op, "args": [{"ref": xid}] + args}]
        sums = []
        for e, w in enumerate(ws):
            if w is None:
                continue
            steps.append({"op": "mul", "args": [{"ref": f"$0.0.{e}"}, tensor(w)]})
            steps.append({"op": "sum", "args": [{"ref": f"${len(steps) - 1}"}]})
            sums.append(len(steps) - 1)
        acc = sums[0]
        for k in sums[1:]:
            steps.append({"op": "add", "args": [{"ref": f"${acc}"}, {"ref": f"${k}"}]})
            acc = len(steps) - 1
        steps.append({"backward": f"${acc}"})
        r = server.post("/v1/run", {"steps": steps, "outputs": []}, headers=s)
        assert r.status_code == 200, (op, r.text)
        grads = r.json()["grads"]
        gid = [g for g in grads if g["id"] == xid][0]["grad"]["id"]
        got = from_json(server.get(f"/v1/tensors/{gid}", headers=s).json()["outputs"][0])
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=op)
        server.delete("/v1/sessions/views-lists-ag")


def test_autograd_of_diagonal_family(server, rng):
    """DiagonalBackward0, DiagEmbedBackward0 and DiagonalScatterBackward0 on
    the float64 graph, against torch's gradients."""
    from conftest import torch_ref

    x = rng.standard_normal((4, 5))
    v = rng.standard_normal(3)
    cases = [("diagonal", [x, 1, 0, 1], (4,)), ("diagonal", [x, -1, 1, 0], (4,)),
             ("diag_embed", [v, 1, 0, 1], (4, 4)), ("diag", [x, 0], (4,)), ("diag", [v, -1], (4, 4))]
    for op, args, wshape in cases:
        w = rng.standard_normal(wshape)
        a0 = tensor(args[0].astype(np.float64))
        a0["requires_grad"] = True
        want = torch_ref([{"op": op, "args": [a0] + args[1:], "weight": tensor(w)}])[0]
        s = {"X-OD-Session": "views-lists-ag2"}
        xid = server.post("/v1/tensors", {"tensor": a0}, headers=s).json()["id"]
        steps = [{"op": op, "args": [{"ref": xid}] + args[1:]},
                 {"op": "mul", "args": [{"ref": "$0"}, tensor(w)]}, {"op": "sum", "args": [{"ref": "$1"}]},
                 {"backward": "$2"}]
        r = server.post("/v1/run", {"steps": steps, "outputs": []}, headers=s)
        assert r.status_code == 200, (op, r.text)
        gid = [g for g in r.json()["grads"] if g["id"] == xid][0]["grad"]["id"]
        got = from_json(server.get(f"/v1/tensors/{gid}", headers=s).json()["outputs"][0])
        np.testing.assert_allclose(got.reshape(-1), want["grads"][0], rtol=1e-12, err_msg=op)
        server.delete("/v1/sessions/views-lists-ag2")


def test_python_client_returns_a_list(server, rng):
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "clients" / "python"))
    from opdispatch import Client

    x = rng.standard_normal((3, 4)).astype(np.float32)
    for transport in ("json", "binary"):
        c = Client(server.url, transport=transport)
        parts = c.call("unbind", x)
        assert isinstance(parts, list) and len(parts) == 3, transport
        for i, p in enumerate(parts):
            np.testing.assert_array_equal(p, x[i])
        one = c.call("split", x, 3)  # a list of one piece stays a list
        assert isinstance(one, list) and len(one) == 1
        np.testing.assert_array_equal(one[0], x)
