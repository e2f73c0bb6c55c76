"""Cost curves (issue 14, item 6): time per call and achieved GB/s (GFLOP/s
for mm) against size, from one element to 10^8 (mm to 4096^2), for add,
relu, softmax, sum and mm, on three paths measured in one run:

- C API: the dispatcher call itself (od_call: dispatch, allocation, kernel),
  timed inside the server by POST /v1/bench on inputs made there (median);
- HTTP binary and HTTP JSON: one connection of the C client's load
  generator (`opdispatch load`, keep-alive, p50 of the round trip), the
  inputs sent each call.

The ceilings drawn on the same charts, measured in the same run: memcpy
bandwidth and sgemm GFLOP/s (the server's own ceilings, a 64 MiB clone and
a 1024^2 mm, from /v1/bench), and the per-call time of the fixed-reply
libmicrohttpd server (bench/http/fixed_server.c) under the same load
generator, the floor of any HTTP call. Each path's "overhead-bound region"
ends at the first size whose time exceeds twice its smallest size's.

Writes bench/curves/<op>.png (gnuplot) and bench/curves/curves.csv, prints
a table; starts opdispatchd and the fixed server on 127.0.0.1 and stops
them by PID. Bounded: each point runs a fixed count of calls.

Usage: curves.py --opdispatchd PATH --cli PATH --fixed PATH [--out DIR] [--quick]
"""
import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import http.client
import urllib.request

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "http"))
from run import free_port, start, stop  # noqa: E402  (bench/http/run.py's process helpers)

EW = [1, 10, 100, 1000, 10**4, 10**5, 10**6, 10**7, 10**8]
MM = [1, 4, 16, 64, 256, 1024, 4096]
JSON_MAX = {"mm": 1024}  # JSON text of 2 x 4096^2 floats is ~300 MB: seconds per call
JSON_MAX_EW = 10**7

# op: (args for `opdispatch load/bench` with {n}, sizes, bytes moved or flops per call, unit)
OPS = {
    "add.Tensor": (["self=rand:{n}:float32", "other=rand:{n}:float32"], EW, lambda n: 12 * n, "GB/s"),
    "relu": (["self=rand:{n}:float32"], EW, lambda n: 8 * n, "GB/s"),
    "softmax.int": (["self=rand:{n}:float32", "dim=-1"], EW, lambda n: 8 * n, "GB/s"),
    "sum": (["self=rand:{n}:float32"], EW, lambda n: 4 * n, "GB/s"),
    "mm": (["self=rand:{n}x{n}:float32", "mat2=rand:{n}x{n}:float32"], MM, lambda n: 2 * n**3, "GFLOP/s"),
}


def count_for(n, op=None):
    """Calls per point: enough for a stable median, about a second at most
    (an n x n mm costs n^3 multiply-adds, not n elements)."""
    cost = n ** 3 / 50 if op == "mm" else n
    return max(3, min(2000, int(2e7 / max(cost, 1))))


def spec(template, n):
    return template.replace("{n}", str(n))


def bench_point(url, op, args, n):
    """(median us, ceilings) of /v1/bench: the dispatcher call on inputs made on the server."""
    def value(a):
        name, _, v = a.partition("=")
        if not v.startswith("rand:"):
            return name, json.loads(v)
        _, shape, dtype = v.split(":")
        return name, {"generate": "rand", "shape": [int(x) for x in shape.split("x")], "dtype": dtype}
    kwargs = dict(value(spec(a, n)) for a in args)
    body = {"op": op, "kwargs": kwargs, "iterations": min(count_for(n, op), 200), "warmup": 2}
    req = urllib.request.Request(url + "/v1/bench", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1800) as r:
        res = json.load(r)
    return res["kernel_us"]["median"], res.get("ceiling", {})


def load_point(cli, url, op, args, n, json_out):
    """p50 round trip (us) of `opdispatch load` on one connection."""
    cmd = [cli, "--url", url, "load", op, "--connections", "1", "--count", str(count_for(n, op)),
           "--warmup", "0", "--format", "csv"]
    for a in args:
        cmd += ["--arg", spec(a, n)]
    if json_out:
        cmd.append("--json-body")  # JSON outputs (inputs stay binary)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip()[-400:]}")
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    if not rows or int(rows[-1]["errors"]):
        raise RuntimeError(f"{' '.join(cmd)}: {out.stdout[-400:]}")
    return float(rows[-1]["p50_ms"]) * 1e3


def json_body(op, args, n, rng):
    """A /v1 call's JSON body: every tensor as JSON numbers (float32 values printed shortest)."""
    kwargs = {}
    for a in args:
        name, _, v = spec(a, n).partition("=")
        if not v.startswith("rand:"):
            kwargs[name] = json.loads(v)
            continue
        shape = [int(x) for x in v.split(":")[1].split("x")]
        data = rng.random(int(np.prod(shape)), dtype=np.float32)
        kwargs[name] = {"dtype": "float32", "shape": shape, "data": data.tolist()}
    return json.dumps({"kwargs": kwargs}).encode()


def json_point(url, op, args, n, rng):
    """Median round trip (us) of a JSON call both ways, one keep-alive connection
    of Python's http.client (its own floor is measured on the fixed server)."""
    host, port = url.split("//")[1].split(":")
    body = json_body(op, args, n, rng) if op else b"{}"
    path = f"/v1/ops/{op}" if op else "/"
    conn = http.client.HTTPConnection(host, int(port), timeout=600)
    times = []
    try:
        for i in range(count_for(n, op) + 1):
            t0 = time.perf_counter()
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            if r.status != 200:
                raise RuntimeError(f"{op} n={n}: {r.status} {data[:200]!r}")
            if i:  # the first call opens the connection
                times.append((time.perf_counter() - t0) * 1e6)
    finally:
        conn.close()
    return float(np.median(times))


def overhead_edge(points):
    """The first size whose time is over twice the smallest size's, or None."""
    if not points:
        return None
    base = points[0][1]
    for n, us in points:
        if us > 2 * base:
            return n
    return None


def plot(out_png, op, unit, rows, ceil, floor_us, py_floor_us, work):
    tmp = tempfile.mkdtemp()
    gp, dat = os.path.join(tmp, "plot.gp"), os.path.join(tmp, "plot.dat")
    paths = ["C API", "HTTP binary", "HTTP JSON"]
    with open(dat, "w") as f:
        for i, p in enumerate(paths):
            f.write(f"# {p}\n")
            for n, us in rows[p]:
                f.write(f"{n} {us} {work(n) / (us * 1e-6) / 1e9}\n")
            f.write("\n\n")
    xl = "n (an n x n mm)" if op == "mm" else "elements"
    ceil_label = "sgemm" if unit == "GFLOP/s" else "memcpy"
    with open(gp, "w") as f:
        f.write(f"set terminal pngcairo size 1200,480\nset output '{out_png}'\nset multiplot layout 1,2\n"
                f"set logscale xy\nset grid\nset key top left\nset xlabel '{xl}'\n"
                f"set title '{op}: time per call'\nset ylabel 'us'\n"
                f"plot '{dat}' index 0 u 1:2 w lp t 'C API (od\\_call)', '' index 1 u 1:2 w lp t 'HTTP binary', "
                f"'' index 2 u 1:2 w lp t 'HTTP JSON (Python client)', {floor_us} w l dt 2 t 'fixed-reply server (C client)', "
                f"{py_floor_us} w l dt 4 t 'fixed-reply server (Python client)', "
                f"x*{work(1) if op != 'mm' else 0}/{ceil} * 1e-3 w l dt 3 t '{ceil_label} bound'\n"
                f"set title '{op}: {unit}'\nset ylabel '{unit}'\nset key bottom right\n"
                f"plot '{dat}' index 0 u 1:3 w lp t 'C API (od\\_call)', '' index 1 u 1:3 w lp t 'HTTP binary', "
                f"'' index 2 u 1:3 w lp t 'HTTP JSON', {ceil} w l dt 3 t '{ceil_label} ({ceil:.0f} {unit})'\n"
                "unset multiplot\n")
    r = subprocess.run(["gnuplot", gp], capture_output=True, text=True)
    if r.returncode:
        print(f"gnuplot failed on {out_png}: {r.stderr[-300:]}", file=sys.stderr)
    shutil.rmtree(tmp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opdispatchd", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--fixed", required=True)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "curves"))
    ap.add_argument("--quick", action="store_true", help="sizes up to 1e6 (mm 256): a smoke run")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    procs = []
    try:
        port, fport = free_port(), free_port()
        procs.append(start([args.opdispatchd, "--host", "127.0.0.1", "--port", str(port), "--enable-bench",
                            "--no-access-log", "--default-device", "cpu", "--max-body-bytes", "2G",
                            "--max-output-bytes", "2G",
                            # mm 4096's five calls and its sgemm ceiling take minutes on a slow machine
                            "--request-timeout", "1800"], port))
        procs.append(start([args.fixed, str(fport)], fport))
        url, furl = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{fport}"
        floor_us = load_point(args.cli, furl, "relu", ["self=rand:1:float32"], 1, False)
        py_floor_us = json_point(furl, None, [], 1, None)
        rng = np.random.default_rng(0)
        table = []
        with open(os.path.join(args.out, "curves.csv"), "w", newline="") as cf:
            w = csv.writer(cf)
            w.writerow(["op", "path", "n", "us_per_call", "rate", "unit"])
            for op, (targs, sizes, work, unit) in OPS.items():
                if args.quick:
                    sizes = [n for n in sizes if n <= (256 if op == "mm" else 10**6)]
                rows = {"C API": [], "HTTP binary": [], "HTTP JSON": []}
                ceil = None
                for n in sizes:
                    us, ceilings = bench_point(url, op, targs, n)
                    rows["C API"].append((n, us))
                    rows["HTTP binary"].append((n, load_point(args.cli, url, op, targs, n, False)))
                    if n <= JSON_MAX.get(op, JSON_MAX_EW):
                        rows["HTTP JSON"].append((n, json_point(url, op, targs, n, rng)))
                    if ceilings:
                        ceil = ceilings.get("gflops" if unit == "GFLOP/s" else "gbps", ceil)
                    for path in rows:
                        if rows[path] and rows[path][-1][0] == n:
                            t = rows[path][-1][1]
                            w.writerow([op, path, n, f"{t:.3f}", f"{work(n) / (t * 1e-6) / 1e9:.3f}", unit])
                            print(f"{op:12s} {path:12s} n={n:<10d} {t:12.2f} us  "
                                  f"{work(n) / (t * 1e-6) / 1e9:9.3f} {unit}", flush=True)
                plot(os.path.join(args.out, op.split(".")[0] + ".png"), op, unit, rows, ceil or float("nan"),
                     floor_us, py_floor_us, work)
                table.append((op, unit, ceil, {p: overhead_edge(r) for p, r in rows.items()},
                              {p: max((work(n) / (t * 1e-6) / 1e9 for n, t in r), default=0) for p, r in rows.items()}))
        print(f"\nfixed-reply server: {floor_us:.1f} us per call with the C load generator (the binary path's "
              f"floor), {py_floor_us:.1f} us with Python's http.client (the JSON path's)")
        print(f"{'op':12s} {'ceiling':>18s}   overhead-bound up to (C API / binary / JSON)   best (C API / binary / JSON)")
        for op, unit, ceil, edge, best in table:
            e = " / ".join("-" if edge[p] is None else f"{edge[p]:g}" for p in edge)
            b = " / ".join(f"{best[p]:.1f}" for p in best)
            print(f"{op:12s} {ceil or 0:10.1f} {unit:7s}   {e:44s}   {b} {unit}")
    finally:
        for p in procs:
            stop(p)


if __name__ == "__main__":
    main()
