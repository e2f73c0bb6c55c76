"""Tensors kept on the server: /v1/tensors, /v1/sessions, {"ref": id} in calls
(/v1 and /v2), "keep", views and in-place operators on stored tensors,
isolation between sessions, budgets, and memory after many create/delete
cycles. Values are checked against numpy on fresh random inputs."""

import numpy as np
import pytest

from conftest import binary_body, error_message, from_json, parse_binary_response, tensor, validate


def put(server, a, session="default", device=None, expect=201):
    body = {"tensor": tensor(a)}
    if device:
        body["device"] = device
    r = server.post("/v1/tensors", body, headers={"X-OD-Session": session})
    assert r.status_code == expect, r.text
    if expect == 201:
        validate(r, "POST", "/v1/tensors")
    return r.json()


def get(server, tid, session="default", **params):
    return server.get(f"/v1/tensors/{tid}", headers={"X-OD-Session": session}, params=params)


def fetch(server, tid, session="default"):
    r = get(server, tid, session)
    assert r.status_code == 200, r.text
    validate(r, "GET", f"/v1/tensors/{tid}")
    return from_json(r.json()["outputs"][0])


def call(server, op, *args, session="default", keep=False, **kw):
    body = {"args": list(args)}
    if keep:
        body["keep"] = True
    body.update(kw)
    return server.post(f"/v1/ops/{op}", body, headers={"X-OD-Session": session})


@pytest.fixture
def session(server):
    r = server.post("/v1/sessions")
    assert r.status_code == 201, r.text
    validate(r, "POST", "/v1/sessions")
    sid = r.json()["id"]
    assert len(sid) == 32 and int(sid, 16) >= 0
    yield sid
    server.session.delete(server.url + f"/v1/sessions/{sid}")


def test_put_get_meta_delete(server, rng, session):
    a = rng.standard_normal((3, 5)).astype(np.float32)
    meta = put(server, a, session)
    assert meta["dtype"] == "float32" and meta["shape"] == [3, 5] and meta["strides"] == [5, 1]
    assert meta["device"] == "cpu" and meta["bytes"] == a.nbytes and meta["contiguous"]
    np.testing.assert_array_equal(fetch(server, meta["id"], session), a)
    r = get(server, meta["id"], session, meta="1")
    assert r.status_code == 200 and r.json()["id"] == meta["id"] and "outputs" not in r.json()
    lst = server.get("/v1/tensors", headers={"X-OD-Session": session}).json()
    assert lst["count"] == 1 and lst["tensors"][0]["id"] == meta["id"]
    r = server.session.delete(server.url + f"/v1/tensors/{meta['id']}", headers={"X-OD-Session": session})
    assert r.status_code == 200 and r.json() == {"deleted": meta["id"]}
    r = get(server, meta["id"], session)
    assert r.status_code == 404 and "no tensor" in error_message(r)
    assert server.get("/v1/tensors", headers={"X-OD-Session": session}).json()["count"] == 0
    r = server.get("/v1/stats")
    validate(r, "GET", "/v1/stats")
    st = r.json()["store"]
    assert st["puts"] >= 1 and st["deletes"] >= 1 and st["bytes"]["cpu"] >= 0


def test_binary_in_and_out(server, rng, session):
    a = rng.integers(-100, 100, (4, 6)).astype(np.int16)
    h, body = binary_body({"tensor": {"dtype": "int16", "shape": [4, 6],
                                      "parameters": {"binary_data_size": a.nbytes}}}, [a])
    r = server.post("/v1/tensors", data=body, headers={"X-OD-Session": session,
                                                      "Content-Type": "application/octet-stream",
                                                      "Inference-Header-Content-Length": str(len(h))})
    assert r.status_code == 201, r.text
    tid = r.json()["id"]
    r = get(server, tid, session, binary="1")
    assert r.status_code == 200
    head, blobs = parse_binary_response(r)
    np.testing.assert_array_equal(np.frombuffer(blobs[0], np.int16).reshape(4, 6), a)


def test_refs_in_calls_and_keep(server, rng, session):
    a = rng.standard_normal((8, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    ia, ib = put(server, a, session)["id"], put(server, b, session)["id"]
    # refs and inline tensors mix; outputs come back as data by default
    r = call(server, "add", {"ref": ia}, tensor(b), session=session)
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(from_json(r.json()["outputs"][0]), a + b, rtol=1e-6)
    # keep: a chain of calls that never ships the data
    r = call(server, "mm", {"ref": ia}, {"ref": ib}, session=session, keep=True)
    assert r.status_code == 200, r.text
    validate(r, "POST", "/v1/ops/mm")
    out = r.json()["outputs"][0]
    assert out["name"] == "out" and out["shape"] == [8, 8] and out["dtype"] == "float32"
    r = call(server, "relu", {"ref": out["id"]}, session=session, keep=True)
    relu_id = r.json()["outputs"][0]["id"]
    np.testing.assert_allclose(fetch(server, relu_id, session), np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)
    # multi-output operators keep each output
    r = call(server, "native_layer_norm", {"ref": ia}, [8], None, None, 1e-5, session=session, keep=True)
    assert r.status_code == 200, r.text
    outs = r.json()["outputs"]
    assert len(outs) == 3 and len({o["id"] for o in outs}) == 3
    # explain takes refs too (shapes only)
    r = server.post("/v1/ops/mm/explain", {"args": [{"ref": ia}, {"ref": ib}]}, headers={"X-OD-Session": session})
    assert r.status_code == 200, r.text


def test_views_share_storage_and_inplace_changes_the_stored_tensor(server, rng, session):
    a = rng.standard_normal((4, 6)).astype(np.float32)
    ia = put(server, a, session)["id"]
    # a kept view shares its base's storage: transposed strides, no copy
    r = call(server, "t", {"ref": ia}, session=session, keep=True)
    v = r.json()["outputs"][0]
    assert v["shape"] == [6, 4] and v["strides"] == [1, 6] and not v["contiguous"]
    np.testing.assert_array_equal(fetch(server, v["id"], session), a.T)
    r = get(server, ia, session, meta="1")
    validate(r, "GET", f"/v1/tensors/{ia}")
    assert r.json()["shares_storage_with"] == [v["id"]]
    assert get(server, v["id"], session, meta="1").json()["shares_storage_with"] == [ia]
    # fill_ on the base: the base and its view both see it (PyTorch semantics)
    r = call(server, "fill_", {"ref": ia}, 2.5, session=session)
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(fetch(server, ia, session), np.full((4, 6), 2.5, np.float32))
    np.testing.assert_array_equal(fetch(server, v["id"], session), np.full((6, 4), 2.5, np.float32))
    # copy_ into a stored tensor from an inline one, with broadcasting
    src = rng.standard_normal((6,)).astype(np.float32)
    r = call(server, "copy_", {"ref": ia}, tensor(src), session=session)
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(fetch(server, ia, session), np.broadcast_to(src, (4, 6)))
    # deleting the base leaves the view valid (it holds the storage)
    server.session.delete(server.url + f"/v1/tensors/{ia}", headers={"X-OD-Session": session})
    np.testing.assert_array_equal(fetch(server, v["id"], session), np.broadcast_to(src, (4, 6)).T)


def test_sessions_are_isolated(server, rng):
    s1 = server.post("/v1/sessions").json()["id"]
    s2 = server.post("/v1/sessions").json()["id"]
    a = rng.standard_normal(5).astype(np.float32)
    tid = put(server, a, s1)["id"]
    # every endpoint, from the other session: the same 404 as an unknown id
    unknown = "0" * 32
    for sid_used in (tid, unknown):
        r = get(server, sid_used, s2)
        assert r.status_code == 404
        assert error_message(r) == f"no tensor '{sid_used}' in this session"
        r = server.session.delete(server.url + f"/v1/tensors/{sid_used}", headers={"X-OD-Session": s2})
        assert r.status_code == 404
        r = call(server, "relu", {"ref": sid_used}, session=s2)
        assert r.status_code == 404 and "no tensor" in error_message(r)
    assert server.get("/v1/tensors", headers={"X-OD-Session": s2}).json()["count"] == 0
    # without a header, the default session: does not see s1's either
    assert get(server, tid, "default").status_code == 404
    # s1 still has it, untouched
    np.testing.assert_array_equal(fetch(server, tid, s1), a)
    r = server.get(f"/v1/sessions/{s1}")
    validate(r, "GET", f"/v1/sessions/{s1}")
    info = r.json()
    assert info["tensors"] == 1 and info["bytes"]["cpu"] == a.nbytes and info["ids"] == [tid]
    # deleting a session frees its tensors
    assert server.session.delete(server.url + f"/v1/sessions/{s1}").status_code == 200
    assert get(server, tid, s1).status_code == 404
    assert server.get(f"/v1/sessions/{s1}").status_code == 404
    server.session.delete(server.url + f"/v1/sessions/{s2}")


def test_bad_session_names_and_refs(server):
    r = server.get("/v1/tensors", headers={"X-OD-Session": "a/b"})
    assert r.status_code == 400 and "X-OD-Session" in error_message(r)
    r = server.get("/v1/tensors", headers={"X-OD-Session": "x" * 65})
    assert r.status_code == 400
    r = call(server, "relu", {"ref": 7})
    assert r.status_code == 400 and "must be a tensor id" in error_message(r)
    r = server.post("/v1/tensors", {"tensor": {"dtype": "float32", "shape": [2], "data": [1]}})
    assert r.status_code in (400, 422)
    r = server.post("/v1/tensors", {"tensr": {}})
    assert r.status_code == 400
    r = server.post("/v1/ops/relu", {"args": [tensor(np.ones(2, np.float32))], "keep": "yes"})
    assert r.status_code == 400 and "keep" in error_message(r)
    assert server.alive()


def test_budget_is_507_with_the_numbers(make_server, rng):
    srv = make_server("--max-session-bytes", "1000")
    a = np.zeros(200, np.float32)  # 800 bytes
    put(srv, a, "b1")
    r = srv.post("/v1/tensors", {"tensor": tensor(a)}, headers={"X-OD-Session": "b1"})
    assert r.status_code == 507
    assert "over its budget of 1000" in error_message(r) and "1600 bytes" in error_message(r)
    # another session has its own budget
    put(srv, a, "b2")
    # keep is refused the same way, and leaves nothing behind
    r = srv.post("/v1/ops/relu", {"args": [tensor(a)], "keep": True}, headers={"X-OD-Session": "b1"})
    assert r.status_code == 507
    assert srv.get("/v1/tensors", headers={"X-OD-Session": "b1"}).json()["count"] == 1


def test_oip_infer_with_refs_and_keep(server, rng, session):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    ia = put(server, a, session)["id"]
    body = {"inputs": [{"name": "self", "datatype": "FP32", "shape": [2, 3], "parameters": {"ref": ia}}]}
    r = server.post("/v2/models/relu/infer", body, headers={"X-OD-Session": session})
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(from_json(r.json()["outputs"][0]), np.maximum(a, 0))
    body["parameters"] = {"keep": True}
    r = server.post("/v2/models/relu/infer", body, headers={"X-OD-Session": session})
    assert r.status_code == 200, r.text
    kept = r.json()["outputs"][0]["id"]
    np.testing.assert_array_equal(fetch(server, kept, session), np.maximum(a, 0))


def test_memory_returns_after_many_create_delete_cycles(make_server, rng):
    """10,000 stores and deletes: the server's RSS ends where it started.
    (Under ASan its quarantine would hold freed blocks: it is turned off.)"""
    server = make_server(env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:halt_on_error=1:"
                                              "protect_shadow_gap=0:quarantine_size_mb=0:"
                                              "thread_local_quarantine_size_kb=0"})

    def rss_kb():
        with open(f"/proc/{server.proc.pid}/status") as f:
            return int(next(line for line in f if line.startswith("VmRSS")).split()[1])

    a = tensor(rng.standard_normal(256).astype(np.float32))
    s = server.session
    for _ in range(500):  # warm the allocators
        tid = s.post(server.url + "/v1/tensors", json={"tensor": a}).json()["id"]
        s.delete(server.url + f"/v1/tensors/{tid}")
    before = rss_kb()
    for _ in range(10000):
        tid = s.post(server.url + "/v1/tensors", json={"tensor": a}).json()["id"]
        assert s.delete(server.url + f"/v1/tensors/{tid}").status_code == 200
    after = rss_kb()
    assert after - before < 4096, f"RSS grew from {before} to {after} KiB over 10,000 cycles"
    assert server.get("/v1/tensors").json()["count"] == 0


def test_idle_sessions_expire_and_metrics_count_them(make_server, rng):
    import time

    srv = make_server("--session-idle-seconds", "1")
    a = rng.standard_normal(16).astype(np.float32)
    tid = put(srv, a, "idle")["id"]
    keep_alive = put(srv, a, "busy")["id"]
    # the reaper looks every 250 ms; "busy" is used meanwhile, "idle" is not
    for _ in range(12):
        fetch(srv, keep_alive, "busy")
        time.sleep(0.25)
    assert get(srv, tid, "idle").status_code == 404
    assert srv.get("/v1/sessions/idle").status_code == 404
    np.testing.assert_array_equal(fetch(srv, keep_alive, "busy"), a)
    m = srv.get("/metrics").text
    assert "od_store_expired_sessions_total 1" in m, m
    assert "od_store_tensors 1" in m and 'od_store_bytes{device="cpu"} 64' in m


def test_lru_eviction_past_the_high_water_mark_and_410(make_server, rng):
    """Past --store-high-water-bytes, the least recently used tensors that
    nothing else references are evicted (their ids answer 410); a tensor a
    view shares storage with is not; when nothing can make room, 507 and
    nothing is evicted."""
    srv = make_server("--store-high-water-bytes", "10000")
    kb = lambda: rng.standard_normal(500).astype(np.float32)  # noqa: E731  2000 bytes
    a, b, c, d = kb(), kb(), kb(), kb()
    ia, ib, ic, idd = (put(srv, x, "s1")["id"] for x in (a, b, c, d))  # 8000 bytes
    fetch(srv, ia, "s1")  # a is now the most recently used; b the least
    ie = put(srv, kb(), "s2")["id"]  # 10000: at the mark, nothing evicted
    assert srv.get("/v1/tensors", headers={"X-OD-Session": "s1"}).json()["count"] == 4
    put(srv, kb(), "s2")  # 12000 > 10000: b goes (least recently used, any session)
    r = get(srv, ib, "s1")
    assert r.status_code == 410, r.text
    assert error_message(r).startswith(f"tensor '{ib}' was evicted")
    r = call(srv, "relu", {"ref": ib}, session="s1")
    assert r.status_code == 410
    np.testing.assert_array_equal(fetch(srv, ia, "s1"), a)  # recently used: kept
    # a view keeps its base: neither the base (c) nor the view is evictable
    r = call(srv, "view", {"ref": ic}, [20, 25], session="s1", keep=True)
    assert r.status_code == 200, r.text
    for _ in range(3):  # each put evicts what it can, oldest first
        put(srv, kb(), "s2")
    np.testing.assert_array_equal(fetch(srv, ic, "s1"), c)
    assert get(srv, idd, "s1").status_code == 410 and get(srv, ie, "s2").status_code == 410
    # nothing left that can go: 507 with the numbers, and nothing evicted
    before = {t["id"] for t in srv.get("/v1/tensors", headers={"X-OD-Session": "s2"}).json()["tensors"]}
    r = srv.post("/v1/tensors", {"tensor": tensor(np.zeros(5000, np.float32))}, headers={"X-OD-Session": "s2"})
    assert r.status_code == 507 and "--store-high-water-bytes (10000)" in error_message(r)
    after = {t["id"] for t in srv.get("/v1/tensors", headers={"X-OD-Session": "s2"}).json()["tensors"]}
    assert before == after
    # deleting an evicted id forgets it: then 404
    assert srv.session.delete(srv.url + f"/v1/tensors/{ib}", headers={"X-OD-Session": "s1"}).status_code == 200
    assert get(srv, ib, "s1").status_code == 404
    st = srv.get("/v1/stats").json()["store"]
    assert st["evicted"]["cpu"] >= 3
    assert 'od_store_evictions_total{device="cpu"}' in srv.get("/metrics").text


def test_get_respects_the_output_limit_before_copying(make_server, rng):
    """GET of a stored tensor is an answer like a call's: --max-output-bytes
    caps it as sent (from the shape first, then while the JSON is written),
    and 0 means no cap."""
    srv = make_server("--max-output-bytes", "1000")
    small = rng.standard_normal(100).astype(np.float32)  # 400 bytes, JSON ~ 1.1-1.3 KB
    big = rng.standard_normal(500).astype(np.float32)  # 2000 bytes
    sid, bid = put(srv, small)["id"], put(srv, big)["id"]
    r = get(srv, bid, binary="1")
    assert r.status_code == 413 and "at least 2000 bytes" in error_message(r)
    r = get(srv, sid)  # the shape allows it, the text does not
    assert r.status_code == 413 and "passes --max-output-bytes" in error_message(r)
    r = get(srv, sid, binary="1")
    assert r.status_code == 200
    _, blobs = parse_binary_response(r)
    np.testing.assert_array_equal(np.frombuffer(blobs[0], np.float32), small)
    srv0 = make_server("--max-output-bytes", "0")
    tid = put(srv0, big)["id"]
    np.testing.assert_array_equal(fetch(srv0, tid), big)
