"""Statistics after known calls: /v1/stats, /metrics (parsed), reset."""

import math
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import requests

from conftest import tensor, validate


def op_entry(stats, name):
    for o in stats["ops"]:
        if o["op"] == name:
            return o
    return None


def key_entry(op, key):
    for k in op["keys"]:
        if k["key"] == key:
            return k
    return None


def check_hist(h, count):
    assert h["count"] == count
    if count:
        assert 0 <= h["min"] <= h["p50"] <= h["p90"] <= h["p99"] <= h["p999"] <= h["max"]
        assert h["min"] <= h["mean"] <= h["max"]
        assert math.isclose(h["mean"] * count, h["sum"], rel_tol=1e-3, abs_tol=1e-3)


def test_stats_after_known_calls(make_server, rng):
    s = make_server()  # a fresh server: nothing else counts here
    r = s.post("/v1/stats/reset", {})
    assert r.status_code == 200 and r.json() == {"reset": True}
    validate(r, "POST", "/v1/stats/reset")
    n_ok, n_bad = 7, 2
    bytes_in = bytes_out = 0
    for i in range(n_ok):
        a = rng.standard_normal(10 + i).astype(np.float32)
        b = rng.standard_normal(10 + i).astype(np.float32)
        assert s.call("add.Tensor", tensor(a), tensor(b)).status_code == 200
        bytes_in += a.nbytes + b.nbytes
        bytes_out += a.nbytes
    for _ in range(n_bad):
        r = s.call("add.Tensor", tensor(np.ones(3, np.float32)), tensor(np.ones(4, np.float32)))
        assert r.status_code == 422
    r = s.get("/v1/stats")
    assert r.status_code == 200
    validate(r, "GET", "/v1/stats")
    st = r.json()
    add = op_entry(st, "aten::add.Tensor")
    assert add is not None, st
    assert add["requests"] == n_ok + n_bad
    assert add["errors"] == n_bad
    assert add["bytes_in"] == bytes_in + n_bad * (12 + 16)
    assert add["bytes_out"] == bytes_out
    check_hist(add["e2e_us"], n_ok + n_bad)
    cpu = key_entry(add, "CPU")
    assert cpu["requests"] == n_ok + n_bad
    assert cpu["kernel_calls"] == n_ok + n_bad  # the failing ones reach the kernel (shape check)
    assert cpu["kernel_errors"] == n_bad
    check_hist(cpu["kernel_us"], n_ok + n_bad)
    assert cpu["kernel_us"]["max"] <= add["e2e_us"]["max"]
    routes = {x["route"]: x for x in st["routes"]}
    call_route = routes["POST /v1/ops/{op}"]
    assert call_route["statuses"] == {"200": n_ok, "422": n_bad}

    # a composite call counts the op it decomposes into, per key
    m = rng.standard_normal((3, 3)).astype(np.float32)
    assert s.call("matmul", tensor(m), tensor(m)).status_code == 200
    st = s.get("/v1/stats").json()
    mm = op_entry(st, "aten::mm")
    assert mm and mm["requests"] == 0 and key_entry(mm, "CPU")["kernel_calls"] == 1
    assert op_entry(st, "aten::matmul")["requests"] == 1

    # reset
    assert s.post("/v1/stats/reset", {}).status_code == 200
    st = s.get("/v1/stats").json()
    assert op_entry(st, "aten::add.Tensor") is None
    assert st["since_reset_s"] <= st["uptime_s"]


def parse_prometheus(text):
    """{(name, frozenset(labels)): value}, with HELP/TYPE checked."""
    samples = {}
    types = {}
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})? (\S+)$')
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            assert typ in ("counter", "gauge", "histogram", "summary", "untyped")
            types[name] = typ
            continue
        m = line_re.match(line)
        assert m, f"bad Prometheus line: {line!r}"
        name, labels = m.group(1), m.group(3) or ""
        lab = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels))
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in types or base in types, f"{name} has no # TYPE"
        samples[(name, lab)] = float(m.group(4))
    return samples, types


def test_metrics_match_stats(make_server, rng):
    s = make_server()
    for _ in range(5):
        a = rng.standard_normal(4).astype(np.float32)
        assert s.call("relu", tensor(a)).status_code == 200
    assert s.call("relu", {"dtype": "nope", "shape": [1], "data": [1]}).status_code == 400
    r = s.get("/metrics")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
    validate(r, "GET", "/metrics")
    samples, types = parse_prometheus(r.text)
    assert types["od_op_requests_total"] == "counter"
    assert types["od_op_request_duration_seconds"] == "histogram"
    lab = frozenset({("op", "aten::relu"), ("key", "CPU")})
    assert samples[("od_op_requests_total", lab)] == 6
    assert samples[("od_op_request_errors_total", lab)] == 1
    assert samples[("od_kernel_calls_total", lab)] == 5
    # histogram: cumulative, monotone, +Inf == count
    buckets = sorted(((float(dict(l)["le"]), v) for (n, l), v in samples.items()
                      if n == "od_kernel_duration_seconds_bucket" and lab <= l),
                     key=lambda x: x[0])
    assert buckets[-1][0] == math.inf and buckets[-1][1] == 5
    assert all(b1[1] <= b2[1] for b1, b2 in zip(buckets, buckets[1:]))
    assert samples[("od_kernel_duration_seconds_count", lab)] == 5
    assert samples[("od_kernel_duration_seconds_sum", lab)] > 0
    assert samples[("od_op_request_duration_seconds_count", lab)] == 6
    st = s.get("/v1/stats").json()
    relu = op_entry(st, "aten::relu")
    assert math.isclose(samples[("od_kernel_duration_seconds_sum", lab)] * 1e6,
                        key_entry(relu, "CPU")["kernel_us"]["sum"], rel_tol=1e-3, abs_tol=0.01)
    http = {dict(l)["status"]: v for (n, l), v in samples.items()
            if n == "od_http_requests_total" and dict(l)["route"] == "POST /v1/ops/{op}"}
    assert http == {"200": 5, "400": 1}
    assert samples[("od_uptime_seconds", frozenset())] > 0


def test_counting_under_concurrency(make_server, rng):
    s = make_server("--threads", "4")
    a = rng.standard_normal(16).astype(np.float32)
    body = {"args": [tensor(a)]}
    n = 200

    def one(_):
        r = requests.post(s.url + "/v1/ops/neg", json=body, timeout=60)
        assert r.status_code == 200

    with ThreadPoolExecutor(16) as ex:
        list(ex.map(one, range(n)))
    neg = op_entry(s.get("/v1/stats").json(), "aten::neg")
    assert neg["requests"] == n
    assert key_entry(neg, "CPU")["kernel_calls"] == n
    assert neg["bytes_in"] == n * a.nbytes
