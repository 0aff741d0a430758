"""One partition (an edge ``ExportedProgram``) -> a VkGraph, with the rewrites the shader library wants:

- batch norm after a convolution whose output nothing else reads goes into the convolution's weight and
  bias (``w * gamma / sqrt(var + eps)``, ``(b - mean) * gamma / sqrt(var + eps) + beta``, in float64);
- a ReLU / hardtanh / clamp with scalar bounds after a convolution or linear becomes that op's output
  clamp (``et_vk.conv_with_clamp``, ExecuTorch's fused op of the same schema, / ``etkit_vk.linear_with_clamp``);
- a linear whose weight is a dequantized constant (PT2E ``dequantize_per_channel`` / ``_per_tensor``,
  torchao ``dequantize_affine``; symmetric int8 or int4, per channel or per group along K) becomes
  ``etkit_vk.linear_qw``: the integer weights stay integers in the payload (int4 packed two per byte) and
  the shader dequantizes;
- an activation quantized at run time (``choose_qparams -> quantize -> dequantize``: PT2E dynamic, torchao
  per-token) becomes ``etkit_vk.dynamic_fake_quant``: the same int8 rounding in one shader, no int tensors;
- Python arithmetic on SymInts becomes ``sym.add`` / ``sym.sub`` / ``sym.mul`` / ``sym.floordiv``.

Everything else is written as the ATen call it is (:mod:`etkit_vulkan.serialization.graph_builder`).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Optional

import torch
from torch.export import ExportedProgram

from etkit.backend.utils import get_constant, is_constant, is_user_input, node_target_name

from .compile_spec import VulkanCompileOptions
from .op_support import ACT_DEQUANTIZE_OPS, SYM_OPS, dequantized_weight, dynamic_chain
from .serialization.graph_builder import GraphBuildError, VkGraphBuilder

aten = torch.ops.aten
_CLAMPS = (aten.relu.default, aten.hardtanh.default, aten.clamp.default)


@dataclass
class _Fused:
    kind: str                      # "conv", "linear", "linear_qw", "fake_quant"
    anchor: torch.fx.Node          # the convolution / linear whose arguments are written
    weight: Optional[torch.Tensor] = None
    bias: Optional[torch.Tensor] = None
    clamp: Optional[tuple] = None
    quant: Optional[tuple] = None  # (q int8 [N, K], scales [N, G], group_size, bits)
    chain: object = None           # op_support.DynamicQuantChain


@dataclass
class FusionPlan:
    """``emit[tail]``: the fused op written at the chain's last node; ``skip``: nodes it absorbed."""

    emit: dict = field(default_factory=dict)
    skip: set = field(default_factory=set)


def _single_user(node: torch.fx.Node) -> Optional[torch.fx.Node]:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _clamp_bounds(node: torch.fx.Node) -> Optional[tuple]:
    if node.target is aten.relu.default:
        return 0.0, float("inf")
    args = list(node.args) + [None, None, None]
    lo, hi = args[1], args[2]
    if node.target is aten.hardtanh.default:
        lo, hi = (-1.0 if lo is None else lo), (1.0 if hi is None else hi)
    if isinstance(lo, torch.fx.Node) or isinstance(hi, torch.fx.Node):
        return None
    return (float("-inf") if lo is None else float(lo)), (float("inf") if hi is None else float(hi))


def _fold_batch_norm(conv: torch.fx.Node, ep: ExportedProgram):
    """(weight, bias, tail, absorbed) when conv -> batch_norm -> getitem(0) can be folded, else None."""
    bn = _single_user(conv)
    if bn is None or bn.target is not aten._native_batch_norm_legit_no_training.default or bn.args[0] is not conv:
        return None
    getters = list(bn.users)
    if len(getters) != 1 or getters[0].target is not operator.getitem or getters[0].args[1] != 0:
        return None
    w = get_constant(ep, conv.args[1])
    b = get_constant(ep, conv.args[2]) if conv.args[2] is not None else None
    params = [get_constant(ep, a) if a is not None else None for a in bn.args[1:5]]
    if w is None or params[2] is None or params[3] is None or (conv.args[2] is not None and b is None):
        return None
    gamma, beta, mean, var = [p.double() if p is not None else None for p in params]
    eps = float(bn.args[6])
    scale = (gamma if gamma is not None else torch.ones_like(mean)) / torch.sqrt(var + eps)
    w2 = (w.double() * scale.reshape(-1, *([1] * (w.dim() - 1)))).to(w.dtype)
    b0 = b.double() if b is not None else torch.zeros_like(mean)
    b2 = ((b0 - mean) * scale + (beta if beta is not None else 0.0)).to(w.dtype)
    return w2, b2, getters[0], {conv, bn}


def plan_fusions(ep: ExportedProgram) -> FusionPlan:
    plan = FusionPlan()
    for node in ep.graph.nodes:
        if node.op != "call_function" or node in plan.skip:
            continue
        if node.target in ACT_DEQUANTIZE_OPS and dequantized_weight(node, ep) is None:
            chain, _ = dynamic_chain(node)
            if chain is not None:
                plan.emit[node] = _Fused("fake_quant", node, chain=chain)
                plan.skip |= set(chain.nodes) - {node}
            continue
        fused, tail, absorbed = None, node, set()
        if node.target is aten.convolution.default and not node.args[6] and is_constant(ep, node.args[1]):
            folded = _fold_batch_norm(node, ep)
            if folded is not None:
                w, b, tail, absorbed = folded
                fused = _Fused("conv", node, weight=w, bias=b)
            else:
                fused = _Fused("conv", node)
        elif node.target is aten.linear.default:
            quant = dequantized_weight(node.args[1], ep)
            if quant is not None and all(u is node for u in node.args[1].users):
                fused = _Fused("linear_qw", node, quant=quant)
                absorbed = {node.args[1]}
            elif is_constant(ep, node.args[1]):
                fused = _Fused("linear", node)
        if fused is None:
            continue
        if fused.kind != "linear_qw":
            nxt = _single_user(tail)
            if nxt is not None and nxt.target in _CLAMPS and nxt.args[0] is tail:
                bounds = _clamp_bounds(nxt)
                if bounds is not None:
                    fused.clamp = bounds
                    absorbed = absorbed | {tail}
                    tail = nxt
        if tail is node and fused.clamp is None and fused.weight is None and fused.kind != "linear_qw":
            continue  # nothing to fuse: written as the plain ATen call
        plan.emit[tail] = fused
        plan.skip |= absorbed - {tail}
    return plan


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """int8 [N, K] holding values in [-8, 7] -> uint8 [N, ceil(K / 2)], two per byte: even k in the low
    nibble, odd k in the high one (two's complement nibbles)."""
    n, k = q.shape
    nib = (q.to(torch.int16) & 0xF).to(torch.uint8)
    if k % 2:
        nib = torch.cat([nib, torch.zeros(n, 1, dtype=torch.uint8)], dim=1)
    return (nib[:, 0::2] | (nib[:, 1::2] << 4)).contiguous()


def _emit_fused(b: VkGraphBuilder, node: torch.fx.Node, f: _Fused, ep: ExportedProgram) -> None:
    a = f.anchor
    out = b.node_value(node)
    if f.kind == "fake_quant":
        c = f.chain
        args = [b.node_value(c.source), b.int_value(c.qmin), b.int_value(c.qmax), b.double_value(c.eps),
                b.bool_value(c.per_row)]
        b.call("etkit_vk.dynamic_fake_quant.default", args, out, a.meta.get("debug_handle"))
        return
    x = b.node_value(a.args[0])
    if f.kind == "linear_qw":
        q, scales, group, bits = f.quant
        bias = a.args[2] if len(a.args) > 2 else None
        if bits == 4:
            q = pack_int4(q)
        args = [x, b.constant(q, f"{a.name}.qweight"), b.constant(scales, f"{a.name}.scales", keep_dtype=True),
                b.int_value(group), b.int_value(bits), b.arg_value(bias, a.name)]
        b.call("etkit_vk.linear_qw.default", args, out, a.meta.get("debug_handle"))
        return
    if f.kind == "conv":
        weight = b.constant(f.weight, f"{a.name}.weight") if f.weight is not None else b.node_value(a.args[1])
        bias = (b.constant(f.bias, f"{a.name}.bias") if f.bias is not None else b.arg_value(a.args[2], a.name))
        args = [x, weight, bias] + [b.arg_value(v, a.name) for v in a.args[3:9]]
        name = "aten.convolution.default"
    else:
        bias = a.args[2] if len(a.args) > 2 else None
        args = [x, b.node_value(a.args[1]), b.arg_value(bias, a.name)]
        name = "aten.linear.default"
    if f.clamp is not None:
        args += [b.double_value(f.clamp[0]), b.double_value(f.clamp[1])]
        name = "et_vk.conv_with_clamp.default" if f.kind == "conv" else "etkit_vk.linear_with_clamp.default"
    b.call(name, args, out, a.meta.get("debug_handle"))


def lower_partition(ep: ExportedProgram, options: VulkanCompileOptions) -> tuple[bytes, dict]:
    """The VkGraph flatbuffer of ``ep`` and the named data holding its constants.

    Raises:
        GraphBuildError: a node the graph cannot express (names the node).
    """
    b = VkGraphBuilder(force_fp16=options.force_fp16, storage=options.storage_type)
    plan = plan_fusions(ep)
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        if is_constant(ep, node):
            b.pending_constants[node] = get_constant(ep, node)
        elif is_user_input(ep, node):
            b.input_ids.append(b.node_value(node))
    for node in ep.graph.nodes:
        if node.op != "call_function" or node in plan.skip:
            continue
        debug = node.meta.get("debug_handle")
        if node in plan.emit:
            _emit_fused(b, node, plan.emit[node], ep)
        elif node.target is operator.getitem:
            src = b.node_value(node.args[0])
            items = b.values[src].value.items
            b.node_values[node] = items[node.args[1]]
        elif node.target in SYM_OPS:
            b.call(SYM_OPS[node.target], [b.arg_value(a, node.name) for a in node.args[:2]], b.node_value(node), debug)
        else:
            b.call(node_target_name(node), b.schema_args(node), b.node_value(node), debug)
    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    for x in out_node.args[0]:
        if not isinstance(x, torch.fx.Node):
            raise GraphBuildError(f"the partition returns {x!r}, not a tensor")
        b.output_ids.append(b.node_value(x))
    b.plan_memory()
    return b.finish(), b.named_data
