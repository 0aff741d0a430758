"""Base of the per-op-family partitioner configs (ExecuTorch's ``XNNPartitionerConfig`` idea).

A config names the ATen ops it handles (``targets``), the precisions it supports, ops to keep
undecomposed, and a ``check(node, ep)`` that returns ``None`` when the node can be delegated or a
:class:`~etkit.backend.Rejection` whose reason the user sees in the partition report, e.g.
``aten.convolution.default (node conv2d_3): weight is not a constant``.
"""
from __future__ import annotations

import enum
from typing import Optional, Sequence

import torch
from torch.export import ExportedProgram

from etkit.backend import Rejection
from etkit.backend.utils import node_target_name

from ..operators.context import FOLDABLE_OPS
from ..operators.dynamic_shapes import dim_upper_bound, dynamic_dims, format_shape

#: Most dimensions an XNNPACK tensor may have.
MAX_DIMS = 6


class ConfigPrecisionType(enum.Enum):
    """Numeric flavours a config may delegate (ExecuTorch's names): FP32; STATIC_QUANT (PT2E int8
    activations and weights); DYNAMIC_QUANT (int8 activations quantized per row at run time, int8 or
    int4 weights: linear only)."""

    FP32 = 1
    STATIC_QUANT = 2
    DYNAMIC_QUANT = 3


#: Configs whose ops also run on int8 data in statically quantized partitions (operators/quant.py).
FP32_AND_STATIC_QUANT = (ConfigPrecisionType.FP32, ConfigPrecisionType.STATIC_QUANT)
#: Configs that serve every precision (linear; getitem, which also unpacks choose_qparams).
ALL_PRECISIONS = tuple(ConfigPrecisionType)


class ConstantAnalysis:
    """Which nodes of a program are known at compile time: constant placeholders and
    :data:`FOLDABLE_OPS` applied to constants (preprocess folds them, e.g. ``permute_copy(weight)``)."""

    def __init__(self, ep: ExportedProgram) -> None:
        from etkit.backend.utils import is_constant

        self._const: set[torch.fx.Node] = set()
        for node in ep.graph.nodes:
            if node.op == "placeholder" and is_constant(ep, node):
                self._const.add(node)
            elif node.op == "call_function" and node.target in FOLDABLE_OPS:
                inputs = node.all_input_nodes
                if inputs and all(n in self._const for n in inputs):
                    self._const.add(node)

    def __call__(self, node) -> bool:
        return isinstance(node, torch.fx.Node) and node in self._const


def _constants(ep: ExportedProgram) -> ConstantAnalysis:
    # Cached on the graph object so every config shares one analysis per partition() call.
    cache = getattr(ep.graph, "_etkit_xnnpack_constants", None)
    if cache is None or cache[0] is not ep:
        cache = (ep, ConstantAnalysis(ep))
        ep.graph._etkit_xnnpack_constants = cache
    return cache[1]


def is_constant(node, ep: ExportedProgram) -> bool:
    """True if ``node`` is a constant (or foldable from constants) in ``ep``."""
    return _constants(ep)(node)


def tensor_vals(node: torch.fx.Node) -> list:
    val = node.meta.get("val")
    vals = val if isinstance(val, (tuple, list)) else [val]
    return [v for v in vals if isinstance(v, torch.Tensor)]


class XnnpackOpConfig:
    """One op family. Subclasses set ``targets`` and override :meth:`check_constraints`.

    Attributes:
        targets: the OpOverloads (or callables such as ``operator.getitem``) this config handles.
        precisions: :class:`ConfigPrecisionType` values supported.
        keep_undecomposed: composite ops the partitioner asks ``to_edge_transform_and_lower`` to keep
            when this config can delegate them.
        fp32_inputs_only: check that every tensor input and output is float32 (or, with ``fp16``,
            that all are float16).
        fp16: XNNPACK also runs this op on float16 tensors (``model.half()``).
        dynamic_shapes: see below; ``check_dynamic`` adds the op's own limits.
    """

    targets: Sequence = ()
    precisions: Sequence[ConfigPrecisionType] = (ConfigPrecisionType.FP32,)
    keep_undecomposed: Sequence = ()
    fp32_inputs_only: bool = True
    fp16: bool = False
    #: The op's XNNPACK nodes take inputs reshaped at run time, so tensors with a dynamic (symbolic)
    #: dim are delegated, subject to :meth:`check_dynamic`; otherwise such nodes are refused.
    dynamic_shapes: bool = False
    #: Sizes computed at run time may appear in the op's arguments (a view to ``[s, 32]``): the lowering
    #: writes the node's output shape, a dynamic dim as "infer" (XNNPACK's static_reshape 0).
    symbolic_size_args: bool = False

    @property
    def name(self) -> str:
        return type(self).__name__

    def check(self, node: torch.fx.Node, ep: ExportedProgram) -> Optional[Rejection]:
        """``None`` if ``node`` can be delegated, else why not."""
        reason = _check_dim_order(node) or self.check_common(node, ep) or self.check_constraints(node, ep)
        if reason:
            return Rejection(node.name, node_target_name(node), reason)
        return None

    def check_common(self, node: torch.fx.Node, ep: ExportedProgram) -> Optional[str]:
        outs = tensor_vals(node)
        if not outs:
            return "no tensor metadata on the node (re-export the model)"
        for arg in node.all_input_nodes:
            if not tensor_vals(arg):
                if self.symbolic_size_args and isinstance(arg.meta.get("val"), (int, torch.SymInt)):
                    continue  # a size of the output shape: written from the node's own shape
                # a size or position computed while the program runs (``x[0].item()``, ``x.size(1)``): the
                # delegate's graph is built once, at init, with every parameter fixed
                return f"argument {arg.name} is a value computed at run time, not a tensor or a constant"
        checked = list(outs)
        if self.fp32_inputs_only:
            checked += [v for n in node.all_input_nodes for v in tensor_vals(n)]
        reason = self.check_float_dtypes(checked)
        if reason:
            return reason
        for v in outs:
            if v.dim() > MAX_DIMS:
                return f"{v.dim()}-D tensor; XNNPACK supports at most {MAX_DIMS} dims"
        return self.check_shapes(node, ep)

    def check_shapes(self, node: torch.fx.Node, ep: ExportedProgram) -> Optional[str]:
        """None when the tensors of ``node`` are neither empty nor dynamic, or when the op runs their
        dynamic dims (bounded dims, ``dynamic_shapes`` and :meth:`check_dynamic`); else the reason,
        naming the tensor and dim."""
        named = [(node.name, v) for v in tensor_vals(node)]
        named += [(n.name, v) for n in node.all_input_nodes for v in tensor_vals(n)]
        # the result (batch norm's unused statistics outputs are empty) and the inputs
        for name, v in named[:1] + named[len(tensor_vals(node)):]:
            if any(isinstance(d, int) and d == 0 for d in v.shape):
                return f"{name} {format_shape(v.shape)} is empty; XNNPACK does not run empty tensors"
        dynamic = [(name, v, i, d) for name, v in named for i, d in enumerate(v.shape) if not isinstance(d, int)]
        if not dynamic:
            return None
        for name, v, i, d in dynamic:
            if dim_upper_bound(d) is None:
                return (f"dynamic dim {i} ({d}) of {name} {format_shape(v.shape)} has no upper bound; export with "
                        f"torch.export.Dim(..., max=N)")
        if not self.dynamic_shapes:
            name, v, i, d = dynamic[0]
            return (f"dynamic dim {i} ({d}) of {name} {format_shape(v.shape)}: {self.dynamic_refusal()}")
        return self.check_dynamic(node, ep)

    def dynamic_refusal(self) -> str:
        """Why this op family is not delegated with dynamic shapes (the end of the refusal message)."""
        return f"{self.name} delegates static shapes only (XNNPACK node parameters fixed at init)"

    def check_dynamic(self, node: torch.fx.Node, ep: ExportedProgram) -> Optional[str]:
        """Op-specific limits for dynamic shapes (only called when some tensor of ``node`` has a
        dynamic dim and ``dynamic_shapes`` is set); return a reason string to reject."""
        return None

    def check_float_dtypes(self, vals) -> Optional[str]:
        """None if every tensor of ``vals`` is float32, or float16 when the op runs in fp16."""
        dtypes = {v.dtype for v in vals}
        allowed = {torch.float32, torch.float16} if self.fp16 else {torch.float32}
        bad = dtypes - allowed
        if bad:
            what = "float32 or float16" if self.fp16 else "float32"
            return f"dtype {sorted(map(str, bad))[0]} is not supported (XNNPACK delegate handles {what} here)"
        if len(dtypes) > 1:
            return "mixes float16 and float32 tensors (XNNPACK needs one float type per op)"
        return None

    def check_constraints(self, node: torch.fx.Node, ep: ExportedProgram) -> Optional[str]:
        """Op-specific checks; return a reason string to reject."""
        return None


def _check_dim_order(node: torch.fx.Node) -> Optional[str]:
    """Every config's first check. preprocess lays every tensor out in its logical (contiguous) order,
    converting to NHWC itself around convolutions; a program whose tensors are channels-last (a model
    exported with a channels_last input) would hand the delegate another layout than it was built for."""
    for v in tensor_vals(node) + [v for n in node.all_input_nodes for v in tensor_vals(n)]:
        if not _dim_order_supported(v):
            hint = "export with contiguous inputs"
            if any(not isinstance(d, int) for d in v.shape):
                hint += ("; with dynamic shapes the program keeps the strides export traced (an op after a "
                         "permute or transpose keeps its permuted order)")
            return (f"a tensor with strides {list(v.stride())} is not contiguous (dim order other than "
                    f"0..n-1, e.g. channels-last); etkit's XNNPACK lowering takes contiguous tensors: {hint}")
    return None


def _dim_order_supported(v: torch.Tensor) -> bool:
    """Whether the program gives ``v`` the dim order 0..n-1 (the order the emitter derives from the
    strides, so a piece of a split whose metadata kept the strides of the view, ``[96 * s, 96, 1]`` for
    ``[1, s, 32]``, still qualifies: its tensor is written contiguously)."""
    static = all(isinstance(d, int) for d in v.shape)
    if (static and v.numel() <= 1) or v.is_contiguous():
        return True
    try:
        from etkit.emit.dtypes import dim_order
    except ImportError:  # pragma: no cover - an older core
        return False
    return list(dim_order(v)) == list(range(v.dim()))


def sym_shape(node) -> list:
    """Shape of ``node``'s (first) tensor result, symbolic dims included."""
    return list(tensor_vals(node)[0].shape)


def dynamic_dim_reason(node: torch.fx.Node, what: str, limit: int = 1) -> Optional[str]:
    """A reason when ``node``'s result has more than ``limit`` dynamic dims (``what`` says which XNNPACK
    step needs that), else None."""
    shape = sym_shape(node)
    dyn = dynamic_dims(shape)
    if len(dyn) > limit:
        return (f"dynamic dims {dyn} ({', '.join(str(shape[i]) for i in dyn)}) of {node.name} "
                f"{format_shape(shape)}: {what}")
    return None


def arg(node: torch.fx.Node, index: int, name: str, default=None):
    """Positional-or-keyword argument ``index``/``name`` of ``node``."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def reset_constants(ep: ExportedProgram) -> None:
    """Forget the cached :class:`ConstantAnalysis` of ``ep`` (call after the graph changed)."""
    if hasattr(ep.graph, "_etkit_xnnpack_constants"):
        del ep.graph._etkit_xnnpack_constants
