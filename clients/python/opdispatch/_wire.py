"""The wire format: dtypes, encoding arguments (JSON or binary tensor data),
decoding outputs, and one kept-alive HTTP connection.

Tensors travel as ``{"dtype", "shape", "data"}`` JSON objects, or, with the
Open Inference Protocol's binary extension, as ``{"dtype", "shape",
"parameters": {"binary_data_size": N}}`` in a JSON header followed by the
raw little-endian bytes of each tensor in the order the header names them.
"""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from .errors import OpdispatchError, error_from_response

# numpy dtype -> the server's dtype name; bfloat16 is matched by name (numpy
# has none; ml_dtypes and others provide one) in wire_dtype()
_NP_TO_WIRE = {np.dtype(t): n for t, n in (
    (np.float32, "float32"), (np.float64, "float64"), (np.float16, "float16"),
    (np.int64, "int64"), (np.int32, "int32"), (np.int16, "int16"), (np.int8, "int8"),
    (np.uint8, "uint8"), (np.bool_, "bool"))}

# the server's dtype names (and the Open Inference Protocol's) -> the numpy
# dtype an output is returned as; bfloat16 comes back as float32
_WIRE_TO_NP = {n: d for d, n in _NP_TO_WIRE.items()}
_WIRE_TO_NP.update({"bfloat16": np.dtype(np.float32)})
_WIRE_TO_NP.update({oip: _WIRE_TO_NP[n] for oip, n in (
    ("FP32", "float32"), ("FP64", "float64"), ("FP16", "float16"), ("BF16", "bfloat16"),
    ("INT64", "int64"), ("INT32", "int32"), ("INT16", "int16"), ("INT8", "int8"),
    ("UINT8", "uint8"), ("BOOL", "bool"))})
_BF16 = ("bfloat16", "BF16")

DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
"""The ten dtypes the server knows, by their torch names."""


def wire_dtype(dt: np.dtype) -> str:
    """The server's name for numpy dtype ``dt``; TypeError if it has none."""
    name = _NP_TO_WIRE.get(dt)
    if name is not None:
        return name
    if dt.byteorder == ">":
        return wire_dtype(dt.newbyteorder("="))
    if dt.name == "bfloat16" and dt.itemsize == 2:
        return "bfloat16"
    raise TypeError(f"opdispatch has no dtype for numpy {dt}; it takes {', '.join(DTYPES)}")


def bfloat16_to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) as float32 values (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def array_from_json(t: dict) -> np.ndarray:
    """The numpy array of a JSON output tensor (bfloat16 as float32)."""
    dt = t.get("dtype") or t["datatype"]
    return np.array(t["data"], dtype=_WIRE_TO_NP[dt]).reshape(t["shape"])


class Ref:
    """Base of values that travel as ``{"ref": id}``: tensors stored on the server."""

    __slots__ = ()
    id: str


class Encoder:
    """Turns call arguments into a JSON-able structure in one pass.

    numpy arrays become tensor objects whose ``data`` (JSON) or
    ``parameters.binary_data_size`` (binary) :meth:`finish` fills in once it
    knows the transport; :class:`Ref` values become ``{"ref": id}``; numpy
    scalars become Python numbers; lists, tuples and dicts are walked; other
    values (numbers, bools, strings, None) pass as they are.
    """

    __slots__ = ("tensors", "refs", "meta_only")

    def __init__(self, meta_only: bool = False):
        self.tensors: list[tuple[dict, np.ndarray, str]] = []
        self.refs = 0
        self.meta_only = meta_only

    def value(self, v: Any) -> Any:
        t = type(v)
        if t is np.ndarray:
            return self.tensor(v)
        if t is int or t is float or t is bool or t is str or v is None:
            return v
        if isinstance(v, Ref):
            self.refs += 1
            return {"ref": v.id}
        if t is list or t is tuple:
            return [self.value(x) for x in v]
        if isinstance(v, dict):  # a Ref key stands for its id (vmap in_dims of a program)
            return {(k.id if isinstance(k, Ref) else k): self.value(x) for k, x in v.items()}
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, np.ndarray):
            return self.tensor(v)
        if isinstance(v, (list, tuple)):
            return [self.value(x) for x in v]
        if isinstance(v, (int, float, str)):
            return v
        raise TypeError(f"cannot send a {t.__name__} to opdispatch: pass numpy arrays, "
                        "RemoteTensors, numbers, bools, strings, lists or None")

    def tensor(self, a: np.ndarray, requires_grad: bool = False) -> dict:
        """The tensor object for array ``a`` (filled in by :meth:`finish`)."""
        wire = wire_dtype(a.dtype)
        d = {"dtype": wire, "shape": list(a.shape)}
        if requires_grad:
            d["requires_grad"] = True
        if not self.meta_only:
            self.tensors.append((d, a, wire))
        return d

    def wants_binary(self, transport: str, threshold: int) -> bool:
        """Whether the request goes binary: always for "binary", never for
        "json", and for "auto" when some array is above ``threshold`` bytes."""
        if transport == "auto":
            for _, a, _ in self.tensors:
                if a.nbytes > threshold:
                    return True
            return False
        return transport == "binary"

    def finish(self, binary: bool) -> list:
        """Fills in every tensor object; returns the raw buffers to send after
        the JSON header, in header order (empty for JSON)."""
        if not binary:
            for d, a, wire in self.tensors:
                d["data"] = (a.astype(np.float32) if wire == "bfloat16" else a).tolist()
            return []
        bufs = []
        for d, a, _ in self.tensors:
            if a.dtype.byteorder == ">":
                a = a.astype(a.dtype.newbyteorder("<"))
            if not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
            d["parameters"] = {"binary_data_size": a.nbytes}
            if a.nbytes:
                bufs.append(memoryview(a.reshape(-1).view(np.uint8)))
        return bufs


def _read_exactly(resp: http.client.HTTPResponse, view: memoryview) -> None:
    got, size = 0, len(view)
    while got < size:
        n = resp.readinto(view[got:])
        if not n:
            raise http.client.IncompleteRead(b"", size - got)
        got += n


def _read_blob(resp: http.client.HTTPResponse, out: dict, size: int) -> np.ndarray:
    """Reads one binary output straight into a fresh numpy array."""
    dt = out.get("dtype") or out["datatype"]
    bf16 = dt in _BF16
    arr = np.empty(out["shape"], np.uint16 if bf16 else _WIRE_TO_NP[dt])
    if arr.nbytes != size:
        raise http.client.HTTPException(
            f"binary output of {size} bytes does not fit {dt} {out['shape']} ({arr.nbytes} bytes)")
    if size:
        _read_exactly(resp, memoryview(arr.reshape(-1).view(np.uint8)))
    return bfloat16_to_float32(arr) if bf16 else arr


_STALE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)  # RemoteDisconnected too
_ONE_SEND = 64 * 1024  # a request up to this size leaves in one send


class Connection:
    """One kept-alive HTTP/1.1 connection to the server, through http.client.

    ``http.client.HTTPConnection`` opens the socket (TCP_NODELAY, TLS for
    https, the timeout) and ``http.client.HTTPResponse`` reads each answer;
    the request head is written here so that a small request (head and body)
    leaves in one send, and a large body is sent from the arrays' own memory
    without a copy. A request that finds the kept-alive connection closed
    by the server (its idle timeout, a restart) is sent again once on a new
    connection. Not thread-safe: use one Client per thread.
    """

    def __init__(self, url: str, timeout: float | None, cafile: str | None = None):
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"not an http:// or https:// URL: {url!r}")
        self.prefix = u.path.rstrip("/")
        if u.scheme == "https":
            ctx = ssl.create_default_context(cafile=cafile)
            self._conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout, context=ctx)
        else:
            self._conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
        self._host = f"{host}:{u.port}" if u.port and u.port != self._conn.default_port else host

    def close(self) -> None:
        self._conn.close()

    def request(self, method: str, path: str, headers: list, parts: list | tuple = ()) -> tuple[Any, list | None]:
        """Sends one request; returns (body, blobs): the parsed JSON body (the
        JSON header of a binary answer; the text of a text/plain one) and, for
        a binary answer, one numpy array or None per ``outputs`` entry.
        Raises the OpdispatchError of an error status."""
        head = "".join([f"{method} {self.prefix}{path} HTTP/1.1\r\nHost: {self._host}\r\n",
                        *[f"{k}: {v}\r\n" for k, v in headers], "\r\n"]).encode("latin-1")
        size = len(head) + sum(len(p) if isinstance(p, bytes) else p.nbytes for p in parts)
        if size <= _ONE_SEND:
            chunks = [b"".join((head, *parts))]
        else:  # the head and the leading bytes (a JSON header) together, then each array
            n = next((i for i, p in enumerate(parts) if not isinstance(p, bytes)), len(parts))
            chunks = [b"".join((head, *parts[:n])), *parts[n:]]
        for attempt in (0, 1):
            conn = self._conn
            reused = conn.sock is not None
            try:
                if not reused:
                    conn.connect()
                resp = self._send(conn.sock, method, chunks)
            except _STALE:
                conn.close()
                if attempt or not reused:
                    raise
                continue
            except BaseException:
                conn.close()
                raise
            try:
                return self._receive(resp)
            except OpdispatchError:  # an error answer, read whole: the connection goes on
                raise
            except BaseException:
                resp.close()
                conn.close()
                raise
            finally:
                if resp.will_close:
                    conn.close()
        raise AssertionError("unreachable")

    @staticmethod
    def _send(sock, method: str, chunks: list) -> http.client.HTTPResponse:
        try:
            for c in chunks:
                sock.sendall(c)
        except _STALE as e:
            # the server may have answered early (413 before the body) and
            # closed: that answer is the one to report
            try:
                resp = http.client.HTTPResponse(sock, method=method)
                resp.begin()
                return resp
            except (OSError, http.client.HTTPException):
                raise e from None
        resp = http.client.HTTPResponse(sock, method=method)
        resp.begin()
        return resp

    @staticmethod
    def _receive(resp: http.client.HTTPResponse) -> tuple[Any, list | None]:
        status = resp.status
        if status >= 400:
            raise error_from_response(status, resp.read())
        hl = resp.getheader("Inference-Header-Content-Length")
        if hl is not None:
            head = json.loads(resp.read(int(hl)))
            blobs = []
            for o in head.get("outputs", ()):
                p = o.get("parameters")
                size = p.get("binary_data_size") if p else None
                blobs.append(None if size is None else _read_blob(resp, o, size))
            if resp.read():
                raise http.client.HTTPException("binary answer longer than its outputs")
            return head, blobs
        body = resp.read()
        ctype = resp.getheader("Content-Type") or ""
        if ctype.startswith("application/json"):
            return json.loads(body), None
        return body.decode("utf-8", "replace"), None
