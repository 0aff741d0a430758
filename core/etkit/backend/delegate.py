"""The delegate call in a graph: ``executorch_call_delegate(lowered_module, *inputs)``."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch._ops import HigherOrderOperator

from .compile_spec import CompileSpec


class ExecutorchCallDelegate(HigherOrderOperator):
    """Marks a call into a lowered subgraph. Only emitted, never executed in Python."""

    def __init__(self) -> None:
        super().__init__("executorch_call_delegate")

    def __call__(self, lowered_module, *args):
        raise RuntimeError(
            "executorch_call_delegate cannot run in eager PyTorch; write the program with to_executorch() and "
            "run it with etkit.runtime")


executorch_call_delegate = ExecutorchCallDelegate()


class LoweredBackendModule(torch.nn.Module):
    """One partition after ``preprocess``: what the emitter writes as a ``BackendDelegate``.

    Attributes:
        backend_id: the backend's id (``BackendDelegate.id``).
        processed_bytes: the payload from ``preprocess``.
        compile_specs: list of :class:`CompileSpec`.
        original_module: the partition's Edge ``ExportedProgram`` (for inspection and debugging).
        named_data: ``{key: bytes}`` the backend stores in the program's named data.
        num_inputs / num_outputs: delegate-argument counts.
        debug_handles: the debug handles of the partition's Edge nodes (:mod:`etkit.graph.debug_handles`).
        debug_handle_map: what ``preprocess`` returned in ``PreprocessResult.debug_handle_map``:
            ``{delegate debug id (int or str): [Edge debug handles]}`` (ExecuTorch's
            ``DelegateMappingBuilder`` output), or None.
    """

    def __init__(self, backend_id: str, processed_bytes: bytes, compile_specs: list, original_module,
                 named_data: dict | None, num_inputs: int, num_outputs: int, debug_handles=(),
                 debug_handle_map: dict | None = None) -> None:
        super().__init__()
        self.backend_id = backend_id
        self.processed_bytes = bytes(processed_bytes)
        self.compile_specs = list(compile_specs)
        self.original_module = original_module
        self.named_data = dict(named_data or {})
        self.num_inputs = num_inputs
        self.num_outputs = num_outputs
        self.debug_handles = list(debug_handles)
        self.debug_handle_map = dict(debug_handle_map) if debug_handle_map else None

    def extra_repr(self) -> str:
        return (f"backend_id={self.backend_id!r}, payload={len(self.processed_bytes)} bytes, "
                f"inputs={self.num_inputs}, outputs={self.num_outputs}")
