"""Rewrites applied before quantization (``EthosUQuantizer.transform_for_annotation``) so that ops with no
single TOSA 1.0 INT equivalent become ops that have one, each of which then gets its own quantization
(ExecuTorch's Arm quantizer does the same, e.g. ``DecomposeSoftmaxPass``, ``DecomposeLayerNormPass``):

* ``softmax(x, dim)`` -> ``e = exp(x - amax(x, dim)); e * reciprocal(sum(e, dim))`` (the max is subtracted so
  ``exp`` stays within (0, 1]); ``exp`` and ``reciprocal`` become TABLEs;
* ``layer_norm(x, shape, w, b, eps)`` -> ``d = x - mean(x); d * rsqrt(mean(d * d) + eps) * w + b`` over the
  normalized dims; ``rsqrt`` becomes a TABLE.

The PT2E reference model is the rewritten, quantized graph, so the lowering still matches it within 1 LSB; the
distance to float softmax/layer_norm is the price of computing them in int8.
"""
from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

aten = torch.ops.aten

_SOFTMAX = {aten.softmax.int, aten._softmax.default}
_LAYER_NORM = {aten.layer_norm.default}


def _value(arg):
    return arg.meta["val"] if isinstance(arg, Node) else arg


class _Emitter:
    """Inserts nodes before ``anchor`` with ``meta['val']`` (fake tensors) and the anchor's module stack."""

    def __init__(self, graph, anchor: Node) -> None:
        self.graph, self.anchor = graph, anchor

    def __call__(self, target, *args) -> Node:
        with self.graph.inserting_before(self.anchor):
            node = self.graph.call_function(target, args)
        for key in ("nn_module_stack", "stack_trace", "source_fn_stack", "torch_fn"):
            if key in self.anchor.meta:
                node.meta[key] = self.anchor.meta[key]
        node.meta["val"] = target(*[_value(a) for a in args])
        return node


def _softmax(graph, node: Node) -> Node:
    x, dim = node.args[0], node.args[1]
    emit = _Emitter(graph, node)
    shifted = emit(aten.sub.Tensor, x, emit(aten.amax.default, x, [dim], True))
    e = emit(aten.exp.default, shifted)
    return emit(aten.mul.Tensor, e, emit(aten.reciprocal.default, emit(aten.sum.dim_IntList, e, [dim], True)))


def _layer_norm(graph, node: Node) -> Node:
    x, shape = node.args[0], node.args[1]
    weight = node.args[2] if len(node.args) > 2 else node.kwargs.get("weight")
    bias = node.args[3] if len(node.args) > 3 else node.kwargs.get("bias")
    eps = node.args[4] if len(node.args) > 4 else node.kwargs.get("eps", 1e-5)
    dims = list(range(-len(shape), 0))
    emit = _Emitter(graph, node)
    centered = emit(aten.sub.Tensor, x, emit(aten.mean.dim, x, dims, True))
    variance = emit(aten.mean.dim, emit(aten.mul.Tensor, centered, centered), dims, True)
    y = emit(aten.mul.Tensor, centered, emit(aten.rsqrt.default, emit(aten.add.Tensor, variance, float(eps))))
    if weight is not None:
        y = emit(aten.mul.Tensor, y, weight)
    if bias is not None:
        y = emit(aten.add.Tensor, y, bias)
    return y


def decompose_for_npu(model: GraphModule) -> GraphModule:
    """Rewrite softmax and layer_norm in ``model`` (an exported, pre-dispatch ``GraphModule``) in place.

    Returns:
        ``model``, recompiled.
    """
    graph = model.graph
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target in _SOFTMAX:
            replacement = _softmax(graph, node)
        elif node.target in _LAYER_NORM:
            replacement = _layer_norm(graph, node)
        else:
            continue
        node.replace_all_uses_with(replacement)
        graph.erase_node(node)
        changed = True
    if changed:
        graph.lint()
        model.recompile()
    return model
