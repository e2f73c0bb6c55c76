"""HTTP benchmarks of opdispatchd against peers measured in the same run.

Starts, on 127.0.0.1 only, (1) a minimal libmicrohttpd server answering a
fixed body (the ceiling), (2) opdispatchd, (3) a FastAPI + numpy service with
the same JSON API, (4) MLServer (Seldon's Open Inference Protocol server) with
a numpy runtime serving add and mm on the same /v2 requests (mlserver_peer/,
one process, from .venv-mlserver), checks every scenario's answer once
against numpy, then drives each with wrk at 1, 16 and 64 connections, the
whole plan once per round (--rounds, 3), and prints requests/s, p50/p99
latency and payload MB/s beside the peers, and each ratio to a peer as the
median of the rounds' ratios, each taken within one round. Stops only the processes
it started, by PID. Bounded: DURATION seconds per point (15 at least for the
4M-float relu, whose requests take up to a second at 64 connections).

Usage: run.py --opdispatchd PATH --fixed PATH [--duration S] [--no-fastapi]
              [--mlserver PATH | --no-mlserver]
       run.py --opdispatchd PATH --baseline PATH [--duration S]

With --baseline (an opdispatchd built from an earlier commit), it instead
runs the tiny-call and 4M-float scenarios, interleaved, against three
servers in one run: the baseline, ours with --call-workers 0 (calls on the
HTTP threads, as before the call workers), and ours as shipped, and prints
each against the baseline: the cost of clearing reused memory and of the
hand-off to the call workers.
"""
import argparse
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MLSERVER_MODELS = os.path.join(HERE, "mlserver_peer")
DEFAULT_MLSERVER = os.path.join(HERE, "..", "..", ".venv-mlserver", "bin", "mlserver")
LUA = os.path.join(HERE, "post.lua")
CONNECTIONS = (1, 16, 64)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout}s")


def start(cmd, port, env=None, cwd=None, timeout=30.0):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd, start_new_session=True)
    try:
        wait_port(port, proc, timeout)
    except Exception:
        stop(proc)
        raise
    return proc


def start_mlserver(exe, tmpdir):
    """MLServer on a free HTTP port (gRPC on another; metrics off in
    settings.json), its .envs/.metrics litter in tmpdir; returns (proc, base)
    once both models answer ready."""
    hport, gport = free_port(), free_port()
    env = dict(os.environ, MLSERVER_HTTP_PORT=str(hport), MLSERVER_GRPC_PORT=str(gport))
    proc = start([exe, "start", MLSERVER_MODELS], hport, env=env, cwd=tmpdir, timeout=90.0)
    base = f"http://127.0.0.1:{hport}"
    end = time.time() + 60
    for model in ("add", "mm"):  # uvicorn may listen before the models load
        while True:
            try:
                with urllib.request.urlopen(f"{base}/v2/models/{model}/ready", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > end or proc.poll() is not None:
                stop(proc)
                raise RuntimeError(f"MLServer: model {model} not ready")
            time.sleep(0.1)
    return proc, base


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: uvicorn's workers too
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# ---- request bodies ----------------------------------------------------------

def json_tensor(a):
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.ravel().tolist()}


def json_call(*tensors, **extra):
    return json.dumps(dict({"args": [json_tensor(t) for t in tensors]}, **extra)).encode()


def binary_call(names, tensors):
    inputs = [{"name": n, "shape": list(t.shape), "datatype": "FP32",
               "parameters": {"binary_data_size": t.nbytes}} for n, t in zip(names, tensors)]
    header = json.dumps({"inputs": inputs, "parameters": {"binary_data_output": True}}).encode()
    return header + b"".join(t.astype("<f4").tobytes() for t in tensors), len(header)


def v2_json_call(names, tensors):
    """An Open Inference Protocol JSON body, data as numpy's tolist() of the
    float32 values (what a Python client sends)."""
    return json.dumps({"inputs": [{"name": n, "shape": list(t.shape), "datatype": "FP32",
                                   "data": t.ravel().tolist()}
                                  for n, t in zip(names, tensors)]}).encode()


def decode_binary_output(resp_body, header_len):
    header = json.loads(resp_body[:header_len])
    out = header["outputs"][0]
    data = np.frombuffer(resp_body[header_len:header_len + out["parameters"]["binary_data_size"]],
                         dtype="<f4")
    return data.reshape(out["shape"])


def post(url, body, headers):
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, dict(r.headers), r.read()


class Scenario:
    def __init__(self, name, path, body, ctype, ihcl=None, check=None, min_duration=0):
        self.name, self.path, self.body, self.ctype, self.ihcl, self.check = (
            name, path, body, ctype, ihcl, check)
        self.resp_bytes = 0
        # wrk counts only the requests that complete in its window: the ones in
        # flight at its end (64 of ~1 s each for the 4M relu at c=64) are lost,
        # a fifth of a 5 s window, so slow scenarios get a longer one
        self.min_duration = min_duration

    def headers(self):
        h = {"Content-Type": self.ctype}
        if self.ihcl is not None:
            h["Inference-Header-Content-Length"] = str(self.ihcl)
        return h

    def verify(self, base):
        status, headers, body = post(base + self.path, self.body, self.headers())
        if status != 200:
            raise RuntimeError(f"{self.name}: HTTP {status}")
        self.resp_bytes = len(body)
        if self.check:
            self.check(headers, body)


def json_out(body):
    doc = json.loads(body)
    out = doc["outputs"][0] if isinstance(doc["outputs"], list) else next(iter(doc["outputs"].values()))
    return np.asarray(out["data"], dtype=np.float64).reshape(out["shape"])


def make_scenarios(rng):
    a1 = rng.standard_normal(1).astype(np.float32)
    b1 = rng.standard_normal(1).astype(np.float32)
    m1 = rng.standard_normal((64, 64)).astype(np.float32)
    m2 = rng.standard_normal((64, 64)).astype(np.float32)
    r = rng.standard_normal(4 * 1024 * 1024).astype(np.float32)
    ref_add = a1.astype(np.float64) + b1
    ref_mm = m1.astype(np.float64) @ m2

    def close(got, ref, tol):
        err = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)
        if not err < tol:
            raise RuntimeError(f"wrong answer: relative error {err}")

    mm_bin, mm_hl = binary_call(["self", "mat2"], [m1, m2])
    add_bin, add_hl = binary_call(["self", "other"], [a1, b1])
    relu_bin, relu_hl = binary_call(["self"], [r])

    def check_binary(ref, tol):
        def check(headers, body):
            hl = int(headers.get("Inference-Header-Content-Length"))
            close(decode_binary_output(body, hl).astype(np.float64), ref, tol)
        return check

    return {
        "add_json": lambda: Scenario("tiny add, JSON", "/v1/ops/add", json_call(a1, b1),
                                     "application/json",
                                     check=lambda h, b: close(json_out(b), ref_add, 1e-6)),
        "add_json_none": lambda: Scenario("tiny add, JSON, no record", "/v1/ops/add",
                                          json_call(a1, b1, dispatch="none"), "application/json",
                                          check=lambda h, b: close(json_out(b), ref_add, 1e-6)),
        "mm_json": lambda: Scenario("64x64 mm, JSON", "/v1/ops/mm", json_call(m1, m2),
                                    "application/json",
                                    check=lambda h, b: close(json_out(b), ref_mm, 1e-5)),
        # /v2 forms, the same bytes to opdispatchd and to MLServer; input names
        # are opdispatchd's schema names (MLServer takes any)
        "add_v2_json": lambda: Scenario("tiny add, /v2 JSON", "/v2/models/add/infer",
                                        v2_json_call(["self", "other"], [a1, b1]),
                                        "application/json",
                                        check=lambda h, b: close(json_out(b), ref_add, 1e-6)),
        "mm_v2_json": lambda: Scenario("64x64 mm, /v2 JSON", "/v2/models/mm/infer",
                                       v2_json_call(["self", "mat2"], [m1, m2]),
                                       "application/json",
                                       check=lambda h, b: close(json_out(b), ref_mm, 1e-5)),
        "add_bin": lambda: Scenario("tiny add, binary", "/v2/models/add/infer", add_bin,
                                    "application/octet-stream", add_hl,
                                    check_binary(ref_add, 1e-6)),
        "mm_bin": lambda: Scenario("64x64 mm, binary", "/v2/models/mm/infer", mm_bin,
                                   "application/octet-stream", mm_hl, check_binary(ref_mm, 1e-5)),
        "relu_bin": lambda: Scenario("4M-float relu, binary", "/v2/models/relu/infer", relu_bin,
                                     "application/octet-stream", relu_hl,
                                     check_binary(np.maximum(r, 0).astype(np.float64), 1e-7),
                                     min_duration=15),
    }


# ---- wrk ---------------------------------------------------------------------

UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def parse_latency(text, pct):
    m = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
    return float(m.group(1)) * UNITS[m.group(2)] if m else float("nan")


def run_wrk(base, sc, conns, duration, tmpdir):
    duration = max(duration, sc.min_duration)
    body_path = os.path.join(tmpdir, "body.bin")
    with open(body_path, "wb") as f:
        f.write(sc.body)
    env = dict(os.environ, WRK_BODY=body_path, WRK_CTYPE=sc.ctype,
               WRK_IHCL="" if sc.ihcl is None else str(sc.ihcl))
    threads = min(2, conns)
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{conns}", f"-d{duration}s", "--latency",
                          "--timeout", "30s", "-s", LUA, base + sc.path],
                         env=env, capture_output=True, text=True, timeout=duration + 60)
    text = out.stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    errors = re.search(r"Socket errors:.*", text)
    if not rps:
        raise RuntimeError(f"wrk failed: {text}\n{out.stderr}")
    if non2xx:
        raise RuntimeError(f"{sc.name}: {non2xx.group(1)} non-2xx responses under load")
    r = float(rps.group(1))
    return {"rps": r, "p50": parse_latency(text, 50), "p99": parse_latency(text, 99),
            "in_mbs": r * len(sc.body) / 1e6, "out_mbs": r * sc.resp_bytes / 1e6,
            "errors": errors.group(0) if errors else ""}


def compare(args):
    rng = np.random.default_rng()
    scen = make_scenarios(rng)
    servers = [("baseline", [args.baseline]),
               ("ours, --call-workers 0", [args.opdispatchd, "--call-workers", "0"]),
               ("ours", [args.opdispatchd])]
    procs, bases = [], {}
    results = {}
    try:
        with tempfile.TemporaryDirectory() as tmpdir:
            for name, cmd in servers:
                port = free_port()
                procs.append(start(cmd + ["--host", "127.0.0.1", "--port", str(port),
                                          "--no-access-log", "--default-device", "cpu"], port))
                bases[name] = f"http://127.0.0.1:{port}"
            for key in ("add_json", "relu_bin"):
                for c in CONNECTIONS:
                    for rep in range(2):  # interleaved, twice: drift shows as spread
                        for name, _ in servers:
                            sc = scen[key]()
                            sc.verify(bases[name])
                            res = run_wrk(bases[name], sc, c, args.duration, tmpdir)
                            results.setdefault((name, sc.name, c), []).append(res["rps"])
                            print(f"{name:24s} {sc.name:24s} c={c:<3d} {res['rps']:10.0f} req/s  "
                                  f"p50 {res['p50']:8.2f} ms  p99 {res['p99']:8.2f} ms", flush=True)
    finally:
        for p in procs:
            stop(p)
    print("\nbest of 2 runs, against the baseline (same run)")
    for (name, sc, c), v in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        base = max(results[("baseline", sc, c)])
        print(f"  {sc:24s} c={c:<3d} {name:24s} {max(v):10.0f} req/s  {max(v) / base:6.3f}")


def interleaved(plan, rounds, duration, tmpdir):
    """Each (server, scenario) of plan under wrk at each connection count, the
    whole plan once per round, rounds times. On a shared 2-core machine the
    load drifts by a third within minutes; two servers measured in the same
    round ran seconds apart, so a ratio is taken within each round (ratio()),
    and a drift between rounds moves both sides of it."""
    runs = {}
    for c in CONNECTIONS:
        for rnd in range(rounds):
            for server, base, sc in plan:
                res = run_wrk(base, sc, c, duration, tmpdir)
                runs.setdefault((server, sc.name, c), []).append(res)
                print(f"{server:26s} {sc.name:24s} c={c:<3d} {res['rps']:10.0f} req/s  "
                      f"p50 {res['p50']:8.2f} ms  p99 {res['p99']:8.2f} ms  "
                      f"in {res['in_mbs']:8.1f} MB/s  out {res['out_mbs']:8.1f} MB/s  "
                      f"round {rnd + 1} {res['errors']}", flush=True)
    return runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opdispatchd", required=True)
    ap.add_argument("--fixed")
    ap.add_argument("--baseline")
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3,
                    help="passes over the whole plan; ratios are the median of the rounds'")
    ap.add_argument("--no-fastapi", action="store_true")
    ap.add_argument("--mlserver", default=DEFAULT_MLSERVER,
                    help="the mlserver executable (of .venv-mlserver, `make bench-http`)")
    ap.add_argument("--no-mlserver", action="store_true")
    args = ap.parse_args()
    if args.baseline:
        return compare(args)
    if not args.fixed:
        ap.error("--fixed is required (or --baseline)")

    rng = np.random.default_rng()
    scen = make_scenarios(rng)
    procs = []
    results = {}
    try:
        with tempfile.TemporaryDirectory() as tmpdir:
            fport, oport, aport = free_port(), free_port(), free_port()
            procs.append(start([args.fixed, str(fport)], fport))
            procs.append(start([args.opdispatchd, "--host", "127.0.0.1", "--port", str(oport),
                                "--no-access-log", "--default-device", "cpu"], oport))
            ours = f"http://127.0.0.1:{oport}"
            fixed = f"http://127.0.0.1:{fport}"
            peer = None
            if not args.no_fastapi:
                py = os.path.join(os.path.dirname(sys.executable), "uvicorn")
                procs.append(start([py, "--app-dir", HERE, "fastapi_peer:app", "--host",
                                    "127.0.0.1", "--port", str(aport), "--workers",
                                    str(os.cpu_count() or 1), "--log-level", "warning",
                                    "--no-access-log", "--http", "httptools", "--loop", "uvloop"],
                                   aport))
                peer = f"http://127.0.0.1:{aport}"
            mls = None
            mls_binary = False
            if args.no_mlserver:
                pass
            elif not os.access(args.mlserver, os.X_OK):
                print(f"MLServer peer skipped: no {args.mlserver} (`make bench-http` creates "
                      ".venv-mlserver from tools/mlserver-requirements.txt)", flush=True)
            else:
                # absolute: it runs in tmpdir
                proc, mls = start_mlserver(os.path.abspath(args.mlserver), tmpdir)
                procs.append(proc)
                # MLServer 1.7.1 has no binary tensor extension on REST: it
                # parses the body as JSON and fails. Measure binary if a later
                # one answers it, otherwise compare our binary to its JSON.
                try:
                    scen["add_bin"]().verify(mls)
                    scen["mm_bin"]().verify(mls)
                    mls_binary = True
                except Exception as e:  # noqa: BLE001 (HTTP 500, 422 or a bad answer)
                    print(f"MLServer: no binary tensor extension ({e}); binary ratios below "
                          "are against its /v2 JSON", flush=True)

            plan = [("fixed-body libmicrohttpd", fixed, "add_json"),
                    ("opdispatchd", ours, "add_json"),
                    ("opdispatchd", ours, "add_json_none")]
            if peer:
                plan += [("FastAPI + numpy", peer, "add_json")]
            plan += [("opdispatchd", ours, "mm_json")]
            if peer:
                plan += [("FastAPI + numpy", peer, "mm_json")]
            plan += [("opdispatchd", ours, "mm_bin"), ("opdispatchd", ours, "relu_bin")]
            if mls:
                # the same /v2 requests to both; without MLServer binary, our
                # binary is compared to its JSON on the same tensors
                plan += [("opdispatchd", ours, "add_v2_json"), ("MLServer + numpy", mls, "add_v2_json"),
                         ("MLServer + numpy", mls, "mm_v2_json"), ("opdispatchd", ours, "mm_v2_json"),
                         ("opdispatchd", ours, "add_bin")]
                if mls_binary:
                    plan += [("MLServer + numpy", mls, "add_bin"), ("MLServer + numpy", mls, "mm_bin")]
            runs = []
            for server, base, key in plan:
                sc = scen[key]()
                if server != "fixed-body libmicrohttpd":
                    sc.verify(base)  # correct answers before speed
                else:
                    sc.resp_bytes = len(post(base + sc.path, sc.body, sc.headers())[2])
                runs.append((server, base, sc))
            results = interleaved(runs, args.rounds, args.duration, tmpdir)
    finally:
        for p in procs:
            stop(p)

    def ratio(a, b, c):
        """The median over rounds of a's req/s over b's in the same round."""
        ra, rb = results.get((*a, c)), results.get((*b, c))
        if not ra or not rb:
            return float("nan"), ""
        each = [x["rps"] / y["rps"] for x, y in zip(ra, rb)]
        return float(np.median(each)), " ".join(f"{r:.2f}" for r in each)

    def show(label, a, b, c, target):
        r, each = ratio(a, b, c)
        print(f"  c={c:<3d} {label:40s}{r:7.2f}   (target >= {target} at c=16; rounds {each})")

    od = "opdispatchd"
    fixed = ("fixed-body libmicrohttpd", "tiny add, JSON")
    print(f"\nratios: the median of {args.rounds} rounds' ratios, each within one round")
    for c in CONNECTIONS:
        show("tiny add JSON / fixed-body server:", (od, "tiny add, JSON"), fixed, c, 0.50)
        show("tiny add JSON, no record / fixed:", (od, "tiny add, JSON, no record"), fixed, c, 0.60)
        if not args.no_fastapi:
            show("tiny add JSON / FastAPI:", (od, "tiny add, JSON"),
                 ("FastAPI + numpy", "tiny add, JSON"), c, 10)
            show("mm JSON / FastAPI:", (od, "64x64 mm, JSON"), ("FastAPI + numpy", "64x64 mm, JSON"),
                 c, 20)
        show("mm binary / our mm JSON:", (od, "64x64 mm, binary"), (od, "64x64 mm, JSON"), c, 3)
        if mls:
            mls_ = "MLServer + numpy"
            show("tiny add /v2 JSON / MLServer:", (od, "tiny add, /v2 JSON"),
                 (mls_, "tiny add, /v2 JSON"), c, 30)
            show("mm /v2 JSON / MLServer:", (od, "64x64 mm, /v2 JSON"),
                 (mls_, "64x64 mm, /v2 JSON"), c, 6)
            mb = "binary" if mls_binary else "/v2 JSON"
            show(f"tiny add binary / MLServer {mb}:", (od, "tiny add, binary"),
                 (mls_, f"tiny add, {mb}"), c, 20)
            show(f"mm binary / MLServer {mb}:", (od, "64x64 mm, binary"), (mls_, f"64x64 mm, {mb}"),
                 c, 20)
        r = results.get((od, "4M-float relu, binary", c))
        if r:
            gbs = [x["in_mbs"] / 1e3 for x in r]
            print(f"  c={c:<3d} 4M relu binary payload:             {np.median(gbs):5.2f} GB/s each way "
                  f"(target >= 1 at c=64; rounds {' '.join(f'{g:.2f}' for g in gbs)})")


if __name__ == "__main__":
    main()
