"""``XnnpackBackend``: turns one partition into an XNNPACK delegate payload.

The payload is ExecuTorch's XNNPACK payload (``XH00`` header, ``XN01`` flatbuffer graph from
``schema/xnnpack_graph.fbs``; see :mod:`etkit_xnnpack.serialization.payload`), so the C++ delegate
reads it the way ExecuTorch's ``XNNCompiler`` does:

- values: one ``XNNTensorValue`` per tensor; a value's id is its index. The partition's user inputs
  are values 0..k-1 with external ids 0..k-1 (argument order), then the outputs get external ids
  k.. in output order (``input_ids`` / ``output_ids`` list their value ids in that order). A
  non-tensor argument (a size a dynamic view reads) keeps its external id without a value.
- dynamic shapes (``torch.export.Dim``): a tensor with a symbolic dim is written with its upper
  bound; the delegate reshapes XNNPACK's runtime to the actual sizes at run time. Reshapes write a
  dynamic dim as 0 (XNNPACK infers it); see :mod:`etkit_xnnpack.operators.dynamic_shapes`.
- constants (weights, biases, folded batch norm, per-channel scales) live in the program's named
  data, keyed by the sha256 of their bytes (``PreprocessResult.named_data``); the graph's
  ``constant_data[i]`` has ``named_key`` and offset UINT64_MAX, as ExecuTorch writes them. The
  payload's own constant section stays empty: ExecuTorch's runtime frees the payload after ``init``
  while XNNPACK may keep pointing at unpacked constants.
- statically quantized partitions (PT2E quantize/dequantize nodes) run on int8 where XNNPACK can
  (:mod:`etkit_xnnpack.operators.quant`).
- NCHW: inputs and outputs stay contiguous; explicit ``XNNStaticTranspose`` nodes move 4-D data to
  NHWC for convolutions/poolings and back (see :mod:`etkit_xnnpack.operators.context`).
- Folding at compile time: batch norm after a convolution goes into its weights; views/permutes of
  constants are evaluated; Python scalars become 1-element fp32 constants; a ReLU / hardtanh / clamp
  after a convolution, linear or add/sub/mul becomes that node's output clamp
  (:mod:`etkit_xnnpack.operators.fusion`).
- Ops without an XNNPACK node of their own are written with ones that exist: layer norm (pooling and
  arithmetic, :mod:`etkit_xnnpack.operators.norm`), select (slice + reshape), split (slices),
  standalone batch norm (multiply + add).
"""
from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram

from etkit.backend import BackendDetails, CompileSpec, PreprocessResult

#: Backend id stored in the ``.pte`` (ExecuTorch's id, so payloads interoperate).
BACKEND_ID = "XnnpackBackend"

_BATCH_NORM = torch.ops.aten._native_batch_norm_legit_no_training.default
_CONVOLUTION = torch.ops.aten.convolution.default


def find_foldable_batch_norms(ep: ExportedProgram, ctx) -> dict:
    """``{conv node: batch-norm node}`` for every batch norm whose input is a non-transposed
    convolution with constant weights used only by that batch norm, with constant statistics."""
    folds = {}
    for node in ep.graph.nodes:
        if node.op != "call_function" or node.target is not _BATCH_NORM:
            continue
        conv = node.args[0]
        if not (isinstance(conv, torch.fx.Node) and conv.op == "call_function" and conv.target is _CONVOLUTION):
            continue
        if len(conv.users) != 1 or conv.args[6] or not ctx.is_constant(conv.args[1]):
            continue
        if conv.args[2] is not None and not ctx.is_constant(conv.args[2]):
            continue
        if not all(a is None or ctx.is_constant(a) for a in node.args[1:5]):
            continue
        if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
            continue
        folds[conv] = node
    return folds


class XnnpackBackend(BackendDetails):
    """ExecuTorch's ``XnnpackBackend``: preprocess for partitions tagged by ``XnnpackPartitioner``."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        """Serialize the partition ``edge_program`` as an XNNPACK payload.

        Args:
            edge_program: placeholders = constants then user inputs (delegate-argument order); the
                output node lists the partition's outputs. A dynamic (symbolic) dim is written with
                its upper bound; the delegate reshapes XNNPACK's runtime to the actual sizes.
            compile_specs: unused for now.
        Returns:
            ``PreprocessResult(processed_bytes=payload, debug_handle_map=..., named_data=...)``; the map is
            ``{XNode index: Edge debug handles}`` (:func:`xnode_debug_handles`).
        Raises:
            LoweringError: naming the node and op that cannot be expressed (the partitioner should not
                have tagged it).
        """
        payload, named_data, debug_handle_map = build_payload(edge_program)
        return PreprocessResult(processed_bytes=payload, debug_handle_map=debug_handle_map, named_data=named_data)


def build_payload(ep: ExportedProgram) -> tuple[bytes, dict[str, bytes], dict]:
    """The payload bytes for ``ep``, the named data its constants live in and the debug handle map (see
    :class:`XnnpackBackend.preprocess` and :func:`xnode_debug_handles`)."""
    from .operators import LoweringContext, LoweringError
    from .operators.fusion import float_activation_fusions
    from .operators.quant import QuantPlan
    from .serialization.graph_builder import FP16, XnnGraphBuilder
    from etkit.backend.utils import is_constant

    builder = XnnGraphBuilder()
    ctx = LoweringContext(ep, builder)
    if _is_half(ep):
        ctx.float_dtype, builder.float_datatype = torch.float16, FP16
    ctx.bn_folded_into = find_foldable_batch_norms(ep, ctx)
    ctx.quant_plan = QuantPlan(ep.graph, ctx.constant)
    float_fused = float_activation_fusions(ep.graph, ctx.bn_folded_into, ctx.quant_plan.is_quantized)
    ctx.float_fused_into = {op_node: act for act, op_node in float_fused.items()}

    graph = ep.graph
    for node in graph.nodes:
        if node.op == "placeholder" and not is_constant(ep, node):
            if not isinstance(node.meta.get("val"), torch.Tensor):
                # A size the program computes (a view's symbolic shape argument): the delegate reads
                # sizes from its tensors, but the argument keeps its place (external ids = positions).
                builder.reserve_external()
                continue
            vid = ctx.define(node)
            builder.mark_external(vid, is_input=True)

    ctx.stored_shapes = _plan_dynamic_reshapes(graph, ctx)

    output_node = None
    emitted: dict = {}  # Edge node -> the indices of the XNodes its lowering wrote
    for node in graph.nodes:
        if node.op == "output":
            output_node = node
            continue
        if node.op != "call_function":
            continue
        start = len(builder.nodes)
        _lower_node(ctx, node, float_fused)
        emitted[node] = range(start, len(builder.nodes))

    outputs = output_node.args[0] if output_node is not None else []
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    for out in outputs:
        if not isinstance(out, torch.fx.Node):
            raise LoweringError(f"partition output {out!r} is not a tensor")
        vid = ctx.value(out)
        if ctx.is_external_or_constant(vid):
            # A constant, an input, or a value already returned: XNNPACK needs a distinct value per
            # extern, so copy it.
            copy = builder.add_value(builder.dims(vid), datatype=builder.tensor_value(vid).datatype)
            ctx.unary("XNNCopy", vid, copy)
            vid = copy
        builder.mark_external(vid, is_input=False)
    return builder.to_payload(), builder.named_data, xnode_debug_handles(builder.nodes, ctx, emitted)


def _lower_node(ctx, node: torch.fx.Node, float_fused: dict) -> None:
    """Write the XNodes of one Edge node (none when it is folded into another node or a constant)."""
    from .operators import LOWERINGS, LoweringError
    from .operators.context import node_desc
    from .operators.dynamic_shapes import reads_held_values

    if ctx.constant(node) is not None:
        return  # folded at preprocess time; materialized where used
    lowering = LOWERINGS.get(node.target)
    if lowering is None:
        raise LoweringError(f"{node_desc(node)} has no XNNPACK lowering; it should not have been partitioned "
                            f"to XnnpackBackend")
    ctx.debug_handle = int(node.meta.get("debug_handle", 0) or 0)
    fused_into = ctx.quant_plan.fused.get(node) or float_fused.get(node)
    if fused_into is not None:
        ctx.alias(node, fused_into)  # activation applied as the int8 op's output clamp
        return
    ctx.quant_mode = ctx.quant_plan.is_quantized(node)
    ctx.reads_held = reads_held_values(node.target)
    lowering(ctx, node)
    ctx.quant_mode = False
    ctx.reads_held = False


_OUTPUT_FIELDS = ("outputId", "outputValueId", "outputIndexId")


def xnode_debug_handles(xnodes: list, ctx, emitted: dict) -> dict:
    """The payload's ``debug_handle_map``: ``{XNode index: (debug handles of the Edge nodes it computes)}``.

    The delegate logs each XNNPACK operator's time with the index of the XNode it runs as delegate debug
    id (ExecuTorch's ``DelegateMappingBuilder`` with integer ids), so the Inspector names the Edge ops.
    An XNode maps to the node whose lowering wrote it (transposes and copies a consumer needs go to that
    consumer); a node folded into another's output (a fused activation, a folded batch norm, a getitem)
    joins the XNode that produces the value it denotes. Constants folded at preprocess time map nowhere.
    """
    producer = {}
    for k, xnode in enumerate(xnodes):
        for name in _OUTPUT_FIELDS:
            vid = getattr(xnode.xnodeUnion, name, None)
            if vid is not None:
                producer[vid] = k
    handles: dict = {}
    for node, span in emitted.items():
        handle = node.meta.get("debug_handle")
        if not isinstance(handle, int) or handle <= 0:
            continue
        targets = list(span) or sorted({producer[v] for v in ctx.value_ids(node) if v in producer})
        for k in targets:
            handles.setdefault(k, []).append(handle)
    return {k: tuple(sorted(set(v))) for k, v in sorted(handles.items())}


def _plan_dynamic_reshapes(graph: torch.fx.Graph, ctx) -> dict:
    """Which values are held without leading 1s (see :func:`operators.dynamic_shapes.plan_reshapes`)."""
    from .operators.context import LoweringError, node_desc
    from .operators.dynamic_shapes import plan_reshapes

    def operand_rank(arg):
        if isinstance(arg, (int, float)) and not isinstance(arg, bool):
            return 1
        const = ctx.constant(arg)
        return None if const is None else const.dim()

    stored, errors = plan_reshapes(graph.nodes, lambda n: n.op == "call_function", operand_rank)
    if errors:
        node, reason = next(iter(errors.items()))
        raise LoweringError(f"{node_desc(node)}: {reason} (the partitioner should not have delegated it)")
    return stored


def _is_half(ep: ExportedProgram) -> bool:
    """True if the partition computes in float16 (the partitioner never mixes float types in one op)."""
    for node in ep.graph.nodes:
        val = node.meta.get("val")
        if node.op in ("placeholder", "call_function") and isinstance(val, torch.Tensor) \
                and val.dtype == torch.float16:
            return True
    return False
