"""The plugin README's Vulkan example runs as written and says what it claims."""
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"   # the plugin's README


def test_readme_vulkan_example_runs(tmp_path, monkeypatch, capsys):
    blocks = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.S) if "VulkanPartitioner(" in b]
    assert len(blocks) == 1, f"{README} should have exactly one python example using VulkanPartitioner"
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "readme_example"})  # asserts against eager itself
    printed = capsys.readouterr().out
    claimed = re.search(r"# (\d+ ops delegated in 1 partition\(s\), 0 left outside)", blocks[0]).group(1)
    assert claimed in printed, printed
    assert "DELEGATE_INTERNAL" in printed
    assert (tmp_path / "mv2_vulkan.pte").read_bytes()[4:8] == b"ET12"
