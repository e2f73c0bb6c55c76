"""Scans, sorting and indexing against PyTorch 1.13 on the same machine, in one run.

For sort, topk, cumsum, gather and scatter_add at 1e6 float32 elements (one
line), and sort and cumsum along the last dim of a 1000x1000 matrix (many
lines): the server's own kernel time (POST /v1/bench, the median of
kernel_us over the iterations, inputs made on the server) against torch
(Debian's python3-torch 1.13 by default, OD_TORCH_PYTHON to choose; the same
thread count) timing the same operator on same-sized inputs, median of as
many calls. Each side first makes as many warm-up calls as it times. Each
case is timed in up to --rounds paired rounds (torch, then the server), and
the ratio server / torch printed per operator is the median of the rounds'
ratios; the issue's target is <= 1.5. With --device cuda both run on the GPU (torch
synchronises after each call; the server's kernel_us is its own
synchronised time).

Starts one opdispatchd (--enable-bench), stops it by PID; bounded by --iterations.
With --family ew, every per-element operator of ops.def instead (the
server's CPU kernel is od_cpu_ew), on rand float32 (int32 ones where float32
is refused), against torch.ops.aten's same overload; the issue's target there
is <= 1.0. The other families (FAMILIES below: norm, attention, loss, ...)
are tables of explicit cases, named by what they time; torch builds its
inputs from the same tensor specs the server's /v1/bench takes.

Usage: ops_torch.py --opdispatchd PATH [--n 1000000] [--iterations 20] [--threads 2] [--device cpu|cuda]
                    [--family scan|ew|core|norm|attention|loss|pool|conv|embedding|dist|select|rest|backward] [--ops SUBSTRING] [--http]
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import time

import numpy as np
import requests

TORCH_PYTHON = os.environ.get("OD_TORCH_PYTHON", "/usr/bin/python3")

TORCH_TIMER = r"""
import json, statistics, sys, time, torch
n, iters, threads, seed = map(int, sys.argv[1:5])
dev = sys.argv[5]
torch.set_num_threads(threads)
g = torch.Generator().manual_seed(seed)
x = torch.rand(n, generator=g).to(dev)
m = torch.rand(1000, 1000, generator=g).to(dev)
idx = torch.randint(0, n, (n,), generator=g).to(dev)
zeros = torch.zeros(n, device=dev)
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
def arg(a):
    if isinstance(a, dict):
        return (torch.rand(n, generator=g) if a["dtype"] == "float32" else torch.ones(n, dtype=torch.int32)).to(dev)
    return a
def aten(name):
    base, _, ov = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")
# a tensor of a spec the server's /v1/bench takes too: {"generate":
# "rand"|"zeros"|"ones", "shape", "dtype"}, or explicit "data"
def tensor(t):
    dt = getattr(torch, t["dtype"])
    if "data" in t:
        return torch.tensor(t["data"], dtype=dt).reshape(t["shape"]).to(dev)
    if t.get("generate") == "zeros":
        return torch.zeros(t["shape"], dtype=dt, device=dev)
    if t.get("generate") == "ones":
        return torch.ones(t["shape"], dtype=dt, device=dev)
    if t.get("generate") == "randn":
        return torch.randn(t["shape"], generator=g).to(dt).to(dev)
    return torch.rand(t["shape"], generator=g).to(dt).to(dev)
def spec_case(op, args, kw):
    a = [tensor(x) if isinstance(x, dict) else [tensor(y) for y in x]
         if isinstance(x, list) and x and isinstance(x[0], dict) else x for x in args]
    kw = {k: getattr(torch, v) if k == "dtype" else v for k, v in kw.items()}  # a ScalarType by name
    return lambda f=aten(op): f(*a, **kw)
def timings(ew):
    if isinstance(ew, dict) and "spec" in ew:  # a family of explicit cases (FAMILIES in the driver)
        cases = {name: spec_case(op, args, kw) for name, op, args, kw in ew["spec"]}
    elif isinstance(ew, list):  # per-element operators: [[name, args]]
        cases = {name: (lambda f=aten(name.split(" ")[0]), a=[arg(x) for x in args]: f(*a)) for name, args in ew}
    else:  # the scan family, {"scan": name}
        cases = {
            "sort": lambda: torch.ops.aten.sort(x, -1, False),
            "topk": lambda: torch.ops.aten.topk(x, 100),
            "cumsum": lambda: torch.ops.aten.cumsum(x, 0),
            "gather": lambda: torch.ops.aten.gather(x, 0, idx),
            "scatter_add": lambda: torch.ops.aten.scatter_add(zeros, 0, idx, x),
            "sort 1000x1000": lambda: torch.ops.aten.sort(m, -1, False),
            "cumsum 1000x1000": lambda: torch.ops.aten.cumsum(m, -1),
        }
        cases = {ew["scan"]: cases[ew["scan"]]}
    out = {}
    for name, f in cases.items():
        for _ in range(iters):  # as many warm-up calls as timed ones, as the server gets (see main)
            f()
        sync()
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            f()
            sync()
            ts.append((time.perf_counter() - t0) * 1e6)
        out[name] = statistics.median(ts)
    return out
# one process for the whole run, one request per line: torch's import and
# set-up (seconds) are paid once, not once per case
for line in sys.stdin:
    print(json.dumps(timings(json.loads(line))), flush=True)
"""


def case_kwargs(case):
    """a family case's keyword arguments: its optional third element"""
    return case[2] if len(case) > 2 else {}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ew_cases(url, n, only):
    """Every operator whose CPU kernel is od_cpu_ew (ops.def's OD_EW1/EW2/EWP
    lines), with tensors of n float32 (int32 ones where float32 is refused)
    and the other arguments at their schema default, or 1 / 0.5 / False."""
    names = [o["name"].removeprefix("aten::") for g in requests.get(url + "/v1/ops").json()["operators"]
             for o in g["overloads"]]
    cases, ew = {}, []
    for name in names:
        if only not in name:
            continue
        d = requests.get(f"{url}/v1/ops/{name}").json()
        if not any(t["key"] == "CPU" and t["kernel"] == "od_cpu_ew" for t in d["table"]):
            continue
        for dt, gen in (("float32", "rand"), ("int32", "ones")):
            args, targs = [], []
            for x in d["arguments"]:
                if x["kwarg_only"] and x["has_default"]:
                    continue
                if x["type"] in ("Tensor", "Tensor?"):
                    args.append({"generate": gen, "shape": [n], "dtype": dt})
                    targs.append({"dtype": dt})
                    continue
                v = x["default"] if x["has_default"] else (
                    1 if x["type"] in ("int", "SymInt") else False if x["type"] == "bool"
                    else (3 if dt == "int32" else 0.5))
                args.append(v)
                targs.append(v)
            probe = [{"dtype": dt, "shape": [4], "data": [1] * 4} if isinstance(v, dict) else v for v in args]
            if requests.post(f"{url}/v1/ops/{name}", json={"args": probe}).status_code == 200:
                key = name if dt == "float32" else f"{name} int32"
                cases[key] = (name, args)
                ew.append((key, targs))
                break
    return cases, ew


def rand(*shape, dtype="float32"):
    return {"generate": "rand", "shape": list(shape), "dtype": dtype}


def norm_cases():
    """batch and group norm at ResNet sizes, layer norm over short rows with
    and without weight and bias (target <= 1.0)"""
    return {
        "layer_norm 1Mx8": ("native_layer_norm", [rand(1048576, 8), [8], None, None, 1e-5]),
        "layer_norm 1Mx8 affine": ("native_layer_norm", [rand(1048576, 8), [8], rand(8), rand(8), 1e-5]),
        "layer_norm 65536x128": ("native_layer_norm", [rand(65536, 128), [128], None, None, 1e-5]),
        "batch_norm eval 8x64x56x56": ("native_batch_norm", [rand(8, 64, 56, 56), rand(64), rand(64), rand(64),
                                                             rand(64), False, 0.1, 1e-5]),
        "batch_norm train 8x64x56x56": ("native_batch_norm", [rand(8, 64, 56, 56), rand(64), rand(64), rand(64),
                                                              rand(64), True, 0.1, 1e-5]),
        "group_norm 32 8x256x56x56": ("native_group_norm", [rand(8, 256, 56, 56), rand(256), rand(256), 8, 256,
                                                            3136, 32, 1e-5]),
    }


def attention_cases():
    """_scaled_dot_product_attention at 8x12 heads of 64, L = 512 and 2048 (target <= 1.0)"""
    cases = {}
    for L in (512, 2048):
        for causal in (False, True):
            t = rand(8, 12, L, 64)
            cases[f"sdpa L={L}{' causal' if causal else ''}"] = (
                "_scaled_dot_product_attention", [t, t, t, None, 0.0, False, causal])
    return cases


def loss_cases():
    """nll_loss and cross_entropy_loss (mean, class targets) on randn logits of 8192 x 32000 and 256 x 1000,
    mse_loss (mean) on 1.6e7, binary_cross_entropy (mean) on 1.6e7, binary_cross_entropy_with_logits (mean) on
    4M, glu on 4096 x 8192 (target <= 1.0)"""
    rng = np.random.default_rng(20261128)
    cases = {}
    for r, c in ((8192, 32000), (256, 1000)):
        t = {"dtype": "int64", "shape": [r], "data": rng.integers(0, c, r).tolist()}
        for op in ("nll_loss", "cross_entropy_loss"):
            cases[f"{op} {r}x{c}"] = (op, [{"generate": "randn", "shape": [r, c], "dtype": "float32"}, t])
    cases["mse_loss 1.6e7"] = ("mse_loss", [rand(16_000_000), rand(16_000_000), 1])
    cases["binary_cross_entropy 1.6e7"] = ("binary_cross_entropy", [rand(16_000_000), rand(16_000_000), None, 1])
    cases["bce_with_logits 4M"] = ("binary_cross_entropy_with_logits",
                                   [{"generate": "randn", "shape": [4_000_000], "dtype": "float32"},
                                    rand(4_000_000), None, None, 1])
    cases["glu 4096x8192"] = ("glu", [{"generate": "randn", "shape": [4096, 8192], "dtype": "float32"}, -1])
    return cases


def pool_cases():
    """pooling and upsampling at ResNet-50 sizes: the stem's max pool, the head's global average pool, a 2x
    upsampling of a 56x56 map (bilinear in bfloat16 too) (target <= 1.0)"""
    stem, head, mid = rand(8, 64, 112, 112), rand(8, 2048, 7, 7), rand(8, 64, 56, 56)
    return {
        "max_pool2d 3x3 s2 p1 8x64x112x112": ("max_pool2d", [stem, [3, 3], [2, 2], [1, 1]]),
        "max_pool2d_with_indices (same)": ("max_pool2d_with_indices", [stem, [3, 3], [2, 2], [1, 1]]),
        "avg_pool2d 7x7 8x2048x7x7": ("avg_pool2d", [head, [7, 7]]),
        "adaptive_avg_pool2d 1x1 8x2048x7x7": ("adaptive_avg_pool2d", [head, [1, 1]]),
        "_adaptive_avg_pool2d 1x1 (same)": ("_adaptive_avg_pool2d", [head, [1, 1]]),
        "upsample_bilinear2d.vec 2x 8x64x56x56": ("upsample_bilinear2d.vec", [mid, None, False, [2.0, 2.0]]),
        "upsample_nearest2d.vec 2x 8x64x56x56": ("upsample_nearest2d.vec", [mid, None, [2.0, 2.0]]),
        "upsample_bicubic2d 8x64x56x56->112": ("upsample_bicubic2d", [mid, [112, 112], False]),
        # bfloat16 in bfloat16 steps, as torch (cpu/resample.c's lin_fwd_bf16)
        "upsample_bilinear2d bf16 8x64x56x56->112": ("upsample_bilinear2d", [rand(8, 64, 56, 56, dtype="bfloat16"),
                                                                              [112, 112], False]),
    }


def conv_cases():
    """aten::convolution in float32 at batch 8: ResNet-50's stem (7x7 stride 2 on 3x224x224), a 3x3 on
    64x56x56, a 1x1 256->64 on 56x56, a 3x3 stride 2 on 128x56x56, MobileNet's depthwise 3x3 on 32x112x112
    and 144x56x56 (stride 2) (target <= 1.25, i.e. >= 0.8x torch's speed; depthwise <= 1.0)"""
    shapes = {"conv 7x7/2 3->64 224": ([8, 3, 224, 224], [64, 3, 7, 7], 2, 3, 1),
              "conv 3x3 64->64 56": ([8, 64, 56, 56], [64, 64, 3, 3], 1, 1, 1),
              "conv 1x1 256->64 56": ([8, 256, 56, 56], [64, 256, 1, 1], 1, 0, 1),
              "conv 3x3/2 128->128 56": ([8, 128, 56, 56], [128, 128, 3, 3], 2, 1, 1),
              "conv dw 3x3 32 112": ([8, 32, 112, 112], [32, 1, 3, 3], 1, 1, 32),
              "conv dw 3x3/2 144 56": ([8, 144, 56, 56], [144, 1, 3, 3], 2, 1, 144)}
    return {name: ("convolution", [rand(*x), rand(*w), None, [st, st], [pd, pd], [1, 1], False, [0, 0], g])
            for name, (x, w, st, pd, g) in shapes.items()}


def embedding_cases():
    """embedding_bag of a 100000 x 128 float32 table, 8192 bags of 32 random indices, sum and mean
    (target <= 1.0)"""
    rng = np.random.default_rng(20261129)
    n, bags = 8192 * 32, 8192
    idx = {"dtype": "int64", "shape": [n], "data": rng.integers(0, 100000, n).tolist()}
    off = {"dtype": "int64", "shape": [bags], "data": list(range(0, n, 32))}
    w = rand(100000, 128)
    return {f"embedding_bag {m} 8192x32 of 100000x128": ("embedding_bag", [w, idx, off, False, k])
            for k, m in enumerate(("sum", "mean"))}


def dist_cases():
    """cdist of 4096x64 by 4096x64 at p=2 (torch's matrix-product path) and p=1, pdist of 2048x64, im2col
    (F.unfold) of 8x64x56x56 with a 3x3 kernel, padding 1 (target <= 1.0)"""
    a, b = rand(4096, 64), rand(4096, 64)
    return {"cdist p=2 4096x4096x64": ("cdist", [a, b, 2.0]),
            "cdist p=1 4096x4096x64": ("cdist", [a, b, 1.0]),
            "pdist p=2 2048x64": ("pdist", [rand(2048, 64), 2.0]),
            "im2col 3x3 p1 8x64x56x56": ("im2col", [rand(8, 64, 56, 56), [3, 3], [1, 1], [1, 1], [1, 1]])}


def core_cases():
    """issue 14's kernel families at 1e3, 1e6 and 1.6e7 float32 elements: unary (relu, exp, sigmoid, tanh,
    gelu, and gelu in its tanh form), binary (add, mul, pow with each exponent kind and with a tensor
    exponent), ternary (lerp with a tensor or a Scalar weight, addcmul, addcdiv), prelu, clamp with Scalar
    bounds, elu on normal data, nextafter, round(decimals=2), comparison (eq), reductions (sum of all, sum
    and amax over rows of 1000), softmax and log_softmax and layer_norm over rows of 1000 (softmax also
    bfloat16, and over dim 1 of [n / 1000, 5, 200]), clone, cat of two halves, index_select (row 0 every
    time: /v1/bench makes no random indices), and mm / bmm / addmm of square matrices with that many
    elements (target <= 1.0)"""
    cases = {}
    for n, tag in ((1000, "1e3"), (1_000_000, "1e6"), (16_000_000, "1.6e7")):
        x, y, rows = rand(n), rand(n), rand(n // 1000, 1000)
        for op in ("relu", "exp", "sigmoid", "tanh", "gelu"):
            cases[f"{op} {tag}"] = (op, [x])
        cases[f"gelu tanh {tag}"] = ("gelu", [x], {"approximate": "tanh"})
        cases[f"add {tag}"] = ("add.Tensor", [x, y])
        cases[f"mul {tag}"] = ("mul.Tensor", [x, y])
        for e in (2, 3, -2, 0.5, 2.5, -1.5):  # each of pow's exponent kinds (elementwise.c's g_pows)
            cases[f"pow {e} {tag}"] = ("pow.Tensor_Scalar", [x, e])
        cases[f"pow tensor {tag}"] = ("pow.Tensor_Tensor", [x, y])
        cases[f"lerp {tag}"] = ("lerp.Tensor", [x, y, rand(n)])
        cases[f"lerp scalar {tag}"] = ("lerp.Scalar", [x, y, 0.3])
        cases[f"addcmul {tag}"] = ("addcmul", [x, y, rand(n)], {"value": 0.5})
        cases[f"addcdiv {tag}"] = ("addcdiv", [x, y, rand(n)], {"value": 0.5})
        cases[f"prelu {tag}"] = ("prelu", [x, rand(1)])
        cases[f"clamp {tag}"] = ("clamp", [x, 0.2, 0.8])
        cases[f"nextafter {tag}"] = ("nextafter", [x, y])
        cases[f"round decimals {tag}"] = ("round.decimals", [x], {"decimals": 2})
        # elu on normal data (the ew family's uniform [0, 1) data never takes its exp)
        cases[f"elu randn {tag}"] = ("elu", [{"generate": "randn", "shape": [n], "dtype": "float32"}])
        cases[f"eq {tag}"] = ("eq.Tensor", [x, y])
        cases[f"sum {tag}"] = ("sum", [x])
        cases[f"sum rows {tag}"] = ("sum.dim_IntList", [rows, [-1]])
        cases[f"amax rows {tag}"] = ("amax", [rows, [-1]])
        cases[f"softmax rows {tag}"] = ("_softmax", [rows, -1, False])
        cases[f"log_softmax rows {tag}"] = ("_log_softmax", [rows, -1, False])
        brows = rand(n // 1000, 1000, dtype="bfloat16")
        cases[f"softmax rows bf16 {tag}"] = ("_softmax", [brows, -1, False])
        cases[f"log_softmax rows bf16 {tag}"] = ("_log_softmax", [brows, -1, False])
        cases[f"softmax dim 1 bf16 {tag}"] = ("_softmax", [rand(n // 1000, 5, 200, dtype="bfloat16"), 1, False])
        cases[f"layer_norm rows {tag}"] = ("native_layer_norm", [rows, [1000], rand(1000), rand(1000), 1e-5])
        cases[f"clone {tag}"] = ("clone", [x])
        cases[f"cat {tag}"] = ("cat", [[rand(n // 2000, 1000), rand(n // 2000, 1000)], 0])
        cases[f"index_select {tag}"] = ("index_select", [rows, 0, {"generate": "zeros", "shape": [n // 1000],
                                                                   "dtype": "int64"}])
        side = int(round(n ** 0.5))
        sq = rand(side, side)
        cases[f"mm {side}x{side}"] = ("mm", [sq, sq])
        cases[f"addmm {side}x{side}"] = ("addmm", [rand(side), sq, sq])
        b = int(round((n / 16) ** 0.5))
        cases[f"bmm 16x{b}x{b}"] = ("bmm", [rand(16, b, b), rand(16, b, b)])
    return cases


def select_cases():
    """the sorting, selecting, searching and indexing operators the scan family leaves out, at 1e6
    float32 elements (or 1000 rows of 1000): sort stable and descending, argsort, msort, kthvalue,
    topk of half and of 10 per row, median, median.dim, nanmedian.dim, mode of small integers and of
    rows, cummax, cumprod, logcumsumexp, unique_consecutive, searchsorted and bucketize into 1000
    boundaries, argmax, max.dim, nonzero, masked_select, take, index_add, flip, roll, isin,
    scatter_reduce amax (target <= 1.0)"""
    rng = np.random.default_rng(20261201)
    n = 1_000_000
    x, rows = rand(n), rand(1000, 1000)
    small = {"dtype": "int64", "shape": [n], "data": rng.integers(0, 1000, n).tolist()}
    bounds = {"dtype": "float32", "shape": [1000], "data": np.sort(rng.random(1000)).astype(np.float32).tolist()}
    mask = {"dtype": "bool", "shape": [n], "data": (rng.random(n) < 0.5).tolist()}
    idx = {"dtype": "int64", "shape": [n], "data": rng.integers(0, n, n).tolist()}
    return {
        "sort.stable 1e6": ("sort.stable", [x], {"stable": True, "dim": -1, "descending": False}),
        "sort descending 1e6": ("sort", [x, -1, True]),
        "argsort 1e6": ("argsort", [x]),
        "msort 1000x1000": ("msort", [rows]),
        "kthvalue 1e6": ("kthvalue", [x, n // 2]),
        "topk n/2 1e6": ("topk", [x, n // 2]),
        "topk 10 of rows 1000x1000": ("topk", [rows, 10]),
        "median 1e6": ("median", [x]),
        "median.dim 1e6": ("median.dim", [x, 0]),
        "nanmedian.dim rows 1000x1000": ("nanmedian.dim", [rows, 1]),
        "mode int64 in [0, 1000) 1e6": ("mode", [small]),
        "mode rows 1000x1000": ("mode", [rows]),
        "cummax 1e6": ("cummax", [x, 0]),
        "cumprod 1e6": ("cumprod", [x, 0]),
        "logcumsumexp 1e6": ("logcumsumexp", [x, 0]),
        "unique_consecutive int64 1e6": ("unique_consecutive", [small]),
        "searchsorted 1e6 into 1000": ("searchsorted.Tensor", [bounds, x]),
        "bucketize 1e6 into 1000": ("bucketize.Tensor", [x, bounds]),
        "argmax 1e6": ("argmax", [x]),
        "max.dim rows 1000x1000": ("max.dim", [rows, 1]),
        "nonzero bool 1e6": ("nonzero", [mask]),
        "masked_select 1e6": ("masked_select", [x, mask]),
        "take 1e6 at 1e6": ("take", [x, idx]),
        "index_add 1e6 at 1e6": ("index_add", [rand(n), 0, idx, x]),
        "flip 1e6": ("flip", [x, [0]]),
        "roll rows 1000x1000": ("roll", [rows, [3], [1]]),
        "isin int64 1e6 in 100": ("isin.Tensor_Tensor", [small, {"dtype": "int64", "shape": [100],
                                                                "data": list(range(0, 1000, 10))}]),
        "scatter_reduce amax 1e6 at 1e6": ("scatter_reduce.two", [rand(n), 0, idx, x, "amax"]),
    }


def rest_cases():
    """every other CPU kernel of ops.def, once each at a size a user would call it with: dtype
    conversion, where (three tensors, and a Scalar other), masked_fill, abs and neg, maximum, floor
    division, a comparison with a Scalar, mean, var and prod, cummin, nanmedian(), scatter (src,
    value, multiply), reflection and replication padding, nearest, linear and trilinear upsampling,
    3-d and adaptive max pooling, col2im, max_unpool2d, dot, addmv, baddbmm, inv, solve, cholesky,
    det, slogdet, lu_factor, solve_triangular, svd, lstsq, arange, linspace, fill_, copy_, equal,
    repeat_interleave, tril_indices, isin of a Scalar (target <= 1.0)"""
    rng = np.random.default_rng(20261202)
    n = 1_000_000
    x, y, rows = rand(n), rand(n), rand(1000, 1000)
    mask = {"dtype": "bool", "shape": [n], "data": (rng.random(n) < 0.5).tolist()}
    idx = {"dtype": "int64", "shape": [n], "data": rng.integers(0, n, n).tolist()}
    fmap = rand(8, 64, 56, 56)
    same = {"dtype": "float32", "shape": [n], "data": (rng.integers(0, 1000, n) / 8).tolist()}
    m = rng.random((256, 256))
    spd = {"dtype": "float32", "shape": [256, 256], "data": (m @ m.T + 256 * np.eye(256)).ravel().tolist()}
    sq = rand(512, 512)
    tri = {"dtype": "float32", "shape": [512, 512],
           "data": (np.triu(rng.random((512, 512))) + 512 * np.eye(512)).ravel().tolist()}
    pooled = {"dtype": "int64", "shape": [8, 64, 28, 28],
              "data": (np.arange(28)[:, None] * 2 * 56 + np.arange(28)[None, :] * 2)
              .repeat(8 * 64, 0).ravel().tolist()}
    return {
        "_to_copy f32->f64 1e6": ("_to_copy", [x], {"dtype": "float64"}),
        "_to_copy f32->bf16 1e6": ("_to_copy", [x], {"dtype": "bfloat16"}),
        "_to_copy f32->int32 1e6": ("_to_copy", [x], {"dtype": "int32"}),
        "where 1e6": ("where.self", [mask, x, y]),
        # a Scalar other: the form relu's backward takes (where(x > 0, g, 0))
        "where.ScalarOther 1e6": ("where.ScalarOther", [mask, x, 0.0]),
        "masked_fill 1e6": ("masked_fill.Scalar", [x, mask, 0.5]),
        "abs 1e6": ("abs", [x]),
        "neg 1e6": ("neg", [x]),
        "maximum 1e6": ("maximum", [x, y]),
        "div floor 1e6": ("div.Tensor_mode", [x, y], {"rounding_mode": "floor"}),
        "lt.Scalar 1e6": ("lt.Scalar", [x, 0.5]),
        "mean rows 1000x1000": ("mean.dim", [rows, [1]]),
        "var rows 1000x1000": ("var.correction", [rows, [1]], {"correction": 1}),
        "var 1e6": ("var.correction", [x, None], {"correction": 1}),
        "prod rows 1000x1000": ("prod.dim_int", [rows, 1]),
        "cummin 1e6": ("cummin", [x, 0]),
        "nanmedian 1e6": ("nanmedian", [x]),
        "scatter.src 1e6 at 1e6": ("scatter.src", [rand(n), 0, idx, x]),
        "scatter.value 1e6 at 1e6": ("scatter.value", [rand(n), 0, idx, 0.5]),
        "scatter.reduce multiply 1e6": ("scatter.reduce", [rand(n), 0, idx, x], {"reduce": "multiply"}),
        "reflection_pad2d 3 8x64x56x56": ("reflection_pad2d", [fmap, [3, 3, 3, 3]]),
        "replication_pad2d 3 8x64x56x56": ("replication_pad2d", [fmap, [3, 3, 3, 3]]),
        "upsample_nearest2d 8x64x56x56->112": ("upsample_nearest2d", [fmap, [112, 112]]),
        "upsample_linear1d 64x512x1000->2000": ("upsample_linear1d", [rand(64, 512, 1000), [2000], False]),
        "upsample_trilinear3d 2x16x16x28x28->2x": ("upsample_trilinear3d",
                                                   [rand(2, 16, 16, 28, 28), [32, 56, 56], False]),
        "max_pool3d 3 s2 2x16x16x56x56": ("max_pool3d_with_indices", [rand(2, 16, 16, 56, 56), [3, 3, 3],
                                                                      [2, 2, 2], [1, 1, 1]]),
        "avg_pool3d 2 2x16x16x56x56": ("avg_pool3d", [rand(2, 16, 16, 56, 56), [2, 2, 2]]),
        "_adaptive_avg_pool3d 2x16x16x56x56->4": ("_adaptive_avg_pool3d", [rand(2, 16, 16, 56, 56), [4, 4, 4]]),
        "adaptive_max_pool2d 8x64x56x56->7": ("adaptive_max_pool2d", [fmap, [7, 7]]),
        "col2im 3x3 p1 8x576x3136": ("col2im", [rand(8, 576, 3136), [56, 56], [3, 3], [1, 1], [1, 1], [1, 1]]),
        "max_unpool2d 8x64x28x28->56": ("max_unpool2d", [rand(8, 64, 28, 28), pooled, [56, 56]]),
        "dot 1e6": ("dot", [x, y]),
        "addmv 1000x1000": ("addmv", [rand(1000), rows, rand(1000)]),
        "baddbmm 16x256x256": ("baddbmm", [rand(16, 256, 256), rand(16, 256, 256), rand(16, 256, 256)]),
        "linalg_inv_ex 512": ("linalg_inv_ex", [sq]),
        "_linalg_solve_ex 512": ("_linalg_solve_ex", [sq, rand(512, 64)]),
        "linalg_cholesky_ex 256": ("linalg_cholesky_ex", [spd]),
        "_linalg_det 512": ("_linalg_det", [sq]),
        "_linalg_slogdet 512": ("_linalg_slogdet", [sq]),
        "linalg_lu_factor_ex 512": ("linalg_lu_factor_ex", [sq]),
        "linalg_solve_triangular 512": ("linalg_solve_triangular", [tri, rand(512, 64)], {"upper": True}),
        "_linalg_svd 256": ("_linalg_svd", [rand(256, 256)]),
        "linalg_lstsq 1024x256": ("linalg_lstsq", [rand(1024, 256), rand(1024, 16)]),
        "arange 1e6": ("arange", [n]),
        "linspace 1e6": ("linspace", [0.0, 1.0, n]),
        "fill_ 1e6": ("fill_.Scalar", [x, 0.5]),
        "copy_ 1e6": ("copy_", [x, y]),
        "equal 1e6, differing": ("equal", [x, y]),
        "equal 1e6, equal": ("equal", [same, same]),
        "repeat_interleave 1e5 repeats of 0..19": ("repeat_interleave.Tensor",
                                                   [{"dtype": "int64", "shape": [100000],
                                                     "data": rng.integers(0, 20, 100000).tolist()}]),
        "tril_indices 2000": ("tril_indices", [2000, 2000]),
        "isin.Tensor_Scalar 1e6": ("isin.Tensor_Scalar", [x, 0.5]),
    }


def backward_cases():
    """the backward kernels a training step reaches, at ResNet and loss sizes: convolution_backward (3x3
    64->64 on 8x64x56x56, all three gradients), max_pool2d, avg_pool2d, adaptive_avg_pool2d, bilinear and
    nearest upsampling, batch_norm (train) and group_norm backward, nll_loss, binary_cross_entropy and glu
    backward, cdist and pdist backward (target <= 1.0)"""
    rng = np.random.default_rng(20261203)
    x, g112 = rand(8, 64, 56, 56), rand(8, 64, 112, 112)
    zeros_i = {"generate": "zeros", "shape": [8, 64, 56, 56], "dtype": "int64"}
    t = {"dtype": "int64", "shape": [8192], "data": rng.integers(0, 1000, 8192).tolist()}
    one = {"dtype": "float32", "shape": [], "data": [1.0]}
    c1, c2 = rand(2048, 64), rand(2048, 64)
    return {
        "convolution_backward 3x3 64->64 56": ("convolution_backward",
                                               [x, x, rand(64, 64, 3, 3), [64], [1, 1], [1, 1], [1, 1], False,
                                                [0, 0], 1, [True, True, True]]),
        "max_pool2d_with_indices_backward 3x3 s2 112": ("max_pool2d_with_indices_backward",
                                                        [x, g112, [3, 3], [2, 2], [1, 1], [1, 1], False, zeros_i]),
        "avg_pool2d_backward 2x2 112": ("avg_pool2d_backward", [x, g112, [2, 2], [2, 2], [0, 0], False, True, None]),
        "_adaptive_avg_pool2d_backward 8x2048x7x7": ("_adaptive_avg_pool2d_backward",
                                                     [rand(8, 2048, 1, 1), rand(8, 2048, 7, 7)]),
        "upsample_bilinear2d_backward 56->112": ("upsample_bilinear2d_backward",
                                                 [g112, [112, 112], [8, 64, 56, 56], False]),
        "upsample_nearest2d_backward 56->112": ("upsample_nearest2d_backward", [g112, [112, 112], [8, 64, 56, 56]]),
        "native_batch_norm_backward train 8x64x56x56": ("native_batch_norm_backward",
                                                        [x, x, rand(64), rand(64), rand(64), rand(64), rand(64), True,
                                                         1e-5, [True, True, True]]),
        "native_group_norm_backward 32 8x256x56x56": ("native_group_norm_backward",
                                                      [rand(8, 256, 56, 56), rand(8, 256, 56, 56), rand(8, 32),
                                                       rand(8, 32), rand(256), 8, 256, 3136, 32, [True, True, True]]),
        "nll_loss_backward mean 8192x1000": ("nll_loss_backward",
                                             [{"dtype": "float32", "shape": [], "data": [1.0]},
                                              {"generate": "randn", "shape": [8192, 1000], "dtype": "float32"}, t, None,
                                              1, -100, one]),
        "binary_cross_entropy_backward 1.6e7": ("binary_cross_entropy_backward",
                                                [one, rand(16_000_000), rand(16_000_000), None, 1]),
        "glu_backward 4096x8192": ("glu_backward", [rand(4096, 4096), rand(4096, 8192), -1]),
        "_cdist_backward p=2 2048x2048x64": ("_cdist_backward", [rand(2048, 2048), c1, c2, 2.0, rand(2048, 2048)]),
        "_pdist_backward p=2 1024x64": ("_pdist_backward", [rand(1024 * 1023 // 2), rand(1024, 64), 2.0,
                                                            rand(1024 * 1023 // 2)]),
    }


# --family NAME: explicit cases, NAME -> (operator, arguments[, keyword
# arguments]), tensors as /v1/bench's generate specs (torch builds the same
# from them)
FAMILIES = {"core": core_cases, "norm": norm_cases, "attention": attention_cases, "loss": loss_cases, "pool": pool_cases,
            "conv": conv_cases, "embedding": embedding_cases, "dist": dist_cases, "select": select_cases,
            "rest": rest_cases, "backward": backward_cases}
TARGETS = {"scan": 1.5, "conv": 1.25}  # server / torch; 1.0 elsewhere


def http_client(url):
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
    import opdispatch

    return opdispatch.Client(url, transport="binary", timeout=1800)


def as_array(spec, rng):
    """a /v1/bench tensor spec as the numpy array a user would send"""
    if not isinstance(spec, dict):
        return spec
    if "data" in spec:
        return np.asarray(spec["data"], dtype=spec["dtype"]).reshape(spec["shape"])
    shape, dt = spec["shape"], spec["dtype"]
    kind = spec.get("generate", "rand")
    a = (rng.random(shape) if kind == "rand" else rng.standard_normal(shape) if kind == "randn"
         else np.zeros(shape) if kind == "zeros" else np.ones(shape))
    return a.astype(dt)


def time_http(client, op, args, kw, iterations, device):
    """median microseconds of one binary POST /v1/ops/<op> round trip (encoding and decoding included)"""
    rng = np.random.default_rng(0)
    vals = [[as_array(v, rng) for v in a] if isinstance(a, list) and a and isinstance(a[0], dict)
            else as_array(a, rng) for a in args]
    client.call(op, *vals, device=device, **kw)  # warm-up
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        client.call(op, *vals, device=device, **kw)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--opdispatchd", required=True)
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3,
                   help="paired rounds (torch, then the server) per case; the ratio is their median")
    p.add_argument("--pause", type=float, default=0.15,
                   help="seconds between turns: OpenBLAS's idle threads, torch's and the server's, "
                        "poll for 2^28 cycles (0.117 s at 2.3 GHz) after a call, and would run in the other's turn")
    p.add_argument("--round-seconds", type=float, default=3.0,
                   help="a case whose first round takes longer gets that one round only")
    p.add_argument("--seed", type=int, default=20261126)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--family", default="scan", choices=("scan", "ew") + tuple(FAMILIES),
                   help="scan: sorting, scans and indexing (target <= 1.5); ew: every per-element "
                        "operator of ops.def (its CPU kernel is od_cpu_ew; target <= 1.0); "
                        + "; ".join(f"{k}: {v.__doc__}" for k, v in FAMILIES.items()))
    p.add_argument("--ops", default="", help="ew: only operators whose name contains this")
    p.add_argument("--http", action="store_true",
                   help="also time each call end to end as a user makes it: POST /v1/ops/<op> from the "
                        "Python client (clients/python) with binary tensors both ways, the median round "
                        "trip, against torch's kernel time (the issue's 'in the server over binary')")
    a = p.parse_args()

    rng = np.random.default_rng(a.seed)
    idx = {"dtype": "int64", "shape": [a.n], "data": rng.integers(0, a.n, a.n).tolist()}
    gen = {"generate": "rand", "shape": [a.n], "dtype": "float32"}
    zeros = {"generate": "zeros", "shape": [a.n], "dtype": "float32"}
    mat = {"generate": "rand", "shape": [1000, 1000], "dtype": "float32"}
    cases = {
        "sort": ("sort", [gen, -1, False]),
        "topk": ("topk", [gen, 100]),
        "cumsum": ("cumsum", [gen, 0]),
        "gather": ("gather", [gen, 0, idx]),
        "scatter_add": ("scatter_add", [zeros, 0, idx, gen]),
        "sort 1000x1000": ("sort", [mat, -1, False]),
        "cumsum 1000x1000": ("cumsum", [mat, -1]),
    }
    port = free_port()
    # attention at L = 2048 runs for minutes on a loaded 2-core machine: no call deadline
    extra = ["--max-call-seconds", "0"] if a.family == "attention" else []
    srv = subprocess.Popen([a.opdispatchd, "--port", str(port), "--enable-bench"] + extra,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    torch_proc = None
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                if requests.get(url + "/v2/health/ready", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.1)
        ew_args = {}  # ew: each case's arguments as torch builds them
        if a.family == "ew":
            cases, ew = ew_cases(url, a.n, a.ops)
            ew_args = dict(ew)
        if a.family in FAMILIES:
            cases = {k: v for k, v in FAMILIES[a.family]().items() if a.ops in k}
        target = TARGETS.get(a.family, 1.0)
        # torch's OpenBLAS on the core the server runs (tools/torch_quiet.c, kernels/cpu/od_blas_core.h):
        # on a CPU newer than OpenBLAS 0.3.21 torch alone would run its Prescott (SSE3) kernels
        quiet = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "tools", "libtorch_quiet.so")
        torch_env = dict(os.environ, **({"LD_PRELOAD": quiet} if os.path.exists(quiet) else {}))

        torch_proc = subprocess.Popen([TORCH_PYTHON, "-c", TORCH_TIMER, str(a.n), str(a.iterations),
                                       str(a.threads), str(a.seed), a.device, a.family],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=torch_env, text=True)

        def torch_time(spec):
            torch_proc.stdin.write(json.dumps(spec) + "\n")
            torch_proc.stdin.flush()
            line = torch_proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the torch timer exited ({torch_proc.wait()})")
            return json.loads(line)

        def server_time(op, args, kw):
            # as many warm-up calls as timed ones, torch's too: the server has sat idle while torch ran,
            # and on these VMs the first few ms of calls after an idle second run up to 2x slower (a
            # plain C loop of OpenBLAS trsm calls too); with one warm-up the server paid that, torch not
            req = {"op": op, "args": args, "kwargs": kw, "device": a.device, "iterations": a.iterations,
                   "warmup": min(a.iterations, 1000),
                   "max_seconds": 1800}  # /v1/bench's default budget is 10 s: 40 calls of a 4000^2 mm take 20
            r = requests.post(url + "/v1/bench", json=req, timeout=1800)
            r.raise_for_status()
            return r.json()["kernel_us"]["median"]

        # Each case is timed in turns, torch's right before the server's, in up to --rounds paired
        # rounds, and the ratio printed is the median of the rounds' ratios: these machines' speed
        # drifts by 2x over tens of seconds, and a burst of load in one side's turn moved a single
        # ratio by 1.5x. A case whose round takes more than --round-seconds gets one round, whatever
        # its ratio, so the run stays bounded (a 4000^2 mm round takes a minute).
        size = "the sizes named" if a.family in FAMILIES else f"{a.n} float32 elements"
        print(f"{size} on {a.device}, {a.threads} threads, median of {a.iterations} calls each, "
              f"median ratio of up to {a.rounds} paired rounds; torch {TORCH_PYTHON}")
        client = http_client(url) if a.http else None
        print(f"{'operator':<34} {'server us':>10} {'torch us':>10} {'ratio':>7}  target <= {target}"
              + (f"  {'HTTP us':>10} {'HTTP/torch':>10}" if client else ""))
        worst, missed = 0.0, 0
        for name, c in cases.items():
            op, args, kw = c[0], c[1], case_kwargs(c)
            spec = ({"spec": [[name, op, args, kw]]} if a.family in FAMILIES
                    else [[name, ew_args[name]]] if ew_args else {"scan": name})
            rounds = []  # (server us, torch us)
            while len(rounds) < a.rounds:
                time.sleep(a.pause)
                t = torch_time(spec)
                t_us = t[name] if name in t else t[f"{op} {name}"]
                time.sleep(a.pause)
                rounds.append((server_time(op, args, kw), t_us))
                if sum(rounds[0]) * 2 * a.iterations > a.round_seconds * 1e6:
                    break
            us, t_us = (float(np.median([r[i] for r in rounds])) for i in (0, 1))
            ratio = float(np.median([s_ / t_ for s_, t_ in rounds]))
            worst = max(worst, ratio)
            missed += ratio > target
            line = f"{name:<34} {us:>10.0f} {t_us:>10.0f} {ratio:>7.2f}  {'ok' if ratio <= target else 'MISSED'}"
            if client:
                http_us = time_http(client, op, args, kw, a.iterations, a.device)
                line += f"  {http_us:>10.0f} {http_us / t_us:>10.2f}"
            print(line, flush=True)
        print(f"worst ratio {worst:.2f}; {missed} of {len(cases)} above {target}")
    finally:
        if torch_proc:
            torch_proc.stdin.close()  # its loop ends at end of input
            try:
                torch_proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                torch_proc.kill()
                torch_proc.wait()
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=30)


if __name__ == "__main__":
    main()
