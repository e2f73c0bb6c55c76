"""The peer opdispatchd is compared with: a FastAPI + numpy service doing
the same operator calls with the same JSON body shape as POST /v1/ops/{op}.

Run: uvicorn --app-dir bench/http fastapi_peer:app --workers N
"""
import numpy as np
from fastapi import FastAPI, Request

app = FastAPI()


def tensor(spec):
    return np.asarray(spec["data"], dtype=spec["dtype"]).reshape(spec["shape"])


def encode(out):
    return {"outputs": [{"dtype": str(out.dtype), "shape": list(out.shape),
                         "data": out.ravel().tolist()}]}


@app.post("/v1/ops/add")
async def add(request: Request):
    body = await request.json()
    a, b = body["args"]
    return encode(tensor(a) + tensor(b))


@app.post("/v1/ops/mm")
async def mm(request: Request):
    body = await request.json()
    a, b = body["args"]
    return encode(tensor(a) @ tensor(b))
