"""Soak: mixed traffic against a real opdispatchd on 127.0.0.1 for a bounded
time, watching the server for leaks and drift (make soak SOAK_S=600; make
test runs a short one).

64 keep-alive connections (one thread each, http.client) send a weighted
mix: tiny and large operator calls, JSON and binary, Open Inference
Protocol infers, stored tensors put/get/deleted, explain, introspection,
statistics and /metrics, and requests that must fail (unknown operator,
malformed JSON, a shape mismatch, a wrong method) with their own statuses.
Any other status, a wrong result or a transport error is an unexpected
error. Every second a sampler records the server's RSS, open descriptors
and threads (from /proc) and the window's requests, errors and latency
percentiles.

Checks, after the warm-up: zero unexpected errors; RSS flat (the median of
the last quarter of the samples within 5 % of the first quarter's),
counting RSS less what the CPU tensor allocator holds (/metrics:
od_cpu_alloc_in_use_bytes, the live tensors and bodies of the requests in
flight, which swing by hundreds of MiB from one second to the next with
4 MiB requests, and od_cpu_alloc_cached_bytes, the freed large blocks it
keeps for reuse, which grow with the peak number of large requests at once
up to the cache's limit, by design; the raw RSS is reported beside it);
the
allocator's live bytes back to their idle value once the traffic stops (so
what the RSS check leaves out cannot hide a leak of tensors); descriptors
and threads flat (the last quarter's maximum within a small slack of the
first quarter's); p99 not drifting (the last third's median per-second p99 at
most 1.5x the first third's, plus 5 ms of scheduler noise on a shared
machine); the server still healthy, and exiting 0 on SIGTERM with no
sanitizer report in its log. Writes report.md, soak.csv and (with gnuplot)
soak.png to --out; exits 1 when a check fails.

Only 127.0.0.1; only the server process this script starts is signalled.
"""

import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

SAN_RE = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|SUMMARY: \w+Sanitizer")


# ---- the request mix ----------------------------------------------------------------------


def binary_body(header, arrays):
    h = json.dumps(header).encode()
    return h + b"".join(a.tobytes() for a in arrays), {
        "Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(h))}


def jt(a):
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.ravel().tolist()}


def make_mix(large_elems):
    """[(weight, name, method, path, body, headers, expected status, check)]."""
    rng = np.random.default_rng(0)
    tiny = rng.standard_normal(16).astype(np.float32)
    big = rng.standard_normal(large_elems).astype(np.float32)
    m = rng.standard_normal((192, 192)).astype(np.float32)
    mid = rng.standard_normal(20000).astype(np.float32)
    J = {"Content-Type": "application/json"}

    def js(o):
        return json.dumps(o).encode()

    def relu_ok(want):
        def check(body, headers):
            return np.allclose(json.loads(body)["outputs"][0]["data"], want)
        return check

    def binary_len(n):
        def check(body, headers):
            hl = int(headers.get("Inference-Header-Content-Length", "-1"))
            return hl > 0 and len(body) == hl + n
        return check

    b_relu, h_relu = binary_body({"args": [{"dtype": "float32", "shape": [big.size],
                                            "parameters": {"binary_data_size": big.nbytes}}]}, [big])
    b_mm, h_mm = binary_body({"args": [{"dtype": "float32", "shape": [192, 192],
                                        "parameters": {"binary_data_size": m.nbytes}}] * 2}, [m, m])
    b_add, h_add = binary_body({"args": [{"dtype": "float32", "shape": [16], "parameters": {"binary_data_size": 64}},
                                         {"dtype": "float32", "shape": [16], "parameters": {"binary_data_size": 64}}]},
                               [tiny, tiny])
    oip = js({"inputs": [{"name": "self", "datatype": "FP32", "shape": [16], "data": tiny.tolist()}]})
    acc_bin = {"Accept": "application/octet-stream"}
    return [
        (30, "tiny json relu", "POST", "/v1/ops/relu", js({"args": [jt(tiny)]}), J, 200, relu_ok(np.maximum(tiny, 0))),
        (10, "tiny binary add", "POST", "/v1/ops/add.Tensor", b_add, {**h_add, **acc_bin}, 200, binary_len(64)),
        (8, "oip infer json", "POST", "/v2/models/relu/infer", oip, J, 200, None),
        (3, "large binary relu", "POST", "/v1/ops/relu", b_relu, {**h_relu, **acc_bin}, 200, binary_len(big.nbytes)),
        (3, "binary mm 192", "POST", "/v1/ops/mm", b_mm, {**h_mm, **acc_bin}, 200, binary_len(m.nbytes)),
        (2, "large json sum", "POST", "/v1/ops/sum", js({"args": [jt(mid)]}), J, 200, None),
        (3, "explain", "POST", "/v1/ops/mm/explain", js({"args": [jt(m[:4, :4]), jt(m[:4, :4])]}), J, 200, None),
        (4, "store put/get/delete", "STORE", "/v1/tensors", js({"tensor": jt(tiny)}), J, 201, None),
        (4, "error: unknown op", "POST", "/v1/ops/no_such_op", js({"args": []}), J, 404, None),
        (4, "error: malformed json", "POST", "/v1/ops/relu", b'{"args": [', J, 400, None),
        (4, "error: shape mismatch", "POST", "/v1/ops/mm", js({"args": [jt(m[:2, :3]), jt(m[:2, :3])]}), J, 422, None),
        (2, "error: wrong method", "DELETE", "/v1/ops", None, {}, 405, None),
        (4, "introspect op", "GET", "/v1/ops/add", None, {}, 200, None),
        (2, "introspect keys", "GET", "/v1/keys", None, {}, 200, None),
        (3, "oip model metadata", "GET", "/v2/models/add.Tensor", None, {}, 200, None),
        (3, "stats", "GET", "/v1/stats", None, {}, 200, None),
        (3, "metrics", "GET", "/metrics", None, {}, 200, None),
        (1, "oip stats", "GET", "/v2/models/stats", None, {}, 200, None),
        (1, "stats reset", "POST", "/v1/stats/reset", b"{}", J, 200, None),
        (3, "health", "GET", "/v2/health/ready", None, {}, 200, None),
    ]


# ---- the driver -----------------------------------------------------------------------------


class Shared:
    def __init__(self):
        self.lock = threading.Lock()
        self.lat = []            # this window's latencies (s)
        self.req = 0             # this window's requests
        self.err = 0             # this window's unexpected errors
        self.total = 0
        self.total_err = 0
        self.by_kind = {}
        self.samples_err = []    # first few unexpected errors, for the report
        self.stop = threading.Event()


def worker(idx, port, mix, sh, deadline, max_requests, seed):
    rnd = random.Random(seed)
    weights = [w for w, *_ in mix]
    session = f"soak-{idx}"
    conn = None
    while not sh.stop.is_set() and time.monotonic() < deadline:
        with sh.lock:
            if sh.total >= max_requests:
                return
        _, name, method, path, body, headers, want, check = rnd.choices(mix, weights)[0]
        t0 = time.perf_counter()
        ok, why = True, ""
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            if method == "STORE":  # put, get, delete: the store must give back what it took
                hdr = {**headers, "X-OD-Session": session}
                conn.request("POST", path, body=body, headers=hdr)
                r = conn.getresponse()
                data = r.read()
                ok = r.status == want
                if ok:
                    tid = json.loads(data)["id"]
                    conn.request("GET", f"{path}/{tid}", headers={"X-OD-Session": session})
                    r2 = conn.getresponse()
                    r2.read()
                    conn.request("DELETE", f"{path}/{tid}", headers={"X-OD-Session": session})
                    r3 = conn.getresponse()
                    r3.read()
                    ok = r2.status == 200 and r3.status in (200, 204)
                    why = f"get {r2.status}, delete {r3.status}"
                else:
                    why = f"status {r.status}: {data[:200]!r}"
            else:
                conn.request(method, path, body=body, headers=headers)
                r = conn.getresponse()
                data = r.read()
                if r.status != want:
                    ok, why = False, f"status {r.status} (want {want}): {data[:200]!r}"
                elif check and not check(data, r.headers):
                    ok, why = False, "wrong result"
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
        except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
            ok, why = False, f"{type(e).__name__}: {e}"
            if conn is not None:
                conn.close()
            conn = None
        dt = time.perf_counter() - t0
        with sh.lock:
            sh.lat.append(dt)
            sh.req += 1
            sh.total += 1
            k = sh.by_kind.setdefault(name, [0, 0])
            k[0] += 1
            if not ok:
                sh.err += 1
                sh.total_err += 1
                k[1] += 1
                if len(sh.samples_err) < 20:
                    sh.samples_err.append(f"{name}: {why}")
    if conn is not None:
        conn.close()


def cpu_seconds(pid):
    """The process's user + system CPU time (s)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_stats(pid):
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd")), threads


def metric(port, name):
    """One gauge from /metrics, or None."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
    except (OSError, http.client.HTTPException):
        return None
    m = re.search(rf"^{name} (\d+)", text, re.M)
    return int(m.group(1)) if m else None


def allocator_bytes(port):
    """od_cpu_alloc_in_use_bytes + od_cpu_alloc_cached_bytes from /metrics
    (0 when they cannot be read)."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
        return sum(int(m) for m in re.findall(r"^od_cpu_alloc_(?:in_use|cached)_bytes (\d+)", text, re.M))
    except (OSError, http.client.HTTPException):
        return 0


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def start_server(binary, threads, workers, log):
    cmd = [binary, "--host", "127.0.0.1", "--port", "0", "--threads", str(threads), "--call-workers", str(workers),
           "--no-access-log", "--max-connections-per-ip", "0"]
    out = open(log + ".out", "w")
    err = open(log, "w")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:halt_on_error=1:protect_shadow_gap=0")
    p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", open(log + ".out").read())
        if m:
            return p, int(m.group(1))
        if p.poll() is not None:
            raise SystemExit(f"opdispatchd exited with {p.returncode}: {open(log).read()[-2000:]}")
        time.sleep(0.05)
    p.kill()
    raise SystemExit("opdispatchd did not start within 60 s")


def healthy(port):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/v2/health/ready")
        ok = c.getresponse().status == 200
        c.close()
        return ok
    except OSError:
        return False


def plot(csv_path, png_path, warmup):
    if not shutil.which("gnuplot"):
        return False
    script = f"""
set terminal png size 1200,900
set output '{png_path}'
set datafile separator ','
set multiplot layout 3,1 title 'opdispatchd soak (warm-up: first {warmup:.0f} s)'
set xlabel 's'
set ylabel 'MiB'
plot '{csv_path}' using 1:($2/1048576) skip 1 with lines title 'RSS', \
     '' using 1:(($2-$9)/1048576) skip 1 with lines title 'RSS less the tensor allocator', \
     '' using 1:($9/1048576) skip 1 with lines title 'tensor allocator (in use + cached)'
set ylabel 'count'
set yrange [0:*]
plot '{csv_path}' using 1:3 skip 1 with lines title 'open fds', '' using 1:4 skip 1 with lines title 'threads'
set ylabel 'ms'
set ytics nomirror
set y2tics
set y2range [0:*]
set y2label 'requests/s'
plot '{csv_path}' using 1:7 skip 1 with lines title 'p50 (ms)', '' using 1:8 skip 1 with lines title 'p99 (ms)', \
     '' using 1:5 skip 1 with lines axes x1y2 title 'requests/s (right)'
unset multiplot
"""
    return subprocess.run(["gnuplot"], input=script, text=True, capture_output=True, timeout=60).returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True, help="the opdispatchd binary")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--warmup", type=float, default=None, help="default: a fifth of the run, at most 60 s")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--threads", type=int, default=4, help="the server's HTTP threads")
    ap.add_argument("--call-workers", type=int, default=2)
    ap.add_argument("--large-elems", type=int, default=1 << 20, help="elements of the large binary call")
    ap.add_argument("--max-requests", type=int, default=50_000_000)
    ap.add_argument("--out", default="build/soak")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    a.seconds = max(10.0, min(a.seconds, 86400.0))
    warmup = a.warmup if a.warmup is not None else min(60.0, a.seconds / 5)
    os.makedirs(a.out, exist_ok=True)
    log = os.path.join(a.out, "server.log")
    csv_path = os.path.join(a.out, "soak.csv")
    proc, port = start_server(a.server, a.threads, a.call_workers, log)
    mix = make_mix(a.large_elems)
    in_use0 = metric(port, "od_cpu_alloc_in_use_bytes")
    sh = Shared()
    t_start = time.monotonic()
    deadline = t_start + a.seconds
    threads = [threading.Thread(target=worker, args=(i, port, mix, sh, deadline, a.max_requests, a.seed * 1000 + i),
                                daemon=True) for i in range(a.connections)]
    rows = []
    try:
        for t in threads:
            t.start()
        nxt = t_start + 1
        cpu_prev = cpu_seconds(proc.pid)
        while time.monotonic() < deadline and any(t.is_alive() for t in threads):
            time.sleep(max(0.0, nxt - time.monotonic()))
            nxt += 1
            with sh.lock:
                lat, n, e = sh.lat, sh.req, sh.err
                sh.lat, sh.req, sh.err = [], 0, 0
            if proc.poll() is not None:
                break
            rss, fds, thr = proc_stats(proc.pid)
            cpu = cpu_seconds(proc.pid)
            rows.append((time.monotonic() - t_start, rss, fds, thr, n, e, pct(lat, 0.5) * 1e3, pct(lat, 0.99) * 1e3,
                         allocator_bytes(port), (cpu - cpu_prev) / n * 1e6 if n else 0.0))
            cpu_prev = cpu
    finally:
        sh.stop.set()
        for t in threads:
            t.join(timeout=90)
    alive_after = proc.poll() is None and healthy(port)
    in_use1 = metric(port, "od_cpu_alloc_in_use_bytes") if alive_after else None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    exit_code = proc.returncode
    server_log = open(log, errors="replace").read()
    san = [line for line in server_log.splitlines() if SAN_RE.search(line)]

    with open(csv_path, "w") as f:
        f.write("t_s,rss_bytes,fds,threads,requests,unexpected_errors,p50_ms,p99_ms,allocator_bytes,server_cpu_us_per_request\n")
        for r in rows:
            f.write(f"{r[0]:.1f},{r[1]},{r[2]},{r[3]},{r[4]},{r[5]},{r[6]:.3f},{r[7]:.3f},{r[8]},{r[9]:.1f}\n")

    post = [r for r in rows if r[0] > warmup and r[4] > 0]
    checks = []

    def check(name, ok, detail):
        checks.append((name, bool(ok), detail))

    check("unexpected errors", sh.total_err == 0, f"{sh.total_err} of {sh.total} requests")
    check("server healthy after the run", alive_after, "GET /v2/health/ready = 200" if alive_after else "no")
    check("clean exit on SIGTERM", exit_code == 0, f"exit status {exit_code}")
    check("no sanitizer report", not san, san[0] if san else "none")
    # what the RSS check leaves out must itself come back: at idle, no tensor
    # or body memory may be left live (the stored tensors were all deleted)
    check("tensor memory given back at idle", in_use0 is not None and in_use1 is not None
          and in_use1 <= in_use0 + (1 << 20), f"od_cpu_alloc_in_use_bytes {in_use0} before, {in_use1} after")
    if len(post) >= 6:
        k = max(2, len(post) // 4)
        first, last = post[:k], post[-k:]
        rss0, rss1 = statistics.median(r[1] - r[8] for r in first), statistics.median(r[1] - r[8] for r in last)
        raw0, raw1 = statistics.median(r[1] for r in first), statistics.median(r[1] for r in last)
        c0, c1 = statistics.median(r[8] for r in first), statistics.median(r[8] for r in last)
        check("RSS flat within 5 % (less what the tensor allocator holds)", rss1 <= rss0 * 1.05,
              f"{rss0 / 2**20:.1f} MiB -> {rss1 / 2**20:.1f} MiB ({(rss1 / rss0 - 1) * 100:+.1f} %); raw RSS "
              f"{raw0 / 2**20:.1f} -> {raw1 / 2**20:.1f} MiB ({(raw1 / raw0 - 1) * 100:+.1f} %), allocator "
              f"{c0 / 2**20:.1f} -> {c1 / 2**20:.1f} MiB")
        fd0, fd1 = max(r[2] for r in first), max(r[2] for r in last)
        check("open fds flat", fd1 <= fd0 + 4, f"max {fd0} -> {fd1}")
        th0, th1 = max(r[3] for r in first), max(r[3] for r in last)
        check("threads flat", th1 <= th0 + 1, f"max {th0} -> {th1}")
        third = max(1, len(post) // 3)
        p0 = statistics.median(r[7] for r in post[:third])
        p1 = statistics.median(r[7] for r in post[-third:])
        u0 = statistics.median(r[9] for r in post[:third])
        u1 = statistics.median(r[9] for r in post[-third:])
        # the server's own CPU per request beside it: on a shared machine a
        # p99 change with a flat CPU cost points at the neighbours, not a drift
        check("p99 not drifting", p1 <= 1.5 * p0 + 5.0, f"median per-second p99 {p0:.1f} ms -> {p1:.1f} ms "
              f"(server CPU per request {u0:.0f} -> {u1:.0f} us)")
    else:
        check("enough samples after the warm-up", False, f"{len(post)} samples")

    png = os.path.join(a.out, "soak.png")
    have_png = plot(csv_path, png, warmup)
    dur = rows[-1][0] if rows else 0.0
    passed = all(ok for _, ok, _ in checks)
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(f"# opdispatchd soak: {'PASS' if passed else 'FAIL'}\n\n")
        f.write(f"`{' '.join(sys.argv)}`\n\n")
        f.write(f"{dur:.0f} s at {a.connections} connections against {a.server} (127.0.0.1:{port}, "
                f"--threads {a.threads} --call-workers {a.call_workers}); warm-up {warmup:.0f} s; "
                f"{sh.total} requests ({sh.total / max(dur, 1e-9):.0f}/s), {sh.total_err} unexpected errors.\n\n")
        f.write("| check | result | detail |\n| --- | --- | --- |\n")
        for name, ok, detail in checks:
            f.write(f"| {name} | {'ok' if ok else 'FAIL'} | {detail} |\n")
        f.write("\n| request | sent | unexpected |\n| --- | --- | --- |\n")
        for name, (n, e) in sorted(sh.by_kind.items(), key=lambda kv: -kv[1][0]):
            f.write(f"| {name} | {n} | {e} |\n")
        if sh.samples_err:
            f.write("\nFirst unexpected errors:\n\n" + "".join(f"- {s}\n" for s in sh.samples_err))
        f.write(f"\nPer-second samples: `{os.path.basename(csv_path)}`"
                + (f"; curves: ![soak]({os.path.basename(png)})\n" if have_png else "\n"))
    print(open(os.path.join(a.out, "report.md")).read())
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
