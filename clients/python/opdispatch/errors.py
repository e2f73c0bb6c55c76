"""Errors the server answers, as exceptions.

Every error of opdispatchd is an HTTP error status with the body
``{"error": {"code": "...", "message": "..."}}``. The client raises
:class:`OpdispatchError` carrying the status, the code and the message, as
the subclass named after the code (``mismatch`` raises :class:`Mismatch`),
so callers can catch one kind or all of them.
"""

from __future__ import annotations

import json

__all__ = [
    "OpdispatchError", "InvalidArgument", "NotFound", "MethodNotAllowed", "RequestTimeout",
    "Duplicate", "RegistryFrozen", "Gone", "TooLarge", "UnsupportedMediaType", "Mismatch",
    "Unsupported", "InternalError", "NoKernel", "DeviceUnavailable", "Unavailable",
    "DeadlineExceeded", "OutOfMemory", "OverBudget", "OutOfDeviceMemory", "error_from_response",
]


class OpdispatchError(Exception):
    """An error answer of the server.

    Attributes:
        status: the HTTP status (422, 404, ...).
        code: the server's stable error code (``"mismatch"``, ``"not_found"``,
            ...), or None when the body carried none.
        message: the server's message, e.g. ``"aten::add.Tensor: argument
            'other' (position 2) must be Tensor, not string"``.
    """

    code: str | None = None

    def __init__(self, status: int, code: str | None, message: str):
        super().__init__(f"{status} {code or 'error'}: {message}")
        self.status = status
        self.code = code
        self.message = message

    def __reduce__(self):
        return (type(self), (self.status, self.code, self.message))


class InvalidArgument(OpdispatchError):
    """400: malformed JSON, an unknown field or dtype, bad binary framing."""
    code = "invalid_argument"


class NotFound(OpdispatchError):
    """404: an unknown route, operator, stored tensor or session."""
    code = "not_found"


class MethodNotAllowed(OpdispatchError):
    """405: the wrong HTTP method for the route."""
    code = "method_not_allowed"


class RequestTimeout(OpdispatchError):
    """408: the request was not all received within the server's limit."""
    code = "request_timeout"


class Duplicate(OpdispatchError):
    """409: a second registration of a kernel or schema."""
    code = "duplicate"


class RegistryFrozen(OpdispatchError):
    """409: a registration after start-up."""
    code = "registry_frozen"


class Gone(OpdispatchError):
    """410: a stored tensor was evicted (store it again)."""
    code = "gone"


class TooLarge(OpdispatchError):
    """413: a body, tensor or output above the server's limits."""
    code = "too_large"


class UnsupportedMediaType(OpdispatchError):
    """415: a Content-Type other than JSON or octet-stream."""
    code = "unsupported_media_type"


class Mismatch(OpdispatchError):
    """422: shapes, dtypes or arguments that do not fit the schema or the kernel."""
    code = "mismatch"


class Unsupported(OpdispatchError):
    """422: something the kernel does not support (a dtype, a mode)."""
    code = "unsupported"


class InternalError(OpdispatchError):
    """500: a bug or an unexpected library failure on the server."""
    code = "internal"


class NoKernel(OpdispatchError):
    """501: no kernel for the dispatch key (e.g. no derivative)."""
    code = "no_kernel"


class DeviceUnavailable(OpdispatchError):
    """503: CUDA requested but unavailable."""
    code = "device_unavailable"


class Unavailable(OpdispatchError):
    """503: the server is draining or busy; retry later."""
    code = "unavailable"


class DeadlineExceeded(OpdispatchError):
    """504: the call ran longer than the server's --max-call-seconds."""
    code = "deadline_exceeded"


class OutOfMemory(OpdispatchError):
    """507: host memory exhausted."""
    code = "out_of_memory"


class OverBudget(OpdispatchError):
    """507: storing would put the session over its byte budget."""
    code = "over_budget"


class OutOfDeviceMemory(OpdispatchError):
    """507: device memory exhausted."""
    code = "out_of_device_memory"


_BY_CODE = {cls.code: cls for cls in OpdispatchError.__subclasses__()}


def error_from_response(status: int, body: bytes) -> OpdispatchError:
    """The exception for an error answer: its code's subclass when the body
    is ``{"error": {"code", "message"}}``, else :class:`OpdispatchError` with
    the body's text (the ``/v2`` shape ``{"error": "..."}`` included)."""
    code, message = None, body.decode("utf-8", "replace")
    try:
        err = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        pass
    else:
        if isinstance(err, dict):
            code, message = err.get("code"), str(err.get("message", ""))
        elif isinstance(err, str):
            message = err
    return _BY_CODE.get(code, OpdispatchError)(status, code, message)
