"""Advanced indexing (index.Tensor, index_put, index_put_) against PyTorch 1.13.

Fresh random cases: ranks 1-3 with empty dims, long indices (negative,
broadcast against each other, 0-dim), bool masks, None (full slices) before,
between and after the indexed dims (adjacent or not: the two result layouts),
index_put with values broadcast from a lower rank, with and without
accumulate (duplicates included). Values are compared exactly; every error
must be torch's own message. Gradients are in test_autograd.py."""

import numpy as np
import pytest

from conftest import from_json, torch_ref


def T(a):
    a = np.asarray(a)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.reshape(-1).tolist()}


def random_case(rng):
    nd = int(rng.integers(1, 4))
    shape = [int(rng.integers(0 if rng.random() < 0.06 else 1, 5)) for _ in range(nd)]
    x = rng.standard_normal(shape)
    idx = []
    for d in range(nd):
        c = rng.integers(0, 4)
        if c == 0:
            idx.append(None)
        elif c == 3 and rng.random() < 0.5:
            idx.append(rng.random(shape[d:d + 1]) < 0.5)
        else:
            hi = max(shape[d], 1)
            bad = 1 if rng.random() < 0.04 else 0  # an index out of range now and then
            idx.append(rng.integers(-hi - bad, hi, size=[int(v) for v in rng.integers(1, 4, size=rng.integers(0, 3))]))
    idx = idx[:int(rng.integers(1, nd + 1))]
    if all(i is None for i in idx):
        idx[0] = np.array([0])
    return x, idx


def enc_list(idx):
    return [None if i is None else T(i) for i in idx]


def test_index_and_index_put_against_torch(server, rng):
    cases = []
    for _ in range(150):
        x, idx = random_case(rng)
        cases.append(("index.Tensor", [T(x), enc_list(idx)]))
    # index_put needs the indexing result's shape: ask torch for it first
    shapes = torch_ref([{"op": op, "args": args} for op, args in cases])
    for (op, args), s in zip(list(cases), shapes):
        if "error" in s:
            continue
        shp = s["shape"]
        vshape = shp[1:] if shp and rng.random() < 0.3 else shp
        v = rng.standard_normal(vshape)
        if rng.random() < 0.5:  # duplicates make accumulate matter
            v = np.round(v * 4) / 4
        cases.append(("index_put", [args[0], args[1], T(v), bool(rng.random() < 0.5)]))
        cases.append(("index_put_", [args[0], args[1], T(v), bool(rng.random() < 0.5)]))
    want = torch_ref([{"op": op, "args": args} for op, args in cases])
    errors = results = 0
    for (op, args), w in zip(cases, want):
        r = server.post(f"/v1/ops/{op}", {"args": args})
        what = f"{op} self{args[0]['shape']} indices {[None if i is None else (i['dtype'], i['shape']) for i in args[1]]}"
        if "error" in w and w["error"].startswith("output with shape"):
            # torch 1.13's defect: index_put(accumulate=False) with values of a
            # lower rank over size-1 dims ("output with shape [4, 1, 1] doesn't
            # match the broadcast shape [4, 4, 1]"); the values do broadcast
            assert r.status_code == 200, (what, r.text[:300])
            continue
        if "error" in w:
            errors += 1
            assert 400 <= r.status_code < 500, (what, r.text[:300])
            assert r.json()["error"]["message"] in w["error"], (what, r.json(), w["error"])
            continue
        results += 1
        assert r.status_code == 200, (what, r.text[:500])
        got = from_json(r.json()["outputs"][0])
        assert list(got.shape) == w["shape"], (what, got.shape, w["shape"])
        np.testing.assert_array_equal(got.reshape(-1), np.array(w["value"], dtype=np.float64), err_msg=what)
    assert results > 150 and errors > 0, (results, errors)


X = {"dtype": "float32", "shape": [3, 4], "data": list(range(12))}


def L(*v, dtype="int64"):
    a = np.array(v, dtype=dtype)
    return T(a)


@pytest.mark.parametrize("op,args", [
    ("index.Tensor", [X, [L(0, 5, 7)]]),
    ("index.Tensor", [X, [None, L(1, 9)]]),
    ("index.Tensor", [X, [None, L(-5)]]),
    ("index.Tensor", [X, [L(1, 2), L(1, 2, 3)]]),
    ("index.Tensor", [X, [L(1, 2), L(1), L(0)]]),
    ("index.Tensor", [X, [L(1, dtype="int32")]]),
    ("index.Tensor", [X, [L(1.0, dtype="float32")]]),
    ("index.Tensor", [X, [L(True, False, dtype="bool")]]),
    ("index.Tensor", [{"dtype": "float32", "shape": [], "data": [5]}, [{"dtype": "int64", "shape": [], "data": [0]}]]),
    ("index_put", [X, [L(1)], L(1, 1, 1, dtype="float32")]),
    ("index_put", [X, [L(1)], L(1, 1, 1, 1, dtype="float64")]),
    ("index.Tensor", [{"dtype": "float32", "shape": [2, 0], "data": []}, [None, L(0)]]),
])
def test_refusals_say_what_torch_says(server, op, args):
    r = server.post(f"/v1/ops/{op}", {"args": args})
    assert 400 <= r.status_code < 500, r.text
    msg = r.json()["error"]["message"]
    [w] = torch_ref([{"op": op, "args": args}])
    assert msg in w["error"], (msg, w)


def test_cases_torch_itself_cannot_answer_are_refused_cleanly(server):
    # all-None indices: torch 1.13 fails an internal assert
    r = server.post("/v1/ops/index.Tensor", {"args": [X, [None]]})
    assert r.status_code == 400 and "at least one Tensor" in r.json()["error"]["message"]
    r = server.post("/v1/ops/index.Tensor", {"args": [X, []]})
    assert r.status_code == 400
    # a 0-dim mask on a tensor with dims: torch's internal assert again
    r = server.post("/v1/ops/index.Tensor", {"args": [X, [{"dtype": "bool", "shape": [], "data": [True]}]]})
    assert r.status_code == 400 and "0-dim bool mask" in r.json()["error"]["message"]
    assert server.get("/v2/health/ready").status_code == 200
