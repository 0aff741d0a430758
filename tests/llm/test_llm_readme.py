"""The README's LLMs section runs as written: its shell commands (export from the GGUF file, generate) and
its Python example."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .conftest import smollm2_gguf
from .test_llm_cpp_runner import REPO_ROOT, _missing

README = REPO_ROOT / "README.md"


def _section() -> str:
    text = README.read_text()
    start = text.index("### LLMs")
    return text[start:text.index("\n### ", start + 1)]


@pytest.mark.slow
def test_readme_llm_commands_run(tmp_path):
    blocks = re.findall(r"```\n(.*?)```", _section(), re.S)
    assert len(blocks) == 1 and "etkit llm export" in blocks[0], "README's LLMs section lost its commands"
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", blocks[0]], cwd=tmp_path, env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Paris" in run.stdout and "decode" in run.stderr and (tmp_path / "smollm2" / "tokenizer.json").exists()

    # The native runner's command, on what the export wrote (the repository's build/native).
    native = re.search(r"\n    (build/native/runner/etkit_llm_runner .*?)\n\n", _section(), re.S)
    assert native, "README's LLMs section lost the etkit_llm_runner command"
    command = native.group(1).replace("build/native/", f"{REPO_ROOT}/build/native/", 1)
    if not (REPO_ROOT / "build" / "native" / "runner" / "etkit_llm_runner").is_file():
        _missing("build/native/runner/etkit_llm_runner does not exist")
    cpp = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=tmp_path, capture_output=True, text=True)
    assert cpp.returncode == 0, cpp.stderr[-3000:]
    assert "Paris" in cpp.stdout and "decode" in cpp.stderr


@pytest.mark.slow
def test_readme_llm_python_example_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", _section(), re.S)
    assert len(blocks) == 1, "README's LLMs section should have one python example"
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "readme_example", "GGUF": smollm2_gguf()}
    exec(compile(blocks[0], str(README), "exec"), scope)
    assert "Paris" in scope["text"] and scope["stats"].generated_tokens > 0
