"""Dynamically quantized linears: XNNPACK's ``qd8`` fully connected (int8 activations quantized per
row at run time, int8 or int4 weights quantized ahead of time).

Two front ends leave the same shape in the graph; the activation of a linear goes through
"choose parameters -> quantize -> dequantize" and its weight is a dequantized constant:

- PT2E with ``get_symmetric_quantization_config(is_dynamic=True)`` (seed 001)::

      s, z = choose_qparams.tensor(x, -128, 127, eps, int8)             (one scale for the tensor)
      x_f  = dequantize_per_tensor.tensor(quantize_per_tensor.tensor(x, s, z, ...), s, z, ...)
      y    = linear(x_f, dequantize_per_channel(w_int8, scales, zeros, 0, -127, 127, int8), b)

- torchao ``quantize_(model, Int8DynamicActivationIntxWeightConfig(...))`` (seed 001, LLM section)::

      s, z = torchao.choose_qparams_affine(x, ASYMMETRIC, [1, .., 1, K], int8, ...)   (per token)
      x_f  = torchao.dequantize_affine(torchao.quantize_affine(x, [1, .., K], s, z, ...), ...)
      y    = linear(x_f, torchao.dequantize_affine(w, [1, G], scales, zeros, int8, -8, 7), b)

XNNPACK expresses this as ``XNNConvert`` fp32 -> ``qdint8`` (a value quantized per row, written as
``PerTokenDynamicQuant(num_nonbatch_dims=1)``) feeding ``XNNFullyConnected`` with an fp32 bias and an
fp32 output, as ExecuTorch's XNNPACK backend writes it. Weights:

===================================  ===============  ==========================================
weight dequantize                    XNNPACK datatype  payload
===================================  ===============  ==========================================
int8 per tensor / per output channel ``qcint8``        int8 [N, K], one fp32 scale per row
int4 (range [-8, 7]) per channel     ``qcint4``        two values per byte (+8, even k in the low
                                                       nibble), one fp32 scale per row
int4 per group of G along K          ``qbint4``        as qcint4; bf16 scales [N, K / G]
===================================  ===============  ==========================================

Zero points must be 0 (symmetric weights). XNNPACK quantizes each row of the activation with its
own scale, which is at least as fine as the reference's per-tensor scale (PT2E) and the same as
torchao's per-token scale; results therefore agree with the reference to quantization error, not
bit for bit.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from etkit.dialects.quantized import (DEQUANTIZE_PER_CHANNEL, choose_qparams_ops, dynamic_dequantize_ops,
                                      dynamic_quantize_ops, torchao_op, weight_dequantize_ops)


#: XNNDatatype numbers.
QCINT8, QCINT4, QDINT8, QBINT4 = 6, 8, 9, 10


TORCHAO_CHOOSE_QPARAMS = torchao_op("choose_qparams_affine")
TORCHAO_QUANTIZE = torchao_op("quantize_affine")
TORCHAO_DEQUANTIZE = torchao_op("dequantize_affine")

CHOOSE_QPARAMS_OPS = set(choose_qparams_ops())
DYNAMIC_QUANTIZE_OPS = set(dynamic_quantize_ops())
DYNAMIC_DEQUANTIZE_OPS = set(dynamic_dequantize_ops())
#: Weight dequantize ops this module reads (a constant input makes them compile-time foldable).
WEIGHT_DEQUANTIZE_OPS = set(weight_dequantize_ops())
#: Linear-like ops that can read a dynamically quantized activation (input position, weight position).
DYNAMIC_READERS = {torch.ops.aten.linear.default: (0, 1)}


def _node(x) -> bool:
    return isinstance(x, torch.fx.Node)


def _val(node) -> Optional[torch.Tensor]:
    val = node.meta.get("val") if _node(node) else None
    return val if isinstance(val, torch.Tensor) else None


# --------------------------------------------------------------------------------- activations

def dynamic_activation_source(dq) -> Optional[torch.fx.Node]:
    """For the dequantize ``dq`` of a run-time quantized activation, the float value ``x`` it
    quantizes (``dq(q(x, choose_qparams(x)))``), else None. Checks int8 over [-128, 127] and, for
    torchao's ops, per-token blocks ``[1, .., 1, K]``."""
    if not _node(dq) or dq.target not in DYNAMIC_DEQUANTIZE_OPS:
        return None
    q = dq.args[0]
    if not _node(q) or q.target not in DYNAMIC_QUANTIZE_OPS:
        return None
    if (dq.target is TORCHAO_DEQUANTIZE) != (q.target is TORCHAO_QUANTIZE):
        return None
    x = q.args[0]
    xval = _val(x)
    if xval is None or xval.dtype != torch.float32 or xval.dim() == 0:
        return None
    if q.target is TORCHAO_QUANTIZE:
        block, scale, zp, dtype, qmin, qmax = (list(q.args) + [None] * 7)[1:7]
        if list(block or []) != [1] * (xval.dim() - 1) + [xval.shape[-1]]:
            return None  # not per token: XNNPACK quantizes per row only
        dq_params = (list(dq.args) + [None] * 7)[1:4]
    else:
        scale, zp, qmin, qmax, dtype = (list(q.args) + [None] * 6)[1:6]
        dq_params = [None] + list(dq.args[1:3])
    if dtype != torch.int8 or (qmin, qmax) != (-128, 127):
        return None
    if not (_node(scale) and _node(zp)) or dq_params[1:] != [scale, zp]:
        return None
    chooser = {s.args[0] for s in (scale, zp) if s.target is operator.getitem}
    if len(chooser) != 1 or scale.args[1] != 0 or zp.args[1] != 1:
        return None
    choose = chooser.pop()
    if not _node(choose) or choose.target not in CHOOSE_QPARAMS_OPS or choose.args[0] is not x:
        return None
    return x


def dynamic_chain(node: torch.fx.Node) -> Optional[tuple[torch.fx.Node, list[torch.fx.Node]]]:
    """For any node of a dynamic-quantization chain (choose_qparams, its getitems, the quantize or the
    dequantize), ``(dequantize, [its readers])``; None if ``node`` is in no well-formed chain."""
    candidates = [node]
    for _ in range(3):  # choose_qparams -> getitem -> quantize -> dequantize
        nxt = []
        for c in candidates:
            if c.target in DYNAMIC_DEQUANTIZE_OPS and dynamic_activation_source(c) is not None:
                return c, list(c.users)
            nxt.extend(c.users)
        candidates = nxt
    for c in candidates:
        if c.target in DYNAMIC_DEQUANTIZE_OPS and dynamic_activation_source(c) is not None:
            return c, list(c.users)
    return None


# --------------------------------------------------------------------------------- weights

@dataclass(frozen=True)
class DynamicWeight:
    """A weight quantized ahead of time for a qd8 fully connected.

    Attributes:
        values: int8 tensor [N, K] (int4 values lie in [-8, 7]).
        scales: fp32 [N] (per channel) or [N, K / group_size] (per group).
        bits: 8 or 4.
        group_size: elements per scale along K, or None for one scale per output channel.
    """

    values: torch.Tensor
    scales: torch.Tensor
    bits: int
    group_size: Optional[int]

    @property
    def datatype(self) -> int:
        if self.bits == 8:
            return QCINT8
        return QCINT4 if self.group_size is None else QBINT4


def dynamic_weight(node, constant: Callable) -> tuple[Optional[DynamicWeight], str]:
    """Read the quantized weight [N, K] behind the dequantize ``node``; returns ``(weight, "")`` or
    ``(None, reason)`` naming what XNNPACK cannot express."""
    if not _node(node) or node.target not in WEIGHT_DEQUANTIZE_OPS:
        return None, "the weight is not a dequantized constant"
    q = constant(node.args[0])
    if q is None:
        return None, "the quantized weight is not a constant"
    if q.dim() != 2:
        return None, f"the weight must be 2-D [out, in], got shape {list(q.shape)}"
    n, k = q.shape
    args = list(node.args) + [None] * 8
    if node.target is TORCHAO_DEQUANTIZE:
        block, scale, zp, dtype, qmin, qmax = args[1:7]
        scales, zeros = constant(scale), constant(zp) if _node(zp) else None
        if scales is None:
            return None, "the weight scales are not constants"
        if dtype != torch.int8 or q.dtype != torch.int8:
            return None, f"weights of dtype {q.dtype} (target {dtype}) are not supported (int8 storage only)"
        if list(block or []) == [1, k]:
            group = None
        elif len(block or []) == 2 and block[0] == 1 and 0 < block[1] < k and k % block[1] == 0:
            group = int(block[1])
        else:
            return None, f"weight block size {block} is not per output channel [1, {k}] or per group [1, G]"
        scales = scales.reshape(n, -1).to(torch.float32)
    elif node.target is DEQUANTIZE_PER_CHANNEL:
        scales, zeros = constant(args[1]), constant(args[2])
        axis, qmin, qmax, dtype = args[3:7]
        if scales is None or axis != 0 or dtype != torch.int8:
            return None, "only int8 weights quantized along the output channel (axis 0) are supported"
        group = None
        scales = scales.reshape(n, 1).to(torch.float32)
    else:  # dequantize_per_tensor
        scale, zp, qmin, qmax, dtype = args[1:6]
        if not isinstance(scale, (int, float)) or dtype != torch.int8:
            return None, "only int8 per-tensor weights with a constant scale are supported"
        scales, zeros, group = torch.full((n, 1), float(scale)), None if zp == 0 else torch.tensor(zp), None
    if zeros is not None and bool((zeros != 0).any()):
        return None, "the weight has non-zero zero points; XNNPACK needs symmetric weights"
    if (qmin, qmax) == (-8, 7):
        bits = 4
    elif qmin is not None and qmin >= -128 and qmax is not None and qmax <= 127:
        bits = 8
    else:
        return None, f"weight range [{qmin}, {qmax}] is neither int8 nor int4 [-8, 7]"
    if group is not None:
        if bits != 4:
            return None, "per-group scales need int4 weights (XNNPACK has no blockwise int8 weights)"
        if group % 32 != 0:
            return None, f"group size {group} is not a multiple of 32 (XNNPACK's blockwise weights)"
    else:
        scales = scales.reshape(n)
    return DynamicWeight(q, scales.contiguous(), bits, group), ""


def pack_int4(values: torch.Tensor) -> bytes:
    """int4 values [N, K] in [-8, 7], K even (the partitioner refuses odd K), as XNNPACK's packed
    unsigned nibbles: value + 8, element 2j in the low nibble and 2j+1 in the high nibble of byte j."""
    if values.shape[1] % 2:
        raise ValueError(f"int4 weights need an even input size, got {values.shape[1]}")
    u = (values.to(torch.int16) + 8).to(torch.uint8)
    return ((u[:, 1::2] << 4) | u[:, 0::2]).contiguous().numpy().tobytes()
