"""State shared by the op lowerings while one partition becomes an ``XNNGraph``.

Memory format. The partition's inputs and outputs are contiguous (NCHW for 4-D tensors), but
XNNPACK's convolutions and poolings work on NHWC data. Like ExecuTorch's XNNPACK backend
(``ChannelsLastTaggedReshapePass`` + ``op_to_copy``), the payload expresses this with explicit
``XNNStaticTranspose`` nodes: a value is kept in one of two layouts, ``CONTIG`` (the PyTorch
shape) or ``NHWC`` (a 4-D NCHW tensor whose dims are stored as [N, H, W, C]). An op that needs
NHWC gets its input transposed once (perm [0, 2, 3, 1]) and the result cached; an op that needs
the PyTorch layout gets it back (perm [0, 3, 1, 2]). Element-wise ops run in whatever layout their
inputs already have, so a chain conv -> add -> clamp -> conv stays in NHWC. Delegate outputs are
always contiguous.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
from torch.export import ExportedProgram

from ..serialization.graph_builder import XNN_INVALID_VALUE_ID, XnnGraphBuilder
from . import dynamic_shapes
from .dynamic_quant import WEIGHT_DEQUANTIZE_OPS
from .quant import (DEQUANTIZE_OPS, QINT8, Int8Params, QuantPlan, activation_params, is_dequantize,
                    is_quantize)

CONTIG = "contig"
NHWC = "nhwc"
PERM_NCHW_TO_NHWC = [0, 2, 3, 1]
PERM_NHWC_TO_NCHW = [0, 3, 1, 2]

#: XNNDatatype numbers for the dtypes this backend handles.
XNN_DATATYPES = {torch.float32: 1, torch.float16: 2}

aten = torch.ops.aten

#: Ops evaluated at preprocess time when every tensor argument is a constant (weights seen through
#: permute/view/transpose, as ExecuTorch's ConstPropPass does before serializing).
FOLDABLE_OPS = {
    aten.permute_copy.default, aten.permute.default, aten.view_copy.default, aten.view.default,
    aten._unsafe_view.default, aten.reshape.default, aten.t_copy.default, aten.t.default,
    aten.transpose_copy.int, aten.transpose.int, aten.unsqueeze_copy.default, aten.unsqueeze.default,
    aten.squeeze_copy.dim, aten.squeeze_copy.dims, aten.squeeze_copy.default, aten.squeeze.dim,
    aten.clone.default, aten.alias_copy.default, aten.detach_copy.default, aten.expand_copy.default,
    aten.expand.default, aten.slice_copy.Tensor, aten.slice.Tensor, aten.select_copy.int, aten.select.int,
    *DEQUANTIZE_OPS, *WEIGHT_DEQUANTIZE_OPS,
}
# Before decomposition a tensor-subclass weight (torchao's quantized tensors) is read through this op.
_ACCESS_INNER = getattr(getattr(torch.ops, "export", None), "access_subclass_inner_tensor", None)
if _ACCESS_INNER is not None:
    FOLDABLE_OPS.add(_ACCESS_INNER.default)


class LoweringError(RuntimeError):
    """A node of the partition cannot be written as XNNPACK nodes (names node, op and reason)."""


def node_desc(node: torch.fx.Node) -> str:
    target = node.target
    name = str(target) if isinstance(target, torch._ops.OpOverload) else getattr(target, "__name__", str(target))
    return f"{name} (node {node.name})"


def tensor_meta(node: torch.fx.Node) -> torch.Tensor:
    """The fake tensor describing ``node``'s (first) tensor result."""
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        val = val[0]
    if not isinstance(val, torch.Tensor):
        raise LoweringError(f"{node_desc(node)}: no tensor metadata (node.meta['val']); re-export the model")
    return val


def static_shape(node: torch.fx.Node) -> list[int]:
    """``node``'s shape; raises LoweringError when a dim is symbolic (for lowerings that need static
    shapes: the partitioner refuses dynamic nodes for them)."""
    shape = tensor_meta(node).shape
    try:
        return [int(d) for d in shape]
    except (TypeError, ValueError):
        raise LoweringError(f"{node_desc(node)}: dynamic shape {list(shape)} is not supported by the XNNPACK "
                            f"delegate; export with static shapes") from None


class LoweringContext:
    """Maps graph nodes to XNNPACK value ids (per layout) and hands out constants."""

    def __init__(self, ep: ExportedProgram, builder: XnnGraphBuilder) -> None:
        from etkit.backend.utils import get_constant

        self.ep = ep
        self.builder = builder
        #: float type of the partition: float16 for a ``model.half()`` program, else float32.
        self.float_dtype = torch.float32
        self._get_constant = get_constant
        self._ids: dict[torch.fx.Node, dict[str, int]] = {}
        self._primary: dict[torch.fx.Node, str] = {}
        self._const_cache: dict[torch.fx.Node, Optional[torch.Tensor]] = {}
        self._const_values: dict[tuple[int, str], int] = {}
        #: conv node -> batch-norm node folded into it (filled by the batch-norm fusion pre-pass).
        self.bn_folded_into: dict[torch.fx.Node, torch.fx.Node] = {}
        #: split-like nodes whose getitem users are lowered one by one.
        self.multi_output_ops: set[torch.fx.Node] = set()
        self.debug_handle = 0
        #: which ops run on int8 data (see :mod:`.quant`); set by preprocess.
        self.quant_plan: Optional[QuantPlan] = None
        #: True while lowering an op of ``quant_plan``: its dequantized inputs are read as qint8.
        self.quant_mode = False
        #: ``{op node: activation node}`` for float activations applied as the op's output clamp
        #: (see :mod:`.fusion`).
        self.float_fused_into: dict[torch.fx.Node, torch.fx.Node] = {}
        #: nodes whose XNNPACK value differs from their PyTorch shape by leading 1s
        #: (``dynamic_shapes.plan_reshapes``): the shape it holds.
        self.stored_shapes: dict[torch.fx.Node, list] = {}
        #: True while lowering an op that reads held values as they are (element-wise, bmm, reshape);
        #: other lowerings get them reshaped to their PyTorch shape (``_pytorch_shaped``).
        self.reads_held = False
        self._pytorch_shaped_ids: dict[torch.fx.Node, int] = {}

    # ---- shapes -------------------------------------------------------------------------------

    def shape(self, node: torch.fx.Node) -> list:
        """The shape ``node``'s XNNPACK value holds (ints and symbolic dims): its PyTorch shape, or for a
        held value that shape with other leading 1s (see :mod:`.dynamic_shapes`)."""
        if node in self.stored_shapes:
            return list(self.stored_shapes[node])
        tensor_meta(node)  # a clear error when there is no metadata
        return dynamic_shapes.sym_shape(node)

    def bounds(self, node: torch.fx.Node) -> list[int]:
        """:meth:`shape` with every dynamic dim at its upper bound (the dims written to the payload)."""
        return self.bounds_of(self.shape(node), node)

    def is_dynamic(self, node: torch.fx.Node) -> bool:
        return dynamic_shapes.has_dynamic_dims(self.shape(node))

    # ---- constants ----------------------------------------------------------------------------

    def constant(self, node: Any) -> Optional[torch.Tensor]:
        """The value of ``node`` if it is known at preprocess time (a constant placeholder, or a
        foldable op on constants), else None."""
        if not isinstance(node, torch.fx.Node):
            return None
        if node in self._const_cache:
            return self._const_cache[node]
        value: Optional[torch.Tensor] = None
        if node.op == "placeholder":
            value = self._get_constant(self.ep, node)
        elif node.op == "call_function" and node.target in FOLDABLE_OPS:
            inputs = node.all_input_nodes
            if inputs and all(self.constant(n) is not None for n in inputs):
                args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: self.constant(n))
                with torch.no_grad():
                    value = node.target(*args, **kwargs)
        self._const_cache[node] = value
        return value

    def is_constant(self, node: Any) -> bool:
        return self.constant(node) is not None

    def constant_value(self, tensor: torch.Tensor, layout: str = CONTIG, key: Any = None) -> int:
        """Define (once per ``key`` and layout) a constant value holding ``tensor`` as fp32."""
        cache_key = (id(key) if key is not None else None, layout)
        if key is not None and cache_key in self._const_values:
            return self._const_values[cache_key]
        t = tensor.detach().to(self.float_dtype)
        if layout == NHWC:
            t = t.permute(PERM_NCHW_TO_NHWC)
        vid = self.builder.add_constant(t.contiguous().numpy())
        if key is not None:
            self._const_values[cache_key] = vid
        return vid

    def scalar_value(self, number: float) -> int:
        """A 1-element fp32 constant (used for the Scalar operand of add/mul/...)."""
        return self.builder.add_constant(np.asarray([number], dtype=np.float64))

    # ---- values -------------------------------------------------------------------------------

    def has_value(self, node: torch.fx.Node) -> bool:
        return node in self._ids

    def primary_layout(self, node: Any) -> str:
        """Layout a node's result was computed in (constants and numbers: CONTIG)."""
        if is_dequantize(node) and node not in self._primary:
            node = node.args[0]  # not materialized: int8 ops read the value behind it
        if isinstance(node, torch.fx.Node) and node in self._primary:
            return self._primary[node]
        return CONTIG

    def define(self, node: torch.fx.Node, layout: str = CONTIG, dims: Optional[list[int]] = None) -> int:
        """Create the value holding ``node``'s result in ``layout`` and make it the primary one."""
        if dims is None:
            dims = self.bounds(node)
            if layout == NHWC:
                if len(dims) != 4:
                    raise LoweringError(f"{node_desc(node)}: NHWC layout needs a 4-D tensor, got shape {dims}")
                dims = [dims[i] for i in PERM_NCHW_TO_NHWC]
        params = self.int8_params(node)
        if params is not None:
            vid = self.builder.add_value(dims, datatype=QINT8, quant=params.to_builder())
        else:
            dtype = tensor_meta(node).dtype
            if dtype not in XNN_DATATYPES:
                raise LoweringError(f"{node_desc(node)}: dtype {dtype} is not supported by the XNNPACK delegate "
                                    f"(supported: {', '.join(map(str, XNN_DATATYPES))} and int8 from "
                                    f"quantize/dequantize nodes)")
            vid = self.builder.add_value(dims, datatype=XNN_DATATYPES[dtype])
        self._ids.setdefault(node, {})[layout] = vid
        self._primary.setdefault(node, layout)
        return vid

    def int8_params(self, node: torch.fx.Node) -> Optional[Int8Params]:
        """Quantization of ``node``'s result when it is int8 in the payload: a quantize node, an op
        lowered on int8 (``quant_plan``), or an int8 partition input read by dequantize nodes."""
        if self.quant_plan is not None and self.quant_plan.is_quantized(node):
            return self.quant_plan.out_params[node]
        if node.op == "call_function":
            return activation_params(node) if is_quantize(node) else None
        if node.op == "placeholder" and tensor_meta(node).dtype == torch.int8:
            params = {activation_params(u) for u in node.users}
            if len(params) != 1 or None in params:
                raise LoweringError(f"int8 partition input {node.name} must be read only by per-tensor int8 "
                                    f"dequantize nodes with one scale and zero point")
            return params.pop()
        return None

    def intermediate(self, node: torch.fx.Node, dims: list[int]) -> int:
        """A temporary value with ``node``'s datatype and quantization (e.g. before a final reshape)."""
        params = self.int8_params(node)
        if params is not None:
            return self.builder.add_value(dims, datatype=QINT8, quant=params.to_builder())
        return self.builder.add_value(dims)

    def output_clamp(self, node: torch.fx.Node) -> Optional[tuple[float, float]]:
        """The (min, max) of an activation fused into ``node``, else None."""
        act = self.float_fused_into.get(node)
        if act is not None:
            from .quant import activation_clamp
            return activation_clamp(act)
        return self.quant_plan.clamp(node) if self.quant_plan is not None else None

    def bind(self, node: torch.fx.Node, vid: int, layout: str = CONTIG) -> None:
        """Make the already defined value ``vid`` hold ``node``'s result in ``layout``."""
        self._ids.setdefault(node, {})[layout] = vid
        self._primary.setdefault(node, layout)

    def value_ids(self, node: torch.fx.Node) -> list:
        """The value ids ``node`` is held in so far (one per layout); empty when it has none."""
        return list(self._ids.get(node, {}).values())

    def alias(self, node: torch.fx.Node, source: torch.fx.Node) -> None:
        """Let ``node`` denote the very same values as ``source`` (getitem, folded batch norm)."""
        self._ids[node] = self._ids[source]
        self._primary[node] = self._primary[source]

    def alias_constant(self, node: torch.fx.Node, source: torch.fx.Node) -> None:
        """Let ``node`` name the materialized constant value of ``source``."""
        vid = self.value(source)
        self._ids[node] = {CONTIG: vid}
        self._primary[node] = CONTIG

    def value(self, arg: Any, layout: str = CONTIG, *, const_key_prefix: str = "") -> int:
        """The value id of ``arg`` in ``layout``: transposes a computed value if needed, materializes a
        constant, or creates a 1-element constant for a Python number.

        Raises:
            LoweringError: if ``arg`` was never defined (the partition is not topologically ordered
                or an op is missing a lowering).
        """
        if isinstance(arg, (int, float)) and not isinstance(arg, bool):
            return self.scalar_value(float(arg))
        if not isinstance(arg, torch.fx.Node):
            raise LoweringError(f"cannot use {arg!r} as an XNNPACK tensor")
        if self.quant_mode and is_dequantize(arg):
            arg = arg.args[0]  # an int8 op reads the quantized value itself
        if arg in self.stored_shapes and not self.reads_held:
            if layout != CONTIG:
                raise LoweringError(f"node {arg.name}: its value is held as {self.stored_shapes[arg]} and cannot be "
                                    f"read in {layout} layout")
            return self._pytorch_shaped(arg)
        if arg not in self._ids:
            const = self.constant(arg)
            if const is not None:
                if layout == NHWC and const.dim() != 4:
                    raise LoweringError(f"constant {arg.name} of shape {list(const.shape)} cannot be used in NHWC layout")
                return self.constant_value(const, layout, key=arg)
            raise LoweringError(f"value of node {arg.name} used before it was defined")
        per_layout = self._ids[arg]
        if layout in per_layout:
            return per_layout[layout]
        src_layout, src = next(iter(per_layout.items()))
        perm = PERM_NCHW_TO_NHWC if layout == NHWC else PERM_NHWC_TO_NCHW
        src_dims = self.builder.dims(src)
        if len(src_dims) != 4:
            raise LoweringError(f"node {arg.name}: cannot change layout of a {len(src_dims)}-D tensor")
        out = self.builder.add_value_like(src, [src_dims[p] for p in perm])
        self.transpose(src, out, perm)
        per_layout[layout] = out
        return out

    def _pytorch_shaped(self, node: torch.fx.Node) -> int:
        """The value of a held ``node`` reshaped (once) to its PyTorch shape (at most one dynamic dim)."""
        if node not in self._pytorch_shaped_ids:
            src = self._ids[node][CONTIG]
            shape = dynamic_shapes.sym_shape(node)
            out = self.builder.add_value_like(src, self.bounds_of(shape, node))
            self.reshape(src, out, shape or [1])
            self._pytorch_shaped_ids[node] = out
        return self._pytorch_shaped_ids[node]

    def bounds_of(self, shape, node: torch.fx.Node) -> list[int]:
        try:
            return dynamic_shapes.bound_shape(shape)
        except ValueError as exc:
            raise LoweringError(f"{node_desc(node)}: {exc}") from None

    # ---- helpers for common node shapes -------------------------------------------------------

    def transpose(self, src: int, dst: int, perm: list[int]) -> None:
        self.builder.add_node("XNNStaticTranspose", "XNNStaticTranspose", numDims=len(perm), perm=list(perm),
                              inputId=src, outputId=dst, flags=0, debug_handle=self.debug_handle)

    def unary(self, union: str, src: int, dst: int, output_min_max=None, flags: int = 0) -> None:
        self.builder.add_node(union, "_XNNNode1x1", inputId=src, outputId=dst, flags=flags,
                              output_min_max=output_min_max, debug_handle=self.debug_handle)

    def binary(self, union: str, a: int, b: int, dst: int, output_min_max=None) -> None:
        self.builder.add_node(union, "_XNNNode2x1", input1Id=a, input2Id=b, outputId=dst, flags=0,
                              output_min_max=output_min_max, debug_handle=self.debug_handle)

    def reshape(self, src: int, dst: int, new_shape: list) -> None:
        """XNNStaticReshape to ``new_shape``; a dynamic (symbolic) dim is written as 0, which XNNPACK infers
        from the number of elements at run time (at most one per reshape)."""
        if dynamic_shapes.has_dynamic_dims(new_shape):
            try:
                new_shape = dynamic_shapes.reshape_new_shape(new_shape)
            except ValueError as exc:
                raise LoweringError(f"node with debug handle {self.debug_handle}: {exc}") from None
        self.builder.add_node("XNNStaticReshape", "XNNStaticReshape", numDims=len(new_shape),
                              newShape=list(new_shape), inputId=src, outputId=dst, flags=0,
                              debug_handle=self.debug_handle)

    def is_external_or_constant(self, vid: int) -> bool:
        tv = self.builder.tensor_value(vid)
        return tv.externalId != XNN_INVALID_VALUE_ID or tv.constantBufferIdx != 0

