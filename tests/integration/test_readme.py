"""The README's client examples, run against a live server so they cannot
rot: every ```sh, ```python, ```js and ```c block of its "Clients" section.
Shell blocks run under bash -euo pipefail with OD set; Python with the
client package on its path; JavaScript as a module beside the client; C
compiled against clients/c with libcurl. Each must exit 0."""

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

README = ROOT / "README.md"


def blocks():
    text = README.read_text()
    start = text.index("## Clients\n")
    end = text.index("\n## ", start + 1)
    section = text[start:end]
    out = []
    for m in re.finditer(r"```(sh|python|js|c)\n(.*?)```", section, re.S):
        line = text[: start + m.start()].count("\n") + 1
        out.append(pytest.param(m.group(1), m.group(2), id=f"{m.group(1)}-line{line}"))
    return out


def test_every_language_has_an_example():
    langs = {p.values[0] for p in blocks()}
    assert {"sh", "python", "js", "c"} <= langs, langs


@pytest.mark.parametrize("lang,code", blocks())
def test_example(server, tmp_path, lang, code):
    env = dict(os.environ, OD=server.url, OD_URL=server.url)
    if lang == "sh":
        cmd = ["bash", "-euo", "pipefail", "-c", code]
    elif lang == "python":
        env["PYTHONPATH"] = str(ROOT / "clients" / "python")
        cmd = [sys.executable, "-c", code]
    elif lang == "js":
        script = ROOT / "clients" / "js" / f".readme-{tmp_path.name}.mjs"
        script.write_text(code)
        cmd = ["node", str(script)]
    else:
        src = tmp_path / "example.c"
        src.write_text(code)
        exe = tmp_path / "example"
        subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror", "-I", str(ROOT / "clients" / "c"),
                        str(src), str(ROOT / "clients" / "c" / "od_client.c"), "-o", str(exe), "-lcurl"],
                       check=True, capture_output=True, text=True)
        cmd = [str(exe)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    finally:
        if lang == "js":
            script.unlink()
    assert p.returncode == 0, f"{lang} example failed:\n{code}\nstdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-2000:]}"
