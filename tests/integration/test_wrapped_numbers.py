"""Numbers where a schema declares a Tensor: PyTorch's wrapped numbers.

A number passed for a Tensor argument becomes a 0-dim int64/float64/bool
tensor that promotes as a Scalar would (`add.Tensor(int8 x, 1)` stays int8,
`add.Tensor(int8 x, 300)` wraps). Every case is checked against PyTorch 1.13
(tools/torch_ref.py) on fresh random inputs of all ten dtypes, with the
number in either position, over /v1 JSON, in a program and as a /v2
parameter."""

import numpy as np
import pytest

from conftest import from_json, tensor, torch_ref

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def T(rng, dt, shape):
    if dt == "bool":
        a = rng.integers(0, 2, shape).astype(bool)
    elif dt.startswith(("int", "uint")):
        a = rng.integers(-20 if dt != "uint8" else 0, 20, shape).astype(dt)
    else:
        a = rng.uniform(-4, 4, shape).astype(np.float32 if dt == "bfloat16" else dt)
    t = tensor(a)
    t["dtype"] = dt
    return t


def number(rng, kind):
    if kind == "bool":
        return bool(rng.integers(0, 2))
    if kind == "int":
        return int(rng.choice([rng.integers(-5, 6), 300, -129]))  # out of int8's range wraps
    return float(rng.choice([rng.uniform(-3, 3), 0.5, 1e5]))


def cases(rng, n):
    out = []
    for _ in range(n):
        op = rng.choice(["add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "div.Tensor_mode"])
        dt = str(rng.choice(DTYPES))
        shape = [int(s) for s in rng.integers(0, 4, int(rng.integers(0, 3)))]
        num = number(rng, str(rng.choice(["bool", "int", "float"])))
        x = T(rng, dt, shape)
        first = bool(rng.integers(0, 2))
        args = [num, x] if first else [x, num]
        kwargs = {"rounding_mode": str(rng.choice(["trunc", "floor"]))} if op == "div.Tensor_mode" else {}
        out.append({"op": op, "args": args, "kwargs": kwargs})
    return out


def agree(ref, r):
    if "error" in ref:
        assert 400 <= r.status_code < 500, (ref, r.text)
        return
    assert r.status_code == 200, (ref, r.text)
    got = r.json()["outputs"][0]
    assert got["dtype"] == ref["dtype"] and got["shape"] == ref["shape"], (ref, got)
    g = np.array([float(v) for v in got["data"]], np.float64)  # "NaN" and bfloat16 too
    w = np.array(ref["value"], np.float64)
    rtol = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-5}.get(ref["dtype"], 1e-12)
    np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, equal_nan=True)


def test_wrapped_numbers_match_torch(server, rng):
    cs = cases(rng, 160)
    refs = torch_ref(cs)
    assert sum("error" not in r for r in refs) > 100  # most cases are valid
    for c, ref in zip(cs, refs):
        r = server.post(f"/v1/ops/{c['op']}", {"args": c["args"], "kwargs": c.get("kwargs", {})})
        agree(ref, r)


def test_wrapped_numbers_in_programs_and_on_v2(server, rng):
    x = np.array([1, 2, 127], np.int8)
    ref = torch_ref([{"op": "add.Tensor", "args": [tensor(x), 300]}])[0]
    assert ref["dtype"] == "int8"
    r = server.post("/v1/run", {"steps": [{"op": "add.Tensor", "args": [tensor(x), 300]},
                                          {"op": "mul.Tensor", "args": [{"ref": "$0"}, 2]}]})
    assert r.status_code == 200, r.text
    out = from_json(r.json()["outputs"][0])
    assert out.dtype == np.int8 and out.tolist() == [((v + 300) * 2 + 128) % 256 - 128 for v in x.tolist()]
    r = server.post("/v2/models/add.Tensor/infer",
                    {"inputs": [tensor(x, oip=True, name="self")], "parameters": {"other": 300}})
    assert r.status_code == 200, r.text
    o = r.json()["outputs"][0]
    assert o["datatype"] == "INT8" and o["data"] == [v for v in np.array(ref["value"]).astype(int).tolist()]


def test_any_declared_tensor_takes_a_number(server, rng):
    # torch.ops.aten takes numbers for Tensor arguments of add/sub/mul/div only;
    # the server takes them wherever a Tensor is declared (PyTorch's Python
    # layer emits such calls for every operator), promoting them the same way
    c, x = tensor(np.array([True, False, True])), tensor(np.array([1, 2, 3], np.int8))
    ref = torch_ref([{"op": "where", "python": True, "args": [c, x, 7]}])[0]
    r = server.post("/v1/ops/where.self", {"args": [c, x, 7]})
    assert r.status_code == 200 and r.json()["outputs"][0]["dtype"] == ref["dtype"] == "int8"
    assert r.json()["outputs"][0]["data"] == [int(v) for v in ref["value"]]


@pytest.mark.parametrize("bad", ["1", [1, 2], {"dtype": "float32"}])
def test_only_numbers_are_wrapped(server, bad):
    r = server.post("/v1/ops/add.Tensor", {"args": [tensor(np.ones(2, np.float32)), bad]})
    assert 400 <= r.status_code < 500
