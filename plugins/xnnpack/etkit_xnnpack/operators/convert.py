"""Quantize / dequantize nodes of statically quantized partitions (see :mod:`.quant`).

A quantize whose input already is int8 with its parameters (an op lowered on int8, or the same
parameters through a dequantize) names that value; any other quantize is ``XNNConvert`` fp32 ->
qint8. A dequantize is only materialized (``XNNConvert`` qint8 -> fp32) when a float op or the
partition's output reads it; int8 ops read the value behind it.

Dynamically quantized activations (:mod:`.dynamic_quant`): choose_qparams and its getitems emit
nothing (XNNPACK computes each row's parameters inside the convert), the quantize is ``XNNConvert``
fp32 -> qdint8, and the dequantize names that qdint8 value for the fully connected that reads it.
"""
from __future__ import annotations

import torch

from ..serialization.graph_builder import PerToken
from .context import CONTIG, LoweringContext, LoweringError, node_desc
from .dynamic_quant import (CHOOSE_QPARAMS_OPS, DYNAMIC_DEQUANTIZE_OPS, DYNAMIC_QUANTIZE_OPS, DYNAMIC_READERS,
                            QDINT8, dynamic_activation_source)
from .quant import (DEQUANTIZE_PER_CHANNEL, DEQUANTIZE_PER_TENSOR, QUANTIZE_PER_TENSOR, activation_params,
                    is_dequantize, is_quantize)
from .registry import lowers


def _int8_reader(ctx: LoweringContext, user: torch.fx.Node, dq: torch.fx.Node) -> bool:
    """True if ``user`` reads the int8 value behind ``dq`` rather than its float value."""
    if ctx.quant_plan is not None and ctx.quant_plan.is_quantized(user):
        return True
    return is_quantize(user) and activation_params(user) == activation_params(dq)


@lowers(QUANTIZE_PER_TENSOR)
def lower_quantize(ctx: LoweringContext, node: torch.fx.Node) -> None:
    params = activation_params(node)
    if params is None:
        raise LoweringError(f"{node_desc(node)}: only int8 per-tensor quantization over [-128, 127] is supported")
    src = node.args[0]
    if is_dequantize(src) and activation_params(src) == params:
        ctx.alias(node, src.args[0])  # dequantize then quantize with the same parameters: identity
        return
    if ctx.has_value(src):
        layout = ctx.primary_layout(src)
        if ctx.builder.quant(ctx.value(src, layout)) == params.to_builder():
            ctx.alias(node, src)  # the op already produced int8 with these parameters
            return
    layout = ctx.primary_layout(src)
    in_id = ctx.value(src, layout)
    if ctx.builder.quant(in_id) is not None:
        raise LoweringError(f"{node_desc(node)}: requantizing an int8 value to other parameters is not supported")
    ctx.unary("XNNConvert", in_id, ctx.define(node, layout))


@lowers(DEQUANTIZE_PER_TENSOR)
def lower_dequantize(ctx: LoweringContext, node: torch.fx.Node) -> None:
    if activation_params(node) is None:
        raise LoweringError(f"{node_desc(node)}: only int8 per-tensor dequantization over [-128, 127] is supported")
    if all(_int8_reader(ctx, u, node) for u in node.users):
        return  # nobody needs the float value
    src = node.args[0]
    layout = ctx.primary_layout(src)
    in_id = ctx.value(src, layout)
    if ctx.builder.quant(in_id) != activation_params(node).to_builder():
        raise LoweringError(f"{node_desc(node)}: its input {src.name} is not int8 with the same scale and zero point")
    ctx.unary("XNNConvert", in_id, ctx.define(node, layout))


@lowers(DEQUANTIZE_PER_CHANNEL)
def lower_dequantize_per_channel(ctx: LoweringContext, node: torch.fx.Node) -> None:
    # Only dequantized constants (weights) are partitioned; preprocess folds them.
    raise LoweringError(f"{node_desc(node)}: per-channel dequantize of a run-time value is not supported")


@lowers(*CHOOSE_QPARAMS_OPS)
def lower_choose_qparams(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """Nothing to emit: XNNPACK's convert to qdint8 picks each row's scale and zero point itself."""


@lowers(*DYNAMIC_QUANTIZE_OPS)
def lower_dynamic_quantize(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """fp32 x -> qdint8 (one scale and zero point per row of the last dim)."""
    x = node.args[0]
    out = ctx.builder.add_value(ctx.bounds(x), datatype=QDINT8, quant=PerToken(1))
    ctx.unary("XNNConvert", ctx.value(x, CONTIG), out)
    ctx.bind(node, out)


@lowers(*DYNAMIC_DEQUANTIZE_OPS)
def lower_dynamic_dequantize(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """The qdint8 value itself: only a dynamically quantized fully connected may read it."""
    if dynamic_activation_source(node) is None:
        raise LoweringError(f"{node_desc(node)}: not the dequantize of a per-row int8 quantization computed at "
                            f"run time (choose_qparams -> quantize -> dequantize of one value)")
    readers = [u for u in node.users if u.target not in DYNAMIC_READERS]
    if readers:
        raise LoweringError(f"{node_desc(node)}: the dynamically quantized value is read by {readers[0].name} "
                            f"({readers[0].target}); XNNPACK reads such values only in linear")
    ctx.alias(node, node.args[0])
