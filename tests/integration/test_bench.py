"""POST /v1/bench and `opdispatch bench`: refused unless enabled, inputs made
on the server, the cost model against hand counts, bounded runs, the
errors, and the CLI's roofline table and chart."""

import json
import subprocess
import time

import pytest

from conftest import ROOT, error_message, validate

CLI = str(ROOT / "build" / "opdispatch")


def gen(*shape, kind="rand", dtype="float32"):
    return {"generate": kind, "shape": list(shape), "dtype": dtype}


def test_refused_unless_enabled(server):
    r = server.post("/v1/bench", {"op": "relu", "args": [gen(4)]})
    assert r.status_code == 403 and "--enable-bench" in error_message(r)
    assert r.json()["error"]["code"] == "forbidden"


@pytest.fixture(scope="module")
def bench_server():
    from conftest import Server
    s = Server("--enable-bench")
    yield s
    s.stop()


def bench(srv, body, expect=200):
    r = srv.post("/v1/bench", body)
    assert r.status_code == expect, r.text
    if expect == 200:
        validate(r, "POST", "/v1/bench")
    return r.json()


def test_cost_model_against_hand_counts(bench_server):
    m, k, n = 48, 32, 16
    b = bench(bench_server, {"op": "mm", "args": [gen(m, k), gen(k, n)], "iterations": 5})
    assert b["cost"]["flops"] == 2 * m * k * n
    assert b["cost"]["bytes"] == 4 * (m * k + k * n + m * n)
    assert b["iterations"] == 5 and 0 < b["kernel_us"]["min"] <= b["kernel_us"]["median"] <= b["kernel_us"]["max"]
    assert b["achieved"]["gflops"] == pytest.approx(2 * m * k * n / (b["kernel_us"]["median"] * 1e3), rel=1e-3)
    assert b["ceiling"]["gbps"] > 0 and b["ceiling"]["gflops"] > 0 and b["bound"] in ("memory", "compute")
    # broadcasting: every input read once, the output written once
    b = bench(bench_server, {"op": "add", "args": [gen(100, 30), gen(30, dtype="float32")], "iterations": 3})
    assert b["cost"]["flops"] == 3000 and b["cost"]["bytes"] == 4 * (3000 + 30 + 3000)
    b = bench(bench_server, {"op": "sum", "args": [gen(1000, kind="ones", dtype="float64")], "iterations": 3})
    assert b["cost"]["flops"] == 1000 and b["cost"]["bytes"] == 8 * 1000 + 8
    b = bench(bench_server, {"op": "addmm", "args": [gen(16), gen(8, 4), gen(4, 16)], "iterations": 3})
    assert b["cost"]["flops"] == 2 * 8 * 4 * 16 + 2 * 8 * 16
    b = bench(bench_server, {"op": "bmm", "args": [gen(3, 8, 4), gen(3, 4, 5)], "iterations": 3})
    assert b["cost"]["flops"] == 2 * 3 * 8 * 4 * 5
    # no model: bytes only
    b = bench(bench_server, {"op": "transpose", "args": [gen(4, 6), 0, 1], "iterations": 3})
    assert b["cost"]["flops"] is None and b["fraction"]["compute"] is None
    # an inline tensor works too
    b = bench(bench_server, {"op": "relu", "args": [{"dtype": "float32", "shape": [3], "data": [1, -2, 3]}],
                             "iterations": 2, "warmup": 0})
    assert b["iterations"] == 2 and b["warmup"] == 0


def test_bounds_and_errors(bench_server):
    for body, code in (({"op": "relu", "args": [gen(4)], "iterations": 0}, 400),
                       ({"op": "relu", "args": [gen(4)], "iterations": 10 ** 6}, 400),
                       ({"op": "relu", "args": [gen(4, kind="wat")]}, 400),
                       ({"op": "relu", "args": [gen(4, dtype="float99")]}, 400),
                       ({"op": "relu", "args": [gen(-1)]}, 400),
                       ({"op": "no_such_op", "args": []}, 404),
                       ({"op": "mm", "args": [gen(2, 3), gen(4, 5)]}, 422),
                       ({"op": "relu", "args": [gen(10 ** 9, 10 ** 9)]}, 413),
                       ({"op": "relu", "args": [gen(4)], "extra": 1}, 400)):
        r = bench_server.post("/v1/bench", body)
        assert r.status_code == code, (body, r.text)
    # max_seconds bounds the run: far fewer than the iterations asked for
    b = bench(bench_server, {"op": "mm", "args": [gen(256, 256), gen(256, 256)], "iterations": 100000,
                             "max_seconds": 0.2})
    assert 1 <= b["iterations"] < 100000


def test_cli_roofline(bench_server, tmp_path):
    png = tmp_path / "roof.png"
    p = subprocess.run([CLI, "--url", bench_server.url, "bench", "relu", "--arg", "rand:{n}:float32", "--sizes",
                        "1e3..1e5", "--iterations", "5", "--plot", str(png)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    rows = [l.split() for l in p.stdout.splitlines()[1:]]
    assert [r[1] for r in rows] == ["1000", "10000", "100000"] and all(r[0] == "aten::relu" for r in rows)
    assert all(r[-1] == "memory" for r in rows)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    p = subprocess.run([CLI, "--url", bench_server.url, "bench", "mm", "--arg", "rand:64x32", "--arg", "rand:32x16",
                        "--iterations", "3", "--format", "json"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and json.loads(p.stdout)["cost"]["flops"] == 2 * 64 * 32 * 16


def test_load_runs_bounded_one_at_a_time(server, bench_server):
    r = server.post("/v1/load", {"op": "relu", "args": [gen(4)]})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    assert server.session.delete(server.url + "/v1/load").status_code == 403
    srv = bench_server
    assert srv.get("/v1/load").json()["state"] in ("idle", "done", "stopped")
    # a count-bounded run ends by itself with exactly that many calls
    r = srv.post("/v1/load", {"op": "add", "args": [gen(64), gen(64)], "count": 5000, "concurrency": 2})
    assert r.status_code == 202, r.text
    validate(r, "POST", "/v1/load")
    for _ in range(200):
        d = srv.get("/v1/load").json()
        if d["state"] != "running":
            break
        time.sleep(0.05)
    validate(srv.get("/v1/load"), "GET", "/v1/load")
    assert d["state"] == "done" and d["requests"] == 5000 and d["errors"] == 0, d
    assert 0 < d["latency_us"]["p50"] <= d["latency_us"]["p99"] <= d["latency_us"]["max"]
    assert d["op"] == "aten::add.Tensor" and d["concurrency"] == 2
    # one at a time; DELETE stops a long one early
    r = srv.post("/v1/load", {"op": "mm", "args": [gen(32, 32), gen(32, 32)], "duration_s": 60})
    assert r.status_code == 202
    r2 = srv.post("/v1/load", {"op": "relu", "args": [gen(4)]})
    assert r2.status_code == 503 and "already running" in error_message(r2)
    time.sleep(1.3)
    d = srv.get("/v1/load").json()
    assert d["state"] == "running" and d["requests"] > 0 and len(d["series"]) >= 1
    r = srv.session.delete(srv.url + "/v1/load")
    assert r.status_code == 200 and r.json()["state"] == "stopped" and r.json()["elapsed_s"] < 30
    for body in ({"op": "relu", "args": [gen(4)], "duration_s": 1000},
                 {"op": "relu", "args": [gen(4)], "concurrency": 64},
                 {"op": "relu", "args": [gen(4)], "count": -1}):
        assert srv.post("/v1/load", body).status_code == 400, body


def test_sigterm_ends_a_running_load_at_once(make_server):
    # a server-side load is not a request to drain: shutdown stops it first
    srv = make_server("--enable-bench")
    r = srv.post("/v1/load", {"op": "mm", "args": [gen(32, 32), gen(32, 32)], "duration_s": 120})
    assert r.status_code == 202
    time.sleep(0.5)
    t0 = time.monotonic()
    srv.stop(timeout=20)
    assert time.monotonic() - t0 < 10
