#!/usr/bin/env python3
"""Randomized differential test of opdispatchd against PyTorch 1.13.

The operators and their schemas come from the server itself (GET /v1/ops,
GET /v1/ops/{op}), so an operator added to kernels/ops.def is covered with no
change here. Calls are generated from each schema, sent to the server, and run
as torch.ops.aten.<name>.<overload> in a long-lived child process on Debian's
/usr/bin/python3 (its torch is built against Debian's numpy, not the
virtualenv's); the answers must agree. README.md in this folder says what is
compared, how to replay a run and what the allowlist accepts.

The child is this file too (--torch-worker), so the module-level imports stay
within the standard library and numpy, which both interpreters have.
"""

import argparse
import json
import math
import os
import pathlib
import random
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
TORCH_PYTHON = "/usr/bin/python3"
ALLOWLIST = pathlib.Path(__file__).with_name("allowlist.txt")

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]
FLOATS = ("float32", "float64", "float16", "bfloat16")
LOW_PRECISION = ("float32", "float16", "bfloat16")
OIP = {"float32": "FP32", "float64": "FP64", "float16": "FP16", "bfloat16": "BF16", "int64": "INT64",
       "int32": "INT32", "int16": "INT16", "int8": "INT8", "uint8": "UINT8", "bool": "BOOL"}
OIP_DTYPE = {v: k for k, v in OIP.items()}
NP_DTYPE = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64,
            "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}
MEMORY_FORMATS = ["contiguous_format", "preserve_format", "channels_last", "channels_last_3d"]
# A schema names a string argument's default at most, so its values come from
# this vocabulary of aten's string arguments (rounding_mode, approximate, ...).
STRINGS = ["none", "tanh", "trunc", "floor", "mean", "sum", "bogus"]
# scatter's reduce (old and new names) and a bad one
REDUCE_STRINGS = ["add", "multiply", "sum", "prod", "mean", "amax", "amin", "bogus"]
# Operators whose results are random, and our own namespace's references.
NONDETERMINISTIC = re.compile(r"^(rand|normal|bernoulli|uniform|multinomial|poisson|exponential|geometric|"
                              r"cauchy|log_normal|rrelu)|dropout")
# Operators whose output values are whatever memory held: dtype and shape only
# (resize_ keeps self's elements, and what it grows into is uninitialized in torch).
UNDEFINED_VALUES = re.compile(r"^(empty|new_empty|resize_)")


def torch_lstsq_undefined(c, t, outs):
    """torch 1.13's CPU linalg_lstsq with gelsy (its default driver) hands
    LAPACK one pivot array it never initialises again, so on a matrix that is
    rank-deficient with or without column pivoting its rank and solution
    vary from run to run (test_linalg.py checks lstsq's values on its own
    inputs): dtype and shape only where torch's rank, or the server's (which
    never pivots, the answer torch gives whenever the array holds old
    pivots), is short of full."""
    if not c.op.startswith("linalg_lstsq") or len(t.get("outputs", [])) < 3:
        return False
    a = next(c.tensors(), None)
    full = min(a.shape[-2:]) if a is not None and len(a.shape) >= 2 else 0
    ranks = (t["outputs"][2].get("data") or []) + ((outs[2].get("data") or []) if len(outs) > 2 else [])
    return any(int(r) < full for r in ranks)


def torch_lstsq_pivot_signs(c):
    """The same pivot array orders the operations behind each zero of a gelsy
    solution, so the sign of a zero varies from run to run as well, at full
    rank too (a zero right-hand side: -0.0 in rows that change from one call
    to the next in one torch process): there zeros compare without sign."""
    if not c.op.startswith("linalg_lstsq"):
        return False
    return next((a[2] for a in c.all_args() if a[0] == "driver"), None) in (None, "gelsy")


def unsigned_zeros(data):
    return [0.0 if v == 0 else v for v in data]


def embedding_bag_defect(c):
    """embedding_bag calls whose torch 1.13 CPU answer is no reference:
    unsorted offsets (fbgemm reads bag ends out of order; bool offsets
    promote to the indices' type and count too), include_last_offset
    with offsets[-1] < len(indices) in mode 'max' (it writes past its
    max_indices block) and the same on the forward-only path, 2-D indices
    or offsets (ATen reads them as flat without checking; the server refuses
    both: torch.nn.functional.embedding_bag flattens 2-D input), and views
    as indices or offsets of _embedding_bag and _embedding_bag_forward_only,
    which read their storage in memory order (embedding_bag makes them
    contiguous first, and equals the server)."""
    if not re.match(r"(_embedding_bag(_forward_only)?|embedding_bag)(\.|$)", c.op):
        return None
    a = {name: v for name, _, v in c.all_args()}
    idx, off = a.get("indices"), a.get("offsets")
    if not isinstance(idx, Tens) or not isinstance(off, Tens):
        return None
    iv, ov = idx.logical(), off.logical()
    if iv.ndim != 1 or ov.ndim != 1:
        return "embedding_bag with indices or offsets not 1-D (torch reads them as flat, unchecked)"
    if c.op.startswith("_embedding_bag") and (getattr(idx, "views", ()) or getattr(off, "views", ())):
        return "_embedding_bag(_forward_only) with strided indices or offsets (torch reads their storage in order)"
    if ov.dtype.kind in "iub" and ov.size > 1 and np.any(np.diff(ov.astype(np.int64)) < 0):
        return "embedding_bag with decreasing offsets (torch's fast path reads bags out of order)"
    if a.get("include_last_offset") is True and ov.size and ov.dtype.kind in "iub" and int(ov[-1]) < iv.size:
        return "embedding_bag with include_last_offset and offsets[-1] < len(indices) (torch overruns max_indices)"
    if a.get("mode") not in (0, 1, 2):
        return "embedding_bag with a mode outside 0-2 (torch segfaults)"
    return None


def unspecified_output(c, i):
    """Outputs PyTorch 1.13 leaves unspecified: _scaled_dot_product_attention's
    weights without need_attn_weights ("otherwise, the second return value is
    unspecified"; its CUDA flash path returns none), which the server's fused
    kernel returns empty while torch's CPU math path fills them."""
    if re.match(r"(_embedding_bag(_forward_only)?|embedding_bag)(\.|$)", c.op) and i > 0:
        return embedding_bag_unspecified(c, i)
    if i != 1 or not re.match(r"_scaled_dot_product_attention(\.|_forward|$)", c.op):
        return False
    return not any(name == "need_attn_weights" and v is True for name, _, v in c.all_args())


def embedding_bag_unspecified(c, i):
    """embedding_bag's outputs 2-3 where torch 1.13's CPU kernel leaves them
    mode-dependent or uninitialised (test_bicubic_bag.py says the same):
    bag_size and max_indices in mode 'sum' (bag_size zeros or, forward-only,
    uninitialised), and of _embedding_bag_forward_only with
    include_last_offset (sized by offsets, the last element uninitialised).
    The server sizes these by the bags. offset2bag (output 1) is compared:
    empty on torch's 'sum' fast path, as the server's."""
    a = {name: v for name, _, v in c.all_args()}
    mode = a.get("mode", 0)
    if not isinstance(mode, int):
        return True
    if mode == 0:
        return i >= 2
    return i >= 2 and c.op.startswith("_embedding_bag_forward_only") and a.get("include_last_offset") is True


def random_dropout(c):
    """_scaled_dot_product_attention(_forward, _math) with dropout_p > 0: torch
    draws a dropout mask (a random answer); the server runs no random
    operators and refuses such a call with a 4xx naming dropout_p."""
    if not c.op.startswith("_scaled_dot_product_attention"):
        return False
    return any(name == "dropout_p" and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
               for name, _, v in c.all_args())


def cxx_undefined(c, args, t):
    """Where torch 1.13's answer comes from C++ undefined behaviour in its
    integer kernels (a shift count outside [0, width), abs of the minimum,
    signed overflow): the reason, else None. The server defines these as
    PyTorch 2 does, or by wrapping (kernels/od_math.h)."""
    name = c.op.split(".")[0].rstrip("_")
    if name not in ("bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm") or len(args) < 2:
        return None
    dt = t["outputs"][0]["dtype"]
    if dt not in ("int64", "int32", "int16", "int8", "uint8"):
        return None
    width = 64 if dt == "int64" else 32  # C++ promotes the narrower types to int

    def values(v):
        if isinstance(v, Tens):
            return [int(x) for x in np.asarray(v.logical()).reshape(-1)]
        return [int(v)] if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else []
    a, b = values(args[0]), values(args[1])
    if name.endswith("shift"):
        wrapped = [x - (1 << 64) if x >= 1 << 63 else x for x in ((y % (1 << 64)) for y in b)]
        if any(x < 0 or x >= width for x in b + wrapped):
            return f"a shift count outside [0, {width}) (undefined in C++; PyTorch 2 defines it)"
        return None
    lo = -(1 << (width - 1))
    if width == 64 or dt == "int32":
        if any(x <= lo or x >= -lo for x in a + b):
            return "abs of an integer type's minimum (undefined in C++)"
        if name == "lcm" and a and b and max(map(abs, a)) * max(map(abs, b)) >= -lo:
            return "lcm overflowing its integer type (undefined in C++)"
    return None


def conv_defect(c, t, tens):
    """torch 1.13's convolution defects (where it answers, and where it raises)."""
    if not CONV_OPS.match(c.op) or not tens:
        return None
    x = tens[1] if c.op.startswith("convolution_backward") and len(tens) > 1 else tens[0]
    if x.dtype == "bfloat16" and (c.op.startswith("conv_transpose") or
                                  any(n == "transposed" and v is True for n, _, v in c.args)):
        # oneDNN runs the CPU bfloat16 transposed convolution as a plain one
        # (its shape and values); the server computes the transposed one
        return "bfloat16 transposed convolution (torch's oneDNN path ignores transposed)"
    if c.op.startswith("convolution_backward") and len(t.get("outputs", ())) == 3 and \
            "data" in t["outputs"][1] and any(n == "output_mask" and isinstance(v, list) and len(v) == 3 and
                                              not v[1] for n, _, v in c.args):
        # oneDNN computes the weight gradient with the bias gradient and torch
        # returns it though output_mask did not ask (4-d for a conv1d); the
        # server returns None there, as the mask says
        return "convolution_backward returning a weight gradient output_mask did not ask for"
    if "view size is not compatible" in t.get("error", "") and math.prod(x.shape) == 0:
        # its "Empty" backend views a non-contiguous weight with view(-1)
        return "convolution of an empty input with a non-contiguous weight (torch's weight.view(-1) fails)"
    return None


def dist_defect(c, args, tens):
    """The native distance kernels read their grad / cdist / pdist as the sizes
    the inputs imply without checking them, _pdist_forward's vectorised tail
    takes pow(0, p) of its padding lanes when p < 0, and its pair walk runs
    to self's numel (pdist refuses both: negative p, more than 2 dims); the
    server refuses such sizes and computes the n x m pairs' plain sums."""
    op = c.op.split(".")[0]
    shp = [list(t.logical().shape) for t in tens]
    if op == "_cdist_backward" and len(shp) == 4 and len(shp[1]) >= 2 and len(shp[2]) >= 2:
        try:
            batch = list(np.broadcast_shapes(tuple(shp[1][:-2]), tuple(shp[2][:-2])))
        except ValueError:
            return None
        want = batch + [shp[1][-2], shp[2][-2]]
        if shp[0] != want or shp[3] != want:
            return "_cdist_backward with grad or cdist not of the result's size (torch reads past them)"
    if op == "_pdist_backward" and len(shp) == 3 and len(shp[1]) >= 2:
        n = shp[1][0]
        combs = n * (n - 1) // 2
        if combs > 0 and (int(np.prod(shp[0])) != combs or int(np.prod(shp[2])) != combs):
            return "_pdist_backward with grad or pdist not of n(n-1)/2 elements (torch reads past them)"
    if op == "_pdist_forward" and shp and len(shp[0]) > 2 and int(np.prod(shp[0][2:])) != 1:
        return "_pdist_forward of more than 2 dims (torch walks its pairs up to self's numel, past n x m)"
    if op == "_pdist_forward" and len(args) >= 2 and isinstance(args[1], (int, float)) and args[1] < 0:
        return "_pdist_forward with a negative p (its vectorised tail raises the zero padding to it)"
    return None


def upsample_overrun(c):
    """upsample_linear1d / bilinear2d / trilinear3d (and their backward) with
    an output size and scales such that the last output's source index,
    (o + 0.5) / scale - 0.5, truncates past the input: torch 1.13 reads (the
    backward writes) outside the tensor there; later versions clamp the
    index to the input, as the server does."""
    name = c.op.split(".")[0]
    if name not in ("upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d",
                    "upsample_linear1d_backward", "upsample_bilinear2d_backward",
                    "upsample_trilinear3d_backward") or c.op.endswith(".vec"):
        return False
    a = {n: v for n, _, v in c.all_args()}
    k = {"1d": 1, "2d": 2, "3d": 3}[name.split("_")[1][-2:]]
    if a.get("align_corners") is not False:
        return False
    out = a.get("output_size")
    if name.endswith("_backward"):
        ins = a.get("input_size")
        ins = ins[-k:] if isinstance(ins, list) and len(ins) >= k else None
    else:
        x = a.get("self", a.get("input"))
        ins = list(x.logical().shape[-k:]) if isinstance(x, Tens) and len(x.logical().shape) >= k else None
    scales = [a.get(n) for n in (("scales",) if k == 1 else ("scales_h", "scales_w") if k == 2
                                 else ("scales_d", "scales_h", "scales_w"))]
    if not isinstance(out, list) or len(out) != k or ins is None:
        return False
    for o, i, sc in zip(out, ins, scales):
        if isinstance(sc, (int, float)) and not isinstance(sc, bool) and sc > 0 and isinstance(o, int) and \
                isinstance(i, int) and o > 0 and int((o - 0.5) / sc - 0.5) > i - 1:
            return True
    return False


def torch_bug(c, t):
    """Why torch 1.13's answer to case c is no reference, or None. Each is a
    torch defect (most fixed in later versions); the server answers 4xx
    there, or the value the operator defines."""
    args = [v for _, _, v in c.args] + [v for _, v in c.kwargs.values()]
    if c.op.startswith(("reflection_pad1d", "reflection_pad2d")) and len(args) >= 2 and \
            isinstance(args[1], list) and len(args[1]) < (2 if "1d" in c.op else 4):
        # raised or not, torch's answer depends on the memory after the list
        return "reflection_pad1d/2d with a short padding list (torch reads past the list)"
    if c.op.split(".")[0] == "addbmm_":
        a = {name: v for name, _, v in c.all_args()}
        s, b1, b2, beta = a.get("self"), a.get("batch1"), a.get("batch2"), a.get("beta", 1)
        if all(isinstance(x, Tens) for x in (s, b1, b2)) and s.logical().ndim == 0 and \
                len(b1.logical().shape) == 3 and len(b2.logical().shape) == 3 and \
                b1.logical().shape[1] * b2.logical().shape[2] == 1 and beta not in (0, False):
            # self is resized to [1, 1] in place and then copied from its own expanded view,
            # whose strides differ: copy_'s overlap check calls that a partial overlap
            return "addbmm_ of a 0-dim self into a one-element result (torch's copy_ refuses self's expanded view)"
    if c.op.split(".")[0] in ("adaptive_max_pool2d_backward", "adaptive_max_pool3d_backward"):
        a = {name: v for name, _, v in c.all_args()}
        g, ix = a.get("grad_output"), a.get("indices")
        if isinstance(g, Tens) and isinstance(ix, Tens) and \
                int(np.prod(ix.logical().shape)) < int(np.prod(g.logical().shape)):
            # the CPU kernel reads one index per grad_output element, unchecked
            return "adaptive max pool backward with fewer indices than grad_output elements (torch reads past them)"
    if c.op.split(".")[0] == "addmv":
        a = {name: v for name, _, v in c.all_args()}
        s, m, beta = a.get("self"), a.get("mat"), a.get("beta", 1)
        if isinstance(s, Tens) and isinstance(m, Tens) and len(m.logical().shape) == 2 and \
                0 in m.logical().shape and beta not in (0, False) and \
                list(s.logical().shape) != [m.logical().shape[0]]:
            # an empty mat: mul_out(result, self, beta) resizes the result to self's shape ([1] for [n])
            return "addmv with an empty mat and a self broadcast to its rows (torch returns self's shape)"
    tens = [a for a in args if isinstance(a, Tens)]
    conv = conv_defect(c, t, tens)
    if conv:
        return conv
    bag = embedding_bag_defect(c)  # raised or not: what torch read was not the argument
    if bag:
        return bag
    if upsample_overrun(c):
        return "linear upsampling whose scales put a source index past the input (torch reads past it)"
    if "outputs" not in t:
        return None
    if c.op.split(".")[0] in ("addmv_", "baddbmm_") and tens and \
            any(op == "expand" for op, _ in getattr(tens[0], "views", ())):
        # torch 1.13 skips its internal-overlap check there (addmm_ and addr_ make it) and
        # accumulates every product into the shared memory; the server refuses, as torch's others
        return "addmv_/baddbmm_ into an expanded self (torch skips its overlap check and accumulates into it)"
    if c.op.split(".")[0] == "narrow_copy" and len(args) >= 4 and tens and getattr(tens[0], "views", ()) and \
            all(isinstance(a, int) and not isinstance(a, bool) for a in args[1:4]):
        shape = list(tens[0].logical().shape)
        d = args[1] + len(shape) if args[1] < 0 else args[1]
        if 0 <= d < len(shape) and args[2] in (0, -shape[d]) and args[3] == shape[d]:
            # torch.narrow_copy(x.t(), 0, 0, x.shape[1]) returns x's storage order, not x.t()'s values
            return "narrow_copy of a strided view over its whole dim (torch copies the storage in memory order)"
    if c.op.startswith("index_select") and len(tens) >= 2 and tens[0].shape == [] and \
            int(np.prod(tens[1].logical().shape)) != 1:
        return "index_select of a 0-dim tensor with an index of length != 1 (torch reads past the index)"
    if any(s < 0 for o in t["outputs"] for s in o.get("shape", [])):
        return "a negative size in torch's output shape"
    if c.op.split(".")[0] in ("tril", "triu", "tril_", "triu_") and len(args) >= 2 and \
            isinstance(args[1], int) and abs(args[1]) > 1 << 62:
        return "tril/triu with a diagonal near the int64 limits (torch's index arithmetic overflows)"
    if c.op.startswith("smooth_l1_loss_backward") and tens and tens[0].dtype not in FLOATS:
        # on 64 contiguous uint8 elements 20 differ from the same call with a
        # non-contiguous target: the vectorized loop wraps x - y and compares
        # with beta truncated to the dtype, the scalar one does neither
        return "smooth_l1_loss_backward on an integer dtype (torch's vectorized and scalar loops disagree)"
    if c.op.startswith("huber_loss_backward") and len(args) >= 5 and isinstance(args[4], (int, float)) and \
            args[4] < 0:
        # a negative delta (huber_loss itself refuses it) meets both x <= -delta and
        # x >= delta: the scalar loop takes the first, the vectorized one sign(x) * delta
        # when |x| > delta, so an element's sign depends on the tensor's length (seed 7168)
        return "huber_loss_backward with a negative delta (torch's vectorized and scalar loops disagree)"
    if c.op.split(".")[0] in ("logit", "logit_") and len(args) >= 2 and isinstance(args[1], (int, float)) and \
            not isinstance(args[1], bool) and args[1] > 0.5 and tens and getattr(tens[0], "views", ()):
        # eps > 0.5 puts lo above hi: the vectorized clamp min(max(x, lo), hi) gives hi, the scalar
        # x < lo ? lo : ... gives lo; torch runs the vectorized one on a transposed tensor's memory
        # order, the server (as torch on other strided views) the scalar one
        return "logit with eps > 0.5 on a view (torch's vectorized and scalar clamps disagree when lo > hi)"
    if c.op.split(".")[0] in ("pixel_shuffle", "pixel_unshuffle") and len(tens) >= 1 and len(args) >= 2 and \
            isinstance(args[1], int) and len(tens[0].shape) >= 3:
        ch, h, w = tens[0].shape[-3:]
        r = args[1]
        if max(r * r, ch * r * r, h * r, w * r) >= 1 << 63:
            return "pixel_shuffle/unshuffle whose output sizes overflow int64 (torch answers the wrapped shape)"
    if c.op.split(".")[0] in ("softmax", "log_softmax", "_softmax", "_log_softmax") and tens and \
            t["outputs"] and t["outputs"][0].get("dtype") == "bfloat16" and len(args) >= 2 and \
            isinstance(args[1], int) and not isinstance(args[1], bool):
        shape = list(tens[0].logical().shape)
        d = args[1] + len(shape) if args[1] < 0 else args[1]
        vals = [float(x) if isinstance(x, str) else x for x in t["outputs"][0].get("data", [])]
        if 0 <= d < len(shape) - 1 and int(np.prod(shape[d + 1:])) >= 16 and \
                not all(math.isfinite(v) for v in vals):
            # its vectorised bfloat16 loop over another dim takes columns 8-15's max from
            # columns 0-7 (softmax.c's softmax_cols_bf16): exp overflows where they differ by ~88
            return "bfloat16 softmax/log_softmax over a non-last dim of 16 or more columns (torch reuses another column's max)"
    if c.op.split(".")[0] in ("median", "nanmedian") and c.op.endswith(".dim") and tens and \
            any(op == "expand" for op, _ in getattr(tens[0], "views", ())):
        return "median.dim/nanmedian.dim of an expanded tensor (torch reads past its storage)"
    if c.op.split(".")[0] in ("as_strided", "as_strided_scatter"):
        ints = [x for a in args for x in (a if isinstance(a, list) else [a])
                if isinstance(x, int) and not isinstance(x, bool)]
        if any(abs(x) > 1 << 59 for x in ints):
            # torch's storage-size check multiplies by the item size without an
            # overflow check and then reads wherever the geometry points; the
            # server refuses what leaves the storage
            return "as_strided with a size, stride or offset whose byte count overflows (torch reads past its storage)"
    ub = cxx_undefined(c, args, t)
    if ub:
        return ub
    if c.op.startswith("_embedding_bag_dense_backward") and tens and len(tens[0].logical().shape) != 2:
        # its 'max' path sizes the result [num_weights, grad.sizes()[1]] unchecked
        return "_embedding_bag_dense_backward with a grad not 2-D (torch reads grad.sizes()[1] past its sizes)"
    if c.op.split(".")[0] in ("binary_cross_entropy", "binary_cross_entropy_backward"):
        k = 1 if c.op.startswith("binary_cross_entropy_backward") else 0
        ops = [a for a in args[: k + 2] if isinstance(a, Tens)]
        if len(ops) == k + 2:
            sq = [[d for d in o.logical().shape if d != 1] for o in ops]
            try:
                b = list(np.broadcast_shapes(*(tuple(x) for x in sq)))
            except ValueError:
                b = None
            if b is not None and b != sq[k]:
                # ATen runs its iterator into a squeeze()d view of the output, which it resizes instead
                return "binary_cross_entropy(_backward) whose operands broadcast past self's squeezed shape (torch answers from unwritten memory)"
    if c.op.split(".")[0] == "soft_margin_loss" and len(args) >= 3 and args[2] not in (0, 1, 2) and tens and \
            int(np.prod(tens[0].logical().shape)) == 0:
        return "soft_margin_loss of an empty input with a reduction other than 0, 1, 2 (torch returns the element its resize_({}) leaves uninitialised)"
    if c.op.startswith(("_adaptive_avg_pool2d_backward", "_adaptive_avg_pool3d_backward")) and len(tens) >= 2:
        # ATen reads grad_output as self's planes x its last spatial sizes without
        # checking that it holds that many elements; the server refuses a
        # grad_output whose shape is not the pooled shape of self
        g, x = tens[0].logical().shape, tens[1].logical().shape
        if len(g) != len(x) or list(g[:-2 if "2d" in c.op else -3]) != list(x[:-2 if "2d" in c.op else -3]):
            return "_adaptive_avg_pool*_backward with grad_output's planes unlike self's (torch reads past grad_output)"
    dist = dist_defect(c, args, tens)
    if dist:
        return dist
    if c.op.startswith("_reshape_alias") and tens and len(args) >= 3 and \
            isinstance(args[1], list) and isinstance(args[2], list) and len(args[1]) == len(args[2]):
        # an internal op that checks nothing: torch reads whatever memory the
        # sizes and strides reach; the server refuses what leaves the storage
        if any(isinstance(x, int) and x < 0 for x in args[2]):
            return "_reshape_alias with a negative stride (torch reads before the storage)"
        if all(isinstance(x, int) for x in args[1] + args[2]) and min(args[1], default=1) > 0 and \
                1 + sum((n - 1) * st for n, st in zip(args[1], args[2])) > tens[0].base.size:
            return "_reshape_alias past the storage's end (torch reads beyond it)"
    return None

DEVICE = "cpu"              # torch runs on the CPU, so the server must too
OUT_LIMIT = 1 << 20         # the server's --max-output-bytes; the child sends no bigger output
ROUND = 4                   # calls per operator per round (the generator learns between rounds)
VIEW_RATE = 0.25            # tensor arguments built as a view on the server (/v1/run)
INVALID_RATE = 0.04         # calls with one argument made invalid on purpose
CONV_RATE = 0.8             # convolutions from Gen.conv_case (shapes that agree), the rest from the schema
CONV_OPS = re.compile(r"^(convolution|convolution_backward|conv[123]d|conv_transpose[123]d)(\.|$)")
CROSS_RATE = 0.05           # calls also sent as binary /v1 and as /v2
TORCH_TIMEOUT = 15          # seconds; torch 1.13 hangs in LAPACK on some inputs (an SVD of non-finite values: twice
                            # in the fixed seed's run), where the slowest call that ends took 5.4 s (an arange of
                            # millions, single-threaded); every hang costs this much
HTTP_TIMEOUT = 60
SHUTDOWN_RESERVE = 5        # seconds of --time-limit kept for stopping and the summary
OVER_LIMIT = "over limit"   # a verdict: torch's output is past what the server may send

# (rtol, atol) against torch computed in the same dtype: a few ulps.
TOL = {"float64": (1.5e-14, 1e-13), "float32": (2e-6, 1e-6), "float16": (2e-3, 1e-4),
       "bfloat16": (1.6e-2, 1e-4)}


# ---- the torch child ------------------------------------------------------------

def torch_worker(out_limit):
    """Reads one case a line on stdin, answers one JSON line on stdout:
    {"outputs": [...]} or {"error": "Type: message"}, plus "ref64", the same call
    with float64 for every less precise floating tensor and dtype argument."""
    import resource
    import warnings

    import torch

    # a factory asked for terabytes raises instead of taking the machine down
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    dtypes = {n: getattr(torch, n) for n in DTYPES}

    def aten(op):
        name, _, overload = op.partition(".")
        return getattr(getattr(torch.ops.aten, name), overload or "default")

    def tensor(v, upcast):
        t = torch.tensor(v["data"], dtype=dtypes[v["dtype"]]).reshape(v["shape"])
        if upcast and t.is_floating_point():
            t = t.double()
        for op, extra in v.get("views", ()):
            t = aten(op)(t, *extra)
        return t

    def value(ty, v, upcast):
        base = ty.rstrip("?")
        if isinstance(v, dict) and "dtype" in v:
            return tensor(v, upcast)
        if isinstance(v, list) and base == "Tensor[]":
            return [value("Tensor", x, upcast) for x in v]
        if isinstance(v, str):
            if base == "ScalarType" and v in dtypes:
                return torch.float64 if upcast and v in LOW_PRECISION else dtypes[v]
            if base == "MemoryFormat" and v in MEMORY_FORMATS:
                return getattr(torch, v)
            if base == "Layout" and v == "strided":
                return torch.strided
            if base == "Device":
                return torch.device(v)
        return v

    def call(case, upcast):
        args = [(n, value(t, v, upcast)) for n, t, v in case["args"]]
        kwargs = {k: value(t, v, upcast) for k, (t, v) in case["kwargs"].items()}
        name = case["op"].partition(".")[0]
        if case["bool_scalar"] and name.endswith("_") and args and isinstance(args[0][1], torch.Tensor) \
                and hasattr(torch.Tensor, name):
            # the same for an in-place operator, a method of self
            out = getattr(args[0][1], name)(**{n: v for n, v in args[1:]}, **kwargs)
        elif case["bool_scalar"] and hasattr(torch, name):
            # torch.ops reads a bool Scalar as an int (TorchScript's rule); the
            # Python API, which the server follows, keeps it a bool. There the
            # first argument goes by position and the rest by name (positions
            # would match deprecated signatures such as add(self, alpha, other)),
            # a tensor `self` being `input`.
            named = {("input" if n == "self" and isinstance(v, torch.Tensor) else n): v for n, v in args[1:]}
            out = getattr(torch, name)(*(v for _, v in args[:1]), **named, **kwargs)
        else:
            out = aten(case["op"])(*(v for _, v in args), **kwargs)
        return [encode(t) for t in (out if isinstance(out, (tuple, list)) else [out])]

    def encode(t):
        if isinstance(t, bool) or t is None:  # a bool return (equal, allclose); torch.ops' numbers for numbers
            # stay errors; None: an undefined tensor (convolution_backward's gradients not asked for)
            return {"value": t, "dtype": "value", "shape": [], "nbytes": 0}
        d = {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
             "nbytes": t.numel() * t.element_size()}
        if d["nbytes"] <= out_limit:
            t = t.detach().reshape(-1)
            d["data"] = (t.double() if t.is_floating_point() else t).tolist()
        return d

    def serve():
        for line in sys.stdin:
            case = json.loads(line)
            ans = {}
            try:
                ans["outputs"] = call(case, False)
            except Exception as e:  # torch's error is the reference answer
                ans["error"] = f"{type(e).__name__}: {e}"
            floating = any(o["dtype"] in FLOATS for o in ans.get("outputs", ()))
            if case["low_precision"] and (floating or "not implemented for" in ans.get("error", "")):
                try:
                    ans["ref64"] = call(case, True)
                except Exception:
                    pass
            ans["seq"] = case.get("seq")
            sys.stdout.write(json.dumps(ans) + "\n")
            sys.stdout.flush()

    # This process is a zygote: torch is imported once and a forked child serves the cases. When a case
    # kills the child (torch 1.13 segfaults or aborts on some invalid arguments, dozens of times in a
    # bounded run) the zygote answers for that case and forks the next child in milliseconds, where a
    # fresh process would import torch again (1.5 s). Only one case is in flight at a time, so a child
    # never holds buffered input that the next one needs; nothing has run an operator before the fork.
    import ctypes
    import signal

    libc = ctypes.CDLL(None)
    while True:
        pid = os.fork()
        if pid == 0:
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: a hang's kill of the zygote ends the child too
            try:
                serve()
            finally:
                sys.stdout.flush()
                os._exit(0)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if code == 0:
            return
        try:
            sys.stdout.write(json.dumps({"crashed": f"torch child exited with {code}"}) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            return


class Torch:
    """The torch child, one case at a time (a crash then names its case); a
    crash or hang costs that case ("torch crashed") and a fresh child.

    Each case carries a sequence number that its answer repeats. A child that
    dies after answering (a heap torch corrupted, found at the next free) makes
    the zygote write a "crashed" line while the next case is already in the
    pipe: that case counts as crashed, and the fresh child's answer to it,
    which comes next, is skipped by its number instead of being taken as the
    answer to every following case."""

    def __init__(self):
        self.proc = None
        self.seq = 0
        self.errf = tempfile.TemporaryFile()

    def run(self, case):
        if self.proc is None:
            from conftest import torch_env  # on the path since main()

            self.proc = subprocess.Popen([TORCH_PYTHON, __file__, "--torch-worker", str(OUT_LIMIT)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errf,
                                         env=torch_env())
        self.seq += 1
        timer = threading.Timer(TORCH_TIMEOUT, self.proc.kill)
        timer.start()
        try:
            self.proc.stdin.write(json.dumps(dict(case, seq=self.seq)).encode() + b"\n")
            self.proc.stdin.flush()
            while True:
                line = self.proc.stdout.readline()
                if not line:
                    break
                ans = json.loads(line)
                if "crashed" in ans or ans.pop("seq", None) == self.seq:
                    return ans
        except BrokenPipeError:
            pass
        finally:
            timer.cancel()
        rc = self.proc.wait()
        self.proc = None
        self.errf.seek(0)
        tail = self.errf.read().decode(errors="replace").strip().splitlines()[-1:] or [""]
        self.errf.seek(0)
        self.errf.truncate()
        return {"crashed": f"torch child exited with {rc} {tail[0][:200]}".strip()}

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---- values -------------------------------------------------------------------------

def bf16(a):
    """float array -> float32 array of the nearest bfloat16 values (ties to even)."""
    a = np.asarray(a, np.float32)
    b = a.view(np.uint32).astype(np.uint64)
    r = (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(a), a, r)


def round_to(a, dtype):
    """float64 array -> float64 array of the nearest values of dtype."""
    if dtype == "bfloat16":
        return bf16(a).astype(np.float64)
    return np.asarray(a, np.float64).astype(NP_DTYPE[dtype]).astype(np.float64)


def to_array(dtype, data):
    if dtype in FLOATS:
        return round_to(np.array([float(x) for x in data], np.float64), dtype)
    return np.array(data, np.bool_ if dtype == "bool" else np.int64)


def wire(v):
    """A value as the server's JSON has it: NaN and the infinities as strings."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, list):
        return [wire(x) for x in v]
    return v


class Tens:
    """A tensor argument: base values and the view ops that make the argument
    from them (non-contiguous inputs; none for a plain tensor). JSON carries no
    strides, so the server builds the views itself in a /v1/run program."""

    __slots__ = ("dtype", "base", "views", "shape")

    def __init__(self, dtype, base, views=(), shape=None):
        self.dtype, self.base, self.views = dtype, base, list(views)
        self.shape = list(base.shape) if shape is None else shape

    def data(self):
        return self.base.reshape(-1).tolist()

    def logical(self):
        """The argument's values, its views applied as numpy views."""
        a = self.base
        for op, extra in self.views:
            if op == "transpose.int":
                a = np.swapaxes(a, *extra)
            elif op == "slice.Tensor":
                d, start, end, step = extra
                a = a[(slice(None),) * d + (slice(start, end, step),)]
            else:
                a = np.broadcast_to(a, extra[0])
        return a

    def json(self):
        return {"dtype": self.dtype, "shape": list(self.base.shape), "data": wire(self.data())}

    def raw(self):
        if self.dtype == "bfloat16":
            return (self.base.astype(np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        return np.ascontiguousarray(self.base).astype(self.base.dtype.newbyteorder("<")).tobytes()


class Case:
    """One generated call: args [(name, schema type, value)], kwargs {name: (type, value)}."""

    __slots__ = ("op", "args", "kwargs", "trace", "injected", "cross")

    def __init__(self, op, args, kwargs, trace):
        self.op, self.args, self.kwargs, self.trace = op, args, kwargs, trace
        self.injected = None
        self.cross = False

    def all_args(self):
        return self.args + [(k, t, v) for k, (t, v) in self.kwargs.items()]

    def values(self):
        return [v for _, _, v in self.all_args()]

    def tensors(self):
        for v in self.values():
            for x in (v if isinstance(v, list) else [v]):
                if isinstance(x, Tens):
                    yield x

    def low_precision_dtype_arg(self):
        return any(t.rstrip("?") == "ScalarType" and v in LOW_PRECISION for _, t, v in self.all_args())

    def float64_stands_in(self):
        """Whether float64 gives what float16 would, rounded: not where a value
        converted to float16 overflows first (a dtype argument converts before
        computing; any input past 65504 may promote to inf)."""
        def widest(t):
            a = t.base.astype(np.float64)
            return np.abs(a[np.isfinite(a)]).max(initial=0)
        return not self.low_precision_dtype_arg() and all(widest(t) <= 65504 for t in self.tensors())

    def element(self, idx, shape):
        """This call on the elements that make output element idx (of shape),
        each as a one-element tensor of its own rank (so dtypes promote as in
        the whole call); None where an input does not broadcast to shape."""
        def one(v):
            if not isinstance(v, Tens):
                return v
            x = np.broadcast_to(v.logical(), shape)[idx]
            return Tens(v.dtype, np.reshape(x, [1] * len(v.shape)))
        try:
            return Case(self.op, [(n, t, one(v)) for n, t, v in self.args],
                        {k: (t, one(v)) for k, (t, v) in self.kwargs.items()}, [])
        except ValueError:
            return None

    def has_views(self):
        return any(t.views for t in self.tensors())

    def first_dtype(self):
        return next((t.dtype for t in self.tensors()), None)

    def for_torch(self):
        def conv(v):
            if isinstance(v, Tens):
                return {"dtype": v.dtype, "shape": list(v.base.shape), "data": v.data(), "views": v.views}
            return [conv(x) for x in v] if isinstance(v, list) else v
        return {"op": self.op, "args": [[n, t, conv(v)] for n, t, v in self.args],
                "kwargs": {k: [t, conv(v)] for k, (t, v) in self.kwargs.items()},
                "low_precision": any(t.dtype in LOW_PRECISION for t in self.tensors()) or
                self.low_precision_dtype_arg(),
                "bool_scalar": any(t.rstrip("?") == "Scalar" and isinstance(v, bool) for _, t, v in self.all_args())}

    @property
    def pinned_op(self):
        """The overload exactly ("var.default", not "var", which the server
        resolves among var's overloads by the arguments)."""
        return self.op if "." in self.op else self.op + ".default"

    def v1_request(self):
        """(path, body): /v1/ops/{op}, or a /v1/run program when views are needed."""
        steps = []

        def enc(v):
            if isinstance(v, Tens):
                ref = v.json()
                for op, extra in v.views:
                    steps.append({"op": op, "args": [ref, *extra]})
                    ref = {"ref": f"${len(steps) - 1}"}
                return ref
            return [enc(x) for x in v] if isinstance(v, list) else wire(v)

        call = {"args": [enc(v) for _, _, v in self.args]}
        if self.kwargs:
            call["kwargs"] = {k: enc(v) for k, (_, v) in self.kwargs.items()}
        if steps:
            return "/v1/run", {"steps": steps + [{"op": self.pinned_op, **call}], "device": DEVICE}
        return f"/v1/ops/{self.pinned_op}", {**call, "device": DEVICE}

    def binary_request(self):
        """(path, header, header length, body) with every tensor as binary data."""
        blobs = []

        def enc(v):
            if isinstance(v, Tens):
                blobs.append(v.raw())
                return {"dtype": v.dtype, "shape": list(v.base.shape),
                        "parameters": {"binary_data_size": len(blobs[-1])}}
            return [enc(x) for x in v] if isinstance(v, list) else wire(v)

        header = {"args": [enc(v) for _, _, v in self.args]}
        if self.kwargs:
            header["kwargs"] = {k: enc(v) for k, (_, v) in self.kwargs.items()}
        header["device"] = DEVICE
        h = json.dumps(header, separators=(",", ":")).encode()
        return f"/v1/ops/{self.pinned_op}", header, len(h), h + b"".join(blobs)

    def v2_request(self, schema):
        """(path, body) for the Open Inference Protocol: tensors as named inputs,
        everything else in parameters (an explicit None that is the default is
        left out: parameters.device is also the call's device, and must be a string)."""
        none_default = {a.name for a in schema.args if a.has_default and a.default is None}
        named = {n: v for n, _, v in self.args}
        named.update({k: v for k, (_, v) in self.kwargs.items()})
        inputs, params = [], {}
        for name, v in named.items():
            if isinstance(v, Tens):
                inputs.append({"name": name, "datatype": OIP[v.dtype], "shape": list(v.base.shape),
                               "data": wire(v.data())})
            elif v is not None or name not in none_default:
                params[name] = wire(v)
        params.setdefault("device", DEVICE)
        return f"/v2/models/{self.op}/infer", {"inputs": inputs, "parameters": params}


# ---- generating calls from schemas ----------------------------------------------------

class Arg:
    __slots__ = ("name", "type", "kwarg_only", "has_default", "default")

    def __init__(self, d):
        self.name, self.type = d["name"], d["type"]
        self.kwarg_only, self.has_default, self.default = d["kwarg_only"], d["has_default"], d.get("default")


class Schema:
    def __init__(self, d):
        self.model = d["model"]
        self.args = [Arg(a) for a in d["arguments"]]


LIST_TYPE = re.compile(r"(\w+)\[(\d*)\]")
SCALAR_KINDS = {"Tensor", "Scalar", "int", "SymInt", "float", "bool", "str", "ScalarType", "MemoryFormat",
                "Layout", "Device"}


def supported(ty):
    base = ty.rstrip("?")
    m = LIST_TYPE.fullmatch(base)
    return m.group(1) in ("Tensor", "int", "SymInt", "bool") if m else base in SCALAR_KINDS


class Bandit:
    """Draws the generator's choices, favouring those after which torch accepted
    the call, so most calls get past argument checking while each choice keeps
    EXPLORE of the weight spread evenly (invalid calls are made on purpose).
    Success rates are kept per (operator, argument, knob, choice)."""

    EXPLORE = 0.35

    def __init__(self, rng):
        self.rng = rng
        self.stats = defaultdict(lambda: [1, 2])

    def draw(self, key, choices):
        p = [s / n for s, n in (self.stats[key + (c,)] for c in choices)]
        total = sum(p)
        w = [self.EXPLORE / len(choices) + (1 - self.EXPLORE) * x / total for x in p]
        return self.rng.choices(choices, w)[0]

    def learn(self, trace, ok):
        for key, c in trace:
            s = self.stats[key + (c,)]
            s[0] += ok
            s[1] += 1


class Corpus:
    """Recipes (the choices of a call) worth mutating, per operator: those
    torch accepted, and those that met an error not seen before. An operator
    that takes several matching arguments (addmm: one dtype, chained shapes)
    is rarely hit by independent draws; walking from one new error to the
    next, one changed choice at a time, gets there."""

    REPLAY = 0.5
    CAP = 64

    def __init__(self, rng):
        self.rng = rng
        self.ok = defaultdict(list)
        self.novel = defaultdict(list)
        self.errors = defaultdict(set)

    def add(self, op, trace, answer):
        if "outputs" in answer:
            box = self.ok[op]
        else:
            sig = re.sub(r"-?\d+", "#", answer.get("error", "crashed"))[:120]
            if sig in self.errors[op]:
                return
            self.errors[op].add(sig)
            box = self.novel[op]
        recipe = {}
        for key, c in trace:  # the n-th draw of a key: Tensor[] elements share keys
            n = sum(1 for k in recipe if k[0] == key)
            recipe[(key, n)] = c
        if len(box) < self.CAP:
            box.append(recipe)
        else:
            box[self.rng.randrange(self.CAP)] = recipe

    def recipe(self, op):
        """A recipe with one to three choices dropped (drawn afresh), or {}."""
        box = self.ok[op] if self.ok[op] and self.rng.random() < 0.7 else self.novel[op]
        if not box or self.rng.random() > self.REPLAY:
            return {}
        recipe = dict(self.rng.choice(box))
        for k in self.rng.sample(sorted(recipe, key=repr), min(len(recipe), self.rng.randint(1, 3))):
            del recipe[k]
        return recipe


SHAPE_MODES = ["base", "same", "bcast", "suffix", "pool", "random", "chain", "chain_t", "lead"]
VALUE_MODES = ["normal", "special", "index", "wide"]
RANKS = [0, 1, 2, 3, 4]
INT_EXTREMES = [2 ** 31, -2 ** 31 - 1, 2 ** 63 - 1, -2 ** 63, 10 ** 6]
SCALAR_EXTREMES = [2 ** 63 - 1, -2 ** 63, 2 ** 31, -2 ** 31 - 1, 255, 256, -129, 65504.0, 1e30, 1e-30,
                   3.4e38, 1e300]
INF = float("inf")


class Gen:
    """Random calls from schemas. The first tensor argument has the call's
    "base" shape, from which the others take broadcastable, chained (matrix
    products) or suffix shapes; int lists and ints are read as shapes, dims or
    indices of the first tensor."""

    def __init__(self, rng):
        self.rng = rng
        self.np = np.random.default_rng(rng.getrandbits(64))
        self.bandit = Bandit(rng)
        self.corpus = Corpus(rng)

    def pick(self, key, choices):
        key = (self.schema.model,) + key
        n = self.draws[key] = self.draws.get(key, -1) + 1
        c = self.recipe.get((key, n), self.recipe)  # the recipe itself marks "none"
        if c is self.recipe or c not in choices:
            c = self.bandit.draw(key, choices)
        self.trace.append((key, c))
        return c

    def learn(self, case, answer):
        if not case.injected:
            self.bandit.learn(case.trace, "outputs" in answer)
            self.corpus.add(case.op, case.trace, answer)

    def case(self, schema):
        self.schema, self.trace, self.draws = schema, [], {}
        self.recipe = self.corpus.recipe(schema.model)
        if CONV_OPS.match(schema.model) and self.rng.random() < CONV_RATE:
            return self.conv_case(schema)
        self.base = self.shape_of_rank(self.pick(("base", "rank"), RANKS))
        self.pool = sorted(set(self.base) | {1})
        self.first = self.first_dtype = self.prev = self.cut = None
        # matrix products and layer_norm want one dtype throughout: a choice per call
        self.shared_dtype = self.pick(("dtypes", "shared"), [False, True])
        pos = [a for a in schema.args if not a.kwarg_only]  # a prefix of the arguments
        # torch.ops takes no `self=` (its __call__ has a self of its own)
        fixed = max((i + 1 for i, a in enumerate(pos) if a.name == "self"), default=0)
        nreq = max([fixed] + [i + 1 for i, a in enumerate(pos) if not a.has_default])
        npos = self.rng.randint(fixed, len(pos)) if self.rng.random() < 0.2 else self.rng.randint(nreq, len(pos))
        args, kwargs = [], {}
        for i, a in enumerate(schema.args):
            if i < npos:
                args.append((a.name, a.type, self.value(a)))
            elif not a.has_default or self.rng.random() < 0.5:
                kwargs[a.name] = (a.type, self.value(a))
        case = Case(schema.model, args, kwargs, self.trace)
        if self.rng.random() < INVALID_RATE:
            self.inject(case)
        return case

    def conv_case(self, schema):
        """A convolution whose shapes agree (random ones almost never do):
        1-3 spatial dims, groups, stride, dilation, padding up to past the
        kernel, transposed with output_padding, batch 0-3 or unbatched for the
        conv* wrappers, inputs now and then a view; every argument by name."""
        r, name = self.rng, schema.model
        m = re.search(r"conv(?:_transpose)?(\d)d", name)
        nd = int(m.group(1)) if m else r.randint(1, 3)
        transposed = name.startswith("conv_transpose") or (name.startswith("convolution") and r.random() < 0.4)
        for _ in range(100):
            g = r.choice([1, 1, 2, 3])
            cin, cout = g * r.randint(1, 3), g * r.randint(1, 3)
            k = [r.randint(1, 3) for _ in range(nd)]
            size = [r.randint(1, 6) for _ in range(nd)]
            stride, dil = [r.randint(1, 3) for _ in range(nd)], [r.randint(1, 2) for _ in range(nd)]
            pad = [r.randint(0, 3) for _ in range(nd)]
            opad = [r.randint(0, max(a, b) - 1) for a, b in zip(stride, dil)] if transposed else [0] * nd
            if ".padding" in name:
                stride = [1] * nd
            if transposed:
                out = [(i - 1) * st - 2 * p + d * (kk - 1) + o + 1 for i, st, p, d, kk, o in
                       zip(size, stride, pad, dil, k, opad)]
                ok = min(out) >= 1
            else:
                out = [(i + 2 * p - d * (kk - 1) - 1) // st + 1 for i, p, d, kk, st in zip(size, pad, dil, k, stride)]
                ok = all(i + 2 * p >= d * (kk - 1) + 1 for i, p, d, kk in zip(size, pad, dil, k))
            if ok:
                break
        n = r.choice([0, 1, 1, 2, 3])
        unbatched = not name.startswith("convolution") and r.random() < 0.2
        dtype = self.pick(("conv", "dtype"), ["float32", "float32", "float64", "float64", "bfloat16", "int64",
                                               "int32", "float16", "bool"])
        self.first, self.first_dtype, self.cut = None, dtype, None

        def t(shape):
            self.first = self.first or shape
            if shape and r.random() < VIEW_RATE:
                return self.view(dtype, shape, "normal")
            return Tens(dtype, self.values(dtype, shape, "normal"))

        x_shape = ([] if unbatched else [n]) + [cin] + size
        vals = {"input": t(x_shape), "weight": t(([cin, cout // g] if transposed else [cout, cin // g]) + k),
                "bias": t([cout]) if r.random() < 0.6 else None, "stride": stride,
                "padding": pad if ".padding" not in name else r.choice(["same", "valid"]), "dilation": dil,
                "transposed": transposed, "output_padding": opad, "groups": g, "bias_sizes": [cout],
                "output_mask": [r.random() < 0.8 for _ in range(3)]}
        if name.startswith("convolution_backward"):  # the gradient of the output: [n, cout, out...]
            vals["grad_output"] = t([n, cout] + out)
        args = [(a.name, a.type, vals[a.name]) for a in schema.args]
        return Case(schema.model, args, {}, self.trace)

    def inject(self, case):
        how = self.rng.choice(["wrong type", "unknown keyword", "missing"])
        slots = [(case.args, i) for i in range(len(case.args))] + [(case.kwargs, k) for k in case.kwargs]
        if how == "unknown keyword" or not slots:
            how = "unknown keyword"
            case.kwargs["bogus"] = ("int", 1)
        elif how == "missing":  # a keyword or the last positional: the others keep their places
            box, k = self.rng.choice([s for s in slots if s[0] is case.kwargs] or slots[-1:])
            del box[k]
        else:
            box, k = self.rng.choice(slots)
            box[k] = (*box[k][:-1], self.rng.choice(["x", 1.5, [1, 2]]))
        case.injected = how

    # -- by schema type
    def value(self, a):
        base = a.type.rstrip("?")
        if a.type.endswith("?") and self.pick((a.name, "none"), [False, True]):
            return None
        m = LIST_TYPE.fullmatch(base)
        if m:
            if m.group(1) == "Tensor":
                return [self.tensor(a.name + "[]") for _ in range(self.pick((a.name, "len"), [0, 1, 2, 3, 4]))]
            if m.group(1) == "bool":  # convolution_backward's output_mask
                return [self.rng.random() < 0.7 for _ in range(int(m.group(2) or self.rng.randint(0, 4)))]
            return self.int_list(a.name, m.group(2))
        if base == "Tensor":
            return self.tensor(a.name)
        if base in ("int", "SymInt"):
            return self.int(a.name, base == "SymInt")
        if base == "float":
            mode = self.pick((a.name, "float"), ["eps", "normal", "int", "special"])
            return {"eps": lambda: self.rng.choice([1e-5, 1e-12, 0.1, 1.0]),
                    "normal": lambda: round(abs(self.rng.gauss(0, 2)), 4),  # an eps < 0 cancels var
                    "int": lambda: self.rng.randint(-3, 3),
                    "special": lambda: self.rng.choice([math.nan, INF, -INF, -0.0, 0.0, -1.0])}[mode]()
        if base == "Scalar":
            return self.scalar(a.name)
        if base == "bool":
            return self.pick((a.name, "bool"), [False, True])
        if base == "str":
            return self.pick((a.name, "str"), REDUCE_STRINGS if a.name == "reduce" else STRINGS)
        if base == "ScalarType":
            return self.pick((a.name, "dtype"), DTYPES)
        if base == "MemoryFormat":
            return self.pick((a.name, "format"), MEMORY_FORMATS)
        return {"Layout": "strided", "Device": DEVICE}[base]

    def scalar(self, name):
        mode = self.pick((name, "scalar"), ["int", "float", "round float", "bool", "special", "extreme"])
        r = self.rng
        return {"int": lambda: r.randint(-5, 5),
                "float": lambda: round(r.gauss(0, 3), 3),
                "round float": lambda: r.randint(-4, 4) + r.choice([0.0, 0.5]),
                "bool": lambda: r.choice([False, True]),
                "special": lambda: r.choice([math.nan, INF, -INF, -0.0]),
                "extreme": lambda: r.choice(SCALAR_EXTREMES)}[mode]()

    def ref_shape(self):
        return self.first if self.first is not None else self.base

    def dim(self, r):
        return self.rng.randint(-r, r - 1) if r else self.rng.choice([-1, 0])

    def int(self, name, symint):
        r = len(self.ref_shape())
        mode = self.pick((name, "int"), ["dim", "dim+1", "small", "extreme"])
        if mode == "dim":
            return self.dim(r)
        if mode == "dim+1":
            return self.rng.randint(-r - 1, r)
        if mode == "small":
            return self.rng.randint(-3, 6)
        # torch 1.13 reads a SymInt below -2**62 as a symbolic one
        return self.rng.choice([e for e in INT_EXTREMES if not symint or e >= -2 ** 62])

    def int_list(self, name, n):
        p = self.ref_shape()
        r = len(p)
        rng = self.rng
        mode = self.pick((name, "list"), ["shape", "suffix", "reshape", "expand", "perm", "dims", "empty",
                                          "random"] + (["int"] if n else []))
        if mode == "int":  # int[N] also takes one integer
            return self.dim(r)
        if mode == "shape":
            return list(p)
        if mode == "suffix":
            return self.suffix(p)
        if mode == "reshape":
            return self.reshape(p)
        if mode == "expand":
            lead = [rng.randint(1, 3) for _ in range(rng.randint(0, 1))]
            return lead + [-1 if rng.random() < 0.3 else (rng.randint(1, 4) if s == 1 else s) for s in p]
        if mode in ("perm", "dims"):
            dims = rng.sample(range(r), r if mode == "perm" else rng.randint(0, r))
            return [d - r if rng.random() < 0.3 else d for d in dims]
        if mode == "empty":
            return []
        return [rng.randint(-2, 6) for _ in range(rng.randint(0, 4))]

    def suffix(self, shape):
        """The last dims of shape, as many for every argument of a call (so
        layer_norm's normalized_shape and weight agree)."""
        if self.cut is None:
            self.cut = self.rng.randint(0, len(shape))
        return list(shape[len(shape) - min(self.cut, len(shape)):])

    def index_bound(self):
        """Index values stay below every size of the first tensor (or 3)."""
        return min(self.first) if self.first and min(self.first) > 0 else 3

    def reshape(self, p):
        """Sizes with p's element count (one of them -1 now and then)."""
        rest, dims = math.prod(p), []
        for _ in range(self.rng.randint(0, 3)):
            d = self.rng.choice([d for d in range(1, 6) if rest % d == 0] if rest else [0, 1, 2, 3])
            dims.append(d)
            rest = rest // d if d else rest
        dims.append(rest)
        self.rng.shuffle(dims)
        if self.rng.random() < 0.3:
            dims[self.rng.randrange(len(dims))] = -1
        return dims

    # -- tensors
    def size(self):
        return 0 if self.rng.random() < 0.06 else self.rng.randint(1, 5)

    def shape_of_rank(self, r):
        return [self.size() for _ in range(r)]

    def shape(self, key):
        mode = self.pick((key, "shape"), SHAPE_MODES)
        rank = self.pick((key, "rank"), RANKS)
        b = self.base
        prev = self.prev if self.prev is not None else b
        x = self.rng.choice(self.pool)
        if mode == "base":
            return list(b)
        if mode == "same":
            return list(prev)
        if mode == "bcast":
            return [1 if self.rng.random() < 0.3 else d for d in b[self.rng.randint(0, len(b)):]]
        if mode == "suffix":
            return self.suffix(prev)
        if mode == "lead":  # addmm's mat1
            return [b[0], x] if b else [x]
        if mode == "pool":
            return [self.rng.choice(self.pool) for _ in range(rank)]
        if mode == "random":
            return self.shape_of_rank(rank)
        if mode == "chain":  # contracts prev's last dim: mm, bmm, matmul
            return prev[:-2] + [prev[-1], x] if prev else [x]
        return [x, prev[-1]] if prev else [x]  # chain_t: linear's weight

    def tensor(self, key):
        # gather's and scatter's index: the rank of the first tensor, no larger
        kinds = ["any", "index"] + (["index_nd"] if key == "index" and self.first is not None else [])
        kind = self.pick((key, "kind"), kinds)
        if kind == "index":
            dtype, shape, mode = "int64", [self.size()], "index"  # index_select's, embedding's
        elif kind == "index_nd":
            dtype, shape, mode = "int64", [self.rng.randint(0, s) for s in self.first], "index"
        else:
            dtype = self.first_dtype if self.shared_dtype and self.first_dtype else self.pick((key, "dtype"), DTYPES)
            shape = self.shape(key) if self.first is not None else list(self.base)
            mode = self.pick((key, "values"), VALUE_MODES)
        if self.first is None:
            self.first, self.first_dtype = shape, dtype
        self.prev = shape
        if shape and self.rng.random() < VIEW_RATE:
            return self.view(dtype, shape, mode)
        return Tens(dtype, self.values(dtype, shape, mode))

    def view(self, dtype, shape, mode):
        """A non-contiguous argument of this shape: a transposed, sliced or
        expanded view of a base tensor."""
        rng = self.rng
        kind = rng.choice(["slice", "expand"] + (["transpose"] if len(shape) >= 2 else []))
        if kind == "transpose":
            d0, d1 = sorted(rng.sample(range(len(shape)), 2))
            bshape = list(shape)
            bshape[d0], bshape[d1] = shape[d1], shape[d0]
            return Tens(dtype, self.values(dtype, bshape, mode), [("transpose.int", [d0, d1])], shape)
        if kind == "slice":
            d, step, start = rng.randrange(len(shape)), rng.randint(1, 3), rng.randint(0, 1)
            end = start + shape[d] * step
            bshape = list(shape)
            bshape[d] = end + rng.randint(0, 1)
            return Tens(dtype, self.values(dtype, bshape, mode), [("slice.Tensor", [d, start, end, step])], shape)
        bshape = [1 if rng.random() < 0.5 else s for s in shape[rng.randint(0, len(shape)):]]
        return Tens(dtype, self.values(dtype, bshape, mode), [("expand", [list(shape)])], shape)

    def values(self, dtype, shape, mode):
        n, g = math.prod(shape), self.np
        if dtype == "bool":
            return (g.random(n) < (0.5 if mode != "special" else 0.9)).reshape(shape)
        if dtype not in FLOATS:
            info = np.iinfo(NP_DTYPE[dtype])
            lo, hi = int(info.min), int(info.max)
            if mode == "index":
                a = g.integers(0, self.index_bound(), n)
            elif mode == "wide":
                a = g.integers(lo, hi, n, endpoint=True, dtype=np.int64)
            else:
                a = g.integers(max(lo, -9), min(hi, 10), n, endpoint=True)
                if mode == "special":
                    picks = np.array([lo, hi, 0, 1, lo + 1, hi - 1] + ([-1] if lo < 0 else []), np.int64)
                    a = np.where(g.random(n) < 0.3, g.choice(picks, n), a)
            return a.astype(NP_DTYPE[dtype]).reshape(shape)
        if mode == "index":
            a = g.integers(0, self.index_bound(), n).astype(np.float64)
        elif mode == "wide":
            a = g.standard_normal(n) * 10.0 ** g.uniform(-8, 8, n)
        else:
            a = g.standard_normal(n) * self.rng.choice([1.0, 3.0])
            a = np.where(g.random(n) < 0.25, np.round(a * 2) / 2, a)  # ties for round/floor/remainder
            if mode == "special":
                # big enough that big * big overflows, small enough that a sum of
                # products does not: where a partial sum overflows depends on the order
                big = {"float16": 60000.0, "bfloat16": 1e30, "float32": 1e30, "float64": 1e300}[dtype]
                picks = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, big, -big, 1e-40, 0.5, -0.5, 2.5])
                a = np.where(g.random(n) < 0.3, g.choice(picks, n), a)
        a = bf16(a) if dtype == "bfloat16" else a.astype(NP_DTYPE[dtype])
        return a.reshape(shape)


# ---- comparing answers ----------------------------------------------------------------

def agree(g, w, rtol, atol):
    """Elementwise: equal (NaN == NaN, zeros of the same sign) or close and nonzero."""
    same = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
    close = np.isfinite(g) & np.isfinite(w) & ~((g == 0) & (w == 0)) & (np.abs(g - w) <= atol + rtol * np.abs(w))
    return same | close


def float_mismatch(dtype, g, t, r64, atol_extra):
    """Where the server's g disagrees with torch's t, unless torch in float64
    (r64) shows the server at least about as accurate as torch: an accumulating
    operator need not round as torch's float16 loop does."""
    rtol, atol = TOL[dtype]
    atol += atol_extra
    bad = ~agree(g, t, rtol, atol)
    if r64 is not None and bad.any():
        r = round_to(r64, dtype)
        slack = np.where(np.isfinite(t) & np.isfinite(r), 2 * np.abs(t - r), 0.0)
        # a zero that is float64's tiny result rounded may carry either sign
        bad &= ~(agree(g, r, rtol, atol + slack) | ((g == 0) & (r == 0) & (r64 != 0)))
    return bad


def narrow_input_atol(case, dtype, ref):
    """A wide output computed from a narrower float input (a float16 logit
    under float64 targets) keeps that input's rounding in its intermediate
    steps (log_softmax rounded to float16 before the product promotes), which
    torch's float64 stand-in never takes: the narrow dtype's relative
    tolerance, on the scale of the output."""
    if dtype not in FLOATS:  # an integer output (argmax of a float input) has no tolerance to widen
        return 0.0
    narrow = [t.dtype for t in case.tensors() if t.dtype in FLOATS and TOL[t.dtype][0] > TOL[dtype][0]]
    if not narrow:
        return 0.0
    r = np.array([float(x) if isinstance(x, str) else x for x in ref], np.float64) if ref else np.zeros(0)
    big = np.abs(r[np.isfinite(r)]).max(initial=0.0)
    return max(TOL[t][0] for t in narrow) * float(big)


def reduction_atol(case, shape, dtype):
    """An output smaller than the largest input is taken for a reduction: its
    rounding error grows with the inputs' magnitude and count (float32
    accumulation below float64), so an absolute tolerance on that scale."""
    n = max((math.prod(t.shape) for t in case.tensors()), default=0)
    if math.prod(shape) >= n:
        return 0.0
    finite = [np.abs(t.base[np.isfinite(t.base)]).max(initial=0) if t.dtype in FLOATS else
              np.abs(t.base.astype(np.float64)).max(initial=0) for t in case.tensors()]
    eps = np.finfo(np.float64 if dtype == "float64" else np.float32).eps
    if case.op.split(".")[0] in STEPWISE and dtype in ("float16", "bfloat16"):
        eps = 2.0 ** (-11 if dtype == "float16" else -8)
    return 4 * eps * float(max(finite)) * math.sqrt(n)


def contraction_atol(case, dtype):
    """A convolution's output element is a length-K dot product of input and
    weight values: float32 accumulation in another order than torch's differs
    by up to the standard bound K * eps * max|x| * max|w| (a cancelling sum
    leaves that error on a small value)."""
    if not CONV_OPS.match(case.op) or dtype not in FLOATS:
        return 0.0
    ts = list(case.tensors())[:2]
    if len(ts) < 2 or min(t.base.size for t in ts) == 0:
        return 0.0
    x, w = (np.abs(t.logical().astype(np.float64)) for t in ts)
    k = math.prod(ts[1].shape) / max(ts[1].shape[0], 1) if ts[1].shape else 1
    eps = np.finfo(np.float64 if dtype == "float64" else np.float32).eps
    return float(k * eps * np.nanmax(x[np.isfinite(x)], initial=0) * np.nanmax(w[np.isfinite(w)], initial=0))


# A solve's forward error is bounded by eps * cond(A) * |x|: LAPACK builds that
# pivot or block differently (torch's and Debian's OpenBLAS) agree to that.
SOLVES = re.compile(r"^(linalg_(lstsq|solve|solve_ex|inv|inv_ex|solve_triangular)|inverse|cholesky_solve)(\.|$)")


def conditioning_atol(case, dtype, values):
    if not SOLVES.match(case.op) or dtype not in ("float32", "float64"):
        return 0.0
    a = next(case.tensors(), None)
    m = a.logical().astype(np.float64) if a is not None else None
    if m is None or m.ndim < 2 or m.size == 0 or not np.isfinite(m).all():
        return 0.0
    with np.errstate(all="ignore"):
        cond = np.linalg.cond(m).max()
        v = np.abs(np.asarray(values, dtype=np.float64))
    top = np.nanmax(v[np.isfinite(v)], initial=0)
    if not np.isfinite(cond):
        return math.inf
    return float(4 * np.finfo(dtype).eps * cond * top)


# Operators whose torch CPU kernel rounds its running result to the output
# dtype between accumulation steps (addbmm: one addmm_ per batch), on a
# matrix product whose own bfloat16/float16 rounding is oneDNN's: their
# error is on the dtype's scale, not float32's.
STEPWISE = {"addbmm", "addbmm_"}


def mismatch_kind(g, t, bad):
    gb, tb = g[bad], t[bad]
    if (np.isnan(gb) != np.isnan(tb)).any():
        return "NaN mismatch"
    if (np.isinf(gb) | np.isinf(tb)).any():
        return "Inf mismatch"
    if ((gb == 0) & (tb == 0)).any():
        return "signed zero mismatch"
    return "value mismatch"


def dtype_group(d):
    return "int" if d in ("int64", "int32", "int16", "int8", "uint8") else d


def short(data, n=12):
    data = list(data)
    return json.dumps(data[:n])[:-1] + (", ...]" if len(data) > n else "]")


def describe_torch(t):
    if "error" in t:
        return "raised " + t["error"][:400]
    return "ok: " + "; ".join(f"value {o['value']!r}" if "value" in o else
                              f"{o['dtype']}{o['shape']} " + (short(o["data"]) if "data" in o else "(large)")
                              for o in t["outputs"])


def describe_server(status, body, text):
    if body is None:
        return f"{status} {text[:300]}"
    if status == 200:
        return "200 " + "; ".join(f"value {o['value']!r}" if "value" in o else
                                  f"{o.get('dtype') or o.get('datatype')}{o['shape']} {short(o['data'])}"
                                  for o in body["outputs"])
    return f"{status} {json.dumps(body.get('error'))[:400]}"


def load_allowlist(path):
    """Rules 'name: torch_raised="..." server=STATUS' (torch raised, the server
    answered STATUS) or 'name: server_refused="..." server=STATUS torch=ok' (torch
    answered, the server refused with STATUS and that text), with # comments."""
    rules = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if not line:
            continue
        name, _, rest = line.partition(":")
        fields = dict(f.split("=", 1) for f in shlex.split(rest))
        refused = "server_refused" in fields
        if refused == ("torch_raised" in fields) or refused != (fields.get("torch") == "ok"):
            raise SystemExit(f"{path}: rule {name.strip()!r} needs torch_raised, or server_refused with torch=ok")
        rules.append({"name": name.strip(), "torch_raised": fields.get("torch_raised"),
                      "server_refused": fields.get("server_refused"), "server": int(fields["server"])})
    return rules


class Tally:
    """Counts, and the disagreement classes with their smallest example each."""

    def __init__(self):
        self.counts = Counter()
        self.per_op = defaultdict(Counter)
        self.classes = {}
        self.messages = {}  # op -> {"count", "server", "torch", "case"}: refusals not in torch's words

    def add(self, key, size, example, allowed=None):
        c = self.classes.setdefault((key, allowed), {"count": 0, "allowed": allowed, "size": None,
                                                     "example": None})
        c["count"] += 1
        if c["size"] is None or size < c["size"]:
            c["size"], c["example"] = size, example()


# ---- the run --------------------------------------------------------------------------

class Runner:
    def __init__(self, args, server_cls):
        self.args = args
        self.rules = load_allowlist(ALLOWLIST)
        self.tally = Tally()
        self.server_cls = server_cls
        self.server = self.start_server()
        self.torch = Torch()

    def start_server(self):
        return self.server_cls("--no-access-log", "--max-output-bytes", str(OUT_LIMIT))

    def load_ops(self, pattern):
        """Deterministic aten operators from GET /v1/ops, with their schemas."""
        ops, skipped = [], {}
        listing = self.server.get("/v1/ops").json()["operators"]
        for group in listing:
            for ov in group["overloads"]:
                model = ov["model"]
                if pattern and not re.search(pattern, model):
                    continue
                if not ov["name"].startswith("aten::"):
                    skipped[model] = "not in the aten namespace"
                    continue
                if NONDETERMINISTIC.search(model):
                    skipped[model] = "nondeterministic"
                    continue
                schema = Schema(self.server.get(f"/v1/ops/{model}").json())
                bad = [a.type for a in schema.args if not supported(a.type)]
                if bad:
                    skipped[model] = f"argument type {bad[0]} not generated"
                    continue
                ops.append(schema)
        return ops, skipped

    def post(self, path, data, headers):
        """(status, JSON body or None, text, response); status None when the
        server did not answer (it is then restarted)."""
        import requests

        try:
            r = self.server.session.post(self.server.url + path, data=data, headers=headers, timeout=HTTP_TIMEOUT)
        except requests.RequestException as e:
            died = self.server.proc.poll() is not None
            err = self.server.stderr()[-300:] if died else ""
            self.server.proc.kill()
            self.server.proc.wait()
            self.server = self.start_server()
            return None, None, f"no answer ({type(e).__name__}){' server died: ' + err if died else ''}", None
        try:
            body = r.json() if r.headers.get("Content-Type", "").startswith("application/json") else None
        except ValueError:
            body = None
        return r.status_code, body, r.text if body is None else "", r

    def run(self, ops):
        rng = random.Random(self.args.seed)
        gen = Gen(rng)
        schemas = {s.model: s for s in ops}
        done = Counter()
        next_report = time.monotonic() + 30
        while time.monotonic() < self.deadline:
            pending = [s for s in ops if done[s.model] < self.args.n]
            if not pending:
                break
            cases = [gen.case(s) for s in pending for _ in range(ROUND)]
            for c in cases:
                c.cross = rng.random() < CROSS_RATE and not c.injected
            answers = [None] * len(cases)

            def torch_side():
                for i, c in enumerate(cases):
                    if time.monotonic() > self.deadline:
                        return
                    answers[i] = self.torch.run(c.for_torch())

            th = threading.Thread(target=torch_side)
            th.start()
            replies = []
            for c in cases:
                if time.monotonic() > self.deadline:
                    break
                path, body = c.v1_request()
                text = json.dumps(body, separators=(",", ":"))
                replies.append((path, text, self.post(path, text, {"Content-Type": "application/json"})))
            th.join()
            for c, t, (path, text, reply) in zip(cases, answers, replies):
                if t is None:
                    break
                done[c.op] += 1
                gen.learn(c, t)
                self.judge(c, t, path, text, reply)
                if c.cross and reply[0] is not None:
                    self.cross_check(c, schemas[c.op], f"POST {path} {text}", reply)
            if time.monotonic() > next_report:
                next_report += 30
                n = sum(self.tally.counts[k] for k in ("agree", "allowed", "disagree"))
                print(f"  ... {n} calls, {self.tally.counts['disagree']} disagreements, "
                      f"{len(self.tally.classes)} classes", file=sys.stderr, flush=True)
        return done

    # -- one call
    def judge(self, c, t, path, text, reply):
        status, body, raw, _ = reply
        n = self.tally.counts
        per = self.tally.per_op[c.op]
        per["calls"] += 1
        if "crashed" in t:
            n["torch crashed"] += 1
            per["torch crashed"] += 1
            return
        bug = torch_bug(c, t)
        if bug:
            n["torch defect, skipped"] += 1
            return
        n["torch ok" if "outputs" in t else "torch raised"] += 1
        n["non-contiguous"] += c.has_views()
        n["invalid"] += bool(c.injected)
        per["torch ok"] += "outputs" in t
        v = self.verdict(c, t, status, body)
        if v == OVER_LIMIT:
            n["over output limit"] += 1
            return
        outcome = "agree" if v is None else "allowed" if v[3] else "disagree"
        n[outcome] += 1
        per[outcome] += 1
        if v is None:
            return
        kind, dtype, detail, allowed = v
        key = f"{c.op}: {kind}" + (f", {c.injected} argument" if c.injected else "") + (
            f" ({dtype_group(dtype)})" if dtype else "")
        self.tally.add(key, len(text), lambda: {
            "request": f"POST {path} {text}",
            "torch": describe_torch(t),
            "server": describe_server(status, body, raw),
            **({"detail": detail} if detail else {})}, allowed)

    def note_message(self, c, msg, torch_error):
        """Both refused: counts whether the server said torch's words (its message
        within torch's "Type: message", a /v1/run step's prefix dropped)."""
        msg = re.sub(r"^step \d+ \([^)]*\): ", "", msg)
        n = self.tally.counts
        n["both refused"] += 1
        if msg in torch_error:
            n["same message"] += 1
            return
        m = self.tally.messages.setdefault(c.op, {"count": 0})
        m["count"] += 1
        if m["count"] == 1:
            m.update(server=msg, torch=torch_error, case=c)

    def verdict(self, c, t, status, body):
        """None when server and torch agree, OVER_LIMIT, or (kind, dtype, detail,
        allowlist rule or None); dtype is torch's output dtype for value
        disagreements, else the first input tensor's."""
        dt = c.first_dtype()
        if status is None or status >= 500:
            return (f"server {status}" if status else "server gave no answer"), dt, None, None
        if status != 200:
            err = body.get("error") if isinstance(body, dict) else None
            if not (isinstance(err, dict) and err.get("message")):
                return f"server {status} without a JSON error message", dt, None, None
            if random_dropout(c) and "dropout_p" in err["message"]:
                return None  # torch's answer is random there; the server refuses random operators
            # torch.ops coerces some ill-typed values (a bool to an int, a number
            # to a tensor) that PyTorch's Python API and the server refuse
            if "error" in t and not c.injected:
                self.note_message(c, err["message"], t["error"])
            if "error" in t or c.injected:
                return None
            # (each output costs its entry too: chunk of an empty dim into 10**6 empty pieces)
            if status == 413 and sum(o.get("nbytes", 0) + 64 for o in t["outputs"]) > OUT_LIMIT // 16:
                return OVER_LIMIT
            rule = next((r for r in self.rules if r["server_refused"] and r["server_refused"] in err["message"]
                         and r["server"] == status), None)
            return f"server {status}, torch ok", dt, None, rule["name"] if rule else None
        if "error" in t:
            rule = next((r for r in self.rules if r["torch_raised"] and r["torch_raised"] in t["error"]
                         and r["server"] == status), None)
            if rule is None:
                return "server 200, torch raised", dt, None, None
            problem = self.check_ref64(c, t, body) if c.float64_stands_in() else None
            if problem:
                return f"{problem[0]} vs torch in float64 (allowlisted torch error)", dt, problem[1], None
            return "server 200, torch raised", dt, None, rule["name"]
        outs = body["outputs"]
        if len(outs) != len(t["outputs"]):
            return "output count mismatch", dt, f"server {len(outs)}, torch {len(t['outputs'])}", None
        ref = t.get("ref64") or []
        for i, (o, w) in enumerate(zip(outs, t["outputs"])):
            if unspecified_output(c, i):
                continue
            if "value" in w:  # a non-tensor return: the same JSON value
                if o.get("value") != w["value"] or type(o.get("value")) is not type(w["value"]):
                    return "value mismatch", dt, f"output {i}: server {o.get('value')!r}, torch {w['value']!r}", None
                continue
            if "dtype" not in o:
                return "value mismatch", dt, f"output {i}: server {o.get('value')!r}, torch a tensor", None
            if o["dtype"] != w["dtype"]:
                return "dtype mismatch", w["dtype"], f"output {i}: server {o['dtype']}, torch {w['dtype']}", None
            if o["shape"] != w["shape"]:
                return "shape mismatch", w["dtype"], f"output {i}: server {o['shape']}, torch {w['shape']}", None
            if "data" not in w or UNDEFINED_VALUES.search(c.op) or torch_lstsq_undefined(c, t, outs):
                continue
            r = ref[i]["data"] if i < len(ref) and "data" in ref[i] else None
            got, want = o["data"], w["data"]
            if torch_lstsq_pivot_signs(c) and w["dtype"] in FLOATS:
                got, want = unsigned_zeros(got), unsigned_zeros(want)
            problem = self.compare_values(w["dtype"], got, want, r, i,
                                          max(reduction_atol(c, w["shape"], w["dtype"]),
                                              contraction_atol(c, w["dtype"]),
                                              conditioning_atol(c, w["dtype"], to_array(w["dtype"], w["data"]))))
            if problem and not (w["dtype"] in FLOATS and self.torch_alone_agrees(c, i, w, o["data"], problem[2])):
                return problem[0], w["dtype"], problem[1], None
        return None

    @staticmethod
    def compare_values(dtype, got, want, ref, i, atol_extra=0.0):
        """(kind, detail, where) for disagreeing output values, else None."""
        g, t = to_array(dtype, got), to_array(dtype, want)
        r64 = np.array(ref, np.float64) if ref is not None and dtype in FLOATS else None
        bad = float_mismatch(dtype, g, t, r64, atol_extra) if dtype in FLOATS else g != t
        if not bad.any():
            return None
        kind = mismatch_kind(g, t, bad) if dtype in FLOATS else "value mismatch"
        k = int(np.flatnonzero(bad)[0])
        detail = f"output {i}, element {k}: server {g[k].item()!r}, torch {t[k].item()!r}"
        if r64 is not None:
            detail += f", torch in float64 {r64[k].item()!r}"
        return kind, f"{int(bad.sum())} of {bad.size} elements differ; {detail}", bad

    def torch_alone_agrees(self, c, i, want, got, bad, ref64=False):
        """Whether torch, computing each disagreeing element alone, gives the
        server's value: its vectorized loops and its scalar path differ near
        overflow and on signed zeros (cosh, maximum, gelu). Only for a call that
        is per-element here, as agreeing elements computed alone confirm. With
        ref64, against torch's float64 evaluation (the reference where torch
        has no kernel for the dtype), rounded to the server's dtype."""
        if bad.sum() > 16 or bad.all() or any(isinstance(v, list) for v in c.values()):
            return False
        dtype, shape = want["dtype"], want["shape"]
        t, g = to_array(dtype, want["data"]), to_array(dtype, got)
        good = np.flatnonzero(~bad)
        controls = [(k, t[k]) for k in sorted({int(good[0]), int(good[-1])})]  # a scan fails the last
        for k, expect in controls + [(k, g[k]) for k in np.flatnonzero(bad)]:
            probe = c.element(np.unravel_index(k, shape), shape)
            ans = self.torch.run(probe.for_torch()) if probe else {}
            outs = ans.get("ref64" if ref64 else "outputs")
            if not outs or (not ref64 and outs[i]["dtype"] != dtype) or len(outs[i].get("data", ())) != 1:
                return False
            if ref64:
                if self.compare_values(dtype, [expect.item()], outs[i]["data"], outs[i]["data"], i):
                    return False
            elif not agree(to_array(dtype, outs[i]["data"]), np.array([expect]), *TOL[dtype])[0]:
                return False
        return True

    def check_ref64(self, c, t, body):
        """For an allowlisted "torch raised": (kind, detail) where the server's
        values are not torch's float64 evaluation rounded to the server's dtype
        (nor that of each disagreeing element alone, as for torch's own)."""
        for i, (o, r) in enumerate(zip(body["outputs"], t.get("ref64") or [])):
            if o["shape"] != r["shape"]:
                return "shape mismatch", f"output {i}: server {o['shape']}, torch {r['shape']}"
            if "data" in r:
                problem = self.compare_values(o["dtype"], o["data"], r["data"], r["data"], i,
                                              narrow_input_atol(c, o["dtype"], r["data"]))
                if problem and not (o["dtype"] in FLOATS and self.torch_alone_agrees(
                        c, i, {"dtype": o["dtype"], "shape": r["shape"], "data": r["data"]}, o["data"],
                        problem[2], ref64=True)):
                    return problem[:2]
        return None

    # -- the same call through binary /v1 and /v2
    def cross_check(self, c, schema, v1, reply):
        """The call again with binary tensors and through /v2: the same answer
        as JSON /v1, bit for bit (only contiguous calls: views need /v1/run)."""
        if c.has_views():
            return
        status, body, _, _ = reply
        if status == 200 and any("value" in o for o in (body or {}).get("outputs", ())):
            return  # non-tensor returns (equal, allclose) have no binary form
        if status == 413:
            return  # the JSON text outgrew the output limit, which binary bytes may not (as the 413 says)
        want = self.outputs_of(status, body)
        path, header, hl, data = c.binary_request()
        s2, _, raw2, resp = self.post(path, data, {"Content-Type": "application/octet-stream",
                                                    "Inference-Header-Content-Length": str(hl),
                                                    "Accept": "application/octet-stream"})
        got = self.binary_outputs(s2, resp)
        self.count_cross("binary /v1", c, want, got, lambda: {
            "request": f"POST {path} (binary tensors) header {json.dumps(header, separators=(',', ':'))}",
            "JSON request": v1,
            "JSON /v1": describe_server(status, body, ""),
            "binary /v1": f"{s2} " + (self.describe_outputs(got[1]) if got[1] else raw2[:300])})
        if any(isinstance(v, list) for v in c.values()):
            return  # a Tensor[] is not one Open Inference Protocol input
        path, b = c.v2_request(schema)
        text = json.dumps(b, separators=(",", ":"))
        s3, b3, raw3, _ = self.post(path, text, {"Content-Type": "application/json"})
        self.count_cross("/v2", c, want, self.outputs_of(s3, b3), lambda: {
            "request": f"POST {path} {text}",
            "JSON request": v1,
            "JSON /v1": describe_server(status, body, ""),
            "/v2": describe_server(s3, b3, raw3)})

    @staticmethod
    def outputs_of(status, body):
        if status != 200 or body is None:
            return status, None
        return status, [((o.get("dtype") or OIP_DTYPE.get(o.get("datatype"))), o["shape"],
                         to_array(o.get("dtype") or OIP_DTYPE[o["datatype"]], o["data"])) for o in body["outputs"]]

    @staticmethod
    def binary_outputs(status, resp):
        if status != 200 or resp is None:
            return status, None
        if "Inference-Header-Content-Length" not in resp.headers:  # no tensor to send (unbind of an
            return Runner.outputs_of(status, resp.json())          # empty dim): the answer is JSON
        hl = int(resp.headers["Inference-Header-Content-Length"])
        header = json.loads(resp.content[:hl])
        off, outs = hl, []
        for o in header["outputs"]:
            size = o["parameters"]["binary_data_size"]
            raw = resp.content[off:off + size]
            off += size
            d = o["dtype"]
            if d == "bfloat16":
                a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            else:
                a = np.frombuffer(raw, np.dtype(NP_DTYPE[d]).newbyteorder("<"))
                a = a.astype(np.float64 if d in FLOATS else np.bool_ if d == "bool" else np.int64)
            outs.append((d, o["shape"], a))
        return status, outs

    @staticmethod
    def describe_outputs(outs):
        return "; ".join(f"{d}{s} {short(a.tolist())}" for d, s, a in outs)

    def count_cross(self, path, c, want, got, example):
        n = self.tally.counts
        n[f"cross {path}"] += 1
        same = want[0] == got[0] and (want[1] is None) == (got[1] is None)
        if same and want[1] is not None:
            same = len(want[1]) == len(got[1]) and all(
                d1 == d2 and s1 == s2 and a1.shape == a2.shape and bool(np.all(
                    (a1 == a2) & (np.signbit(a1) == np.signbit(a2)) | (np.isnan(a1) & np.isnan(a2))
                    if d1 in FLOATS else a1 == a2))
                for (d1, s1, a1), (d2, s2, a2) in zip(want[1], got[1]))
        if not same:
            n["cross differ"] += 1
            dt = c.first_dtype()
            key = f"{c.op}: {path} differs from JSON /v1" + (f" ({dtype_group(dt)})" if dt else "")
            self.tally.add(key, len(json.dumps(c.for_torch())), example)

    def close(self):
        self.torch.close()
        try:
            self.server.stop()
        except AssertionError as e:  # a sanitizer report or a bad exit status
            self.tally.add("opdispatchd: unclean exit", 0, lambda: {"server": str(e)[-2000:]})


def summary(runner, args, ops, skipped, done, elapsed):
    n, classes = runner.tally.counts, runner.tally.classes
    compared = n["agree"] + n["allowed"] + n["disagree"]
    failing = {k: v for k, v in classes.items() if not v["allowed"]}
    lines = [f"difftest: {sum(done.values())} calls on {len(ops)} operator overloads in {elapsed:.0f} s "
             f"(seed {args.seed}); torch ok {n['torch ok']}, torch raised {n['torch raised']}, "
             f"torch crashed {n['torch crashed']} (skipped), over the output limit {n['over output limit']}; "
             f"{n['non-contiguous']} with non-contiguous inputs, {n['invalid']} with an invalid argument",
             f"agreement: {100.0 * (n['agree'] + n['allowed']) / max(compared, 1):.2f}% of {compared} "
             f"calls ({n['allowed']} allowlisted, {n['disagree']} disagreeing); cross-checks: "
             f"{n['cross binary /v1']} binary /v1, {n['cross /v2']} /v2, {n['cross differ']} differing; "
             f"{len(failing)} failing classes"]
    msgs, listed = runner.tally.messages, getattr(args, "messages", False)  # opinfo.py's args have no --messages
    if n["both refused"]:
        lines.append(f"messages: {n['same message']} of {n['both refused']} refusals in torch's words; "
                     f"{len(msgs)} operators said other words" + ("" if listed else " (--messages lists them)"))
    for op, m in sorted(msgs.items()) if listed else ():
        lines.append(f"[words] {op}: {m['count']} calls; server {m['server']!r}; torch {m['torch']!r}")
        lines.append(f"    request: POST {' '.join(json.dumps(x, separators=(',', ':')) for x in m['case'].v1_request())}"[:1500])
    for name, why in sorted(skipped.items()):
        lines.append(f"skipped {name}: {why}")
    short_ops = [s.model for s in ops if done[s.model] < args.n]
    if short_ops:
        lines.append(f"{len(short_ops)} overloads below --n {args.n} when time ran out "
                     f"(fewest: {min(done[o] for o in short_ops)} calls)")
    ordered = sorted(classes.items(), key=lambda kv: (bool(kv[1]["allowed"]), kv[0][0]))
    for (key, _), c in ordered:
        if not c["allowed"]:
            lines.append(f"\n[FAIL] {key}: {c['count']} calls")
            lines.extend(f"    {field}: {val}" for field, val in c["example"].items())
    lines.append("")  # allowed classes one line each: the allowlist documents them
    lines.extend(f"[allowed by '{c['allowed']}'] {key}: {c['count']} calls"
                 for (key, _), c in ordered if c["allowed"])
    print("\n".join(lines), flush=True)
    if args.json_out:
        pathlib.Path(args.json_out).write_text(json.dumps({
            "seed": args.seed, "elapsed_s": elapsed, "counts": n, "per_op": runner.tally.per_op,
            "skipped": skipped, "classes": [{"class": key, "count": c["count"], "allowed": c["allowed"],
                                             "example": c["example"]} for (key, _), c in ordered]}, indent=1))
    return 1 if failing else 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--torch-worker":
        return torch_worker(int(sys.argv[2]))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=500, help="calls per operator overload (default 500)")
    p.add_argument("--seed", type=int, help="replays a run (default: a fresh one, printed)")
    p.add_argument("--ops", help="only overloads whose name (add.Tensor) matches this regex")
    p.add_argument("--server", default=os.environ.get("OD_SERVER", str(ROOT / "build" / "opdispatchd")))
    p.add_argument("--time-limit", type=float, help="wall-clock seconds for the whole run")
    p.add_argument("--json-out", help="also write the counts and classes here")
    p.add_argument("--messages", action="store_true",
                   help="list the operators whose refusals were not in torch's words, one example each")
    args = p.parse_args()
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "little")
    print(f"difftest seed {args.seed} (replay with --seed {args.seed})", flush=True)
    start = time.monotonic()
    np.seterr(all="ignore")
    os.environ["OD_SERVER"] = args.server  # read by conftest at import
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    from conftest import Server

    runner = Runner(args, Server)
    runner.deadline = start + args.time_limit - SHUTDOWN_RESERVE if args.time_limit else math.inf
    try:
        ops, skipped = runner.load_ops(args.ops)
        done = runner.run(ops)
    finally:
        runner.close()
    return summary(runner, args, ops, skipped, done, time.monotonic() - start)


if __name__ == "__main__":
    sys.exit(main())
