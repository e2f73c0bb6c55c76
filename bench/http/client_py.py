"""The Python client's overhead against raw http.client, in the same run.

Two scenarios, each the client's call against the same request made with a
raw http.client connection and bytes encoded once beforehand (the floor for
any Python client over http.client):

  (a) relu of a 4M-element float32 array, binary tensor data both ways:
      client.call("relu", x) against posting the pre-encoded header + bytes
      and wrapping the answer with np.frombuffer. Target: within 1.3x.
  (b) add of two 1-element float32 arrays, JSON request: client.call("add",
      a, b) against posting the pre-encoded JSON body (the very bytes the
      client sends) and reading the answer. Target: within 1.5x.

Each repetition times a batch of calls on each side (one relu; 200 adds),
one side after the other, in alternating order; the medians over the
repetitions are compared. Both answers are checked against numpy first.
The server it starts has one HTTP thread and one call worker, so that both
sides meet the same server threads.

Usage: client_py.py --opdispatchd PATH [--reps N]   (starts and stops its own server)
       client_py.py --url http://127.0.0.1:8000 [--reps N]
Exits 1 when a ratio misses its target.
"""
import argparse
import http.client
import json
import os
import pathlib
import signal
import socket
import statistics
import subprocess
import sys
import time
from urllib.parse import urlsplit

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "clients" / "python"))
import opdispatch  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(binary):
    port = free_port()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    # one HTTP thread and one call worker: both sides meet the same server
    # threads (and their allocator arenas), whichever connection they use
    proc = subprocess.Popen([binary, "--host", "127.0.0.1", "--port", str(port), "--threads", "1",
                             "--call-workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"opdispatchd exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("opdispatchd did not start listening")


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Raw:
    """Pre-encoded requests on one kept-alive http.client connection."""

    def __init__(self, url):
        u = urlsplit(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)

    def post(self, path, body, headers):
        self.conn.request("POST", path, body=body, headers=headers)
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"{path}: HTTP {r.status}: {data[:200]!r}")
        return r, data


def relu_scenario(client, raw, rng):
    x = rng.standard_normal(4 * 1024 * 1024).astype(np.float32)
    header = json.dumps({"args": [{"dtype": "float32", "shape": [x.size],
                                   "parameters": {"binary_data_size": x.nbytes}}],
                         "parameters": {"binary_data_output": True}}, separators=(",", ":")).encode()
    body = header + x.tobytes()
    headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(header))}

    def raw_call():
        r, data = raw.post("/v1/ops/relu", body, headers)
        hl = int(r.getheader("Inference-Header-Content-Length"))
        return np.frombuffer(data, np.float32, offset=hl)

    def client_call():
        return client.call("relu", x)

    want = np.maximum(x, 0)
    assert np.array_equal(raw_call(), want) and np.array_equal(client_call(), want)
    return client_call, raw_call


def add_scenario(client, raw, rng):
    a = rng.standard_normal(1).astype(np.float32)
    b = rng.standard_normal(1).astype(np.float32)
    # the bytes the client sends for this call: JSON tensors, binary output
    body = json.dumps({"args": [{"dtype": "float32", "shape": [1], "data": a.tolist()},
                                {"dtype": "float32", "shape": [1], "data": b.tolist()}],
                       "parameters": {"binary_data_output": True}}, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/json"}

    def raw_call():
        return raw.post("/v1/ops/add", body, headers)[1]

    def client_call():
        return client.call("add", a, b)

    got = client_call()
    assert got.dtype == np.float32 and np.array_equal(got, a + b)
    assert b'"binary_data_size":4' in raw_call()
    return client_call, raw_call


def measure(client_call, raw_call, reps, batch):
    """Median seconds per call of each side over reps batches, interleaved."""
    sides = {"client": (client_call, []), "raw": (raw_call, [])}
    for _ in range(batch):  # warm-up
        client_call()
        raw_call()
    for rep in range(reps):
        order = ("client", "raw") if rep % 2 == 0 else ("raw", "client")
        for name in order:
            fn, times = sides[name]
            t0 = time.perf_counter()
            for _ in range(batch):
                fn()
            times.append((time.perf_counter() - t0) / batch)
    return statistics.median(sides["client"][1]), statistics.median(sides["raw"][1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--opdispatchd", help="server binary to start on a free port (and stop)")
    where.add_argument("--url", help="a running server")
    ap.add_argument("--reps", type=int, default=21,
                    help="repetitions of 200 tiny calls; the 4M relu gets three times as many of one call")
    args = ap.parse_args()

    proc, url = start_server(args.opdispatchd) if args.opdispatchd else (None, args.url)
    failed = False
    try:
        rng = np.random.default_rng()
        client = opdispatch.Client(url)
        raw = Raw(url)
        # (name, calls, repetitions, calls per repetition, target, unit)
        rows = [("relu 4M float32, binary", relu_scenario(client, raw, rng), 3 * args.reps, 1, 1.3, "ms"),
                ("add 1+1 float32, JSON", add_scenario(client, raw, rng), args.reps, 200, 1.5, "us")]
        for name, (client_call, raw_call), reps, batch, target, unit in rows:
            c, r = measure(client_call, raw_call, reps, batch)
            scale = 1e3 if unit == "ms" else 1e6
            ratio = c / r
            ok = ratio <= target
            failed |= not ok
            print(f"{name:26s} client {c * scale:8.1f} {unit}  raw {r * scale:8.1f} {unit}  "
                  f"ratio {ratio:.2f} (target <= {target}) {'ok' if ok else 'MISSED'}")
        client.close()
    finally:
        if proc is not None:
            stop_server(proc)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
