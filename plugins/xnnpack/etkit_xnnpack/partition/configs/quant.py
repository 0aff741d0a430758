"""Configs for the quantize / dequantize nodes of PT2E-quantized programs (see operators/quant.py)."""
from __future__ import annotations

from typing import Optional

import torch

from ...operators.quant import (DEQUANTIZE_PER_CHANNEL, DEQUANTIZE_PER_TENSOR, QUANTIZE_PER_TENSOR,
                                activation_params)
from ..config_base import MAX_DIMS, ConfigPrecisionType, XnnpackOpConfig, is_constant, tensor_vals


class _QDQConfig(XnnpackOpConfig):
    precisions = (ConfigPrecisionType.STATIC_QUANT,)
    fp32_inputs_only = False

    def check_common(self, node, ep) -> Optional[str]:
        outs = tensor_vals(node)
        if not outs:
            return "no tensor metadata on the node (re-export the model)"
        if outs[0].dim() > MAX_DIMS:
            return f"{outs[0].dim()}-D tensor; XNNPACK supports at most {MAX_DIMS} dims"
        return self.check_shapes(node, ep)

    def dynamic_refusal(self) -> str:
        return "statically quantized (int8) partitions are delegated with static shapes only"


class QuantizeConfig(_QDQConfig):
    """quantize_per_tensor to int8 over [-128, 127] -> an int8 op's output, or XNNPACK convert."""

    targets = (QUANTIZE_PER_TENSOR,)

    def check_constraints(self, node, ep) -> Optional[str]:
        if activation_params(node) is None:
            return "only int8 per-tensor quantization over [-128, 127] with a constant scale is supported"
        src = tensor_vals(node.args[0])
        if not src or src[0].dtype != torch.float32:
            return "the quantized value must be float32"
        return None


class DequantizeConfig(_QDQConfig):
    """dequantize_per_tensor of int8 activations; dequantize_per_tensor / per_channel of int8 constant
    weights (folded at compile time, or read as qcint8 by an int8 op)."""

    targets = (DEQUANTIZE_PER_TENSOR, DEQUANTIZE_PER_CHANNEL)

    def check_constraints(self, node, ep) -> Optional[str]:
        if is_constant(node.args[0], ep):
            return None
        if node.target is DEQUANTIZE_PER_CHANNEL:
            return "per-channel dequantize of a run-time value is not supported (only of constant weights)"
        if activation_params(node) is None:
            return "only int8 per-tensor dequantization over [-128, 127] with a constant scale is supported"
        return None
