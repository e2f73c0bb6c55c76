"""The MLServer peer's runtime: add and mm in numpy behind MLServer's Open
Inference Protocol server, so bench/http/run.py can send the same /v2
requests to it and to opdispatchd. The model's name picks the operator.
Input names are free (opdispatchd wants self/other and self/mat2; we take
the two inputs in order)."""
import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse

OPS = {"add": np.add, "mm": np.matmul}


class NumpyOp(MLModel):
    async def load(self) -> bool:
        self._op = OPS[self.name]
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        a, b = (NumpyCodec.decode_input(i) for i in payload.inputs)
        out = self._op(a, b)
        enc = NumpyCodec.encode_output("out", out)
        enc.shape = list(out.shape)  # the codec turns 1-D into [n, 1] (a batch of rows)
        return InferenceResponse(model_name=self.name, outputs=[enc])
