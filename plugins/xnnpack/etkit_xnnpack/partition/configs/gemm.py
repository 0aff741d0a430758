"""Configs for convolutions and matrix products (XNNPACK's convolution_2d, depthwise_convolution_2d,
fully_connected, batch_matrix_multiply)."""
from __future__ import annotations

from typing import Optional

import torch

from ...operators.dynamic_quant import dynamic_activation_source
from ..config_base import ALL_PRECISIONS, FP32_AND_STATIC_QUANT, XnnpackOpConfig, arg, is_constant, tensor_vals

aten = torch.ops.aten


class ConvolutionConfig(XnnpackOpConfig):
    """2-D convolution (regular, grouped, depthwise, transposed) with constant weight and bias; NCHW in/out."""

    fp16 = True

    precisions = FP32_AND_STATIC_QUANT
    targets = (aten.convolution.default,)

    def check_constraints(self, node, ep) -> Optional[str]:
        weight, bias = node.args[1], node.args[2]
        if not is_constant(weight, ep):
            return "weight is not a constant"
        if bias is not None and not is_constant(bias, ep):
            return "bias is not a constant"
        if tensor_vals(weight)[0].dim() != 4:
            return f"only 2-D convolution is supported (weight is {tensor_vals(weight)[0].dim()}-D)"
        return None


def _reduction_dim_reason(node, x) -> Optional[str]:
    """Fully connected: the constant weight fixes K, the input's last dim, so it cannot be dynamic."""
    shape = list(tensor_vals(x)[0].shape)
    if shape and not isinstance(shape[-1], int):
        return (f"dynamic dim {len(shape) - 1} ({shape[-1]}) of {x.name} is the reduction dim of XNNPACK's "
                f"fully_connected (fixed by the constant weight)")
    return None


class LinearConfig(XnnpackOpConfig):
    """``aten.linear`` kept undecomposed; constant weight [N, K] and bias [N]."""

    fp16 = True
    dynamic_shapes = True

    precisions = ALL_PRECISIONS
    targets = (aten.linear.default,)
    keep_undecomposed = (aten.linear.default,)

    def check_dynamic(self, node, ep) -> Optional[str]:
        return _reduction_dim_reason(node, node.args[0])

    def check_constraints(self, node, ep) -> Optional[str]:
        if not is_constant(node.args[1], ep):
            return "weight is not a constant"
        bias = arg(node, 2, "bias")
        if bias is not None and not is_constant(bias, ep):
            return "bias is not a constant"
        if dynamic_activation_source(node.args[0]) is not None:
            from .dynamic_quant import check_dynamic_linear
            return check_dynamic_linear(node, ep)
        return None


class AddmmConfig(XnnpackOpConfig):
    """``addmm(bias, x, weight)``: constant 2-D weight, constant bias of N elements, alpha = beta = 1."""

    fp16 = True
    dynamic_shapes = True

    precisions = FP32_AND_STATIC_QUANT
    targets = (aten.addmm.default,)

    def check_dynamic(self, node, ep) -> Optional[str]:
        return _reduction_dim_reason(node, node.args[1])

    def check_constraints(self, node, ep) -> Optional[str]:
        bias, weight = node.args[0], node.args[2]
        if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
            return "alpha/beta other than 1 are not supported"
        if not is_constant(weight, ep):
            return "mat2 (weight) is not a constant"
        if not is_constant(bias, ep):
            return "bias is not a constant"
        n = tensor_vals(weight)[0].shape[1]
        if tensor_vals(bias)[0].numel() != n:
            return f"bias must have {n} elements (one per output column), got shape {list(tensor_vals(bias)[0].shape)}"
        return None


class MmConfig(XnnpackOpConfig):
    """``mm(x, weight)`` with constant weight (fully connected without bias)."""

    fp16 = True
    dynamic_shapes = True

    precisions = FP32_AND_STATIC_QUANT
    targets = (aten.mm.default,)

    def check_dynamic(self, node, ep) -> Optional[str]:
        return _reduction_dim_reason(node, node.args[0])

    def check_constraints(self, node, ep) -> Optional[str]:
        if not is_constant(node.args[1], ep):
            return "mat2 is not a constant (XNNPACK fully_connected needs static weights)"
        return None


class BmmConfig(XnnpackOpConfig):
    """``bmm(a[B, M, K], b[B, K, N])`` (both may be computed; any dim may be dynamic: XNNPACK packs a
    computed ``b`` at every run)."""

    fp16 = True
    dynamic_shapes = True

    targets = (aten.bmm.default,)
