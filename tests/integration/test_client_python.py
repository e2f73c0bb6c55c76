"""The Python client (clients/python/opdispatch) against a live server:
calls on both transports against numpy on random inputs, every dtype,
errors as exceptions with the server's status, code and message, the ops
namespace built from the schemas, remote tensors with their operators,
backward and .grad against a hand computation, no_grad, modes, vmap,
autocast, programs, introspection, and the connection's reconnect."""

import gc
import inspect
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "clients" / "python"))

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import opdispatch  # noqa: E402
from opdispatch import Client, RemoteTensor  # noqa: E402

NUMPY_DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_]


@pytest.fixture
def client(server):
    c = Client(server.url)
    c.new_session()
    yield c
    c.close()


def spy(c):
    """Records the headers of every request the client sends."""
    sent = []
    real = c._conn.request

    def request(method, path, headers, parts=()):
        sent.append((method, path, dict(headers)))
        return real(method, path, headers, parts)

    c._conn.request = request
    return sent


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def random_array(rng, dtype, shape):
    """An ndarray (0-dim too, never a numpy scalar) of random values."""
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) > 0.5)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.asarray(rng.integers(max(info.min, -1000), min(info.max, 1000), shape, endpoint=True), dtype)
    return np.asarray(rng.standard_normal(shape), dtype)


def bf16_round(a):
    """float32 values rounded to bfloat16 (nearest even), as float32."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16
    return u.astype(np.uint32).view(np.float32)


# ---- calls ------------------------------------------------------------------------
# Sums and products of float32 normals against numpy's float32 are compared
# with an absolute tolerance too: a result that cancels to near 0 carries the
# rounding of its terms (a fresh seed gave -0.00208104 where numpy gave -0.00208101).

@pytest.mark.parametrize("transport", ["json", "binary", "auto"])
def test_calls_against_numpy(server, rng, transport):
    c = Client(server.url, transport=transport)
    a, b = f32(rng, 3, 4), f32(rng, 3, 4)
    np.testing.assert_allclose(c.call("add", a, b, alpha=2), a + 2 * b, rtol=1e-6)
    np.testing.assert_allclose(c.call("sub", a, 0.5), a - 0.5, rtol=1e-6)
    x = f32(rng, 2, 5)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(c.call("softmax", x, 1), e / e.sum(1, keepdims=True), rtol=1e-5)
    m1, m2 = rng.standard_normal((7, 5)), rng.standard_normal((5, 3))
    got = c.call("mm", m1, m2)
    assert got.dtype == np.float64 and got.shape == (7, 3)
    np.testing.assert_allclose(got, m1 @ m2, rtol=1e-12)
    np.testing.assert_allclose(c.call("sum", a, [1], True), a.sum(1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c.call("cat", [a, b], 1), np.concatenate([a, b], 1))
    # a Python number, a numpy scalar (a value) and a 0-dim array (a tensor)
    np.testing.assert_allclose(c.call("mul", a, np.float32(1.5)), a * 1.5, rtol=1e-6)
    assert c.last_response["op"] == "aten::mul.Scalar"
    np.testing.assert_allclose(c.call("mul", a, np.array(1.5, np.float32)), a * 1.5, rtol=1e-6)
    assert c.last_response["op"] == "aten::mul.Tensor"
    # 0-dim outputs are 0-dim arrays; several outputs are a tuple
    s = c.call("sum", a)
    assert isinstance(s, np.ndarray) and s.shape == () and s.dtype == np.float32
    np.testing.assert_allclose(s, a.sum(), rtol=1e-5, atol=1e-5)
    out, mean, rstd = c.call("native_layer_norm", x, [5], None, None, 1e-5)
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    np.testing.assert_allclose(mean, mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(var + 1e-5), rtol=1e-4)
    np.testing.assert_allclose(out, (x - mu) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    # results are writable arrays of their own
    r = c.call("relu", rng.standard_normal(5000).astype(np.float32))
    r[0] = 1.0
    assert c.last_dispatch["key"] == "CPU" and c.last_dispatch["kernel"]
    c.close()


def test_transport_choice(server, rng):
    c = Client(server.url)
    sent = spy(c)
    small, big = f32(rng, 10), f32(rng, 4096)  # 40 bytes; 16 KiB, above the 4 KiB threshold
    np.testing.assert_allclose(c.call("add", small, small), 2 * small)
    assert sent[-1][2]["Content-Type"] == "application/json"
    np.testing.assert_allclose(c.call("add", big, small[:1]), big + small[0])
    h = sent[-1][2]
    assert h["Content-Type"] == "application/octet-stream" and int(h["Inference-Header-Content-Length"]) > 0
    assert c.last_response["outputs"][0]["parameters"]["binary_data_size"] == big.nbytes
    c.transport = "json"
    np.testing.assert_allclose(c.call("add", big, small[:1]), big + small[0])
    assert sent[-1][2]["Content-Type"] == "application/json" and "data" in c.last_response["outputs"][0]
    c.transport = "binary"
    np.testing.assert_allclose(c.call("add", small, small), 2 * small)
    assert sent[-1][2]["Content-Type"] == "application/octet-stream"
    c.close()


@pytest.mark.parametrize("transport", ["json", "binary"])
def test_every_dtype_round_trips(server, rng, transport):
    c = Client(server.url, transport=transport)
    for dt in NUMPY_DTYPES:
        for shape in ((3, 4), (), (0, 2)):
            a = random_array(rng, dt, shape)
            got = c.call("clone", a)
            assert got.dtype == a.dtype and got.shape == a.shape, (dt, shape)
            np.testing.assert_array_equal(got, a)
    # special floats travel both ways
    sp = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-40], np.float32)
    np.testing.assert_array_equal(c.call("clone", sp), sp)
    # bfloat16 outputs come back as float32, rounded as the server rounds
    x = f32(rng, 64)
    got = c.call("to", x, "bfloat16")
    assert got.dtype == np.float32 and c.last_response["outputs"][0]["dtype"] == "bfloat16"
    np.testing.assert_array_equal(got, bf16_round(x))
    # a bfloat16 numpy dtype (ml_dtypes') goes as bfloat16
    ml_dtypes = pytest.importorskip("ml_dtypes")
    xb = x.astype(ml_dtypes.bfloat16)
    got = c.call("add", xb, 1.0)
    assert c.last_response["op"] == "aten::add.Scalar" and c.last_response["outputs"][0]["dtype"] == "bfloat16"
    np.testing.assert_array_equal(got, bf16_round(xb.astype(np.float32) + np.float32(1.0)))
    c.close()


def test_unsupported_numpy_dtype_is_a_type_error(server):
    c = Client(server.url)
    with pytest.raises(TypeError, match="uint32"):
        c.call("relu", np.ones(3, np.uint32))
    with pytest.raises(TypeError, match="set"):
        c.call("relu", {1, 2})
    c.close()


# ---- errors -----------------------------------------------------------------------

def test_errors_carry_status_code_and_message(server, rng, client):
    a = f32(rng, 2, 2)
    client.call("relu", a)
    sock = client._conn._conn.sock
    with pytest.raises(opdispatch.Mismatch) as e:
        client.call("add", a, "two")
    assert (e.value.status, e.value.code) == (422, "mismatch")
    assert e.value.message == "aten::add.Scalar: argument 'other' (position 2) must be Scalar, not string"
    with pytest.raises(opdispatch.Mismatch) as e:
        client.call("mm", f32(rng, 2, 3), f32(rng, 2, 3))
    assert "cannot be multiplied" in e.value.message
    with pytest.raises(opdispatch.NotFound) as e:
        client.call("no_such_op", a)
    assert (e.value.status, e.value.code) == (404, "not_found") and "no_such_op" in e.value.message
    with pytest.raises(opdispatch.InvalidArgument) as e:
        client.call("to", a, "float128")
    assert e.value.status == 400 and "unknown dtype 'float128'" in e.value.message
    x = client.tensor(a, requires_grad=True)
    with pytest.raises(opdispatch.NoKernel) as e:
        client.call("remainder", 2.0, x)
    assert (e.value.status, e.value.code) == (501, "no_kernel")
    assert "aten::remainder.Scalar_Tensor" in e.value.message
    # every code is an OpdispatchError; str() shows status, code and message
    assert isinstance(e.value, opdispatch.OpdispatchError) and str(e.value).startswith("501 no_kernel: ")
    # the connection is kept and fine after error answers
    np.testing.assert_allclose(client.call("neg", a), -a)
    assert client._conn._conn.sock is sock


def test_early_answer_to_a_body_over_the_limit(make_server, rng):
    s = make_server("--max-body-bytes", "100000")
    c = Client(s.url)
    with pytest.raises(opdispatch.TooLarge) as e:
        c.call("relu", f32(rng, 1 << 20))  # 4 MiB: refused before the body is read
    assert e.value.status == 413 and "exceeds the limit of 100000 bytes" in e.value.message
    a = f32(rng, 8)
    np.testing.assert_allclose(c.call("relu", a), np.maximum(a, 0))
    c.close()


def test_reconnects_after_the_server_drops_the_connection(make_server, rng):
    s = make_server("--idle-timeout", "1")
    c = Client(s.url)
    a = f32(rng, 5)
    np.testing.assert_allclose(c.call("abs", a), np.abs(a))
    sock = c._conn._conn.sock
    time.sleep(2.5)  # the server closes the idle connection
    np.testing.assert_allclose(c.call("abs", a), np.abs(a))
    assert c._conn._conn.sock is not sock
    c.close()


# ---- the ops namespace ---------------------------------------------------------------

def test_ops_namespace_signatures_and_docs(server, rng, client):
    ops = client.ops
    a, b = f32(rng, 3, 3), f32(rng, 3, 3)
    np.testing.assert_allclose(ops.add(a, b, alpha=2), a + 2 * b, rtol=1e-6)
    np.testing.assert_allclose(ops.add.Scalar(a, 3.0, 2), a + 6, rtol=1e-6)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(ops.softmax(a, dim=1), e / e.sum(1, keepdims=True), rtol=1e-5)
    sig = inspect.signature(ops.add)  # the first overload, add.Tensor
    assert list(sig.parameters) == ["self", "other", "alpha"]
    assert sig.parameters["alpha"].kind is inspect.Parameter.KEYWORD_ONLY and sig.parameters["alpha"].default == 1
    assert sig.parameters["other"].default is inspect.Parameter.empty
    assert str(sig) == "(self: Tensor, other: Tensor, *, alpha: Scalar = 1) -> Tensor"
    assert str(inspect.signature(ops.add.Scalar)) == "(self: Tensor, other: Scalar, alpha: Scalar = 1) -> Tensor"
    sig = inspect.signature(ops.softmax)
    assert sig.parameters["dtype"].default is None and str(sig.parameters["dtype"].annotation) == "ScalarType?"
    assert str(inspect.signature(ops.native_layer_norm)).endswith("-> (Tensor, Tensor, Tensor)")
    assert "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" in ops.add.__doc__
    assert "aten::add.Scalar(" in ops.add.__doc__
    assert ops.relu.__doc__.startswith("aten::relu(Tensor self) -> Tensor")
    assert inspect.getdoc(ops.add.Tensor).startswith("aten::add.Tensor(")
    # names: tab completion, overloads, qualified names, namespaces
    names = dir(ops)
    assert {"add", "softmax", "mm", "relu", "aten", "od", "mm_reference"} <= set(names)
    assert {"Tensor", "Scalar"} <= set(dir(ops.add)) and ops.relu.default is ops.relu.overloads["default"]
    assert ops["aten::add.Tensor"] is ops.add.Tensor and ops["add"] is ops.add
    np.testing.assert_allclose(ops.od.mm_reference(a, b), a @ b, rtol=1e-5, atol=1e-5)
    assert client.last_response["op"] == "od::mm_reference"
    with pytest.raises(AttributeError):
        ops.no_such_op
    with pytest.raises(AttributeError):
        ops.add.NoSuchOverload
    assert not hasattr(ops, "no_such_op")
    # device= is a schema argument of the factories, the call's device elsewhere
    z = ops.zeros([2, 3], dtype="int32", device="cpu")
    assert z.dtype == np.int32 and z.shape == (2, 3) and not z.any()
    np.testing.assert_allclose(ops.neg(a, device="cpu"), -a)
    assert client.last_dispatch["device"] == "cpu"
    listing = ops()
    assert listing["operators"][0]["name"] == "aten::add"
    assert "od::mm_reference" in {op["name"] for op in listing["operators"]}


# ---- remote tensors -----------------------------------------------------------------

def test_remote_tensors_and_their_operators(server, rng, client):
    a, b = f32(rng, 3, 4), f32(rng, 3, 4)
    x, y = client.tensor(a, device="cpu"), client.tensor(b)
    assert isinstance(x, RemoteTensor) and x.shape == (3, 4) and x.dtype == "float32" and x.device == "cpu"
    assert not x.requires_grad and x.grad_fn is None and x.is_leaf
    np.testing.assert_array_equal(x.numpy(), a)
    cases = [
        (x + y, a + b), (x - y, a - b), (x * y, a * b), (x / y, a / b), (x ** 2, a ** 2),
        (-x, -a), (abs(x), np.abs(a)), (x + 1, a + 1), (2 - x, 2 - a), (3 * x, 3 * a), (1 / y, 1 / b),
        (x - b, a - b), (b - x, b - a), (a * y, a * b), (2 ** x, 2 ** a), (x // 0.5, a // 0.5),
        (x.sum(), a.sum()), (x.sum(1), a.sum(1)), (x.sum([0], keepdim=True), a.sum(0, keepdims=True)),
        (x.mean(), a.mean()), (x.relu(), np.maximum(a, 0)), (x.t(), a.T), (x.T, a.T),
        (x @ y.t(), a @ b.T), (a.T @ x, a.T @ a), (x.exp(), np.exp(a)), (x.softmax(1), None),
        (x[1], a[1]), (x[:, 1:3], a[:, 1:3]), (x[-1, ::2], a[-1, ::2]), (x[None, ..., 0], a[None, ..., 0]),
        (x[...], a),
    ]
    for i, (got, want) in enumerate(cases):
        assert isinstance(got, RemoteTensor), i
        if want is not None:
            assert got.shape == np.shape(want), i
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6, err_msg=str(i))
    for got, want in ((x > y, a > b), (x >= 0, a >= 0), (x < y, a < b), (x <= 0, a <= 0),
                      (x == x, a == a), (x != y, a != b)):
        assert got.dtype == "bool"
        np.testing.assert_array_equal(got.numpy(), want)
    # integers follow PyTorch's promotion with Python numbers
    n = client.tensor(np.arange(1, 7, dtype=np.int64).reshape(2, 3))
    assert (n + 1).dtype == "int64" and (n * 0.5).dtype == "float32" and (1 - n).dtype == "int64"
    np.testing.assert_allclose((1 / n).numpy(), 1 / np.arange(1, 7).reshape(2, 3), rtol=1e-6)
    np.testing.assert_array_equal((n % 4).numpy(), np.arange(1, 7).reshape(2, 3) % 4)
    np.testing.assert_array_equal((n & 3).numpy(), np.arange(1, 7).reshape(2, 3) & 3)
    three = client.tensor(np.array(3.5, np.float32))
    assert float(three) == 3.5 and three.item() == 3.5 and bool(three) and np.asarray(three).shape == ()
    # the ops namespace and calls take handles and keep their outputs
    z = client.ops.add(x, y, alpha=2)
    assert isinstance(z, RemoteTensor) and client.last_response["outputs"][0]["id"] == z.id
    np.testing.assert_allclose(z.numpy(), a + 2 * b, rtol=1e-6)
    np.testing.assert_allclose(client.call("mm", x, b.T).numpy(), a @ b.T, rtol=1e-5, atol=1e-5)
    # a big stored tensor goes and comes back binary
    big = rng.standard_normal((256, 256))
    xb = client.tensor(big)
    assert xb.dtype == "float64" and xb.nbytes == big.nbytes
    np.testing.assert_array_equal(xb.numpy(), big)


def test_freeing_handles(server, rng, client):
    def count():
        return server.get(f"/v1/sessions/{client.session}").json()["tensors"]

    x = client.tensor(f32(rng, 4))
    base = count()
    y = x + 1
    z = y * 2
    assert count() == base + 2
    z.free()
    assert count() == base + 1
    with pytest.raises(opdispatch.NotFound) as e:
        client.call("relu", z)
    assert "no tensor" in e.value.message
    z.free()  # again: nothing
    del y
    gc.collect()
    client.flush()  # what was collected goes with the next request, or now
    assert count() == base
    # a session's tensors are not another session's
    other = Client(server.url)
    other.new_session()
    with pytest.raises(opdispatch.NotFound):
        other.call("relu", x)
    other.close()
    assert server.get(f"/v1/sessions/{other.session}").status_code == 404


def test_backward_and_grad_against_a_hand_computation(server, rng, client):
    a, w0, c0 = rng.standard_normal((4, 3)), rng.standard_normal((3, 2)), rng.standard_normal((4, 2))
    x = client.tensor(a, requires_grad=True)
    w = client.tensor(w0, requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad is None
    h = x @ w
    assert h.requires_grad and h.grad_fn == "MmBackward0" and not h.is_leaf
    r = h.relu()
    loss = (r * c0).sum()
    assert loss.shape == () and loss.grad_fn == "SumBackward0"
    np.testing.assert_allclose(loss.item(), (np.maximum(a @ w0, 0) * c0).sum(), rtol=1e-12)
    loss.backward()
    # d loss / d h = c0 where h > 0; dx = dh w^T, dw = x^T dh
    dh = c0 * (a @ w0 > 0)
    gx, gw = x.grad, w.grad
    assert isinstance(gx, RemoteTensor) and gx.shape == a.shape
    np.testing.assert_allclose(gx.numpy(), dh @ w0.T, rtol=1e-12)
    np.testing.assert_allclose(gw.numpy(), a.T @ dh, rtol=1e-12)
    # a non-scalar root with a gradient; gradients accumulate into .grad
    g = rng.standard_normal((4, 3))
    y = x * x
    y.backward(g, retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), dh @ w0.T + 2 * a * g, rtol=1e-12)
    y.backward(client.tensor(g))  # the retained graph once more, the gradient stored
    np.testing.assert_allclose(x.grad.numpy(), dh @ w0.T + 4 * a * g, rtol=1e-12)
    assert x.grad.id == gx.id
    with pytest.raises(opdispatch.Mismatch) as e:
        y.backward(g)  # the graph is freed now
    assert e.value.status == 422 and "second time" in e.value.message
    with pytest.raises(opdispatch.Mismatch) as e:
        (x * 2).backward()
    assert "only for scalar outputs" in e.value.message
    # a large gradient (stored first, as backward takes JSON)
    big = client.tensor(rng.standard_normal((64, 64)), requires_grad=True)
    gbig = rng.standard_normal((64, 64))
    (big * 3).backward(gbig)
    np.testing.assert_allclose(big.grad.numpy(), 3 * gbig, rtol=1e-12)


def test_no_grad(server, rng, client):
    x = client.tensor(f32(rng, 3), requires_grad=True)
    with client.no_grad():
        y = x * 2
        assert client.last_dispatch["grad_mode"] == "no_grad" and "Autograd" not in client.last_dispatch["path"]
        with client.enable_grad():
            z = x * 2
        assert not (x * 3).requires_grad
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn == "MulBackward1"  # mul.Scalar's node, as in PyTorch
    w = x * 2
    assert w.requires_grad and "grad_mode" not in client.last_dispatch
    with client.inference_mode():
        client.call("mul", x, 2.0)
        assert client.last_dispatch["grad_mode"] == "inference_mode"


def test_modes(server, rng, client):
    a, b = f32(rng, 2, 3, 4), f32(rng, 4, 5)
    with client.modes("trace") as reports:
        got = client.call("matmul", a, b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
    events = client.last_modes["trace"]["events"]
    assert events[0]["op"] == "aten::matmul" and events[0]["inputs"][0]["shape"] == [2, 3, 4]
    assert "aten::mm" in [e["op"] for e in events] and reports == [client.last_modes]
    assert client.last_dispatch["path"].startswith("Mode [backend fallback]")
    m = rng.standard_normal((3, 3))
    with client.modes(["profile", {"override": {"mm": "mm_reference"}}]) as reports:
        got = client.call("mm", m, m)
        client.call("relu", m)
    np.testing.assert_allclose(got, m @ m, rtol=1e-12)
    assert len(reports) == 2 and reports[0]["override"]["replaced_calls"] == 1
    assert [p["op"] for p in reports[0]["profile"]["ops"]] == ["od::mm_reference"]
    # nested: the inner with adds a mode inside the outer ones
    with client.modes("profile"):
        with client.modes("trace"):
            client.call("relu", m)
            assert set(client.last_modes) == {"profile", "trace"}
        client.call("relu", m)
        assert set(client.last_modes) == {"profile"}
    client.call("relu", m)
    assert client.last_modes is None and "Mode" not in client.last_dispatch["path"]
    # remote tensors too
    x = client.tensor(m)
    with client.modes("trace"):
        x.relu()
    assert client.last_modes["trace"]["events"][0]["op"] == "aten::relu"
    with pytest.raises(opdispatch.InvalidArgument) as e:
        with client.modes("nope"):
            client.call("relu", m)
    assert "unknown mode 'nope'" in e.value.message


def test_vmap(server, rng, client):
    x, y = f32(rng, 5, 3, 4), f32(rng, 4)
    got = client.vmap("add", in_dims=(0, None))(x, y, alpha=2)
    np.testing.assert_allclose(got, x + 2 * y, rtol=1e-6, atol=1e-6)
    assert "Batched [kernel]" in client.last_dispatch["path"]
    # batch dim 1 in, 2 out, through the ops namespace
    a, b = f32(rng, 3, 6), f32(rng, 2, 3)
    got = client.vmap(client.ops.mul, in_dims=(1, None), out_dims=2)(a, b)
    np.testing.assert_allclose(got, np.stack([a[:, i] * b for i in range(6)], axis=2), rtol=1e-6, atol=1e-6)
    # nested levels: a dot over two batch dimensions
    p, q = f32(rng, 2, 3, 7), f32(rng, 2, 3, 7)
    got = client.vmap(client.vmap("dot", in_dims=(0, 0)), in_dims=(0, 0))(p, q)
    np.testing.assert_allclose(got, np.einsum("abk,abk->ab", p, q), rtol=1e-5, atol=1e-5)
    # on remote tensors
    xr = client.tensor(x)
    got = client.vmap("sum", in_dims=0)(xr, [1])
    assert isinstance(got, RemoteTensor)
    np.testing.assert_allclose(got.numpy(), x.sum(2), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError):
        client.vmap(lambda t: t)


def test_autocast(server, rng, client):
    a, b = f32(rng, 8, 16), f32(rng, 16, 4)
    with client.autocast("bfloat16"):
        got = client.call("mm", a, b)
        assert client.last_dispatch["autocast"] == "bfloat16"
    assert client.last_response["outputs"][0]["dtype"] == "bfloat16" and got.dtype == np.float32
    want = bf16_round(a).astype(np.float64) @ bf16_round(b)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    assert np.array_equal(got, bf16_round(got))  # every value is a bfloat16
    assert client.call("mm", a, b).dtype == np.float32 and client.last_response["outputs"][0]["dtype"] == "float32"


# ---- programs and introspection -----------------------------------------------------------

def test_run_programs(server, rng, client):
    a, b = f32(rng, 3, 3), f32(rng, 3, 3)
    x = client.tensor(a, requires_grad=True)
    res = client.run({"steps": [{"op": "mm", "args": [x, b]},
                                {"op": "relu", "args": [{"ref": "$0"}]},
                                {"op": "sum", "args": [{"ref": "$1"}]},
                                {"backward": "$2"}],
                      "outputs": ["$1", "$2"]})
    relu, total = res.outputs
    np.testing.assert_allclose(relu, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total, np.maximum(a @ b, 0).sum(), rtol=1e-5)
    assert len(res.response["dispatch"]) == 4 and client.last_dispatch is res.response["dispatch"]
    np.testing.assert_allclose(x.grad.numpy(), ((a @ b) > 0).astype(np.float32) @ b.T, rtol=1e-5)
    # binary arrays inside a program, and kept results
    big = f32(rng, 64, 64)
    res = client.run({"steps": [{"op": "add", "args": [big, big]}], "keep": ["$0"]})
    np.testing.assert_allclose(res.outputs[0], 2 * big)
    assert set(res.response["kept"]) == {"$0"}
    with client.no_grad():
        res = client.run({"steps": [{"op": "mul", "args": [x, 2.0]}]})
    assert res.response["dispatch"][0]["record"]["grad_mode"] == "no_grad"
    with pytest.raises(opdispatch.InvalidArgument) as e:
        client.run({"steps": [{"op": "relu", "args": [{"ref": "$5"}]}]})
    assert e.value.message.startswith("step 0 (relu)")


def test_introspection(server, rng, client):
    table = client.table("add.Tensor")
    assert table["name"] == "aten::add.Tensor" and any(s["key"] == "CPU" for s in table["table"])
    assert set(client.table("add")) == {"name", "overloads"}
    dump = client.dump("relu")
    assert "torch._C._dispatch_dump_table" in dump and "CPU: registered at" in dump
    client.call("relu", f32(rng, 3))
    stats = client.stats()
    assert any(o["op"] == "aten::relu" and o["requests"] >= 1 for o in stats["ops"])
    assert "cpu" in client.devices() and client.keys()["runtime_keys"]
    ex = client.explain("matmul", f32(rng, 64, 128), f32(rng, 128, 32))
    assert ex["outputs"][0]["shape"] == [64, 32] and ex["within_limits"] is True


@pytest.mark.parametrize("detail", ["summary", "none"])
def test_dispatch_detail(server, rng, detail):
    a = rng.standard_normal(4).astype(np.float32)
    with Client(server.url, dispatch=detail) as c:
        np.testing.assert_array_equal(c.call("neg", a), -a)
        if detail == "none":
            assert c.last_dispatch is None
        else:
            assert set(c.last_dispatch) == {"key", "kernel", "path", "timing_us"}
    with pytest.raises(ValueError, match="dispatch must be"):
        Client(server.url, dispatch="verbose")
