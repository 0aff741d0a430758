"""Configs for data-movement ops: reshapes, transposes, concatenation, slicing, padding."""
from __future__ import annotations

from typing import Optional

import torch

from ...operators.dynamic_shapes import dims_equal, dynamic_dims, format_shape, same_but_leading_ones, shapes_equal
from ..config_base import FP32_AND_STATIC_QUANT, XnnpackOpConfig, arg, dynamic_dim_reason, sym_shape, tensor_vals

aten = torch.ops.aten


class ReshapeConfig(XnnpackOpConfig):
    """view/reshape, unsqueeze, squeeze -> XNNPACK static_reshape. With dynamic shapes the result may
    have one dynamic dim (written as 0: XNNPACK infers it); several only when the reshape merely adds or
    removes leading 1s (decided per partition, see operators/dynamic_shapes.py: the partitioner drops
    the ones it cannot write)."""

    fp16 = True
    dynamic_shapes = True
    symbolic_size_args = True

    def check_dynamic(self, node, ep) -> Optional[str]:
        out, src = sym_shape(node), sym_shape(node.args[0])
        if len(dynamic_dims(out)) <= 1 or same_but_leading_ones(out, src):
            return None
        return dynamic_dim_reason(node, f"the reshape from {format_shape(src)} needs XNNPACK's static_reshape "
                                        f"to infer more than one dim (it infers one)")

    precisions = FP32_AND_STATIC_QUANT
    targets = (aten.view_copy.default, aten.view.default, aten._unsafe_view.default, aten.reshape.default,
               aten.unsqueeze_copy.default, aten.unsqueeze.default, aten.squeeze_copy.dim, aten.squeeze_copy.dims,
               aten.squeeze_copy.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)


class PermuteConfig(XnnpackOpConfig):
    """permute / transpose / t -> XNNPACK static_transpose."""

    fp16 = True
    dynamic_shapes = True

    precisions = FP32_AND_STATIC_QUANT
    targets = (aten.permute_copy.default, aten.permute.default, aten.transpose_copy.int, aten.transpose.int,
               aten.t_copy.default, aten.t.default)


class ExpandConfig(XnnpackOpConfig):
    """expand that keeps the shape (a copy); XNNPACK 2024-11-08 has no broadcast node in this schema."""

    fp16 = True
    dynamic_shapes = True
    symbolic_size_args = True

    targets = (aten.expand_copy.default, aten.expand.default)

    def check_constraints(self, node, ep) -> Optional[str]:
        src, out = tensor_vals(node.args[0])[0], tensor_vals(node)[0]
        if not shapes_equal(list(src.shape), list(out.shape)):
            return f"expand {list(src.shape)} -> {list(out.shape)} changes the shape (only no-op expands are supported)"
        return None


class CatConfig(XnnpackOpConfig):
    """cat of float tensors, none empty (dynamic dims allowed: XNNPACK sums the axis at reshape time)."""

    fp16 = True
    dynamic_shapes = True

    precisions = FP32_AND_STATIC_QUANT
    targets = (aten.cat.default,)

    def check_constraints(self, node, ep) -> Optional[str]:
        tensors = node.args[0]
        if not tensors:
            return "empty tensor list"
        for t in tensors:
            vals = tensor_vals(t) if isinstance(t, torch.fx.Node) else []
            if not vals:
                return "an input is not a tensor"
            if vals[0].numel() == 0:
                return f"input {t.name} is empty"
        return None


class SliceConfig(XnnpackOpConfig):
    """slice with step 1 -> XNNPACK static_slice; select -> slice + reshape."""

    fp16 = True
    dynamic_shapes = True

    targets = (aten.slice_copy.Tensor, aten.slice.Tensor, aten.select_copy.int, aten.select.int)

    def check_dynamic(self, node, ep) -> Optional[str]:
        src = sym_shape(node.args[0])
        dim = arg(node, 1, "dim", 0) % len(src)
        if not isinstance(src[dim], int):
            # XNNPACK's static_slice fixes offsets and sizes at init (a size of 0: the whole dim): a dynamic
            # dim can be kept whole, or cut to a static size from a static offset counted from its start.
            if node.target in (aten.slice_copy.Tensor, aten.slice.Tensor):
                start, size = arg(node, 2, "start", 0) or 0, sym_shape(node)[dim]
                ok = (start == 0 and dims_equal(size, src[dim])) or (start >= 0 and isinstance(size, int))
                what = f"slice from {start} to {size} elements"
            else:
                ok = arg(node, 2, "index") >= 0
                what = f"select of index {arg(node, 2, 'index')}"
            if not ok:
                return (f"dynamic dim {dim} ({src[dim]}) of {node.args[0].name} {format_shape(src)}: {what}; "
                        f"XNNPACK's static_slice fixes offsets and sizes at init, so a dynamic dim is kept whole "
                        f"or cut to a static size from a non-negative offset")
        if node.target in (aten.select_copy.int, aten.select.int):
            return dynamic_dim_reason(node, "select reshapes the slice, and XNNPACK's static_reshape infers "
                                            "only one dim")
        return None

    def check_constraints(self, node, ep) -> Optional[str]:
        if node.target in (aten.slice_copy.Tensor, aten.slice.Tensor):
            step = arg(node, 4, "step", 1)
            if step != 1:
                return f"step={step} is not supported (only 1)"
        if tensor_vals(node)[0].numel() == 0:
            return "the result is empty"
        return None


class ConstantPadConfig(XnnpackOpConfig):
    """constant_pad_nd with non-negative padding -> XNNPACK static_constant_pad."""

    fp16 = True
    dynamic_shapes = True

    targets = (aten.constant_pad_nd.default,)

    def check_constraints(self, node, ep) -> Optional[str]:
        if any(p < 0 for p in node.args[1]):
            return f"negative padding {list(node.args[1])} is not supported"
        return None


class SplitConfig(XnnpackOpConfig):
    """split / split_with_sizes along a static dim -> one static slice per used output."""

    fp16 = True

    targets = (aten.split_with_sizes_copy.default, aten.split_with_sizes.default, aten.split_copy.Tensor,
               aten.split.Tensor)

    def check_common(self, node, ep) -> Optional[str]:
        reason = self.check_float_dtypes(tensor_vals(node.args[0]) + tensor_vals(node))
        if reason:
            return reason
        return self.check_shapes(node, ep)

    dynamic_shapes = True

    def check_dynamic(self, node, ep) -> Optional[str]:
        src = sym_shape(node.args[0])
        dim = arg(node, 2, "dim", 0) % len(src)
        if not isinstance(src[dim], int):
            return (f"dynamic dim {dim} ({src[dim]}) of {node.args[0].name} {format_shape(src)} is the split "
                    f"dim; XNNPACK's static_slice fixes offsets and sizes at init")
        return None

    def check_constraints(self, node, ep) -> Optional[str]:
        import operator
        if any(u.target is not operator.getitem for u in node.users):
            return "an output is used as a list (only getitem users are supported)"
        if any(v.numel() == 0 for v in tensor_vals(node)):
            return "an output is empty"
        return None
