"""Requests an attacker would send: each one once crashed the server, read
another client's bytes, or made it spend memory or time out of proportion to
the request (issue "Do first"). Every test checks the answer, that the
server keeps serving, and, for the memory ones, the server's peak RSS.

Peak RSS is read from /proc/PID/status (VmHWM) after resetting it with
/proc/PID/clear_refs, so each measurement covers one request only.
"""

import json
import socket
import threading
import time

import numpy as np
import pytest
import requests

from conftest import binary_body, from_json, is_sanitized, parse_binary_response, tensor

MiB = 1 << 20
JSON = {"Content-Type": "application/json"}


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


class PeakRSS:
    """Peak RSS growth (bytes) of a process over a with-block."""

    def __init__(self, server):
        self.pid = server.proc.pid

    def __enter__(self):
        with open(f"/proc/{self.pid}/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
        self.base = status_kb(self.pid, "VmRSS") * 1024
        return self

    def __exit__(self, *exc):
        self.growth = status_kb(self.pid, "VmHWM") * 1024 - self.base
        return False


def post_raw(server, path, data, headers=None, timeout=60):
    return requests.post(server.url + path, data=data, headers=headers or JSON, timeout=timeout)


def error_of(r, status, code=None):
    """The error message; /v1 errors carry a code, /v2 ones may be a bare string."""
    assert r.status_code == status, (r.status_code, r.text[:500])
    err = r.json()["error"]
    if isinstance(err, str):
        return err
    if code:
        assert err["code"] == code, err
    return err["message"]


# ---- 1. sizes that overflow -----------------------------------------------------------


@pytest.mark.parametrize("shape", [[2147483648, 2147483648], [1 << 40, 1 << 20], [1 << 62, 1]])
@pytest.mark.parametrize("accept", ["application/json", "application/octet-stream"])
def test_expand_to_an_absurd_view_is_413(server, shape, accept):
    body = {"args": [tensor(np.ones(1, np.float32)), shape]}
    r = post_raw(server, "/v1/ops/expand", json.dumps(body), {**JSON, "Accept": accept})
    assert "output limit" in error_of(r, 413, "too_large")
    assert server.alive()


def test_expand_of_a_bigger_dtype_and_rank(server):
    body = {"args": [tensor(np.ones((1, 1, 1), np.float64)), [1 << 21, 1 << 21, 1 << 21]]}
    error_of(post_raw(server, "/v1/ops/expand", json.dumps(body)), 413, "too_large")
    assert server.alive()


def test_views_still_encode_exactly(server, rng):
    """The encoder gathers views in chunks now: check it against numpy."""
    a = rng.standard_normal((3, 1)).astype(np.float32)
    r = server.call("expand", tensor(a), [3, 20000])
    assert r.status_code == 200, r.text[:300]
    np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), np.broadcast_to(a, (3, 20000)))
    b = rng.integers(-100, 100, (5, 7, 3000)).astype(np.int64)
    r = server.call("permute", tensor(b), [2, 0, 1])
    assert r.status_code == 200, r.text[:300]
    np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), b.transpose(2, 0, 1))
    # the same views as binary data
    for op, args, want in [("expand", [tensor(a), [3, 20000]], np.broadcast_to(a, (3, 20000))),
                           ("permute", [tensor(b), [2, 0, 1]], b.transpose(2, 0, 1))]:
        r = server.post(f"/v1/ops/{op}", {"args": args, "parameters": {"binary_data_output": True}})
        assert r.status_code == 200
        hdr, blobs = parse_binary_response(r)
        got = np.frombuffer(blobs[0], dtype=want.dtype).reshape(hdr["outputs"][0]["shape"])
        np.testing.assert_array_equal(got, want)


# ---- 2. duplicate keys ---------------------------------------------------------------------


def binary_post(server, path, header_text, payload):
    data = header_text.encode() + payload
    return requests.post(server.url + path, data=data, timeout=60,
                         headers={"Content-Type": "application/octet-stream",
                                  "Inference-Header-Content-Length": str(len(header_text))})


def test_duplicate_parent_key_of_a_binary_tensor(server):
    j = ('{"args":[{"dtype":"float32","shape":[1],"parameters":{"binary_data_size":4}}],'
         '"args":[]}')
    r = binary_post(server, "/v1/ops/relu", j, b"\0\0\x80\x3f")
    assert "duplicate key 'args'" in error_of(r, 400)
    j = ('{"inputs":[{"name":"self","datatype":"FP32","shape":[1],'
         '"parameters":{"binary_data_size":4}}],"inputs":[]}')
    r = binary_post(server, "/v2/models/relu/infer", j, b"\0\0\x80\x3f")
    assert "duplicate key 'inputs'" in error_of(r, 400)
    assert server.alive()


@pytest.mark.parametrize("text", [
    '{"args":[{"dtype":"float32","shape":[1],"data":[1],"data":[2]}]}',
    '{"args":[{"dtype":"float32","dtype":"int64","shape":[1],"data":[1]}]}',
    '{"args":[{"dtype":"float32","shape":[1],"parameters":{"binary_data_size":4},'
    '"parameters":{"binary_data_size":4}}]}',
    '{"kwargs":{"alpha":1,"alpha":2},"args":[]}',
])
def test_duplicate_keys_anywhere(server, text):
    r = post_raw(server, "/v1/ops/relu", text)
    assert "duplicate key" in error_of(r, 400)
    assert server.alive()


# ---- 3. no bytes from one request reach another ------------------------------------------------


SECRET = b"SECRET-of-another-client-"


def empty_bytes(server, n):
    r = requests.post(server.url + "/v1/ops/empty.memory_format", timeout=60,
                      headers={**JSON, "Accept": "application/octet-stream"},
                      data=json.dumps({"args": [[n]], "kwargs": {"dtype": "uint8"}}))
    assert r.status_code == 200, r.text[:300]
    _, blobs = parse_binary_response(r)
    return blobs[0]


@pytest.mark.parametrize("size", [100, 4000, 100_000, 700_000, 1_048_576 - 300, 3_000_000])
def test_empty_never_returns_a_request_body(server, size):
    # a body of about `size` bytes full of the secret (a valid call, so it is
    # parsed, answered and its buffer freed like any other)
    filler = (SECRET * (size // len(SECRET) + 1))[:max(size - 40, 1)].decode()
    for _ in range(3):
        r = post_raw(server, "/v1/ops/relu", json.dumps({"args": [], "id": filler}))
        assert r.status_code in (400, 422)
        for n in {size, size - 64, size + 64, 1 << (size.bit_length() - 1)}:
            got = empty_bytes(server, n)
            assert len(got) == n
            assert SECRET[:8] not in got
            assert got.count(0) == n, "empty returned bytes some earlier request wrote"


@pytest.mark.parametrize("n", [16, 50_000, 1 << 20])
def test_empty_never_returns_an_earlier_output(server, n):
    for _ in range(3):
        r = server.post("/v1/ops/full", {"args": [[n], 77], "kwargs": {"dtype": "uint8"},
                                         "parameters": {"binary_data_output": True}})
        assert r.status_code == 200
        got = empty_bytes(server, n)
        assert got.count(0) == n


def test_empty_in_json_and_other_dtypes(server):
    r = server.call("full", [300_000], 3.5)
    assert r.status_code == 200
    for dt in ["float32", "int64", "float64", "bool"]:
        r = server.call("empty.memory_format", [300_000], kwargs={"dtype": dt})
        assert r.status_code == 200
        assert not np.any(from_json(r.json()["outputs"][0]))


# ---- 4. the output cap covers the response as sent ---------------------------------------------


def test_zeros_whose_json_exceeds_the_cap(make_server):
    s = make_server("--max-output-bytes", "64M")
    with PeakRSS(s) as m:
        r = s.post("/v1/ops/zeros", {"args": [[1 << 26]], "kwargs": {"dtype": "bool"}})
        error_of(r, 413, "too_large")
    # the 64 MiB output itself may be made; an 8x JSON rendering of it may not
    assert m.growth < 160 * MiB, f"peak RSS grew by {m.growth / MiB:.0f} MiB"
    # the same output as binary data is within the cap
    r = s.post("/v1/ops/zeros", {"args": [[1 << 26]], "kwargs": {"dtype": "bool"},
                                 "parameters": {"binary_data_output": True}})
    assert r.status_code == 200 and len(r.content) > 1 << 26
    assert s.alive()


def test_json_that_grows_past_the_cap_while_encoding(make_server, rng):
    s = make_server("--max-output-bytes", "1M")
    a = rng.standard_normal(150_000).astype(np.float32)  # 600 KB binary, ~1.6 MB as JSON
    h, body = binary_body({"args": [{"dtype": "float32", "shape": [a.size],
                                     "parameters": {"binary_data_size": a.nbytes}}]}, [a])
    hdrs = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(h))}
    r = requests.post(s.url + "/v1/ops/neg", data=body, headers=hdrs, timeout=60)
    assert "output limit" in error_of(r, 413, "too_large")
    r = requests.post(s.url + "/v1/ops/neg", data=body, timeout=60,
                      headers={**hdrs, "Accept": "application/octet-stream"})
    assert r.status_code == 200
    _, blobs = parse_binary_response(r)
    np.testing.assert_array_equal(np.frombuffer(blobs[0], np.float32), -a)
    # and on /v2 with the protocol's own error shape
    r = s.post("/v2/models/neg/infer", {"inputs": [tensor(a, oip=True, name="self")]})
    assert "output limit" in error_of(r, 413)


# ---- 6. JSON that costs far more than its size --------------------------------------------------


def test_unknown_top_level_field_is_refused_before_it_is_built(make_server):
    s = make_server()
    text = '{"x":[' + ",".join(["{}"] * 1_000_000) + '],"args":[]}'  # 3 MB
    with PeakRSS(s) as m:
        r = post_raw(s, "/v1/ops/relu", text)
        assert "unknown field 'x'" in error_of(r, 400, "invalid_argument")
    # the body itself is 3 MB; building the values would cost ~230 MB
    assert m.growth < 40 * MiB, f"peak RSS grew by {m.growth / MiB:.0f} MiB"
    assert s.alive()


@pytest.mark.parametrize("path,key", [("/v1/ops/relu", "args"), ("/v2/models/relu/infer", "inputs")])
def test_json_values_are_bounded(make_server, path, key):
    s = make_server()
    text = '{"%s":[[' % key + ",".join(["{}"] * 1_000_000) + "]]}"
    with PeakRSS(s) as m:
        r = post_raw(s, path, text)
    assert r.status_code == 413, r.text[:300]
    assert m.growth < 40 * MiB, f"peak RSS grew by {m.growth / MiB:.0f} MiB"
    s2 = make_server("--max-json-values", "10")
    r = s2.call("add", tensor(np.ones(3, np.float32)), tensor(np.ones(3, np.float32)))
    assert r.status_code == 200  # tensor data does not count
    r = s2.call("sum", tensor(np.ones(3, np.float32)), [0] * 12)
    assert "--max-json-values" in error_of(r, 413)


# ---- 9. smaller ones -----------------------------------------------------------------------


@pytest.mark.parametrize("args", [[0.0, 9223372036854775808.0], [-9223372036854775808.0, 1.0],
                                  [0.0, 1e300], [0.0, 9223372036854775807.0, 0.5]])
def test_arange_sizes_past_int64(server, args):
    r = server.call("arange.start_step" if len(args) == 3 else "arange.start", *args)
    assert r.status_code in (400, 413), r.text[:300]
    assert server.alive()
