"""The plugin contract stays honest: every hook is documented, tested, and does what it says."""
import inspect
import pathlib

import pytest
import torch

import etkit
from etkit.plugins import get_plugin_manager, hookimpl, hookspecs

TESTS = pathlib.Path(__file__).resolve().parents[1]


def _hook_names():
    return [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("etkit_")]


def test_every_hook_is_documented_and_exercised_by_a_test():
    test_text = "\n".join(p.read_text() for p in TESTS.rglob("test_*.py"))
    test_text += (TESTS / "core" / "toy_backend.py").read_text()
    for name in _hook_names():
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        assert len(doc) > 80, f"hook {name} needs a docstring saying what it receives and returns"
        assert name in test_text, f"hook {name} is used by no test"


def test_memory_planning_requirements_raise_planned_alignment():
    class NeedsAlignment:
        @hookimpl
        def etkit_memory_planning_requirements(self, register):
            register("test accelerator DMA", 64)

    class Small(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x[:, :3]) + 1.0

    manager = get_plugin_manager()
    manager.add_plugin(NeedsAlignment(), name="aligned")
    try:
        program = etkit.to_edge(torch.export.export(Small(), (torch.randn(3, 5),))).to_executorch()
    finally:
        manager.remove_plugin("aligned")
    offsets = [a.mem_offset for a in program.memory_plans["forward"].allocations]
    assert len(offsets) >= 3 and all(o % 64 == 0 for o in offsets), offsets
    assert any(o != 0 for o in offsets), "tensors that live together must be placed apart"


def test_a_plugin_breaking_the_contract_is_reported_not_fatal(monkeypatch):
    import types
    from importlib import metadata

    from etkit.plugins.manager import EtkitPluginManager

    broken = types.ModuleType("broken_plugin")

    @hookimpl
    def etkit_register_backend(register):  # misspelled hook
        pass
    broken.etkit_register_backend = etkit_register_backend
    ep = metadata.EntryPoint(name="broken", value="broken_plugin", group="etkit.backends")
    monkeypatch.setattr(metadata, "entry_points", lambda group=None: [ep])
    monkeypatch.setitem(__import__("sys").modules, "broken_plugin", broken)
    manager = EtkitPluginManager()
    assert "breaks the etkit plugin contract" in manager.load_errors["broken"]
    assert manager.registry.specs() == []


def _toy_program():
    from tests.core.toy_backend import ToyPartitioner

    class AddMul(torch.nn.Module):
        def forward(self, x, y):
            return x * y + y

    inputs = (torch.randn(2, 3), torch.randn(2, 3))
    return etkit.to_edge_transform_and_lower(torch.export.export(AddMul(), inputs),
                                             partitioner=[ToyPartitioner()]).to_executorch().buffer


def describe_toy(processed, compile_specs):
    """A ``BackendSpec.describe_payload`` named by a ``"module:function"`` string in the test below."""
    return [f"toy graph, {len(processed)} payload bytes, specs {sorted(compile_specs)}"]


def test_describe_payload_lines_appear_in_etkit_inspect(toy_plugin):
    from etkit.serialize.inspect import format_program
    from tests.core.conftest import toy_backend_with
    from tests.core.toy_backend import TOY_ID

    data = _toy_program()
    plain = format_program(data)
    assert f"0: {TOY_ID}," in plain and "toy graph" not in plain
    with toy_backend_with(describe_payload=f"{__name__}:describe_toy"):
        text = format_program(data)
    assert f"0: {TOY_ID}," in text and "       toy graph, " in text and "payload bytes, specs []" in text

    def breaks(processed, compile_specs):
        raise RuntimeError("corrupt toy payload")

    with toy_backend_with(describe_payload=breaks):
        text = format_program(data)
    assert "(its plugin could not describe the payload: RuntimeError: corrupt toy payload)" in text
    with toy_backend_with(describe_payload=f"{__name__}:no_such_function"):
        text = format_program(data)
    assert "(its plugin could not describe the payload: ImportError:" in text and "no_such_function" in text


def test_dump_payload_field_and_raw_fallback(toy_plugin, tmp_path):
    """``etkit inspect --dump DIR``: a plugin lays out its payload (``BackendSpec.dump_payload``); without one,
    the raw payload is written as ``<method>_<index>.<backend id>.bin``."""
    from etkit.serialize.inspect import delegate_payloads, dump_payloads
    from tests.core.conftest import toy_backend_with
    from tests.core.toy_backend import TOY_ID

    def dumps(processed, compile_specs, directory, stem):
        path = pathlib.Path(directory) / f"{stem}.toy.txt"
        path.write_text(f"{len(processed)} bytes")
        return [str(path)]

    data = _toy_program()
    ((method, index, backend, payload, _),) = delegate_payloads(data)
    assert (method, index, backend) == ("forward", 0, TOY_ID)
    lines = dump_payloads(data, tmp_path / "raw")
    assert (tmp_path / "raw" / f"forward_0.{TOY_ID}.bin").read_bytes() == payload and len(lines) == 1
    with toy_backend_with(dump_payload=dumps):
        lines = dump_payloads(data, tmp_path / "laid_out")
    assert (tmp_path / "laid_out" / "forward_0.toy.txt").read_text() == f"{len(payload)} bytes"
    assert lines == [f"forward_0 ({TOY_ID}): {tmp_path / 'laid_out' / 'forward_0.toy.txt'}"]


def test_a_plugin_api_1_hook_is_refused_naming_its_backend_spec_field():
    from pluggy import PluginValidationError

    class OldStyle:
        @hookimpl
        def etkit_describe_payload(self, backend_id, processed, compile_specs):
            return None

    with pytest.raises(PluginValidationError) as info:
        get_plugin_manager().add_plugin(OldStyle(), name="old_style")
    message = str(info.value)
    assert "'etkit_describe_payload' is a plugin API 1.x hook" in message
    assert "BackendSpec field 'describe_payload'" in message and "plugin_api='2.0'" in message
    assert get_plugin_manager().pm.get_plugin("old_style") is None


def test_backend_spec_resolves_behaviour_and_loads_quantizers():
    from etkit.plugins import BackendSpec

    spec = BackendSpec(backend_id="B", backend_details="x:y", describe_payload=f"{__name__}:describe_toy",
                       conformance_tolerance=42, quantizers={"Q": f"{__name__}:_toy_program"})
    assert spec.resolve("describe_payload") is describe_toy
    assert spec.resolve("dump_payload") is None
    with pytest.raises(TypeError, match=r"conformance_tolerance is 42, which is not callable"):
        spec.resolve("conformance_tolerance")
    with pytest.raises(ValueError, match="not a per-backend behaviour field"):
        spec.resolve("backend_details")
    assert spec.load_quantizer() is _toy_program and spec.load_quantizer("Q") is _toy_program
    with pytest.raises(KeyError, match="has no quantizer 'P'; it registers Q"):
        spec.load_quantizer("P")
    with pytest.raises(KeyError, match="registers no quantizer"):
        BackendSpec(backend_id="C", backend_details="x:y").load_quantizer()
