#!/usr/bin/env python3
"""server_cuda.py — the real server end to end on device "cuda", judged by the
same server on device "cpu" (make test-gpu; needs numpy only).

Three parts, each against one opdispatchd started here:

  diff   every deterministic aten overload the server declares, called with
         the differential tester's generated arguments (tests/diff/difftest.py:
         all dtypes, ranks 0-4, empty and 0-dim tensors, broadcasting,
         non-contiguous views through /v1/run, special values), once with
         "device": "cpu" and once with "device": "cuda". The CPU kernels are
         PyTorch-exact (make test proves it), so they are the reference:
         same status, same dtype and shape, integers and bools equal, floats
         within a few ulps (CUDA's libm is not ATen's CPU SLEEF) plus an
         accumulation allowance for reductions, NaN/Inf where the CPU has them.
  e2e    JSON and binary transports, stored tensors on the GPU, outputs
         reported on cuda, autograd through a CUDA graph.
  bench  (--bench) HTTP latency of a tiny add and time of a 64 MiB binary relu,
         device cuda against device cpu in the same server.

Exit status 0 when every check holds; the report lists each disagreement
class with one request to replay it. Without a CUDA device it says so and
exits 0 (the suite's skip)."""

import argparse
import json
import math
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "diff"))
sys.path.insert(0, str(ROOT / "clients" / "python"))
import difftest as dt  # noqa: E402
import opdispatch  # noqa: E402

SAN_RE = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|SUMMARY: \w+Sanitizer")
# CUDA's libm (and its fused multiply-adds) against ATen's CPU math: a few ulps.
ULPS = 8
# Functions with roots inside their domain (lgamma at 1 and 2): near a root
# CUDA's libm is accurate on the scale of 1, not of the tiny result. gelu is
# x * 0.5 * (1 + erf(x / sqrt 2)) in ATen on both devices: for x < 0 the sum
# cancels, so one ulp of erf is many ulps of the result; log_softmax is
# x - max - log(sum), which cancels where x is near the max.
CANCELLING = re.compile(r"^(lgamma|digamma|polygamma|mvlgamma|gelu|_?log_softmax)")
# ATen's CPU kernels that refuse float16/bfloat16 where its CUDA kernels take
# them (prod: "prod_cpu" not implemented for 'Half'): the CPU refusal is torch's.
CPU_ONLY_REFUSAL = re.compile(r'"\w+_cpu" not implemented for \'(Half|BFloat16)\'')
EPS = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


class Server:
    def __init__(self, binary, *args):
        self.out = tempfile.NamedTemporaryFile(prefix="odgpu-", suffix=".out", delete=False)
        self.err = tempfile.NamedTemporaryFile(prefix="odgpu-", suffix=".err", delete=False)
        env = dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
        self.proc = subprocess.Popen([binary, "--host", "127.0.0.1", "--port", "0", *args],
                                     stdout=self.out, stderr=self.err, env=env)
        deadline = time.time() + 120
        self.url = None
        while time.time() < deadline and not self.url:
            m = re.search(r"listening on (http://\S+?)/?\s", pathlib.Path(self.out.name).read_text())
            if m:
                self.url = m.group(1)
            elif self.proc.poll() is not None:
                raise SystemExit(f"opdispatchd exited with {self.proc.returncode}: {self.stderr()}")
            else:
                time.sleep(0.05)
        if not self.url:
            self.proc.kill()
            raise SystemExit("opdispatchd did not start: " + self.stderr())
        self.host, self.port = self.url.split("//")[1].split(":")
        import http.client
        self.conn = http.client.HTTPConnection(self.host, int(self.port), timeout=120)

    def stderr(self):
        return pathlib.Path(self.err.name).read_text(errors="replace")

    def request(self, method, path, body=None):
        """(status, JSON body or None); reconnects once if the connection dropped."""
        import http.client
        data = None if body is None else json.dumps(body, separators=(",", ":"))
        hdrs = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (0, 1):
            try:
                self.conn.request(method, path, body=data, headers=hdrs)
                r = self.conn.getresponse()
                raw = r.read()
                break
            except (http.client.HTTPException, OSError):
                self.conn.close()
                if attempt or self.proc.poll() is not None:
                    return None, None
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, None

    def stop(self):
        """SIGTERM; the server must exit 0 without a sanitizer report."""
        self.conn.close()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = "hung"
        problems = []
        if rc != 0:
            out = pathlib.Path(self.out.name).read_text(errors="replace")
            problems.append(f"server exit status {rc}; its output ends:\n{out[-2500:]}\n{self.stderr()[-2500:]}")
        m = SAN_RE.search(self.stderr())
        if m:
            problems.append("sanitizer report: " + self.stderr()[max(0, m.start() - 200):m.start() + 2000])
        return problems


# ---- diff: CUDA against CPU -----------------------------------------------------

def load_ops(server, pattern):
    ops = []
    _, listing = server.request("GET", "/v1/ops")
    for group in listing["operators"]:
        for ov in group["overloads"]:
            model = ov["model"]
            if pattern and not re.search(pattern, model):
                continue
            if not ov["name"].startswith("aten::") or dt.NONDETERMINISTIC.search(model):
                continue
            _, meta = server.request("GET", f"/v1/ops/{model}")
            schema = dt.Schema(meta)
            if all(dt.supported(a.type) for a in schema.args):
                ops.append(schema)
    return ops


def values(o):
    return dt.to_array(o["dtype"], o["data"])


def float_bad(dtype, g, c, scale):
    """Where CUDA's g and the CPU's c differ by more than a few ulps of c (or
    of the accumulation scale): NaN against NaN and equal infinities agree,
    and so do zeros of either sign (CUDA's fused arithmetic may flip one)."""
    eps = EPS[dtype]
    same = (g == c) | (np.isnan(g) & np.isnan(c))
    close = np.isfinite(g) & np.isfinite(c) & (np.abs(g - c) <= ULPS * eps * (np.abs(c) + scale))
    return ~(same | close)


def accumulation_scale(case, shape):
    """For an output smaller than an input (a reduction, a product): the
    inputs' largest finite magnitude times sqrt(n), the scale of a
    reordered sum's rounding error; 0 for elementwise outputs."""
    n = max((math.prod(t.shape) for t in case.tensors()), default=0)
    k = max((t.shape[-1] for t in case.tensors() if t.shape), default=1)
    if math.prod(shape) >= n and k <= 1:
        return 0.0
    m = max((float(np.abs(t.base.astype(np.float64)[np.isfinite(t.base.astype(np.float64))]).max(initial=0))
             for t in case.tensors()), default=0.0)
    return m * m * math.sqrt(max(n, 1)) if m > 1 else m * math.sqrt(max(n, 1))


def dispatched(head):
    """The dispatch record of a call's response (a program's last step)."""
    d = (head or {}).get("dispatch") or {}
    return ((d[-1] if d else {}).get("record") or {}) if isinstance(d, list) else d


def torch_device_difference(case, dtype, g, c):
    """Where PyTorch's own CPU and CUDA kernels part, the CPU kernels here
    following its CPU and the CUDA ones its CUDA: the reason, else None.
    g, c: the disagreeing elements (CUDA, CPU)."""
    big = float(np.finfo(np.float32).max) / 2 if dtype == "float32" else None
    # ATen's vectorized CPU math (Sleef) overflows a little below the dtype's
    # largest value (sinh(89f) is inf there), CUDA's libm gives the finite value
    if big and np.isinf(c).all() and np.isfinite(g).all() and (np.abs(g) >= big).all():
        return "PyTorch's CPU overflows first (CUDA finite, CPU inf)"
    # torch's CUDA pow rounds a Scalar exponent to the tensor's dtype; its CPU
    # kernel keeps it a double (pow(x, -2147483649) is odd on the CPU only)
    if case.op.startswith("pow") and dtype != "float64":
        for _, ty, v in case.all_args():
            if ty.rstrip("?") == "Scalar" and isinstance(v, (int, float)) and not isinstance(v, bool) \
                    and math.isfinite(v) and float(np.float32(v)) != v:
                return "PyTorch's CUDA pow rounds the Scalar exponent to float"
    return None


# The sort family where the order of equal keys is the kernel's choice:
# torch's CPU kernels (introsort, partial_sort, quick-select) and its CUDA
# ones (a stable radix sort) part there, and so do ours.
SORT_FAMILY = re.compile(r"^(sort|topk|kthvalue)(\.|$)")


def same_values(a, b):
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return bool(((a == b) | (np.isnan(a) & np.isnan(b))).all())
    return bool((a == b).all())


def sort_family_check(case, oc, og):
    """sort (stable not True), topk, kthvalue: the CPU's values (compared
    sorted along dim for topk(sorted=False)), indices that point at them in
    self, a full sort's indices a permutation. None when so, else why not."""
    a = {name: v for name, _, v in case.all_args()}
    name = case.op.split(".")[0].rstrip("_")
    if name == "sort" and a.get("stable") is True:
        return "exact"
    x = np.asarray(a["self"].logical())
    gv, cv, gi = (values(o).reshape(o["shape"]) for o in (og[0], oc[0], og[1]))
    if x.ndim == 0:
        return None if same_values(gv, cv) and (gi == 0).all() else "0-dim result"
    dim = a.get("dim", -1) % x.ndim
    if name == "kthvalue" and not a.get("keepdim", False):
        gv, cv, gi = (np.expand_dims(t, dim) for t in (gv, cv, gi))
    if name == "topk" and a.get("sorted", True) is False:
        ok = same_values(np.sort(gv, axis=dim), np.sort(cv, axis=dim))
    else:
        ok = same_values(gv, cv)
    if not ok:
        return "values differ from the CPU's"
    if gi.size and (gi.min() < 0 or gi.max() >= x.shape[dim]):
        return "an index out of range"
    if not same_values(np.take_along_axis(x, gi.astype(np.int64), axis=dim).astype(gv.dtype), gv):
        return "indices that do not point at the values"
    if name == "sort" and not (np.sort(gi, axis=dim) == np.arange(x.shape[dim]).reshape(
            [-1 if k == dim else 1 for k in range(x.ndim)])).all():
        return "indices that are not a permutation"
    return None


def unrepresentable_cast(case):
    """Whether a float input holds a non-finite value that an integer result
    may have been cast from (sum(x, dtype=int16) of an inf): x86 gives the
    integer minimum, CUDA saturates."""
    for t in case.tensors():
        b = np.asarray(t.base)
        if b.dtype.kind == "f" and not np.isfinite(b).all():
            return True
    return False


def judge(case, device, st_c, b_c, st_g, b_g):
    """None, or (class, detail, hard) for a disagreement of cuda with cpu."""
    msg = lambda b: (b or {}).get("error", {}).get("message", "") if isinstance(b, dict) else ""
    if st_g is None:
        return "server died on cuda", "", True
    if st_g >= 500 and st_g not in (501, 507):
        return f"cuda {st_g}", msg(b_g), True
    if st_c != 200 and st_g != 200:
        return None
    if st_c == 200 and st_g != 200:
        if st_g == 501 or "CUDA" in msg(b_g):
            return "no CUDA kernel", msg(b_g), False
        if st_g == 422 and "not implemented for" in msg(b_g):
            return "torch's CUDA build lacks it too", msg(b_g), False
        if st_g == 422 and "same device" in msg(b_g) and any(
                ty.rstrip("?") == "Tensor" and not isinstance(v, dt.Tens) and v is not None
                for _, ty, v in case.all_args()):
            # a number where a Tensor is declared is a CPU 0-dim tensor, which
            # torch's CUDA kernels that take no CPU scalar (masked_fill's mask) refuse
            return "a wrapped number stays on the CPU, as torch's", msg(b_g), False
        if st_g == 507:
            return "cuda 507", msg(b_g), False
        return f"cpu 200, cuda {st_g}", msg(b_g), True
    if st_c != 200:
        if st_c == 422 and CPU_ONLY_REFUSAL.search(msg(b_c)):
            return "torch's CPU build refuses it, its CUDA build has it", msg(b_c), False
        return f"cpu {st_c}, cuda 200", msg(b_c), True
    oc, og = b_c["outputs"], b_g["outputs"]
    ran_on = dispatched(b_g).get("device", "")
    if ran_on.split(":")[0] != device.split(":")[0]:
        return "ran on", f"the dispatch record says {ran_on!r}", True
    if len(oc) != len(og):
        return "output count", f"{len(og)} vs {len(oc)}", True
    for i, (c, g) in enumerate(zip(oc, og)):
        if c.get("dtype") != g.get("dtype") or c.get("shape") != g.get("shape"):
            return "dtype/shape", f"output {i}: cuda {g.get('dtype')}{g.get('shape')}, cpu {c.get('dtype')}{c.get('shape')}", True
    if SORT_FAMILY.match(case.op) and all("data" in o for o in oc + og):
        why = sort_family_check(case, oc, og)
        if why != "exact":
            return None if why is None else ("sort family", why, True)
    for i, (c, g) in enumerate(zip(oc, og)):
        if "data" not in c or "data" not in g or dt.UNDEFINED_VALUES.search(case.op):
            continue
        vc, vg = values(c), values(g)
        if c["dtype"] in dt.FLOATS:
            scale = accumulation_scale(case, c["shape"])
            if CANCELLING.match(case.op):
                scale = max(scale, 1.0)
            bad = float_bad(c["dtype"], vg, vc, scale)
        else:
            bad = vg != vc
            if bad.any() and unrepresentable_cast(case):
                return ("float to integer of a non-finite value (undefined in C++; ATen's CPU and CUDA part)",
                        f"output {i}", False)
        if bad.any() and c["dtype"] in dt.FLOATS:
            why = torch_device_difference(case, c["dtype"], vg[bad], vc[bad])
            if why:
                return why, f"output {i}: {int(bad.sum())} of {bad.size} elements", False
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            kind = dt.mismatch_kind(vg, vc, bad) if c["dtype"] in dt.FLOATS else "value mismatch"
            return (f"{kind} ({dt.dtype_group(c['dtype'])})",
                    f"output {i}: {int(bad.sum())} of {bad.size} differ; element {k}: cuda {vg[k]!r}, cpu {vc[k]!r}",
                    True)
    return None


def run_diff(server, args, report):
    ops = load_ops(server, args.ops)
    rng = random.Random(args.seed)
    gen = dt.Gen(rng)
    done, counts = Counter(), Counter()
    classes = defaultdict(lambda: {"n": 0, "hard": False, "example": None})
    deadline = time.monotonic() + args.diff_s
    while time.monotonic() < deadline:
        pending = [s for s in ops if done[s.model] < args.n]
        if not pending:
            break
        for s in pending:
            if time.monotonic() > deadline:
                break
            case = gen.case(s)
            path, body = case.v1_request()
            body["device"] = "cpu"
            st_c, b_c = server.request("POST", path, body)
            body["device"] = args.device
            st_g, b_g = server.request("POST", path, body)
            done[s.model] += 1
            answer = {"outputs": b_c["outputs"]} if st_c == 200 and b_c else {
                "error": ((b_c or {}).get("error") or {}).get("message", f"status {st_c}")}
            gen.learn(case, answer)
            counts["calls"] += 1
            counts["cpu ok"] += st_c == 200
            v = judge(case, args.device, st_c, b_c, st_g, b_g)
            if v is None:
                counts["agree"] += 1
                continue
            kind, detail, hard = v
            counts["hard" if hard else "soft"] += 1
            cl = classes[f"{s.model}: {kind}"]
            cl["n"] += 1
            cl["hard"] |= hard
            if cl["example"] is None or len(json.dumps(body)) < len(cl["example"]["request"]):
                cl["example"] = {"request": f"POST {path} " + json.dumps(body, separators=(",", ":"))[:1500],
                                 "detail": detail[:400]}
    report["diff"] = {"overloads": len(ops), "seed": args.seed, "counts": dict(counts),
                      "classes": {k: v for k, v in sorted(classes.items())}}
    print(f"diff: {len(ops)} overloads, {counts['calls']} call pairs (cpu ok {counts['cpu ok']}), "
          f"{counts['agree']} agree, {counts['hard']} disagree, {counts['soft']} without a CUDA kernel/memory")
    hard = 0
    for k, cl in sorted(classes.items(), key=lambda kv: (not kv[1]["hard"], kv[0])):
        tag = "DISAGREE" if cl["hard"] else "note"
        hard += cl["hard"]
        print(f"  {tag} {k} x{cl['n']}: {cl['example']['detail']}")
        if cl["hard"]:
            print(f"      {cl['example']['request'][:600]}")
    return hard


# ---- e2e: transports, stored tensors, autograd ------------------------------------

def run_e2e(server, device, report):
    failures = []
    rng = np.random.default_rng(7)

    def check(name, got, want, rtol=1e-5, atol=1e-6):
        got, want = np.asarray(got), np.asarray(want)
        ok = got.shape == want.shape and got.dtype == want.dtype and np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        if not ok:
            failures.append(f"{name}: got {got.dtype}{got.shape} {got.ravel()[:4]}, want {want.dtype}{want.shape} {want.ravel()[:4]}")

    a = rng.standard_normal((37, 129)).astype(np.float32)
    b = rng.standard_normal((129, 65)).astype(np.float32)
    v = rng.standard_normal(129).astype(np.float32)
    for transport in ("json", "binary"):
        with opdispatch.Client(server.url, transport=transport) as c:
            for op, xs, kw in [("add", (a, v), {}), ("mm", (a, b), {}), ("relu", (a,), {}),
                               ("softmax", (a, -1), {}), ("sum", (a,), {}), ("exp", (a[:, ::2],), {}),
                               ("mul", (a.astype(np.float64), np.float64(3)), {}),
                               ("cat", ([a, a],), {"dim": 1}), ("eq", (a, a.T.copy().T), {})]:
                want = c.call(op, *xs, device="cpu", **kw)
                got = c.call(op, *xs, device=device, **kw)
                ran_on = dispatched(c.last_response).get("device", "")
                if not ran_on.startswith(device.split(":")[0]):
                    failures.append(f"{transport} {op}: ran on {ran_on!r}")
                check(f"{transport} {op}", got, want, rtol=1e-4, atol=1e-4)
            # stored tensors live on the GPU; ops on them stay there until read
            x = c.tensor(a, device=device)
            y = c.tensor(b, device=device)
            if not str(x.device).startswith(device.split(":")[0]):
                failures.append(f"{transport} stored tensor device {x.device!r}")
            z = c.call("mm", x, y)
            r = c.call("relu", z)
            check(f"{transport} stored mm+relu", r.numpy(), np.maximum(a.astype(np.float64) @ b, 0).astype(np.float32), 1e-4, 1e-4)
            # autograd through CUDA kernels: d/dx sum(x * x) = 2x
            g = c.tensor(v, device=device, requires_grad=True)
            s = c.call("sum", c.call("mul", g, g))
            s.backward()
            check(f"{transport} backward", g.grad.numpy(), 2 * v)
            for t in (x, y, z, r, g, s):
                t.free()
    report["e2e"] = {"failures": failures}
    print(f"e2e: {'ok' if not failures else str(len(failures)) + ' failures'}")
    for f in failures:
        print("  FAIL " + f)
    return len(failures)


# ---- bench: HTTP on cuda against cpu -------------------------------------------

def run_bench(server, device, report):
    res = {}
    tiny = np.arange(16, dtype=np.float32)
    big = np.random.default_rng(1).standard_normal(16 << 20).astype(np.float32)  # 64 MiB
    for dev in ("cpu", device):
        with opdispatch.Client(server.url, transport="json") as c:
            for _ in range(200):
                c.call("add", tiny, tiny, device=dev)
            lat, disp = [], []
            for _ in range(2000):
                t0 = time.perf_counter()
                c.call("add", tiny, tiny, device=dev)
                lat.append(time.perf_counter() - t0)
                disp.append(dispatched(c.last_response).get("timing_us", {}).get("dispatch", float("nan")))
        with opdispatch.Client(server.url, transport="binary") as c:
            c.call("relu", big, device=dev)
            big_t, big_d = [], []
            for _ in range(7):
                t0 = time.perf_counter()
                out = c.call("relu", big, device=dev)
                big_t.append(time.perf_counter() - t0)
                big_d.append(dispatched(c.last_response).get("timing_us", {}).get("dispatch", float("nan")))
            assert out.shape == big.shape
        res[dev] = {"tiny_add_us_p50": 1e6 * float(np.median(lat)), "tiny_add_us_p99": 1e6 * float(np.quantile(lat, 0.99)),
                    "tiny_add_dispatch_us_p50": float(np.median(disp)),
                    "relu_64MiB_ms_p50": 1e3 * float(np.median(big_t)),
                    "relu_64MiB_dispatch_ms_p50": float(np.median(big_d)) / 1e3}
    ratio_tiny = res[device]["tiny_add_us_p50"] / res["cpu"]["tiny_add_us_p50"]
    ratio_big = res[device]["relu_64MiB_ms_p50"] / res["cpu"]["relu_64MiB_ms_p50"]
    res["ratios"] = {"tiny_add_cuda_over_cpu": ratio_tiny, "relu_64MiB_cuda_over_cpu": ratio_big}
    report["bench"] = res
    print("bench (HTTP, one keep-alive connection, Python client; medians):")
    for dev in dict.fromkeys(("cpu", device)):
        r = res[dev]
        print(f"  {dev:5s} tiny add {r['tiny_add_us_p50']:8.1f} us (p99 {r['tiny_add_us_p99']:.1f}, dispatch {r['tiny_add_dispatch_us_p50']:.1f} us)"
              f"   relu 64 MiB binary {r['relu_64MiB_ms_p50']:8.2f} ms (dispatch {r['relu_64MiB_dispatch_ms_p50']:.2f} ms)")
    print(f"  cuda/cpu: tiny add {ratio_tiny:.2f}x (target <= 2x), relu 64 MiB {ratio_big:.2f}x")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default=str(ROOT / "build" / "opdispatchd"))
    p.add_argument("--device", default="cuda", help="the device under test (cpu to self-check on a CPU machine)")
    p.add_argument("--n", type=int, default=40, help="call pairs per overload")
    p.add_argument("--seed", type=int, default=20261126)
    p.add_argument("--ops", help="only overloads matching this regex")
    p.add_argument("--diff-s", type=float, default=240, help="time limit of the diff part")
    p.add_argument("--no-diff", action="store_true")
    p.add_argument("--bench", action="store_true")
    p.add_argument("--json-out")
    args = p.parse_args()
    np.seterr(all="ignore")
    server = Server(args.server, "--no-access-log", "--max-output-bytes", str(1 << 20))
    report, failures = {}, 0
    try:
        _, devs = server.request("GET", "/v1/devices")
        if args.device.startswith("cuda") and not devs["cuda"]["available"]:
            print(f"server_cuda: SKIPPED: {devs['cuda']['reason']}")
            return 0
        report["devices"] = devs
        print("devices:", json.dumps(devs.get("cuda", {}).get("devices")))
        if not args.no_diff:
            failures += run_diff(server, args, report)
        failures += run_e2e(server, args.device, report)
        if args.bench:
            # a fresh server, as a user meets it, without a 1 MiB output cap
            for pr in server.stop():
                print("server: " + pr[:6000])
                failures += 1
            server = Server(args.server, "--no-access-log")
            run_bench(server, args.device, report)
    finally:
        problems = server.stop()
        for pr in problems:
            print("server: " + pr[:6000])
        failures += len(problems)
        if args.json_out:
            pathlib.Path(args.json_out).write_text(json.dumps(report, indent=1, default=str))
    print(f"server_cuda: {'FAILED' if failures else 'passed'} ({failures} problems)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
