"""Activations fused into the op that produces their input (XNNPACK's output clamp).

XNNPACK's convolutions, fully connected and binary nodes clamp their output to ``[output_min,
output_max]`` for free. A ReLU / hardtanh / clamp that is the only reader of such an op's result is
therefore written as that op's clamp instead of a separate ``XNNClamp`` node, which would read and
write the whole tensor once more (ExecuTorch's XNNPACK backend does the same, ``FuseActivationPass``).
A batch norm folded into the convolution before it is looked through: ``conv -> batch norm -> relu``
is one convolution node. Statically quantized ops fuse their activations in :class:`.quant.QuantPlan`.
"""
from __future__ import annotations

import operator

import torch

from .quant import ACTIVATIONS, FUSES_ACTIVATION, activation_clamp

aten = torch.ops.aten


def _float(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype in (torch.float32, torch.float16)


def _producer(src, bn_folded_into: dict):
    """The op computing ``src``: itself, or the convolution a batch norm (read through getitem 0) was
    folded into. None when some other node also reads a value on the way."""
    if not isinstance(src, torch.fx.Node) or len(src.users) != 1:
        return None
    if src.target is operator.getitem and src.args[1] == 0:
        bn = src.args[0]
        conv = next((c for c, b in bn_folded_into.items() if b is bn), None)
        if conv is None or len(bn.users) != 1 or len(conv.users) != 1:
            return None
        return conv
    return src


def float_activation_fusions(graph: torch.fx.Graph, bn_folded_into: dict, quantized) -> dict:
    """``{activation node: op node}`` for float activations XNNPACK can apply as the op's output clamp.

    Args:
        bn_folded_into: ``{conv: batch norm}`` folded at preprocess time.
        quantized: predicate, True for ops lowered on int8 (their fusions are the QuantPlan's).
    """
    fused = {}
    for act in graph.nodes:
        if act.op != "call_function" or act.target not in ACTIVATIONS or not _float(act):
            continue
        producer = _producer(act.args[0], bn_folded_into)
        if producer is None or producer.op != "call_function" or producer.target not in FUSES_ACTIVATION:
            continue
        if quantized(producer) or not _float(producer) or producer in fused.values():
            continue
        if producer.target in (aten.add.Tensor, aten.sub.Tensor) and producer.kwargs.get("alpha", 1) != 1:
            continue
        lo, hi = activation_clamp(act)
        if lo > hi:
            continue
        fused[act] = producer
    return fused
