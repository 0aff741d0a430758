"""One ONNX emitter per Edge op the QNN partitioner delegates (``partition/configs.py`` lists them).

An emitter receives the :class:`~etkit_qnn.onnx_export.builder.GraphBuilder` and the fx node and returns the
ONNX name of the node's result (a tuple of names for multi-output ops).
"""
from __future__ import annotations

import operator

import numpy as np
import torch
from onnx import TensorProto

from ..partition.configs import DEQUANTIZE_AFFINE, arg, fused_activation, tensor_meta
from .builder import ExportError, GraphBuilder, quant_type

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed


def _shape(node) -> list:
    return [int(d) for d in tensor_meta(node).shape]


# ------------------------------------------------------------------------------------------ quantization

def _scalar_args(node, first: int):
    scale, zp, qmin, qmax, dtype = node.args[first:first + 5]
    return scale, zp, int(qmin), int(qmax), dtype


def quantize(b: GraphBuilder, node) -> str:
    scale, zp, qmin, qmax, dtype = _scalar_args(node, 1)
    qtype = quant_type(dtype, qmin, qmax)
    _, s, z = b.qdq_params(scale, zp, qtype, node.name)
    return b.add("QuantizeLinear", [b.value(node.args[0]), s, z], node.name)


def _integer_constant(b: GraphBuilder, node, qtype: int) -> str:
    tensor = b.node_constant(node)
    if tensor is None:
        raise ExportError(f"{node.name}: a dequantized weight must be a constant")
    return b.constant(tensor.to(torch.int64).numpy(), node.name, qtype)


def dequantize_per_tensor(b: GraphBuilder, node) -> str:
    scale, zp, qmin, qmax, dtype = _scalar_args(node, 1)
    qtype = quant_type(dtype, qmin, qmax)
    source = node.args[0]
    q = _integer_constant(b, source, qtype) if b.node_constant(source) is not None else b.value(source)
    qp, s, z = b.qdq_params(scale, zp, qtype, node.name)
    return b.dequantize(q, qp, s, z, node.name)


def dequantize_per_channel(b: GraphBuilder, node) -> str:
    source, scales, zps, axis, qmin, qmax, dtype = node.args[:7]
    qtype = quant_type(dtype, int(qmin), int(qmax))
    scale_t, zp_t = b.node_constant(scales), b.node_constant(zps)
    if scale_t is None or zp_t is None:
        raise ExportError(f"{node.name}: per-channel scales and zero points must be constants")
    rank = tensor_meta(source).dim()
    qp, s, z = b.qdq_params(scale_t.float().numpy(), zp_t.to(torch.int64).numpy(), qtype, node.name, int(axis) % rank)
    return b.dequantize(_integer_constant(b, source, qtype), qp, s, z, node.name)


def dequantize_affine(b: GraphBuilder, node) -> str:
    """torchao's block-wise dequantize of a constant weight (``QnnQuantizer``'s ``use_16a4w_block``) as ONNX's
    blocked ``DequantizeLinear`` (opset 21): one blocked axis, scales of the weight's shape with that axis
    divided by the block size."""
    source, block_size, scales, zps, dtype, qmin, qmax = node.args[:7]
    shape = _shape(source)
    blocked = [i for i, (d, blk) in enumerate(zip(shape, block_size)) if blk != 1]
    if len(blocked) != 1 or int(block_size[0]) != 1:
        raise ExportError(f"{node.name}: block size {list(block_size)} of a weight of shape {shape}: QNN takes blocks "
                          f"along one input axis of one output channel")
    axis = blocked[0]
    block = int(block_size[axis])
    scale_t, zp_t = b.node_constant(scales), b.node_constant(zps) if isinstance(zps, torch.fx.Node) else None
    if scale_t is None:
        raise ExportError(f"{node.name}: block-wise scales must be constants")
    qtype = quant_type(dtype, int(qmin), int(qmax))
    scale_shape = [d // block if i == axis else d for i, d in enumerate(shape)]
    scale = scale_t.float().reshape(scale_shape).numpy()
    zp = zp_t.to(torch.int64).reshape(scale_shape).numpy() if zp_t is not None else np.zeros(scale_shape, np.int64)
    qp, s, z = b.qdq_params(scale, zp, qtype, node.name, axis, block)
    return b.dequantize(_integer_constant(b, source, qtype), qp, s, z, node.name)


# ------------------------------------------------------------------------------------------ compute

def _bias(b: GraphBuilder, node, x: str, w: str) -> list:
    """The bias input: a dequantized int32 bias as is; a float bias in a QDQ graph is quantized to int32
    with scale ``input_scale * weight_scale`` (what the HTP expects); fp16 graphs keep it float."""
    bias = arg(node, 2, "bias")
    if bias is None:
        return []
    if b.fp16 or bias in b.names:
        return [b.value(bias)]
    x_qp, w_qp = b.qparams.get(x), b.qparams.get(w)
    tensor = b.node_constant(bias)
    if tensor is None or x_qp is None or w_qp is None:
        return [b.value(bias)]
    # (block-wise weights: the largest block scale of each output channel, finer than the bias needs)
    w_scale = w_qp.scale.reshape(w_qp.scale.shape[0], -1).max(axis=1) if w_qp.block_size else w_qp.scale.reshape(-1)
    scale = (x_qp.scale.reshape(-1)[0] * w_scale).astype(np.float32)
    scale = np.broadcast_to(scale, tensor.shape).copy()
    q = np.clip(np.round(tensor.detach().float().numpy() / scale), -2**31, 2**31 - 1).astype(np.int32)
    qp, s, z = b.qdq_params(scale, np.zeros_like(q), TensorProto.INT32, f"{bias.name}_q", 0)
    return [b.dequantize(b.constant(q, bias.name, TensorProto.INT32), qp, s, z, bias.name)]


def convolution(b: GraphBuilder, node) -> str:
    x, w = b.value(node.args[0]), b.value(node.args[1])
    stride, padding, dilation = node.args[3], node.args[4], node.args[5]
    groups = int(node.args[8])
    return b.add("Conv", [x, w, *_bias(b, node, x, w)], node.name, strides=list(stride),
                 pads=list(padding) * 2, dilations=list(dilation), group=groups)


def linear(b: GraphBuilder, node) -> str:
    x_node = node.args[0]
    x, w = b.value(x_node), b.value(node.args[1])
    in_shape, out_shape = _shape(x_node), _shape(node)
    bias = _bias(b, node, x, w)
    if len(in_shape) == 2:
        return b.add("Gemm", [x, w, *bias], node.name, transB=1)
    # Gemm is 2-D: flatten the leading dims and restore them, repeating the quantization around reshapes (the
    # output's: its quantize, or that of the activation fused after it; export_partition then repeats the
    # latter after the reshape).
    flat = b.add("Reshape", [x, b.ints([-1, in_shape[-1]])], f"{node.name}_in")
    flat = b.requantize_like(flat, b.qparams.get(x), f"{node.name}_in")
    y = b.add("Gemm", [flat, w, *bias], node.name, transB=1)
    users = list(node.users)
    activation = fused_activation(node)
    out_q = next(iter(activation.users)) if activation is not None else \
        users[0] if len(users) == 1 and users[0].target is qd.quantize_per_tensor.default else None
    if out_q is not None and not b.fp16:
        scale, zp, qmin, qmax, dtype = _scalar_args(out_q, 1)
        qp, s, z = b.qdq_params(scale, zp, quant_type(dtype, qmin, qmax), f"{node.name}_out")
        y = b.dequantize(b.add("QuantizeLinear", [y, s, z], f"{node.name}_outq"), qp, s, z, f"{node.name}_out")
    return b.add("Reshape", [y, b.ints(out_shape)], node.name)


def matmul(b: GraphBuilder, node) -> str:
    return b.add("MatMul", [b.value(node.args[0]), b.value(node.args[1])], node.name)


_BINARY = {aten.add: "Add", aten.sub: "Sub", aten.mul: "Mul", aten.div: "Div"}


def binary(b: GraphBuilder, node) -> str:
    op = _BINARY[node.target.overloadpacket]
    names = []
    tensor_qp = next((b.qparams.get(b.value(a)) for a in node.args[:2] if isinstance(a, torch.fx.Node)), None)
    for i, a in enumerate(node.args[:2]):
        if isinstance(a, torch.fx.Node):
            const = b.node_constant(a)
            if const is not None and const.numel() == 1 and a not in b.names and not b.fp16:
                names.append(b.quantized_constant(float(const.reshape(())), tensor_qp, f"{node.name}_c{i}"))
            else:
                names.append(b.value(a))
        else:
            names.append(b.quantized_constant(float(a), tensor_qp, f"{node.name}_c{i}"))
    return b.add(op, names, node.name)


def unary(op_type: str, **attrs):
    def emit(b: GraphBuilder, node) -> str:
        return b.add(op_type, [b.value(node.args[0])], node.name, **attrs)
    return emit


def clamp(b: GraphBuilder, node) -> str:
    low, high = (node.args[1:3] + (None, None))[:2] if node.target is aten.clamp.default else \
        (arg(node, 1, "min_val", -1.0), arg(node, 2, "max_val", 1.0))
    inputs = [b.value(node.args[0]),
              b.constant(np.float32(low), "min") if low is not None else "",
              b.constant(np.float32(high), "max") if high is not None else ""]
    while inputs and inputs[-1] == "":
        inputs.pop()
    return b.add("Clip", inputs, node.name)


def gelu(b: GraphBuilder, node) -> str:
    return b.add("Gelu", [b.value(node.args[0])], node.name, approximate=node.kwargs.get("approximate", "none"))


def softmax(b: GraphBuilder, node) -> str:
    return b.add("Softmax", [b.value(node.args[0])], node.name, axis=int(node.args[1]))


def layer_norm(b: GraphBuilder, node) -> tuple:
    x, shape, weight, bias, eps = node.args[:5]
    inputs = [b.value(x), b.value(weight)] + ([b.value(bias)] if bias is not None else [])
    y = b.add("LayerNormalization", inputs, node.name, axis=-len(shape), epsilon=float(eps))
    return (_isolate_wide_layer_norm(b, node, y), None, None)


def _isolate_wide_layer_norm(b: GraphBuilder, node, y: str) -> str:
    """QNN 2.51's HTP computes a 16-bit LayerNorm feeding a FullyConnected wrongly (measured on the simulator:
    thousands of output steps off, any gamma type, any HTP architecture; an 8-bit one is within 2 steps). A
    multiplication by an exact 1.0 between them, on the same quantization grid, keeps the values and avoids
    the fault: ``LN -> Q -> DQ -> Mul(1) -> Q``."""
    if b.fp16:
        return y
    getitems = [u for u in node.users if u.target is operator.getitem and u.args[1] == 0]
    quantizes = [q for g in getitems for q in g.users if q.target is qd.quantize_per_tensor.default]
    if len(quantizes) != 1:
        return y
    scale, zp, qmin, qmax, dtype = _scalar_args(quantizes[0], 1)
    qtype = quant_type(dtype, qmin, qmax)
    if qtype not in (TensorProto.UINT16, TensorProto.INT16):
        return y
    qp, s, z = b.qdq_params(scale, zp, qtype, f"{node.name}_isolated")
    y = b.dequantize(b.add("QuantizeLinear", [y, s, z], f"{node.name}_isolatedq"), qp, s, z, f"{node.name}_isolated")
    return b.add("Mul", [y, b.quantized_constant(1.0, qp, f"{node.name}_one")], f"{node.name}_isolated")


def batch_norm(b: GraphBuilder, node) -> tuple:
    x, weight, bias, mean, var, _momentum, eps = node.args[:7]
    y = b.add("BatchNormalization", [b.value(x), b.value(weight), b.value(bias), b.value(mean), b.value(var)],
              node.name, epsilon=float(eps))
    return (y, None, None)


def max_pool(b: GraphBuilder, node) -> tuple:
    kernel = list(node.args[1])
    stride = list(arg(node, 2, "stride", []) or kernel)
    padding = list(arg(node, 3, "padding", [0, 0]))
    ceil = int(bool(arg(node, 5, "ceil_mode", False)))
    y = b.add("MaxPool", [b.value(node.args[0])], node.name, kernel_shape=kernel, strides=stride,
              pads=padding * 2, ceil_mode=ceil)
    return (y, None)


def avg_pool(b: GraphBuilder, node) -> str:
    kernel = list(node.args[1])
    stride = list(arg(node, 2, "stride", []) or kernel)
    padding = list(arg(node, 3, "padding", [0, 0]))
    return b.add("AveragePool", [b.value(node.args[0])], node.name, kernel_shape=kernel, strides=stride,
                 pads=padding * 2, ceil_mode=int(bool(arg(node, 4, "ceil_mode", False))),
                 count_include_pad=int(bool(arg(node, 5, "count_include_pad", True))))


def global_avg_pool(b: GraphBuilder, node) -> str:
    return b.add("GlobalAveragePool", [b.value(node.args[0])], node.name)


def mean(b: GraphBuilder, node) -> str:
    rank = tensor_meta(node.args[0]).dim()
    dims = [int(d) % rank for d in node.args[1]]
    keepdim = bool(arg(node, 2, "keepdim", False))
    return b.add("ReduceMean", [b.value(node.args[0]), b.ints(dims, "axes")], node.name, keepdims=int(keepdim))


def reshape(b: GraphBuilder, node) -> str:
    return b.add("Reshape", [b.value(node.args[0]), b.ints(_shape(node))], node.name)


def permute(b: GraphBuilder, node) -> str:
    rank = tensor_meta(node.args[0]).dim()
    return b.add("Transpose", [b.value(node.args[0])], node.name, perm=[int(d) % rank for d in node.args[1]])


def identity(b: GraphBuilder, node) -> str:
    return b.add("Identity", [b.value(node.args[0])], node.name)


def expand(b: GraphBuilder, node) -> str:
    return b.add("Expand", [b.value(node.args[0]), b.ints(_shape(node))], node.name)


def slice_(b: GraphBuilder, node) -> str:
    shape = _shape(node.args[0])
    dim = int(arg(node, 1, "dim", 0)) % len(shape)
    start = arg(node, 2, "start", 0) or 0
    end = arg(node, 3, "end", None)
    end = shape[dim] if end is None else min(int(end), shape[dim])
    step = int(arg(node, 4, "step", 1))
    return b.add("Slice", [b.value(node.args[0]), b.ints([int(start)], "starts"), b.ints([end], "ends"),
                           b.ints([dim], "axes"), b.ints([step], "steps")], node.name)


def concat(b: GraphBuilder, node) -> str:
    rank = tensor_meta(node).dim()
    return b.add("Concat", [b.value(a) for a in node.args[0]], node.name, axis=int(arg(node, 1, "dim", 0)) % rank)


def getitem(b: GraphBuilder, node) -> str:
    return b.names[node.args[0]][node.args[1]]


EMITTERS = {
    qd.quantize_per_tensor.default: quantize,
    qd.dequantize_per_tensor.default: dequantize_per_tensor,
    qd.dequantize_per_channel.default: dequantize_per_channel,
    aten.convolution.default: convolution,
    aten.linear.default: linear,
    aten.bmm.default: matmul,
    aten.mm.default: matmul,
    aten.matmul.default: matmul,
    **{t: binary for t in (aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar, aten.mul.Tensor,
                           aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar)},
    aten.relu.default: unary("Relu"),
    aten.sigmoid.default: unary("Sigmoid"),
    aten.tanh.default: unary("Tanh"),
    aten.hardswish.default: unary("HardSwish"),
    aten.hardsigmoid.default: unary("HardSigmoid", alpha=1.0 / 6.0, beta=0.5),
    aten.hardtanh.default: clamp,
    aten.clamp.default: clamp,
    aten.gelu.default: gelu,
    aten._softmax.default: softmax,
    aten.native_layer_norm.default: layer_norm,
    aten._native_batch_norm_legit_no_training.default: batch_norm,
    aten.max_pool2d_with_indices.default: max_pool,
    aten.avg_pool2d.default: avg_pool,
    aten.adaptive_avg_pool2d.default: global_avg_pool,
    aten.mean.dim: mean,
    aten.view_copy.default: reshape,
    aten._unsafe_view.default: reshape,
    aten.squeeze_copy.dims: reshape,
    aten.squeeze_copy.dim: reshape,
    aten.unsqueeze_copy.default: reshape,
    aten.permute_copy.default: permute,
    aten.clone.default: identity,
    aten.alias_copy.default: identity,
    aten.expand_copy.default: expand,
    aten.slice_copy.Tensor: slice_,
    aten.cat.default: concat,
    operator.getitem: getitem,
}
if DEQUANTIZE_AFFINE is not None:
    EMITTERS[DEQUANTIZE_AFFINE] = dequantize_affine
