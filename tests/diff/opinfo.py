#!/usr/bin/env python3
"""opinfo.py — PyTorch's own test inputs, replayed against the server.

PyTorch 1.13's OpInfo database (torch.testing._internal.common_methods_invocations
.op_db) holds the sample inputs its test suite runs for some 600 operators.
This runs each operator's samples (--samples per operator and CPU dtype),
and its in-place variant's on a copy of the input, under a TorchDispatchMode that records every aten call reaching the
dispatcher, keeps the calls on overloads the server declares (GET /v1/ops),
with torch's results, and replays each over HTTP: JSON /v1 always, and, for
a share of them (--cross), binary /v1 and /v2, which must answer bit for
bit as JSON /v1 does. The comparison is the differential tester's
(tests/diff/difftest.py): the same tolerances, allowlist and reports.

Two processes: the recorder runs in Python with torch and the OpInfo
database's imports (expecttest, hypothesis: the .venv-torch the Makefile
makes over Debian's python3-torch); the replay runs in the project's venv.

    .venv/bin/python tests/diff/opinfo.py [--samples 12] [--ops REGEX] [--time-limit S]
"""

import argparse
import json
import os
import pathlib
import random
import re
import subprocess
import sys
import time
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECORDER_PYTHON = os.environ.get("OD_TORCH_PYTHON", str(ROOT / ".venv-torch" / "bin" / "python"))
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]
MAX_IN_ELEMS = 20000     # a recorded call's tensors, all together
MAX_OUT_ELEMS = 100000
# operators that read their input's storage through its strides: replayed
# only from contiguous inputs, since JSON carries values, not strides
STRIDED = {"_reshape_alias", "as_strided"}


# ---- the recorder (runs with torch) --------------------------------------------------

def record(declared, samples, ops_re, seed, out):
    import warnings

    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.utils._python_dispatch import TorchDispatchMode

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    dtypes = {getattr(torch, n): n for n in DTYPES}
    seen = set()

    class Unsupported(Exception):
        pass

    def enc(v, budget):
        if isinstance(v, torch.Tensor):
            if v.dtype not in dtypes or v.layout != torch.strided or v.is_conj() or v.is_neg():
                raise Unsupported()
            budget[0] -= v.numel()
            if budget[0] < 0:
                raise Unsupported()
            t = v.detach().reshape(-1)
            return {"dtype": dtypes[v.dtype], "shape": list(v.shape),
                    "data": (t.double() if t.is_floating_point() else t).tolist()}
        if isinstance(v, (list, tuple)):
            return [enc(x, budget) for x in v]
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, torch.dtype):
            if v not in dtypes:
                raise Unsupported()
            return dtypes[v]
        if isinstance(v, torch.device):
            return str(v)
        if isinstance(v, torch.memory_format):
            return str(v).replace("torch.", "")
        if v is torch.strided:
            return "strided"
        raise Unsupported()

    def enc_out(o):
        outs = o if isinstance(o, (tuple, list)) else [o]
        if not outs or not all(isinstance(t, torch.Tensor) and t.dtype in dtypes for t in outs):
            raise Unsupported()
        if sum(t.numel() for t in outs) > MAX_OUT_ELEMS:
            raise Unsupported()
        return [{"dtype": dtypes[t.dtype], "shape": list(t.shape), "nbytes": t.numel() * t.element_size(),
                 "data": (t.detach().reshape(-1).double() if t.is_floating_point()
                          else t.detach().reshape(-1)).tolist()} for t in outs]

    lows = (torch.float32, torch.float16, torch.bfloat16)

    def low_precision(vs):
        return any((isinstance(v, torch.Tensor) and v.dtype in lows) or
                   (isinstance(v, torch.dtype) and v in lows) or
                   (isinstance(v, (list, tuple)) and low_precision(v)) for v in vs)

    def up(v):
        if isinstance(v, torch.Tensor):
            return v.detach().double() if v.is_floating_point() else v
        if isinstance(v, (list, tuple)):
            return type(v)(up(x) for x in v)
        return torch.float64 if isinstance(v, torch.dtype) and v in lows else v

    def ref64(func, args, kwargs):
        """The call with float64 for every less precise floating tensor and
        dtype argument: the difftest's reference where torch's own low
        precision kernel rounds along the way (its "ref64")."""
        try:
            return func(*up(list(args)), **{k: up(v) for k, v in kwargs.items()})
        except Exception:
            return None

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            ns, _, name = func._schema.name.partition("::")
            model = name if func._overloadname == "default" else f"{name}.{func._overloadname}"
            rec = None
            if ns == "aten" and model in declared and (name not in STRIDED or all(
                    a.is_contiguous() and a.storage_offset() == 0 for a in args if isinstance(a, torch.Tensor))):
                try:
                    budget = [MAX_IN_ELEMS]
                    rec = {"op": model, "args": enc(list(args), budget),
                           "kwargs": {k: enc(v, budget) for k, v in kwargs.items()}}
                except Unsupported:
                    rec = None
            low = rec is not None and low_precision(list(args) + list(kwargs.values()))
            # the same call in float64 (before an in-place op changes its inputs)
            ref = ref64(func, args, kwargs) if low else None
            result = func(*args, **kwargs)  # in-place ops: the arguments were encoded first
            if rec is not None:
                key = json.dumps(rec, sort_keys=True)
                if key not in seen:
                    try:
                        rec["outputs"] = enc_out(result)
                        if ref is not None:
                            rec["ref64"] = enc_out(ref)
                        seen.add(key)
                        out.write(json.dumps(rec) + "\n")
                    except Unsupported:
                        pass
            return result

    for op in sorted(op_db, key=lambda o: (o.name, o.variant_test_name)):
        full = op.name + ("." + op.variant_test_name if op.variant_test_name else "")
        if ops_re and not re.search(ops_re, full):
            continue
        for dt in sorted(op.supported_dtypes("cpu"), key=str):
            if dt not in dtypes:
                continue
            torch.manual_seed(seed)
            try:
                it = op.sample_inputs("cpu", dt, requires_grad=False)
                for k, s in enumerate(it):
                    if k >= samples:
                        break
                    try:
                        with Recorder():
                            op(s.input, *s.args, **s.kwargs)
                    except Exception:
                        pass  # torch refusing a sample records nothing after it
                    # the in-place variant on a copy, as PyTorch's
                    # test_variant_consistency_eager runs it
                    if op.inplace_variant is not None and isinstance(s.input, torch.Tensor):
                        try:
                            x = s.input.clone()
                            with Recorder():
                                op.inplace_variant(x, *s.args, **s.kwargs)
                        except Exception:
                            pass
            except Exception:
                pass
            out.flush()


# ---- the replay (runs in the project's venv) --------------------------------------------

def to_case(dt, rec, schema):
    import numpy as np

    def tens(v):
        if isinstance(v, dict) and "dtype" in v:
            npd = dt.NP_DTYPE.get(v["dtype"], np.float32)  # bfloat16 values in float32
            base = np.array(v["data"], dtype=np.float64 if v["dtype"] in dt.FLOATS else None)
            return dt.Tens(v["dtype"], base.astype(npd).reshape(v["shape"]))
        if isinstance(v, list):
            return [tens(x) for x in v]
        return v

    pos = [a for a in schema.args if not a.kwarg_only]
    if len(rec["args"]) > len(pos):
        return None
    types = {a.name: a.type for a in schema.args}
    args = [(a.name, a.type, tens(v)) for a, v in zip(pos, rec["args"])]
    if any(k not in types for k in rec["kwargs"]):
        return None
    kwargs = {k: (types[k], tens(v)) for k, v in rec["kwargs"].items()}
    return dt.Case(rec["op"], args, kwargs, [])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=12, help="samples per operator and dtype (default 12)")
    p.add_argument("--ops", help="only OpInfo entries whose name matches this regex")
    p.add_argument("--seed", type=int, default=20261126)
    p.add_argument("--cross", type=float, default=0.2, help="share of calls also sent as binary /v1 and /v2")
    p.add_argument("--server", default=os.environ.get("OD_SERVER", str(ROOT / "build" / "opdispatchd")))
    p.add_argument("--time-limit", type=float, help="wall-clock seconds for the replay")
    p.add_argument("--json-out")
    p.add_argument("--record-worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.record_worker:
        declared = set(json.loads(sys.stdin.readline()))
        record(declared, args.samples, args.ops, args.seed, sys.stdout)
        return 0

    import numpy as np
    sys.path.insert(0, str(ROOT / "tests" / "diff"))
    os.environ["OD_SERVER"] = args.server
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    import difftest as dt
    from conftest import Server, torch_env

    np.seterr(all="ignore")
    print(f"opinfo: {args.samples} samples per operator and dtype, seed {args.seed}", flush=True)
    start = time.monotonic()
    args.n = 0  # difftest's summary: no per-overload quota
    runner = dt.Runner(args, Server)
    schemas, done, skipped = {}, Counter(), {}
    try:
        listing = runner.server.get("/v1/ops").json()["operators"]
        declared = sorted(ov["model"] for g in listing for ov in g["overloads"]
                          if ov["name"].startswith("aten::") and not dt.NONDETERMINISTIC.search(ov["model"]))
        rec_proc = subprocess.Popen([RECORDER_PYTHON, __file__, "--record-worker", "--samples", str(args.samples),
                                     "--seed", str(args.seed)] + (["--ops", args.ops] if args.ops else []),
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=torch_env())
        rec_proc.stdin.write(json.dumps(declared) + "\n")
        rec_proc.stdin.close()
        rng = random.Random(args.seed)
        deadline = start + args.time_limit if args.time_limit else float("inf")
        for line in rec_proc.stdout:
            if time.monotonic() > deadline:
                rec_proc.kill()
                break
            rec = json.loads(line)
            model = rec["op"]
            if model not in schemas:
                schemas[model] = dt.Schema(runner.server.get(f"/v1/ops/{model}").json())
            c = to_case(dt, rec, schemas[model])
            if c is None:
                skipped[model] = "a recorded call the schema does not bind"
                continue
            c.cross = rng.random() < args.cross
            t = {"outputs": rec["outputs"], **({"ref64": rec["ref64"]} if "ref64" in rec else {})}
            path, body = c.v1_request()
            text = json.dumps(body, separators=(",", ":"))
            reply = runner.post(path, text, {"Content-Type": "application/json"})
            done[model] += 1
            runner.judge(c, t, path, text, reply)
            if c.cross and reply[0] is not None:
                runner.cross_check(c, schemas[model], f"POST {path} {text}", reply)
        rec_proc.wait()
    finally:
        runner.close()
    ops = [schemas[m] for m in sorted(done)]
    rc = dt.summary(runner, args, ops, skipped, done, time.monotonic() - start)
    print(f"opinfo: {len(done)} of {len(declared)} declared overloads reached by PyTorch's samples", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
