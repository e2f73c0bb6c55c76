"""The curl smoke test: runs every ```sh example of proto/PROTOCOL.md against
a live server and checks the status each example's "# → NNN" line promises.

Each example's curl commands get `-sS -w '\\n%{http_code}\\n'` so the status
is the last line of output; `OD` is the server's address.
"""

import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

DOC = ROOT / "proto" / "PROTOCOL.md"


def examples():
    text = DOC.read_text()
    out = []
    for m in re.finditer(r"```sh\n(.*?)```", text, re.S):
        block = m.group(1)
        want = re.search(r"^# → (\d{3})\s*$", block, re.M)
        line = text[: m.start()].count("\n") + 1
        out.append(pytest.param(block, int(want.group(1)) if want else 200, id=f"line{line}"))
    return out


def test_examples_exist():
    assert len(examples()) >= 10


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
@pytest.mark.parametrize("block,status", examples())
def test_example(server, block, status):
    script = re.sub(r"^OD=.*$", "", block, flags=re.M)  # the live server's address instead
    # the status is what the last curl of the block printed
    script = re.sub(r"(^|\s)curl ", r"\1curl -sS -w '\\n%{http_code}\\n' ", script)
    env = dict(os.environ, OD=server.url)
    p = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True,
                       env=env, timeout=60)
    assert p.returncode == 0, f"example failed:\n{block}\nstderr: {p.stderr}"
    got = int(p.stdout.strip().splitlines()[-1])
    assert got == status, f"example answered {got}, the page says {status}:\n{block}\n{p.stdout[-2000:]}"
