"""One list of statuses: OD_STATUS_TABLE in dispatcher/od_error.h is the
source; PROTOCOL.md's error table and openapi.yaml's error codes must list
exactly its codes, with the same HTTP statuses."""

import re

from conftest import ROOT, spec


def table():
    text = (ROOT / "dispatcher" / "od_error.h").read_text()
    rows = re.findall(r'X\((OD_\w+), "(\w+)", (\d+),', text)
    assert len(rows) >= 15, rows
    return {code: int(http) for _, code, http in rows if code != "ok"}


def test_protocol_md_lists_exactly_the_codes():
    text = (ROOT / "proto" / "PROTOCOL.md").read_text()
    section = text.split("## Errors", 1)[1].split("\n## ", 1)[0]
    documented = {}
    for status, codes in re.findall(r"^\| (\d{3}) \| ([^|]+) \|", section, re.M):
        for code in re.findall(r"`(\w+)`", codes):
            documented[code] = int(status)
    assert documented == table()


def test_openapi_lists_exactly_the_codes():
    enum = spec()["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"]
    assert sorted(enum) == sorted(table())


def test_server_answers_with_the_table(server):
    t = table()
    r = server.get("/v1/nothing")
    assert r.status_code == t[r.json()["error"]["code"]] == 404
    r = server.session.delete(server.url + "/v1/ops", timeout=10)
    assert r.json()["error"]["code"] == "method_not_allowed" and r.status_code == t["method_not_allowed"]
    r = server.post("/v1/ops/relu", data=b"{", headers={"Content-Type": "text/plain"})
    assert r.json()["error"]["code"] == "unsupported_media_type" and r.status_code == 415
    r = server.post("/v1/ops/relu", data=b"{", headers={"Content-Type": "application/json"})
    assert r.json()["error"]["code"] == "invalid_argument" and r.status_code == 400
