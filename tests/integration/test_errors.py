"""Bad input of every kind: the right status, {"error": {"code", "message"}}
naming what was wrong, and a server that keeps serving everyone else."""

import json
import socket
import threading
import time

import numpy as np
import pytest
import requests

from conftest import error_message, slow_mm, slow_mm_size, tensor, validate, wait_running

JSON = {"Content-Type": "application/json"}


def err(resp, status, *fragments, path=None, method="POST"):
    """Checks an error answer; returns {"code", "message"} (code None on /v2,
    whose protocol has only the message)."""
    assert resp.status_code == status, f"expected {status}, got {resp.status_code}: {resp.text[:500]}"
    msg = error_message(resp)
    for f in fragments:
        assert f in msg, (f, msg)
    if path:
        validate(resp, method, path)
    e = resp.json()["error"]
    return e if isinstance(e, dict) else {"code": None, "message": e}


def test_malformed_json(server):
    for bad in (b"{", b'{"args": [1,]}', b"{'args': []}", b'{"args": [01]}', b"[1] 2", b"nul",
                b'{"args": "\x01"}', b'{"args":1}}'):
        e = err(server.post("/v1/ops/relu", data=bad, headers=JSON), 400, "invalid JSON",
                path="/v1/ops/relu")
        assert e["code"] == "invalid_argument"


def test_empty_body(server):
    err(server.post("/v1/ops/relu", data=b"", headers=JSON), 400, "empty body", path="/v1/ops/relu")
    err(server.post("/v1/ops/relu", data=b"  \n ", headers=JSON), 400, "empty body")
    err(server.post("/v2/models/relu/infer", data=b"", headers=JSON), 400, "empty body")


def test_invalid_utf8(server):
    for bad in (b'{"args": ["\xff"]}', b'{"args": ["\xc0\xaf"]}', b'{"args": ["\xed\xa0\x80"]}',
                b'{"\xfe": 1}', b'{"args": ["\\ud800"]}', b'{"args": ["\\u0000"]}'):
        err(server.post("/v1/ops/relu", data=bad, headers=JSON), 400, "invalid JSON")


def test_deep_nesting(server):
    deep = b"[" * 10000 + b"]" * 10000
    err(server.post("/v1/ops/relu", data=deep, headers=JSON), 400, "nesting deeper than")
    deep = b'{"args": [' + b'{"a":' * 10000 + b"1" + b"}" * 10000 + b"]}"
    err(server.post("/v1/ops/relu", data=deep, headers=JSON), 400, "nesting deeper than")
    # deep lists inside "data" stop at the rank limit
    data = b"[" * 5000 + b"1" + b"]" * 5000
    r = server.post("/v1/ops/relu", data=b'{"args": [{"data": ' + data + b"}]}", headers=JSON)
    assert r.status_code in (400, 413), r.text
    assert server.alive()


def test_unknown_dtype(server):
    e = err(server.call("relu", {"dtype": "float31", "shape": [1], "data": [1]}), 400,
            "argument 'self'", "unknown dtype 'float31'", path="/v1/ops/relu")
    assert e["code"] == "invalid_argument"
    err(server.call("relu", {"dtype": 7, "shape": [1], "data": [1]}), 400, "dtype must be a string")


def test_shape_mismatch(server):
    err(server.call("relu", {"dtype": "float32", "shape": [2, 3], "data": [1, 2, 3]}), 422,
        "argument 'self'", "data has 3 elements but shape [2, 3] needs 6", path="/v1/ops/relu")
    err(server.call("relu", {"dtype": "float32", "shape": [3, 2], "data": [[1, 2, 3], [4, 5, 6]]}), 422,
        "nested data has shape [2, 3]")
    err(server.call("relu", {"data": [[1, 2], [3]]}), 422, "ragged")
    err(server.call("relu", {"dtype": "float32", "shape": [-1], "data": []}), 422, "shape[0]")
    err(server.call("mm", tensor(np.ones((2, 3), np.float32)), tensor(np.ones((2, 3), np.float32))), 422)
    err(server.call("add", tensor(np.ones(3, np.float32)), tensor(np.ones(4, np.float32))), 422)


def test_declared_shape_of_2_pow_40_elements(server):
    t = {"dtype": "float32", "shape": [1 << 20, 1 << 20], "data": [1.0]}
    e = err(server.call("relu", t), 413, "argument 'self'", "1099511627776 elements", path="/v1/ops/relu")
    assert e["code"] == "too_large"
    # the same shape in a binary header is refused before any data is read
    h = json.dumps({"args": [{"dtype": "float32", "shape": [1 << 20, 1 << 20],
                              "parameters": {"binary_data_size": 4}}]}).encode()
    r = server.post("/v1/ops/relu", data=h + b"\0\0\0\0",
                    headers={"Content-Type": "application/octet-stream",
                             "Inference-Header-Content-Length": str(len(h))})
    err(r, 413, "1099511627776 elements")
    # overflow of int64 itself
    t = {"dtype": "float32", "shape": [1 << 40, 1 << 40, 1 << 40], "data": [1.0]}
    err(server.call("relu", t), 413)
    assert server.alive()


def test_element_out_of_range_for_dtype(server):
    err(server.call("relu", {"dtype": "uint8", "shape": [2], "data": [1, 300]}), 422,
        "argument 'self'", "300", "uint8")
    err(server.call("relu", {"dtype": "int32", "shape": [2], "data": [1, 1.5]}), 422, "not an integer")
    err(server.call("relu", {"dtype": "float32", "shape": [2], "data": [1, "x"]}), 422, "data[1]")


def test_argument_errors_name_the_argument(server):
    a = tensor(np.ones(3, np.float32))
    err(server.call("add.Tensor", a, "x"), 422, "argument 'other' (position 2) must be Tensor, not string")
    err(server.call("add.Tensor", a), 422, "missing required argument 'other'")
    err(server.call("add.Tensor", a, a, kwargs={"alpah": 1}), 422, "unexpected keyword argument 'alpah'")
    err(server.call("add.Tensor", a, a, kwargs={"other": a}), 422, "multiple values for argument 'other'")
    err(server.call("add.Tensor", a, a, 2), 422, "positional argument")
    err(server.call("softmax.int", a, 1.5), 422, "argument 'dim' (position 2) must be int, not float")
    err(server.call("sum.dim_IntList", a, ["x"]), 422, "argument 'dim'", "element 0")
    err(server.call("zeros", [2], kwargs={"dtype": "nope"}), 400, "unknown dtype 'nope'")
    err(server.post("/v1/ops/relu", {"args": [a], "kwarg": {}}), 400, "unknown field 'kwarg'")
    err(server.post("/v1/ops/relu", {"args": {"self": a}}), 400, "\"args\" must be a list")
    err(server.post("/v1/ops/relu", [a]), 400, "must be a JSON object")


def test_unknown_operator_and_route(server):
    e = err(server.call("no_such_op", 1), 404, "unknown operator 'no_such_op'", path="/v1/ops/no_such_op")
    assert e["code"] == "not_found"
    err(server.call("add.Nope", 1), 404, "unknown operator")
    r = server.get("/v1/nothing")
    err(r, 404, "no route")
    r = server.get("/v1/ops/no_such_op")
    err(r, 404, "unknown operator", path="/v1/ops/no_such_op", method="GET")


def test_wrong_method(server):
    r = server.session.put(server.url + "/v1/ops/add", json={})
    err(r, 405, "method PUT is not allowed")
    assert "POST" in r.headers["Allow"]
    r = server.session.delete(server.url + "/v1/stats")
    err(r, 405)
    r = server.get("/v1/stats/reset")
    err(r, 405)
    r = server.post("/v1/keys", {})
    err(r, 405)


def test_wrong_content_type(server):
    r = server.post("/v1/ops/relu", data=b'{"args": []}', headers={"Content-Type": "text/plain"})
    e = err(r, 415, "text/plain", path="/v1/ops/relu")
    assert e["code"] == "unsupported_media_type"
    r = server.post("/v1/ops/relu", data=b"args=1",  # what curl -d sends
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    err(r, 415)


def test_no_kernel_is_501(server):
    ops = server.get("/v1/ops").json()["operators"]
    for group in ops:
        for o in group["overloads"]:
            if "CPU" not in o["table"] and "Tensor self" in o["schema"] and "Tensor(a) self" not in o["schema"]:
                args = [tensor(np.ones(2, np.float32))]
                r = server.call(o["name"], *args)
                if r.status_code == 501:
                    e = err(r, 501, "Could not run", "CPU")
                    assert e["code"] == "no_kernel"
                    return
    pytest.skip("every operator with a Tensor self has a CPU kernel; 501 is covered by requires_grad "
                "calls while autograd kernels are missing")


def test_cuda_unavailable_is_503(server):
    dev = server.get("/v1/devices").json()
    if dev["cuda"]["available"]:
        pytest.skip("this host has CUDA")
    r = server.call("relu", tensor(np.ones(2, np.float32)), device="cuda")
    e = err(r, 503, "CUDA unavailable", path="/v1/ops/relu")
    assert e["code"] == "device_unavailable"
    assert dev["cuda"]["reason"] in e["message"]
    err(server.call("relu", tensor(np.ones(2, np.float32)), device="cuda:3"), 503)
    err(server.call("relu", tensor(np.ones(2, np.float32)), device="tpu"), 400)
    # "auto" falls back to the CPU
    r = server.call("relu", tensor(np.ones(2, np.float32)), device="auto")
    assert r.status_code == 200 and r.json()["dispatch"]["device"] == "cpu"


def test_truncated_body_then_close(server):
    """A client that promises more body than it sends and goes away."""
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(b"POST /v1/ops/relu HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100000\r\n\r\n{\"args\": [{\"data\": [1, 2,")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"GARBAGE\r\n\r\n")
        s.recv(100)
    assert server.alive()


def test_bad_requests_do_not_disturb_others(server, rng):
    a = rng.standard_normal(64).astype(np.float32)
    good = {"args": [tensor(a)]}
    stop = threading.Event()
    failures = []

    def hammer_bad():
        bads = [b"{", b"[" * 10000, b'{"args": ["\xff"]}', b'{"args":[{"dtype":"float32","shape":[1048576,1048576],"data":[1]}]}']
        i = 0
        while not stop.is_set():
            try:
                requests.post(server.url + "/v1/ops/relu", data=bads[i % len(bads)], headers=JSON, timeout=30)
            except requests.RequestException:
                pass
            i += 1

    threads = [threading.Thread(target=hammer_bad) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        sess = requests.Session()
        for _ in range(100):
            r = sess.post(server.url + "/v1/ops/relu", json=good, timeout=30)
            if r.status_code != 200:
                failures.append(r.text)
            else:
                np.testing.assert_array_equal(np.array(r.json()["outputs"][0]["data"], np.float32),
                                              np.maximum(a, 0))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not failures


# ---- limits (servers with small caps) ------------------------------------------------

def test_body_too_large_413(make_server):
    s = make_server("--max-body-bytes", "1K")
    big = {"args": [tensor(np.ones(1000, np.float32))]}
    r = s.post("/v1/ops/relu", big)
    e = err(r, 413, "exceeds the limit of 1024 bytes")
    assert e["code"] == "too_large"
    # without Content-Length (chunked): the cap is enforced while reading
    def gen():
        for _ in range(100):
            yield b" " * 100
    r = s.post("/v1/ops/relu", data=gen(), headers=JSON)
    err(r, 413)
    # a huge Content-Length is refused before reading anything
    raw = s.raw(b"POST /v1/ops/relu HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000000000000\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 413"), raw[:200]
    assert s.alive()


def test_rank_elements_and_output_caps(make_server):
    s = make_server("--max-rank", "3", "--max-elements", "1000", "--max-output-bytes", "4096")
    err(s.call("relu", {"dtype": "float32", "shape": [1, 1, 1, 1], "data": [1]}), 413, "rank 4")
    err(s.call("relu", {"data": [[[[1]]]]}), 413, "3 dimensions")
    err(s.call("relu", tensor(np.ones(1001, np.float32))), 413, "limit")
    # 16x16 inputs are fine; their 32x32 product's 4 KiB... 40x25 @ 25x40 = 6400 bytes > 4096
    a = np.ones((40, 25), np.float32)
    e = err(s.call("mm", tensor(a), tensor(a.T.copy())), 413, "exceeds the limit of 4096 bytes")
    assert e["code"] == "too_large"
    r = s.post("/v1/ops/mm/explain", {"args": [tensor(a), tensor(a.T.copy())]})
    assert r.status_code == 200 and r.json()["within_limits"] is False
    assert r.json()["output_bytes"] == 40 * 40 * 4
    assert s.alive()


def test_json_depth_flag(make_server):
    s = make_server("--max-json-depth", "8")
    err(s.post("/v1/ops/relu", data=b'{"args":[[[[[[[[[[1]]]]]]]]]]}', headers=JSON), 400,
        "nesting deeper than 8")


def test_per_ip_connection_cap(make_server):
    s = make_server("--max-connections-per-ip", "2")
    socks = [socket.create_connection(("127.0.0.1", s.port), timeout=5) for _ in range(2)]
    try:
        time.sleep(0.2)
        third = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        third.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            data = third.recv(100)
        except (ConnectionResetError, socket.timeout):
            data = b""
        third.close()
        assert data == b"", "a third connection from the same address was served"
    finally:
        for x in socks:
            x.close()
    time.sleep(0.2)
    assert s.alive()


def test_connection_cap(make_server):
    s = make_server("--max-connections", "3", "--max-connections-per-ip", "0")
    socks = [socket.create_connection(("127.0.0.1", s.port), timeout=5) for _ in range(3)]
    try:
        time.sleep(0.2)
        extra = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        extra.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            data = extra.recv(100)
        except (ConnectionResetError, socket.timeout):
            data = b""
        extra.close()
        assert data == b"", "a connection beyond --max-connections was served"
        # the admitted ones are served
        socks[0].sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert socks[0].recv(100).startswith(b"HTTP/1.1 200")
    finally:
        for x in socks:
            x.close()
    time.sleep(0.2)
    assert s.alive()


def test_idle_timeout(make_server):
    s = make_server("--idle-timeout", "1")
    c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    t0 = time.time()
    try:
        data = c.recv(100)  # the server closes the idle connection
    except ConnectionResetError:
        data = b""
    assert data == b"" and time.time() - t0 < 8
    c.close()


def test_request_timeout(make_server):
    s = make_server("--request-timeout", "1")
    c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    c.sendall(b"POST /v1/ops/relu HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 50\r\n\r\n{\"args\":")
    time.sleep(1.5)
    closed = False
    try:
        c.sendall(b" [")
        got = c.recv(100)
        closed = got == b"" or got.startswith(b"HTTP/1.1 408")  # answered 408, then closed
    except (ConnectionResetError, BrokenPipeError):
        closed = True
    c.close()
    assert closed, "a request that took longer than --request-timeout was not cut off"
    assert s.alive()


def test_sigterm_finishes_running_calls(make_server):
    """A call whose handler runs when SIGTERM comes is finished and answered;
    new connections are refused meanwhile; the exit status is 0."""
    s = make_server()
    n = slow_mm_size(s, 2.5)
    box = []
    t = threading.Thread(target=lambda: box.append(slow_mm(s, n)))
    t.start()
    wait_running(s)  # its handler runs (a body still arriving would be closed at once)
    s.proc.send_signal(15)
    time.sleep(0.3)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
    t.join(timeout=60)
    assert box and box[0].status_code == 200
    got = np.frombuffer(box[0].content[int(box[0].headers["Inference-Header-Content-Length"]):], np.int64)
    assert got.size == n * n and np.all(got == n)
    s.proc.wait(timeout=30)
    assert s.proc.returncode == 0


def test_sigterm_is_prompt_after_requests_that_never_complete(make_server):
    """Requests still arriving (a Content-Length never met, a client that
    half-closes) and idle keep-alive connections do not hold the drain:
    they are closed at once, and SIGTERM exits 0 within 2 s."""
    s = make_server("--drain-timeout", "30")
    held = []
    for k in range(3):
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        c.sendall(b"POST /v1/ops/relu HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 5000\r\n\r\n{\"args\":")
        if k == 2:
            c.shutdown(socket.SHUT_WR)  # half-closed
        held.append(c)
    idle = socket.create_connection(("127.0.0.1", s.port), timeout=10)  # keep-alive, idle
    idle.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
    assert idle.recv(1000).startswith(b"HTTP/1.1 200")
    half = socket.create_connection(("127.0.0.1", s.port), timeout=10)  # headers never end
    half.sendall(b"GET /v1/ops HTTP/1.1\r\nHost: x\r\n")
    time.sleep(0.3)
    t0 = time.time()
    s.proc.send_signal(15)
    s.proc.wait(timeout=30)
    assert time.time() - t0 < 2, f"SIGTERM took {time.time() - t0:.1f} s"
    assert s.proc.returncode == 0
    for c in held[:2]:  # answered 503 before they were closed, where possible
        c.settimeout(2)
        try:
            got = c.recv(1000)
        except OSError:
            got = b""
        assert got == b"" or got.startswith(b"HTTP/1.1 503"), got[:100]
    for c in held + [idle, half]:
        c.close()


def test_cat_of_an_empty_list_is_the_callers_error(server):
    """torch.cat([]) raises; no tensor argument means no backend, and that is
    the request's fault (422), not a missing kernel (501)."""
    r = server.call("cat", [])
    assert r.status_code == 422, r.text
    assert "There were no tensor arguments to this function" in error_message(r)
    assert server.alive()


def test_a_required_device_is_not_filled_from_the_call(server):
    # to.device's device is required (torch: missing argument); a factory's
    # optional device still defaults to the call's
    r = server.post("/v1/ops/to.device", {"args": [tensor(np.ones(2, np.float32))], "kwargs": {"dtype": "float64"}})
    assert r.status_code in (400, 422) and "device" in error_message(r), r.text
    r = server.post("/v1/ops/zeros", {"args": [[2]]})
    assert r.status_code == 200 and r.json()["outputs"][0]["data"] == [0.0, 0.0], r.text
