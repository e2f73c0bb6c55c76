"""Scans, sorting and indexing against PyTorch 1.13 on the same machine, in one run.

For sort, topk, cumsum, gather and scatter_add at 1e6 float32 elements (one
line), and sort and cumsum along the last dim of a 1000x1000 matrix (many
lines): the server's own kernel time (POST /v1/bench, the median of
kernel_us over the iterations, inputs made on the server) against torch
(Debian's python3-torch 1.13 by default, OD_TORCH_PYTHON to choose; the same
thread count) timing the same operator on same-sized inputs, median of as
many calls. The ratio server / torch is printed per operator; the issue's
target is <= 1.5. With --device cuda both run on the GPU (torch
synchronises after each call; the server's kernel_us is its own
synchronised time).

Starts one opdispatchd (--enable-bench), stops it by PID; bounded by --iterations.
With --family ew, every per-element operator of ops.def instead (the
server's CPU kernel is od_cpu_ew), on rand float32 (int32 ones where float32
is refused), against torch.ops.aten's same overload; the issue's target there
is <= 1.0.

With --family conv, aten::convolution at ResNet-50's and MobileNet's float32
shapes, batch 8 (the server's kernel time against torch's; target <= 1.25,
i.e. at least 0.8x torch's speed).

Usage: ops_torch.py --opdispatchd PATH [--n 1000000] [--iterations 20] [--threads 2] [--device cpu|cuda]
                    [--family scan|ew|conv] [--ops SUBSTRING]
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import time

import numpy as np
import requests

TORCH_PYTHON = os.environ.get("OD_TORCH_PYTHON", "/usr/bin/python3")

TORCH_TIMER = r"""
import json, statistics, sys, time, torch
n, iters, threads, seed = map(int, sys.argv[1:5])
dev = sys.argv[5]
torch.set_num_threads(threads)
g = torch.Generator().manual_seed(seed)
x = torch.rand(n, generator=g).to(dev)
m = torch.rand(1000, 1000, generator=g).to(dev)
idx = torch.randint(0, n, (n,), generator=g).to(dev)
zeros = torch.zeros(n, device=dev)
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
ew = json.loads(sys.stdin.read() or "null")
def arg(a):
    if isinstance(a, dict) and "shape" in a:  # --family conv: a tensor of its own shape
        return torch.rand(a["shape"], generator=g).to(dev)
    if isinstance(a, dict):
        return (torch.rand(n, generator=g) if a["dtype"] == "float32" else torch.ones(n, dtype=torch.int32)).to(dev)
    return a
def aten(name):
    base, _, ov = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")
cases = {name: (lambda f=aten(name.split(" ")[0]), a=[arg(x) for x in args]: f(*a)) for name, args in ew} if ew else {
    "sort": lambda: torch.ops.aten.sort(x, -1, False),
    "topk": lambda: torch.ops.aten.topk(x, 100),
    "cumsum": lambda: torch.ops.aten.cumsum(x, 0),
    "gather": lambda: torch.ops.aten.gather(x, 0, idx),
    "scatter_add": lambda: torch.ops.aten.scatter_add(zeros, 0, idx, x),
    "sort 1000x1000": lambda: torch.ops.aten.sort(m, -1, False),
    "cumsum 1000x1000": lambda: torch.ops.aten.cumsum(m, -1),
}
out = {}
for name, f in cases.items():
    f()
    sync()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        f()
        sync()
        ts.append((time.perf_counter() - t0) * 1e6)
    out[name] = statistics.median(ts)
print(json.dumps(out))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ew_cases(url, n, only):
    """Every operator whose CPU kernel is od_cpu_ew (ops.def's OD_EW1/EW2/EWP
    lines), with tensors of n float32 (int32 ones where float32 is refused)
    and the other arguments at their schema default, or 1 / 0.5 / False."""
    names = [o["name"].removeprefix("aten::") for g in requests.get(url + "/v1/ops").json()["operators"]
             for o in g["overloads"]]
    cases, ew = {}, []
    for name in names:
        if only not in name:
            continue
        d = requests.get(f"{url}/v1/ops/{name}").json()
        if not any(t["key"] == "CPU" and t["kernel"] == "od_cpu_ew" for t in d["table"]):
            continue
        for dt, gen in (("float32", "rand"), ("int32", "ones")):
            args, targs = [], []
            for x in d["arguments"]:
                if x["kwarg_only"] and x["has_default"]:
                    continue
                if x["type"] in ("Tensor", "Tensor?"):
                    args.append({"generate": gen, "shape": [n], "dtype": dt})
                    targs.append({"dtype": dt})
                    continue
                v = x["default"] if x["has_default"] else (
                    1 if x["type"] in ("int", "SymInt") else False if x["type"] == "bool"
                    else (3 if dt == "int32" else 0.5))
                args.append(v)
                targs.append(v)
            probe = [{"dtype": dt, "shape": [4], "data": [1] * 4} if isinstance(v, dict) else v for v in args]
            if requests.post(f"{url}/v1/ops/{name}", json={"args": probe}).status_code == 200:
                key = name if dt == "float32" else f"{name} int32"
                cases[key] = (name, args)
                ew.append((key, targs))
                break
    return cases, ew


def conv_cases():
    """aten::convolution in float32 at batch 8: ResNet-50's stem (7x7 stride 2
    on 3x224x224), a 3x3 on 64x56x56, a 1x1 256->64 on 56x56 (no columns),
    a 3x3 stride 2 on 128x56x56, and MobileNet's depthwise 3x3 (direct
    kernel) on 32x112x112 and 144x56x56 (stride 2)."""
    shapes = {"conv 7x7/2 3->64 224": ([8, 3, 224, 224], [64, 3, 7, 7], 2, 3, 1),
              "conv 3x3 64->64 56": ([8, 64, 56, 56], [64, 64, 3, 3], 1, 1, 1),
              "conv 1x1 256->64 56": ([8, 256, 56, 56], [64, 256, 1, 1], 1, 0, 1),
              "conv 3x3/2 128->128 56": ([8, 128, 56, 56], [128, 128, 3, 3], 2, 1, 1),
              "conv dw 3x3 32 112": ([8, 32, 112, 112], [32, 1, 3, 3], 1, 1, 32),
              "conv dw 3x3/2 144 56": ([8, 144, 56, 56], [144, 1, 3, 3], 2, 1, 144)}
    cases, ew = {}, []
    for name, (x, w, st, pd, g) in shapes.items():
        rest = [None, [st, st], [pd, pd], [1, 1], False, [0, 0], g]
        cases[name] = ("convolution", [{"generate": "rand", "shape": x, "dtype": "float32"},
                                       {"generate": "rand", "shape": w, "dtype": "float32"}] + rest)
        ew.append((f"convolution {name}", [{"shape": x}, {"shape": w}] + rest))
    return cases, ew


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--opdispatchd", required=True)
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=20261126)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--family", default="scan", choices=("scan", "ew", "conv"),
                   help="scan: sorting, scans and indexing (target <= 1.5); ew: every per-element "
                        "operator of ops.def (its CPU kernel is od_cpu_ew; target <= 1.0); conv: "
                        "aten::convolution at ResNet-50's and MobileNet's shapes, batch 8 (target <= 1.25, "
                        "depthwise <= 1.0)")
    p.add_argument("--ops", default="", help="ew: only operators whose name contains this")
    a = p.parse_args()

    rng = np.random.default_rng(a.seed)
    idx = {"dtype": "int64", "shape": [a.n], "data": rng.integers(0, a.n, a.n).tolist()}
    gen = {"generate": "rand", "shape": [a.n], "dtype": "float32"}
    zeros = {"generate": "zeros", "shape": [a.n], "dtype": "float32"}
    mat = {"generate": "rand", "shape": [1000, 1000], "dtype": "float32"}
    cases = {
        "sort": ("sort", [gen, -1, False]),
        "topk": ("topk", [gen, 100]),
        "cumsum": ("cumsum", [gen, 0]),
        "gather": ("gather", [gen, 0, idx]),
        "scatter_add": ("scatter_add", [zeros, 0, idx, gen]),
        "sort 1000x1000": ("sort", [mat, -1, False]),
        "cumsum 1000x1000": ("cumsum", [mat, -1]),
    }
    port = free_port()
    srv = subprocess.Popen([a.opdispatchd, "--port", str(port), "--enable-bench"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                if requests.get(url + "/v2/health/ready", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.1)
        ew = None
        if a.family == "ew":
            cases, ew = ew_cases(url, a.n, a.ops)
        if a.family == "conv":
            cases, ew = conv_cases()
        target = 1.0 if a.family == "ew" else 1.25 if a.family == "conv" else 1.5
        torch_us = json.loads(subprocess.run([TORCH_PYTHON, "-c", TORCH_TIMER, str(a.n), str(a.iterations),
                                              str(a.threads), str(a.seed), a.device], input=json.dumps(ew),
                                             capture_output=True, text=True, check=True, timeout=1800).stdout)
        print(f"{a.n} float32 elements on {a.device}, {a.threads} threads, median of {a.iterations} calls each; "
              f"torch {TORCH_PYTHON}")
        print(f"{'operator':<34} {'server us':>10} {'torch us':>10} {'ratio':>7}  target <= {target}")
        worst, missed = 0.0, 0
        for name, (op, args) in cases.items():
            r = requests.post(url + "/v1/bench", json={"op": op, "args": args, "device": a.device, "iterations": a.iterations,
                                                        "warmup": 1}, timeout=600)
            r.raise_for_status()
            us = r.json()["kernel_us"]["median"]
            tkey = name if name in torch_us else f"{op} {name}"
            ratio = us / torch_us[tkey]
            worst = max(worst, ratio)
            missed += ratio > target
            print(f"{name:<34} {us:>10.0f} {torch_us[tkey]:>10.0f} {ratio:>7.2f}  {'ok' if ratio <= target else 'MISSED'}")
        print(f"worst ratio {worst:.2f}; {missed} of {len(cases)} above {target}")
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=30)


if __name__ == "__main__":
    main()
