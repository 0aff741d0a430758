"""Poolings (NHWC): mean over H and W as global average pooling, avg_pool2d, max_pool2d;
standalone batch norm as a per-channel multiply-add; getitem."""
from __future__ import annotations

import operator

import torch

from ..serialization.graph_builder import XNN_FLAG_KEEP_DIMS
from .context import CONTIG, NHWC, LoweringContext, LoweringError, node_desc, static_shape
from .registry import lowers, op


@lowers(op("mean", "dim"))
def lower_mean(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """mean(x[N, C, H, W], dims {H, W}) -> XNNGlobalAvgPooling2d on NHWC (+ reshape when keepdim=False);
    mean over the last dim -> a fully connected with a [1, D] filter of 1/D (see _mean_last_dim)."""
    src = node.args[0]
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    rank = len(ctx.shape(src))
    if sorted(d % rank for d in node.args[1]) != [2, 3] or rank != 4:
        _mean_last_dim(ctx, node)
        return
    in_id = ctx.value(src, NHWC)
    n, _, _, c = ctx.builder.dims(in_id)
    if keepdim:
        ctx.unary("XNNGlobalAvgPooling2d", in_id, ctx.define(node, NHWC), flags=XNN_FLAG_KEEP_DIMS)
    else:
        pooled = ctx.intermediate(node, [n, 1, 1, c])
        ctx.unary("XNNGlobalAvgPooling2d", in_id, pooled, flags=XNN_FLAG_KEEP_DIMS)
        ctx.reshape(pooled, ctx.define(node, CONTIG), ctx.shape(node))


def _mean_last_dim(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """mean(x[..., D], -1) as one XNNFullyConnected whose filter is [1, D] of 1/D: one operator where row
    means by pooling take five (a decode step of an LLM runs one per RMSNorm, and each operator costs a
    dispatch). Quantized (int8) values keep the pooling form (operators/norm.py)."""
    import math

    from ..serialization.graph_builder import XNN_INVALID_VALUE_ID
    from . import dynamic_shapes as dyn
    from .norm import row_mean, row_view

    src = node.args[0]
    shape, bounds = dyn.sym_shape(src), ctx.bounds(src)
    d = int(shape[-1])
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    if ctx.int8_params(src) is None and ctx.int8_params(node) is None:
        filter_id = ctx.constant_value(_reciprocal_row(d), key=_reciprocal_row(d))
        if keepdim:
            out = ctx.define(node, CONTIG)
        else:
            out = ctx.builder.add_value_like(ctx.value(src, CONTIG), bounds[:-1] + [1])
        ctx.builder.add_node("XNNFullyConnected", "XNNFullyConnected", input1Id=ctx.value(src, CONTIG),
                             filterId=filter_id, biasId=XNN_INVALID_VALUE_ID, outputId=out, flags=0,
                             debug_handle=ctx.debug_handle)
        if not keepdim:
            ctx.reshape(out, ctx.define(node, CONTIG), dyn.sym_shape(node) or [1])
        return
    m, mb = dyn.rows(shape, len(shape) - 1), math.prod(bounds[:-1])
    rows, k = row_view(ctx, ctx.value(src, CONTIG), m, mb, d)
    mean = row_mean(ctx, rows, m, mb, k)
    ctx.reshape(mean, ctx.define(node, CONTIG), dyn.sym_shape(node) or [1])


_RECIPROCAL_ROWS: dict = {}


def _reciprocal_row(d: int) -> torch.Tensor:
    """The [1, d] filter of 1/d (one tensor per d, so a delegate defines it once for all its means)."""
    if d not in _RECIPROCAL_ROWS:
        _RECIPROCAL_ROWS[d] = torch.full((1, d), 1.0 / d, dtype=torch.float32)
    return _RECIPROCAL_ROWS[d]


#: XNN_FLAG_ALIGN_CORNERS (include/xnnpack.h of XNNPACK 2024-11-08).
XNN_FLAG_ALIGN_CORNERS = 0x8


@lowers(op("upsample_bilinear2d", "vec"))
def lower_upsample_bilinear(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """upsample_bilinear2d(x, output_size, align_corners, scale_factors) -> XNNStaticResizeBilinear2D
    to the node's static output size (NHWC); PyTorch's align_corners=False is XNNPACK's default
    half-pixel sampling."""
    align_corners = bool(node.args[2]) if len(node.args) > 2 else bool(node.kwargs.get("align_corners", False))
    _, _, height, width = static_shape(node)
    ctx.builder.add_node("XNNStaticResizeBilinear2D", "XNNStaticResizeBilinear2D", newHeight=height, newWidth=width,
                         inputId=ctx.value(node.args[0], NHWC), outputId=ctx.define(node, NHWC),
                         flags=XNN_FLAG_ALIGN_CORNERS if align_corners else 0, debug_handle=ctx.debug_handle)


def _pair(v, default=None) -> list[int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * 2 if len(v) == 1 else v


def ceil_mode_extra_padding(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """Extra bottom/right padding that makes floor-mode pooling produce PyTorch's ceil_mode output size."""
    span = dilation * (kernel - 1) + 1
    out_ceil = -(-(size + 2 * pad - span) // stride) + 1
    if (out_ceil - 1) * stride >= size + pad:  # the last window must start inside the input or left padding
        out_ceil -= 1
    return max(0, (out_ceil - 1) * stride + span - (size + 2 * pad))


def _pooling(ctx: LoweringContext, node: torch.fx.Node, union: str, kernel, stride, padding, dilation,
             extra: tuple[int, int] = (0, 0)) -> None:
    in_id = ctx.value(node.args[0], NHWC)
    out_id = ctx.define(node, NHWC)
    ctx.builder.add_node(
        union, "_XNNPooling2D", paddingTop=padding[0], paddingRight=padding[1] + extra[1],
        paddingBottom=padding[0] + extra[0], paddingLeft=padding[1], poolingHeight=kernel[0],
        poolingWidth=kernel[1], strideHeight=stride[0], strideWidth=stride[1], dilationHeight=dilation[0],
        dilationWidth=dilation[1], inputId=in_id, outputId=out_id, flags=XNN_FLAG_KEEP_DIMS,
        debug_handle=ctx.debug_handle)


@lowers(op("avg_pool2d"))
def lower_avg_pool(ctx: LoweringContext, node: torch.fx.Node) -> None:
    a = list(node.args) + [None] * 7
    kernel = _pair(a[1])
    stride = _pair(a[2], kernel)
    padding = _pair(a[3], [0])
    ceil_mode, count_include_pad, divisor = a[4], (True if a[5] is None else a[5]), a[6]
    if ceil_mode or (count_include_pad and any(padding)) or divisor not in (None, kernel[0] * kernel[1]):
        raise LoweringError(f"{node_desc(node)}: ceil_mode, count_include_pad with padding, or divisor_override "
                            f"is not supported")
    _pooling(ctx, node, "XNNAvgPooling2d", kernel, stride, padding, [0, 0])


@lowers(op("max_pool2d"), op("max_pool2d_with_indices"))
def lower_max_pool(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """max_pool2d (the indices output of max_pool2d_with_indices must be unused)."""
    a = list(node.args) + [None] * 6
    kernel = _pair(a[1])
    stride = _pair(a[2], kernel)
    padding = _pair(a[3], [0])
    dilation = _pair(a[4], [1])
    extra = (0, 0)
    if a[5]:
        h, w = static_shape(node.args[0])[2:]
        extra = (ceil_mode_extra_padding(h, kernel[0], stride[0], padding[0], dilation[0]),
                 ceil_mode_extra_padding(w, kernel[1], stride[1], padding[1], dilation[1]))
    _pooling(ctx, node, "XNNMaxPooling2d", kernel, stride, padding, dilation, extra)


@lowers(op("_native_batch_norm_legit_no_training"))
def lower_batch_norm(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """Folded into the preceding convolution when possible (see preprocess); otherwise
    ``x * s + t`` per channel in NHWC, with ``s = gamma / sqrt(var + eps)``, ``t = beta - mean * s``."""
    src = node.args[0]
    if src in ctx.bn_folded_into and ctx.bn_folded_into[src] is node:
        ctx.alias(node, src)
        return
    gamma, beta, mean, var = (ctx.constant(a) if a is not None else None for a in node.args[1:5])
    if mean is None or var is None:
        raise LoweringError(f"{node_desc(node)}: running mean/var are not constants")
    eps = float(node.args[6])
    scale = torch.rsqrt(var.float() + eps) * (gamma.float() if gamma is not None else 1.0)
    shift = (beta.float() if beta is not None else 0.0) - mean.float() * scale
    in_id = ctx.value(src, NHWC)
    dims = ctx.builder.dims(in_id)
    scaled = ctx.builder.add_value(dims)
    ctx.binary("XNNMultiply", in_id, ctx.constant_value(scale.reshape(-1)), scaled)
    ctx.binary("XNNAdd", scaled, ctx.constant_value(shift.reshape(-1)), ctx.define(node, NHWC))


@lowers(operator.getitem)
def lower_getitem(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """Output 0 of a multi-output op (batch norm, max_pool2d_with_indices) is the op's value; an
    output of a split is a slice."""
    from .dynamic_quant import CHOOSE_QPARAMS_OPS
    if node.args[0].target in CHOOSE_QPARAMS_OPS:
        return  # a row scale / zero point: computed inside XNNPACK's convert to qdint8
    if node.args[0] in ctx.multi_output_ops:
        from .shape import lower_split_item
        lower_split_item(ctx, node)
        return
    if node.args[1] != 0:
        raise LoweringError(f"getitem (node {node.name}): only output 0 of {node.args[0].name} can be delegated")
    if not ctx.has_value(node.args[0]):
        raise LoweringError(f"getitem (node {node.name}): {node.args[0].name} has no value")
    ctx.alias(node, node.args[0])
