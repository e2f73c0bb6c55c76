"""The in-place variants (ops.def's OD_INPLACE lines: add_.Tensor, sqrt_,
clamp_, ...) over HTTP, against PyTorch 1.13 on fresh random inputs.

Nothing here names an operator: the overloads come from the server's
/v1/ops, their arguments from their schemas, so a new OD_INPLACE line is
tested by the next run. Each is called with self of several dtypes (some of
which torch refuses: a float result cannot be written into an integer self),
with an argument that broadcasts to self and one that would broadcast self
(refused), and the answer must be torch's: the value written into self, or an
error where torch raises. Stored tensors are changed in place, and autograd
refuses an in-place write into a leaf that requires grad, as torch does.
"""

import re

import numpy as np
import pytest

from conftest import SEED, error_message, from_json, tensor, torch_ref

SELF_DTYPES = ["float32", "float64", "int64", "bool"]


def inplace_overloads(server):
    """{op: schema} of the in-place overloads the server declares."""
    out = {}
    for g in server.get("/v1/ops").json()["operators"]:
        ns, _, name = g["name"].partition("::")
        if ns != "aten" or not name.endswith("_") or name.startswith("_") or name in ("copy_", "fill_"):
            continue
        for o in g["overloads"]:
            ov = o["overload"]
            out[f"{name}.{ov}" if ov and ov != "default" else name] = o["schema"]
    return out


def rand(rng, dtype, shape):
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-5, 6, shape).astype(dtype)
    return (rng.standard_normal(shape) * 1.5).astype(dtype)


def args_for(schema, rng, dtype, other_shape):
    """Positional args and kwargs for the schema text, self of dtype [3, 4]."""
    params = re.search(r"\((.*)\) ->", schema).group(1)
    args, kwargs, kw = [], {}, False
    for p in [x.strip() for x in params.split(",")]:
        if p == "*":
            kw = True
            continue
        typ, name = p.split("=")[0].rsplit(" ", 1)
        if name == "self":
            v = tensor(rand(rng, dtype, (3, 4)))
        elif typ.startswith("Tensor"):
            o = rand(rng, "float32" if dtype == "bool" else dtype, other_shape)
            # a negative shift count is C++'s undefined behaviour in torch 1.13
            v = tensor(np.abs(o) if "shift" in schema else o)
        elif typ.startswith("Scalar"):
            v = 0.5 if name in ("min", "other", "exponent") else 2
            if name == "max":
                v = 1.25
        elif typ.startswith("str"):
            v = "floor"
        else:
            continue  # defaults
        if kw or "=" in p:
            kwargs[name] = v
        else:
            args.append(v)
    return args, kwargs


def test_inplace_ops_agree_with_torch(server, rng):
    ops = inplace_overloads(server)
    assert len(ops) >= 80, ops  # the OD_INPLACE lines
    cases, calls = [], []
    for op, schema in sorted(ops.items()):
        for dtype in SELF_DTYPES:
            for other_shape in [(4,), (3, 4), (2, 3, 4)]:  # broadcasts; equal; would broadcast self
                args, kwargs = args_for(schema, rng, dtype, other_shape)
                cases.append({"op": op, "args": args, "kwargs": kwargs})
                calls.append((op, args, kwargs))
    refs = torch_ref(cases)
    bad = []
    for (op, args, kwargs), ref in zip(calls, refs):
        r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kwargs})
        if "error" in ref:
            if r.status_code < 400 or r.status_code >= 500:
                bad.append(f"{op} {args} {kwargs}: torch raised {ref['error']!r}, server {r.status_code}")
            else:
                error_message(r)
            continue
        if r.status_code != 200:
            bad.append(f"{op} {args} {kwargs}: torch ok, server {r.status_code} {r.text[:200]}")
            continue
        out = r.json()["outputs"][0]
        got = from_json(out)
        want = np.array([float(x) if isinstance(x, str) else x for x in ref["value"]]).reshape(ref["shape"])
        if out["dtype"] != ref["dtype"] or list(got.shape) != list(ref["shape"]) or out["dtype"] != args[0]["dtype"]:
            bad.append(f"{op}: dtype/shape {out['dtype']}{list(got.shape)} vs torch {ref['dtype']}{ref['shape']}")
        elif not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-6, equal_nan=True):
            bad.append(f"{op} {args} {kwargs}: server {got.tolist()} torch {want.tolist()}")
    assert not bad, f"seed {SEED}: {len(bad)} of {len(calls)} calls disagree:\n" + "\n".join(bad[:20])


def test_inplace_error_messages(server):
    x = tensor(np.arange(4, dtype=np.int64))
    r = server.post("/v1/ops/sqrt_", {"args": [x]})
    assert r.status_code == 400 or r.status_code == 422, r.text
    assert error_message(r) == "result type Float can't be cast to the desired output type Long"
    r = server.post("/v1/ops/add_.Tensor", {"args": [tensor(np.ones(4, np.float32)), tensor(np.ones((3, 4), np.float32))]})
    assert error_message(r) == "output with shape [4] doesn't match the broadcast shape [3, 4]"


def test_inplace_changes_a_stored_tensor(server):
    h = {"X-OD-Session": "inplace-test"}
    a = np.array([1.0, -2.0, 3.0], np.float32)
    r = server.post("/v1/tensors", {"tensor": tensor(a)}, headers=h)
    assert r.status_code == 201, r.text
    tid = r.json()["id"]
    r = server.post("/v1/ops/mul_.Scalar", {"args": [{"ref": tid}, 3]}, headers=h)
    assert r.status_code == 200, r.text
    got = from_json(server.get(f"/v1/tensors/{tid}", headers=h).json()["outputs"][0])
    assert got.tolist() == (a * 3).tolist()
    r = server.post("/v1/ops/clamp_", {"args": [{"ref": tid}], "kwargs": {"min": 0}}, headers=h)
    assert r.status_code == 200, r.text
    got = from_json(server.get(f"/v1/tensors/{tid}", headers=h).json()["outputs"][0])
    assert got.tolist() == np.clip(a * 3, 0, None).tolist()
    server.delete("/v1/sessions/inplace-test")


def test_inplace_autograd_like_torch(server):
    # a leaf that requires grad refuses an in-place write, in torch and here
    x = dict(tensor(np.ones(3, np.float32)), requires_grad=True)
    r = server.post("/v1/ops/exp_", {"args": [x], "grad_mode": "enabled"})
    ref = torch_ref([{"op": "exp_", "args": [x]}])[0]
    assert "error" in ref and "leaf Variable" in ref["error"], ref
    assert r.status_code >= 400 and "leaf Variable" in error_message(r), r.text
