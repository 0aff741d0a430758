"""The Python examples of the README and of the XNNPACK plugin's README (plugins/xnnpack/README.md: quantization,
weights cache) run as written (so the documented API cannot drift)."""
import pathlib
import re

import pytest
import torch

pytest.importorskip("etkit.runtime")
pytest.importorskip("etkit_xnnpack")

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
XNNPACK_README = README.parent / "plugins" / "xnnpack" / "README.md"


def _blocks(readme: pathlib.Path):
    blocks = re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)
    assert len(blocks) >= 2, f"{readme} lost its python examples"
    return blocks


def _block(marker: str, readme: pathlib.Path = README) -> str:
    """The python example of ``readme`` containing ``marker``."""
    found = [b for b in _blocks(readme) if marker in b]
    assert len(found) == 1, f"{readme} should have exactly one python example containing {marker!r}"
    return found[0]


def test_xnnpack_readme_lowering_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "readme_example"}
    # compares with eager itself
    exec(compile(_block("small_xnnpack.pte", XNNPACK_README), str(XNNPACK_README), "exec"), scope)
    (report,) = scope["edge"].partition_reports["forward"]
    assert report.backend_id == "XnnpackBackend" and report.num_partitions == 1 and not report.rejected
    assert report.format() in capsys.readouterr().out
    assert (tmp_path / "small_xnnpack.pte").read_bytes()[4:8] == b"ET12"


def test_readme_python_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(_block('write_to_file("model.pte")'), str(README), "exec"), {"__name__": "readme_example"})
    assert (tmp_path / "model.pte").read_bytes()[4:8] == b"ET12"


def test_readme_quantization_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "readme_example"}
    exec(compile(_block("model_int8.pte", XNNPACK_README), str(XNNPACK_README), "exec"), scope)
    with torch.no_grad():
        reference = scope["quantized"](scope["x"])
    cosine = torch.nn.functional.cosine_similarity(scope["y"].flatten(), reference.flatten(), dim=0).item()
    assert cosine > 0.9, f"int8 program vs PT2E reference: cosine {cosine:.3f}"
    size = (tmp_path / "model_int8.pte").stat().st_size
    assert size < 16_000_000, f"int8 ResNet-18 program is {size} bytes (fp32 is about 47 MB)"


def test_readme_torchao_example_runs_on_qd8_int4(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "readme_example"}
    # asserts cosine > 0.999 itself
    exec(compile(_block("quantize_(", XNNPACK_README), str(XNNPACK_README), "exec"), scope)
    payloads = [getattr(scope["edge"].exported_program().graph_module, n.target).processed_bytes
                for n in scope["edge"].exported_program().graph.nodes if n.op == "get_attr"]
    assert len(payloads) == 1, "the example's linears should form one XNNPACK delegate"


def test_readme_dynamic_shapes_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "readme_example"}
    exec(compile(_block("dynamic_shapes="), str(README), "exec"), scope)  # compares with eager itself
    assert scope["y"].shape == (3, 40, 32)


def test_xnnpack_readme_dynamic_shapes_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "readme_example"}
    # compares three sequence lengths with eager itself
    exec(compile(_block('Dim("seq"', XNNPACK_README), str(XNNPACK_README), "exec"), scope)
    (report,) = scope["edge"].partition_reports["forward"]
    assert report.num_partitions == 1 and not report.rejected, report.format()


def test_readme_weights_cache_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "readme_example"}
    # asserts no repacking itself
    exec(compile(_block("weights_cache_stats()", XNNPACK_README), str(XNNPACK_README), "exec"), scope)
    assert scope["weights_cache_stats"]()["reuses"] >= 2, "the second load should have reused both linears"


def test_readme_memory_limit_example_prints_what_it_says(capsys):
    """The README's memory-limit example, run after the example that makes its ``pte`` (the XNNPACK README's
    weights-cache example): the refusal it prints carries the sizes the README quotes in its comment."""
    scope = {"__name__": "readme_example"}
    exec(compile(_block("weights_cache_stats()", XNNPACK_README), str(XNNPACK_README), "exec"), scope)
    block = _block("set_memory_limit(100)")
    capsys.readouterr()
    exec(compile(block, str(README), "exec"), scope)
    printed = capsys.readouterr().out
    quoted = re.search(r"# \.\.\. (needs \d+ bytes: the \d+-byte program file plus \d+ bytes of planned)", block)
    assert quoted and quoted.group(1) in printed, printed
    from etkit import _runtime
    assert _runtime.memory_limit() == 0   # the example restores the default
