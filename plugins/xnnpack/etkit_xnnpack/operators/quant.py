"""Statically quantized (PT2E) partitions: which ops run on int8 data, and the q/dq nodes.

After ``convert_pt2e`` a quantized model is a float graph with ``quantized_decomposed`` quantize /
dequantize nodes around each annotated op (seed 001, "Quantization" in the XNNPACK backend pages)::

    x_q = quantize_per_tensor(x, s_x, z_x, -128, 127, int8)
    x_f = dequantize_per_tensor(x_q, s_x, z_x, -128, 127, int8)
    w_f = dequantize_per_channel(w_int8, scales, zeros, axis=0, -127, 127, int8)      (a constant)
    y   = convolution(x_f, w_f, b)
    y_q = quantize_per_tensor(y, s_y, z_y, -128, 127, int8)

XNNPACK runs such an op on int8 data: its inputs are the values *before* the dequantize (``qint8``
with the dq's scale/zero point), its weights are ``qcint8`` (one scale per output channel, zero point
0), its bias ``qcint32`` with scale ``s_x * s_w[c]``, and its output is ``qint8`` with the following
quantize's parameters (what ExecuTorch's XNNPACK backend writes too). A ReLU / hardtanh / clamp
between the op and its quantize is fused as the op's output clamp.

Every other case is still lowered, in float: a dequantize whose value some float op (or the
partition's output) needs becomes ``XNNConvert`` qint8 -> fp32, a quantize of a float value becomes
``XNNConvert`` fp32 -> qint8, and a weight behind a dequantize is dequantized at compile time.
So a partition is always correct; :class:`QuantPlan` only decides where int8 kernels can be used.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Optional

import torch
from etkit.dialects.quantized import (DEQUANTIZE_PER_CHANNEL, DEQUANTIZE_PER_TENSOR, QUANTIZE_PER_TENSOR,
                                      is_dequantize, is_quantize)

from ..serialization.graph_builder import PerChannel, PerTensor

aten = torch.ops.aten

#: Dequantize ops evaluated at compile time when their input is a constant (int8 weights).
DEQUANTIZE_OPS = {DEQUANTIZE_PER_TENSOR, DEQUANTIZE_PER_CHANNEL}
Q_DQ_OPS = {QUANTIZE_PER_TENSOR, DEQUANTIZE_PER_TENSOR, DEQUANTIZE_PER_CHANNEL}

#: XNNDatatype numbers.
QINT8, QCINT8, QCINT32 = 3, 6, 7


@dataclass(frozen=True)
class Int8Params:
    """Per-tensor int8 quantization of an activation (a quantize or dequantize node's arguments)."""

    scale: float
    zero_point: int

    def to_builder(self) -> PerTensor:
        return PerTensor(self.scale, self.zero_point)


def activation_params(node) -> Optional[Int8Params]:
    """The parameters of a per-tensor int8 quantize/dequantize node with XNNPACK's range, else None."""
    if not isinstance(node, torch.fx.Node) or node.target not in (QUANTIZE_PER_TENSOR, DEQUANTIZE_PER_TENSOR):
        return None
    args = list(node.args) + [None] * 6
    scale, zero_point, qmin, qmax, dtype = args[1:6]
    if dtype != torch.int8 or (qmin, qmax) != (-128, 127):
        return None
    if not isinstance(scale, (int, float)) or not isinstance(zero_point, int) or scale <= 0:
        return None
    return Int8Params(float(scale), int(zero_point))


# --------------------------------------------------------------------------------- which ops

ACTIVATIONS = {aten.relu.default, aten.hardtanh.default, aten.clamp.default}
#: Ops whose XNNPACK node takes an output clamp, so a following activation can be fused.
FUSES_ACTIVATION = {aten.convolution.default, aten.linear.default, aten.addmm.default, aten.mm.default,
                     aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor}
#: (op, positions of the activation inputs, positions of int8 weights)
_GEMM = {aten.convolution.default: ((0,), 1), aten.linear.default: ((0,), 1), aten.addmm.default: ((1,), 2),
         aten.mm.default: ((0,), 1)}
_BINARY = {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor}
#: Ops XNNPACK runs on qint8 only when input and output share scale and zero point.
_SAME_PARAMS = {aten.relu.default, aten.hardtanh.default, aten.clamp.default, aten.view_copy.default,
                aten.permute_copy.default, aten.max_pool2d.default, aten.max_pool2d_with_indices.default,
                aten.cat.default}
_OTHER = {aten.mean.dim}


def activation_clamp(node: torch.fx.Node) -> tuple[float, float]:
    """(min, max) of a relu / hardtanh / clamp node."""
    import math
    args = list(node.args) + [None, None]
    if node.target is aten.relu.default:
        return 0.0, math.inf
    if node.target is aten.hardtanh.default:
        lo = args[1] if args[1] is not None else node.kwargs.get("min_val", -1.0)
        hi = args[2] if args[2] is not None else node.kwargs.get("max_val", 1.0)
        return float(lo), float(hi)
    lo = args[1] if args[1] is not None else node.kwargs.get("min")
    hi = args[2] if args[2] is not None else node.kwargs.get("max")
    return (-math.inf if lo is None else float(lo)), (math.inf if hi is None else float(hi))


def weight_quantization(node, constant) -> Optional[tuple[torch.Tensor, int]]:
    """Scales of an int8 weight seen through compile-time ops: walks ``node`` back through
    single-input foldable ops to a dequantize of a constant and returns ``(scales, axis)`` (axis -1
    for per-tensor), or None if the weight is not a symmetric int8 dequantize."""
    from .context import FOLDABLE_OPS
    while isinstance(node, torch.fx.Node) and node.target in FOLDABLE_OPS and node.target not in DEQUANTIZE_OPS:
        node = node.args[0]
    if not isinstance(node, torch.fx.Node) or node.target not in DEQUANTIZE_OPS:
        return None
    args = list(node.args) + [None] * 7
    if constant(node.args[0]) is None:
        return None
    if node.target is DEQUANTIZE_PER_TENSOR:
        scale, zp, dtype = args[1], args[2], args[5]
        if dtype != torch.int8 or zp != 0 or not isinstance(scale, (int, float)):
            return None
        return torch.tensor([float(scale)]), -1
    scales, zps, axis, dtype = constant(args[1]), constant(args[2]), args[3], args[6]
    if scales is None or dtype != torch.int8 or (zps is not None and bool((zps != 0).any())):
        return None
    return scales.reshape(-1).to(torch.float32), int(axis)


class QuantPlan:
    """Decides, for one partition, which ops run on int8 data and with which output parameters.

    Attributes:
        out_params: ``{op node: Int8Params}`` for ops lowered on qint8 (their output is qint8).
        fused: ``{activation node: op node}`` for activations folded into the op's output clamp.
    """

    def __init__(self, graph: torch.fx.Graph, constant) -> None:
        self.out_params: dict[torch.fx.Node, Int8Params] = {}
        self.fused: dict[torch.fx.Node, torch.fx.Node] = {}
        self._constant = constant
        for node in graph.nodes:
            if node.op == "call_function" and node.target not in Q_DQ_OPS and constant(node) is None:
                self._consider(node)

    def is_quantized(self, node) -> bool:
        return node in self.out_params

    def clamp(self, node: torch.fx.Node) -> Optional[tuple[float, float]]:
        """The fused activation's (min, max) for a quantized op, else None."""
        for act, op_node in self.fused.items():
            if op_node is node:
                return activation_clamp(act)
        return None

    # ---- decision -----------------------------------------------------------------------------

    def _consider(self, node: torch.fx.Node) -> None:
        target = node.target
        if target not in _GEMM and target not in _BINARY and target not in _SAME_PARAMS and target not in _OTHER:
            return
        in_params = self._input_params(node)
        if in_params is None:
            return
        out, act = self._output_params(node)
        if out is None:
            return
        if target in _SAME_PARAMS and any(p != out for p in in_params):
            return
        if target is aten.convolution.default and node.args[6]:
            return  # transposed convolution: float only
        if target is aten.mean.dim and (len(node.args[0].meta["val"].shape) != 4
                                        or sorted(d % 4 for d in node.args[1]) != [2, 3]):
            return  # mean over the last dim: float only (row means through float intermediates)
        if target in _GEMM and weight_quantization(node.args[_GEMM[target][1]], self._constant) is None:
            return
        if target in _GEMM and not self._bias_ok(node):
            return
        self.out_params[node] = out
        if act is not None:
            self.fused[act] = node

    def _bias_ok(self, node: torch.fx.Node) -> bool:
        bias = {aten.convolution.default: 2, aten.linear.default: 2, aten.addmm.default: 0}.get(node.target)
        if bias is None or len(node.args) <= bias or node.args[bias] is None:
            return True
        value = self._constant(node.args[bias])
        return value is not None and value.dtype == torch.float32

    def _input_params(self, node: torch.fx.Node) -> Optional[list[Int8Params]]:
        """Parameters of the activation inputs (each must come from a per-tensor int8 dequantize)."""
        if node.target in _GEMM:
            positions = _GEMM[node.target][0]
            args = [node.args[i] for i in positions]
        elif node.target is aten.cat.default:
            args = list(node.args[0])
        else:
            args = [node.args[0]] + ([node.args[1]] if node.target in _BINARY else [])
        if node.target in _BINARY and node.kwargs.get("alpha", 1) != 1:
            return None
        params = [activation_params(a) if is_dequantize(a) else None for a in args]
        if not params or any(p is None for p in params):
            return None
        for a, p in zip(args, params):
            src = a.args[0]
            if not (src.op == "placeholder" or (is_quantize(src) and activation_params(src) == p)):
                return None  # the int8 value behind the dequantize must carry the same parameters
        return params

    def _output_params(self, node: torch.fx.Node) -> tuple[Optional[Int8Params], Optional[torch.fx.Node]]:
        """(params of the quantize every result goes through, fused activation or None)."""
        consumer = node
        if node.target is aten.max_pool2d_with_indices.default:
            users = list(node.users)
            if len(users) != 1 or users[0].target is not operator.getitem or users[0].args[1] != 0:
                return None, None
            consumer = users[0]
        act = None
        users = list(consumer.users)
        if node.target in FUSES_ACTIVATION and len(users) == 1 and users[0].target in ACTIVATIONS:
            act = users[0]
            users = list(act.users)
        if not users or not all(is_quantize(u) for u in users):
            return None, None
        params = {activation_params(u) for u in users}
        if len(params) != 1 or None in params:
            return None, None
        return params.pop(), act


# --------------------------------------------------------------------------------- weights

def quantize_weight(weight: torch.Tensor, scales: torch.Tensor, channel_dim: int, what: str) -> torch.Tensor:
    """Recover the int8 weight from its compile-time dequantized value (``weight = q * scale``).

    Raises ValueError if ``weight`` is not ``int8 * scale`` per index of ``channel_dim``."""
    shape = [1] * weight.dim()
    shape[channel_dim] = -1
    s = scales.reshape(shape) if scales.numel() > 1 else scales.reshape([1] * weight.dim())
    q = torch.round(weight / s)
    if q.min() < -128 or q.max() > 127 or not torch.allclose(q * s, weight, rtol=1e-5, atol=1e-12):
        raise ValueError(f"{what} is not an int8 tensor times its per-channel scales")
    return q.to(torch.int8)


def channel_scales(scales: torch.Tensor, channels: int) -> torch.Tensor:
    """Per-channel scales (a per-tensor scale repeated)."""
    if scales.numel() == 1:
        return scales.reshape(1).expand(channels).clone()
    if scales.numel() != channels:
        raise ValueError(f"{scales.numel()} weight scales for {channels} output channels")
    return scales


def quantized_filter(builder, weight: torch.Tensor, scales: torch.Tensor, channel_dim: int, what: str) -> int:
    """A ``qcint8`` constant for the float ``weight`` whose per-channel scales are ``scales``."""
    scales = channel_scales(scales, weight.shape[channel_dim])
    q = quantize_weight(weight, scales, channel_dim, what)
    return builder.add_constant(q.contiguous().numpy(), datatype=QCINT8, quant=PerChannel(scales.tolist(), channel_dim))


def quantized_bias(builder, bias: torch.Tensor, input_scale: float, weight_scales: torch.Tensor) -> int:
    """A ``qcint32`` constant: ``round(bias / (input_scale * weight_scale[c]))`` (XNNPACK's bias form)."""
    scales = (input_scale * weight_scales.to(torch.float64)).to(torch.float32)
    q = torch.round(bias.to(torch.float64) / scales.to(torch.float64)).clamp(-2**31, 2**31 - 1).to(torch.int32)
    return builder.add_constant(q.contiguous().numpy(), datatype=QCINT32, quant=PerChannel(scales.tolist(), 0))
