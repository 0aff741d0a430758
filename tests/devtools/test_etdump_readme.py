"""The README's "Profiling and debugging" example runs as written and its ETDump is what it says."""
from __future__ import annotations

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"

pytest.importorskip("etkit_xnnpack")


def _section() -> str:
    text = README.read_text()
    start = text.index("### Profiling and debugging")
    return text[start:text.index("\n### ", start + 1)]


def test_readme_profiling_example_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", _section(), re.S)
    assert len(blocks) == 1, "README's Profiling and debugging section should have one python example"
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "readme_example"}
    exec(compile(blocks[0], str(README), "exec"), scope)
    assert (tmp_path / "model.etdp").read_bytes()[8:12] == b"ED00"
    printed = capsys.readouterr().out
    assert "DELEGATE_CALL" in printed and "Method::execute" in printed and "Convolution" in printed
    execute = scope["execute"]
    assert [b.name for b in scope["inspector"].event_blocks] == ["Default", "Execute"]
    assert all(len(e.perf_data.raw) == 3 for e in execute.events)
