"""Configs for dynamically quantized activations (choose_qparams -> quantize -> dequantize) read by
linears that XNNPACK runs as qd8 fully connected (see operators/dynamic_quant.py).

The chain is delegated whole or not at all: every node of it checks the whole chain, including that
each reader is a linear the partitioner delegates with a weight XNNPACK can express, so a partition
never hands a qdint8 value to an op that cannot read it.
"""
from __future__ import annotations

import operator
from typing import Optional

import torch

from ...operators.dynamic_quant import (CHOOSE_QPARAMS_OPS, DYNAMIC_DEQUANTIZE_OPS, DYNAMIC_QUANTIZE_OPS,
                                        DYNAMIC_READERS, TORCHAO_CHOOSE_QPARAMS, TORCHAO_DEQUANTIZE,
                                        TORCHAO_QUANTIZE, dynamic_activation_source, dynamic_chain,
                                        dynamic_weight)
from ..config_base import MAX_DIMS, ConfigPrecisionType, XnnpackOpConfig, is_constant, tensor_vals


def check_dynamic_linear(node: torch.fx.Node, ep) -> Optional[str]:
    """For a linear whose input is a dynamically quantized activation: why XNNPACK cannot run it as
    a qd8 fully connected, or None."""
    from ...operators.context import LoweringContext

    weight_arg = node.args[DYNAMIC_READERS[node.target][1]]
    if not is_constant(weight_arg, ep):
        return "weight is not a constant"
    constant = LoweringContext(ep, None).constant
    weight, reason = dynamic_weight(weight_arg, constant)
    if weight is None:
        return reason
    if weight.bits == 4 and weight.values.shape[1] % 2:
        return f"int4 weights need an even input size, got {weight.values.shape[1]}"
    return None


class DynamicQuantChainConfig(XnnpackOpConfig):
    """choose_qparams / quantize / dequantize of an activation quantized to int8 at run time
    (PT2E ``is_dynamic=True``, torchao ``Int8DynamicActivationIntxWeightConfig``)."""

    precisions = (ConfigPrecisionType.DYNAMIC_QUANT,)
    targets = tuple(CHOOSE_QPARAMS_OPS | DYNAMIC_QUANTIZE_OPS | DYNAMIC_DEQUANTIZE_OPS)
    #: torchao's ops are composite: kept whole so the pattern survives to partitioning.
    keep_undecomposed = tuple(op for op in (TORCHAO_CHOOSE_QPARAMS, TORCHAO_QUANTIZE, TORCHAO_DEQUANTIZE)
                              if op is not None)
    fp32_inputs_only = False

    def check_common(self, node, ep) -> Optional[str]:
        return None

    def check_constraints(self, node, ep) -> Optional[str]:
        from .gemm import LinearConfig

        chain = dynamic_chain(node)
        if chain is None:
            return ("not part of a per-row int8 quantization computed at run time (choose_qparams -> "
                    "quantize -> dequantize of one float value over [-128, 127]; torchao blocks [1, .., 1, K])")
        dq, readers = chain
        x = dynamic_activation_source(dq)
        xval = tensor_vals(x)[0]
        from ...operators.dynamic_shapes import dim_upper_bound, format_shape
        for i, d in enumerate(xval.shape):
            if not isinstance(d, int) and (i == xval.dim() - 1 or dim_upper_bound(d) is None):
                what = "is the quantized row (the linear's reduction dim)" if i == xval.dim() - 1 else \
                    "has no upper bound; export with torch.export.Dim(..., max=N)"
                return f"dynamic dim {i} ({d}) of {x.name} {format_shape(xval.shape)} {what}"
        if xval.dim() > MAX_DIMS:
            return f"{xval.dim()}-D tensor; XNNPACK supports at most {MAX_DIMS} dims"
        q = dq.args[0]
        helpers = list(_chooser(q).users)
        if len(q.users) != 1 or any(set(h.users) - {q, dq} for h in helpers) or len(helpers) != 2:
            return "the quantized value or its scale / zero point is used outside the quantize -> dequantize pair"
        if not readers:
            return "the dequantized value is not used"
        for r in readers:
            if r.target not in DYNAMIC_READERS:
                return f"read by {r.name} ({r.target}); XNNPACK reads dynamically quantized values only in linear"
            position = DYNAMIC_READERS[r.target][0]
            if r.args[position] is not dq or dq in r.args[position + 1:]:
                return f"{r.name} reads the dequantized value other than as its input"
            rejection = LinearConfig().check(r, ep)
            if rejection is not None:
                return f"its reader {r.name} is not delegated: {rejection.reason}"
        return None


def _chooser(q: torch.fx.Node) -> torch.fx.Node:
    """The choose_qparams node whose getitems give ``q`` its scale and zero point."""
    for a in q.args[1:]:
        if isinstance(a, torch.fx.Node) and a.target is operator.getitem and a.args[0].target in CHOOSE_QPARAMS_OPS:
            return a.args[0]
    raise ValueError(f"{q.name} has no choose_qparams input")
