"""eye, linspace, logspace, tril_indices, triu_indices, _local_scalar_dense
(kernels/shape_factory.c, kernels/cpu/factory.c, kernels/composite/
factories_blas.c) and mv, addmv, addr, baddbmm, addbmm with their in-place
forms (kernels/cpu/blas.c) against PyTorch 1.13 on fresh random inputs of
every dtype torch 1.13's CPU takes: factories bit for bit (linspace replays
ATen's vectorised stepping), products within rounding; empty, 0-dim,
broadcast and transposed (really strided, through /v1/run) operands; beta = 0
ignoring NaN in self, integer alpha/beta truncation; refusals say what torch
says."""

import numpy as np

from conftest import assert_bits_as_torch, from_json, torch_ref

ALL = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
BLAS = ("float32", "float64", "bfloat16", "int64", "int32", "int16", "int8", "uint8")  # torch 1.13's CPU


def T(a, dt=None):
    a = np.asarray(a)
    dt = dt or str(a.dtype)
    data = a.reshape(-1).tolist()
    if dt.startswith("float") or dt == "bfloat16":
        data = ["NaN" if x != x else ("Infinity" if x > 0 else "-Infinity") if abs(x) == np.inf else x
                for x in data]
    return {"dtype": dt, "shape": list(a.shape), "data": data}


def rand(rng, shape, dt):
    """Random values of dtype dt (as a float64/int64/bool array, sent as dt)."""
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt.startswith("float") or dt == "bfloat16":
        x = rng.standard_normal(shape) * 2
        return x.astype(np.float16).astype(np.float64) if dt == "float16" else x
    lo = 0 if dt == "uint8" else -5
    return rng.integers(lo, 6, shape)


def arr(o):
    """An output as float64 (conftest's from_json has no bfloat16)."""
    if o["dtype"] != "bfloat16":
        return from_json(o).astype(np.float64)
    return np.array([float(x) for x in o["data"]], np.float64).reshape(o["shape"])


def product_scale(op, vals, kw):
    """The elementwise bound |beta|*|self| + |alpha| * (|A| @ |B|) of a BLAS
    call, in float64: torch rounds a half-precision product's partial sums
    (addbmm: one addmm_ per batch), so its error is the dtype's eps on the
    scale of the terms summed, not of a result cancellation made small."""
    a = [np.abs(np.nan_to_num(np.asarray(v, np.float64))) for v in vals]
    alpha, beta = abs(float(kw.get("alpha", 1))), abs(float(kw.get("beta", 1)))
    if op == "mv":
        return a[0] @ a[1]
    prod = np.multiply.outer(a[1], a[2]) if op.startswith("addr") else a[1] @ a[2]
    if op.startswith("addbmm"):
        prod = prod.sum(axis=0)
    return beta * a[0] + alpha * prod


def half_close(got, ref, op, vals, kw, dt, what):
    eps = 2.0 ** (-8 if dt == "bfloat16" else -11)
    atol = (4 * eps * product_scale(op, vals, kw)).reshape(-1)
    bad = ~(np.abs(got - ref) <= atol + 1e-6) & ~(np.isnan(got) & np.isnan(ref))
    assert not bad.any(), (what, got[bad], ref[bad], atol[bad])


def describe(op, args, kw):
    return f"{op} {[a['dtype'] + str(a['shape']) if isinstance(a, dict) else a for a in args]} {kw}"


def compare(server, cases, exact=False):
    want = torch_ref([{"op": op, "args": a, "kwargs": kw} for op, a, kw in cases])
    for (op, args, kw), w in zip(cases, want):
        r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kw})
        what = describe(op, args, kw)
        if "error" in w:
            assert 400 <= r.status_code < 500, (what, w["error"], r.text[:300])
            assert r.json()["error"]["message"] in w["error"], (what, r.json()["error"], w["error"])
            continue
        assert r.status_code == 200, (what, w, r.text[:300])
        o = r.json()["outputs"][0]
        assert o["dtype"] == w["dtype"] and o["shape"] == w["shape"], (what, o["dtype"], o["shape"], w)
        got = arr(o).reshape(-1)
        ref = np.array(w["value"], np.float64)
        dt = w["dtype"]
        if exact or not (dt.startswith("float") or dt == "bfloat16"):
            if dt in ("float16", "float32"):  # the JSON carries the value rounded to its dtype
                got, ref = got.astype(dt), ref.astype(dt)
            elif dt == "bfloat16":
                np.testing.assert_allclose(got, ref, rtol=1e-6, err_msg=what)
                continue
            np.testing.assert_array_equal(got, ref, err_msg=what)
        elif dt in ("float16", "bfloat16") and all(isinstance(a, dict) for a in args):
            vals = [np.array([float(x) for x in a["data"]], np.float64).reshape(a["shape"]) for a in args]
            half_close(got, ref.reshape(-1), op, vals, kw, dt, what)
        else:
            tol = {"float64": 1e-10, "float32": 2e-5, "float16": 2e-2, "bfloat16": 2e-2}[dt]
            np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * 4, err_msg=what)


# ---- factories -------------------------------------------------------------------------------

def test_factories_bit_for_bit(server, rng):
    cases = []
    for dt in ALL:
        for n in (0, 1, 3, int(rng.integers(2, 9))):
            cases.append(("eye", [n], {"dtype": dt}))
            cases.append(("eye.m", [n, int(rng.integers(0, 9))], {"dtype": dt}))
        for steps in (0, 1, 2, 3, 16, 17, 33, int(rng.integers(4, 300)), 1000):
            if dt.startswith("float") or dt == "bfloat16":
                a, b = (float(x) for x in rng.uniform(-100, 100, 2))
            elif dt == "bool":
                a, b = 0, 1
            else:
                lo = 0 if dt == "uint8" else -100
                a, b = (int(x) for x in rng.integers(lo, 101, 2))
            cases.append(("linspace", [a, b, steps], {"dtype": dt}))
            la, lb = (a / 30, b / 30) if not isinstance(a, int) else (a // 30, b // 30)
            kw = {"dtype": dt}
            if rng.random() < 0.5:
                kw["base"] = float(rng.choice([2.0, 0.5, 3.0]))
            cases.append(("logspace", [la, lb, steps], kw))
    # no dtype: float32 (integer bounds too); bool bounds
    cases += [("linspace", [0, 10, 7], {}), ("linspace", [True, False, 3], {}), ("logspace", [0, 3, 4], {}),
              ("linspace", [-5, 5, 5], {"dtype": "uint8"}),  # start wraps to 251, as torch's to<uint8_t>
              ("linspace", [0.5, 9.75, 37], {"dtype": "int32"}), ("logspace", [1, 3, 5], {"base": 2.0, "dtype": "int64"})]
    for dt in ("int64", "int32", None):
        for _ in range(6):
            r, c, off = int(rng.integers(0, 7)), int(rng.integers(0, 7)), int(rng.integers(-8, 9))
            kw = {"dtype": dt} if dt else {}
            cases += [("tril_indices", [r, c, off], kw), ("triu_indices", [r, c, off], kw)]
        cases += [("tril_indices", [5, 3], {}), ("triu_indices", [3, 5], {})]
        # rows split across the pool (cpu/factory.c), and offsets past 2^30 that keep ATen's loop
        for r, c, off in ((700, 300, int(rng.integers(-60, 0))), (300, 700, int(rng.integers(0, 400))),
                          (3, 4, 2 ** 31 + 5), (4, 3, -(2 ** 31) - 5)):
            kw = {"dtype": dt} if dt else {}
            cases += [("tril_indices", [r, c, off], kw), ("triu_indices", [r, c, off], kw)]
    compare(server, cases, exact=True)


FACTORY_REFUSALS = [
    ("eye", [-1], {}), ("eye.m", [2, -3], {}),
    ("linspace", [0, 1, -1], {}), ("linspace", [0, 1, 3], {"dtype": "bool"}),
    ("linspace", [0, 300, 5], {"dtype": "uint8"}), ("linspace", [0, 1e10, 5], {"dtype": "int32"}),
    ("logspace", [0, 2, 3], {"dtype": "bool"}), ("logspace", [0, 2, 3], {"dtype": "float16"}),
    ("logspace", [0, 2, -2], {}),
    ("tril_indices", [-1, 3], {}), ("triu_indices", [3, -2], {}),
    ("tril_indices", [3, 3], {"dtype": "float32"}), ("triu_indices", [0, 3], {"dtype": "int16"}),
]


def test_factory_refusals_say_what_torch_says(server):
    compare(server, FACTORY_REFUSALS)


def test_local_scalar_dense_answers_a_scalar(server, rng):
    """_local_scalar_dense returns a Scalar as equal returns its bool: the
    first element (ATen reads data_ptr without a count check), as a JSON
    number or bool of the dtype's kind."""
    for dt in ALL:
        for shape in ((), (1,), (3, 2)):
            x = rand(rng, shape, dt)
            r = server.post("/v1/ops/_local_scalar_dense", {"args": [T(x, dt)]})
            assert r.status_code == 200, (dt, shape, r.text[:300])
            v = r.json()["outputs"][0]["value"]
            first = np.asarray(x).reshape(-1)[0]
            if dt == "bool":
                assert v is bool(first), (dt, v)
            elif dt.startswith("float") or dt == "bfloat16":
                want = float(first) if dt != "float32" else float(np.float32(first))
                if dt == "bfloat16":
                    assert abs(v - want) <= abs(want) * 2 ** -8, (dt, v, want)
                else:
                    assert isinstance(v, float) and v == want, (dt, v, want)
            else:
                assert isinstance(v, int) and v == int(np.asarray(first).astype(dt)), (dt, v, first)
    # a strided view: the element at its own offset (select on a transpose)
    x = rng.standard_normal((3, 4))
    body = {"steps": [{"op": "t", "args": [T(x)]}, {"op": "select.int", "args": [{"ref": "$0"}, 0, 2]},
                      {"op": "_local_scalar_dense", "args": [{"ref": "$1"}]}]}
    r = server.post("/v1/run", body)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["outputs"][0]["value"] == x[0, 2]
    r = server.post("/v1/ops/_local_scalar_dense", {"args": [T(np.zeros((0, 2)))]})
    assert 400 <= r.status_code < 500, r.text  # torch reads out of bounds here


# ---- BLAS-2/3 ------------------------------------------------------------------------------------

def blas_cases(rng, dt):
    R = lambda *s: T(rand(rng, s, dt), dt)
    n, k, m, b = (int(x) for x in rng.integers(1, 6, 4))
    fl = dt.startswith("float") or dt == "bfloat16"
    beta, alpha = (0.5, 1.5) if fl else (2, 3)
    C = [("mv", [R(n, k), R(k)], {}), ("mv", [R(n, 0), R(0)], {}), ("mv", [R(0, k), R(k)], {}),
         ("addmv", [R(n), R(n, k), R(k)], {}), ("addmv", [R(1), R(n, k), R(k)], {"beta": beta, "alpha": alpha}),
         ("addmv", [R(), R(n, k), R(k)], {"beta": 0}), ("addmv", [R(n), R(n, 0), R(0)], {"beta": beta}),
         ("addr", [R(n, m), R(n), R(m)], {}), ("addr", [R(m), R(n), R(m)], {"beta": beta, "alpha": alpha}),
         ("addr", [R(), R(n), R(m)], {"beta": 0}), ("addr", [R(n, 1), R(n), R(0)], {}),
         ("baddbmm", [R(b, n, m), R(b, n, k), R(b, k, m)], {}),
         ("baddbmm", [R(m), R(b, n, k), R(b, k, m)], {"beta": beta, "alpha": alpha}),
         ("baddbmm", [R(n, 1), R(b, n, 0), R(b, 0, m)], {"beta": beta}),
         ("baddbmm", [R(b, n, m), R(0, n, k), R(0, k, m)], {}),
         ("addbmm", [R(n, m), R(b, n, k), R(b, k, m)], {}),
         ("addbmm", [R(1, m), R(b, n, k), R(b, k, m)], {"beta": beta, "alpha": alpha}),
         ("addbmm", [R(n, m), R(0, n, k), R(0, k, m)], {"beta": beta}),
         ("addbmm", [R(n, m), R(b, n, 0), R(b, 0, m)], {"beta": 0})]
    if not fl:  # torch 1.13 truncates float alpha/beta to the integer dtype (addr refuses them)
        C += [("addmv", [R(n), R(n, k), R(k)], {"beta": 0.5, "alpha": 2.7}),
              ("baddbmm", [R(b, n, m), R(b, n, k), R(b, k, m)], {"beta": 1.9, "alpha": -1.2}),
              ("addbmm", [R(n, m), R(b, n, k), R(b, k, m)], {"beta": 0.2})]
    return C


def test_blas_against_torch(server, rng):
    cases = []
    for dt in BLAS:
        cases += blas_cases(rng, dt)
    # addr takes every dtype (type promotion included); bool and float16 products refused
    for dt in ("float16", "bool"):
        R = lambda *s: T(rand(rng, s, dt), dt)
        cases += [("addr", [R(3, 4), R(3), R(4)], {}), ("addr", [R(3, 4), R(3), R(4)], {"beta": 0}),
                  ("addmv", [R(3), R(3, 2), R(2)], {}), ("addmv", [R(3), R(3, 0), R(0)], {}),
                  ("baddbmm", [R(2, 3, 4), R(2, 3, 2), R(2, 2, 4)], {}),
                  ("addbmm", [R(3, 4), R(2, 3, 2), R(2, 2, 4)], {}), ("mv", [R(3, 2), R(2)], {})]
    cases += [("addr", [T(rand(rng, (3, 4), "int32"), "int32"), T(rng.standard_normal(3)), T(rng.integers(0, 3, 4))], {}),
              ("addr", [T(rng.integers(0, 3, (3, 4)), "int16"), T(rng.integers(0, 3, 3), "uint8"),
                        T(rng.integers(0, 3, 4), "int8")], {"alpha": 2}),
              ("addr", [T(rand(rng, (2, 3), "bool"), "bool")] + [T(rand(rng, (s,), "bool"), "bool") for s in (2, 3)],
               {"beta": True, "alpha": False}),
              ("addmv", [T(rng.standard_normal(3)), T(rng.standard_normal((3, 2)), "float32"),
                         T(rng.standard_normal(2), "float32")], {})]  # self float64: cast to mat's dtype
    # the result takes vec's dtype; mat and vec of different dtypes are refused by the gemv, which an empty
    # mat never reaches (zeros, or self * beta, of vec's dtype)
    I = lambda dt, *s: T(rng.integers(-3, 4, s), dt)
    F = lambda dt, *s: T(rng.standard_normal(s), dt)
    cases += [("mv", [I("int16", 0, 3), I("int64", 3)], {}), ("mv", [F("float32", 2, 0), F("float64", 0)], {}),
              ("mv", [F("float64", 2, 0), I("int32", 0)], {}), ("mv", [I("int16", 2, 3), I("int64", 3)], {}),
              ("addmv", [I("int16", 2), F("float64", 2, 0), F("float32", 0)], {"beta": 2}),
              ("addmv", [F("float32", 2), F("float32", 2, 0), F("float64", 0)], {"beta": 0}),
              ("addmv", [I("int64", 0), I("int16", 0, 3), I("int64", 3)], {}),
              ("addmv", [F("float32", 2), F("float32", 2, 3), F("float64", 3)], {})]
    compare(server, cases)


def test_beta_zero_ignores_nan_and_inf_in_self(server, rng):
    nan = np.full((3, 4), np.nan)
    cases = [("addmv", [T(nan[:, 0]), T(rng.standard_normal((3, 2))), T(rng.standard_normal(2))], {"beta": 0}),
             ("addmv", [T(nan[:, 0]), T(np.zeros((3, 0))), T(np.zeros(0))], {"beta": 0}),
             ("addr", [T(nan), T(rng.standard_normal(3)), T(rng.standard_normal(4))], {"beta": 0}),
             ("baddbmm", [T(nan[None]), T(rng.standard_normal((1, 3, 2))), T(rng.standard_normal((1, 2, 4)))],
              {"beta": 0}),
             ("addbmm", [T(nan), T(rng.standard_normal((2, 3, 2))), T(rng.standard_normal((2, 2, 4)))], {"beta": 0}),
             ("addbmm", [T(nan), T(np.zeros((0, 3, 2))), T(np.zeros((0, 2, 4)))], {"beta": 0}),
             ("addmv", [T(np.full(3, np.inf)), T(rng.standard_normal((3, 2))), T(rng.standard_normal(2))], {})]
    compare(server, cases)


def test_strided_operands(server, rng):
    """Transposed and sliced views (built on the server through /v1/run) give
    the answer torch gives for their values."""
    runs, refs = [], []
    for dt in ("float32", "float64", "bfloat16", "int64", "int16"):
        mat, vec = rand(rng, (4, 3), dt), rand(rng, (8,), dt)
        b1, b2, s2 = rand(rng, (2, 5, 3), dt), rand(rng, (5, 2, 6), dt), rand(rng, (6, 3), dt)
        self1, self3 = rand(rng, (3,), dt), rand(rng, (2, 3, 6), dt)
        steps = [{"op": "t", "args": [T(mat, dt)]},                        # $0 [3, 4], column-major
                 {"op": "slice.Tensor", "args": [T(vec, dt), 0, 0, 8, 2]},  # $1 [4], stride 2
                 {"op": "transpose.int", "args": [T(b1, dt), 1, 2]},       # $2 [2, 3, 5]
                 {"op": "transpose.int", "args": [T(b2, dt), 0, 1]},       # $3 [2, 5, 6], batch stride 6
                 {"op": "t", "args": [T(s2, dt)]}]                         # $4 [3, 6]
        kw = {"beta": 2, "alpha": 3}
        for op, args, vals, k in (
                ("mv", [{"ref": "$0"}, {"ref": "$1"}], (mat.T, vec[::2]), {}),
                ("addmv", [T(self1, dt), {"ref": "$0"}, {"ref": "$1"}], (self1, mat.T, vec[::2]), kw),
                ("baddbmm", [T(self3, dt), {"ref": "$2"}, {"ref": "$3"}],
                 (self3, b1.transpose(0, 2, 1), b2.transpose(1, 0, 2)), kw),
                ("addbmm", [{"ref": "$4"}, {"ref": "$2"}, {"ref": "$3"}],
                 (s2.T, b1.transpose(0, 2, 1), b2.transpose(1, 0, 2)), kw)):
            runs.append((op, dt, vals, {"steps": steps + [{"op": op, "args": args, "kwargs": k}],
                                  "outputs": [f"${len(steps)}"]}))
            refs.append({"op": op, "args": [T(np.ascontiguousarray(x), dt) for x in vals], "kwargs": k})
    for (op, dt, vals, body), w in zip(runs, torch_ref(refs)):
        r = server.post("/v1/run", body)
        assert r.status_code == 200, (op, dt, r.text[:300])
        o = r.json()["outputs"][0]
        assert o["shape"] == w["shape"] and o["dtype"] == w["dtype"], (op, dt, o["shape"], w)
        if dt == "bfloat16":
            half_close(arr(o).reshape(-1), np.asarray(w["value"], np.float64), op, vals, body["steps"][-1]["kwargs"], dt, f"{op} {dt}")
        else:
            np.testing.assert_allclose(arr(o).reshape(-1), w["value"], rtol=1e-5, atol=5e-5,
                                       err_msg=f"{op} {dt}")


def test_inplace_forms(server, rng):
    for op in ("addmv_", "addr_", "baddbmm_", "addbmm_"):
        base = op[:-1]
        a = {"addmv": [(3,), (3, 2), (2,)], "addr": [(3, 4), (3,), (4,)],
             "baddbmm": [(2, 3, 4), (2, 3, 5), (2, 5, 4)], "addbmm": [(3, 4), (2, 3, 5), (2, 5, 4)]}[base]
        args = [T(rng.standard_normal(s).astype(np.float32)) for s in a]
        w = torch_ref([{"op": op, "args": args, "kwargs": {"beta": 0.5, "alpha": 2}}])[0]
        r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": {"beta": 0.5, "alpha": 2}})
        assert r.status_code == 200, (op, r.text[:300])
        o = r.json()["outputs"][0]
        assert o["shape"] == w["shape"] and o["dtype"] == "float32"
        np.testing.assert_allclose(from_json(o).reshape(-1), w["value"], rtol=2e-5, atol=1e-5, err_msg=op)
    # self must already have the result's shape and dtype
    for op, args in (("addmv_", [T(np.ones(1, np.float32)), T(np.ones((3, 2), np.float32)), T(np.ones(2, np.float32))]),
                     ("baddbmm_", [T(np.ones((2, 3, 4), np.int64)), T(np.ones((2, 3, 5), np.float32)),
                                   T(np.ones((2, 5, 4), np.float32))])):
        r = server.post(f"/v1/ops/{op}", {"args": args})
        assert 400 <= r.status_code < 500, (op, r.text[:300])
    # addmv's result takes vec's dtype and baddbmm's batch1's: in place, self must have it, not merely hold it;
    # addbmm_ and addr_ cast into self as a TensorIterator would
    compare(server, [("addmv_", [T(np.full(1, -5, np.int16)), T(np.zeros((1, 1), np.int32)), T(np.zeros(1, np.int32))], {}),
                     ("addmv_", [T(np.ones(3)), T(np.ones((3, 2), np.float32)), T(np.ones(2, np.float32))], {}),
                     ("baddbmm_", [T(np.ones((1, 2, 2), np.int16)), T(np.ones((1, 2, 2), np.int32)),
                                   T(np.ones((1, 2, 2), np.int32))], {}),
                     ("addr_", [T(np.ones((3, 2))), T(np.ones(3, np.float32)), T(np.ones(2, np.float32))], {})])


BLAS_REFUSALS = [
    ("mv", [(3, 4), (5,)], {}), ("mv", [(3,), (3,)], {}), ("mv", [(3, 4), (4, 1)], {}),
    ("addmv", [(2,), (3, 4), (4,)], {}), ("addmv", [(3, 1), (3, 4), (4,)], {}),
    ("addr", [(3, 4), (3,), (4, 1)], {}), ("addr", [(2, 4), (3,), (4,)], {}), ("addr", [(3, 4), (3,), (5,)], {}),
    ("baddbmm", [(2, 3, 4), (2, 3, 5), (2, 6, 4)], {}), ("baddbmm", [(2, 3, 4), (2, 3, 5), (3, 5, 4)], {}),
    ("baddbmm", [(3, 3, 4), (2, 3, 5), (2, 5, 4)], {}), ("baddbmm", [(2, 3, 4), (3, 5), (2, 5, 4)], {}),
    ("baddbmm", [(2, 3, 4), (2, 3, 5, 1), (2, 5, 4)], {}),
    ("addbmm", [(3, 4), (2, 3, 5), (2, 6, 4)], {}), ("addbmm", [(3, 4), (2, 3, 5), (3, 5, 4)], {}),
    ("addbmm", [(4, 4), (2, 3, 5), (2, 5, 4)], {}), ("addbmm", [(3, 4), (2, 3), (2, 5, 4)], {}),
    ("addmv", [(3,), (3, 4), (4,)], {"beta": 1e50}), ("baddbmm", [(2, 3, 4), (2, 3, 5), (2, 5, 4)], {"alpha": 1e50}),
]


def test_blas_refusals_say_what_torch_says(server, rng):
    compare(server, [(op, [T(rng.standard_normal(s).astype(np.float32)) for s in shapes], kw)
                     for op, shapes, kw in BLAS_REFUSALS])


DTYPE_REFUSALS = [
    ("mv", ("float32", "float64")), ("addmv", ("float32", "float64", "float64")),
    ("addmv", ("float32", "float32", "float64")), ("baddbmm", ("float32", "float32", "float64")),
    ("addbmm", ("float64", "float32", "float32")), ("addbmm", ("float32", "float32", "float64")),
    # mm and bmm have no dtype check of their own in torch 1.13: the CPU kernel dispatches on the first
    # operand's dtype (no Half or Bool) and reads the second's data as that type; addmm checks self
    # against mat2, then mat1 against mat2, before anything else
    ("mm", ("float32", "int64")), ("mm", ("int64", "float32")), ("mm", ("float64", "float32")),
    ("mm", ("bfloat16", "int64")), ("mm", ("float16", "float32")), ("mm", ("bool", "int64")),
    ("bmm", ("float32", "int64")), ("bmm", ("int64", "float64")), ("bmm", ("float16", "float32")),
    ("bmm", ("bool", "int64")),
    ("addmm", ("float32", "float32", "int64")), ("addmm", ("float32", "int64", "float32")),
    ("addmm", ("float32", "float64", "float32")), ("addmm", ("int64", "float32", "float32")),
]


def test_blas_dtype_refusals(server, rng):
    shapes = {"mv": [(3, 4), (4,)], "addmv": [(3,), (3, 4), (4,)], "baddbmm": [(2, 3, 4), (2, 3, 5), (2, 5, 4)],
              "addbmm": [(3, 4), (2, 3, 5), (2, 5, 4)], "mm": [(2, 3), (3, 4)], "bmm": [(2, 2, 3), (2, 3, 4)],
              "addmm": [(2, 4), (2, 3), (3, 4)]}
    data = lambda s, d: rng.standard_normal(s) if d.startswith(("float", "bfloat")) else rng.integers(0, 2, s)
    compare(server, [(op, [T(data(s, d), d) for s, d in zip(shapes[op], dts)], {})
                     for op, dts in DTYPE_REFUSALS])


def test_addr_scalar_rules(server, rng):
    """(A bool beta for a float result is refused, as torch.addr does; torch.ops.aten.addr takes it as 1.)"""
    i = lambda *s: T(rng.integers(-3, 4, s), "int64")
    b = lambda *s: T(rng.random(s) < 0.5, "bool")
    f = lambda *s: T(rng.standard_normal(s), "float32")
    compare(server, [("addr", [i(3, 4), i(3), i(4)], {"beta": 1.5}), ("addr", [i(3, 4), i(3), i(4)], {"alpha": 0.5}),
                     ("addr", [b(3, 4), b(3), b(4)], {"beta": 0.5}),
                     ("addr", [b(3, 4), b(3), b(4)], {"beta": 2}), ("addr", [i(3, 4), i(3), i(4)], {"beta": 0}),
                     ("addr", [T(rng.integers(0, 3, (3, 4)), "int8"), i(3), i(4)], {}),
                     ("addr", [T(rng.integers(0, 3, (3, 4)), "int8")] + [T(rng.integers(0, 3, s), "int8") for s in (3, 4)],
                      {"alpha": 300}),
                     ("addr", [f(3, 4, 1), f(3), f(4)], {}), ("addr", [f(3, 4), f(3, 1), f(4)], {})])


def test_matmul_folds_where_torch_does(server, rng):
    """matmul folds a rank >= 3 first operand into one mm, except (torch's should_fold) a 3-D one with its
    last two dims transposed, which goes to bmm: the two differ in the dtype of an empty product of mixed
    dtypes (mm answers in the first operand's, bmm in the second's) and are checked on values too. The
    views are built on both sides (/v1/run steps here, torch_ref's views there)."""
    cases = []  # (views of a, a, b, op)
    for dt in ("float32", "float64"):
        a, b = rng.standard_normal((3, 5, 4)), rng.standard_normal((4, 2))
        cases += [([["transpose", 1, 2]], T(a, dt), T(rng.standard_normal((5, 2)), dt), "matmul"),  # [3, 4, 5]
                  # strides (20, 1, 4): bmm
                  ([["transpose", 0, 1]], T(a, dt), T(b, dt), "matmul"),  # [5, 3, 4] strides (4, 20, 1): folds
                  ([], T(a, dt), T(b, dt), "matmul"),
                  ([["transpose", 1, 2]], T(a, dt), T(rng.standard_normal((2, 5)), dt), "linear")]
    cases += [([["expand", [4, 1, 0]]], T(np.array([0]), "int64"), T(np.zeros((0, 0)), "int16"), "linear"),
              ([], T(np.zeros((4, 1, 0)), "int64"), T(np.zeros((0, 0)), "int16"), "linear"),
              ([["transpose", 1, 2]], T(np.zeros((2, 0, 3)), "int64"), T(np.zeros((0, 2)), "int16"), "matmul"),
              ([], T(np.zeros((2, 3, 0)), "int64"), T(np.zeros((0, 2)), "int16"), "matmul")]
    want = torch_ref([{"op": op, "args": [dict(a, views=v), b]} for v, a, b, op in cases])
    for (views, a, b, op), w in zip(cases, want):
        steps = [{"op": {"transpose": "transpose.int", "expand": "expand"}[name], "args": [{"ref": f"${i - 1}"} if i else a] + list(args)}
                 for i, (name, *args) in enumerate(views)]
        first = {"ref": f"${len(steps) - 1}"} if steps else a
        body = {"steps": steps + [{"op": op, "args": [first, b]}], "outputs": [f"${len(steps)}"]}
        r = server.post("/v1/run", body)
        assert r.status_code == 200 and "error" not in w, (views, op, r.text[:300], w)
        o = r.json()["outputs"][0]
        assert (o["dtype"], o["shape"]) == (w["dtype"], w["shape"]), (views, a["dtype"], a["shape"], o["dtype"], w)
        np.testing.assert_allclose(arr(o).reshape(-1), w["value"], rtol=1e-5, atol=1e-6, err_msg=f"{views} {op}")


def test_matmul_folds_a_larger_second_operand_transposed(server, rng):
    """A vector or matrix @ an operand of rank >= 3: torch 1.13 folds the second operand transposed
    (b.mT() reshaped to 2-D) into one mv or mm against a (a.t() for a matrix) and transposes a matrix's
    result back, unless should_fold keeps b (3-D with its last two dims transposed, against a matrix),
    which goes to bmm. The paths differ in the dtype of an empty product of mixed dtypes (mv answers in
    the vector's, mm in its first operand's, bmm in its second's) and in the message for a non-empty one;
    values are checked against torch on fresh random inputs, strided b included."""
    f = lambda dt, *s: T(rng.standard_normal(s), dt)
    z = lambda dt, *s: T(np.zeros(s), dt)
    cases = []
    for dt in ("float32", "float64"):
        cases += [("matmul", [f(dt, 3), f(dt, 4, 3, 5)], {}), ("matmul", [f(dt, 2, 3), f(dt, 4, 3, 5)], {}),
                  ("matmul", [f(dt, 3), f(dt, 2, 4, 3, 5)], {}), ("matmul", [f(dt, 2, 3), f(dt, 1, 3, 5)], {}),
                  ("matmul", [f(dt, 2, 3), f(dt, 2, 2, 3, 5)], {}), ("matmul", [f(dt, 0), f(dt, 2, 0, 3)], {})]
    compare(server, cases)
    cases = [("matmul", [z("int64", 1), z("float16", 2, 1, 0)], {}),
              ("matmul", [z("int64", 1), z("float16", 3, 4, 1, 0)], {}),
              ("matmul", [z("int64", 0), z("float16", 2, 0, 3)], {}),
              ("matmul", [z("float16", 1), z("int64", 3, 4, 1, 0)], {}),
              ("matmul", [z("int64", 2, 1), z("float16", 3, 1, 0)], {}),
              ("matmul", [f("float32", 3), T(rng.integers(0, 3, (4, 3, 5)), "int64")], {}),
              ("matmul", [T(rng.integers(0, 3, (2, 3)), "int64"), f("float32", 4, 3, 5)], {})]
    compare(server, cases, exact=True)
    # b built as a view on both sides: [4, 5, 3] transposed to [4, 3, 5], strides (15, 1, 3): bmm against a
    # matrix, a fold (with a copy) against a vector; a 4-D one, or a 3-D one permuted otherwise, folds
    views = [(f("float32", 2, 3), f("float32", 4, 5, 3), ["transpose", 1, 2]),
             (f("float64", 3), f("float64", 4, 5, 3), ["transpose", 1, 2]),
             (f("float32", 2, 3), f("float32", 2, 4, 5, 3), ["transpose", 2, 3]),
             (f("float32", 2, 3), f("float32", 3, 4, 5), ["permute", [1, 0, 2]])]
    want = torch_ref([{"op": "matmul", "args": [a, dict(b, views=[v])]} for a, b, v in views])
    for (a, b, (name, *vargs)), w in zip(views, want):
        op = {"transpose": "transpose.int", "permute": "permute"}[name]
        body = {"steps": [{"op": op, "args": [b] + vargs}, {"op": "matmul", "args": [a, {"ref": "$0"}]}],
                "outputs": ["$1"]}
        r = server.post("/v1/run", body)
        assert r.status_code == 200 and "error" not in w, (name, r.text[:300], w)
        o = r.json()["outputs"][0]
        assert (o["dtype"], o["shape"]) == (w["dtype"], w["shape"]), (name, o["dtype"], o["shape"], w)
        np.testing.assert_allclose(arr(o).reshape(-1), w["value"], rtol=1e-5, atol=1e-6, err_msg=name)


def test_empty_products_scale_self_as_torch_does(server, rng):
    """An empty product (no rows, an empty sum, no batches) is beta * self by each operator's own shortcut
    in torch 1.13: addmv multiplies self by beta converted (checked) to self's dtype and casts the product
    to the result (checked, even when the result is empty); addmm and baddbmm copy self into a non-empty
    result and mul_ it by beta, whose type promotion refuses a float beta on an integral result (with no
    conversion check on beta: uint8 * 300 wraps); addbmm's result takes self's dtype, and with no batches it
    is mul_'d even when empty. (addmv with a one-element self and an empty mat is left out: torch 1.13
    returns self's shape there, [1] for [n], by resizing its result.)"""
    shapes = {"addmv": [[(2,), (2, 0), (0,)], [(0,), (0, 3), (3,)]],
              "addmm": [[(2, 2), (2, 0), (0, 2)], [(1,), (2, 0), (0, 2)], [(0, 2), (0, 3), (3, 2)]],
              "baddbmm": [[(1, 2, 2), (1, 2, 0), (1, 0, 2)], [(0, 2, 2), (0, 2, 3), (0, 3, 2)]],
              "addbmm": [[(2, 2), (0, 2, 3), (0, 3, 2)], [(2, 2), (2, 2, 0), (2, 0, 2)], [(0, 2), (2, 0, 3), (2, 3, 2)]]}
    cases = []
    for op, shape_list in shapes.items():
        for ss, ms, vs in shape_list:
            for sdt in ("int64", "uint8", "bool", "float32", "float16"):
                for mdt in ("int64", "uint8", "float32", "bool"):
                    s = T(rng.integers(100, 250, ss) if sdt != "bool" else rng.random(ss) < 0.5, sdt)
                    m, v = T(np.ones(ms, np.int64), mdt), T(np.ones(vs, np.int64), mdt)
                    for beta in (0, 2, 2.5, float("nan"), 300):
                        cases.append((op, [s, m, v], {"beta": "NaN" if beta != beta else beta}))
    compare(server, cases, exact=True)


def test_long_linspace_is_the_same_on_any_number_of_threads(server, make_server, rng):
    """Past 32768 elements linspace runs in parallel, split on its 64-element blocks, so each block's
    start is the one a single pass computes: a one-thread server gives the same bits. torch splits its
    own way there, so against torch it agrees within rounding (its first 32768 elements bit for bit)."""
    one = make_server(env={"OD_NUM_THREADS": "1"})
    n = 100_003
    for dt in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8"):
        if dt in ("float32", "float64", "float16", "bfloat16"):
            a, b = (float(x) for x in rng.uniform(-100, 100, 2))
        else:
            a, b = (0, 255) if dt == "uint8" else (int(x) for x in rng.integers(-100, 101, 2))
        req = {"args": [a, b, n], "kwargs": {"dtype": dt}}
        r1, r2 = server.post("/v1/ops/linspace", req), one.post("/v1/ops/linspace", req)
        assert r1.status_code == 200 and r2.status_code == 200, (r1.text[:200], r2.text[:200])
        g1, g2 = (np.array(r.json()["outputs"][0]["data"], np.float64) for r in (r1, r2))  # bfloat16 too
        assert np.array_equal(g1, g2), (dt, a, b, np.flatnonzero(g1 != g2)[:5])
        if dt in ("float32", "float64"):
            [w] = torch_ref([{"op": "linspace", "args": [a, b, n], "kwargs": {"dtype": dt}}])
            exp = np.array(w["value"], np.float64).astype(dt)  # the JSON's float32 is its shortest text
            g1 = g1.astype(dt)
            assert np.array_equal(g1[:32768], exp[:32768]), dt
            np.testing.assert_allclose(g1, exp, rtol=0, atol=4 * np.finfo(dt).eps * max(abs(a), abs(b)), err_msg=dt)


def test_addmv_is_torchs_own_gemv_call(server, rng):
    """addmv and mv (float32, float64) make the gemv call ATen 1.13 makes (cpu/blas.c's gemv_blas): 't' on
    a row-major matrix, 'n' on a column-major one (a transposed view), a row-major copy of any other, the
    vector's stride as its increment. Every bit equal to torch's, past OpenBLAS's blocking."""
    import os

    threads = os.environ.get("OD_NUM_THREADS") or str(len(os.sched_getaffinity(0)))
    for dt in ("float32", "float64"):
        n, k = 700, 450
        M, v, s = (rng.standard_normal(shape).astype(dt) for shape in ((n, k), (k,), (n,)))
        cases = [("addmv", [T(s, dt), T(M, dt), T(v, dt)], {}),
                 ("addmv", [T(s, dt), T(M, dt), T(v, dt)], {"beta": 0.5, "alpha": -1.25}),
                 ("addmv", [T(s[:1], dt), T(M, dt), T(v, dt)], {"beta": 0}),
                 ("mv", [T(M, dt), T(v, dt)], {}),
                 ("addmv", [T(s[:1], dt), T(M[:1], dt), T(v, dt)], {}),  # one row
                 ("addmv", [T(s, dt), T(M[:, :1], dt), T(v[:1], dt)], {})]  # one column
        assert_bits_as_torch(server, cases, env={"OPENBLAS_NUM_THREADS": threads})
        # a column-major matrix (a transposed view) and a vector of every other element, through /v1/run
        Mt = rng.standard_normal((k, n)).astype(dt)
        v2 = rng.standard_normal(2 * k).astype(dt)
        r = server.post("/v1/run", {"steps": [{"op": "transpose.int", "args": [T(Mt, dt), 0, 1]},
                                              {"op": "slice.Tensor", "args": [T(v2, dt), 0, 0, 2 * k, 2]},
                                              {"op": "addmv", "args": [T(s, dt), {"ref": "$0"}, {"ref": "$1"}],
                                               "kwargs": {"alpha": 2.0}}]})
        assert r.status_code == 200, r.text[:300]
        got = np.array(r.json()["outputs"][0]["data"], np.float64).astype(dt)
        exp = s.astype(np.float64) + 2.0 * (Mt.T.astype(np.float64) @ v2[::2].astype(np.float64))
        np.testing.assert_allclose(got, exp, rtol=1e-4 if dt == "float32" else 1e-12, atol=1e-3 if dt == "float32" else 1e-10)


def test_long_arange_equals_torch(server, make_server, rng):
    """arange's loops (cpu/fill.c, vectorised and cloned for AVX2 and AVX-512; float32 and float64 replay
    ATen's vector blocks) up to 32,768 elements (ATen's grain: one pass there): integer and float bounds
    into every dtype, values bit for bit as torch's, a ragged end. Past it torch's threads move its
    blocks, so there the server must agree with torch within rounding and with itself on one thread."""
    cases = []
    for dt in ("int64", "int32", "int16", "float32", "float64", "bfloat16", "float16"):
        s0 = int(rng.integers(-1000, 1000)) // (100 if dt == "float16" else 1)
        cases.append(("arange.start_step", [s0, s0 + 3 * (2_011 if dt == "float16" else 30_011), 3], {"dtype": dt}))
        if dt.startswith("float") or dt == "bfloat16":  # an integer dtype truncates 0.37 to a zero step
            f0 = float(rng.uniform(-10, 10))
            n = 2_011.5 if dt == "float16" else 30_011.5  # float16 tops out at 65504
            cases.append(("arange.start_step", [f0, f0 + 0.37 * n, 0.37], {"dtype": dt}))
    cases.append(("arange", [32_768], {}))
    cases.append(("arange.start_step", [5.0, -6000.0, -0.2], {}))
    assert_bits_as_torch(server, cases)
    one = make_server(env={"OD_NUM_THREADS": "1"})
    for dt in ("float32", "float64"):
        req = {"args": [-3.25, -3.25 + 0.01 * 200_003, 0.01], "kwargs": {"dtype": dt}}
        r1, r2 = server.post("/v1/ops/arange.start_step", req), one.post("/v1/ops/arange.start_step", req)
        g1, g2 = (np.array(r.json()["outputs"][0]["data"], np.float64).astype(dt) for r in (r1, r2))
        assert np.array_equal(g1, g2), dt
        [w] = torch_ref([{"op": "arange.start_step", **req}])
        np.testing.assert_allclose(g1, np.array(w["value"], np.float64).astype(dt), rtol=0,
                                   atol=4 * np.finfo(dt).eps * 2000, err_msg=dt)
