"""Matrix products and convolutions: XNNFullyConnected, XNNBatchMatrixMultiply, XNNConv2d,
XNNDepthwiseConv2d (with batch norm folded into the convolution's weights).

Weight layouts written to the payload (XNNPACK's, as ExecuTorch's op_conv2d / op_linear write them):
    fully connected  filter [output_channels, input_channels], bias [output_channels]
    convolution      filter OHWI  [out_channels, kernel_h, kernel_w, in_channels / groups]
    depthwise        filter 1HWO  [1, kernel_h, kernel_w, out_channels]
    transposed       filter       [groups * out_channels / groups, kernel_h, kernel_w, in_channels / groups]
"""
from __future__ import annotations

import torch

from ..serialization.graph_builder import FP32, XNN_INVALID_VALUE_ID, PerChannel, PerChannelGroup
from .context import CONTIG, NHWC, LoweringContext, LoweringError, node_desc
from .dynamic_quant import dynamic_activation_source, dynamic_weight, pack_int4
from .quant import channel_scales, quantized_bias, quantized_filter, weight_quantization
from .registry import lowers, op


def _const(ctx: LoweringContext, node: torch.fx.Node, arg, what: str) -> torch.Tensor:
    value = ctx.constant(arg)
    if value is None:
        raise LoweringError(f"{node_desc(node)}: {what} is not a constant; XNNPACK needs static weights")
    return value.detach().to(torch.float32)


def _weights(ctx: LoweringContext, node: torch.fx.Node, input_id: int, filt: torch.Tensor, bias, w_arg,
             channel_dim: int) -> tuple[int, int]:
    """Filter and bias value ids: fp32, or for an op lowered on int8 (``ctx.quant_mode``) a qcint8
    filter (scales along ``channel_dim``) and a qcint32 bias (see :mod:`.quant`)."""
    if not ctx.quant_mode:
        filter_id = ctx.constant_value(filt.contiguous())
        bias_id = ctx.constant_value(bias.reshape(-1)) if bias is not None else XNN_INVALID_VALUE_ID
        return filter_id, bias_id
    found = weight_quantization(w_arg, ctx.constant)
    if found is None:
        raise LoweringError(f"{node_desc(node)}: the weight is not a symmetric int8 dequantize")
    channels = filt.shape[channel_dim]
    try:
        scales = channel_scales(found[0], channels)
        filter_id = quantized_filter(ctx.builder, filt, scales, channel_dim, f"{node_desc(node)} weight")
    except ValueError as exc:
        raise LoweringError(f"{node_desc(node)}: {exc}") from None
    bias_id = XNN_INVALID_VALUE_ID
    if bias is not None:
        input_scale = ctx.builder.quant(input_id).scale
        bias_id = quantized_bias(ctx.builder, bias.reshape(-1), input_scale, scales)
    return filter_id, bias_id


def _dynamic_filter(ctx: LoweringContext, node: torch.fx.Node, w_arg) -> int:
    """The qcint8 / qcint4 / qbint4 filter of a dynamically quantized linear (see :mod:`.dynamic_quant`)."""
    weight, reason = dynamic_weight(w_arg, ctx.constant)
    if weight is None:
        raise LoweringError(f"{node_desc(node)}: {reason}")
    return _quantized_filter(ctx, weight)


def _quantized_filter(ctx: LoweringContext, weight) -> int:
    n, k = weight.values.shape
    if weight.bits == 8:
        data = weight.values.contiguous().numpy().tobytes()
    else:
        data = pack_int4(weight.values)
    if weight.group_size is None:
        quant = PerChannel(weight.scales.tolist(), 0)
    else:
        quant = PerChannelGroup(weight.scales.numpy(), weight.group_size)
    return ctx.builder.add_packed_constant(data, [n, k], datatype=weight.datatype, quant=quant)


def _weight_only(ctx: LoweringContext, x, w_arg):
    """The int8 / int4 per-channel weight behind a float32 linear's dequantized weight (torchao's
    ``IntxWeightOnlyConfig``, ``LlmConfig(quantize="8w")``), which XNNPACK multiplies with float32
    activations as it stores them (``f32_qc8w`` / ``f32_qc4w``), or None: per-group int4 has no float32-input
    kernel in XNNPACK 2024-11, so such a weight is dequantized into the payload as float32."""
    val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    if ctx.quant_mode or not isinstance(val, torch.Tensor) or val.dtype != torch.float32:
        return None
    weight, _ = dynamic_weight(w_arg, ctx.constant)
    if weight is None or weight.group_size is not None or (weight.bits == 4 and weight.values.shape[1] % 2):
        return None  # (int4 packs two values a byte: an odd input size stays float32 too)
    return weight


def _fully_connected(ctx: LoweringContext, node: torch.fx.Node, x, weight_nk: torch.Tensor,
                     bias: torch.Tensor | None, w_arg) -> None:
    input_id = ctx.value(x, CONTIG)
    if dynamic_activation_source(x) is not None:
        # qdint8 activation (quantized per row at run time), int8/int4 weight, fp32 bias and output.
        filter_id = _dynamic_filter(ctx, node, w_arg)
        bias_id = ctx.constant_value(bias.reshape(-1)) if bias is not None else XNN_INVALID_VALUE_ID
        ctx.builder.add_node("XNNFullyConnected", "XNNFullyConnected", input1Id=input_id, filterId=filter_id,
                             biasId=bias_id, outputId=ctx.define(node, CONTIG), flags=0,
                             debug_handle=ctx.debug_handle, output_min_max=ctx.output_clamp(node))
        return
    weight_only = _weight_only(ctx, x, w_arg)
    if weight_only is not None:
        # XNNPACK 2024-11's f32_qc8w / f32_qc4w kernels multiply the packed bias by the weight scale along with
        # the sums, so the bias is a separate add
        filter_id, output_id = _quantized_filter(ctx, weight_only), ctx.define(node, CONTIG)
        product_id = output_id if bias is None else ctx.intermediate(node, ctx.bounds(node))
        ctx.builder.add_node("XNNFullyConnected", "XNNFullyConnected", input1Id=input_id, filterId=filter_id,
                             biasId=XNN_INVALID_VALUE_ID, outputId=product_id, flags=0, debug_handle=ctx.debug_handle,
                             output_min_max=ctx.output_clamp(node) if bias is None else None)
        if bias is not None:
            ctx.binary("XNNAdd", product_id, ctx.constant_value(bias.reshape(-1)), output_id, ctx.output_clamp(node))
        return
    filter_id, bias_id = _weights(ctx, node, input_id, weight_nk, bias, w_arg, 0)
    ctx.builder.add_node("XNNFullyConnected", "XNNFullyConnected", input1Id=input_id, filterId=filter_id,
                         biasId=bias_id, outputId=ctx.define(node, CONTIG), flags=0, debug_handle=ctx.debug_handle,
                         output_min_max=ctx.output_clamp(node))


@lowers(op("linear"))
def lower_linear(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """linear(x, W[N, K], b[N]?) -> fully connected."""
    weight = _const(ctx, node, node.args[1], "weight")
    bias_arg = node.args[2] if len(node.args) > 2 else None
    bias = _const(ctx, node, bias_arg, "bias") if bias_arg is not None else None
    _fully_connected(ctx, node, node.args[0], weight, bias, node.args[1])


@lowers(op("addmm"))
def lower_addmm(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """addmm(b[N], x[M, K], W2[K, N]) -> fully connected with filter W2^T (beta = alpha = 1)."""
    if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
        raise LoweringError(f"{node_desc(node)}: beta/alpha other than 1 are not supported")
    weight = _const(ctx, node, node.args[2], "mat2 (weight)")
    bias = _const(ctx, node, node.args[0], "bias")
    _fully_connected(ctx, node, node.args[1], weight.t(), bias, node.args[2])


@lowers(op("mm"))
def lower_mm(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """mm(x[M, K], W2[K, N]) with constant W2 -> fully connected without bias."""
    weight = _const(ctx, node, node.args[1], "mat2 (weight)")
    _fully_connected(ctx, node, node.args[0], weight.t(), None, node.args[1])


@lowers(op("bmm"))
def lower_bmm(ctx: LoweringContext, node: torch.fx.Node) -> None:
    a, b = node.args[0], node.args[1]
    ctx.binary("XNNBatchMatrixMultiply", ctx.value(a, CONTIG), ctx.value(b, CONTIG), ctx.define(node, CONTIG))


def _pair(v) -> list[int]:
    v = list(v)
    return v * 2 if len(v) == 1 else v


def fold_batch_norm(weight: torch.Tensor, bias: torch.Tensor | None, bn_args, ctx: LoweringContext,
                    bn: torch.fx.Node) -> tuple[torch.Tensor, torch.Tensor]:
    """Fold ``_native_batch_norm_legit_no_training(conv(x), gamma, beta, mean, var, momentum, eps)``
    into the convolution: ``W' = W * s``, ``b' = (b - mean) * s + beta`` with ``s = gamma / sqrt(var + eps)``."""
    gamma, beta, mean, var = (ctx.constant(a) if a is not None else None for a in bn_args[1:5])
    eps = float(bn_args[6])
    if mean is None or var is None:
        raise LoweringError(f"{node_desc(bn)}: running mean/var are not constants")
    out_channels = weight.shape[0]
    scale = torch.rsqrt(var.float() + eps)
    if gamma is not None:
        scale = scale * gamma.float()
    shift = beta.float() if beta is not None else torch.zeros(out_channels)
    b = bias if bias is not None else torch.zeros(out_channels)
    return weight * scale.reshape(-1, *([1] * (weight.dim() - 1))), (b - mean.float()) * scale + shift


@lowers(op("convolution"))
def lower_convolution(ctx: LoweringContext, node: torch.fx.Node) -> None:
    x, w_arg, b_arg, stride, padding, dilation, transposed, output_padding, groups = node.args[:9]
    weight = _const(ctx, node, w_arg, "weight")
    if weight.dim() != 4:
        raise LoweringError(f"{node_desc(node)}: only 2-D convolution is supported (weight shape {list(weight.shape)})")
    bias = _const(ctx, node, b_arg, "bias") if b_arg is not None else None
    bn = ctx.bn_folded_into.get(node)
    if bn is not None:
        weight, bias = fold_batch_norm(weight, bias, bn.args, ctx, bn)
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    adjustment = _pair(output_padding) if transposed else [0, 0]
    if transposed:
        # PyTorch: [in_channels, out_channels / groups, kh, kw]. XNNPACK deconvolution wants
        # [groups * group_out, kh, kw, group_in]: regroup to [out_channels, in_channels / groups, kh, kw]
        # first, then to OHWI.
        in_channels, group_out, kh, kw = weight.shape
        group_in = in_channels // groups
        weight = weight.reshape(groups, group_in, group_out, kh, kw).transpose(1, 2).reshape(
            groups * group_out, group_in, kh, kw)
    else:
        out_channels, group_in, kh, kw = weight.shape
        group_out = out_channels // groups
    depthwise = group_in == 1 and not transposed   # ExecuTorch's criterion (op_conv2d.py)
    if transposed:
        filt = weight.permute(0, 2, 3, 1)
        union = "XNNConvTranspose2d"
    elif depthwise:
        filt = weight.permute(1, 2, 3, 0)              # [O, 1, kh, kw] -> 1HWO
        union = "XNNDepthwiseConv2d"
    else:
        filt = weight.permute(0, 2, 3, 1)              # OIHW -> OHWI
        union = "XNNConv2d"
    input_id = ctx.value(x, NHWC)
    half = ctx.float_dtype == torch.float16
    if half:
        # XNNPACK 2024-11's subgraph API has no fp16 convolution with static weights (its fp16
        # convolutions come only from XNN_FLAG_FORCE_FP16_INFERENCE): compute in fp32 between converts.
        input_id = _converted(ctx, input_id, FP32)
        filter_id = ctx.builder.add_constant(filt.detach().float().contiguous().numpy(), datatype=FP32)
        bias_id = (ctx.builder.add_constant(bias.detach().float().reshape(-1).numpy(), datatype=FP32)
                   if bias is not None else XNN_INVALID_VALUE_ID)
    else:
        filter_id, bias_id = _weights(ctx, node, input_id, filt, bias, w_arg, 3 if depthwise else 0)
    output_id = ctx.define(node, NHWC)
    final_id = output_id
    if half:
        output_id = ctx.builder.add_value(ctx.builder.dims(final_id), datatype=FP32)
    ctx.builder.add_node(
        union, "_XNNNodeConv",
        paddingTop=padding[0], paddingRight=padding[1], paddingBottom=padding[0], paddingLeft=padding[1],
        kernelHeight=kh, kernelWidth=kw, subsamplingHeight=stride[0], subsamplingWidth=stride[1],
        dilationHeight=dilation[0], dilationWidth=dilation[1], groupInputChannels=group_in,
        groupOutputChannels=group_out, groups=groups, adjustmentHeight=adjustment[0], adjustmentWidth=adjustment[1],
        input1Id=input_id, filterId=filter_id, biasId=bias_id, outputId=output_id, flags=0,
        debug_handle=ctx.debug_handle, output_min_max=ctx.output_clamp(node))
    if half:
        ctx.unary("XNNConvert", output_id, final_id)


def _converted(ctx: LoweringContext, value_id: int, datatype: int) -> int:
    """A new value holding ``value_id`` converted to ``datatype`` (XNNConvert)."""
    out = ctx.builder.add_value(ctx.builder.dims(value_id), datatype=datatype)
    ctx.unary("XNNConvert", value_id, out)
    return out
