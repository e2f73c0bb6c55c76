"""opdispatchd --plugin: the example plugin (examples/plugins/myops.c) adds
myops::fused_gelu_mul with CPU, CUDA and Meta kernels through the public
registration API; it answers like a built-in operator (calls checked
against numpy, tables, dumps, explain, statistics, stored tensors). Broken
plugins stop start-up with a message naming the plugin and the problem."""

import math
import pathlib
import subprocess

import numpy as np
import pytest

from conftest import SERVER_BIN, error_message, from_json, tensor, validate

PLUGINS = pathlib.Path(SERVER_BIN).parent / "plugins"
MYOPS = str(PLUGINS / "libmyops.so")


def gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


@pytest.fixture
def srv(make_server):
    return make_server("--plugin", MYOPS)


def test_the_plugin_operator_answers_like_a_builtin(srv, rng):
    for dt, tol in ((np.float32, 1e-6), (np.float64, 1e-13)):
        a = rng.standard_normal((4, 5)).astype(dt)
        b = rng.standard_normal((4, 5)).astype(dt)
        r = srv.call("myops::fused_gelu_mul", tensor(a), tensor(b))
        assert r.status_code == 200, r.text
        validate(r, "POST", "/v1/ops/myops::fused_gelu_mul")
        d = r.json()["dispatch"]
        assert d["kernel"] == "myops_cpu_kernel" and d["key"] == "CPU"
        np.testing.assert_allclose(from_json(r.json()["outputs"][0]), gelu(a.astype(np.float64)) * b,
                                   rtol=tol, atol=tol)
    # its checks, with its own messages
    r = srv.call("myops::fused_gelu_mul", tensor(np.ones(3, np.float32)), tensor(np.ones(4, np.float32)))
    assert r.status_code == 422 and "one shape" in error_message(r)
    r = srv.call("myops::fused_gelu_mul", tensor(np.ones(3, np.int32)), tensor(np.ones(3, np.int32)))
    assert r.status_code == 422


def test_tables_dumps_explain_stats_and_store(srv, rng):
    groups = {g["name"] for g in srv.get("/v1/ops").json()["operators"]}
    assert "myops::fused_gelu_mul" in groups
    t = srv.get("/v1/ops/myops::fused_gelu_mul").json()
    kernels = {row["key"]: row for row in t["table"]}
    assert kernels["CPU"]["kernel"] == "myops_cpu_kernel"
    assert kernels["CUDA"]["kernel"] == "myops_cuda_kernel"
    assert kernels["Meta"]["kernel"] == "myops_meta_kernel"
    assert kernels["CPU"]["registered_at"].startswith("examples/plugins/myops.c:")
    dump = srv.get("/v1/ops/myops::fused_gelu_mul?format=text").text
    assert "CPU: registered at examples/plugins/myops.c:" in dump
    x = {"dtype": "float32", "shape": [64, 8]}
    r = srv.post("/v1/ops/myops::fused_gelu_mul/explain", {"args": [x, x]})
    assert r.status_code == 200, r.text
    srv.post("/v1/stats/reset", {})
    a = rng.standard_normal(6).astype(np.float32)
    ia = srv.post("/v1/tensors", {"tensor": tensor(a)}).json()["id"]
    r = srv.post("/v1/run", {"steps": [{"op": "myops::fused_gelu_mul", "args": [{"ref": ia}, {"ref": ia}]},
                                       {"op": "sum", "args": [{"ref": "$0"}]}]})
    assert r.status_code == 200, r.text
    want = (gelu(a.astype(np.float64)) * a).sum()
    np.testing.assert_allclose(from_json(r.json()["outputs"][0]), want, rtol=1e-5)
    ops = {o["op"]: o for o in srv.get("/v1/stats").json()["ops"]}
    assert ops["myops::fused_gelu_mul"]["requests"] == 1


def start_fails(*args, code=1):
    p = subprocess.run([SERVER_BIN, "--host", "127.0.0.1", "--port", "0", *args], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    return p.stderr


def test_broken_plugins_stop_start_up_naming_the_problem():
    bad = str(PLUGINS / "libbad_schema.so")
    err = start_fails("--plugin", bad)
    assert f"plugin {bad}: invalid schema" in err and "column 27" in err
    nope = str(PLUGINS / "libno_entry.so")
    err = start_fails("--plugin", nope)
    assert f"plugin {nope}: no od_plugin_init function" in err
    old = str(PLUGINS / "libold_abi.so")
    err = start_fails("--plugin", old)
    assert f"plugin {old}: built for another plugin ABI" in err and "must never run" not in err
    err = start_fails("--plugin", "/nonexistent/libx.so", code=2)  # a configuration error
    assert "--plugin: '/nonexistent/libx.so': No such file or directory" in err
    err = start_fails("--plugin", str(PLUGINS / "libmyops.d"))  # a file, but no library
    assert "cannot load it" in err
    err = start_fails("--plugin", MYOPS, "--plugin", MYOPS)
    assert "same name and overload name multiple times" in err
