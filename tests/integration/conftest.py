"""Integration-test harness: start the real opdispatchd, talk HTTP to it.

OD_SERVER names the binary (default: build/opdispatchd); point it at
build/asan/opdispatchd to run the whole suite against the sanitizer build.
Every server a test starts is stopped with SIGTERM at the end, must exit 0,
and must leave no sanitizer report (AddressSanitizer, LeakSanitizer,
UndefinedBehaviorSanitizer) in its stderr, or the test fails.
"""

import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import tempfile
import time
import zlib

import numpy as np
import pytest
import requests
import yaml
import jsonschema

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER_BIN = os.environ.get("OD_SERVER", str(ROOT / "build" / "opdispatchd"))
SANITIZER_PATTERNS = [
    r"ERROR: AddressSanitizer",
    r"ERROR: LeakSanitizer",
    r"runtime error:",
    r"UndefinedBehaviorSanitizer",
    r"SUMMARY: \w+Sanitizer",
    r"WARNING: ThreadSanitizer",
]
SAN_RE = re.compile("|".join(SANITIZER_PATTERNS))


# Files whose tests time the server (latency bounds, stalls, SIGTERM within 2 s,
# peak RSS, load runs): `make test-integration` runs them alone, after the rest
# has run on both cores with pytest-xdist, so a neighbour's load cannot fail them.
SERIAL_FILES = {"test_hostile.py", "test_scaleout.py", "test_bench.py", "test_client_c.py", "test_errors.py",
                "test_program.py"}


def pytest_configure(config):
    config.addinivalue_line("markers", "serial: run alone, not beside other tests (see SERIAL_FILES)")


# The longest files start first, so that neither worker is left running one of
# them alone at the end (xdist hands out files in collection order).
LONG_FILES = ["test_difftest.py", "test_opinfo.py", "test_activations.py", "test_linalg.py", "test_autograd.py",
              "test_store.py", "test_attention.py", "test_pooling.py"]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SERIAL_FILES:
            item.add_marker(pytest.mark.serial)
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable: the rest keep their order


def is_sanitized():
    try:
        out = subprocess.run(["nm", "-D", SERVER_BIN], capture_output=True, text=True, timeout=30).stdout
        return "__asan_init" in out or "__ubsan" in out
    except (OSError, subprocess.SubprocessError):
        return False


class Server:
    """One running opdispatchd."""

    def __init__(self, *args, env=None, startup_timeout=60):
        self.args = list(args)
        self.errf = tempfile.NamedTemporaryFile(prefix="opdispatchd-", suffix=".err", delete=False)
        self.outf = tempfile.NamedTemporaryFile(prefix="opdispatchd-", suffix=".out", delete=False)
        full_env = dict(os.environ)
        full_env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:halt_on_error=1:protect_shadow_gap=0")
        full_env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        full_env.setdefault("OPENBLAS_NUM_THREADS", "1")
        # kernels that promise to overwrite their outputs get 0xA5 bytes, not zeros
        full_env.setdefault("OD_CPU_POISON", "1")
        if env:
            full_env.update(env)
        cmd = [SERVER_BIN, "--host", "127.0.0.1", "--port", "0", *self.args]
        self.proc = subprocess.Popen(cmd, stdout=self.outf, stderr=self.errf, env=full_env)
        self.url = None
        deadline = time.time() + startup_timeout
        while time.time() < deadline:
            text = pathlib.Path(self.outf.name).read_text()
            m = re.search(r"listening on (https?://\S+?)/?\s", text)
            if m:
                self.url = m.group(1)
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"opdispatchd exited with {self.proc.returncode}: {self.stderr()}")
            time.sleep(0.02)
        if not self.url:
            self.proc.kill()
            raise RuntimeError(f"opdispatchd did not start: {self.stderr()}")
        self.port = int(self.url.rsplit(":", 1)[1])
        self.session = requests.Session()
        self.session.trust_env = False  # a loopback server: no proxy lookup (a third of a small call's time)

    def stderr(self):
        return pathlib.Path(self.errf.name).read_text(errors="replace")

    def stdout(self):
        return pathlib.Path(self.outf.name).read_text(errors="replace")

    # -- HTTP helpers --------------------------------------------------------
    def get(self, path, **kw):
        kw.setdefault("timeout", 60)
        return self.session.get(self.url + path, **kw)

    def post(self, path, body=None, **kw):
        kw.setdefault("timeout", 60)
        if body is not None and "data" not in kw:
            kw["json"] = body
        return self.session.post(self.url + path, **kw)

    def delete(self, path, **kw):
        kw.setdefault("timeout", 60)
        return self.session.delete(self.url + path, **kw)

    def call(self, op, *args, kwargs=None, device=None, **extra):
        body = {"args": list(args)}
        if kwargs:
            body["kwargs"] = kwargs
        if device:
            body["device"] = device
        body.update(extra)
        return self.post(f"/v1/ops/{op}", body)

    def raw(self, data, timeout=10):
        """Sends raw bytes on a fresh connection; returns what came back."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(data)
            chunks = []
            try:
                while True:
                    c = s.recv(65536)
                    if not c:
                        break
                    chunks.append(c)
                    if b"\r\n\r\n" in b"".join(chunks) and _complete(b"".join(chunks)):
                        break
            except (socket.timeout, ConnectionResetError):
                pass
            return b"".join(chunks)

    def alive(self):
        r = self.get("/v2/health/live", timeout=10)
        return r.status_code == 200

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """SIGTERM, wait, and check the exit status and the sanitizer log
        (once: a test may stop a server its fixture stops again)."""
        if self.errf.closed:
            return
        self.session.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"opdispatchd did not exit within {timeout}s of SIGTERM; its log:\n"
                                     + self.stderr()[-4000:])
        err = self.stderr()
        problems = [line for line in err.splitlines() if SAN_RE.search(line)]
        assert not problems, "sanitizer report in opdispatchd's stderr:\n" + err[-20000:]
        assert self.proc.returncode == 0, f"opdispatchd exited with {self.proc.returncode}:\n{err[-5000:]}"
        for f in (self.errf, self.outf):
            f.close()
            os.unlink(f.name)


TORCH_PY = "/usr/bin/python3"  # Debian's python3-torch (1.13), outside the virtualenv


def torch_env():
    """The environment for a PyTorch reference process: the Makefile's
    tools/torch_quiet.c preloaded when built (torch then raises its errors in
    microseconds, not milliseconds; no message changes)."""
    env = dict(os.environ)
    quiet = env.get("OD_TORCH_PRELOAD", "")
    if quiet and os.path.exists(quiet):
        env["LD_PRELOAD"] = quiet
    return env


def torch_ref(cases, env=None):
    """Runs cases through tools/torch_ref.py (PyTorch 1.13): one result per
    case, {"value", "shape", "dtype"} or {"error": message}. env: variables
    to add to the reference process's environment."""
    p = subprocess.run([TORCH_PY, str(ROOT / "tools" / "torch_ref.py")], input=json.dumps(cases),
                       capture_output=True, text=True, timeout=300, env={**torch_env(), **(env or {})})
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def assert_bits_as_torch(server, cases, env=None):
    """Every output value of each (op, args, kwargs) case, its first output, equal to torch's bit for
    bit (NaN to NaN, the sign of zero included); a 16-bit or float32 value compared as the float32 its
    shortest JSON text reads back as. env: added to the reference process's environment."""
    want = torch_ref([{"op": op, "args": a, "kwargs": kw} for op, a, kw in cases], env=env)
    for (op, a, kw), w in zip(cases, want):
        r = server.post(f"/v1/ops/{op}", {"args": a, "kwargs": kw})
        assert r.status_code == 200, (op, r.text[:300])
        o = r.json()["outputs"][0]
        assert o["dtype"] == w["dtype"] and o["shape"] == w["shape"], (op, o["dtype"], o["shape"], w)
        got = np.array([float(v) if isinstance(v, str) else v for v in o["data"]], np.float64)
        exp = np.array([float(v) if isinstance(v, str) else v for v in w["value"]], np.float64).reshape(-1)
        if o["dtype"] in ("float32", "float16", "bfloat16"):
            got, exp = got.astype(np.float32), exp.astype(np.float32)
        same = ((got == exp) & (np.signbit(got) == np.signbit(exp))) | (np.isnan(got) & np.isnan(exp))
        shape = [x["shape"] for x in a if isinstance(x, dict) and "shape" in x]
        assert same.all(), (op, o["dtype"], shape, kw, np.flatnonzero(~same)[:5], got[~same][:3], exp[~same][:3])


def error_message(resp):
    """The message of an error answer, checking its shape: the Open Inference
    Protocol's {"error": "<message>"} on /v2, {"error": {"code", "message"}}
    everywhere else."""
    import urllib.parse

    body = resp.json()
    assert set(body) == {"error"}, body
    if urllib.parse.urlparse(resp.url).path.startswith("/v2"):
        assert isinstance(body["error"], str), body
        return body["error"]
    assert isinstance(body["error"], dict) and set(body["error"]) == {"code", "message"}, body
    return body["error"]["message"]


def slow_mm(server, n, timeout=120):
    """An int64 mm of two n x n tensors (int64 mm runs on our own loops, in chunks)."""
    import json

    a = np.ones((n, n), np.int64)
    h = json.dumps({"args": [{"dtype": "int64", "shape": [n, n],
                              "parameters": {"binary_data_size": a.nbytes}}] * 2}).encode()
    return requests.post(server.url + "/v1/ops/mm", data=h + a.tobytes() * 2, timeout=timeout,
                         headers={"Content-Type": "application/octet-stream",
                                  "Inference-Header-Content-Length": str(len(h)),
                                  "Accept": "application/octet-stream"})


def wait_running(server, n=1, timeout=30, done=lambda: False):
    """Waits until n calls run on the call workers (od_calls_running): a slow
    call's body uploads first, and a sleep may end before it runs."""
    deadline = time.time() + timeout
    while time.time() < deadline and not done():
        text = requests.get(server.url + "/metrics", timeout=10).text
        m = re.search(r"^od_calls_running (\d+)", text, re.M)
        if m and int(m.group(1)) >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"{n} call(s) never ran on the call workers")


def slow_mm_size(server, seconds):
    """n for which slow_mm takes about `seconds` on this machine and build.
    The first call pays one-time costs (threads, page faults) that would make
    the estimate short; the best of two timed calls after it is used."""
    # a server under --max-call-seconds 1 on a loaded machine (sanitizer
    # build) may not finish 640 in time: probe with a smaller product then
    # (and a timed call that a load spike pushed past the limit does the same)
    m, best = 640, float("inf")
    while best == float("inf"):
        while (r := slow_mm(server, m)).status_code == 504 and m > 80:
            m //= 2
        assert r.status_code == 200, r.text[:300]
        for _ in range(2):
            t0 = time.time()
            r = slow_mm(server, m)
            if r.status_code == 504 and m > 80:
                m, best = m // 2, float("inf")
                break
            assert r.status_code == 200, r.text[:300]
            best = min(best, time.time() - t0)
    per = best / m ** 3  # transfer included: errs on the short side
    return int(min(3000, max(m, 1.2 * (seconds / per) ** (1 / 3))))


def _complete(buf):
    head, _, body = buf.partition(b"\r\n\r\n")
    m = re.search(rb"content-length:\s*(\d+)", head, re.I)
    return m is not None and len(body) >= int(m.group(1))


@pytest.fixture(scope="session")
def server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture
def make_server():
    """Starts extra servers with custom flags; each is stopped and checked."""
    started = []

    def make(*args, env=None):
        s = Server(*args, env=env)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


# One seed per process (OD_TEST_SEED, or fresh); each test draws from its own generator, seeded by
# that seed and the test's id, so one failing test reruns alone with the seed its report names.
SEED = int(os.environ.get("OD_TEST_SEED", int.from_bytes(os.urandom(4), "little")))


@pytest.fixture
def rng(request):
    return np.random.default_rng([SEED, zlib.crc32(request.node.nodeid.encode())])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.failed and "rng" in getattr(item, "fixturenames", ()):
        report.sections.append(("random inputs", f"rerun with OD_TEST_SEED={SEED} (this test's inputs derive "
                                                  f"from it and the test's id)"))


# ---- tensors ------------------------------------------------------------------

DTYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "int64": np.int64,
    "int32": np.int32,
    "int16": np.int16,
    "int8": np.int8,
    "uint8": np.uint8,
    "bool": np.bool_,
    "float16": np.float16,
}
OIP = {"FP32": "float32", "FP64": "float64", "INT64": "int64", "INT32": "int32", "INT16": "int16",
       "INT8": "int8", "UINT8": "uint8", "BOOL": "bool", "FP16": "float16"}


def _num(x):
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (np.floating, float)):
        x = float(x)
        if np.isnan(x):
            return "NaN"
        if np.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return x
    return int(x)


def tensor(a, nested=False, oip=False, name=None):
    """A JSON tensor for numpy array a."""
    a = np.asarray(a)
    dt = a.dtype.name
    out = {}
    if name:
        out["name"] = name
    if oip:
        out["datatype"] = {v: k for k, v in OIP.items()}[dt]
    else:
        out["dtype"] = dt
    out["shape"] = list(a.shape)
    if nested and a.ndim > 0:
        out["data"] = _nested(a)
    else:
        out["data"] = [_num(x) for x in a.reshape(-1)]
    return out


def _nested(a):
    if a.ndim == 0:
        return _num(a[()])
    return [_nested(x) for x in a]


def from_json(t):
    dt = t.get("dtype") or OIP[t["datatype"]]
    data = [float(x) if isinstance(x, str) else x for x in t["data"]]
    return np.array(data, dtype=DTYPES[dt]).reshape(t["shape"])


def binary_body(header, arrays):
    """A binary tensor data body: JSON header + raw little-endian bytes."""
    import json

    h = json.dumps(header, separators=(",", ":")).encode()
    raw = b"".join(np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes() for a in arrays)
    return h, h + raw


def parse_binary_response(resp):
    """(header dict, {name or index: bytes}) of a binary tensor data response."""
    import json

    hl = int(resp.headers["Inference-Header-Content-Length"])
    header = json.loads(resp.content[:hl])
    off = hl
    blobs = []
    for o in header["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is None:
            blobs.append(None)
            continue
        blobs.append(resp.content[off:off + size])
        off += size
    assert off == len(resp.content), "binary response length does not add up"
    return header, blobs


# ---- OpenAPI validation ----------------------------------------------------------

_SPEC = None


def spec():
    global _SPEC
    if _SPEC is None:
        _SPEC = yaml.safe_load((ROOT / "proto" / "openapi.yaml").read_text())
    return _SPEC


def _template_match(template, path):
    t = template.strip("/").split("/") if template != "/" else []
    p = path.split("?")[0].strip("/").split("/") if path.split("?")[0] != "/" else []
    if len(t) != len(p):
        return False
    return all(a.startswith("{") or a == b for a, b in zip(t, p))


def validate(resp, method, path):
    """Validates resp's JSON body against proto/openapi.yaml."""
    sp = spec()
    # literal segments beat templates ("/v2/models/stats" over "/v2/models/{op}")
    candidates = [t for t in sp["paths"] if _template_match(t, path)]
    assert candidates, f"{path} is not in openapi.yaml"
    candidates.sort(key=lambda t: t.count("{"))
    op = sp["paths"][candidates[0]].get(method.lower())
    assert op, f"{method} {candidates[0]} is not in openapi.yaml"
    status = str(resp.status_code)
    r = op["responses"].get(status) or op["responses"].get("default")
    assert r, f"{method} {candidates[0]}: status {status} is not documented"
    if "$ref" in r:
        r = sp["components"]["responses"][r["$ref"].rsplit("/", 1)[1]]
    content = r.get("content")
    ctype = resp.headers.get("Content-Type", "").split(";")[0].strip()
    if not content:
        assert not resp.content, f"{method} {path}: {status} should have an empty body"
        return
    assert ctype in content, f"{method} {path}: content type {ctype!r} not documented"
    if ctype != "application/json":
        return
    schema = dict(content[ctype]["schema"])
    schema["components"] = sp["components"]
    jsonschema.validate(resp.json(), schema, cls=jsonschema.Draft202012Validator)
