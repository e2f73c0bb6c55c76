"""The GPU suite's server harness (tests/gpu/server_cuda.py) on this machine:
CI has no GPU, so this keeps the harness itself working. It runs with the
device under test set to "cpu" (the comparison then must agree everywhere),
and its judge must flag the disagreements it exists to find."""

import pathlib
import subprocess
import sys

import numpy as np

from conftest import SERVER_BIN

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "gpu"))
import server_cuda  # noqa: E402


def test_harness_runs_against_the_real_server():
    p = subprocess.run([sys.executable, str(ROOT / "tests" / "gpu" / "server_cuda.py"), "--server", SERVER_BIN,
                        "--device", "cpu", "--n", "1", "--diff-s", "20"],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    diff = next(line for line in p.stdout.splitlines() if line.startswith("diff:"))
    assert int(diff.split()[1]) > 200, diff  # overloads
    assert " 0 disagree" in diff and "e2e: ok" in p.stdout


class Case:
    op = "add.Tensor"

    def __init__(self, *arrays):
        self.arrays = arrays

    def tensors(self):
        for a in self.arrays:
            yield type("T", (), {"shape": a.shape, "base": a, "dtype": str(a.dtype)})()

    def all_args(self):
        return []


def reply(dtype, data, device="cuda"):
    return {"outputs": [{"dtype": dtype, "shape": [len(data)], "data": data}], "dispatch": {"device": device}}


def test_judge_flags_what_it_must():
    case = Case(np.ones(3, np.float32))
    cpu = reply("float32", [1.0, 2.0, 3.0], "cpu")
    assert server_cuda.judge(case, "cuda", 200, cpu, 200, reply("float32", [1.0, 2.0, 3.0])) is None
    # a few ulps agree; a wrong value, a NaN for a number, a lost sign of inf do not
    assert server_cuda.judge(case, "cuda", 200, cpu, 200, reply("float32", [1.0, 2.0000002, 3.0])) is None
    for bad in ([1.0, 2.01, 3.0], [1.0, "NaN", 3.0]):
        v = server_cuda.judge(case, "cuda", 200, cpu, 200, reply("float32", bad))
        assert v and v[2], (bad, v)
    inf = reply("float32", ["Infinity", 2.0, 3.0], "cpu")
    v = server_cuda.judge(case, "cuda", 200, inf, 200, reply("float32", ["-Infinity", 2.0, 3.0]))
    assert v and v[2] and "Inf" in v[0]
    # integers exactly; status and device must match
    v = server_cuda.judge(case, "cuda", 200, reply("int64", [1, 2], "cpu"), 200, reply("int64", [1, 3]))
    assert v and v[2]
    assert server_cuda.judge(case, "cuda", 200, cpu, 400, {"error": {"message": "x"}})[2]
    assert server_cuda.judge(case, "cuda", 400, {"error": {"message": "x"}}, 200, cpu)[2]
    assert server_cuda.judge(case, "cuda", 200, cpu, 200, reply("float32", [1.0, 2.0, 3.0], "cpu"))[2]
    # where PyTorch itself parts CPU from CUDA, a note rather than a failure
    big = reply("float32", ["Infinity"], "cpu")
    v = server_cuda.judge(Case(np.ones(1, np.float32)), "cuda", 200, big, 200, reply("float32", [2.2448e38]))
    assert v and not v[2]
