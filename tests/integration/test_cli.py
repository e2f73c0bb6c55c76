"""opdispatchd's command line, environment variables and access log."""

import os
import re
import subprocess
import time

import numpy as np

from conftest import SERVER_BIN, error_message, tensor


def test_help_and_version():
    p = subprocess.run([SERVER_BIN, "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0
    for flag in ("--host", "--port", "--threads", "--max-body-bytes", "--max-rank", "--max-elements",
                 "--max-output-bytes", "--max-connections", "--max-connections-per-ip",
                 "--idle-timeout", "--request-timeout", "--log-level", "OD_PORT"):
        assert flag in p.stdout, flag
    p = subprocess.run([SERVER_BIN, "--version"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stdout.startswith("opdispatchd ")


def test_bad_flags_exit_2():
    for args in (["--port", "70000"], ["--max-body-bytes", "lots"], ["--log-level", "loud"],
                 ["--no-such-flag"], ["--default-device", "tpu"], ["extra"]):
        p = subprocess.run([SERVER_BIN, *args], capture_output=True, text=True, timeout=30)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr


def test_environment_variables(make_server):
    s = make_server(env={"OD_MAX_BODY_BYTES": "2K", "OD_THREADS": "3"})
    r = s.call("relu", tensor(np.ones(2000, np.float32)))
    assert r.status_code == 413 and "2048 bytes" in error_message(r)
    assert s.get("/v1/devices").json()["cpu"]["http_threads"] == 3
    # flags win over the environment
    s2 = make_server("--max-body-bytes", "1M", env={"OD_MAX_BODY_BYTES": "2K"})
    assert s2.call("relu", tensor(np.ones(2000, np.float32))).status_code == 200


def test_access_log_line_per_request(make_server):
    s = make_server()
    s.call("relu", tensor(np.ones(3, np.float32)))
    s.get("/v1/nothing")
    time.sleep(0.3)
    lines = [l for l in s.stderr().splitlines() if " access " in l]
    assert any(re.search(r"method=POST path=/v1/ops/relu status=200 bytes=\d+ us=\d+", l) for l in lines), lines
    assert any(re.search(r"method=GET path=/v1/nothing status=404 bytes=\d+ us=\d+", l) for l in lines), lines
    quiet = make_server("--no-access-log")
    quiet.get("/v2")
    time.sleep(0.2)
    assert " access " not in quiet.stderr()


def test_url_printed_on_start(server):
    assert re.search(r"listening on http://127\.0\.0\.1:\d+/", server.stdout())


def test_every_option_in_help_is_parsed():
    """--help, getopt and the environment come from one table: every flag
    shown takes a value where it shows one, and names itself when it is bad."""
    text = subprocess.run([SERVER_BIN, "--help"], capture_output=True, text=True, timeout=30).stdout
    rows = re.findall(r"^  --([a-z-]+)(?: ([A-Z]+))?", text, re.M)
    assert len(rows) >= 20, rows
    for flag, metavar in rows:
        if not metavar:
            continue
        p = subprocess.run([SERVER_BIN, f"--{flag}", "not-a-value" if flag != "host" else "x" * 300],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2, (flag, p.stderr)
        assert f"--{flag}" in p.stderr and "unrecognized" not in p.stderr, (flag, p.stderr)
    for env in re.findall(r"\[(OD_[A-Z_]+),", text):
        bad = "not-a-value" if env != "OD_HOST" else "x" * 300
        p = subprocess.run([SERVER_BIN], env={**os.environ, env: bad}, capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 2 and env in p.stderr, (env, p.stderr)
