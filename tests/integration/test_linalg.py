"""The LAPACK operators (kernels/cpu/linalg.c, kernels/composite/lapack.c)
against PyTorch 1.13 on fresh random inputs: well-conditioned, singular and
non-positive-definite matrices, batched, transposed (non-contiguous, through
/v1/run) and empty (0x0, batch 0), float32 and float64; refusals and the
singular/non-PD errors must say what torch says, and the _ex variants return
the info tensors instead. Eigenvectors, singular vectors and Q are checked
up to sign (reconstruction and orthogonality, as torch's own tests do);
everything else numerically."""

import os

import numpy as np
import pytest

from conftest import assert_bits_as_torch, from_json, tensor, torch_ref

TOL = {"float32": dict(rtol=2e-4, atol=2e-4), "float64": dict(rtol=1e-9, atol=1e-9)}


def T(a):
    return tensor(a)


def well(rng, shape, dt):
    n = shape[-1]
    return (rng.standard_normal(shape) + n * np.eye(n)).astype(dt)


def pd(rng, shape, dt):
    x = rng.standard_normal(shape)
    return (x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dt)


def outputs(r):
    assert r.status_code == 200, r.text[:400]
    return [from_json(o) for o in r.json()["outputs"]]


def check_against_torch(server, cases, skip=()):
    """cases: (op, args, kwargs, n outputs); every output but those in skip
    (indices whose values are defined only up to sign) compared with torch."""
    reqs = []
    for op, args, kw, n in cases:
        reqs += [{"op": op, "args": args, "kwargs": kw, "out": i} for i in range(n)]
    want = iter(torch_ref(reqs))
    for op, args, kw, n in cases:
        ws = [next(want) for _ in range(n)]
        r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kw})
        what = f"{op} {[a['dtype'] + str(a['shape']) if isinstance(a, dict) else a for a in args]} {kw}"
        if "error" in ws[0]:
            assert 400 <= r.status_code < 500, (what, r.text[:300])
            assert r.json()["error"]["message"] in ws[0]["error"], (what, r.json(), ws[0]["error"])
            continue
        assert r.status_code == 200, (what, r.text[:300])
        outs = r.json()["outputs"]
        assert len(outs) == n, what
        for i, (o, w) in enumerate(zip(outs, ws)):
            assert o["dtype"] == w["dtype"] and o["shape"] == w["shape"], (what, i, o["dtype"], o["shape"], w)
            if (op, i) in skip:
                continue
            got = from_json(o).astype(np.float64).reshape(-1)
            exp = np.array(w["value"], np.float64)
            tol = TOL.get(w["dtype"], dict(rtol=0, atol=0))
            np.testing.assert_allclose(got, exp, err_msg=f"{what} output {i}", equal_nan=True, **tol)


def test_well_conditioned_against_torch(server, rng):
    cases = []
    for dt in ("float32", "float64"):
        for shape in ((3, 3), (2, 4, 4), (2, 1, 2, 2), (1, 1), (0, 0), (0, 3, 3)):
            A, P = well(rng, shape, dt), pd(rng, shape, dt)
            n = shape[-1]
            B = rng.standard_normal(shape[:-1] + (2,)).astype(dt)
            b = rng.standard_normal(shape[:-1]).astype(dt)
            cases += [("linalg_inv", [T(A)], {}, 1), ("linalg_inv_ex", [T(A)], {}, 2),
                      ("linalg_solve", [T(A), T(B)], {}, 1), ("linalg_solve", [T(A), T(b)], {}, 1),
                      ("linalg_solve_ex", [T(A), T(B)], {}, 2), ("_linalg_solve_ex", [T(A), T(B)], {}, 4),
                      ("linalg_solve", [T(A), T(np.swapaxes(B, -1, -2).copy())], {"left": False}, 1),
                      ("linalg_cholesky", [T(P)], {}, 1), ("linalg_cholesky", [T(P)], {"upper": True}, 1),
                      ("linalg_cholesky_ex", [T(P)], {}, 2),
                      ("linalg_det", [T(A)], {}, 1), ("_linalg_det", [T(A)], {}, 3),
                      ("linalg_slogdet", [T(A)], {}, 2), ("_linalg_slogdet", [T(A)], {}, 4),
                      ("linalg_lu_factor", [T(A)], {}, 2), ("linalg_lu_factor_ex", [T(A)], {}, 3),
                      ("linalg_solve_triangular", [T(A), T(B)], {"upper": True}, 1),
                      ("linalg_solve_triangular", [T(A), T(B)], {"upper": False, "unitriangular": True}, 1),
                      ("linalg_solve_triangular", [T(A), T(np.swapaxes(B, -1, -2).copy())],
                       {"upper": False, "left": False}, 1),
                      ("linalg_eigh", [T(P)], {}, 2), ("linalg_eigh", [T(P), "U"], {}, 2),
                      ("_linalg_eigh", [T(P)], {"compute_v": False}, 2)]
        for shape in ((4, 3), (3, 5), (2, 3, 2), (0, 3), (3, 0), (0, 2, 2)):
            M = rng.standard_normal(shape).astype(dt)
            cases += [("linalg_svd", [T(M)], {}, 3), ("linalg_svd", [T(M), False], {}, 3),
                      ("_linalg_svd", [T(M)], {"compute_uv": False}, 3),
                      ("linalg_qr", [T(M)], {}, 2), ("linalg_qr", [T(M), "complete"], {}, 2),
                      ("linalg_qr", [T(M), "r"], {}, 2), ("linalg_lu_factor_ex", [T(M)], {}, 3)]
        # batch broadcasting of the solvers
        A = well(rng, (2, 1, 3, 3), dt)
        B = rng.standard_normal((4, 3, 2)).astype(dt)
        cases += [("linalg_solve", [T(A), T(B)], {}, 1), ("_linalg_solve_ex", [T(A), T(B)], {}, 4),
                  ("linalg_solve_triangular", [T(A), T(B)], {"upper": True}, 1)]
    # values defined up to sign (or, for full matrices, a basis choice): checked below
    skip = {("linalg_eigh", 1), ("linalg_svd", 0), ("linalg_svd", 2), ("linalg_qr", 0), ("linalg_qr", 1)}
    check_against_torch(server, cases, skip)


def test_decompositions_up_to_sign(server, rng):
    for dt in ("float32", "float64"):
        tol = TOL[dt]
        for shape in ((4, 3), (3, 5), (2, 3, 3), (1, 0, 2)):
            M = rng.standard_normal(shape).astype(dt)
            m, n = shape[-2:]
            k = min(m, n)
            U, S, Vh = outputs(server.post("/v1/ops/linalg_svd", {"args": [T(M), False]}))
            rec = (U * S[..., None, :]) @ Vh
            np.testing.assert_allclose(rec, M, **tol)
            np.testing.assert_allclose(np.swapaxes(U, -1, -2) @ U, np.broadcast_to(np.eye(k), U.shape[:-2] + (k, k)), **tol)
            Uf, Sf, Vhf = outputs(server.post("/v1/ops/linalg_svd", {"args": [T(M), True]}))
            np.testing.assert_allclose(np.swapaxes(Uf, -1, -2) @ Uf, np.broadcast_to(np.eye(m), Uf.shape[:-2] + (m, m)), **tol)
            np.testing.assert_allclose(Vhf @ np.swapaxes(Vhf, -1, -2), np.broadcast_to(np.eye(n), Vhf.shape[:-2] + (n, n)), **tol)
            np.testing.assert_allclose(Sf, S, **tol)
            for mode in ("reduced", "complete"):
                Q, R = outputs(server.post("/v1/ops/linalg_qr", {"args": [T(M), mode]}))
                np.testing.assert_allclose(Q @ R, M, **tol)
                q = Q.shape[-1]
                np.testing.assert_allclose(np.swapaxes(Q, -1, -2) @ Q, np.broadcast_to(np.eye(q), Q.shape[:-2] + (q, q)), **tol)
                assert np.all(np.tril(R, -1) == 0)
        for shape in ((4, 4), (2, 3, 3)):
            P = pd(rng, shape, dt)
            for uplo in ("L", "U"):
                w, V = outputs(server.post("/v1/ops/linalg_eigh", {"args": [T(P), uplo]}))
                n = shape[-1]
                np.testing.assert_allclose((V * w[..., None, :]) @ np.swapaxes(V, -1, -2), P, rtol=1e-3 if dt == "float32" else 1e-9,
                                           atol=1e-3 if dt == "float32" else 1e-9)
                np.testing.assert_allclose(np.swapaxes(V, -1, -2) @ V, np.broadcast_to(np.eye(n), V.shape), **tol)
                assert np.all(np.diff(w, axis=-1) >= 0)


def test_non_contiguous_inputs(server, rng):
    """A transposed A through /v1/run: the same values as torch on A.mT (and
    for det, slogdet and the solvers the LU torch takes of a non-contiguous A)."""
    for dt in ("float32", "float64"):
        A = well(rng, (2, 3, 3), dt)
        P = pd(rng, (3, 3), dt)
        B = rng.standard_normal((2, 3, 2)).astype(dt)
        for op, extra, kw, n in [("linalg_inv_ex", [], {}, 2), ("_linalg_det", [], {}, 3), ("_linalg_slogdet", [], {}, 4),
                                 ("_linalg_solve_ex", [T(B)], {}, 4), ("linalg_lu_factor_ex", [], {}, 3),
                                 ("linalg_cholesky_ex", [], {}, 2), ("_linalg_eigh", [], {"compute_v": False}, 2),
                                 ("_linalg_svd", [], {"compute_uv": False}, 3),
                                 ("linalg_solve_triangular", [T(B)], {"upper": True}, 1)]:
            X = P if op == "linalg_cholesky_ex" else A
            steps = [{"op": "transpose.int", "args": [T(X), -1, -2]},
                     {"op": op, "args": [{"ref": "$0"}] + extra, "kwargs": kw}]
            r = server.post("/v1/run", {"steps": steps, "device": "cpu"})
            assert r.status_code == 200, (op, r.text[:300])
            got = r.json()["outputs"][-n:] if n > 1 else r.json()["outputs"][-1:]
            for i, o in enumerate(got):
                assert o["dtype"] in (dt, "int32"), (op, o)
            # torch_ref builds contiguous tensors, whose LU torch takes of A^T: compare the outputs that do
            # not depend on the layout (not the LU and pivots of det, slogdet and the solvers)
            XT = np.swapaxes(X, -1, -2).copy()
            ws = torch_ref([{"op": op, "args": [T(XT)] + extra, "kwargs": kw, "out": i} for i in range(n)])
            free = {"_linalg_det": [0], "_linalg_slogdet": [0, 1], "_linalg_solve_ex": [0, 3], "linalg_inv_ex": [0, 1],
                    "linalg_lu_factor_ex": [0, 1, 2], "linalg_cholesky_ex": [0, 1], "_linalg_eigh": [0],
                    "_linalg_svd": [1], "linalg_solve_triangular": [0]}[op]
            for i in free:
                np.testing.assert_allclose(from_json(got[i]).astype(np.float64).reshape(-1), np.array(ws[i]["value"]),
                                           err_msg=f"{op} output {i}", **TOL[dt])


def singular(dt, batch=False):
    S = np.array([[1.0, 2.0], [2.0, 4.0]], dt)
    return np.stack([np.eye(2, dtype=dt), S, S]) if batch else S


def not_pd(dt, batch=False):
    N = np.array([[1.0, 2.0], [2.0, 1.0]], dt)
    return np.stack([np.eye(2, dtype=dt), N]) if batch else N


def test_singular_and_not_positive_definite(server):
    cases = []
    for dt in ("float32", "float64"):
        for batch in (False, True):
            S, N = singular(dt, batch), not_pd(dt, batch)
            b = np.ones(S.shape[:-1], dt)
            cases += [("linalg_inv", [T(S)], {}, 1), ("linalg_inv_ex", [T(S)], {}, 2),
                      ("linalg_inv_ex", [T(S)], {"check_errors": True}, 2),
                      ("linalg_solve", [T(S), T(b)], {}, 1), ("linalg_solve_ex", [T(S), T(b)], {}, 2),
                      ("linalg_solve_ex", [T(S), T(b)], {"check_errors": True}, 2),
                      ("linalg_cholesky", [T(N)], {}, 1), ("linalg_cholesky_ex", [T(N)], {}, 2),
                      ("linalg_cholesky_ex", [T(N)], {"check_errors": True}, 2),
                      ("linalg_lu_factor", [T(S)], {}, 2), ("linalg_lu_factor_ex", [T(S)], {}, 3),
                      ("linalg_lu_factor_ex", [T(S)], {"check_errors": True}, 3),
                      ("linalg_det", [T(S)], {}, 1), ("linalg_slogdet", [T(S)], {}, 2),
                      ("linalg_svd", [T(np.full(S.shape, np.nan, dt))], {}, 3)]
    check_against_torch(server, cases)


REFUSALS = [
    ("linalg_inv", [T(np.ones(3, "float32"))], {}),
    ("linalg_inv", [T(np.ones((2, 3), "float32"))], {}),
    ("linalg_inv", [T(np.ones((2, 2), "int64"))], {}),
    ("linalg_inv", [T(np.ones((2, 2), "float16"))], {}),
    ("linalg_solve", [T(np.eye(2, dtype="float32")), T(np.ones(3, "float32"))], {}),
    ("linalg_solve", [T(np.eye(2, dtype="float32")), T(np.ones(2, "float64"))], {}),
    ("linalg_solve", [T(np.eye(2, dtype="float32")), T(np.ones(2, "float32"))], {"left": False}),
    ("linalg_solve", [T(np.ones((3, 2, 2), "float32")), T(np.ones((2, 2, 1), "float32"))], {}),
    ("linalg_solve", [T(np.ones((2, 2), "float16")), T(np.ones((2, 1), "float16"))], {}),
    ("linalg_cholesky", [T(np.ones((2, 3), "float64"))], {}),
    ("linalg_cholesky", [T(np.ones((2, 2), "bool"))], {}),
    ("linalg_cholesky", [T(np.ones((2, 2), "float16"))], {}),
    ("linalg_qr", [T(np.ones((2, 2), "float32")), "x"], {}),
    ("linalg_qr", [T(np.ones(2, "float32"))], {}),
    ("linalg_qr", [T(np.ones((2, 2), "int32"))], {}),
    ("linalg_svd", [T(np.ones((2, 2), "float32"))], {"driver": "gesvd"}),
    ("linalg_svd", [T(np.ones((2, 2), "int64"))], {}),
    ("linalg_eigh", [T(np.ones((2, 2), "float32")), "X"], {}),
    ("linalg_eigh", [T(np.ones((2, 3), "float32"))], {}),
    ("linalg_eigh", [T(np.ones((2, 2), "int64"))], {}),
    ("linalg_det", [T(np.ones((2, 3), "float32"))], {}),
    ("linalg_det", [T(np.ones((2, 2), "bool"))], {}),
    ("linalg_slogdet", [T(np.ones((2, 2), "float16"))], {}),
    ("linalg_lu_factor", [T(np.ones(3, "float32"))], {}),
    ("linalg_lu_factor", [T(np.ones((2, 2), "int64"))], {}),
    ("linalg_lu_factor", [T(np.eye(2, dtype="float32"))], {"pivot": False}),
    ("linalg_solve_triangular", [T(np.eye(2, dtype="float32")), T(np.ones((3, 1), "float32"))], {"upper": True}),
    ("linalg_solve_triangular", [T(np.eye(2, dtype="float32")), T(np.ones(2, "float32"))], {"upper": True}),
    ("linalg_solve_triangular", [T(np.ones((3, 2, 2), "float32")), T(np.ones((4, 2, 1), "float32"))], {"upper": True}),
    ("linalg_solve_triangular", [T(np.eye(2, dtype="int64")), T(np.ones((2, 1), "int64"))], {"upper": True}),
]


@pytest.mark.parametrize("op,args,kw", REFUSALS, ids=[f"{o}-{i}" for i, (o, _, _) in enumerate(REFUSALS)])
def test_refusals_say_what_torch_says(server, op, args, kw):
    w = torch_ref([{"op": op, "args": args, "kwargs": kw}])[0]
    assert "error" in w, (op, w)
    r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kw})
    assert 400 <= r.status_code < 500, (op, r.text[:300])
    assert r.json()["error"]["message"] in w["error"], (op, r.json(), w["error"])


def test_public_names_decompose_as_torch(server):
    """The public names are composites over the kernel operators, as in
    torch 1.13 (what the OpInfo recorder relies on)."""
    for op, kernel in [("linalg_inv", "linalg_inv_ex"), ("linalg_solve", "_linalg_solve_ex"),
                       ("linalg_cholesky", "linalg_cholesky_ex"), ("linalg_svd", "_linalg_svd"),
                       ("linalg_eigh", "_linalg_eigh"), ("linalg_det", "_linalg_det"),
                       ("linalg_slogdet", "_linalg_slogdet"), ("linalg_lu_factor", "linalg_lu_factor_ex")]:
        r = server.get(f"/v1/ops/aten::{op}")
        assert r.status_code == 200, r.text
        assert "CompositeImplicitAutograd" in r.text, (op, r.text[:300])
        r = server.get(f"/v1/ops/aten::{kernel}")
        assert r.status_code == 200 and '"CPU"' in r.text, (kernel, r.text[:300])


def test_lstsq_against_torch(server, rng):
    """linalg_lstsq, every CPU driver (default gelsy): solution, residuals,
    rank and singular values, and which of them are empty for which driver
    and shape (residuals only for m > n and not gelsy; gelsd/gelss only when
    every rank is n), tall, wide, square, vector and batched right-hand
    sides, batch broadcasting both ways, empty matrices and batches, rcond
    and driver spelled in capitals (torch lower-cases it)."""
    cases = []
    for dt in ("float32", "float64"):
        for drv in (None, "gels", "gelsy", "gelsd", "gelss"):
            kw = {} if drv is None else {"driver": drv}
            for a, b in [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((4, 4), (4, 3)), ((5, 3), (5,)), ((2, 5, 3), (2, 5)),
                         ((2, 5, 3), (1, 5, 2)), ((1, 5, 3), (3, 5, 2)), ((2, 1, 4, 2), (3, 4, 1)),
                         ((0, 3), (0, 2)), ((3, 0), (3, 2)), ((0, 0), (0, 2)), ((0, 4, 3), (0, 4, 2))]:
                A = rng.standard_normal(a).astype(dt)
                B = rng.standard_normal(b).astype(dt)
                cases.append(("linalg_lstsq", [T(A), T(B)], kw, 4))
            # rank deficient (a zero column): the minimum-norm solution, rank < n, no residuals
            if drv in ("gelsd", "gelss"):
                A = rng.standard_normal((2, 6, 3)).astype(dt)
                A[0, :, 1] = 0
                cases.append(("linalg_lstsq", [T(A), T(rng.standard_normal((2, 6, 2)).astype(dt))], kw, 4))
                cases.append(("linalg_lstsq", [T(A[0]), T(rng.standard_normal((6, 2)).astype(dt))], kw, 4))
        A = rng.standard_normal((6, 3)).astype(dt)
        B = rng.standard_normal((6, 2)).astype(dt)
        cases += [("linalg_lstsq", [T(A), T(B), 0.5], {"driver": "gelsd"}, 4),
                  ("linalg_lstsq", [T(A), T(B)], {"rcond": 1e-3, "driver": "GELSS"}, 4),
                  ("linalg_lstsq", [T(A), T(B)], {"driver": "Gels"}, 4)]
    check_against_torch(server, cases)


def test_lstsq_non_contiguous(server, rng):
    for dt in ("float32", "float64"):
        A = rng.standard_normal((2, 3, 5)).astype(dt)   # transposed: 2 x 5 x 3
        B = rng.standard_normal((2, 2, 5)).astype(dt)   # transposed: 2 x 5 x 2
        for drv in ("gels", "gelsy", "gelsd"):
            steps = [{"op": "transpose.int", "args": [T(A), -1, -2]}, {"op": "transpose.int", "args": [T(B), -1, -2]},
                     {"op": "linalg_lstsq", "args": [{"ref": "$0"}, {"ref": "$1"}], "kwargs": {"driver": drv}}]
            r = server.post("/v1/run", {"steps": steps, "device": "cpu"})
            assert r.status_code == 200, r.text[:300]
            got = r.json()["outputs"][-4:]
            At, Bt = np.swapaxes(A, -1, -2).copy(), np.swapaxes(B, -1, -2).copy()
            ws = torch_ref([{"op": "linalg_lstsq", "args": [T(At), T(Bt)], "kwargs": {"driver": drv}, "out": i}
                            for i in range(4)])
            for i, (o, w) in enumerate(zip(got, ws)):
                assert o["shape"] == w["shape"] and o["dtype"] == w["dtype"], (drv, i, o["shape"], w)
                np.testing.assert_allclose(from_json(o).astype(np.float64).reshape(-1), np.array(w["value"], np.float64),
                                           err_msg=f"{drv} output {i}", **TOL[dt])


def test_lstsq_errors_say_what_torch_says(server):
    f, d = "float32", "float64"
    cases = [
        ("linalg_lstsq", [T(np.ones(5, f)), T(np.ones(5, f))], {}),
        ("linalg_lstsq", [T(np.ones((5, 3), f)), T(np.array(1.0, f))], {}),
        ("linalg_lstsq", [T(np.ones((5, 3), f)), T(np.ones((2, 3, 5, 2), f))], {}),
        ("linalg_lstsq", [T(np.ones((5, 3), f)), T(np.ones((4, 2), f))], {}),
        ("linalg_lstsq", [T(np.ones((5, 3), f)), T(np.ones(4, f))], {}),
        ("linalg_lstsq", [T(np.ones((5, 3), f)), T(np.ones((5, 2), d))], {}),
        ("linalg_lstsq", [T(np.ones((5, 3), f)), T(np.ones((5, 2), f))], {"driver": "gesvd"}),
        ("linalg_lstsq", [T(np.ones((2, 5, 3), f)), T(np.ones((3, 5, 2), f))], {}),
        ("linalg_lstsq", [T(np.ones((5, 3), "float16")), T(np.ones((5, 2), "float16"))], {}),
        ("linalg_lstsq", [T(np.ones((5, 3), "int64")), T(np.ones((5, 2), "int64"))], {}),
        ("linalg_lstsq", [T(np.ones((5, 3), "int64")), T(np.ones((5, 2), "int64"))], {"rcond": 0.1}),
        ("linalg_lstsq", [T(np.ones((5, 3), "float16")), T(np.ones((5, 2), "float16"))], {"driver": "x"}),
        # gels on a matrix with an exactly zero column: torch's rank error
        ("linalg_lstsq", [T(np.array([[1, 0], [2, 0], [3, 0]], d)), T(np.ones((3, 1), d))], {"driver": "gels"}),
        ("linalg_lstsq", [T(np.stack([np.eye(3, 2), np.array([[1, 0], [2, 0], [3, 0]])]).astype(d)),
                          T(np.ones((2, 3, 1), d))], {"driver": "gels"}),
    ]
    for op, args, kw in cases:
        w = torch_ref([{"op": op, "args": args, "kwargs": kw}])[0]
        assert "error" in w, (args, kw, w)
        r = server.post(f"/v1/ops/{op}", {"args": args, "kwargs": kw})
        assert 400 <= r.status_code < 500, (kw, r.text[:300])
        assert r.json()["error"]["message"] in w["error"], (r.json(), w["error"])


def test_solve_triangular_is_torchs_own_trsm_call(server, rng):
    """linalg_solve_triangular solves in the result, transposed, on A where
    it lies (linalg.c's run_triangular), which is the trsm call ATen 1.13
    makes on the same OpenBLAS: every bit equal to torch's, for sizes past
    OpenBLAS's blocking, both sides, both triangles, unit diagonals and
    broadcast batches. A transposed A (not row-contiguous) is copied first
    and solved the same way."""
    cases = []
    for dt in ("float32", "float64"):
        for left in (True, False):
            for upper in (True, False):
                for unit in (False, True):
                    n, k = 70, 45
                    A = well(rng, (n, n), dt)
                    B = rng.standard_normal((n, k) if left else (k, n)).astype(dt)
                    cases.append(("linalg_solve_triangular", [T(A), T(B)],
                                  {"upper": upper, "left": left, "unitriangular": unit}, 1))
        A = well(rng, (2, 1, 40, 40), dt)
        B = rng.standard_normal((3, 40, 20)).astype(dt)
        cases.append(("linalg_solve_triangular", [T(A), T(B)], {"upper": False}, 1))
    # OpenBLAS's trsm splits its work by thread count, and the bits follow: the server runs it on as
    # many threads as its own pool (one a core, or OD_NUM_THREADS), so torch is given as many
    threads = os.environ.get("OD_NUM_THREADS") or str(len(os.sched_getaffinity(0)))
    assert_bits_as_torch(server, [c[:3] for c in cases], env={"OPENBLAS_NUM_THREADS": threads})
    # A transposed on the server: rows not contiguous, so copied row-major first
    dt = "float64"
    A, B = well(rng, (50, 50), dt), rng.standard_normal((50, 7)).astype(dt)
    r = server.post("/v1/run", {"steps": [{"op": "transpose.int", "args": [T(A), 0, 1]},
                                          {"op": "linalg_solve_triangular", "args": [{"ref": "$0"}, T(B)],
                                           "kwargs": {"upper": True}}]})
    [got] = outputs(r)
    [w] = torch_ref([{"op": "linalg_solve_triangular", "args": [T(A.T.copy()), T(B)], "kwargs": {"upper": True},
                      "out": 0}])
    np.testing.assert_allclose(got, np.array(w["value"]).reshape(w["shape"]), **TOL[dt])
    # every other column of a wider matrix: neither rows nor columns contiguous, so A is copied
    W = rng.standard_normal((50, 100)).astype(dt)
    W[:, ::2] += 50 * np.eye(50)
    r = server.post("/v1/run", {"steps": [{"op": "slice.Tensor", "args": [T(W), 1, 0, 100, 2]},
                                          {"op": "linalg_solve_triangular", "args": [{"ref": "$0"}, T(B)],
                                           "kwargs": {"upper": False}}]})
    [got] = outputs(r)
    [w] = torch_ref([{"op": "linalg_solve_triangular", "args": [T(W[:, ::2].copy()), T(B)],
                      "kwargs": {"upper": False}, "out": 0}])
    np.testing.assert_allclose(got, np.array(w["value"]).reshape(w["shape"]), **TOL[dt])
