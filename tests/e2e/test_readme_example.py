"""The README's Python example runs as written (so the documented API cannot drift)."""
import pathlib
import re

import pytest

pytest.importorskip("etkit.runtime")
pytest.importorskip("etkit_xnnpack")

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README.md has no python example"
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "readme_example"})
    assert (tmp_path / "model.pte").read_bytes()[4:8] == b"ET12"
