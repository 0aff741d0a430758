"""etkit: compile PyTorch programs ahead of time into ExecuTorch-format ``.pte`` files.

    import etkit
    ep = torch.export.export(model, example_inputs)
    program = etkit.to_edge_transform_and_lower(ep, partitioner=[...]).to_executorch()
    program.write_to_file("model.pte")

The names below load on first use, so ``import etkit.plugins`` (what ``etkit backends`` and plugin
modules do) does not import torch. Where only ``etkit-runtime`` is installed (no torch), asking for one says
to ``pip install etkit``.
"""
__version__ = "0.1.0"

_LAZY = {
    "EdgeCompileConfig": "etkit.dialects.edge",
    "EdgeProgramManager": "etkit.program",
    "ExecutorchBackendConfig": "etkit.program",
    "ExecutorchProgramManager": "etkit.program",
    "to_edge": "etkit.program",
    "to_edge_transform_and_lower": "etkit.program",
    "MemoryPlanningPass": "etkit.passes.memory_planning",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'etkit' has no attribute {name!r}")
    from ._compiler import import_compiler_module

    value = getattr(import_compiler_module(module, f"etkit.{name}"), name)
    globals()[name] = value
    return value
