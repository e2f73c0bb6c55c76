"""Python client of opdispatch: PyTorch-style operators run on an opdispatchd server.

    import numpy as np, opdispatch
    c = opdispatch.Client("http://127.0.0.1:8000")
    c.call("add", np.ones(3, np.float32), np.arange(3, dtype=np.float32), alpha=2)  # [1., 3., 5.]
    c.ops.softmax(np.eye(2, dtype=np.float32), dim=1)      # from the server's schemas
    x = c.tensor(np.ones((2, 2), np.float32), requires_grad=True)  # stays on the server
    (x * x).sum().backward()
    x.grad.numpy()                                          # [[2., 2.], [2., 2.]]

See :class:`Client` and :class:`RemoteTensor`. numpy has no bfloat16:
bfloat16 outputs come back as float32 arrays (exact); arrays of a numpy
bfloat16 dtype (ml_dtypes') are sent as bfloat16.
"""

from ._wire import DTYPES
from .client import Client, RunResult, VmapFunction
from .errors import (DeadlineExceeded, DeviceUnavailable, Duplicate, Gone, InternalError, InvalidArgument,
                     MethodNotAllowed, Mismatch, NoKernel, NotFound, OpdispatchError, OutOfDeviceMemory,
                     OutOfMemory, OverBudget, RegistryFrozen, RequestTimeout, TooLarge, Unavailable,
                     Unsupported, UnsupportedMediaType)
from .ops import OpOverload, OpPacket, Ops
from .tensor import RemoteTensor

__version__ = "0.1.0"

__all__ = [
    "Client", "RemoteTensor", "RunResult", "VmapFunction", "Ops", "OpPacket", "OpOverload", "DTYPES",
    "OpdispatchError", "InvalidArgument", "NotFound", "MethodNotAllowed", "RequestTimeout", "Duplicate",
    "RegistryFrozen", "Gone", "TooLarge", "UnsupportedMediaType", "Mismatch", "Unsupported",
    "InternalError", "NoKernel", "DeviceUnavailable", "Unavailable", "DeadlineExceeded", "OutOfMemory",
    "OverBudget", "OutOfDeviceMemory",
]
