#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora into tests/fuzz/corpus/<fuzzer>/ (committed;
rerun after changing a seed below). Seeds are the calls proto/PROTOCOL.md shows,
the shapes the integration tests send, and a sample of PyTorch 1.13's schemas
(tests/data/torch-1.13-schemas.txt), each small: libFuzzer finds the rest.

Formats (see each fuzz_<name>.c): number, json, schema: the bytes as they are;
binary: 2-byte little-endian header length, then the body; bind: the operator
name, a newline, the call body; infer: model, newline, header length or '-',
newline, body; http: the bytes a client sends on one connection."""
import hashlib
import json
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def put(name, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def j(v):
    return json.dumps(v, separators=(",", ":"))


def T(shape, data, dtype="float32", **kw):
    return dict(dtype=dtype, shape=shape, data=data, **kw)


T23 = T([2, 3], [1, -2, 3, -4, 5, -6])
T32 = T([3, 2], [1, 2, 3, 4, 5, 6])
IMG = T([1, 1, 4, 4], list(range(16)))
K33 = T([1, 1, 3, 3], [1, 0, -1, 2, 0, -2, 1, 0, -1])
IDX = T([2], [1, 0], "int64")

# (op as a URL names it, /v1 body)
CALLS = [
    ("add", {"args": [T([2, 2], [1, 2, 3, 4]), T([2, 2], [10, 20, 30, 40])], "kwargs": {"alpha": 2}}),
    ("add", {"args": [{"data": [[1, 2], [3, 4]]}, 0.5]}),
    ("softmax", {"args": [T([2, 3], [[1, 2, 3], [1, 1, 1]]), 1]}),
    ("unbind", {"args": [T([2, 2], [1, 2, 3, 4])]}),
    ("sum", {"args": [T23, [1]], "kwargs": {"keepdim": True}}),
    ("mm", {"args": [T23, T32]}),
    ("cat", {"args": [[T23, T23], 0]}),
    ("index", {"args": [T23, [IDX]]}),
    ("index_select", {"args": [T23, 1, IDX]}),
    ("conv2d", {"args": [IMG, K33], "kwargs": {"stride": [1, 1], "padding": [1, 1]}}),
    ("max_pool2d", {"args": [IMG, [2, 2]]}),
    ("layer_norm", {"args": [T23, [3]]}),
    ("nll_loss", {"args": [T23, T([2], [2, 0], "int64")]}),
    ("where", {"args": [T([3], [True, False, True], "bool"), T([3], [1, 2, 3]), 0.0]}),
    ("to", {"args": [T([2], [1.5, "NaN"], "float64")], "kwargs": {"dtype": "int32"}}),
    ("arange", {"args": [5], "kwargs": {"dtype": "int64"}}),
    ("relu", {"args": [T([2], [1, -2], "float16")], "device": "cpu"}),
    ("matmul.default", {"args": [T([2, 2], [1, 2, 3, 4], "bfloat16"), T([2], [1, 1], "bfloat16")]}),
    ("aten::view", {"args": [T23, [3, -1]]}),
    ("expand", {"args": [T([1, 3], [1, 2, 3]), [2, 3]]}),
    ("narrow", {"args": [T23, 1, 1, 2]}),
    ("gather", {"args": [T23, 1, T([2, 1], [0, 2], "int64")]}),
    ("mean", {"args": [T([2, 2], ["Infinity", "-Infinity", 1, 2], "float64")]}),
]

OIP = [
    ("add.Tensor", {"id": "r1", "inputs": [
        {"name": "self", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "other", "shape": [2, 2], "datatype": "FP32", "data": [10, 20, 30, 40]}],
        "outputs": [{"name": "out"}]}),
    ("softmax.int", {"inputs": [{"name": "self", "shape": [2, 2], "datatype": "FP64", "data": [1, 2, 3, 4]},
                                {"name": "dim", "shape": [1], "datatype": "INT64", "data": [1]}]}),
    ("sum.dim_IntList", {"inputs": [{"name": "self", "shape": [2, 2], "datatype": "INT32", "data": [1, 2, 3, 4]}],
                         "parameters": {"dim": [0], "keepdim": True}}),
    ("relu", {"inputs": [{"name": "self", "shape": [3], "datatype": "BOOL", "data": [True, False, True]}]}),
]


def binary_body(header, blobs):
    h = j(header).encode()
    return h, h + b"".join(blobs)


F4 = struct.pack("<4f", 1, -2, 3, -4)
BINARY = [
    binary_body({"args": [{"dtype": "float32", "shape": [4], "parameters": {"binary_data_size": 16}}],
                 "parameters": {"binary_data_output": True}}, [F4]),
    binary_body({"inputs": [{"name": "self", "shape": [4], "datatype": "FP32", "parameters": {"binary_data_size": 16}},
                            {"name": "other", "shape": [2, 1], "datatype": "INT64",
                             "parameters": {"binary_data_size": 16}}],
                 "outputs": [{"name": "out", "parameters": {"binary_data": True}}]},
                [F4, struct.pack("<2q", 7, -1)]),
    binary_body({"args": [{"dtype": "bool", "shape": [3], "parameters": {"binary_data_size": 3}},
                          {"dtype": "float16", "shape": [0], "parameters": {"binary_data_size": 0}}]},
                [b"\x01\x00\x01"]),
    binary_body({"args": [T([2], [1, 2]), {"dtype": "float64", "shape": [1], "parameters": {"binary_data_size": 8}}]},
                [struct.pack("<d", 2.5)]),
]


def http(method, path, headers=(), body=b""):
    if isinstance(body, str):
        body = body.encode()
    lines = [f"{method} {path} HTTP/1.1", "Host: fuzz"] + list(headers)
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


KEYS = ("args kwargs device parameters outputs binary_data_output binary_data binary_data_size dtype "
        "datatype shape data name inputs id requires_grad ref keep steps op backward grad_mode modes "
        "autocast vmap in_dims out_dims randomness tensor gradient retain_graph return index override "
        "trace validate max_events alpha dim keepdim dispatch full summary none").split()
DTYPES = ("float32 float64 float16 bfloat16 int8 int16 int32 int64 uint8 bool complex64 float double half "
          "long int FP32 FP64 FP16 BF16 INT8 INT16 INT32 INT64 UINT8 BOOL BYTES").split()
JSON_TOKENS = ['"', "{", "}", "[", "]", ":", ",", "true", "false", "null", "-", "0", "1e", "E-", ".5",
               "\\u", "\\ud800", "\\n", '"NaN"', '"Infinity"', '"-Infinity"', "NaN", "Infinity",
               "-0.0", "1e309", "9223372036854775808", "[[", "]]", "\\u0000", "\xc3\xa9", "\xed\xa0\x80"]
SCHEMA_TOKENS = ("aten:: ( ) -> , * Tensor Tensor? Tensor[] Tensor?[] Tensor(a) Tensor(a!) Tensor(a -> *) "
                 "int int? int[] int[1] int[2]? float float? float[] bool bool[3] str str? Scalar Scalar? "
                 "ScalarType? Layout? Device? MemoryFormat? Generator? Dimname Dimname[] SymInt SymInt[] "
                 "Storage Stream = None True False Mean contiguous_format long \"mean\" 'x' 1e-05 -1 [] "
                 ".out self other out").split()
HTTP_TOKENS = ["\r\n", "\r\n\r\n", "\r\n0\r\n\r\n"] + ("GET POST DELETE HEAD PUT OPTIONS HTTP/1.1 HTTP/1.0 Host: Content-Length: "
               "Content-Type: Transfer-Encoding: chunked Connection: close keep-alive Expect: 100-continue "
               "Accept: application/json application/octet-stream Inference-Header-Content-Length: "
               "X-OD-Session: ?format=text ?meta=1 ?binary=1 /v1/ops/ /v1/run /v1/tensors /v1/sessions "
               "/v1/stats /v1/keys /v1/devices /v1/bench /v1/load /metrics /v2 /v2/models/ /infer /config "
               "/ready /stats /versions/1 /v2/health/ready /v2/repository/index /web/ /explain /backward "
               "add add.Tensor aten:: mm relu softmax sum cat index conv2d").split()


def write_dict(name, tokens):
    """tokens: str, where a character below 256 stands for that byte."""
    d = os.path.join(HERE, "dict")
    os.makedirs(d, exist_ok=True)
    seen = []
    for t in tokens:
        if t not in seen:
            seen.append(t)
    with open(os.path.join(d, name + ".dict"), "w") as f:
        f.write("# generated by tests/fuzz/make_corpus.py\n")
        for t in seen:
            b = t.encode("latin-1")
            f.write('"%s"\n' % "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else "\\x%02x" % c
                                        for c in b))


def main():
    proto = JSON_TOKENS + ['"%s"' % k for k in KEYS] + ['"%s"' % d for d in DTYPES]
    write_dict("json", proto)
    write_dict("binary", proto)
    write_dict("bind", proto + ["add", "add.Tensor", "aten::", ".default", "softmax.int", "sum.dim_IntList"])
    write_dict("infer", proto + ["add.Tensor", "relu", "mm", "softmax.int"])
    write_dict("http", HTTP_TOKENS + proto)
    write_dict("schema", SCHEMA_TOKENS)
    write_dict("number", ["-", "0", ".", "e", "E", "+", "e-", "e+", "00000000", "99999999", "1e308", "e-324",
                          "4.9406564584124654e-324", "2.2250738585072011e-308", "1.7976931348623157e308",
                          "3.4028235e38", "1.4e-45"])
    # number
    for tok in ["0", "-0", "1.5", "-1.0E+2", "1e308", "1e309", "2.2250738585072014e-308", "4.9e-324",
                "1e-400", "0.1", "3.4028235e+38", "3.4028236e+38", "1.17549435e-38", "1.4e-45",
                "9007199254740993", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
                "123456789012345678901234567890", "0.30000000000000004", "7.038531e-26", "1e23",
                "8.589973e9", "2.5e-324", "100", "0.000001"]:
        put("number", tok)
    # schema
    with open(os.path.join(ROOT, "tests", "data", "torch-1.13-schemas.txt")) as f:
        schemas = [l.rstrip("\n") for l in f if l.strip()]
    for s in schemas[::60]:
        put("schema", s)
    for s in schemas:
        if any(k in s for k in ("Tensor(a!)", "int[1]?", "Dimname", "Tensor?[]", "*,", "-> ()", "str?",
                                "Scalar?", "Layout?", "MemoryFormat?", "float[]?", "int[2]")):
            put("schema", s)
            if len(os.listdir(os.path.join(HERE, "corpus", "schema"))) > 120:
                break
    # json, bind, http (/v1)
    for op, body in CALLS:
        b = j(body)
        put("json", b)
        put("bind", f"{op}\n{b}")
        put("http", http("POST", f"/v1/ops/{op}", ["Content-Type: application/json"], b))
    put("json", json.dumps(T([2, 2], [[1, 2], [3, 4]], requires_grad=True), indent=1))
    put("json", '{"tensor": {"datatype": "UINT8", "shape": [2], "data": [255, 0]}}')
    put("json", '[{"data": [1e400, -0.0, "NaN"]}, {"data": [true, 1]}, {"data": [[]]}, "\\u00e9\\ud83d\\ude00"]')
    for model, body in OIP:
        b = j(body)
        put("json", b)
        put("bind", f"{model}\n{b}")
        put("infer", f"{model}\n-\n{b}")
        put("http", http("POST", f"/v2/models/{model}/infer", ["Content-Type: application/json"], b))
    # binary framing, /v2 infer and http with binary bodies
    for (h, body), path, model in zip(BINARY, ["/v1/ops/relu", "/v2/models/add.Tensor/infer",
                                              "/v1/ops/logical_not", "/v1/ops/add"],
                                      ["relu", "add.Tensor", "logical_not", "add"]):
        put("binary", struct.pack("<H", len(h)) + body)
        put("infer", f"{model}\n{len(h)}\n".encode() + body)
        put("http", http("POST", path, ["Content-Type: application/octet-stream",
                                        f"Inference-Header-Content-Length: {len(h)}"], body))
    # http: every GET route, programs, stored tensors, chunked, keep-alive
    # (not the listings of everything, which fuzz_http skips: /, /v1/ops, /v1/stats, /metrics,
    # /v2/models/stats)
    for p in ["/v1/ops/add", "/v1/ops/add.Tensor?format=text", "/v1/keys", "/v1/devices",
              "/v2", "/v2/health/live", "/v2/health/ready", "/v2/models/add.Tensor", "/v2/models/add.Tensor/versions/1/config", "/v2/models/relu/ready",
              "/v2/models/mm/stats", "/v1/tensors", "/web/index.html", "/web/../../etc/passwd",
              "/v1/load", "/nope"]:
        put("http", http("GET", p, ["Accept: application/json"]))
    put("http", http("POST", "/v2/repository/index", ["Content-Type: application/json"], "{}"))
    put("http", http("POST", "/v1/sessions", [], ""))
    put("http", http("DELETE", "/v1/tensors/abc", ["X-OD-Session: s"]))
    put("http", http("POST", "/v1/stats/reset", [], ""))
    put("http", http("POST", "/v1/ops/mm/explain", ["Content-Type: application/json"],
                     j({"args": [{"dtype": "float32", "shape": [2, 3]}, {"dtype": "float32", "shape": [3, 4]}]})))
    put("http", http("POST", "/v1/run", ["Content-Type: application/json"], j({"steps": [
        {"op": "mm", "args": [T([2, 2], [1, 2, 3, 4], requires_grad=True), T([2, 2], [1, 0, 0, 1])]},
        {"op": "relu", "args": [{"ref": "$0"}]}, {"op": "sum", "args": [{"ref": "$1"}]},
        {"backward": "$2"}], "outputs": ["$1", "$2"], "grad_mode": "enabled"})))
    store = http("POST", "/v1/tensors", ["Content-Type: application/json", "X-OD-Session: s"],
                 j({"tensor": T([2], [1, -2], requires_grad=True)}))
    put("http", store + http("GET", "/v1/tensors", ["X-OD-Session: s"]) +
        http("GET", "/v1/sessions/s", []))
    put("http", http("POST", "/v1/ops/neg", ["Content-Type: application/json"],
                     j({"args": [T23], "keep": True, "modes": ["trace"]})))
    body = j({"args": [T([2], [1, 2])]}).encode()
    put("http", (f"POST /v1/ops/neg HTTP/1.1\r\nHost: fuzz\r\nTransfer-Encoding: chunked\r\n"
                 f"Content-Type: application/json\r\n\r\n{len(body):x}\r\n").encode() + body + b"\r\n0\r\n\r\n")
    put("http", http("HEAD", "/v1/ops", []) + http("OPTIONS", "/v1/ops", []))
    return 0


if __name__ == "__main__":
    sys.exit(main())
