"""``CoreMLPartitioner``: tags what coremltools can convert, asking coremltools itself.

Op support is decided by coremltools' own torch frontend registry
(``coremltools.converters.mil.frontend.torch.is_torch_fx_node_supported``), so it follows the installed
coremltools version; a few ops the registry lists but Core ML mis-runs are refused with the reason
(the same exclusions as ExecuTorch 1.5's Core ML partitioner), and so are tensors of dtypes Core ML has
no type for. Every node left outside is reported with its reason (:meth:`CoreMLPartitioner.report`).

Seed pages: "Core ML Backend" (Partitioner API), "Troubleshooting" (Core ML).
"""
from __future__ import annotations

import logging
import operator
from typing import Callable, Optional, Sequence

import torch
from torch.export import ExportedProgram

from etkit.backend import CompileSpec, DelegationSpec, Partitioner, PartitionReport, PartitionResult, Rejection
from etkit.backend.utils import is_delegate_call, node_target_name, propose_partitions, tag_partitions

from .._quiet import import_coremltools
from ..compile_spec import COMPILE_SPEC_KEYS
from ..plugin import BACKEND_ID

logger = logging.getLogger(__name__)


aten = torch.ops.aten

#: Ops coremltools' registry accepts but Core ML gets wrong or crashes on (ExecuTorch 1.5 refuses them too).
_REFUSED = {
    aten.diagonal.default: "Core ML's diagonal conversion is wrong for non-square inputs",
    aten.diagonal_copy.default: "Core ML's diagonal conversion is wrong for non-square inputs",
    aten.acosh.default: "Core ML's acosh loses precision outside a narrow range",
    aten.asinh.default: "Core ML's asinh loses precision outside a narrow range",
    aten.rand.default: "random ops cannot match eager numerics",
}

#: Ops kept whole through decomposition need no view semantics; these are decomposed anyway because
#: Core ML runs their decompositions better (ExecuTorch's list).
_DECOMPOSE_ANYWAY = {aten.triu.default, aten.tril.default, aten.repeat_interleave.self_int,
                     aten.repeat_interleave.self_Tensor}

#: Tensor dtypes Core ML ML Programs can hold (int64 is narrowed to int32 by coremltools).
_CORE_ML_DTYPES = {torch.float32, torch.float16, torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8,
                   torch.bool}


class UnsupportedByCoreMLError(NotImplementedError):
    """``lower_full_graph=True`` and some nodes cannot go to Core ML; the message lists every one."""


def _tensor_dtypes(node: torch.fx.Node):
    vals = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
    for val in vals:
        for v in (val if isinstance(val, (list, tuple)) else [val]):
            if isinstance(v, torch.Tensor):
                yield v.dtype


def _registered_with_namespace(node: torch.fx.Node) -> bool:
    """coremltools registers some non-ATen ops only under ``namespace.name`` (``quantized_decomposed.
    dequantize_per_tensor``), while its own check looks up the bare ``__name__`` (ExecuTorch's edge ops
    carry the namespace in it; torch's ``OpOverload`` does not)."""
    from coremltools.converters.mil.frontend.torch.torch_op_registry import _TORCH_OPS_REGISTRY

    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or target.namespace in ("aten", "prim"):
        return False
    names = getattr(_TORCH_OPS_REGISTRY, "name_to_func_mapping", {})
    base = target._schema.name.split("::")[-1]
    return f"{target.namespace}.{base}" in names or f"{target.namespace}::{base}" in names


def _is_view(op) -> bool:
    args = op._schema.arguments
    return bool(args) and args[0].alias_info is not None and not args[0].alias_info.is_write


class CoreMLPartitioner(Partitioner):
    """Delegates to Core ML every node coremltools can convert.

    Args:
        skip_ops_for_coreml_delegation: op names to keep out of Core ML, as ExecuTorch spells them: the
            lower-cased ``OpOverload.__name__``, e.g. ``["aten.add.tensor"]``.
        compile_specs: from :meth:`etkit_coreml.CoreMLBackend.generate_compile_specs` (plus, for enumerated
            shapes, :func:`etkit_coreml.generate_enumerated_shapes_compile_spec`); default: ExecuTorch's
            defaults (all compute units, fp16 compute precision, coremltools' deployment target).
        take_over_mutable_buffer: accepted for API compatibility; etkit keeps mutated buffers in the
            program, so Core ML states (iOS18+) are not used and this flag changes nothing.
        take_over_constant_data: constants used only by a Core ML partition move into its payload; with
            ``False`` they stay in the program and are fed to the delegate as inputs.
        lower_full_graph: the whole graph must go to Core ML; anything it cannot convert raises
            :class:`UnsupportedByCoreMLError` naming every such node. Required with enumerated shapes.

    Raises:
        ValueError: ``lower_full_graph`` combined with skipped ops or ``take_over_constant_data=False``,
            or enumerated shapes without ``lower_full_graph``.
    """

    def __init__(self, *, skip_ops_for_coreml_delegation: Optional[Sequence[str]] = None,
                 compile_specs: Optional[Sequence[CompileSpec]] = None, take_over_mutable_buffer: bool = True,
                 lower_full_graph: bool = False, take_over_constant_data: bool = True) -> None:
        super().__init__(DelegationSpec(BACKEND_ID, list(compile_specs or [])))
        self.skip_ops_for_coreml_delegation = [s.lower() for s in (skip_ops_for_coreml_delegation or [])]
        self.take_over_mutable_buffer = take_over_mutable_buffer
        self.take_over_constant_data = take_over_constant_data
        self.lower_full_graph = lower_full_graph
        keys = {spec.key for spec in self.delegation_spec.compile_specs}
        if COMPILE_SPEC_KEYS.ENUMERATED_SHAPES.value in keys and not lower_full_graph:
            raise ValueError("enumerated shapes need the whole graph in Core ML: pass lower_full_graph=True")
        if lower_full_graph and self.skip_ops_for_coreml_delegation:
            raise ValueError("lower_full_graph=True cannot skip ops; drop skip_ops_for_coreml_delegation")
        if lower_full_graph and not take_over_constant_data:
            raise ValueError("lower_full_graph=True needs take_over_constant_data=True")
        self._report: Optional[PartitionReport] = None

    # ---- decisions ----------------------------------------------------------------------------

    def rejection(self, node: torch.fx.Node) -> Optional[Rejection]:
        """``None`` if Core ML can take ``node`` (an operator call), else why not."""
        import_coremltools()
        from coremltools.converters.mil.frontend.torch import is_torch_fx_node_supported

        name = node_target_name(node)
        if node.target is operator.getitem:
            return None
        # ExecuTorch's edge ops are named "aten.mm.default"; a torch OpOverload's __name__ is "mm.default"
        if {name.lower(), getattr(node.target, "__name__", "").lower()} & set(self.skip_ops_for_coreml_delegation):
            return Rejection(node.name, name, "listed in skip_ops_for_coreml_delegation")
        if node.target in _REFUSED:
            return Rejection(node.name, name, _REFUSED[node.target])
        if node.target in (aten.add.Tensor, aten.sub.Tensor) and node.kwargs.get("alpha", 1) != 1:
            return Rejection(node.name, name, "alpha != 1 has no Core ML conversion")
        if node.target in (aten.argmax.default, aten.argmin.default) and \
                (node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")) is None:
            return Rejection(node.name, name, "dim=None (a reduction over the flattened input) crashes Core ML")
        try:
            supported = is_torch_fx_node_supported(node) or _registered_with_namespace(node)
        except Exception as exc:  # the registry asserts on in-place ops
            return Rejection(node.name, name, f"coremltools cannot check it: {exc}")
        if not supported:
            import coremltools
            return Rejection(node.name, name, f"coremltools {coremltools.__version__} has no conversion for it")
        bad = sorted({str(d) for d in _tensor_dtypes(node) if d not in _CORE_ML_DTYPES})
        if bad:
            return Rejection(node.name, name, f"Core ML has no tensor type for {', '.join(bad)}")
        return None

    # ---- Partitioner API ----------------------------------------------------------------------

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        """Tag convertible nodes, one tag per connected group; returns ``{tag: DelegationSpec("CoreMLBackend")}``.

        Raises:
            UnsupportedByCoreMLError: ``lower_full_graph=True`` and nodes remain outside (all listed).
        """
        ep = exported_program
        supported, rejected = set(), []
        for node in ep.graph.nodes:
            if node.op != "call_function" or is_delegate_call(node):
                continue
            r = self.rejection(node)
            if r is None:
                supported.add(node)
            else:
                rejected.append(r)
        for node in list(supported):  # a getitem goes with its producer
            if node.target is operator.getitem and node.args[0] not in supported:
                supported.discard(node)
                rejected.append(Rejection(node.name, "getitem", f"its producer {node.args[0].name} is not delegated"))
        if self.lower_full_graph and rejected:
            raise UnsupportedByCoreMLError(
                f"lower_full_graph=True, but {len(rejected)} node(s) cannot go to Core ML:\n  "
                + "\n  ".join(str(r) for r in rejected)
                + "\nSet lower_full_graph=False to run them outside Core ML, or rewrite the model to avoid them.")

        result, self._report = tag_partitions(ep, propose_partitions(ep, supported), self.delegation_spec,
                                              backend_id=BACKEND_ID, tag_prefix="coreml", rejected=rejected,
                                              take_constant_data=self.take_over_constant_data, logger=logger)
        return result

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Optional[Callable[[torch.fx.Node], bool]]]:
        """Every op coremltools converts whole (``aten.linear``, ``scaled_dot_product_attention``, ...),
        except view ops and the few whose decompositions Core ML runs better."""
        keep = []
        for node in ep.graph.nodes:
            if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
                continue
            if node.target in _DECOMPOSE_ANYWAY or _is_view(node.target) or node.target in keep:
                continue
            try:
                ok = self.rejection(node) is None
            except Exception:  # noqa: BLE001 - unknown ops are decomposed, never kept
                ok = False
            if ok:
                keep.append(node.target)
        return keep, None

    def report(self) -> Optional[PartitionReport]:
        """Delegated op counts and every rejected node with its reason, for the last :meth:`partition`."""
        return self._report
