"""Instructions a tiny call costs the server, counted by callgrind: the one
measurement of the tiny path that this noisy 2-vCPU machine repeats to the
instruction (wall-clock runs swing by a third; bench/RESULTS.md, issue 14).

Starts opdispatchd under valgrind --tool=callgrind with collection off,
makes --warmup calls on one keep-alive connection, counts --calls more, and
prints the server's instructions a call, in total and inclusive in the
handler functions named below. Valgrind counts each byte of a `rep stosb`
(MHD clearing its connection pool) as one instruction, so the total
overstates that part; compare totals between builds, not against cycles.

Usage: callgrind_tiny.py --opdispatchd build/opdispatchd [--calls 2000] [--none]
(needs valgrind; not part of `make bench`, which times instead of counting)
"""
import argparse, http.client, json, os, re, subprocess, sys, tempfile, time

FUNCS = ["od_serve_call", "v1_parse", "v1_bind", "od_srv_call_dispatch_json"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opdispatchd", required=True)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--port", type=int, default=18519)
    ap.add_argument("--none", action="store_true", help='"dispatch": "none" (no dispatch record)')
    a = ap.parse_args()
    body = {"args": [{"dtype": "float32", "shape": [1], "data": [0.3046]},
                     {"dtype": "float32", "shape": [1], "data": [-1.0399]}]}
    if a.none:
        body["dispatch"] = "none"
    data = json.dumps(body).encode()
    out = tempfile.mktemp(prefix="callgrind_tiny.")
    srv = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                            a.opdispatchd, "--host", "127.0.0.1", "--port", str(a.port), "--no-access-log"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = None
        for _ in range(120):
            try:
                c = http.client.HTTPConnection("127.0.0.1", a.port, timeout=30)
                c.request("GET", "/v1/health")
                c.getresponse().read()
                break
            except OSError:
                c = None
                time.sleep(0.5)
        if c is None:
            sys.exit("callgrind_tiny: the server did not start")

        def calls(n):
            for _ in range(n):
                c.request("POST", "/v1/ops/add", data, {"Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    sys.exit(f"callgrind_tiny: HTTP {r.status}")
        calls(a.warmup)
        subprocess.run(["callgrind_control", "-i", "on", str(srv.pid)], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        calls(a.calls)
        subprocess.run(["callgrind_control", "-i", "off", str(srv.pid)], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    finally:
        srv.terminate()
        srv.wait(timeout=60)
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", out], check=True, capture_output=True,
                          text=True).stdout
    os.unlink(out)
    total = re.search(r"([\d,]+) .*PROGRAM TOTALS", text)
    print(f"{a.calls} tiny adds ({'no record' if a.none else 'full record'}), instructions a call")
    print(f"  {'whole server':<28} {int(total.group(1).replace(',', '')) / a.calls:10.0f}")
    for f in FUNCS:
        m = re.search(r"^\s*([\d,]+) \([^)]*\)\s+\S*:" + f + r" \[", text, re.M)
        if m:
            print(f"  {f:<28} {int(m.group(1).replace(',', '')) / a.calls:10.0f}")


if __name__ == "__main__":
    main()
