"""Client: calls, stored tensors, programs, introspection, and the settings
(grad mode, modes, autocast) that apply to the calls made inside a ``with``."""

from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Any, Iterator, NamedTuple
from urllib.parse import quote

import numpy as np

from ._wire import Connection, Encoder, Ref, array_from_json
from .errors import Gone, NotFound
from .ops import OpOverload, OpPacket, Ops
from .tensor import RemoteTensor

_BINARY_OUTPUT = {"binary_data_output": True}
_dumps = json.JSONEncoder(separators=(",", ":")).encode
_TRANSPORTS = ("auto", "json", "binary")
_SESSION_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")


class RunResult(NamedTuple):
    """What :meth:`Client.run` returns: the outputs asked for (numpy arrays)
    and the whole response (``kept``, ``grads``, ``dispatch`` per step, ...)."""

    outputs: list
    response: dict


class Client:
    """A client of one opdispatchd server, over one kept-alive HTTP connection.

    Args:
        url: the server's address.
        session: the ``X-OD-Session`` that stored tensors belong to; None is
            the server's shared ``default`` session (see :meth:`new_session`).
        timeout: seconds to wait on the socket (connect, send, each read).
        transport: ``"auto"`` sends tensors as JSON unless one is above
            ``binary_threshold`` bytes, then all of them as binary tensor
            data, and asks for binary outputs (exact, and cheap however large
            the outputs are); ``"json"`` uses JSON both ways; ``"binary"``
            binary both ways.
        binary_threshold: the largest array (bytes) that ``"auto"`` sends as JSON.
        dispatch: how much dispatch record each call's answer carries:
            ``"full"`` (the server's default), ``"summary"`` (key, kernel,
            path, timings) or ``"none"`` (for load tests of tiny calls).
        token: a bearer token of the server's ``--token-file``, sent as
            ``Authorization: Bearer``; None reads ``OD_TOKEN`` from the
            environment (no header when that is unset too).
        cafile: a PEM file of the certificates to trust for an ``https://``
            URL (a server's self-signed one); None trusts the system's.

    Not thread-safe: use one Client per thread. After each call,
    ``last_response`` is the response's JSON (the header of a binary one),
    ``last_dispatch`` its dispatch record (a list, one per step, for
    :meth:`run`) and ``last_modes`` what the active modes reported (None
    without modes).
    """

    def __init__(self, url: str = "http://127.0.0.1:8000", session: str | None = None,
                 timeout: float | None = 300.0, transport: str = "auto", binary_threshold: int = 4096,
                 dispatch: str = "full", token: str | None = None, cafile: str | None = None):
        if transport not in _TRANSPORTS:
            raise ValueError(f"transport must be one of {_TRANSPORTS}, not {transport!r}")
        if dispatch not in ("full", "summary", "none"):
            raise ValueError(f"dispatch must be 'full', 'summary' or 'none', not {dispatch!r}")
        self.dispatch = dispatch
        self.url = url.rstrip("/")
        self.transport = transport
        self.binary_threshold = binary_threshold
        self._conn = Connection(url, timeout, cafile)
        token = token if token is not None else os.environ.get("OD_TOKEN") or None
        self._auth: list[tuple[str, str]] = [("Authorization", f"Bearer {token}")] if token else []
        self._session: str | None = None
        self._session_headers: list[tuple[str, str]] = []
        self._use_session(session)
        self._owned_sessions: list[str] = []
        self._pending: list[str] = []  # ids of collected handles, deleted with the next request
        self._flushing = False
        self._settings: dict[str, Any] = {}
        self._recorders: list[list] = []
        self._paths: dict[str, str] = {}
        self.ops = Ops(self)
        self.last_response: dict | None = None
        self.last_dispatch: dict | list | None = None
        self.last_modes: dict | None = None

    def __repr__(self) -> str:
        return f"Client({self.url!r}, session={self._session!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- HTTP -------------------------------------------------------------------
    def _request(self, method: str, path: str, parts: list | tuple = (), headers: list | tuple = ()):
        if self._pending and not self._flushing:
            self.flush()
        return self._conn.request(method, path, [*headers, *self._session_headers, *self._auth], parts)

    def _get(self, path: str) -> Any:
        return self._request("GET", path)[0]

    def _post_json(self, path: str, body: Any = None) -> Any:
        data = b"" if body is None else _dumps(body).encode()
        hdrs = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        return self._request("POST", path, [data] if data else (), hdrs)[0]

    def _send_body(self, path: str, body: dict, enc: Encoder, binary: bool):
        """POSTs ``body``, whose tensors ``enc`` collected, as JSON or as a
        JSON header plus binary tensor data (the arrays' own memory)."""
        bufs = enc.finish(binary)
        head = _dumps(body).encode()
        if not binary:
            hdrs = [("Content-Type", "application/json"), ("Content-Length", str(len(head)))]
            return self._request("POST", path, (head,), hdrs)
        total = len(head) + sum(b.nbytes for b in bufs)
        hdrs = [("Content-Type", "application/octet-stream"),
                ("Inference-Header-Content-Length", str(len(head))), ("Content-Length", str(total))]
        return self._request("POST", path, (head, *bufs), hdrs)

    def _op_path(self, name: str) -> str:
        path = self._paths.get(name)
        if path is None:
            path = self._paths[name] = "/v1/ops/" + quote(name, safe=":.")
        return path

    # -- calls ------------------------------------------------------------------
    def call(self, name: str, /, *args: Any, device: str | None = None, **kwargs: Any) -> Any:
        """Calls operator ``name`` (``"add"``, ``"add.Tensor"``,
        ``"aten::add.Tensor"``) with positional ``args`` and keyword
        ``kwargs`` on ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``,
        ``"auto"``; None: the server's default).

        numpy arrays (0-dim too) are tensors; numpy scalars, Python numbers,
        bools, strings, lists and None pass as values. Outputs come back as
        numpy arrays (bfloat16 as float32): one output as is, several as a
        tuple, a Tensor[] return (``split``, ``unbind``) as a list of arrays.
        When an argument is a :class:`RemoteTensor` the outputs stay
        on the server and come back as RemoteTensors.
        """
        return self._call(self._op_path(name), args, kwargs, device)

    def _call(self, path: str, args: tuple, kwargs: dict, device: str | None, extra: dict | None = None) -> Any:
        enc = Encoder()
        value = enc.value
        body: dict[str, Any] = {"args": [value(a) for a in args]}
        if kwargs:
            body["kwargs"] = {k: value(v) for k, v in kwargs.items()}
        if device is not None:
            body["device"] = device
        if enc.refs:
            body["keep"] = True
        elif self.transport != "json":
            body["parameters"] = _BINARY_OUTPUT
        if self._settings:
            body.update(self._settings)
        if extra:
            body.update(extra)
        if self.dispatch != "full":
            body["dispatch"] = self.dispatch
        head, blobs = self._send_body(path, body, enc, enc.wants_binary(self.transport, self.binary_threshold))
        self._record(head)
        outs = head["outputs"]
        vals = [self._output(o, blobs[i] if blobs else None) for i, o in enumerate(outs)]
        if any("index" in o for o in outs):  # a Tensor[] return: its elements as one list
            grouped: list[Any] = []
            for o, v in zip(outs, vals):
                if "index" not in o:
                    grouped.append(v)
                elif o["index"] == 0 or not grouped or not isinstance(grouped[-1], list):
                    grouped.append([v])
                else:
                    grouped[-1].append(v)
            return grouped[0] if len(grouped) == 1 else tuple(grouped)
        if len(outs) == 1:
            return vals[0]
        return tuple(vals)

    def _record(self, head: dict) -> None:
        self.last_response = head
        self.last_dispatch = head.get("dispatch")
        modes = self.last_modes = head.get("modes")
        for r in self._recorders:
            r.append(modes)

    def _output(self, o: dict, blob: np.ndarray | None) -> Any:
        if blob is not None:
            return blob
        if "id" in o:
            return RemoteTensor(self, o)
        if "data" in o:
            return array_from_json(o)
        return o.get("value")

    def explain(self, name: str, /, *args: Any, device: str | None = None, **kwargs: Any) -> dict:
        """``POST /v1/ops/{name}/explain``: the key, kernel, path and output
        shapes the call would have, without running it (arrays send only
        their dtype and shape)."""
        enc = Encoder(meta_only=True)
        body: dict[str, Any] = {"args": [enc.value(a) for a in args]}
        if kwargs:
            body["kwargs"] = {k: enc.value(v) for k, v in kwargs.items()}
        if device is not None:
            body["device"] = device
        body.update(self._settings)
        return self._send_body(self._op_path(name) + "/explain", body, enc, False)[0]

    def run(self, program: dict, *, device: str | None = None) -> RunResult:
        """``POST /v1/run``: a program of calls in one round trip.

        ``program`` is the protocol's ``{"steps": [...], "outputs": [...],
        "keep": [...], ...}``; numpy arrays and RemoteTensors may stand
        anywhere a tensor goes (in ``vmap.in_dims`` a RemoteTensor key stands
        for its id); the active ``no_grad``/``modes``/``autocast`` settings
        apply unless the program sets its own. Returns the outputs as numpy
        arrays and the raw response.
        """
        enc = Encoder()
        body = enc.value(program)
        for k, v in self._settings.items():
            body.setdefault(k, v)
        if device is not None:
            body.setdefault("device", device)
        if self.transport != "json":
            body["parameters"] = {**_BINARY_OUTPUT, **body.get("parameters", {})}
        head, blobs = self._send_body("/v1/run", body, enc, enc.wants_binary(self.transport, self.binary_threshold))
        self._record(head)
        outputs = [self._output(o, blobs[i] if blobs else None) for i, o in enumerate(head["outputs"])]
        return RunResult(outputs, head)

    def vmap(self, op: str | OpPacket | OpOverload | VmapFunction, in_dims: Any = 0, out_dims: Any = 0,
             randomness: str | None = None) -> VmapFunction:
        """The operator ``op`` (a name, ``c.ops.X``, or another ``vmap``, which
        nests as an inner level) mapped over ``in_dims`` (one entry per
        positional argument, None for unmapped, or one int for all) with the
        batch dimension of the outputs at ``out_dims``; ``randomness`` is
        ``"error"``, ``"different"`` or ``"same"``. The server runs the whole
        batch at once (a batching rule) or per sample (the fallback)."""
        level: dict[str, Any] = {"in_dims": _dims(in_dims), "out_dims": _dims(out_dims)}
        if randomness is not None:
            level["randomness"] = randomness
        if isinstance(op, VmapFunction):
            return VmapFunction(self, op._path, op._name, [level, *op._levels])
        if isinstance(op, (OpPacket, OpOverload)):
            return VmapFunction(self, op._path, op.name, [level])
        if isinstance(op, str):
            return VmapFunction(self, self._op_path(op), op, [level])
        raise TypeError("vmap takes an operator (its name, c.ops.X) or a vmap of one; a Python function "
                        "of several calls would have to become a program (c.run with vmap)")

    # -- stored tensors ---------------------------------------------------------
    def tensor(self, data: Any, *, dtype: Any = None, device: str | None = None,
               requires_grad: bool = False) -> RemoteTensor:
        """Stores ``data`` (a numpy array, or anything ``np.asarray`` takes
        with ``dtype``) on the server (``POST /v1/tensors``) on ``device``;
        returns its handle. ``requires_grad`` (floating dtypes) makes it a
        leaf of autograd graphs."""
        a = np.asarray(data, dtype=dtype)
        enc = Encoder()
        body: dict[str, Any] = {"tensor": enc.tensor(a, requires_grad)}
        if device is not None:
            body["device"] = device
        head, _ = self._send_body("/v1/tensors", body, enc, enc.wants_binary(self.transport, self.binary_threshold))
        return RemoteTensor(self, head)

    def _handle(self, tensor_id: str, owned: bool) -> RemoteTensor:
        return RemoteTensor(self, self._get(f"/v1/tensors/{tensor_id}?meta=1"), owned)

    def _backward(self, root: RemoteTensor, gradient: Any, retain_graph: bool) -> None:
        body: dict[str, Any] = {}
        stored = None
        if gradient is not None:
            if not isinstance(gradient, Ref):
                gradient = np.asarray(gradient)
                if self.transport != "json" and gradient.nbytes > self.binary_threshold:
                    gradient = stored = self.tensor(gradient, device=root.device)  # backward takes JSON only
            enc = Encoder()
            body["gradient"] = enc.value(gradient)
            enc.finish(False)
        if retain_graph:
            body["retain_graph"] = True
        try:
            self.last_response = self._post_json(f"/v1/tensors/{root.id}/backward", body)
        finally:
            if stored is not None:
                stored.free()

    def _release(self, tensor_id: str) -> None:
        self._pending.append(tensor_id)

    def flush(self) -> None:
        """Deletes on the server the tensors of handles garbage collected
        since the last request (done before every request anyway)."""
        self._flushing = True
        try:
            while self._pending:
                try:
                    self._request("DELETE", f"/v1/tensors/{self._pending.pop()}")
                except (NotFound, Gone):
                    pass
        finally:
            self._flushing = False

    # -- sessions ---------------------------------------------------------------
    @property
    def session(self) -> str | None:
        """The session stored tensors belong to (None: ``default``)."""
        return self._session

    def _use_session(self, session: str | None) -> None:
        if session is not None and not _SESSION_RE.fullmatch(session):
            raise ValueError(f"a session id is 1 to 64 of A-Za-z0-9._-, not {session!r}")
        self._session = session
        self._session_headers = [("X-OD-Session", session)] if session else []

    def new_session(self) -> str:
        """Makes a private session (``POST /v1/sessions``, a random id), uses
        it from now on, and returns its id; :meth:`close` deletes it. Handles
        made before belong to the previous session."""
        self.flush()
        sid = self._post_json("/v1/sessions")["id"]
        self._owned_sessions.append(sid)
        self._use_session(sid)
        return sid

    def close(self) -> None:
        """Deletes what collected handles left and the sessions this client
        made, and closes the connection."""
        try:
            self.flush()
            while self._owned_sessions:
                try:
                    self._request("DELETE", f"/v1/sessions/{self._owned_sessions.pop()}")
                except NotFound:
                    pass
        finally:
            self._conn.close()

    # -- settings for the calls inside a with -----------------------------------
    @contextlib.contextmanager
    def _setting(self, key: str, value: Any) -> Iterator[None]:
        had, old = key in self._settings, self._settings.get(key)
        if value is None:
            self._settings.pop(key, None)
        else:
            self._settings[key] = value
        try:
            yield
        finally:
            if had:
                self._settings[key] = old
            else:
                self._settings.pop(key, None)

    def no_grad(self) -> contextlib.AbstractContextManager:
        """``with c.no_grad():`` calls record no autograd graph (``"grad_mode": "no_grad"``)."""
        return self._setting("grad_mode", "no_grad")

    def inference_mode(self) -> contextlib.AbstractContextManager:
        """``with c.inference_mode():`` as ``no_grad``, PyTorch's inference mode."""
        return self._setting("grad_mode", "inference_mode")

    def enable_grad(self) -> contextlib.AbstractContextManager:
        """``with c.enable_grad():`` records graphs again inside a ``no_grad``."""
        return self._setting("grad_mode", None)

    def autocast(self, dtype: str = "bfloat16", enabled: bool = True) -> contextlib.AbstractContextManager:
        """``with c.autocast("bfloat16"):`` runs PyTorch's lower-precision
        list (mm, matmul, linear, ...) in ``dtype`` (``"float16"`` on CUDA)."""
        return self._setting("autocast", dtype if enabled else None)

    @contextlib.contextmanager
    def modes(self, *modes: str | dict | list) -> Iterator[list]:
        """``with c.modes("trace"):``, ``with c.modes(["profile", {"override":
        {"mm": "mm_reference"}}]):``: runs the calls inside under these modes
        (TorchDispatchMode), outermost first; a nested ``with`` adds modes
        inside the outer ones. Yields a list that collects every response's
        mode reports (also in ``c.last_modes``)."""
        stack: list = []
        for m in modes:
            stack.extend(m) if isinstance(m, (list, tuple)) else stack.append(m)
        reports: list = []
        self._recorders.append(reports)
        try:
            with self._setting("modes", [*self._settings.get("modes", ()), *stack]):
                yield reports
        finally:
            self._recorders = [r for r in self._recorders if r is not reports]

    # -- introspection ----------------------------------------------------------
    def table(self, name: str) -> dict:
        """``GET /v1/ops/{name}``: schema, parsed arguments, computed dispatch
        table, registrations (``{name, overloads}`` for a name with several)."""
        return self._get(self._op_path(name))

    def dump(self, name: str) -> str:
        """PyTorch's two dumps of an operator (``_dispatch_dump_table`` and
        ``_dispatch_dump``), as text."""
        return self._get(self._op_path(name) + "?format=text")

    def stats(self) -> dict:
        """``GET /v1/stats``: per operator, key and route statistics."""
        return self._get("/v1/stats")

    def reset_stats(self) -> None:
        """``POST /v1/stats/reset``."""
        self._post_json("/v1/stats/reset")

    def devices(self) -> dict:
        """``GET /v1/devices``: CPU, BLAS and CUDA devices."""
        return self._get("/v1/devices")

    def keys(self) -> dict:
        """``GET /v1/keys``: runtime and alias dispatch keys, and the key sets each setting gives a request."""
        return self._get("/v1/keys")


def _dims(d: Any) -> Any:
    return list(d) if isinstance(d, (list, tuple)) else d


class VmapFunction:
    """An operator mapped over a batch dimension (``Client.vmap``)."""

    def __init__(self, client: Client, path: str, name: str, levels: list[dict]):
        self._client = client
        self._path = path
        self._name = name
        self._levels = levels

    def __call__(self, *args: Any, device: str | None = None, **kwargs: Any) -> Any:
        levels = self._levels
        return self._client._call(self._path, args, kwargs, device,
                                  {"vmap": levels[0] if len(levels) == 1 else levels})

    def __repr__(self) -> str:
        return f"<opdispatch vmap of {self._name} {self._levels}>"
