"""opdispatch load against wrk: the same server, operator and request bytes,
alternating, several rounds (make bench-load; part of make bench).

The request is the JSON body `opdispatch load` sends for a tiny relu; wrk
posts exactly those bytes (bench/http/post.lua). Both run one thread and
the same number of connections for the same duration. The target: opdispatch
load drives at least as many requests/s as wrk (ratio >= 1.0).
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import tempfile
import time

BODY = {"args": [{"dtype": "float32", "shape": [16], "data": list(range(16))}], "kwargs": {},
        "parameters": {"binary_data_output": False}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opdispatchd", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--duration", type=float, default=3)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([args.opdispatchd, "--host", "127.0.0.1", "--port", str(port), "--no-access-log"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        arg = json.dumps(BODY["args"][0], separators=(",", ":"))
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write('{"args":[' + arg + '],"kwargs":{},"parameters":{"binary_data_output":false}}')
            body = f.name
        ours, theirs = [], []
        for _ in range(args.rounds):
            p = subprocess.run([args.cli, "--url", url, "load", "relu", "--arg", arg, "--connections",
                                str(args.connections), "--duration", str(args.duration), "--format", "json"],
                               capture_output=True, text=True, check=True)
            ours.append(json.loads(p.stdout)[0]["rps"])
            env = dict(os.environ, WRK_BODY=body, WRK_CTYPE="application/json")
            p = subprocess.run(["wrk", "-t1", f"-c{args.connections}", f"-d{args.duration}s", "-s",
                                os.path.join(here, "post.lua"), f"{url}/v1/ops/relu"],
                               capture_output=True, text=True, check=True, env=env)
            theirs.append(float(re.search(r"Requests/sec:\s+([\d.]+)", p.stdout).group(1)))
        o, t = statistics.median(ours), statistics.median(theirs)
        print(f"tiny relu, {args.connections} connections, {args.duration:g} s x {args.rounds} rounds (medians)")
        print(f"  opdispatch load {o:10.0f} req/s   rounds {[round(x) for x in ours]}")
        print(f"  wrk             {t:10.0f} req/s   rounds {[round(x) for x in theirs]}")
        print(f"  ratio {o / t:5.2f}   (target >= 1.0)")
        os.unlink(body)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
