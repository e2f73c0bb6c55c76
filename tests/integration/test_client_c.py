"""The C client and the opdispatch command (clients/c) against the real
server: every command, the exit codes, values checked by hand, the load
generator's counts (against the server's own statistics), its output
formats and plot, and the open loop's latency including a stall it did not
cause (the server stopped for one second)."""

import csv
import io
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

from conftest import ROOT

CLI = os.environ.get("OD_CLI", str(ROOT / "build" / "opdispatch"))


def run(server, *args, timeout=60):
    return subprocess.run([CLI, "--url", server.url, *args], capture_output=True, text=True, timeout=timeout)


def test_ops_table_stats_devices_keys(server):
    p = run(server, "ops")
    assert p.returncode == 0, p.stderr
    assert "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" in p.stdout.splitlines()
    p = run(server, "table", "mm")
    assert p.returncode == 0 and "MmBackward0" in p.stdout and "batch_rule_matmul" in p.stdout
    p = run(server, "table", "mm", "--text")
    assert p.returncode == 0 and "CPU: registered at" in p.stdout
    p = run(server, "--json", "table", "mm")
    assert json.loads(p.stdout)["name"] == "aten::mm"
    for cmd, key in (("stats", "ops"), ("devices", "cpu"), ("keys", "runtime_keys")):
        p = run(server, cmd)
        assert p.returncode == 0 and key in json.loads(p.stdout), (cmd, p.stdout[:200])


def test_call_values_and_outputs(server):
    p = run(server, "--json", "call", "add", "--arg", "self=full:2.5:3x4:float64", "--arg", "other=ones:4:float64",
            "--arg", "alpha=2")
    assert p.returncode == 0, p.stderr
    body = json.loads(p.stdout)
    out = body["outputs"][0]
    assert out["dtype"] == "float64" and out["shape"] == [3, 4]
    np.testing.assert_array_equal(np.array(out["data"]), np.full(12, 4.5))
    # binary transport, the human summary
    p = run(server, "call", "mm", "--arg", "ones:2x3:float32", "--arg", "full:0.5:3x2:float32")
    assert p.returncode == 0, p.stderr
    assert "float32  [2, 2]  1.5 1.5 1.5 1.5" in p.stdout and "path: CPU [kernel]" in p.stdout
    # every dtype goes through binary and back
    for dt in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float64"):
        p = run(server, "--json", "call", "clone", "--arg", f"ones:5:{dt}")
        assert p.returncode == 0, (dt, p.stderr)
        got = json.loads(p.stdout)["outputs"][0]
        assert got["dtype"] == dt and got["data"] in ([1] * 5, [True] * 5, [1.0] * 5), (dt, got)
    # settings reach the server: modes in the path, explain's path
    p = run(server, "call", "relu", "--arg", "rand:4", "--modes", "trace")
    assert p.returncode == 0 and "path: Mode [backend fallback]" in p.stdout
    p = run(server, "explain", "mm", "--arg", "rand:2x3", "--arg", "rand:3x4")
    assert p.returncode == 0 and json.loads(p.stdout)["path"] == "CPU [kernel]"


def test_exit_codes_say_what_failed(server):
    p = run(server, "call", "mm", "--arg", "rand:2x3", "--arg", "rand:4x5")
    assert p.returncode == 1 and "HTTP 422 mismatch" in p.stderr and "cannot be multiplied" in p.stderr
    p = run(server, "call", "no_such_op")
    assert p.returncode == 1 and "HTTP 404 not_found" in p.stderr
    p = run(server, "call", "relu", "--arg", "rand:4:float99")
    assert p.returncode == 2 and "unknown dtype" in p.stderr
    p = run(server, "frobnicate")
    assert p.returncode == 2
    p = subprocess.run([CLI, "--url", "http://127.0.0.1:1", "ops"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 3 and "connect" in p.stderr.lower()
    # OD_URL is the default address
    p = subprocess.run([CLI, "ops"], capture_output=True, text=True, timeout=30, env=dict(os.environ, OD_URL=server.url))
    assert p.returncode == 0


def relu_requests(server):
    d = server.get("/v1/stats").json()
    return sum(o["requests"] for o in d["ops"] if o["op"] == "aten::relu")


def test_load_counts_formats_and_split(server, tmp_path):
    before = relu_requests(server)
    p = run(server, "load", "relu", "--arg", "rand:64:float32", "--connections", "3", "--count", "500",
            "--format", "json")
    assert p.returncode == 0, p.stderr
    pt = json.loads(p.stdout)[0]
    assert pt["requests"] == 500 and pt["ok"] == 500 and pt["statuses"] == {"200": 500}
    assert relu_requests(server) - before == 500  # exactly what the server counted
    lat = pt["latency_ms"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    su = pt["server_us_per_request"]
    assert su["dispatch"] > 0 and su["decode"] > 0 and su["e2e"] >= su["dispatch"]
    # a sweep, as CSV, and its plot
    png = tmp_path / "load.png"
    p = run(server, "load", "relu", "--arg", "rand:{n}:float32", "--count", "200", "--sweep", "n=16,4096",
            "--format", "csv", "--plot", str(png))
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    assert [r["point"] for r in rows] == ["n=16", "n=4096"] and all(int(r["requests"]) == 200 for r in rows)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # errors are counted by status and the exit code says so
    p = run(server, "load", "mm", "--arg", "rand:2x3", "--arg", "rand:4x5", "--count", "20", "--format", "json")
    assert p.returncode == 1
    assert json.loads(p.stdout)[0]["statuses"] == {"422": 20}


def test_open_loop_latency_includes_a_stall(make_server):
    srv = make_server()
    # 200 requests/s for 3 s; the server stops for one second in the middle:
    # the requests due meanwhile wait, and their latency (from when each was
    # due) shows it; a closed loop would have sent only a handful of them
    proc = subprocess.Popen([CLI, "--url", srv.url, "load", "relu", "--arg", "rand:16:float32", "--rate", "200",
                             "--duration", "3", "--connections", "8", "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    srv.proc.send_signal(signal.SIGSTOP)
    time.sleep(1.0)
    srv.proc.send_signal(signal.SIGCONT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    pt = json.loads(out)[0]
    # ~600 requests were due; ~200 of them during the stall
    assert pt["requests"] >= 550, pt
    assert pt["latency_ms"]["max"] >= 800, pt["latency_ms"]
    assert pt["latency_ms"]["p90"] >= 200, pt["latency_ms"]
    # the same stall in a closed loop: its p90 does not see it
    proc = subprocess.Popen([CLI, "--url", srv.url, "load", "relu", "--arg", "rand:16:float32", "--duration", "3",
                             "--connections", "1", "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    srv.proc.send_signal(signal.SIGSTOP)
    time.sleep(1.0)
    srv.proc.send_signal(signal.SIGCONT)
    out, err = proc.communicate(timeout=60)
    closed = json.loads(out)[0]
    assert closed["latency_ms"]["max"] >= 800 and closed["latency_ms"]["p90"] < 50, closed["latency_ms"]
