#!/usr/bin/python3
"""PyTorch 1.13 as the reference for the integration tests: reads cases as
JSON on stdin, writes results as JSON on stdout.

Runs under Debian's /usr/bin/python3 with python3-torch, outside the tests'
virtualenv (whose numpy torch 1.13 was not built against). A case is
{"op": "add.Tensor", "args": [...], "kwargs": {...}, "out": 0, "weight": T}
where a tensor is {"dtype", "shape", "data", "requires_grad", "views"} (views:
[method, args...] applied in turn, the way /v1/run builds strided views); the answer per
case is {"grads": [data of each requires_grad input's .grad, or None]} for
loss = sum(op(...)[out] * weight), or {"error": message}; without a weight,
only the forward: {"value", "shape", "dtype"} ("autocast": "bfloat16" runs it
under torch.autocast on the CPU).
"""
import json
import sys

import torch

DT = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "bool": torch.bool,
      "float16": torch.float16, "bfloat16": torch.bfloat16, "int32": torch.int32, "int16": torch.int16,
      "int8": torch.int8, "uint8": torch.uint8}


def tensor(v):
    data = [float(x) if isinstance(x, str) else x for x in v["data"]]  # "NaN", "Infinity"
    t = torch.tensor(data, dtype=DT[v["dtype"]]).reshape(v["shape"])
    for name, *view_args in v.get("views", []):  # ["transpose", 1, 2], ["expand", [4, 1, 0]]: strided views
        t = getattr(t, name)(*view_args)
    if v.get("requires_grad"):
        t.requires_grad_(True)
    return t


def value(v, leaves):
    if isinstance(v, dict) and "dtype" in v:
        t = tensor(v)
        if t.requires_grad:
            leaves.append(t)
        return t
    if isinstance(v, list) and any(isinstance(x, dict) for x in v):  # Tensor[] and Tensor?[] (None kept)
        return [value(x, leaves) for x in v]
    if v in ("NaN", "Infinity", "-Infinity"):  # a Scalar as the wire spells it (no string argument takes these)
        return float(v)
    return v


def run(case):
    name, _, overload = case["op"].partition(".")
    if case.get("python"):  # the Python-level function (torch.where ...), which wraps numbers
        fn = getattr(torch, name)
    else:
        fn = getattr(getattr(torch.ops.aten, name), overload or "default")
    leaves = []
    args = [value(a, leaves) for a in case.get("args", [])]
    kwargs = {k: value(v, leaves) for k, v in case.get("kwargs", {}).items()}
    if "dtype" in kwargs and isinstance(kwargs["dtype"], str):
        kwargs["dtype"] = DT[kwargs["dtype"]]
    if case.get("autocast"):
        with torch.autocast("cpu", dtype=DT[case["autocast"]]):
            out = fn(*args, **kwargs)
    else:
        out = fn(*args, **kwargs)
    if isinstance(out, (tuple, list)):
        out = out[case.get("out", 0)]
    exact = not out.dtype.is_floating_point and out.dtype != torch.bool  # int64 beyond 2^53 as ints, not floats
    res = {"value": (out.detach() if exact else out.detach().double()).reshape(-1).tolist(), "shape": list(out.shape),
           "dtype": str(out.dtype).replace("torch.", ""),
           "grad_fn": type(out.grad_fn).__name__ if out.grad_fn is not None else None}
    if "weight" not in case:
        return res
    w = tensor(case["weight"]).to(out.dtype)
    loss = (out * w).sum()
    grads = torch.autograd.grad(loss, leaves, allow_unused=True) if leaves else []
    # (sgn's backward gives an efficient zero tensor, which has no storage)
    grads = [g if g is None or not g._is_zerotensor() else torch.zeros(g.shape) for g in grads]
    res["grads"] = [None if g is None else g.double().reshape(-1).tolist() for g in grads]
    return res


def main():
    cases = json.load(sys.stdin)
    out = []
    for c in cases:
        try:
            out.append(run(c))
        except Exception as e:  # the error is part of the reference
            out.append({"error": str(e)})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
