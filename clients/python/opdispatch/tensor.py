"""RemoteTensor: a handle on a tensor stored on the server."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._wire import Ref, array_from_json
from .errors import Gone, NotFound

if TYPE_CHECKING:
    from .client import Client

_FLOATING = ("float32", "float64", "float16", "bfloat16")


def _operand(v: Any) -> bool:
    return isinstance(v, (RemoteTensor, np.ndarray, int, float, np.generic))


class RemoteTensor(Ref):
    """A tensor kept on the server, in the client's session.

    Made by :meth:`Client.tensor` and by any call that takes a RemoteTensor
    (its outputs stay on the server too). Operators run on the server:
    ``a + b``, ``a - 1``, ``a * b``, ``a / b``, ``a // b``, ``a % b``,
    ``a @ b``, ``a ** 2``, ``-a``, ``abs(a)``, ``a & b``, comparisons,
    ``a[0, 1:3]`` (ints, slices, None, ...), ``a.sum()``, ``a.relu()``,
    ``a.t()``, ``a.T``, and every operator of the server as a method with
    the tensor as its first argument (``a.softmax(1)``, ``a.exp()``).
    Python numbers and numpy arrays mix in as in PyTorch.

    :meth:`numpy` fetches the data (bfloat16 as float32), :meth:`backward`
    runs the graph backward, :attr:`grad` is the stored gradient.
    :meth:`free` deletes the tensor on the server; a handle that is garbage
    collected is deleted with the client's next request.

    Attributes (the server's metadata when the handle was made): ``id``,
    ``shape`` (tuple), ``dtype`` (torch name, e.g. ``"float32"``,
    ``"bfloat16"``), ``device``, ``requires_grad``, ``grad_fn`` (PyTorch's
    node name, e.g. ``"MulBackward0"``, or None), ``is_leaf``, ``strides``,
    ``nbytes``.
    """

    __slots__ = ("_client", "id", "shape", "dtype", "device", "requires_grad", "grad_fn", "is_leaf",
                 "strides", "nbytes", "_owned", "_freed", "__weakref__")
    __array_ufunc__ = None  # numpy defers to our operators: ndarray + RemoteTensor runs on the server
    __hash__ = object.__hash__

    def __init__(self, client: Client, meta: dict, owned: bool = True):
        self._client = client
        self._owned = owned
        self._freed = False
        self.id: str = meta["id"]
        self.shape: tuple = tuple(meta["shape"])
        self.dtype: str = meta["dtype"]
        self.device: str = meta.get("device", "cpu")
        self.requires_grad: bool = bool(meta.get("requires_grad", False))
        self.grad_fn: str | None = meta.get("grad_fn")
        self.is_leaf: bool = bool(meta.get("is_leaf", True))
        self.strides: tuple = tuple(meta.get("strides", ()))
        self.nbytes: int = meta.get("bytes", 0)

    # -- data -------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numpy(self) -> np.ndarray:
        """Fetches the data (binary unless the client's transport is "json");
        bfloat16 comes back as float32."""
        c = self._client
        if c.transport == "json":
            body, _ = c._request("GET", f"/v1/tensors/{self.id}")
            return array_from_json(body["outputs"][0])
        _, blobs = c._request("GET", f"/v1/tensors/{self.id}?binary=1")
        return blobs[0]

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number or bool."""
        return self.numpy().item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __bool__(self) -> bool:
        return bool(self.numpy())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        extra = ""
        if self.requires_grad:
            extra = f", requires_grad=True, grad_fn={self.grad_fn}"
        state = ", freed" if self._freed else ""
        return (f"RemoteTensor(id={self.id!r}, shape={self.shape}, dtype={self.dtype}, "
                f"device={self.device}{extra}{state})")

    # -- lifetime ---------------------------------------------------------------
    def free(self) -> None:
        """Deletes the tensor on the server now (a no-op when already freed,
        evicted, or not owned by this handle, like a stored .grad)."""
        if self._owned and not self._freed:
            self._freed = True
            try:
                self._client._request("DELETE", f"/v1/tensors/{self.id}")
            except (NotFound, Gone):
                pass

    def __del__(self):
        try:
            if self._owned and not self._freed:
                self._client._release(self.id)
        except Exception:  # interpreter shutdown: the session's idle expiry frees it
            pass

    # -- autograd ---------------------------------------------------------------
    def backward(self, gradient: Any = None, retain_graph: bool = False) -> None:
        """Runs the graph backward from this tensor (``tensor.backward()``):
        every leaf that requires grad accumulates into its ``.grad``. A root
        of more than one element needs ``gradient`` (a numpy array or a
        RemoteTensor of its shape)."""
        self._client._backward(self, gradient, retain_graph)

    @property
    def grad(self) -> RemoteTensor | None:
        """The accumulated gradient, stored on the server (None before a
        backward reached this tensor). Re-read on each access."""
        c = self._client
        meta, _ = c._request("GET", f"/v1/tensors/{self.id}?meta=1")
        gid = meta.get("grad")
        if gid is None:
            return None
        return c._handle(gid, owned=False)

    # -- operators --------------------------------------------------------------
    def _call(self, op: str, *args: Any, **kwargs: Any) -> Any:
        return self._client.call(op, *args, **kwargs)

    def _scalar(self, s: Any) -> dict:
        """A Python number as a 0-dim tensor for a reflected ``s - self`` or
        ``s / self``, with the dtype PyTorch's promotion gives the pair."""
        if isinstance(s, np.generic):
            s = s.item()
        if isinstance(s, bool):
            dt = "bool"
        elif isinstance(s, int):
            dt = "int64" if self.dtype == "bool" else self.dtype
        else:
            dt = self.dtype if self.dtype in _FLOATING else "float32"
        return {"dtype": dt, "shape": [], "data": s}

    def _reflected(self, o: Any) -> Any:
        return o if isinstance(o, (np.ndarray, RemoteTensor)) else self._scalar(o)

    def __add__(self, o):
        return self._call("add", self, o) if _operand(o) else NotImplemented

    def __radd__(self, o):
        return self._call("add", self, o) if _operand(o) else NotImplemented

    def __sub__(self, o):
        return self._call("sub", self, o) if _operand(o) else NotImplemented

    def __rsub__(self, o):
        return self._call("sub", self._reflected(o), self) if _operand(o) else NotImplemented

    def __mul__(self, o):
        return self._call("mul", self, o) if _operand(o) else NotImplemented

    def __rmul__(self, o):
        return self._call("mul", self, o) if _operand(o) else NotImplemented

    def __truediv__(self, o):
        return self._call("div", self, o) if _operand(o) else NotImplemented

    def __rtruediv__(self, o):
        return self._call("div", self._reflected(o), self) if _operand(o) else NotImplemented

    def __floordiv__(self, o):
        return self._call("div", self, o, rounding_mode="floor") if _operand(o) else NotImplemented

    def __rfloordiv__(self, o):
        if not _operand(o):
            return NotImplemented
        return self._call("div", self._reflected(o), self, rounding_mode="floor")

    def __mod__(self, o):
        return self._call("remainder", self, o) if _operand(o) else NotImplemented

    def __rmod__(self, o):
        return self._call("remainder", o, self) if _operand(o) else NotImplemented

    def __pow__(self, o):
        return self._call("pow", self, o) if _operand(o) else NotImplemented

    def __rpow__(self, o):
        return self._call("pow", o, self) if _operand(o) else NotImplemented

    def __matmul__(self, o):
        return self._call("matmul", self, o) if isinstance(o, (RemoteTensor, np.ndarray)) else NotImplemented

    def __rmatmul__(self, o):
        return self._call("matmul", o, self) if isinstance(o, np.ndarray) else NotImplemented

    def __and__(self, o):
        return self._call("bitwise_and", self, o) if _operand(o) else NotImplemented

    def __rand__(self, o):
        return self._call("bitwise_and", self, o) if _operand(o) else NotImplemented

    def __neg__(self):
        return self._call("neg", self)

    def __abs__(self):
        return self._call("abs", self)

    def __eq__(self, o):
        return self._call("eq", self, o) if _operand(o) else NotImplemented

    def __ne__(self, o):
        return self._call("ne", self, o) if _operand(o) else NotImplemented

    def __lt__(self, o):
        return self._call("lt", self, o) if _operand(o) else NotImplemented

    def __le__(self, o):
        return self._call("le", self, o) if _operand(o) else NotImplemented

    def __gt__(self, o):
        return self._call("gt", self, o) if _operand(o) else NotImplemented

    def __ge__(self, o):
        return self._call("ge", self, o) if _operand(o) else NotImplemented

    def sum(self, dim: int | list | tuple | None = None, keepdim: bool = False, *, dtype: str | None = None):
        """``sum`` over every element, or over ``dim`` (an int or a list)."""
        kw = {"dtype": dtype} if dtype else {}
        if dim is None:
            return self._call("sum", self, **kw)
        return self._call("sum", self, [dim] if isinstance(dim, int) else list(dim), keepdim, **kw)

    def mean(self, dim: int | list | tuple | None = None, keepdim: bool = False, *, dtype: str | None = None):
        """``mean`` over every element, or over ``dim`` (an int or a list)."""
        kw = {"dtype": dtype} if dtype else {}
        if dim is None:
            return self._call("mean", self, **kw)
        return self._call("mean", self, [dim] if isinstance(dim, int) else list(dim), keepdim, **kw)

    def relu(self):
        return self._call("relu", self)

    def t(self):
        """The transpose of a tensor of at most 2 dimensions."""
        return self._call("t", self)

    @property
    def T(self):
        """The dimensions reversed (``t()`` up to 2-D, ``permute`` above)."""
        if self.ndim <= 2:
            return self.t()
        return self._call("permute", self, list(range(self.ndim - 1, -1, -1)))

    def __getitem__(self, key: Any) -> RemoteTensor:
        """Basic indexing (ints, slices with a positive step, None, ...) as
        select/slice/unsqueeze views, run in one program on the server."""
        key = key if isinstance(key, tuple) else (key,)
        if sum(k is Ellipsis for k in key) > 1:
            raise IndexError("an index can only have a single ellipsis")
        explicit = sum(k is not None and k is not Ellipsis for k in key)
        if explicit > self.ndim:
            raise IndexError(f"too many indices for a tensor of dimension {self.ndim}")
        steps: list[dict] = []
        dim = 0
        for k in key:
            src = {"ref": f"${len(steps) - 1}"} if steps else self
            if k is Ellipsis:
                dim += self.ndim - explicit
                continue
            if k is None:
                steps.append({"op": "unsqueeze", "args": [src, dim]})
                dim += 1
            elif isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
                steps.append({"op": "select", "args": [src, dim, int(k)]})
            elif isinstance(k, slice):
                step = 1 if k.step is None else int(k.step)
                if step <= 0:
                    raise ValueError("step must be greater than zero")
                if k.start is not None or k.stop is not None or step != 1:
                    steps.append({"op": "slice", "args": [src, dim, k.start, k.stop, step]})
                dim += 1
            else:
                raise TypeError(f"RemoteTensor indexing takes ints, slices, None and ..., not {type(k).__name__}")
        if not steps:
            steps.append({"op": "view", "args": [self, list(self.shape)]})
        last = f"${len(steps) - 1}"
        res = self._client.run({"steps": steps, "outputs": [], "keep": [last]})
        return self._client._handle(res.response["kept"][last], owned=True)

    def __getattr__(self, name: str):
        """The server's operator ``name`` with this tensor as its first argument."""
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            op = self._client.ops[name]
        except KeyError:
            raise AttributeError(f"'RemoteTensor' object has no attribute {name!r} "
                                 f"(and the server has no operator {name!r})") from None

        def method(*args, **kwargs):
            return op(self, *args, **kwargs)

        method.__name__ = name
        method.__doc__ = op.__doc__
        return method
