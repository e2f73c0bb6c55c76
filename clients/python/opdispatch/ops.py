"""``client.ops``: the server's operators as Python callables.

Built lazily from the server's schemas: ``GET /v1/ops`` once for the names
(tab completion, namespaces), then ``GET /v1/ops/{op}`` the first time an
operator is used, for its overloads and parsed arguments. Each operator is
an :class:`OpPacket` (``c.ops.add``: the server picks the overload from the
arguments, as PyTorch's argument parser does) whose overloads are
:class:`OpOverload` attributes (``c.ops.add.Tensor``, ``c.ops.relu.default``).
Both carry an :class:`inspect.Signature` built from the schema (argument
names, defaults, the keyword-only marker, the schema types as annotations)
and the schema text as their docstring.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from .errors import NotFound

if TYPE_CHECKING:
    from .client import Client

_P = inspect.Parameter


class SchemaType(str):
    """A schema type (``Tensor``, ``int[1]?``) used as an annotation; shown bare."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


def signature(arguments: list[dict], returns: list[dict]) -> inspect.Signature:
    """The Python signature of a schema's parsed arguments and returns."""
    if len(returns) == 1:
        ret: Any = SchemaType(returns[0]["type"])
    else:
        ret = SchemaType("(" + ", ".join(r["type"] for r in returns) + ")")
    params = []
    for a in arguments:
        if a["has_default"]:
            default = a["default"] if "default" in a else a.get("default_text")
        else:
            default = _P.empty
        kind = _P.KEYWORD_ONLY if a["kwarg_only"] else _P.POSITIONAL_OR_KEYWORD
        params.append(_P(a["name"], kind, default=default, annotation=SchemaType(a["type"])))
    try:
        return inspect.Signature(params, return_annotation=ret)
    except ValueError:  # an order Python cannot spell (a default before a positional)
        return inspect.Signature([_P("args", _P.VAR_POSITIONAL), _P("kwargs", _P.VAR_KEYWORD)],
                                 return_annotation=ret)


_CALL_NOTE = """
Runs on the opdispatch server. Tensors are numpy arrays (the outputs come
back as numpy arrays; bfloat16 as float32) or RemoteTensors (the outputs stay
on the server as RemoteTensors). One output is returned as is, several as a
tuple."""


class OpOverload:
    """One overload of an operator (``c.ops.add.Tensor``): calls
    ``POST /v1/ops/{namespace::name.overload}``."""

    def __init__(self, client: Client, info: dict):
        self._client = client
        self.name: str = info["name"]
        self.overload: str = info["overload"]
        self.schema: str = info["schema"]
        self.arguments: list[dict] = info["arguments"]
        self._path = client._op_path(self.name)
        self._device_arg = any(a["name"] == "device" for a in self.arguments)
        self.__name__ = self.name.split("::")[-1]
        self.__qualname__ = self.__name__
        self.__signature__ = signature(self.arguments, info["returns"])
        self.__doc__ = self.schema + "\n" + _CALL_NOTE

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls the overload; ``device=`` is the call's device unless the
        schema has an argument of that name."""
        device = None if self._device_arg else kwargs.pop("device", None)
        return self._client._call(self._path, args, kwargs, device)

    def __repr__(self) -> str:
        return f"<opdispatch op {self.schema}>"


class OpPacket:
    """Every overload of one operator name (``c.ops.add``).

    Calling it sends the bare name and lets the server pick the overload
    from the arguments; the overloads are attributes named after their
    overload name (``default`` for the unnamed one). ``__signature__`` is the
    default overload's (else the first's); ``__doc__`` lists every schema.
    """

    def __init__(self, client: Client, info: dict):
        self._client = client
        infos = info["overloads"] if "overloads" in info else [info]
        first = infos[0]
        self.name: str = first["name"].rsplit(".", 1)[0] if first["overload"] else first["name"]
        self.overloads: dict[str, OpOverload] = {
            (i["overload"] or "default"): OpOverload(client, i) for i in infos}
        self._path = client._op_path(self.name)
        self._device_arg = any(o._device_arg for o in self.overloads.values())
        main = self.overloads.get("default") or next(iter(self.overloads.values()))
        self.__name__ = self.name.split("::")[-1]
        self.__qualname__ = self.__name__
        self.__signature__ = main.__signature__
        if len(infos) == 1:
            self.__doc__ = main.__doc__
        else:
            lines = [f"{self.name}: {len(infos)} overloads; called by this name, the server picks",
                     "the one that fits the arguments (as PyTorch does):", ""]
            lines += [f"  {o.schema}\n      c.ops.{self.__name__}.{k}" for k, o in self.overloads.items()]
            self.__doc__ = "\n".join(lines) + "\n" + _CALL_NOTE

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls the operator by its name; ``device=`` is the call's device
        unless one of its schemas has an argument of that name."""
        device = None if self._device_arg else kwargs.pop("device", None)
        return self._client._call(self._path, args, kwargs, device)

    def __getattr__(self, name: str) -> OpOverload:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self.overloads[name]
        except KeyError:
            raise AttributeError(f"{self.name} has no overload {name!r} "
                                 f"(it has {', '.join(self.overloads)})") from None

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.overloads))

    def __repr__(self) -> str:
        return f"<opdispatch op {self.name} ({', '.join(self.overloads)})>"


class Namespace:
    """The operators of one namespace: ``c.ops.od.mm_reference``."""

    def __init__(self, ops: Ops, namespace: str):
        self._ops = ops
        self._namespace = namespace

    def __getattr__(self, name: str) -> OpPacket:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self._ops[f"{self._namespace}::{name}"]
        except KeyError:
            raise AttributeError(f"no operator {self._namespace}::{name} on the server") from None

    def __dir__(self) -> list[str]:
        prefix = self._namespace + "::"
        return sorted(q[len(prefix):] for q in self._ops._names()[1] if q.startswith(prefix))

    def __repr__(self) -> str:
        return f"<opdispatch namespace {self._namespace}>"


class Ops:
    """``c.ops``: ``c.ops.add(a, b, alpha=2)``, ``c.ops.softmax(x, dim=1)``,
    ``c.ops.add.Tensor(...)``, ``c.ops["aten::add.Tensor"]``,
    ``c.ops.od.mm_reference(...)``. A bare name finds the ``aten``
    operator first, then any namespace's. ``c.ops()`` is the raw
    ``GET /v1/ops`` listing."""

    def __init__(self, client: Client):
        self._client = client
        self._index: tuple[dict[str, str], list[str]] | None = None
        self._found: dict[str, OpPacket | OpOverload] = {}

    def __call__(self) -> dict:
        """``GET /v1/ops``: every operator with its overloads, schemas and kernels."""
        return self._client._get("/v1/ops")

    def _names(self) -> tuple[dict[str, str], list[str]]:
        """(short name -> qualified name, every qualified name), from one
        ``GET /v1/ops``; a short name means the ``aten`` operator when
        there is one."""
        if self._index is None:
            short: dict[str, str] = {}
            qualified = [op["name"] for op in self()["operators"]]
            for q in qualified:
                ns, _, name = q.rpartition("::")
                if name not in short or ns == "aten":
                    short[name] = q
            self._index = (short, qualified)
        return self._index

    def __getitem__(self, name: str) -> OpPacket | OpOverload:
        """An operator (``"add"``, ``"aten::add"``) or one overload
        (``"add.Tensor"``, ``"relu.default"``); KeyError when the server
        has none."""
        found = self._found.get(name)
        if found is not None:
            return found
        base, _, overload = name.partition(".")
        qualified = base if "::" in base else self._names()[0].get(base)
        if qualified is None:
            raise KeyError(f"no operator {name!r} on the server")
        packet = self._found.get(qualified)
        if packet is None:
            try:
                info = self._client._get(self._client._op_path(qualified))
            except NotFound:
                raise KeyError(f"no operator {name!r} on the server") from None
            packet = OpPacket(self._client, info)
            self._found[qualified] = packet
        found = packet
        if overload:
            found = packet.overloads.get(overload)
            if found is None:
                raise KeyError(f"{packet.name} has no overload {overload!r}")
        self._found[name] = found
        return found

    def __getattr__(self, name: str) -> OpPacket | Namespace:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            if any(q.startswith(name + "::") for q in self._names()[1]):
                return Namespace(self, name)
            raise AttributeError(f"no operator {name!r} on the server (dir(c.ops) lists them)") from None

    def __dir__(self) -> list[str]:
        short, qualified = self._names()
        return sorted(set(short) | {q.split("::", 1)[0] for q in qualified})

    def __repr__(self) -> str:
        return f"<opdispatch ops of {self._client.url}>"
