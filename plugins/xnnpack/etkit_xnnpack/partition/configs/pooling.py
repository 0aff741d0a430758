"""Configs for poolings, batch norm and getitem."""
from __future__ import annotations

import operator
from typing import Optional

import torch

from ...operators.dynamic_quant import CHOOSE_QPARAMS_OPS
from ..config_base import (ALL_PRECISIONS, FP32_AND_STATIC_QUANT, XnnpackOpConfig, arg, dynamic_dim_reason,
                           is_constant, sym_shape, tensor_vals)

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
        scales = arg(node, 3, "scale_factors")
        if scales:
            # PyTorch samples with 1 / scale, XNNPACK with input size / output size: equal only when the
            # scaled size is a whole number.
            src = tensor_vals(node.args[0])[0].shape[2:]
            for size, scale in zip(src, scales):
                if not isinstance(size, int) or float(size) * float(scale) != int(float(size) * float(scale)):
                    return (f"scale factor {scale} of a dim of size {size} does not give a whole output size; "
                            f"XNNPACK samples by the size ratio, PyTorch by the scale (pass size=...)")
        return None


def _pair(v, default):
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * 2 if len(v) == 1 else v


def _mean_dims(node) -> tuple[int, list[int]]:
    rank = tensor_vals(node.args[0])[0].dim()
    return rank, sorted(d % rank for d in (node.args[1] or [])) if rank else []


class MeanDimConfig(XnnpackOpConfig):
    """``mean`` over H and W of a 4-D tensor (global average pooling, the form
    ``adaptive_avg_pool2d(x, 1)`` decomposes to), or over the last dim of any tensor (RMSNorm's
    ``x.pow(2).mean(-1, keepdim=True)``; float only, written like layer norm's row means)."""

    fp16 = True
    dynamic_shapes = True

    precisions = FP32_AND_STATIC_QUANT
    targets = (aten.mean.dim,)

    def check_dynamic(self, node, ep) -> Optional[str]:
        rank, dims = _mean_dims(node)
        if dims == [rank - 1]:
            x = node.args[0]
            last = sym_shape(x)[-1]
            if not isinstance(last, int):
                return (f"dynamic dim {rank - 1} ({last}) of {x.name} is the averaged dim; rows must have a static "
                        f"length")
            return (dynamic_dim_reason(x, "the lowering views the input as rows, and XNNPACK's static_reshape "
                                          "infers only one dim")
                    or dynamic_dim_reason(node, "the row means are reshaped to the result, and XNNPACK's "
                                                "static_reshape infers only one dim"))
        if arg(node, 2, "keepdim", False):
            return None
        return dynamic_dim_reason(node, "the pooled [N, 1, 1, C] is reshaped to the result, and XNNPACK's "
                                        "static_reshape infers only one dim")

    def check_constraints(self, node, ep) -> Optional[str]:
        rank, dims = _mean_dims(node)
        if node.kwargs.get("dtype") is not None:
            return "dtype argument is not supported"
        if rank == 4 and dims == [2, 3]:
            return None
        if rank >= 1 and dims == [rank - 1]:
            return None
        return (f"mean over dims {list(node.args[1] or [])} of a {rank}-D tensor; XNNPACK supports only the H and W "
                f"dims [2, 3] of a 4-D tensor (global average pooling) or the last dim")


class AvgPool2dConfig(XnnpackOpConfig):
    fp16 = True
    targets = (aten.avg_pool2d.default,)

    def check_constraints(self, node, ep) -> Optional[str]:
        if tensor_vals(node.args[0])[0].dim() != 4:
            return "only 4-D (NCHW) inputs are supported"
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
            return self.check_float_dtypes(tensor_vals(node.args[0])) or self.check_shapes(node, ep)
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
        return self.check_float_dtypes(tensor_vals(node.args[0])) or self.check_shapes(node, ep)

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
    dynamic_shapes = True

    def check_common(self, node, ep) -> Optional[str]:
        src = tensor_vals(node.args[0])[0]
        if src.dtype != torch.float32:
            return f"dtype {src.dtype} is not supported"
        return self.check_shapes(node, ep)

    def check_dynamic(self, node, ep) -> Optional[str]:
        x = node.args[0]
        shape = sym_shape(x)
        normalized = len(node.args[1])
        for i in range(len(shape) - normalized, len(shape)):
            if not isinstance(shape[i], int):
                return (f"dynamic dim {i} ({shape[i]}) of {x.name} is a normalized dim; the lowering averages "
                        f"rows of a static length")
        return dynamic_dim_reason(x, "the lowering views the input as rows and back, and XNNPACK's "
                                     "static_reshape infers only one dim")

    def check_constraints(self, node, ep) -> Optional[str]:
        for name, a in (("weight", node.args[2]), ("bias", node.args[3])):
            if a is not None and not is_constant(a, ep):
                return f"{name} is not a constant"
        if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
            return "the mean/rstd outputs are used (only output 0 is supported)"
        return None
