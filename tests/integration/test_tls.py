"""HTTPS through libmicrohttpd's GnuTLS support (--tls-cert, --tls-key),
tried with curl and requests against a self-signed certificate made here by
the openssl command; with tokens; and request timeouts over TLS."""

import json
import os
import shutil
import socket
import ssl
import subprocess
import time

import numpy as np
import pytest
import requests

from conftest import SERVER_BIN, parse_binary_response

pytestmark = pytest.mark.skipif(not shutil.which("openssl") or not shutil.which("curl"),
                                reason="needs the openssl and curl commands")

TOKEN = "tls-token-0123456789abcdef"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    other = d / "other.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-out", str(other)], check=True, capture_output=True, timeout=60)
    return {"cert": str(cert), "key": str(key), "other_key": str(other), "dir": d}


@pytest.fixture
def tls(make_server, certs):
    s = make_server("--tls-cert", certs["cert"], "--tls-key", certs["key"], "--request-timeout", "2")
    s.session.verify = certs["cert"]
    return s


def curl(*args):
    return subprocess.run(["curl", "-sS", "--max-time", "20", *args], capture_output=True, text=True, timeout=30)


def test_listens_on_https(tls):
    assert tls.url.startswith("https://127.0.0.1:")
    assert "listening on https://" in tls.stdout()


def test_curl_against_the_self_signed_certificate(tls, certs):
    p = curl("--cacert", certs["cert"], "-o", "/dev/null", "-w", "%{http_code}", tls.url + "/v2/health/ready")
    assert p.stdout == "200", p.stderr
    p = curl("--cacert", certs["cert"], "-H", "Content-Type: application/json", "-d",
             '{"args": [{"dtype": "float32", "shape": [3], "data": [-1, 0, 2]}]}', tls.url + "/v1/ops/relu")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["outputs"][0]["data"] == [0, 0, 2]
    p = curl(tls.url + "/v2/health/ready")  # without the CA: curl refuses the certificate
    assert p.returncode == 60, (p.returncode, p.stderr)


def test_binary_request_and_response_over_tls(tls):
    a = (np.arange(300_000, dtype=np.float32) - 1000).reshape(600, 500)
    h = json.dumps({"args": [{"dtype": "float32", "shape": list(a.shape),
                              "parameters": {"binary_data_size": a.nbytes}}]}).encode()
    r = tls.session.post(tls.url + "/v1/ops/relu", data=h + a.tobytes(), timeout=60,
                         headers={"Content-Type": "application/octet-stream",
                                  "Inference-Header-Content-Length": str(len(h)),
                                  "Accept": "application/octet-stream"})
    assert r.status_code == 200, r.text[:300]
    _, blobs = parse_binary_response(r)
    assert np.array_equal(np.frombuffer(blobs[0], np.float32).reshape(a.shape), np.maximum(a, 0))


def test_plain_http_on_the_tls_port_gets_no_answer_and_harms_nothing(tls):
    with pytest.raises(requests.exceptions.RequestException):
        requests.get(f"http://127.0.0.1:{tls.port}/v2/health/live", timeout=10)
    assert tls.alive()


def test_tls_with_tokens(make_server, certs, tmp_path):
    f = tmp_path / "tokens"
    f.write_text(f"{TOKEN} read,call\n")
    f.chmod(0o600)
    s = make_server("--tls-cert", certs["cert"], "--tls-key", certs["key"], "--token-file", str(f))
    p = curl("--cacert", certs["cert"], "-o", "/dev/null", "-w", "%{http_code}", s.url + "/v1/ops")
    assert p.stdout == "401"
    p = curl("--cacert", certs["cert"], "-H", f"Authorization: Bearer {TOKEN}", "-o", "/dev/null", "-w",
             "%{http_code}", s.url + "/v1/ops")
    assert p.stdout == "200"


def test_stalled_request_over_tls_is_closed(tls, certs):
    """The reaper cannot write a 408 into MHD's TLS session: the connection
    is closed instead, within about --request-timeout (2 s here)."""
    ctx = ssl.create_default_context(cafile=certs["cert"])
    with socket.create_connection(("127.0.0.1", tls.port), timeout=15) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(b"POST /v1/ops/relu HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n{")
            t0 = time.time()
            got = b""
            try:
                while True:
                    c = s.recv(4096)
                    if not c:
                        break
                    got += c
            except (ssl.SSLError, OSError):
                pass
            took = time.time() - t0
    assert took < 8, took
    assert b"HTTP/1.1 200" not in got
    assert tls.alive()


def test_stalled_handshake_is_closed(make_server, certs):
    s = make_server("--tls-cert", certs["cert"], "--tls-key", certs["key"], "--request-timeout", "1",
                    "--idle-timeout", "2")
    s.session.verify = certs["cert"]
    with socket.create_connection(("127.0.0.1", s.port), timeout=15) as raw:
        raw.sendall(b"\x16\x03\x01")  # the start of a ClientHello, then nothing
        t0 = time.time()
        try:
            while raw.recv(4096):
                pass
        except OSError:
            pass
        assert time.time() - t0 < 8
    assert s.alive()


def run(*args):
    return subprocess.run([SERVER_BIN, "--port", "0", *args], capture_output=True, text=True, timeout=30)


def test_bad_tls_files_are_refused(certs, tmp_path):
    p = run("--tls-cert", certs["cert"])
    assert p.returncode == 2 and "--tls-cert and --tls-key go together" in p.stderr
    p = run("--tls-cert", str(tmp_path / "nope.pem"), "--tls-key", certs["key"])
    assert p.returncode == 1 and "No such file" in p.stderr
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    p = run("--tls-cert", str(junk), "--tls-key", certs["key"])
    assert p.returncode == 1 and "not a PEM file" in p.stderr
    p = run("--tls-cert", certs["cert"], "--tls-key", certs["other_key"])  # a key that is not the cert's
    assert p.returncode == 1 and "cannot listen" in p.stderr, p.stderr


def test_python_client_with_token_over_tls(make_server, certs, tmp_path, monkeypatch):
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "clients" / "python"))
    from opdispatch import Client, OpdispatchError

    f = tmp_path / "tokens"
    f.write_text(f"{TOKEN} read,call py\n")
    f.chmod(0o600)
    s = make_server("--tls-cert", certs["cert"], "--tls-key", certs["key"], "--token-file", str(f))
    a = np.linspace(-2, 2, 300_000, dtype=np.float32)  # above the JSON threshold: binary both ways
    with Client(s.url, token=TOKEN, cafile=certs["cert"]) as c:
        assert np.array_equal(c.ops.relu(a), np.maximum(a, 0))
        assert np.array_equal(c.ops.relu(a[:4]), np.maximum(a[:4], 0))
    monkeypatch.setenv("OD_TOKEN", TOKEN)
    with Client(s.url, cafile=certs["cert"]) as c:  # the token from the environment
        assert c.ops.relu(a[:3]).shape == (3,)
    monkeypatch.delenv("OD_TOKEN")
    with Client(s.url, cafile=certs["cert"]) as c:
        with pytest.raises(OpdispatchError) as e:
            c.ops.relu(a[:3])
        assert e.value.status == 401
