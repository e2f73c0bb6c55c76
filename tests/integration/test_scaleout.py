"""Scale-out: three opdispatchd replicas behind a real nginx running the
shipped docker/nginx/nginx.conf, under load from wrk, with replicas stopped
and killed mid-load.

Two paths, one set of checks:
  * plain processes: build/opdispatchd (OD_SERVER) three times on loopback
    ports, Debian's nginx as a plain process on a config generated from
    docker/nginx/nginx.conf (server lines, listen port and /tmp/nginx/
    rewritten); runs wherever nginx and wrk are installed;
  * containers: the image docker/Dockerfile makes (OD_IMAGE, opdispatch:cpu)
    three times and nginx in a container (OD_NGINX_IMAGE), all with host
    networking on distinct 127.0.0.1 ports. Runs when an engine answers and
    both images exist (`make test-docker` builds them and sets
    OD_SCALEOUT_CONTAINERS=1, which turns a missing engine or image into a
    failure instead of a skip).
Each test prints which path it took and what it measured.

Every request goes to 127.0.0.1; wrk runs for a bounded time; every process
or container the tests start is stopped by them, by its PID or name.
"""

import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import pytest
import requests

from conftest import ROOT, SAN_RE, SERVER_BIN, is_sanitized

NGINX_CONF = ROOT / "docker" / "nginx" / "nginx.conf"
NGINX_BIN = shutil.which("nginx") or "/usr/sbin/nginx"
WRK_BIN = shutil.which("wrk") or "/usr/bin/wrk"
IMAGE = os.environ.get("OD_IMAGE", "opdispatch:cpu")
NGINX_IMAGE = os.environ.get("OD_NGINX_IMAGE", "opdispatch-test-nginx:bookworm")
REQUIRE_CONTAINERS = os.environ.get("OD_SCALEOUT_CONTAINERS") == "1"
REPLICAS = 3
SANITIZED = is_sanitized()
# wrk's connections and run time; the sanitizer build is several times slower
CONNS = 16
LOAD_S = 8 if SANITIZED else 6

# an operator call on tensors it sends: safe for nginx to send again
ADD_BODY = json.dumps({"args": [{"dtype": "float32", "shape": [16], "data": list(range(16))},
                                {"dtype": "float32", "shape": [16], "data": [1] * 16}]})


def say(request, text):
    """A line on the terminal even under pytest -q (capture suspended)."""
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        print(f"\n[scale-out] {text}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, timeout=60, proc_alive=lambda: True):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        assert proc_alive(), f"the replica on port {port} exited while starting"
        time.sleep(0.05)
    raise AssertionError(f"nothing ready on 127.0.0.1:{port} within {timeout}s")


def nginx_config(ports, nport, tmp):
    """docker/nginx/nginx.conf with its od1..od3 server lines on our ports,
    its listen port ours and its /tmp/nginx/ folder ours. Every rewrite must
    apply, so a change to the shipped file cannot leave the test checking
    something else."""
    text = NGINX_CONF.read_text()
    servers = re.findall(r"server od(\d):8000", text)
    assert sorted(set(servers)) == [str(i + 1) for i in range(REPLICAS)], servers
    assert len(servers) == 2 * REPLICAS, "expected the replicas in both upstreams"
    text = re.sub(r"server od(\d):8000", lambda m: f"server 127.0.0.1:{ports[int(m.group(1)) - 1]}", text)
    text, n = re.subn(r"listen 8080;", f"listen 127.0.0.1:{nport};", text)
    assert n == 1
    assert "/tmp/nginx/" in text
    text = text.replace("/tmp/nginx/", f"{tmp}/")
    return text


def fail_timeout():
    m = re.findall(r"fail_timeout=(\d+)s", NGINX_CONF.read_text())
    assert m and len(set(m)) == 1, m
    return int(m[0])


# ---- the two topologies ---------------------------------------------------------

class Topology:
    """REPLICAS replicas and nginx on 127.0.0.1; subclasses say how each runs."""

    path = "?"

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="od-scaleout-")
        self.ports = [free_port() for _ in range(REPLICAS)]
        self.nport = free_port()
        self.url = f"http://127.0.0.1:{self.nport}"
        conf = pathlib.Path(self.tmp) / "nginx.conf"
        conf.write_text(nginx_config(self.ports, self.nport, self.tmp))
        self.conf = str(conf)
        self.access_log = pathlib.Path(self.tmp) / "access.log"

    def start(self):
        for i in range(REPLICAS):
            self.start_replica(i)
        for i in range(REPLICAS):
            wait_ready(self.ports[i], proc_alive=lambda i=i: self.running(i))
        self.start_nginx()
        wait_ready_nginx(self)

    def addr(self, i):
        return f"127.0.0.1:{self.ports[i]}"

    def replica_of(self, upstream_header):
        """The replica index an X-OD-Upstream value names (its last attempt)."""
        last = upstream_header.split(",")[-1].strip()
        return self.ports.index(int(last.rsplit(":", 1)[1]))

    def log_lines(self):
        """nginx's access log: (time, status, [upstream addresses tried], [their statuses], session)."""
        out = []
        if not self.access_log.exists():
            return out
        for line in self.access_log.read_text(errors="replace").splitlines():
            m = re.match(r'(\d+\.\d+) \S+ "[^"]*" (\d+) .*upstream=\[([^\]]*)\] ustatus=\[([^\]]*)\] '
                         r'session="([^"]*)"', line)
            if m:
                split = lambda v: [u.strip() for u in re.split(r",\s*|\s+:\s+", v) if u.strip()]
                out.append((float(m.group(1)), int(m.group(2)), split(m.group(3)), split(m.group(4)),
                            "" if m.group(5) == "-" else m.group(5)))
        return out


class Processes(Topology):
    path = "plain processes"

    def __init__(self):
        super().__init__()
        self.procs = [None] * REPLICAS
        self.errs = [None] * REPLICAS
        self.nginx = None

    def env(self):
        env = dict(os.environ)
        env.update(OD_MAX_CONNECTIONS_PER_IP="0", OD_THREADS="2", OD_CALL_WORKERS="2",
                   OD_DRAIN_TIMEOUT="10", OPENBLAS_NUM_THREADS="1", OD_ACCESS_LOG="0")
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:halt_on_error=1:protect_shadow_gap=0")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        return env

    def describe(self):
        return f"{SERVER_BIN} x{REPLICAS} on {', '.join(map(str, self.ports))}; {NGINX_BIN} on {self.nport}"

    def start_replica(self, i):
        self.errs[i] = open(os.path.join(self.tmp, f"replica{i}.err"), "ab")
        self.procs[i] = subprocess.Popen([SERVER_BIN, "--host", "127.0.0.1", "--port", str(self.ports[i])],
                                         stdout=subprocess.DEVNULL, stderr=self.errs[i], env=self.env())

    def running(self, i):
        return self.procs[i] is not None and self.procs[i].poll() is None

    def replica_log(self, i):
        return pathlib.Path(self.tmp, f"replica{i}.err").read_text(errors="replace")

    def signal(self, i, sig):
        self.procs[i].send_signal(sig)

    def wait_exit(self, i, timeout=60):
        return self.procs[i].wait(timeout=timeout)

    def start_nginx(self):
        self.nginx_err = open(os.path.join(self.tmp, "nginx.err"), "ab")
        self.nginx = subprocess.Popen([NGINX_BIN, "-e", "stderr", "-p", self.tmp, "-c", self.conf,
                                       "-g", "daemon off;"], stdout=self.nginx_err, stderr=self.nginx_err)

    def nginx_log(self):
        return pathlib.Path(self.tmp, "nginx.err").read_text(errors="replace")[-3000:]

    def stop(self):
        problems = []
        if self.nginx and self.nginx.poll() is None:
            self.nginx.send_signal(signal.SIGQUIT)
            try:
                self.nginx.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.nginx.kill()
                self.nginx.wait()
        for i, p in enumerate(self.procs):
            if p is None:
                continue
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    problems.append(f"replica {i} did not exit on SIGTERM")
            log = self.replica_log(i)
            problems += [f"replica {i}: {line}" for line in log.splitlines() if SAN_RE.search(line)]
        shutil.rmtree(self.tmp, ignore_errors=True)
        return problems


def docker(*args, timeout=120, check=True):
    p = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout.strip()


def container_engine_missing():
    """None when the container path can run, else why not."""
    if SANITIZED:
        return "the image holds the release build; the container path runs in the release pass only"
    if not shutil.which("docker"):
        return "no docker command"
    try:
        p = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                           text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"docker info: {e}"
    if p.returncode != 0:
        return "no container engine answers (`make test-docker` starts one): " + \
            (p.stderr.strip().splitlines() or ["?"])[-1]
    for img in (IMAGE, NGINX_IMAGE):
        if subprocess.run(["docker", "image", "inspect", img], capture_output=True, timeout=20).returncode:
            return f"image {img} not built (`make test-docker` builds it)"
    return None


class Containers(Topology):
    path = "containers"

    def __init__(self):
        super().__init__()
        os.chmod(self.tmp, 0o777)  # nginx's workers write their temp files here
        self.tag = "od-scaleout-" + uuid.uuid4().hex[:8]
        self.names = [f"{self.tag}-r{i}" for i in range(REPLICAS)]
        self.started = []

    def describe(self):
        return (f"{IMAGE} x{REPLICAS} ({', '.join(self.names)}) on {', '.join(map(str, self.ports))}; "
                f"{NGINX_IMAGE} on {self.nport}; docker run --network host")

    def start_replica(self, i):
        docker("run", "-d", "--name", self.names[i], "--network", "host",
               "-e", "OD_HOST=127.0.0.1", "-e", f"OD_PORT={self.ports[i]}", "-e", "OD_MAX_CONNECTIONS_PER_IP=0",
               "-e", "OD_THREADS=2", "-e", "OD_CALL_WORKERS=2", "-e", "OD_DRAIN_TIMEOUT=10",
               "-e", "OD_ACCESS_LOG=0", IMAGE)
        self.started.append(self.names[i])

    def running(self, i):
        return docker("inspect", "-f", "{{.State.Running}}", self.names[i], check=False) == "true"

    def replica_log(self, i):
        p = subprocess.run(["docker", "logs", self.names[i]], capture_output=True, text=True, timeout=60)
        return p.stdout + p.stderr

    def signal(self, i, sig):
        docker("kill", "--signal", signal.Signals(sig).name, self.names[i])

    def wait_exit(self, i, timeout=60):
        return int(docker("wait", self.names[i], timeout=timeout))

    def restart_replica(self, i):
        docker("start", self.names[i])

    def start_nginx(self):
        name = f"{self.tag}-nginx"
        docker("run", "-d", "--name", name, "--network", "host", "-v", f"{self.tmp}:{self.tmp}",
               NGINX_IMAGE, "nginx", "-e", "stderr", "-p", self.tmp, "-c", self.conf, "-g", "daemon off;")
        self.started.append(name)

    def nginx_log(self):
        p = subprocess.run(["docker", "logs", f"{self.tag}-nginx"], capture_output=True, text=True, timeout=60)
        return (p.stdout + p.stderr)[-3000:]

    def stop(self):
        problems = []
        for name in reversed(self.started):
            if name.endswith("-nginx"):
                docker("kill", "--signal", "QUIT", name, check=False)
            else:
                docker("stop", "-t", "30", name, check=False, timeout=60)
        for name in self.started:
            docker("rm", "-f", name, check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)
        return problems


def restart(topo, i):
    if isinstance(topo, Containers):
        topo.restart_replica(i)
    else:
        topo.start_replica(i)
    wait_ready(topo.ports[i], proc_alive=lambda: topo.running(i))


@pytest.fixture(params=["processes", "containers"], ids=["plain-processes", "containers"])
def topo(request):
    if request.param == "processes":
        for tool in (NGINX_BIN, WRK_BIN):
            if not os.access(tool, os.X_OK):
                pytest.fail(f"{tool} is missing (make setup installs nginx and wrk)")
        t = Processes()
    else:
        why = container_engine_missing()
        if why:
            if REQUIRE_CONTAINERS:
                pytest.fail("OD_SCALEOUT_CONTAINERS=1 but " + why)
            pytest.skip("container path: " + why)
        t = Containers()
    say(request, f"path: {t.path}: {t.describe()}")
    try:
        t.start()
        yield t
    finally:
        problems = t.stop()
    assert not problems, problems


# ---- load -------------------------------------------------------------------------

class Wrk:
    """wrk against nginx for `seconds`, in the background."""

    def __init__(self, topo, seconds, path="/v1/ops/add", body=ADD_BODY):
        script = pathlib.Path(topo.tmp, f"wrk-{uuid.uuid4().hex[:6]}.lua")
        script.write_text('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                          f"wrk.body = {json.dumps(body)}\n")
        self.seconds = seconds
        self.t0 = time.time()
        self.proc = subprocess.Popen([WRK_BIN, "-t2", f"-c{CONNS}", f"-d{seconds}s", "--timeout", "10s",
                                      "-s", str(script), topo.url + path],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def result(self):
        try:
            out, _ = self.proc.communicate(timeout=self.seconds + 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise AssertionError("wrk overran its time")
        self.t1 = time.time()
        m = re.search(r"(\d+) requests in", out)
        assert m, out
        total = int(m.group(1))
        non2xx = int((re.search(r"Non-2xx or 3xx responses: (\d+)", out) or [0, 0])[1])
        sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
        sock_errors = sum(map(int, sock.groups())) if sock else 0
        return {"total": total, "failed": non2xx + sock_errors, "non2xx": non2xx,
                "socket_errors": sock_errors, "out": out}


def nginx_window(topo, w):
    """nginx's own count of wrk's requests: (all, [those not answered 200],
    those cut off when wrk stopped).
    When wrk's time is up it closes its connections with requests in flight,
    which nginx logs as 499 (client closed request); those are not failures
    (wrk never counts them), any other status is."""
    lines = [ln for ln in topo.log_lines() if w.t0 <= ln[0] <= w.t1 + 1 and ln[4] == ""]
    end = w.t0 + w.seconds - 0.5
    cut = [ln for ln in lines if ln[1] == 499 and ln[0] >= end]
    return len(lines), [ln for ln in lines if ln[1] != 200 and ln not in cut], len(cut)


def served_by(topo, i, t0=0.0, t1=float("inf")):
    """Times nginx got a 200 from replica i (as the last upstream tried)."""
    out = []
    for t, status, ups, ust, _ in topo.log_lines():
        if t0 <= t <= t1 and ups and ups[-1] == topo.addr(i) and ust and ust[-1] == "200":
            out.append(t)
    return out


def tried(topo, i, t0=0.0, t1=float("inf")):
    """Times of requests in whose upstream list replica i appears at all."""
    return [t for t, _, ups, _, _ in topo.log_lines() if t0 <= t <= t1 and topo.addr(i) in ups]


def wait_rejoined(topo, i, timeout):
    """Runs short bursts through nginx until replica i serves one; the time it took."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        for _ in range(20):
            requests.post(topo.url + "/v1/ops/add", data=ADD_BODY, timeout=10,
                          headers={"Content-Type": "application/json"})
        if served_by(topo, i, t0):
            return time.time() - t0
        time.sleep(0.1)
    raise AssertionError(f"replica {i} did not take requests again within {timeout}s of its restart")


# ---- the tests ----------------------------------------------------------------------

def test_sigterm_mid_load_fails_nothing(topo, request):
    """SIGTERM to one replica under load: it drains and exits 0, and not one
    client request fails (nginx sends the calls it refuses to the others)."""
    victim = 0
    w = Wrk(topo, LOAD_S)
    time.sleep(LOAD_S / 3)
    t_term = time.time()
    topo.signal(victim, signal.SIGTERM)
    code = topo.wait_exit(victim, timeout=30)
    t_exit = time.time()
    r = w.result()
    n_all, bad, cut = nginx_window(topo, w)
    n_bad = len(bad)
    say(request, f"{topo.path}: SIGTERM replica {victim} at {t_term - w.t0:.2f}s of {LOAD_S}s wrk "
                 f"(-c{CONNS}); it exited {code} after {t_exit - t_term:.2f}s; wrk: {r['total']} requests, "
                 f"{r['failed']} failed ({r['non2xx']} non-2xx, {r['socket_errors']} socket errors); "
                 f"nginx log: {n_all} requests, {n_bad} not 200, {cut} cut off by wrk's end (499)")
    assert code == 0, topo.replica_log(victim)[-3000:]
    assert "draining" in topo.replica_log(victim)
    # the load reached the victim before it stopped, and the others after
    assert served_by(topo, victim, w.t0, t_term), "the victim got no load before SIGTERM"
    for i in range(REPLICAS):
        if i != victim:
            assert served_by(topo, i, t_exit, w.t1), f"replica {i} served nothing after the victim left"
    assert r["total"] > 200, r["out"]
    assert r["failed"] == 0, r["out"]
    assert n_bad == 0, bad
    restart(topo, victim)
    took = wait_rejoined(topo, victim, fail_timeout() + 10)
    say(request, f"{topo.path}: replica {victim} restarted and served again after {took:.2f}s")


def test_sigkill_mid_load_then_rejoin(topo, request):
    """SIGKILL to one replica under load: under 0.1 % of requests fail, nginx
    stops sending to it within a second, and once restarted it takes load."""
    victim = 1
    ft = fail_timeout()
    w = Wrk(topo, LOAD_S)
    time.sleep(LOAD_S / 3)
    t_kill = time.time()
    topo.signal(victim, signal.SIGKILL)
    code = topo.wait_exit(victim, timeout=30)
    r = w.result()
    n_all, bad, cut = nginx_window(topo, w)
    n_bad = len(bad)
    # attempts nginx made on the dead replica until its fail_timeout probe
    after = tried(topo, victim, t_kill, min(w.t1, t_kill + ft - 0.5))
    last = max(after) - t_kill if after else 0.0
    late = [t - t_kill for t in after if t - t_kill >= 1.0]
    # when nginx first found it dead: the first attempt on it that got no answer
    fails = [t for t, _, ups, ust, _ in topo.log_lines() if t >= t_kill and topo.addr(victim) in ups
             and (ust[ups.index(topo.addr(victim))] if len(ust) == len(ups) else "") != "200"]
    since_fail = max(after) - min(fails) if after and fails else 0.0
    failed = max(r["failed"], n_bad)
    say(request, f"{topo.path}: SIGKILL replica {victim} at {t_kill - w.t0:.2f}s of {LOAD_S}s wrk (exit {code}); "
                 f"wrk: {r['total']} requests, {r['failed']} failed ({r['non2xx']} non-2xx, "
                 f"{r['socket_errors']} socket errors); nginx log: {n_all} requests, {n_bad} not 200, {cut} cut off by wrk's end (499); "
                 f"nginx sent {len(after)} request(s) to the victim after the kill signal, the last "
                 f"{last * 1000:.0f} ms after it and {since_fail * 1000:.0f} ms after the first that failed there")
    assert code in (-9, 137), code
    assert served_by(topo, victim, w.t0, t_kill), "the victim got no load before SIGKILL"
    assert r["total"] > 200, r["out"]
    assert failed < 0.001 * r["total"], (r["out"], bad)
    assert not late, f"nginx still sent to the killed replica {late} s after the kill"
    restart(topo, victim)
    t_up = time.time()
    took = wait_rejoined(topo, victim, ft + 10)
    # with the replica back, a load spreads over all three again
    w2 = Wrk(topo, 3)
    r2 = w2.result()
    shares = [len(served_by(topo, i, w2.t0, w2.t1)) for i in range(REPLICAS)]
    say(request, f"{topo.path}: replica {victim} restarted, back in nginx's rotation {took:.2f}s after it was "
                 f"ready (fail_timeout {ft}s); next 3 s of load: {r2['total']} requests, per replica {shares}")
    assert took <= ft + 2, f"rejoined after {took:.2f}s, fail_timeout is {ft}s"
    assert time.time() - t_up < ft + 15
    assert r2["failed"] == 0, r2["out"]
    assert all(s > 0.1 * sum(shares) / REPLICAS for s in shares), shares


def session_call(topo, sid, method, path, body=None, header=True):
    h = {"Content-Type": "application/json"}
    if header:
        h["X-OD-Session"] = sid
    r = requests.request(method, topo.url + path, headers=h, timeout=30,
                         data=json.dumps(body) if body is not None else None)
    return r, topo.replica_of(r.headers["X-OD-Upstream"]) if r.headers.get("X-OD-Upstream") else None


def run_session(topo, sid, k):
    """A session's stored-tensor work through nginx: store, call on refs with
    keep, a program, reads; answers (tensor id, replicas that answered)."""
    seen = set()
    r, rep = session_call(topo, sid, "POST", "/v1/tensors",
                          {"tensor": {"dtype": "float32", "shape": [2], "data": [k, k + 1]}})
    assert r.status_code == 201, r.text
    seen.add(rep)
    tid = r.json()["id"]
    r, rep = session_call(topo, sid, "POST", "/v1/ops/mul", {"args": [{"ref": tid}, 3], "keep": True})
    assert r.status_code == 200, r.text
    seen.add(rep)
    kept = r.json()["outputs"][0]["id"]
    r, rep = session_call(topo, sid, "POST", "/v1/run", {"steps": [
        {"op": "add", "args": [{"ref": tid}, {"ref": kept}]}, {"op": "sum", "args": [{"ref": "$0"}]}]})
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] in ([4 * (2 * k + 1)], 4 * (2 * k + 1)), r.text
    seen.add(rep)
    r, rep = session_call(topo, sid, "GET", f"/v1/tensors/{kept}")
    assert r.status_code == 200 and r.json()["outputs"][0]["data"] == [3 * k, 3 * (k + 1)], r.text
    seen.add(rep)
    # /v1/sessions/{id} is routed by the id in its path, with no header
    r, rep = session_call(topo, sid, "GET", f"/v1/sessions/{sid}", header=False)
    assert r.status_code == 200, r.text
    seen.add(rep)
    return tid, seen


def holders(topo, sid):
    """Which replicas hold session sid, asked of each directly (not through nginx)."""
    out = []
    for i in range(REPLICAS):
        if topo.running(i):
            r = requests.get(f"http://127.0.0.1:{topo.ports[i]}/v1/sessions/{sid}", timeout=10)
            assert r.status_code in (200, 404), r.text
            if r.status_code == 200:
                out.append(i)
    return out


def test_sessions_pin_to_one_replica(topo, request):
    """A session's calls all reach one replica (consistent hashing of
    X-OD-Session), sessions spread over the replicas, and killing another
    replica under load leaves a session's replica and tensors untouched."""
    sessions = {f"s{k}-{secrets.token_hex(6)}": k for k in range(12)}
    home, tids = {}, {}
    for sid, k in sessions.items():
        tids[sid], seen = run_session(topo, sid, k)
        assert len(seen) == 1, f"session {sid} reached replicas {seen}"
        home[sid] = seen.pop()
        assert holders(topo, sid) == [home[sid]], (sid, home[sid], holders(topo, sid))
    spread = sorted({h for h in home.values()})
    assert len(spread) >= 2, f"12 sessions all hashed to replica {spread}"
    # kill the replica holding fewest sessions (some live elsewhere, by the above)
    victim = min(range(REPLICAS), key=lambda i: (sum(1 for h in home.values() if h == i), i))
    w = Wrk(topo, 4)
    time.sleep(1)
    t_kill = time.time()
    topo.signal(victim, signal.SIGKILL)
    topo.wait_exit(victim, timeout=30)
    kept, moved = 0, 0
    for sid, k in sessions.items():
        r, rep = session_call(topo, sid, "POST", "/v1/ops/mul", {"args": [{"ref": tids[sid]}, 2]})
        if home[sid] != victim:
            # untouched: the same replica, the stored tensor still there
            assert r.status_code == 200, (sid, r.status_code, r.text)
            assert r.json()["outputs"][0]["data"] == [2 * k, 2 * (k + 1)]
            assert rep == home[sid], f"session {sid} moved from {home[sid]} to {rep} though its replica lives"
            kept += 1
        else:
            # its replica died with its tensors: another replica answers, 404
            assert r.status_code == 404 and rep != victim, (sid, r.status_code, rep, r.text)
            moved += 1
    r = w.result()
    say(request, f"{topo.path}: 12 sessions over replicas {[sum(1 for h in home.values() if h == i) for i in range(REPLICAS)]}"
                 f", each session's calls on one replica (X-OD-Upstream and each replica's /v1/sessions/{{id}}); "
                 f"SIGKILL replica {victim} {t_kill - w.t0:.2f}s into 4 s of wrk: {kept} sessions untouched, "
                 f"{moved} lost with it (404 from another replica); wrk {r['total']} requests, {r['failed']} failed")
    assert kept > 0
    assert r["failed"] < 0.001 * r["total"] + 1, r["out"]
    restart(topo, victim)


class BlackHole:
    """A 'replica' that reads each request whole and closes the connection
    without answering: a replica that died after the request reached it.
    It counts what it was sent, by method and path."""

    def __init__(self):
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.seen = []
        self.stopping = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                buf = b""
                try:
                    while b"\r\n\r\n" not in buf:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        buf += chunk
                    head, _, body = buf.partition(b"\r\n\r\n")
                    m = re.search(rb"content-length:\s*(\d+)", head, re.I)
                    while m and len(body) < int(m.group(1)):
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        body += chunk
                except OSError:
                    continue
                if head:
                    self.seen.append(" ".join(head.split(b"\r\n")[0].decode().split()[:2]))

    def stop(self):
        self.stopping = True
        self.thread.join(timeout=5)
        self.sock.close()


def test_only_safe_requests_are_sent_twice(request):
    """nginx.conf's retry rules, against two replicas that take a request and
    die before answering and one real opdispatchd (plain processes): an
    operator call on sent tensors is sent again and answers 200; a stored
    tensor's POST or DELETE that reached a dying replica is never sent to
    another one (the client gets 502 and the real replica never sees it)."""
    for tool in (NGINX_BIN, WRK_BIN):
        if not os.access(tool, os.X_OK):
            pytest.fail(f"{tool} is missing (make setup installs nginx and wrk)")
    holes = [BlackHole(), BlackHole()]
    t = Processes()
    # replicas 0 and 1 are the black holes' ports; only replica 2 runs
    t.ports[0], t.ports[1] = holes[0].port, holes[1].port
    pathlib.Path(t.conf).write_text(nginx_config(t.ports, t.nport, t.tmp))
    say(request, f"path: plain processes: {SERVER_BIN} on {t.ports[2]}, requests die on {t.ports[:2]}; "
                 f"{NGINX_BIN} on {t.nport}")
    try:
        t.start_replica(2)
        wait_ready(t.ports[2], proc_alive=lambda: t.running(2))
        t.start_nginx()
        wait_ready_nginx(t)
        h = {"Content-Type": "application/json"}
        ops = [requests.post(t.url + "/v1/ops/add", data=ADD_BODY, headers=h, timeout=30) for _ in range(12)]
        assert [r.status_code for r in ops] == [200] * 12, [(r.status_code, r.text[:200]) for r in ops]
        ops_in_holes = sum(s == "POST /v1/ops/add" for hole in holes for s in hole.seen)
        assert ops_in_holes > 0, "no call reached a dying replica: the check proved nothing"
        real = {}
        outcomes = []
        for k in range(20):
            sid = f"retry{k}-{secrets.token_hex(4)}"
            before = sum(len(hole.seen) for hole in holes)
            r = requests.post(t.url + "/v1/tensors", headers=dict(h, **{"X-OD-Session": sid}), timeout=30,
                              data=json.dumps({"tensor": {"dtype": "float32", "shape": [1], "data": [k]}}))
            d = requests.delete(t.url + "/v1/tensors/0123456789abcdef0123456789abcdef",
                                headers={"X-OD-Session": sid}, timeout=30)
            sent = sum(len(hole.seen) for hole in holes) - before
            outcomes.append((r.status_code, d.status_code, sent))
            if r.status_code == 201:
                real[sid] = r.json()["id"]
        # each request a dying replica took answered 502 and went nowhere else
        for post, delete, sent in outcomes:
            assert post in (201, 502) and delete in (404, 502), outcomes
            assert sent == (post == 502) + (delete == 502), outcomes
        died = sum(p == 502 for p, _, _ in outcomes)
        assert died > 0, f"no session hashed to a dying replica: {outcomes}"
        m = requests.get(f"http://127.0.0.1:{t.ports[2]}/metrics", timeout=10).text
        stored = sum(int(float(v)) for v in re.findall(r"^od_store_puts_total(?:\{[^}]*\})? (\S+)", m, re.M))
        assert stored == len(real), "the real replica stored a tensor the client was told failed"
        say(request, f"plain processes: 12 operator calls, {ops_in_holes} of them sent first to a dying replica, "
                     f"all answered 200; 20 sessions' POST/DELETE /v1/tensors: {died} POSTs reached a dying "
                     f"replica and answered 502 without being sent again, {len(real)} stored on the real one")
    finally:
        problems = t.stop()
        for hole in holes:
            hole.stop()
    assert not problems, problems


def wait_ready_nginx(t):
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if requests.get(t.url + "/lb/health", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.05)
    raise AssertionError("nginx did not answer: " + t.nginx_log())
