"""The README's "Profiling and debugging" example runs as written and its ETDump is what it says."""
from __future__ import annotations

import pytest

from .models import readme_section


pytest.importorskip("etkit_xnnpack")


def test_readme_profiling_example_runs(tmp_path, monkeypatch, capsys):
    _, blocks = readme_section("Profiling and debugging")
    assert len(blocks) == 1, "README's Profiling and debugging section should have one python example"
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "readme_example"}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    assert (tmp_path / "model.etdp").read_bytes()[8:12] == b"ED00"
    printed = capsys.readouterr().out
    assert "DELEGATE_CALL" in printed and "Method::execute" in printed and "Convolution" in printed
    execute = scope["execute"]
    assert [b.name for b in scope["inspector"].event_blocks] == ["Default", "Execute"]
    assert all(len(e.perf_data.raw) == 3 for e in execute.events)
