"""The deployment files under docker/ checked offline: the Dockerfiles
(structure, and a parse by the engine where one answers), .dockerignore,
compose.yaml and its Prometheus config, nginx.conf (`nginx -t` and which
routes may be sent twice), and the Kubernetes manifests with kubectl.

kubectl: `kubectl apply --dry-run=client` needs an API server even in
client mode (it downloads the OpenAPI schema and the resource mappings), so
with none reachable the test says so and checks instead what kubectl does
offline: `kubectl label --local` parses every object of docker/k8s (apiVersion,
kind, name), and `kubectl set image --local` / `kubectl set selector --local`
decode each Deployment and Service into Kubernetes' own Go types and print
them back; a field those types do not have, or a value of the wrong type,
is dropped or refused, which the test detects. The rest is checked here:
probes, drain timing, GPU requests, selectors, ports, Ingress backends.
"""

import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

from conftest import ROOT, SERVER_BIN, Server

D = ROOT / "docker"
K8S = D / "k8s"
KUBECTL = shutil.which("kubectl")


def od_env_names():
    """The OD_* variables the server reads (its --help, else server/main.c)."""
    if os.access(SERVER_BIN, os.X_OK):
        text = subprocess.run([SERVER_BIN, "--help"], capture_output=True, text=True, timeout=30).stdout
    else:
        text = (ROOT / "server" / "main.c").read_text()
    names = set(re.findall(r"\bOD_[A-Z_]+\b", text))
    for c in (ROOT / "server").glob("*.c"):
        names |= set(re.findall(r'getenv\("(OD_[A-Z_]+)"\)', c.read_text()))
    assert "OD_PORT" in names and "OD_DRAIN_TIMEOUT" in names
    return names


# ---- Dockerfiles -------------------------------------------------------------------

def instructions(path):
    """[(INSTRUCTION, argument text)] with continuations joined, comments dropped."""
    out, cur = [], ""
    for line in path.read_text().splitlines():
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        cur += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            word, _, rest = cur.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
            cur = ""
    return out


def stages(ins):
    st = []
    for word, arg in ins:
        if word == "FROM":
            st.append({"from": arg, "ins": []})
        elif st:
            st[-1]["ins"].append((word, arg))
    return st


def ignored(path):
    pats = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
            if p.strip() and not p.startswith("#")]
    hit = False
    for p in pats:
        neg = p.startswith("!")
        p = p.lstrip("!").rstrip("/")
        if path == p or path.startswith(p + "/") or (p.startswith("*.") and path.endswith(p[1:]) and "/" not in path):
            hit = not neg
    return hit


@pytest.mark.parametrize("name,base", [("Dockerfile", "debian:bookworm-slim"),
                                       ("Dockerfile.cuda", "nvidia/cuda:")])
def test_dockerfile_structure(name, base):
    ins = instructions(D / name)
    args = {a.split("=", 1)[0]: a.split("=", 1)[1] for w, a in ins if w == "ARG" and "=" in a}
    st = stages(ins)
    assert len(st) == 2, "a build stage and a runtime stage"
    build, run = st
    assert " AS build" in build["from"] and " AS runtime" in run["from"]
    # the base is a build argument whose default is the official image
    var = re.match(r"\$\{(\w+)\}", run["from"]).group(1)
    assert args[var].startswith(base), (var, args[var])
    if name == "Dockerfile":
        assert build["from"].startswith("${BASE}") and args["BASE"] == "debian:bookworm-slim"
    else:
        assert "runtime" in args[var] and "devel" in args[re.match(r"\$\{(\w+)\}", build["from"]).group(1)]
    run_text = " ".join(a for w, a in run["ins"] if w == "RUN")
    # no compiler, no headers in the runtime image
    for pkg in ("build-essential", "gcc", "-dev ", "cuda-nvcc", "pkg-config"):
        assert pkg not in run_text + " ", f"{name}: the runtime stage installs {pkg}"
    for lib in ("libopenblas0", "libsleef3", "libmicrohttpd12", "libjansson4", "tini"):
        assert lib in run_text, f"{name}: the runtime stage lacks {lib}"
    # the server is built from this tree, with or without CUDA
    make = " ".join(a for w, a in build["ins"] if w == "RUN" and "make " in a)
    assert ("CUDA=1" if name.endswith("cuda") else "CUDA=0") in make
    assert "build/opdispatchd" in make
    for w, a in build["ins"]:
        if w == "COPY":
            for src in a.split()[:-1]:
                assert (ROOT / src).exists(), f"{name}: COPY {src}: no such path"
                assert not ignored(src.rstrip("/")), f"{name}: COPY {src} is excluded by .dockerignore"
    copies = [a for w, a in run["ins"] if w == "COPY"]
    assert copies and all(a.startswith("--from=build ") for a in copies), "runtime gets only build outputs"
    user = [a for w, a in run["ins"] if w == "USER"]
    assert user and user[-1].split(":")[0] not in ("0", "root"), user
    assert re.match(r"\d+(:\d+)?$", user[-1]), "numeric, so Kubernetes' runAsNonRoot can verify it"
    hc = [a for w, a in run["ins"] if w == "HEALTHCHECK"]
    assert hc and "/v2/health/ready" in hc[0]
    ep = [a for w, a in run["ins"] if w == "ENTRYPOINT"]
    assert ep and json.loads(ep[-1])[:2] == ["/usr/bin/tini", "--"], "tini as PID 1 forwards SIGTERM"
    assert json.loads(ep[-1])[2:] == ["/usr/local/bin/opdispatchd"], "no flags: configuration by OD_* only"
    assert not [a for w, a in run["ins"] if w == "CMD"]
    env = " ".join(a for w, a in run["ins"] if w == "ENV")
    names = od_env_names()
    for var in re.findall(r"\b(OD_[A-Z_]+)=", env):
        assert var in names, f"{name}: ENV {var} is not a variable opdispatchd reads"
    assert "OD_HOST=0.0.0.0" in env


def test_dockerfile_make_targets_exist():
    """The make line the Dockerfiles run names real targets (make -n)."""
    p = subprocess.run(["make", "-n", "-C", str(ROOT), "CUDA=0", "SETUP_STAMP=.setup/container",
                        "build/opdispatchd", "build/opdispatch"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]


def test_dockerignore_keeps_host_builds_out():
    for p in (".git", "build", ".venv", ".setup", "tests"):
        assert ignored(p), p
    for p in ("server", "kernels", "dispatcher", "proto", "Makefile", "mk", "clients/c"):
        assert not ignored(p), p


def engine_answers():
    if not shutil.which("docker"):
        return False
    p = subprocess.run(["docker", "info"], capture_output=True, timeout=20)
    return p.returncode == 0


def test_dockerfiles_parse_in_the_engine(request):
    """Where an engine answers: it parses every instruction of both files and
    expands the ARGs (the legacy builder parses the whole file first; with no
    registry reachable the build then stops at pulling the CUDA base, which
    is the expected end). docker build --check needs buildx, not installed."""
    if not engine_answers():
        pytest.skip("no container engine answers")
    p = subprocess.run(["docker", "build", "--network", "host", "-f", str(D / "Dockerfile.cuda"),
                        "-t", "od-parse-check:cuda", str(ROOT)], capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert "parse error" not in out and "unknown instruction" not in out, out[-2000:]
    steps = re.findall(r"Step \d+/(\d+) :", out)
    assert steps and int(steps[0]) == len(instructions(D / "Dockerfile.cuda")), out[-2000:]
    # the devel base either built (registry reachable) or could not be pulled
    assert p.returncode == 0 or re.search(r"registry|pull|lookup|dial tcp|not found", out), out[-2000:]


# ---- compose, Prometheus, nginx ------------------------------------------------------

def test_compose_topology():
    c = yaml.safe_load((D / "compose.yaml").read_text())
    s = c["services"]
    reps = sorted(k for k in s if re.fullmatch(r"od\d", k))
    assert reps == ["od1", "od2", "od3"]
    names = od_env_names()
    for r in reps:
        svc = s[r]
        assert svc["build"]["dockerfile"] == "docker/Dockerfile" and (D / svc["build"]["context"]).resolve() == ROOT
        env = svc["environment"]
        assert set(env) <= names, set(env) - names
        grace = int(svc["stop_grace_period"].rstrip("s"))
        assert grace > int(env["OD_DRAIN_TIMEOUT"]), "stop_grace_period must cover the drain"
        assert "/v2/health/ready" in " ".join(svc["healthcheck"]["test"])
        assert env["OD_MAX_CONNECTIONS_PER_IP"] == "0"
        assert "ipv4_address" in svc["networks"]["od"]
    ng = s["nginx"]
    assert any(v.startswith("./nginx/nginx.conf:/etc/nginx/nginx.conf") for v in ng["volumes"])
    assert all(ng["depends_on"][r]["condition"] == "service_healthy" for r in reps)
    prom = yaml.safe_load((D / "prometheus" / "prometheus.yml").read_text())
    targets = [t for sc in prom["scrape_configs"] for g in sc["static_configs"] for t in g["targets"]]
    assert sorted(targets) == [f"{r}:8000" for r in reps], "Prometheus scrapes each replica itself"
    mounted = [v.split(":")[0] for v in s["prometheus"]["volumes"]]
    for m in mounted:
        assert (D / m).exists(), m
    rules = yaml.safe_load((D / "prometheus" / "alerts.yml").read_text())
    exprs = " ".join(r["expr"] for g in rules["groups"] for r in g["rules"])
    metrics = set(re.findall(r"\b(od_[a-z_]+)", exprs))
    if os.access(SERVER_BIN, os.X_OK):
        s = Server()
        try:
            text = s.get("/metrics").text
        finally:
            s.stop()
        known = set(re.findall(r"^# TYPE (od_\w+) (\w+)", text, re.M))
        names = {n for n, _ in known} | {n + "_bucket" for n, t in known if t == "histogram"}
        assert metrics <= names, f"alerts on metrics the server does not export: {metrics - names}"
    cu = yaml.safe_load((D / "compose.cuda.yaml").read_text())
    for r in reps:
        svc = cu["services"][r]
        assert svc["build"]["dockerfile"] == "docker/Dockerfile.cuda"
        dev = svc["deploy"]["resources"]["reservations"]["devices"][0]
        assert dev["capabilities"] == ["gpu"] and len(dev["device_ids"]) == 1


def blocks(text, keyword):
    """{header: body} of nginx blocks starting with keyword (brace-matched)."""
    out = {}
    for m in re.finditer(rf"^\s*{keyword}\s+([^{{]*)\{{", text, re.M):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out[m.group(1).strip()] = text[m.end():i - 1]
    return out


def test_nginx_conf_routes_and_retries(tmp_path):
    from test_scaleout import nginx_config, NGINX_BIN

    text = (D / "nginx" / "nginx.conf").read_text()
    ups = blocks(text, "upstream")
    assert "least_conn;" in ups["opdispatch"]
    assert re.search(r"hash \$od_session_key consistent;", ups["opdispatch_pinned"])
    for body in ups.values():
        assert "zone " in body, "failure state shared by all workers"
        assert re.search(r"max_fails=\d+ fail_timeout=\d+s", body)
    locs = blocks(text, "location")
    safe = locs["/"]
    assert "non_idempotent" in safe and "http_503" in safe
    assert "/_pinned" in safe, "a request with a session goes to the pinned upstream"
    for head, body in locs.items():
        if head != "/" and "proxy_next_upstream" in body:
            assert "non_idempotent" not in body and "http_5" not in body, \
                f"location {head} may be sent twice after reaching a replica"
    assert "http://opdispatch_pinned" in locs["/_pinned/"]
    assert "rewrite ^ /_pinned$uri last;" in locs["~ ^/v1/(tensors|sessions|run)(/|$)"]
    if not os.access(NGINX_BIN, os.X_OK):
        pytest.skip("nginx not installed: the syntax check needs it")
    conf = tmp_path / "nginx.conf"
    conf.write_text(nginx_config([18001, 18002, 18003], 18000, str(tmp_path)))
    p = subprocess.run([NGINX_BIN, "-t", "-e", "stderr", "-p", str(tmp_path), "-c", str(conf)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "syntax is ok" in p.stderr, p.stderr


# ---- Kubernetes -------------------------------------------------------------------------

def k8s_docs():
    docs = []
    for f in sorted(K8S.rglob("*.yaml")):
        for d in yaml.safe_load_all(f.read_text()):
            if d:
                docs.append((f.relative_to(K8S).as_posix(), d))
    return docs


def kubectl(*args, stdin=None):
    return subprocess.run([KUBECTL, *args], capture_output=True, text=True, timeout=60, input=stdin,
                          env=dict(os.environ, KUBECONFIG="/dev/null"))


def subset(a, b, path=""):
    """Paths of a whose value b lacks or differs (b may add defaults)."""
    if isinstance(a, dict):
        if not isinstance(b, dict):
            return [path]
        return [p for k in a for p in subset(a[k], b.get(k, _MISSING), f"{path}.{k}")]
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return [path]
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in subset(x, y, f"{path}[{i}]")]
    return [] if a == b or str(a) == str(b) else [path]


_MISSING = object()


@pytest.fixture(scope="module")
def kube(request):
    if not KUBECTL:
        pytest.skip("kubectl not installed")
    p = kubectl("apply", "--dry-run=client", "-R", "-f", str(K8S))
    if p.returncode == 0:
        return "apply --dry-run=client"
    assert re.search(r"connection refused|openapi|unable to recognize|no configuration|dial tcp", p.stderr), p.stderr
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        print("\n[k8s] kubectl apply --dry-run=client needs an API server (none here): "
              + p.stderr.strip().splitlines()[-1][:160]
              + "\n[k8s] checked offline instead: kubectl label --local (every object parses), "
                "kubectl set image/selector --local (Deployments and Services decode into Kubernetes' types "
                "without losing a field), and the semantic checks of test_deploy_files.py", flush=True)
    return "offline"


def test_k8s_objects_parse_and_decode(kube):
    p = kubectl("label", "--local", "-R", "-f", str(K8S), "checked=yes", "-o", "name")
    assert p.returncode == 0, p.stderr
    names = sorted(p.stdout.split())
    assert names.count("deployment.apps/opdispatch") == 2, names  # CPU, and the CUDA variant
    for want in ("service/opdispatch", "service/opdispatch-pinned", "ingress.networking.k8s.io/opdispatch",
                 "servicemonitor.monitoring.coreos.com/opdispatch", "poddisruptionbudget.policy/opdispatch"):
        assert want in names, names
    for f, d in k8s_docs():
        # kubectl prints an object only when the command changed it: a marker
        # value goes in, and is put back before comparing
        if d["kind"] == "Deployment":
            c = d["spec"]["template"]["spec"]["containers"][0]
            p = kubectl("set", "image", "--local", "-f", "-", f"{c['name']}=od-check:marker", "-o", "json",
                        stdin=yaml.safe_dump(d))
            restore = lambda o: o["spec"]["template"]["spec"]["containers"][0].update(image=c["image"])
        elif d["kind"] == "Service":
            p = kubectl("set", "selector", "--local", "-f", "-", "od-check=marker", "-o", "json",
                        stdin=yaml.safe_dump(d))
            restore = lambda o: o["spec"].update(selector=d["spec"]["selector"])
        else:
            continue
        assert p.returncode == 0, f"{f}: {p.stderr}"
        back = json.loads(p.stdout)
        restore(back)
        lost = subset(d, back)
        assert not lost, f"{f} {d['kind']}: fields Kubernetes' types drop or change: {lost}"


def deployments():
    return {f: d for f, d in k8s_docs() if d["kind"] == "Deployment"}


def test_k8s_deployment_probes_and_drain():
    names = od_env_names()
    for f, d in deployments().items():
        pod = d["spec"]["template"]
        spec = pod["spec"]
        assert d["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        (c,) = spec["containers"]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        env = {e["name"]: e["value"] for e in c["env"]}
        assert set(env) <= names, set(env) - names
        assert int(env["OD_PORT"]) == ports["http"]
        assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
        assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
        for probe in ("readinessProbe", "livenessProbe"):
            assert c[probe]["httpGet"]["port"] in ports
        pre = c["lifecycle"]["preStop"]["exec"]["command"]
        assert pre[0] == "sleep"
        need = int(pre[1]) + int(env["OD_DRAIN_TIMEOUT"])
        assert spec["terminationGracePeriodSeconds"] > need, "the kubelet would SIGKILL a draining pod"
        assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["runAsUser"] == 10001
        ann = pod["metadata"]["annotations"]
        assert ann["prometheus.io/scrape"] == "true" and int(ann["prometheus.io/port"]) == ports["http"]
        assert ann["prometheus.io/path"] == "/metrics"
        res = c["resources"]
        if f.startswith("cuda/"):
            assert c["image"].endswith(":cuda")
            assert str(res["limits"]["nvidia.com/gpu"]) == "1" == str(res["requests"]["nvidia.com/gpu"])
        else:
            assert "nvidia.com/gpu" not in json.dumps(res)


def test_k8s_cuda_variant_differs_only_where_it_should():
    deps = deployments()
    cpu, gpu = deps["deployment.yaml"], deps["cuda/deployment.yaml"]
    lost = subset(cpu, gpu)
    allowed = r"\.spec\.template\.spec\.containers\[0\]\.(image|env|resources\.\w+\.(cpu|memory))$"
    assert all(re.match(allowed, p) for p in lost), lost
    assert cpu["metadata"]["name"] == gpu["metadata"]["name"], "the same Deployment: apply one or the other"


def test_k8s_services_and_ingress_point_at_the_pods():
    docs = k8s_docs()
    pod_labels = deployments()["deployment.yaml"]["spec"]["template"]["metadata"]["labels"]
    cports = {p["name"] for p in deployments()["deployment.yaml"]["spec"]["template"]["spec"]["containers"][0]["ports"]}
    svcs = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Service"}
    for s in svcs.values():
        assert s["spec"]["selector"].items() <= pod_labels.items()
        assert all(p["targetPort"] in cports for p in s["spec"]["ports"])
    ings = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Ingress"}
    for ing in ings.values():
        for rule in ing["spec"]["rules"]:
            for p in rule["http"]["paths"]:
                b = p["backend"]["service"]
                assert b["name"] in svcs and b["port"]["name"] in {x["name"] for x in svcs[b["name"]]["spec"]["ports"]}
    a = "nginx.ingress.kubernetes.io/"
    canary = ings["opdispatch-session-header"]["metadata"]["annotations"]
    assert canary[a + "canary"] == "true" and canary[a + "canary-by-header"] == "X-OD-Session"
    assert canary[a + "upstream-hash-by"] == "$http_x_od_session"
    sess = ings["opdispatch-sessions"]
    assert sess["metadata"]["annotations"][a + "upstream-hash-by"] == "$http_x_od_session"
    assert "non_idempotent" not in sess["metadata"]["annotations"].get(a + "proxy-next-upstream", "")
    assert {p["path"] for r in sess["spec"]["rules"] for p in r["http"]["paths"]} == \
        {"/v1/tensors", "/v1/sessions", "/v1/run"}
    main = ings["opdispatch"]["metadata"]["annotations"]
    assert "non_idempotent" in main[a + "proxy-next-upstream"]
    sm = [d for _, d in docs if d["kind"] == "ServiceMonitor"][0]
    assert sm["spec"]["selector"]["matchLabels"].items() <= svcs["opdispatch"]["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] in {p["name"] for p in svcs["opdispatch"]["spec"]["ports"]}
