"""Autograd over HTTP: every backward formula against PyTorch 1.13's gradients
(Debian's python3-torch, run by tools/torch_ref.py) and against central
finite differences of the server's own forward, in float64 on fresh random
inputs with broadcasting, 0-dim and empty tensors; grad_fn names; the
engine's rules (retain_graph, the version counter, leaves in place, no_grad,
integer tensors); and a thousand backward passes leaving nothing behind."""

import json
import uuid

import numpy as np
import pytest

from conftest import error_message, from_json, torch_ref, validate


def T(a, rg=False):
    a = np.asarray(a)
    d = {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.reshape(-1).tolist()}
    if rg:
        d["requires_grad"] = True
    return d


class RG:
    """An input that requires grad."""

    def __init__(self, a):
        self.a = np.asarray(a, dtype=np.float64)


def g(rng, *shape, pos=False, away=0.0):
    a = rng.standard_normal(shape)
    if pos:
        a = np.abs(a) + 0.5
    if away:
        a = np.where(np.abs(a) < away, np.sign(a + 1e-12) * away, a)
    return a


def spread(rng, *shape, offset=0.0):
    """Values whose every coordinate differs from every other's by at least 0.15 (a shuffled grid of step
    0.5, jittered by < 0.1, shifted by offset): a fractional-p distance's gradient |d|^(p-1) is steep
    near d = 0, where central differences of step 1e-6 lose the 1e-4 agreement asked of them."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.5 + offset + rng.random(n) * 0.1 - 2.0).reshape(shape)


def make_cases(rng):
    """(op, args, kwargs, out index); RG marks inputs that require grad."""
    a23 = lambda: RG(g(rng, 2, 3))
    C = []
    add = lambda op, *args, out=0, **kw: C.append((op, list(args), kw, out))
    add("add.Tensor", a23(), RG(g(rng, 3)), alpha=2)
    add("add.Scalar", a23(), 3)
    add("sub.Tensor", a23(), RG(g(rng, 2, 1)), alpha=0.5)
    add("sub.Scalar", a23(), 1.5)
    add("mul.Tensor", a23(), RG(g(rng, 3)))
    add("mul.Tensor", RG(g(rng)), RG(g(rng, 3)))  # 0-dim times a vector
    add("mul.Scalar", a23(), 2.5)
    add("div.Tensor", a23(), RG(g(rng, 2, 3, away=0.5)))
    add("div.Scalar", a23(), 4.0)
    add("div.Tensor_mode", a23(), RG(g(rng, 3, away=0.5)), rounding_mode="floor")
    add("pow.Tensor_Scalar", RG(g(rng, 2, 3, pos=True)), 2.5)
    add("pow.Tensor_Tensor", RG(g(rng, 2, 3, pos=True)), RG(g(rng, 3)))
    add("pow.Scalar", 2.0, RG(g(rng, 2, 3)))
    add("maximum", a23(), a23())
    add("minimum", a23(), RG(g(rng, 3)))
    add("fmod.Tensor", a23(), RG(g(rng, 2, 3, away=0.7)))
    add("fmod.Scalar", a23(), 0.7)
    add("remainder.Tensor", a23(), RG(g(rng, 2, 3, away=0.7)))
    add("remainder.Scalar", a23(), 0.7)
    cond = rng.random((2, 3)) < 0.5
    add("where.self", cond, a23(), RG(g(rng, 3)))
    add("where.ScalarOther", cond, a23(), 0.5)
    add("where.ScalarSelf", cond, 0.5, a23())
    for op in ("neg", "abs", "exp", "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "silu", "expm1",
               "erf", "floor", "ceil", "round", "trunc", "sign"):
        add(op, RG(g(rng, 2, 3, away=0.05)))
    for op in ("log", "sqrt", "rsqrt", "log1p", "log2", "log10"):
        add(op, RG(g(rng, 2, 3, pos=True)))
    for op in ("atan", "asinh", "sinh", "cosh", "exp2", "erfc", "reciprocal", "deg2rad", "rad2deg", "frac",
               "sgn", "hardsigmoid", "hardswish", "mish"):
        add(op, RG(g(rng, 2, 3, away=0.05)))  # away from kinks (frac, hardswish at 0 is smooth anyway)
    for op in ("acos", "asin", "atanh", "tan"):
        add(op, RG(np.tanh(g(rng, 2, 3)) * 0.9))  # inside (-0.9, 0.9)
    add("acosh", RG(g(rng, 2, 3, pos=True) + 1))
    add("atan2", a23(), RG(g(rng, 3, away=0.2)))
    add("hypot", a23(), RG(g(rng, 2, 1, away=0.2)))
    add("copysign.Tensor", RG(g(rng, 2, 3, away=0.05)), RG(g(rng, 3, away=0.05)))
    add("copysign.Scalar", RG(g(rng, 2, 3, away=0.05)), -1.5)
    add("logaddexp", a23(), RG(g(rng, 3)))
    add("logaddexp2", a23(), RG(g(rng, 2, 1)))
    add("xlogy.Tensor", a23(), RG(g(rng, 3, pos=True)))
    add("fmax", a23(), RG(g(rng, 3)))
    add("fmin", a23(), RG(g(rng, 2, 1)))
    add("lgamma", RG(g(rng, 2, 3, pos=True) + 0.1))
    add("sinc", RG(g(rng, 2, 3, away=0.05)))
    add("square", a23())  # through pow: CompositeImplicit kernels differentiate by decomposition
    add("rsub.Tensor", a23(), RG(g(rng, 3)), alpha=2)
    add("true_divide.Tensor", a23(), RG(g(rng, 2, 3, away=0.5)))
    add("exp", RG(g(rng)))  # 0-dim
    add("gelu", a23(), approximate="tanh")
    add("clamp", RG(g(rng, 3, 4)), -0.5, 0.5)
    add("clamp", RG(g(rng, 3, 4)), min=-0.3)
    add("clamp.Tensor", RG(g(rng, 3, 4)), RG(g(rng, 4) - 0.5), RG(g(rng, 3, 1) + 0.5))
    add("clamp_min", RG(g(rng, 3, 4)), -0.2)
    add("clamp_max", RG(g(rng, 3, 4)), 0.3)
    add("clamp_min.Tensor", RG(g(rng, 3, 4)), RG(g(rng, 4)))
    add("clamp_max.Tensor", RG(g(rng, 3, 4)), RG(g(rng, 3, 1)))
    add("sum", a23())
    add("sum", RG(g(rng, 0, 3)))  # empty
    add("sum.dim_IntList", RG(g(rng, 2, 3, 2)), [1])
    add("sum.dim_IntList", RG(g(rng, 2, 3, 2)), [0, 2], True)
    add("mean", a23())
    add("mean.dim", RG(g(rng, 2, 3, 2)), [-1])
    add("amax", RG(g(rng, 3, 4)), [1])
    add("amin", RG(g(rng, 3, 4)), [0], True)
    add("var", RG(g(rng, 3, 4)))
    add("var.dim", RG(g(rng, 3, 4)), [1])
    add("var.correction", RG(g(rng, 3, 4)), [0], correction=0, keepdim=True)
    add("std", RG(g(rng, 3, 4)))
    add("std.dim", RG(g(rng, 3, 4)), [1], False, True)
    add("std.correction", RG(g(rng, 3, 4)), [0], correction=2)
    add("var_mean", RG(g(rng, 3, 4)), out=0)
    add("var_mean.dim", RG(g(rng, 3, 4)), [1], out=1)
    add("var_mean.correction", RG(g(rng, 3, 4)), [0], correction=0, keepdim=True, out=0)
    add("std_mean", RG(g(rng, 2, 5)), out=0)
    add("std_mean.dim", RG(g(rng, 3, 4)), [0], out=1)
    add("std_mean.correction", RG(g(rng, 3, 4)), [1], correction=0, out=0)
    add("prod", a23())
    add("prod", RG(np.array([[1.5, 0.0, -2.0], [0.5, 3.0, 1.25]])))  # one zero
    add("prod", RG(np.array([0.0, 2.0, 0.0])))  # two zeros
    add("prod.dim_int", RG(np.array([[1.5, 0.0, -2.0], [0.0, 3.0, 0.0], [1.0, 2.0, -0.5]])), 1)
    add("prod.dim_int", RG(g(rng, 2, 3, 2)), 0, True)
    add("max", a23())
    add("min", RG(g(rng, 4)))
    add("max.dim", RG(g(rng, 3, 4)), 1)
    add("min.dim", RG(g(rng, 3, 4)), 0, True)
    add("max.dim", RG(g(rng)), 0)  # 0-dim
    add("nansum", RG(g(rng, 3, 4)), [1])
    add("nansum", a23())
    add("logsumexp", RG(g(rng, 3, 4)), [1])
    add("logsumexp", RG(g(rng, 2, 3, 2)), [0, 2], True)
    add("tril", RG(g(rng, 3, 4)), 1)
    add("triu", RG(g(rng, 2, 3, 4)), -1)
    # the parameterised activations (inputs away from their kinks)
    add("hardtanh", RG(g(rng, 3, 4, away=0.05)), -0.7, 0.6)
    add("elu", RG(g(rng, 3, 4, away=0.05)), 1.3, 0.8, 1.5)
    add("celu", RG(g(rng, 3, 4, away=0.05)), 0.7)
    add("selu", RG(g(rng, 3, 4, away=0.05)))  # through elu: EluBackward0, as in torch
    add("leaky_relu", RG(g(rng, 3, 4, away=0.05)), 0.2)
    add("softplus", RG(g(rng, 3, 4)), 2.0, 1.5)
    add("softshrink", RG(g(rng, 3, 4, away=0.05) * 2), 0.4)
    add("hardshrink", RG(g(rng, 3, 4, away=0.05) * 2), 0.4)
    add("threshold", RG(g(rng, 3, 4, away=0.05)), 0.3, -2.0)
    add("log_sigmoid_forward", RG(g(rng, 3, 4)), out=0)
    add("log_sigmoid", RG(g(rng, 2, 3)))
    add("logit", RG(np.tanh(g(rng, 3, 4)) * 0.45 + 0.5))
    add("logit", RG(np.tanh(g(rng, 3, 4)) * 0.45 + 0.5), 0.2)
    add("nan_to_num", a23())
    add("erfinv", RG(np.tanh(g(rng, 3, 4)) * 0.9))
    add("polygamma", 2, RG(g(rng, 3, 4, pos=True)))
    add("polygamma", 0, RG(g(rng, 2, 3, pos=True)))
    add("_softmax", RG(g(rng, 3, 4)), 1, False)
    add("_log_softmax", RG(g(rng, 3, 4)), 0, False)
    add("softmax.int", RG(g(rng, 2, 3, 4)), -1)
    add("log_softmax.int", RG(g(rng, 2, 3, 4)), 1)
    add("native_layer_norm", RG(g(rng, 2, 3, 4)), [4], RG(g(rng, 4)), RG(g(rng, 4)), 1e-5)
    add("layer_norm", RG(g(rng, 2, 3, 4)), [3, 4], RG(g(rng, 3, 4)), RG(g(rng, 3, 4)))
    add("mm", RG(g(rng, 2, 3)), RG(g(rng, 3, 4)))
    add("bmm", RG(g(rng, 2, 2, 3)), RG(g(rng, 2, 3, 4)))
    add("addmm", RG(g(rng, 4)), RG(g(rng, 2, 3)), RG(g(rng, 3, 4)), beta=0.5, alpha=2)
    add("mv", RG(g(rng, 3, 4)), RG(g(rng, 4)))
    add("addmv", RG(g(rng, 1)), RG(g(rng, 3, 4)), RG(g(rng, 4)), beta=0.5, alpha=2)
    add("addr", RG(g(rng, 4)), RG(g(rng, 3)), RG(g(rng, 4)), beta=2, alpha=0.5)
    add("baddbmm", RG(g(rng, 3, 1)), RG(g(rng, 2, 3, 4)), RG(g(rng, 2, 4, 5)), beta=0.5, alpha=2)
    add("addbmm", RG(g(rng, 3, 5)), RG(g(rng, 2, 3, 4)), RG(g(rng, 2, 4, 5)), beta=2, alpha=0.5)
    add("dot", RG(g(rng, 5)), RG(g(rng, 5)))
    add("matmul", RG(g(rng, 2, 3, 4)), RG(g(rng, 4, 5)))
    add("matmul", RG(g(rng, 4)), RG(g(rng, 4, 2)))
    add("linear", RG(g(rng, 2, 3)), RG(g(rng, 4, 3)), RG(g(rng, 4)))
    add("cat", [RG(g(rng, 2, 3)), RG(g(rng, 2, 1))], 1)
    add("stack", [RG(g(rng, 2, 3)), RG(g(rng, 2, 3))], 0)
    add("clone", a23())
    add("_to_copy", a23(), dtype="float64")
    add("index_select", RG(g(rng, 4, 3)), 0, np.array([2, 0, 2]))
    add("index_select", RG(g(rng, 2, 5, 3)), 1, np.array([4, 4, 1, 0]))
    add("embedding", RG(g(rng, 5, 3)), np.array([[1, 4], [1, 0]]))
    add("gather", RG(g(rng, 2, 3)), 1, np.array([[0, 2, 2, 1], [1, 0, 1, 1]]))
    add("gather", RG(g(rng, 3, 2)), -2, np.array([[2, 0]]))
    # scatter's targets are unique per row: an overwritten src has no gradient
    add("scatter.src", a23(), 1, np.array([[2, 0], [1, 2]]), RG(g(rng, 2, 2)))  # torch: src as index
    add("scatter.value", a23(), 0, np.array([[1, 0, 1]]), 1.5)
    add("scatter_add", a23(), 1, np.array([[2, 2, 0], [1, 0, 1]]), RG(g(rng, 2, 3)))
    mask = rng.random((2, 1, 3)) < 0.5  # broadcasts self [2, 3] to [2, 2, 3]
    add("masked_fill.Scalar", a23(), mask, 0.5)
    add("masked_fill.Tensor", a23(), mask, RG(g(rng)))
    add("masked_select", a23(), mask)
    add("take", a23(), np.array([[5, -1, 0], [2, 2, -6]]))
    # advanced indexing (composites: differentiated through take / index_copy / index_add)
    add("index.Tensor", RG(g(rng, 4, 3)), [None, np.array([2, 0, -1, 2])])
    add("index.Tensor", RG(g(rng, 3, 4, 2)), [np.array([[0, 2]]), None, np.array([1, 0])])
    add("index.Tensor", RG(g(rng, 3, 4)), [np.array([True, False, True])])
    add("index_put", RG(g(rng, 4, 3)), [np.array([1, 3, 1])], RG(g(rng, 3, 3)), True)
    add("index_put", RG(g(rng, 4, 3)), [None, np.array([2, 0])], RG(g(rng, 4, 2)), False)
    add("index_add", a23(), 1, np.array([2, 0, 2]), RG(g(rng, 2, 3)), alpha=1.5)
    add("index_add", a23(), 0, np.array([1], dtype=np.int32), RG(g(rng, 1, 3)))  # int32 index
    add("index_copy", a23(), 1, np.array([2, 0]), RG(g(rng, 2, 2)))
    add("index_fill.int_Scalar", a23(), 1, np.array([2, -3]), 0.5)
    for red in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            # src values distinct and away from 0: amax/amin ties split the
            # gradient (finite differences see a kink there), prod divides
            src = rng.permutation(6).reshape(2, 3) * 0.37 - 1.0 + rng.uniform(0, 0.01, (2, 3))
            add("scatter_reduce.two", a23(), 1, np.array([[2, 2, 0], [1, 1, 1]]), RG(src),
                red, include_self=inc)
    add("view", a23(), [3, 2])
    add("reshape", a23(), [6])
    add("transpose.int", RG(g(rng, 2, 3, 4)), 0, 2)
    add("permute", RG(g(rng, 2, 3, 4)), [2, 0, 1])
    add("t", a23())
    add("select.int", RG(g(rng, 2, 3)), 1, -1)
    add("slice.Tensor", RG(g(rng, 5, 3)), 0, 1, 5, 2)
    add("expand", RG(g(rng, 3, 1)), [2, 3, 4])
    add("squeeze", RG(g(rng, 1, 3, 1)))
    add("squeeze.dim", RG(g(rng, 1, 3)), 0)
    add("unsqueeze", RG(g(rng, 2, 3)), 1)
    add("alias", a23())
    add("lift_fresh", a23())
    add("_reshape_alias", a23(), [3, 2], [2, 1])  # what reshape emits: its formula is a reshape
    add("_unsafe_view", a23(), [6])
    add("constant_pad_nd", RG(g(rng, 2, 3, 4)), [1, 2, -1, 1], 0.5)
    add("constant_pad_nd", a23(), [-1, 0])  # cropping only
    add("repeat", a23(), [2, 1, 3])
    add("flip", RG(g(rng, 2, 3, 4)), [0, -1])
    add("roll", RG(g(rng, 2, 3, 4)), [1, -2], [0, 2])
    add("roll", a23(), [4])  # flattened
    # scans and sorting (ties have probability zero in random floats)
    add("cumsum", RG(g(rng, 3, 4)), 1)
    add("cumsum", RG(g(rng)), 0)  # 0-dim
    add("cumsum", RG(g(rng, 2, 3)), -2, dtype="float64")
    add("cumprod", RG(g(rng, 3, 4)), 1)
    z = g(rng, 3, 6)
    z[0, 2] = 0.0  # one zero
    z[1, 1] = z[1, 4] = 0.0  # two zeros
    z[2, 0] = z[2, 1] = 0.0  # adjacent zeros, the first leading
    add("cumprod", RG(z), 1)
    add("logcumsumexp", RG(g(rng, 3, 4)), 0)
    add("cummax", RG(g(rng, 3, 5)), 1)
    add("cummin", RG(g(rng, 4, 3)), 0)
    add("sort", RG(g(rng, 3, 5)), 1, True)
    add("sort.stable", RG(g(rng, 4, 3)), stable=True, dim=0)
    add("topk", RG(g(rng, 3, 6)), 2, 1, False)
    add("kthvalue", RG(g(rng, 3, 5)), 2, 1)
    add("kthvalue", RG(g(rng, 4, 3)), 3, 0, True)
    for op, extra in (("cumprod", [0]), ("logcumsumexp", [0]), ("cummax", [0]), ("sort", []), ("topk", [1]),
                      ("kthvalue", [1])):
        add(op, RG(g(rng)), *extra)  # 0-dim: the gradient passes through
    add("cumsum", RG(g(rng, 1, 4)), 0)  # a dim of size 1
    # lerp, addcmul, addcdiv (broadcast operands), norms, median, mode
    add("lerp.Scalar", a23(), RG(g(rng, 3)), 0.3)
    add("lerp.Scalar", a23(), a23(), 0.8)
    add("lerp.Tensor", a23(), RG(g(rng, 3)), RG(rng.random((2, 1))))
    add("addcmul", RG(g(rng, 3)), a23(), RG(g(rng, 2, 1)), value=0.5)
    add("addcdiv", a23(), RG(g(rng, 3)), RG(g(rng, 2, 3, away=0.5)), value=-2)
    for p in (2, 1, 3, 1.5, 0.5):  # (the inf norms: test_ternary_reductions.py)
        add("linalg_vector_norm", RG(g(rng, 3, 4, away=0.1)), p, [1])
        add("norm.ScalarOpt_dim", RG(g(rng, 3, 4, away=0.1)), p, [0], True)
    add("norm.Scalar", RG(g(rng, 3, 4)), 2)
    add("norm.Scalar", RG(g(rng, 3, 4, away=0.1)), 0)
    add("norm.ScalarOpt_dtype", RG(g(rng, 2, 3)), 3, dtype="float64")
    add("norm.ScalarOpt_dim_dtype", RG(g(rng, 2, 3)), 2, [1], False, dtype="float64")
    add("linalg_vector_norm", RG(np.zeros((2, 3))), 2)  # norm 0: the gradient is 0
    # (ties have no finite differences: tests/integration/test_ternary_reductions.py
    # checks their gradients against torch)
    add("median", RG(g(rng, 3, 5)))
    add("nanmedian", RG(g(rng, 4)))
    add("median.dim", RG(g(rng, 3, 4)), 1)
    add("median.dim", RG(g(rng, 4, 3)), 0, True)
    add("nanmedian.dim", RG(g(rng, 3, 4)), 1)
    add("mode", RG(g(rng, 3, 4)), 1)
    add("mode", RG(g(rng, 3, 4)), 0, True)
    # LAPACK (well-conditioned A, positive-definite for cholesky)
    well = lambda *sh: g(rng, *sh) + sh[-1] * np.eye(sh[-1])
    pd = lambda *sh: (lambda x: x @ np.swapaxes(x, -1, -2) + sh[-1] * np.eye(sh[-1]))(g(rng, *sh))
    add("linalg_inv_ex", RG(well(3, 3)))
    add("linalg_inv", RG(well(2, 3, 3)))
    add("_linalg_det", RG(well(3, 3)))
    add("linalg_det", RG(well(2, 3, 3)))
    add("_linalg_slogdet", RG(well(3, 3)), out=1)
    add("linalg_slogdet", RG(well(2, 2, 2)), out=1)
    add("linalg_cholesky_ex", RG(pd(3, 3)))
    add("linalg_cholesky", RG(pd(2, 3, 3)), upper=True)
    add("_linalg_solve_ex", RG(well(3, 3)), RG(g(rng, 3, 2)))
    add("linalg_solve", RG(well(2, 3, 3)), RG(g(rng, 3)))
    add("linalg_solve", RG(well(3, 3)), RG(g(rng, 2, 3)), left=False)
    add("linalg_solve", RG(well(2, 1, 3, 3)), RG(g(rng, 2, 3, 1)))
    add("linalg_solve_triangular", RG(well(3, 3)), RG(g(rng, 3, 2)), upper=True)
    add("linalg_solve_triangular", RG(well(2, 3, 3)), RG(g(rng, 2, 3)), upper=False, left=False)
    add("linalg_solve_triangular", RG(well(2, 1, 3, 3)), RG(g(rng, 4, 3, 1)), upper=False, unitriangular=True)
    # QR is deterministic (Householder, LAPACK's signs on both sides): Q and R each
    for shape, mode in (((4, 3), "reduced"), ((3, 5), "reduced"), ((2, 3, 3), "complete"), ((2, 5), "complete")):
        add("linalg_qr", RG(g(rng, *shape)), mode, out=0)
        add("linalg_qr", RG(g(rng, *shape)), mode, out=1)
    # the sign-free outputs of svd / eigh here; U S Vh and V diag(L) V^T in test_linalg_gauge_invariant_losses
    add("_linalg_svd", RG(g(rng, 4, 3)), out=1)
    add("_linalg_svd", RG(g(rng, 2, 3, 5)), True, out=1)
    add("linalg_svd", RG(g(rng, 3, 3)), False, out=1)
    sym = lambda *sh: (lambda x: x + np.swapaxes(x, -1, -2))(g(rng, *sh))
    add("_linalg_eigh", RG(sym(3, 3)), out=0)
    add("linalg_eigh", RG(sym(2, 4, 4)), "U", out=0)
    # scatters (composites with torch's grad_fn), padding, round.decimals
    add("slice_scatter", RG(g(rng, 4, 5)), RG(g(rng, 2, 5)), 0, 1, 3)
    add("slice_scatter", RG(g(rng, 4, 5)), RG(g(rng, 4, 2)), 1, None, None, 3)
    add("select_scatter", RG(g(rng, 4, 5)), RG(g(rng, 4)), 1, -2)
    add("rot90", RG(g(rng, 3, 4, 2)), 3, [2, 0])
    add("masked_scatter", RG(g(rng, 3, 4)), rng.random(4) < 0.5, RG(g(rng, 14)))
    add("put", RG(g(rng, 3, 4)), np.array([3, -1, 7]), RG(g(rng, 3)))
    add("put", RG(g(rng, 3, 4)), np.array([[3, 3], [7, 0]]), RG(g(rng, 4)), True)
    add("index_fill.int_Tensor", a23(), 1, np.array([0, 2, 2]), RG(g(rng)))
    add("round.decimals", RG(np.round(g(rng, 2, 3), 1) + 0.0123), decimals=1)
    for nd, pad in ((1, [2, -1]), (2, [1, 3, -1, 2]), (3, [0, 2, 1, 1, 2, 0])):
        for kind in ("reflection", "replication"):
            add(f"{kind}_pad{nd}d", RG(g(rng, *((2,) + (4,) * nd))), pad)
    # batch / instance / group norm (running statistics are plain arrays: the forward writes them)
    add("native_batch_norm", RG(g(rng, 4, 3, 5)), RG(g(rng, 3)), RG(g(rng, 3)), None, None, True, 0.1, 1e-5)
    add("native_batch_norm", RG(g(rng, 5, 2)), None, None, g(rng, 2), g(rng, 2, pos=True), True, 0.1, 1e-5)
    add("native_batch_norm", RG(g(rng, 3, 2, 2)), RG(g(rng, 2)), RG(g(rng, 2)), g(rng, 2), g(rng, 2, pos=True),
        False, 0.1, 1e-5)
    add("batch_norm", RG(g(rng, 3, 2, 2, 2)), RG(g(rng, 2)), None, g(rng, 2), g(rng, 2, pos=True), True, 0.1,
        1e-5, False)
    add("instance_norm", RG(g(rng, 2, 3, 4)), RG(g(rng, 3)), RG(g(rng, 3)), None, None, True, 0.1, 1e-5, False)
    add("native_group_norm", RG(g(rng, 2, 6, 5)), RG(g(rng, 6)), RG(g(rng, 6)), 2, 6, 5, 3, 1e-5)
    add("group_norm", RG(g(rng, 3, 4, 2, 2)), 2, RG(g(rng, 4)), None)
    add("group_norm", RG(g(rng, 2, 4, 3)), 4)
    # attention: with an input requiring grad, the composite's math path records (both outputs)
    qkv = lambda L, S: (RG(g(rng, 2, L, 3)), RG(g(rng, 2, S, 3)), RG(g(rng, 2, S, 4)))
    add("_scaled_dot_product_attention", *qkv(3, 5), need_attn_weights=True)
    add("_scaled_dot_product_attention", *qkv(3, 5), need_attn_weights=True, out=1)
    # a random boolean mask with one kept key per query row at least: a row masked
    # entirely is NaN in torch and here, and finite differences of NaN fail (~3 % of seeds)
    keep = rng.random((4, 4)) < 0.7
    keep[np.arange(4), rng.integers(0, 4, 4)] = True
    add("_scaled_dot_product_attention", *qkv(4, 4), keep, is_causal=False)
    add("_scaled_dot_product_attention", *qkv(4, 3), is_causal=True)
    add("_scaled_dot_product_attention", RG(g(rng, 2, 3)), g(rng, 4, 3), RG(g(rng, 4, 2)), RG(g(rng, 2, 4)))
    # losses: the native forwards' formulas (nll_loss_backward, mse_loss_backward) and the composites'
    tgt = lambda *sh, c=4: rng.integers(0, c, sh)
    add("nll_loss_forward", RG(g(rng, 5, 4)), tgt(5), None, 1, -100)
    add("nll_loss_forward", RG(g(rng, 5, 4)), np.array([0, 3, 1, 3, 2]), rng.random(4) + 0.5, 0, 3)
    add("nll_loss_forward", RG(g(rng, 4)), np.array(2), rng.random(4) + 0.5, 2, -100)
    add("nll_loss2d_forward", RG(g(rng, 2, 4, 3, 2)), tgt(2, 3, 2), rng.random(4) + 0.5, 1, 1)
    add("nll_loss2d_forward", RG(g(rng, 2, 4, 3, 2)), tgt(2, 3, 2), None, 0, -100)
    add("nll_loss_nd", RG(g(rng, 2, 4, 3)), tgt(2, 3), None, 2)
    add("cross_entropy_loss", RG(g(rng, 5, 4)), tgt(5), rng.random(4) + 0.5, 1, 2, 0.2)
    add("cross_entropy_loss", RG(g(rng, 3, 4, 2)), RG(rng.random((3, 4, 2))), None, 1, -100, 0.1)
    add("mse_loss", RG(g(rng, 3, 4)), RG(g(rng, 3, 4)), 1)
    add("mse_loss", RG(g(rng, 3, 4)), RG(g(rng, 4)), 2)  # a broadcast target under sum: aten::mse_loss (unlike F.mse_loss) does not expand first
    add("mse_loss", RG(g(rng, 3, 4)), RG(g(rng, 3, 4)), 0)
    add("l1_loss", RG(g(rng, 3, 4, away=0.3)), np.zeros((3, 4)), 1)  # |x - 0| away from its kink
    kinks = lambda: RG(np.sign(g(rng, 3, 4)) * (np.abs(g(rng, 3, 4)) % 0.3 + np.array([0.1, 0.6, 1.2, 2.0])))
    add("smooth_l1_loss", kinks(), np.zeros((3, 4)), 1, 0.45)  # |x| clear of beta and 0
    add("smooth_l1_loss", kinks(), RG(np.zeros((3, 4))), 2, 0.45)
    add("huber_loss", kinks(), RG(np.zeros((3, 4))), 1, 1.0)
    add("huber_loss", kinks(), np.zeros((3, 4)), 0, 0.45)
    # pooling: the native backward ops (shape_pool.c), through the functional composites too
    add("max_pool2d_with_indices", RG(g(rng, 1, 2, 5, 4)), [3, 2], [2, 2], [1, 1], [1, 1], True)
    add("max_pool2d", RG(g(rng, 2, 4, 4)), [2, 2], [1, 1], [1, 0], [2, 1])
    add("max_pool3d_with_indices", RG(g(rng, 1, 1, 3, 4, 3)), [2, 3, 2], [1, 2, 1], [1, 1, 0])
    add("avg_pool2d", RG(g(rng, 1, 2, 5, 4)), [3, 3], [2, 2], [1, 1], True, False)
    add("avg_pool2d", RG(g(rng, 2, 4, 5)), [2, 3], [1, 2], [1, 1], False, True, 4)
    add("avg_pool3d", RG(g(rng, 1, 1, 3, 4, 3)), [2], [1], [1], True, True)
    add("_adaptive_avg_pool2d", RG(g(rng, 1, 2, 5, 6)), [3, 4])
    add("_adaptive_avg_pool3d", RG(g(rng, 1, 3, 4, 3)), [2, 3, 2])
    add("adaptive_max_pool2d", RG(g(rng, 1, 2, 5, 6)), [3, 4])
    add("adaptive_max_pool3d", RG(g(rng, 1, 1, 3, 4, 3)), [2, 3, 2])
    add("max_pool1d", RG(g(rng, 2, 2, 7)), [3], [2], [1])
    add("avg_pool1d", RG(g(rng, 2, 9)), [3], [2], [1])
    add("adaptive_avg_pool2d", RG(g(rng, 1, 2, 3, 3)), [1, 1])
    # upsampling and pixel shuffles (shape_resample.c, composite/resample.c)
    add("upsample_nearest2d", RG(g(rng, 1, 2, 3, 2)), [5, 4])
    add("upsample_nearest1d.vec", RG(g(rng, 1, 2, 4)), None, [1.7])
    add("upsample_bilinear2d", RG(g(rng, 1, 2, 3, 2)), [5, 4], False)
    add("upsample_bilinear2d.vec", RG(g(rng, 1, 1, 3, 3)), None, True, [2.0, 1.5])
    add("upsample_linear1d", RG(g(rng, 2, 1, 4)), [7], True)
    add("upsample_trilinear3d", RG(g(rng, 1, 1, 2, 3, 2)), [3, 4, 3], False)
    add("upsample_nearest3d.vec", RG(g(rng, 1, 1, 2, 2, 3)), [3, 4, 4], None)
    add("pixel_shuffle", RG(g(rng, 1, 8, 2, 3)), 2)
    add("pixel_unshuffle", RG(g(rng, 1, 2, 4, 2)), 2)
    # convolution (ConvolutionBackward0 -> convolution_backward): groups, stride, padding, bias;
    # transposed with output_padding; 3-d; padding='same' with an even kernel (constant_pad_nd first)
    add("convolution", RG(g(rng, 1, 2, 4, 5)), RG(g(rng, 4, 1, 3, 3)), RG(g(rng, 4)), [2, 1], [1], [1], False, [0], 2)
    add("convolution", RG(g(rng, 2, 2, 3)), RG(g(rng, 2, 3, 2)), RG(g(rng, 6)), [2], [0], [1], True, [1], 2)
    add("conv3d", RG(g(rng, 1, 1, 3, 3, 2)), RG(g(rng, 2, 1, 2, 2, 1)), None, [1], [1, 0, 0], [1], 1)
    add("conv1d.padding", RG(g(rng, 1, 2, 5)), RG(g(rng, 3, 2, 4)), RG(g(rng, 3)), [1], "same", [1], 1)
    add("conv_transpose2d.input", RG(g(rng, 1, 2, 2, 3)), RG(g(rng, 2, 2, 2, 2)), None, [2, 1], [0], [1, 0], 1, [1])
    # upsample_bicubic2d and embedding_bag (test_bicubic_bag.py): modes, per_sample_weights,
    # padding_idx, include_last_offset, an empty bag
    add("upsample_bicubic2d", RG(g(rng, 1, 2, 3, 4)), [5, 3], False)
    add("upsample_bicubic2d.vec", RG(g(rng, 2, 1, 3, 3)), None, True, [1.7, 2.0])
    eb_idx, eb_off = np.array([0, 2, 4, 2, 1, 5, 3]), np.array([0, 3, 3, 5])
    for mode in (0, 1, 2):
        add("embedding_bag", RG(g(rng, 6, 3)), eb_idx, eb_off, False, mode)
        add("embedding_bag.padding_idx", RG(g(rng, 6, 3)), eb_idx, np.array([0, 3, 3, 5, 7]), False, mode, False,
            None, True, 2)
    add("embedding_bag", RG(g(rng, 6, 3)), eb_idx, eb_off, False, 0, False, RG(g(rng, 7)), False)
    for mode in (0, 1, 2):  # small integer indices / offsets, read as their promoted type
        add("embedding_bag", RG(g(rng, 6, 3)), eb_idx, eb_off.astype(np.int8), False, mode)
        add("embedding_bag", RG(g(rng, 6, 3)), eb_idx.astype(np.int16), eb_off.astype(np.int32), False, mode)
    add("_embedding_bag", RG(g(rng, 6, 3)), eb_idx, eb_off, False, 0, False, RG(g(rng, 7)), False, 4)
    # bce, bce_with_logits, soft_margin, kl_div, glu, prelu (test_nn_losses2.py): self's and target's gradients
    prob = lambda *sh: rng.random(sh) * 0.8 + 0.1  # clear of bce's clamp at 0 and 1
    add("binary_cross_entropy", RG(prob(3, 4)), RG(prob(3, 4)), None, 1)
    add("binary_cross_entropy", RG(prob(3, 4)), prob(3, 4), rng.random(4) + 0.5, 0)
    add("binary_cross_entropy_with_logits", RG(g(rng, 3, 4)), RG(prob(3, 4)), None, None, 1)
    add("binary_cross_entropy_with_logits", RG(g(rng, 3, 4)), RG(prob(3, 4)), rng.random(4) + 0.5, rng.random(4) * 3, 2)
    add("soft_margin_loss", RG(g(rng, 3, 4)), np.sign(g(rng, 3, 4, away=0.1)), 1)
    add("kl_div", RG(g(rng, 3, 4)), RG(prob(3, 4)), 2)
    add("kl_div", RG(g(rng, 3, 4)), RG(g(rng, 3, 4)), 1, log_target=True)
    add("glu", RG(g(rng, 3, 4)), -1)
    add("glu", RG(g(rng, 4, 2, 3)), 0)
    add("prelu", RG(g(rng, 2, 3, 4, away=0.1)), RG(rng.random(3) - 0.5))
    add("prelu", RG(g(rng, 5, away=0.1)), RG(rng.random(1) - 0.5))
    # folds (each one's gradient is the other) and max_unpool (a gather at the indices)
    add("im2col", RG(g(rng, 1, 2, 4, 5)), [2, 3], [1, 2], [1, 0], [2, 1])
    add("col2im", RG(g(rng, 2, 12, 6)), [5, 7], [2, 2], [1, 1], [0, 0], [2, 2])
    add("col2im", RG(g(rng, 4, 4)), [3, 3], [2, 2], [1, 1], [0, 0], [1, 1])
    ix2 = np.stack([rng.permutation(20)[:6] for _ in range(4)]).reshape(2, 2, 2, 3).astype(np.int64)
    add("max_unpool2d", RG(g(rng, 2, 2, 2, 3)), ix2, [4, 5])
    ix3 = np.stack([rng.permutation(24)[:4] for _ in range(2)]).reshape(2, 1, 2, 2).astype(np.int64)
    add("max_unpool3d", RG(g(rng, 2, 1, 2, 2)), ix3, [2, 3, 4], [2, 2, 2], [0, 0, 0])
    # distances: the native p-norm paths (CdistBackward0 / PdistBackward0), batch broadcast, and the
    # matrix-product path (cdist over 25 rows: _euclidean_dist's EuclideanDistBackward0, then a view)
    for p in (1.0, 2.0, 0.5, 3.0):
        add("cdist", RG(spread(rng, 4, 3)), RG(spread(rng, 5, 3, offset=0.25)), p)
    add("cdist", RG(g(rng, 2, 1, 3, 4)), RG(g(rng, 2, 5, 4)), 1.5)
    add("cdist", RG(g(rng, 27, 3)), RG(g(rng, 4, 3)))
    add("_euclidean_dist", RG(g(rng, 3, 4)), RG(g(rng, 5, 4)))
    add("_cdist_forward", RG(g(rng, 27, 3)), RG(g(rng, 2, 4, 3)), 2.0, None)  # its own mm path, CdistBackward0
    for p in (1.0, 2.0, 0.7, 2.5):
        add("pdist", RG(spread(rng, 5, 3)), p)
    return C


# forwards that read one triangle of their input (potrf), so finite
# differences of an unsymmetric perturbation are not what torch's (symmetric)
# gradient describes: checked against torch only
NO_FD = {"linalg_cholesky_ex", "linalg_cholesky", "_linalg_eigh", "linalg_eigh"}


def wire(v, rg_ids):
    """A case argument as sent to the server: requires-grad inputs by ref."""
    if isinstance(v, RG):
        return {"ref": rg_ids.pop(0)}
    if isinstance(v, list) and any(isinstance(x, (RG, np.ndarray)) for x in v):  # Tensor[], Tensor?[]
        return [wire(x, rg_ids) for x in v]
    if isinstance(v, np.ndarray):
        return T(v)
    return v


def ref_value(v):
    if isinstance(v, RG):
        return T(v.a, rg=True)
    if isinstance(v, list) and any(isinstance(x, (RG, np.ndarray)) for x in v):
        return [ref_value(x) for x in v]
    if isinstance(v, np.ndarray):
        return T(v)
    return v


def leaves(args, kw):
    out = []
    for v in list(args) + list(kw.values()):
        if isinstance(v, RG):
            out.append(v)
        elif isinstance(v, list):
            out.extend(x for x in v if isinstance(x, RG))
    return out


def forward_loss(server, op, args, kw, out, weight, session):
    """sum(op(...)[out] * weight), from the server's forward in no_grad."""
    plain = lambda v: T(v.a) if isinstance(v, RG) else [plain(x) for x in v] if isinstance(v, list) and any(isinstance(x, (RG, np.ndarray)) for x in v) else T(v) if isinstance(v, np.ndarray) else v
    r = server.post(f"/v1/ops/{op}", {"args": [plain(a) for a in args], "kwargs": {k: plain(v) for k, v in kw.items()},
                                      "grad_mode": "no_grad"}, headers={"X-OD-Session": session})
    assert r.status_code == 200, r.text
    y = from_json(r.json()["outputs"][out]).astype(np.float64)
    return float(np.sum(y * weight))


def server_grads(server, op, args, kw, out, weight, session):
    """(grads of the leaves, grad_fn of the output) by the server's autograd."""
    hdr = {"X-OD-Session": session}
    lv = leaves(args, kw)
    ids = []
    for leaf in lv:
        r = server.post("/v1/tensors", {"tensor": T(leaf.a, rg=True)}, headers=hdr)
        assert r.status_code == 201, r.text
        assert r.json()["requires_grad"] and r.json()["is_leaf"]
        ids.append(r.json()["id"])
    pool = list(ids)
    wargs = [wire(a, pool) for a in args]
    wkw = {k: wire(v, pool) for k, v in kw.items()}
    r = server.post(f"/v1/ops/{op}", {"args": wargs, "kwargs": wkw, "keep": True}, headers=hdr)
    assert r.status_code == 200, f"{op}: {r.text}"
    res = r.json()
    y = res["outputs"][out]
    path = res["dispatch"]["path"]
    r = server.post("/v1/ops/mul", {"args": [{"ref": y["id"]}, T(weight.astype(y["dtype"]))], "keep": True},
                    headers=hdr)
    assert r.status_code == 200, r.text
    r = server.post("/v1/ops/sum", {"args": [{"ref": r.json()["outputs"][0]["id"]}], "keep": True}, headers=hdr)
    assert r.status_code == 200, r.text
    loss = r.json()["outputs"][0]
    r = server.post(f"/v1/tensors/{loss['id']}/backward", {}, headers=hdr)
    assert r.status_code == 200, f"{op}: {r.text}"
    validate(r, "POST", f"/v1/tensors/{loss['id']}/backward")
    by_leaf = {x["id"]: x["grad"]["id"] for x in r.json()["grads"]}
    grads = []
    for i in ids:
        if i not in by_leaf:
            grads.append(None)
            continue
        gr = server.get(f"/v1/tensors/{by_leaf[i]}", headers=hdr)
        assert gr.status_code == 200
        grads.append(from_json(gr.json()["outputs"][0]).astype(np.float64))
    server.delete(f"/v1/sessions/{session}")
    return grads, y.get("grad_fn"), path


def test_every_formula_against_torch_and_finite_differences(server, rng):
    cases = make_cases(rng)
    weights, refs = [], []
    for op, args, kw, out in cases:
        refs.append({"op": op, "args": [ref_value(a) for a in args],
                     "kwargs": {k: ref_value(v) for k, v in kw.items()}, "out": out})
    # the output's shape comes from torch's forward; the weight is random
    shapes = torch_ref([dict(c, weight=T(np.ones(1))) for c in refs])
    for c, s in zip(refs, shapes):
        assert "error" not in s, (c["op"], s)
        w = rng.standard_normal(s["shape"])
        weights.append(w)
        c["weight"] = T(w)
    expect = torch_ref(refs)
    checked = 0
    for (op, args, kw, out), w, want in zip(cases, weights, expect):
        session = "ag-" + uuid.uuid4().hex[:12]
        got, grad_fn, path = server_grads(server, op, args, kw, out, w, session)
        assert "Autograd" in path, (op, path)
        lv = leaves(args, kw)
        assert len(got) == len(want["grads"]) == len(lv)
        for i, (gs, gt, leaf) in enumerate(zip(got, want["grads"], lv)):
            if gt is None:
                assert gs is None or not np.any(gs), (op, i)
                continue
            assert gs is not None, f"{op}: no gradient for input {i}"
            gt = np.array(gt).reshape(leaf.a.shape)
            np.testing.assert_allclose(gs, gt, rtol=1e-7, atol=1e-9, err_msg=f"{op} input {i} vs torch")
            if op in NO_FD:
                checked += 1
                continue
            # central differences of the server's own forward
            fd = np.zeros_like(leaf.a)
            h = 1e-6
            for j in range(leaf.a.size):
                orig = leaf.a.flat[j]
                leaf.a.flat[j] = orig + h
                up = forward_loss(server, op, args, kw, out, w, session)
                leaf.a.flat[j] = orig - h
                dn = forward_loss(server, op, args, kw, out, w, session)
                leaf.a.flat[j] = orig
                fd.flat[j] = (up - dn) / (2 * h)
            np.testing.assert_allclose(gs, fd, rtol=1e-4, atol=1e-5, err_msg=f"{op} input {i} vs finite differences")
            checked += 1
        if op in ("matmul", "linear", "reshape", "embedding", "index.Tensor", "index_put", "_scaled_dot_product_attention"):
            # composites differentiate through their decomposition: the
            # grad_fn is the last operator they became, which differs from
            # torch's where its decomposition does (_unsafe_view, _reshape_alias)
            assert grad_fn and grad_fn.endswith("Backward0"), (op, grad_fn)
        elif want["grad_fn"]:
            assert grad_fn == want["grad_fn"], (op, grad_fn, want["grad_fn"])
    assert checked > 100


def store(server, a, session, rg=True):
    r = server.post("/v1/tensors", {"tensor": T(a, rg=rg)}, headers={"X-OD-Session": session})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def kcall(server, op, *args, session, **kw):
    r = server.post(f"/v1/ops/{op}", {"args": list(args), "keep": True, **kw}, headers={"X-OD-Session": session})
    assert r.status_code == 200, r.text
    return r.json()["outputs"][0]


def test_retain_graph_gradient_and_second_backward(server, rng):
    s = "ag-" + uuid.uuid4().hex[:12]
    a = rng.standard_normal((3, 4))
    x = store(server, a, s)
    y = kcall(server, "exp", {"ref": x}, session=s)
    assert y["grad_fn"] == "ExpBackward0" and not y["is_leaf"]
    gw = rng.standard_normal((3, 4))
    hdr = {"X-OD-Session": s}
    r = server.post(f"/v1/tensors/{y['id']}/backward", {"gradient": T(gw), "retain_graph": True}, headers=hdr)
    assert r.status_code == 200, r.text
    gid = r.json()["grads"][0]["grad"]["id"]
    np.testing.assert_allclose(from_json(server.get(f"/v1/tensors/{gid}", headers=hdr).json()["outputs"][0]),
                               gw * np.exp(a), rtol=1e-6)
    # a second pass accumulates into the same stored .grad
    r = server.post(f"/v1/tensors/{y['id']}/backward", {"gradient": T(gw)}, headers=hdr)
    assert r.status_code == 200, r.text
    assert r.json()["grads"][0]["grad"]["id"] == gid
    np.testing.assert_allclose(from_json(server.get(f"/v1/tensors/{gid}", headers=hdr).json()["outputs"][0]),
                               2 * gw * np.exp(a), rtol=1e-6)
    assert server.get(f"/v1/tensors/{x}", params={"meta": 1}, headers=hdr).json()["grad"] == gid
    # the graph is freed now: ExpBackward0 needs its saved result
    r = server.post(f"/v1/tensors/{y['id']}/backward", {"gradient": T(gw)}, headers=hdr)
    assert r.status_code == 422 and "backward through the graph a second time" in error_message(r)
    # a non-scalar root needs a gradient; a wrong shape is PyTorch's message
    z = kcall(server, "exp", {"ref": x}, session=s)
    r = server.post(f"/v1/tensors/{z['id']}/backward", {}, headers=hdr)
    assert r.status_code == 422 and "only for scalar outputs" in error_message(r)
    r = server.post(f"/v1/tensors/{z['id']}/backward", {"gradient": T(np.ones(3))}, headers=hdr)
    assert r.status_code == 422 and "Mismatch in shape" in error_message(r)
    server.delete(f"/v1/sessions/{s}")


def test_version_counter_and_in_place_rules(server, rng):
    s = "ag-" + uuid.uuid4().hex[:12]
    hdr = {"X-OD-Session": s}
    x = store(server, rng.standard_normal(4), s)
    b = store(server, rng.standard_normal(4), s, rg=False)
    y = kcall(server, "mul", {"ref": x}, {"ref": b}, session=s)  # saves b
    r = server.post("/v1/ops/fill_", {"args": [{"ref": b}, 1.0]}, headers=hdr)  # b is modified in place
    assert r.status_code == 200, r.text
    total = kcall(server, "sum", {"ref": y["id"]}, session=s)
    r = server.post(f"/v1/tensors/{total['id']}/backward", {}, headers=hdr)
    assert r.status_code == 422
    assert "modified by an inplace operation" in error_message(r) and "MulBackward0" in error_message(r)
    # a leaf that requires grad cannot be written in place
    r = server.post("/v1/ops/fill_", {"args": [{"ref": x}, 1.0]}, headers=hdr)
    assert r.status_code == 422 and "leaf Variable that requires grad" in error_message(r)
    # ... but it can under no_grad, as in torch
    r = server.post("/v1/ops/fill_", {"args": [{"ref": x}, 1.0], "grad_mode": "no_grad"}, headers=hdr)
    assert r.status_code == 200, r.text
    server.delete(f"/v1/sessions/{s}")


def test_no_grad_inference_mode_and_integers(server, rng):
    a = rng.standard_normal(3)
    for mode in ("no_grad", "inference_mode"):
        r = server.post("/v1/ops/mul", {"args": [T(a, rg=True), T(a)], "grad_mode": mode})
        assert r.status_code == 200, r.text
        body = r.json()
        assert "requires_grad" not in body["outputs"][0]
        assert "Autograd" not in body["dispatch"]["path"] and body["dispatch"]["grad_mode"] == mode
    r = server.post("/v1/ops/mul", {"args": [T(a, rg=True), T(a)]})
    assert r.json()["outputs"][0]["requires_grad"] is True
    r = server.post("/v1/ops/mul", {"args": [T(a), T(a)], "grad_mode": "sometimes"})
    assert r.status_code == 400 and "grad_mode" in error_message(r)
    r = server.post("/v1/tensors", {"tensor": {"dtype": "int64", "shape": [2], "data": [1, 2], "requires_grad": True}})
    assert r.status_code == 422 and "floating point" in error_message(r)
    # comparisons are not differentiable: their outputs do not require grad
    r = server.post("/v1/ops/gt", {"args": [T(a, rg=True), 0.0]})
    assert r.status_code == 200 and "requires_grad" not in r.json()["outputs"][0]
    # an operator without a derivative is an error naming it
    r = server.post("/v1/ops/remainder.Scalar_Tensor", {"args": [2.0, T(a, rg=True)]})
    assert r.status_code == 501 and "remainder.Scalar_Tensor" in error_message(r)


def test_thousand_backward_passes_leave_nothing(server, rng):
    s = "ag-" + uuid.uuid4().hex[:12]
    hdr = {"X-OD-Session": s}
    x = store(server, rng.standard_normal((8, 8)), s)
    w = store(server, rng.standard_normal((8, 8)), s)

    def live():
        return server.get("/v1/stats").json()["autograd"]["live_nodes"]

    before = live()
    for i in range(1000):
        body = {"steps": [{"op": "mm", "args": [{"ref": x}, {"ref": w}]},
                          {"op": "relu", "args": [{"ref": "$0"}]},
                          {"op": "sum", "args": [{"ref": "$1"}]},
                          {"backward": "$2"}],
                "outputs": []}
        r = server.post("/v1/run", body, headers=hdr)
        assert r.status_code == 200, r.text
    assert live() == before
    server.delete(f"/v1/sessions/{s}")
    assert live() == before


GAUGE_TORCH = r"""
import json, sys, torch
cases = json.load(sys.stdin)
out = []
for c in cases:
    A = torch.tensor(c["A"], dtype=torch.float64).reshape(c["shape"]).requires_grad_(True)
    W = torch.tensor(c["W"], dtype=torch.float64).reshape(c["wshape"])
    k, full = c["kind"], c.get("full", False)
    if k.startswith("svd"):
        U, S, Vh = torch.ops.aten._linalg_svd(A, full)
        r = min(A.shape[-2:])
        U, Vh = U[..., :r], Vh[..., :r, :]
        y = (U * S.unsqueeze(-2)) @ Vh if k == "svd_usv" else U @ Vh
    else:
        L, V = torch.ops.aten._linalg_eigh(A, c.get("uplo", "L"))
        c_ = torch.arange(1, A.shape[-1] + 1, dtype=torch.float64)
        y = (V * L.unsqueeze(-2)) @ V.mT if k == "eigh_vlv" else (V * c_) @ V.mT
    (y * W).sum().backward()
    out.append(A.grad.reshape(-1).tolist())
json.dump(out, sys.stdout)
"""


def test_linalg_gauge_invariant_losses(server, rng):
    """svd and eigh through losses that do not depend on the singular /
    eigenvectors' signs, as torch's own tests: U S Vh and U Vh (full or
    reduced U, Vh cut to min(m, n)), V diag(L) V^T and V diag(c) V^T (the
    eigenvector path alone), against torch 1.13's gradients."""
    import subprocess

    cases = []
    for shape in ((4, 3), (3, 5), (2, 3, 3)):
        for full in (False, True):
            for kind in ("svd_usv", "svd_uv"):
                cases.append({"kind": kind, "shape": list(shape), "full": full, "A": g(rng, *shape)})
    for shape in ((3, 3), (2, 4, 4)):
        for uplo in ("L", "U"):
            for kind in ("eigh_vlv", "eigh_vcv"):
                x = g(rng, *shape)
                cases.append({"kind": kind, "shape": list(shape), "uplo": uplo, "A": x + np.swapaxes(x, -1, -2)})
    for c in cases:
        m, n = c["shape"][-2:]
        c["W"] = rng.standard_normal(c["shape"][:-2] + ([m, n] if c["kind"].startswith("svd") else [n, n]))
    wire_cases = [dict(c, A=c["A"].reshape(-1).tolist(), W=c["W"].reshape(-1).tolist(), wshape=list(c["W"].shape))
                  for c in cases]
    p = subprocess.run(["/usr/bin/python3", "-c", GAUGE_TORCH], input=json.dumps(wire_cases), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    want = json.loads(p.stdout)
    for c, w in zip(cases, want):
        session = "gauge-" + uuid.uuid4().hex[:12]
        hdr = {"X-OD-Session": session}

        def op(name, *args, **kw):
            r = server.post(f"/v1/ops/{name}", {"args": list(args), "kwargs": kw, "keep": True}, headers=hdr)
            assert r.status_code == 200, (name, c["kind"], r.text[:300])
            return [{"ref": o["id"]} for o in r.json()["outputs"]]

        r = server.post("/v1/tensors", {"tensor": T(c["A"], rg=True)}, headers=hdr)
        assert r.status_code == 201, r.text
        leaf = r.json()["id"]
        m, n = c["shape"][-2:]
        if c["kind"].startswith("svd"):
            U, S, Vh = op("_linalg_svd", {"ref": leaf}, c["full"])
            k = min(m, n)
            U = op("slice.Tensor", U, -1, 0, k)[0]
            Vh = op("slice.Tensor", Vh, -2, 0, k)[0]
            if c["kind"] == "svd_usv":
                U = op("mul.Tensor", U, op("unsqueeze", S, -2)[0])[0]
            y = op("matmul", U, Vh)[0]
        else:
            L, V = op("_linalg_eigh", {"ref": leaf}, c["uplo"])
            d = L if c["kind"] == "eigh_vlv" else T(np.arange(1.0, n + 1))
            if c["kind"] == "eigh_vlv":
                d = op("unsqueeze", L, -2)[0]
            y = op("matmul", op("mul.Tensor", V, d)[0], op("transpose.int", V, -2, -1)[0])[0]
        loss = op("sum", op("mul.Tensor", y, T(c["W"]))[0])[0]
        r = server.post(f"/v1/tensors/{loss['ref']}/backward", {}, headers=hdr)
        assert r.status_code == 200, (c["kind"], r.text[:300])
        gid = {x["id"]: x["grad"]["id"] for x in r.json()["grads"]}[leaf]
        got = from_json(server.get(f"/v1/tensors/{gid}", headers=hdr).json()["outputs"][0])
        server.delete(f"/v1/sessions/{session}")
        np.testing.assert_allclose(got.reshape(-1), np.array(w), rtol=1e-7, atol=1e-9,
                                   err_msg=f"{c['kind']} {c['shape']} full={c.get('full')} uplo={c.get('uplo')}")
