"""The plugin README's QNN example runs as written (found by its output file, model_qnn.pte) and matches its PT2E
reference."""
import pathlib
import re

import torch

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"   # the plugin's README


def test_readme_qnn_example_runs_on_the_htp_simulator(tmp_path, monkeypatch):
    blocks = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.S) if "model_qnn.pte" in b]
    assert len(blocks) == 1, f"{README} should have exactly one python example writing model_qnn.pte"
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "readme_example"}
    exec(compile(blocks[0], str(README), "exec"), scope)
    assert scope["edge"].partition_reports["forward"][0].num_partitions == 1
    with torch.no_grad():
        expected = scope["reference"](*scope["x"])
    step = float(expected.max() - expected.min().clamp(max=0)) / 255
    assert float((scope["y"] - expected).abs().max()) <= 3 * step
    assert (tmp_path / "model_qnn.pte").read_bytes()[4:8] == b"ET12"
