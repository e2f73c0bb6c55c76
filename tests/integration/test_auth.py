"""Who may do what: --token-file (bearer tokens with read, call and admin
scopes), the refusal to listen beyond loopback without it, 401/403 in each
protocol's error shape, and tokens kept out of the log."""

import json
import os
import pathlib
import re
import subprocess
import time

import numpy as np
import pytest
import requests

from conftest import SERVER_BIN, error_message, tensor

READ = "rEad-0123456789abcdefXYZ"
CALL = "caLL-0123456789abcdef+/~_.=="
ADMIN = "aDMin-0123456789abcdef0000"
TOKENS = f"""# opdispatch tokens: TOKEN SCOPES [NAME]
{READ}\tread   reader

{CALL} call,read caller
   # indented comment
{ADMIN} read,call,admin boss
"""


def token_file(tmp_path, text=TOKENS, mode=0o600, name="tokens"):
    p = tmp_path / name
    p.write_text(text)
    p.chmod(mode)
    return str(p)


def bearer(tok):
    return {"Authorization": f"Bearer {tok}"}


@pytest.fixture
def srv(make_server, tmp_path):
    return make_server("--token-file", token_file(tmp_path), "--enable-bench")


def relu_body():
    return {"args": [{"dtype": "float32", "shape": [3], "data": [-1, 0, 2]}]}


def test_without_a_token_only_health_and_dashboard_files_answer(srv):
    for path in ("/v2/health/live", "/v2/health/ready", "/"):
        assert srv.get(path).status_code == 200, path
    for path in ("/v1/ops", "/v1/stats", "/metrics", "/v2/models/relu", "/v2"):
        r = srv.get(path)
        assert r.status_code == 401, (path, r.status_code)
        assert r.headers["WWW-Authenticate"].startswith("Bearer realm=")
        assert "needs a token" in error_message(r)  # checks the protocol's error shape too
    r = srv.get("/v1/ops")
    assert r.json()["error"]["code"] == "unauthorized"
    r = srv.post("/v2/models/relu/infer", {"inputs": []})
    assert r.status_code == 401 and isinstance(r.json()["error"], str)


@pytest.mark.parametrize("header", [f"Bearer {READ}x", f"Bearer {READ[:-1]}", f"Bearer {READ[:-1]}Y",
                                    f"Bearer {ADMIN[:10]}{READ[10:]}", "Bearer ", f"Basic {READ}",
                                    f"Bearer{READ}", READ, "Bearer " + "A" * 5000])
def test_a_wrong_token_is_401_invalid_token(srv, header):
    r = srv.get("/v1/ops", headers={"Authorization": header})
    assert r.status_code == 401
    assert 'error="invalid_token"' in r.headers["WWW-Authenticate"]
    assert r.json()["error"]["code"] == "unauthorized"


def test_scheme_is_case_insensitive_and_spaces_are_tolerated(srv):
    for h in (f"bearer {READ}", f"BEARER   {READ}  ", f"Bearer\t{READ}"):
        assert srv.get("/v1/keys", headers={"Authorization": h}).status_code == 200, h


def test_read_token_reads_but_cannot_call(srv):
    assert srv.get("/v1/ops/relu", headers=bearer(READ)).status_code == 200
    r = srv.post("/v1/ops/relu", relu_body(), headers=bearer(READ))
    assert r.status_code == 403
    assert r.json()["error"]["code"] == "forbidden"
    assert 'scope="call"' in r.headers["WWW-Authenticate"]
    assert "reader" in error_message(r) and "call" in error_message(r)
    r = srv.post("/v2/models/relu/infer", {"inputs": [{"name": "self", "datatype": "FP32", "shape": [1],
                                                       "data": [1]}]}, headers=bearer(READ))
    assert r.status_code == 403 and isinstance(r.json()["error"], str)


def test_call_token_calls_but_is_not_admin(srv):
    r = srv.post("/v1/ops/relu", relu_body(), headers=bearer(CALL))
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == [0, 0, 2]
    r = srv.post("/v1/stats/reset", {}, headers=bearer(CALL))
    assert r.status_code == 403 and 'scope="admin"' in r.headers["WWW-Authenticate"]
    assert srv.post("/v1/stats/reset", {}, headers=bearer(ADMIN)).status_code == 200
    r = srv.post("/v1/load", {"op": "relu"}, headers=bearer(CALL))
    assert r.status_code == 403


def test_binary_call_with_token(srv):
    a = np.arange(6, dtype=np.float32) - 3
    h = b'{"args": [{"dtype": "float32", "shape": [6], "parameters": {"binary_data_size": 24}}]}'
    r = requests.post(srv.url + "/v1/ops/relu", data=h + a.tobytes(), timeout=30,
                      headers={**bearer(CALL), "Content-Type": "application/octet-stream",
                               "Inference-Header-Content-Length": str(len(h))})
    assert r.status_code == 200, r.text
    # and the same body without a token is refused before it is read
    r = requests.post(srv.url + "/v1/ops/relu", data=h + a.tobytes(), timeout=30,
                      headers={"Content-Type": "application/octet-stream",
                               "Inference-Header-Content-Length": str(len(h))})
    assert r.status_code == 401


def fill(path):
    return (path.replace("{op}", "relu").replace("{v}", "1").replace("{file}", "app.js")
            .replace("{id}", "0123456789abcdef0123456789abcdef"))


def test_every_route_asks_for_the_scope_the_table_gives(srv):
    """The route table is the one list: GET / shows each route's scope, and
    each route answers accordingly with no token, a token without the scope
    and a token with it."""
    eps = srv.get("/").json()["endpoints"]
    scopes = {e["scope"] for e in eps}
    assert scopes == {"none", "read", "call", "admin", "call (own session) or admin"}, scopes
    holders = {"read": READ, "call": CALL, "admin": ADMIN}
    lacking = {"read": None, "call": READ, "admin": CALL}  # READ lacks call, CALL lacks admin
    checked = 0
    for e in eps:
        scope, method, path = e["scope"], e["method"], fill(e["path"])
        if scope.startswith("call (own"):
            scope = "admin"  # for a session the request does not name
        body = b"{}" if method == "POST" else None
        hdr = {"Content-Type": "application/json"} if body else {}

        def ask(tok):
            h = dict(hdr, **(bearer(tok) if tok else {}))
            return srv.session.request(method, srv.url + path, data=body, headers=h, timeout=60)

        r = ask(None)
        if scope == "none":
            assert r.status_code not in (401, 403), (method, path, r.status_code)
            continue
        assert r.status_code == 401, (method, path, r.status_code)
        if lacking[scope]:
            r = ask(lacking[scope])
            assert r.status_code == 403 and "WWW-Authenticate" in r.headers, (method, path, r.status_code)
        r = ask(holders[scope])
        assert "WWW-Authenticate" not in r.headers and r.status_code != 401, (method, path, r.status_code, r.text)
        checked += 1
    assert checked >= 30


def test_sessions_of_others_need_admin(srv):
    r = srv.post("/v1/sessions", {}, headers=bearer(CALL))
    assert r.status_code in (200, 201), r.text
    sid = r.json()["id"]
    own = dict(bearer(CALL), **{"X-OD-Session": sid})
    assert srv.get(f"/v1/sessions/{sid}", headers=own).status_code == 200
    r = srv.get(f"/v1/sessions/{sid}", headers=bearer(CALL))  # names no session: not its own
    assert r.status_code == 403 and 'scope="admin"' in r.headers["WWW-Authenticate"]
    assert srv.get(f"/v1/sessions/{sid}", headers=bearer(ADMIN)).status_code == 200
    assert srv.delete(f"/v1/sessions/{sid}", headers=bearer(CALL)).status_code == 403
    assert srv.delete(f"/v1/sessions/{sid}", headers=own).status_code in (200, 204)


def test_tritonclient_sends_the_header(srv):
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    c = httpclient.InferenceServerClient(url=srv.url.split("://", 1)[1])
    try:
        a = np.array([-1, 2], np.float32)
        inp = httpclient.InferInput("self", [2], "FP32")
        inp.set_data_from_numpy(a, binary_data=True)
        with pytest.raises(InferenceServerException, match="needs a token"):
            c.infer("relu", [inp])
        res = c.infer("relu", [inp], headers=bearer(CALL))
        assert res.as_numpy(res.get_response()["outputs"][0]["name"]).tolist() == [0, 2]
        assert c.is_server_ready()  # health: no header needed
    finally:
        c.close()


def test_tokens_are_never_logged_and_names_are(srv):
    srv.get("/v1/ops", headers=bearer(READ))
    srv.post("/v1/ops/relu", relu_body(), headers=bearer(CALL))
    srv.get("/v1/ops", headers=bearer(ADMIN + "nope"))
    srv.get("/v1/ops", headers={"Authorization": "Bearer " + CALL[:-3]})
    time.sleep(0.5)  # the access log line is written when the request completes, after its answer
    log = srv.stderr()
    for tok in (READ, CALL, ADMIN, CALL[:-3], READ[:12], CALL[:12], ADMIN[:12]):
        assert tok not in log
    assert re.search(r"user=reader method=GET path=/v1/ops status=200", log), log[-2000:]
    assert re.search(r"user=caller method=POST path=/v1/ops/relu status=200", log)
    assert re.search(r"user=- method=GET path=/v1/ops status=401", log)


def test_allow_anonymous_with_tokens_reads_and_calls_but_admin_needs_one(make_server, tmp_path):
    s = make_server("--token-file", token_file(tmp_path), "--allow-anonymous")
    assert s.get("/v1/ops").status_code == 200
    assert s.post("/v1/ops/relu", relu_body()).status_code == 200
    r = s.post("/v1/stats/reset", {})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert s.post("/v1/stats/reset", {}, headers=bearer(ADMIN)).status_code == 200
    assert s.get("/v1/ops", headers=bearer("x" * 20)).status_code == 401  # a wrong token is not anonymous


def test_without_a_token_file_loopback_stays_open(server):
    assert server.post("/v1/stats/reset", {}).status_code == 200
    assert all(e["scope"] for e in server.get("/").json()["endpoints"])


# ---- refusals at start-up ----------------------------------------------------


def start(*args, env=None):
    """Runs the server expecting it to exit (a refusal) within 30 s."""
    full = dict(os.environ, **(env or {}))
    full.pop("OD_TOKEN_FILE", None)
    return subprocess.run([SERVER_BIN, "--port", "0", *args], capture_output=True, text=True, timeout=30, env=full)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "10.1.2.3"])
def test_non_loopback_without_tokens_is_refused(host):
    p = start("--host", host)
    assert p.returncode == 2, p.stderr
    assert "refusing to listen" in p.stderr and "--token-file" in p.stderr and "--allow-anonymous" in p.stderr


def test_env_host_is_refused_too():
    p = start(env={"OD_HOST": "0.0.0.0"})
    assert p.returncode == 2 and "refusing to listen on 0.0.0.0" in p.stderr


def test_allow_anonymous_or_tokens_pass_the_check(tmp_path):
    """192.0.2.1 (TEST-NET-1) is on no interface here: past the policy check
    the bind fails (exit 1, not the refusal's 2), so nothing is exposed."""
    for args, env in ((["--allow-anonymous"], None), ([], {"OD_ALLOW_ANONYMOUS": "1"}),
                      (["--token-file", token_file(tmp_path)], None)):
        p = start("--host", "192.0.2.1", *args, env=env)
        assert p.returncode == 1, (args, p.returncode, p.stderr)
        assert "cannot listen" in p.stderr and "refusing" not in p.stderr


BAD_FILES = [
    ("", "no tokens"),
    ("# only a comment\n\n", "no tokens"),
    (f"{READ}\n", "line 1: expected `TOKEN SCOPES [NAME]`"),
    (f"# c\nshort read\n", "line 2: a token must be 16 to 128"),
    (f"{'y' * 129} read\n", "line 1: a token must be 16 to 128"),
    (f"{READ} write\n", "line 1: scopes are a comma list"),
    (f"{READ} read,\n", "line 1: scopes are a comma list"),
    (f"{READ} read name extra\n", "line 1: more than three fields"),
    (f"{READ} read bad/name\n", "line 1: a name is"),
    (f"ab\"cdefghijklmnopqrst read\n", "line 1: a token is letters"),
    (f"{READ} read a\n\n{READ} call b\n", "line 3: the same token as the one named a"),
]


@pytest.mark.parametrize("text,why", BAD_FILES)
def test_malformed_token_file_is_refused(tmp_path, text, why):
    p = start("--host", "127.0.0.1", "--token-file", token_file(tmp_path, text))
    assert p.returncode == 2, p.stderr
    assert why in p.stderr, p.stderr
    for line in text.splitlines():
        tok = line.split()[0] if line.split() else ""
        if len(tok) >= 16:
            assert tok not in p.stderr + p.stdout  # never echoed


@pytest.mark.parametrize("mode,why", [(0o644, "other users may read it"), (0o602, "other users may write it")])
def test_token_file_others_can_use_is_refused(tmp_path, mode, why):
    p = start("--token-file", token_file(tmp_path, mode=mode))
    assert p.returncode == 2 and why in p.stderr, p.stderr


def test_missing_token_file_is_refused(tmp_path):
    p = start("--token-file", str(tmp_path / "nope"))
    assert p.returncode == 2 and "No such file" in p.stderr
    p = start("--token-file", str(tmp_path))
    assert p.returncode == 2 and "not a regular file" in p.stderr


def test_group_readable_file_and_crlf_lines_load(make_server, tmp_path):
    f = token_file(tmp_path, TOKENS.replace("\n", "\r\n"), mode=0o640)
    s = make_server("--token-file", f)
    assert s.get("/v1/ops", headers=bearer(READ)).status_code == 200
    assert s.post("/v1/stats/reset", {}, headers=bearer(ADMIN)).status_code == 200


def test_protocol_md_scope_table_agrees_with_the_route_table(server):
    """Every `METHOD /path` PROTOCOL.md's scope table names is in the row of
    the scope the route table gives it."""
    from conftest import ROOT

    text = (ROOT / "proto" / "PROTOCOL.md").read_text()
    section = text.split("## Who may do what", 1)[1].split("\n## ", 1)[0]
    scope_of = {(e["method"], e["path"]): e["scope"] for e in server.get("/").json()["endpoints"]}
    named = 0
    for scope, routes in re.findall(r"^\| (none|read|call|admin) \| (.+) \|$", section, re.M):
        for methods, path in re.findall(r"`((?:GET|POST|DELETE)(?:`/`(?:GET|POST|DELETE))*) (/[^`\s]*)`", routes):
            for m in methods.split("`/`"):
                got = scope_of[(m, path)]
                assert got == scope or (got.startswith("call (own") and scope in ("call", "admin")), (m, path, got)
                named += 1
    assert named >= 25, named


def test_cli_and_its_load_generator_send_od_token(srv):
    """The opdispatch command takes its token from OD_TOKEN (never argv)."""
    from conftest import ROOT

    cli = os.environ.get("OD_CLI", str(ROOT / "build" / "opdispatch"))

    def run(*args, token=None):
        env = {k: v for k, v in os.environ.items() if k != "OD_TOKEN"}
        if token:
            env["OD_TOKEN"] = token
        return subprocess.run([cli, "--url", srv.url, *args], capture_output=True, text=True, timeout=120, env=env)

    assert run("keys").returncode == 1  # 401: a 4xx
    assert run("keys", token=READ).returncode == 0
    p = run("call", "relu", "--arg", "rand:4:float32", token=CALL)
    assert p.returncode == 0, p.stderr
    p = run("load", "relu", "--arg", "rand:64:float32", "--count", "200", "--format", "json", token=CALL)
    assert p.returncode == 0, p.stderr
    pt = json.loads(p.stdout)[0]
    assert pt["ok"] == 200 and pt["statuses"] == {"200": 200}, pt
    p = run("load", "relu", "--arg", "rand:64:float32", "--count", "50", "--format", "json", token=READ)
    pt = json.loads(p.stdout)[0]  # refused before the body is read: MHD closes, the engine reconnects
    assert pt["ok"] == 0 and set(pt["statuses"]) == {"403"}, pt
