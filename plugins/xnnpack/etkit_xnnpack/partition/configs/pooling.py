"""Configs for poolings, batch norm and getitem."""
from __future__ import annotations

import operator
from typing import Optional

import torch

from ...operators.dynamic_quant import CHOOSE_QPARAMS_OPS
from ..config_base import ALL_PRECISIONS, FP32_AND_STATIC_QUANT, XnnpackOpConfig, arg, is_constant, tensor_vals

aten = torch.ops.aten


class UpsampleBilinear2dConfig(XnnpackOpConfig):
    """``aten.upsample_bilinear2d.vec`` kept undecomposed -> XNNPACK static resize bilinear 2-D
    (NHWC), with or without ``align_corners``; the output size must be static."""

    fp16 = True

    targets = (aten.upsample_bilinear2d.vec,)
    keep_undecomposed = (aten.upsample_bilinear2d.vec,)

    def check_constraints(self, node, ep) -> Optional[str]:
        if tensor_vals(node.args[0])[0].dim() != 4:
            return "only 4-D [N, C, H, W] input is supported"
        return None


def _pair(v, default):
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * 2 if len(v) == 1 else v


class MeanDimConfig(XnnpackOpConfig):
    """``mean`` over H and W of a 4-D tensor (global average pooling, the form
    ``adaptive_avg_pool2d(x, 1)`` decomposes to)."""

    fp16 = True

    precisions = FP32_AND_STATIC_QUANT
    targets = (aten.mean.dim,)

    def check_constraints(self, node, ep) -> Optional[str]:
        src = tensor_vals(node.args[0])[0]
        if src.dim() != 4:
            return f"only 4-D inputs are supported (global average pooling), got {src.dim()}-D"
        dims = sorted(d % 4 for d in (node.args[1] or []))
        if dims != [2, 3]:
            return f"mean over dims {list(node.args[1] or [])}; XNNPACK supports only the H and W dims [2, 3]"
        if node.kwargs.get("dtype") is not None:
            return "dtype argument is not supported"
        return None


class AvgPool2dConfig(XnnpackOpConfig):
    fp16 = True
    targets = (aten.avg_pool2d.default,)

    def check_constraints(self, node, ep) -> Optional[str]:
        kernel = _pair(node.args[1], None)
        padding = _pair(arg(node, 3, "padding", [0]), [0])
        if arg(node, 4, "ceil_mode", False):
            return "ceil_mode=True is not supported"
        if arg(node, 5, "count_include_pad", True) and any(padding):
            return "count_include_pad=True with non-zero padding is not supported"
        divisor = arg(node, 6, "divisor_override")
        if divisor not in (None, kernel[0] * kernel[1]):
            return f"divisor_override={divisor} is not supported"
        return None


class MaxPool2dConfig(XnnpackOpConfig):
    """max_pool2d (and max_pool2d_with_indices whose indices are unused)."""

    fp16 = True

    precisions = FP32_AND_STATIC_QUANT
    targets = (aten.max_pool2d.default, aten.max_pool2d_with_indices.default)

    def check_common(self, node, ep) -> Optional[str]:
        if node.target is aten.max_pool2d_with_indices.default:
            if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
                return "the indices output is used; XNNPACK max pooling does not produce indices"
            # The int64 indices output is never materialized, so only check the values.
            return self.check_float_dtypes(tensor_vals(node.args[0]))
        return super().check_common(node, ep)

    def check_constraints(self, node, ep) -> Optional[str]:
        if tensor_vals(node.args[0])[0].dim() != 4:
            return "only 4-D (NCHW) inputs are supported"
        return None


class BatchNormConfig(XnnpackOpConfig):
    """Inference batch norm (``_native_batch_norm_legit_no_training``) on 4-D input with constant
    statistics: folded into the preceding convolution's weights when that convolution has no other
    user, else a per-channel multiply-add."""

    fp16 = True

    targets = (aten._native_batch_norm_legit_no_training.default,)

    def check_common(self, node, ep) -> Optional[str]:
        return self.check_float_dtypes(tensor_vals(node.args[0]))

    def check_constraints(self, node, ep) -> Optional[str]:
        if tensor_vals(node.args[0])[0].dim() != 4:
            return "only 4-D (NCHW) inputs are supported"
        for name, a in zip(("weight", "bias", "running_mean", "running_var"), node.args[1:5]):
            if a is not None and not is_constant(a, ep):
                return f"{name} is not a constant"
        if node.args[3] is None or node.args[4] is None:
            return "running statistics are missing"
        if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
            return "only output 0 (the normalized tensor) may be used"
        return None


_SPLITS = (aten.split_with_sizes_copy.default, aten.split_with_sizes.default, aten.split_copy.Tensor,
           aten.split.Tensor)


class GetItemConfig(XnnpackOpConfig):
    """``getitem(x, 0)`` of batch norm, layer norm or max pool with indices; any ``getitem`` of a split
    or of a dynamic quantization's choose_qparams."""

    precisions = ALL_PRECISIONS
    targets = (operator.getitem,)

    def check_common(self, node, ep) -> Optional[str]:
        return None

    def check_constraints(self, node, ep) -> Optional[str]:
        src = node.args[0]
        if isinstance(src, torch.fx.Node) and src.target in CHOOSE_QPARAMS_OPS:
            return None  # delegated with its choose_qparams (the partitioner drops it otherwise)
        if isinstance(src, torch.fx.Node) and src.target in _SPLITS:
            return None
        if not isinstance(src, torch.fx.Node) or src.target not in (
                aten._native_batch_norm_legit_no_training.default, aten.max_pool2d_with_indices.default,
                aten.native_layer_norm.default):
            return f"getitem of {getattr(src, 'target', src)} is not delegable"
        if node.args[1] != 0:
            return f"output {node.args[1]} of {src.name} is not delegable (only output 0)"
        return None


class LayerNormConfig(XnnpackOpConfig):
    """``native_layer_norm`` whose mean/rstd outputs are unused, with constant (or no) weight and bias;
    lowered to pooling/arithmetic nodes (see operators/norm.py)."""

    targets = (aten.native_layer_norm.default,)

    def check_common(self, node, ep) -> Optional[str]:
        src = tensor_vals(node.args[0])[0]
        if src.dtype != torch.float32:
            return f"dtype {src.dtype} is not supported"
        if any(not isinstance(d, int) for d in src.shape):
            return f"dynamic shape {list(src.shape)} is not supported (export with static shapes)"
        return None

    def check_constraints(self, node, ep) -> Optional[str]:
        for name, a in (("weight", node.args[2]), ("bias", node.args[3])):
            if a is not None and not is_constant(a, ep):
                return f"{name} is not a constant"
        if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
            return "the mean/rstd outputs are used (only output 0 is supported)"
        return None
