"""The README's "Bundled programs" example runs as written, and what it prints comes from a real check."""
from __future__ import annotations

import pytest

from .models import readme_section


pytest.importorskip("etkit_xnnpack")


def test_readme_bundled_program_example_runs(tmp_path, monkeypatch, capsys):
    _, blocks = readme_section("Bundled programs")
    assert len(blocks) == 1, "README's Bundled programs section should have one python example"
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "readme_example"}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    assert (tmp_path / "model.bpte").read_bytes()[4:8] == b"BP08"
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in printed] == ["case 0", "case 1"]
    # The example's tolerance (1e-5) holds: XNNPACK vs eager differ by float32 rounding only.
    assert scope["report"].max_abs_diff <= 1e-5
