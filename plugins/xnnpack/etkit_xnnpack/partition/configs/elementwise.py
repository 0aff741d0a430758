"""Configs for element-wise ops: binary arithmetic, activations, softmax."""
from __future__ import annotations

from typing import Optional

import torch

from ..config_base import FP32_AND_STATIC_QUANT, XnnpackOpConfig, arg, dynamic_dim_reason, is_constant, tensor_vals

aten = torch.ops.aten


class BinaryConfig(XnnpackOpConfig):
    """add, sub, mul, div, maximum, minimum (Tensor or Scalar operand; broadcasting allowed)."""

    fp16 = True
    dynamic_shapes = True

    precisions = FP32_AND_STATIC_QUANT
    targets = (aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar, aten.mul.Tensor,
               aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar, aten.maximum.default, aten.minimum.default)

    def check_common(self, node, ep) -> Optional[str]:
        """Like the base check, except that a one-element constant operand of another dtype is fine
        (``x * 2`` arrives as ``mul.Tensor(x, <int64 0-d constant>)``; the result is float32 and
        preprocess stores the constant as float32)."""
        reason = super().check_common(node, ep)
        if reason is None or not (reason.startswith("dtype") or reason.startswith("mixes")):
            return reason
        vals = list(tensor_vals(node))
        for n in node.all_input_nodes:
            if not (is_constant(n, ep) and all(v.numel() == 1 for v in tensor_vals(n))):
                vals += tensor_vals(n)  # a one-element constant is stored in the op's float type
        return self.check_float_dtypes(vals)

    def check_constraints(self, node, ep) -> Optional[str]:
        alpha = node.kwargs.get("alpha", 1)
        if alpha != 1:
            return f"alpha={alpha} is not supported (only 1)"
        if node.target is aten.div.Tensor and node.kwargs.get("rounding_mode") is not None:
            return f"rounding_mode={node.kwargs['rounding_mode']!r} is not supported"
        for a in node.args[:2]:
            if isinstance(a, bool) or not isinstance(a, (int, float, torch.fx.Node)):
                return f"operand {a!r} is not a tensor or number"
        return None


class UnaryConfig(XnnpackOpConfig):
    """One-input math ops XNNPACK has a node for, and dtype/layout preserving copies."""

    fp16 = True
    dynamic_shapes = True

    targets = (aten.tanh.default, aten.sigmoid.default, aten.abs.default, aten.neg.default, aten.floor.default,
               aten.ceil.default, aten.sqrt.default, aten.rsqrt.default, aten.exp.default, aten.log.default,
               aten.sin.default, aten.cos.default, aten.clone.default, aten.alias_copy.default,
               aten.detach_copy.default)

    def check_constraints(self, node, ep) -> Optional[str]:
        mf = node.kwargs.get("memory_format")
        if mf not in (None, torch.contiguous_format, torch.preserve_format):
            return f"memory_format={mf} is not supported"
        return None


class HardswishConfig(XnnpackOpConfig):
    """``aten.hardswish`` kept undecomposed (XNNPACK hardswish)."""

    fp16 = True
    dynamic_shapes = True

    targets = (aten.hardswish.default,)
    keep_undecomposed = (aten.hardswish.default,)


class PReLUConfig(XnnpackOpConfig):
    """``aten.prelu`` kept undecomposed -> XNNPACK prelu: the input's channels (dim 1) must be the
    last dim XNNPACK sees (4-D NCHW, run in NHWC, or 2-D [N, C]) and the slope a constant with one
    value per channel or one in total."""

    fp16 = True

    targets = (aten.prelu.default,)
    keep_undecomposed = (aten.prelu.default,)

    def check_constraints(self, node, ep) -> Optional[str]:
        x = tensor_vals(node.args[0])[0]
        if x.dim() not in (2, 4):
            return f"{x.dim()}-D input; only 2-D [N, C] or 4-D [N, C, H, W] map channels to XNNPACK's last dim"
        if not is_constant(node.args[1], ep):
            return "the slope (weight) is not a constant"
        slopes = tensor_vals(node.args[1])[0].numel()
        if slopes not in (1, x.shape[1]):
            return f"{slopes} slopes for {x.shape[1]} channels"
        return None


class ClampConfig(XnnpackOpConfig):
    """relu, hardtanh (relu6), clamp with number bounds -> XNNPACK clamp."""

    fp16 = True
    dynamic_shapes = True

    precisions = FP32_AND_STATIC_QUANT
    targets = (aten.relu.default, aten.hardtanh.default, aten.clamp.default)

    def check_constraints(self, node, ep) -> Optional[str]:
        for bound in node.args[1:3]:
            if bound is not None and not isinstance(bound, (int, float)):
                return f"bound {bound!r} is not a number"
        return None


class GeluConfig(XnnpackOpConfig):
    """gelu with approximate='none' (XNNPACK gelu is the erf form)."""

    fp16 = True
    dynamic_shapes = True

    targets = (aten.gelu.default,)

    def check_constraints(self, node, ep) -> Optional[str]:
        approx = arg(node, 1, "approximate", "none")
        if approx != "none":
            return f"approximate={approx!r} is not supported (only 'none')"
        return None


class LeakyReluConfig(XnnpackOpConfig):
    fp16 = True
    dynamic_shapes = True
    targets = (aten.leaky_relu.default,)


class EluConfig(XnnpackOpConfig):
    """elu with scale = input_scale = 1."""

    fp16 = True
    dynamic_shapes = True

    targets = (aten.elu.default,)

    def check_constraints(self, node, ep) -> Optional[str]:
        if arg(node, 2, "scale", 1) != 1 or arg(node, 3, "input_scale", 1) != 1:
            return "scale/input_scale other than 1 are not supported"
        return None


class SquareConfig(XnnpackOpConfig):
    """``pow(x, 2)`` -> XNNPACK square."""

    fp16 = True
    dynamic_shapes = True

    targets = (aten.pow.Tensor_Scalar,)

    def check_constraints(self, node, ep) -> Optional[str]:
        if node.args[1] != 2:
            return f"exponent {node.args[1]} is not supported (only 2)"
        return None


def _softmax_dim_reason(node) -> Optional[str]:
    """Why XNNPACK cannot run this softmax over ``node.args[1]`` (it normalizes the last dim only)."""
    rank = tensor_vals(node)[0].dim()
    dim = node.args[1]
    if rank == 0 or dim % rank != rank - 1:
        return f"softmax over dim {dim} of a {rank}-D tensor; XNNPACK only supports the last dim"
    return None


class SoftmaxConfig(XnnpackOpConfig):
    """``_softmax`` over the last dim (which may be dynamic: XNNPACK reads it at reshape time)."""

    fp16 = True
    dynamic_shapes = True

    targets = (aten._softmax.default,)

    def check_constraints(self, node, ep) -> Optional[str]:
        reason = _softmax_dim_reason(node)
        if reason is None and node.args[2]:
            return "half_to_float=True is not supported"
        return reason


class SafeSoftmaxConfig(XnnpackOpConfig):
    """``_safe_softmax`` (softmax whose fully masked rows, all ``-inf``, give 0; what
    ``scaled_dot_product_attention`` and ``nn.MultiheadAttention`` use) over the last dim, kept whole
    so attention stays in one delegate; lowered in operators/safe_softmax.py."""

    targets = (aten._safe_softmax.default,)
    keep_undecomposed = (aten._safe_softmax.default,)
    dynamic_shapes = True

    def check_dynamic(self, node, ep) -> Optional[str]:
        return dynamic_dim_reason(node, "the lowering views the input as [rows, last dim] and back, and "
                                        "XNNPACK's static_reshape infers only one dim")

    def check_constraints(self, node, ep) -> Optional[str]:
        reason = _softmax_dim_reason(node)
        if reason is None and arg(node, 2, "dtype") is not None:
            return "a dtype argument is not supported"
        return reason


class ToCopyConfig(XnnpackOpConfig):
    """``_to_copy`` that changes neither dtype nor layout (a plain copy)."""

    targets = (aten._to_copy.default,)
    dynamic_shapes = True

    def check_constraints(self, node, ep) -> Optional[str]:
        src = tensor_vals(node.args[0])[0]
        out = tensor_vals(node)[0]
        if src.dtype != out.dtype:
            return f"dtype conversion {src.dtype} -> {out.dtype} is not supported"
        mf = node.kwargs.get("memory_format")
        if mf not in (None, torch.contiguous_format, torch.preserve_format):
            return f"memory_format={mf} is not supported"
        return None
