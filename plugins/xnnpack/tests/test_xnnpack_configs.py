"""Per-config decisions: what each op-family config accepts, and the reason it gives when it rejects."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from etkit_xnnpack import XnnpackPartitioner
from etkit_xnnpack.partition import NOT_IN_ANY_CONFIG
from helpers import Fn, to_edge_program

aten = torch.ops.aten


def decisions(module, *inputs):
    """{target: [reason or None per node]} for every call_function node of the Edge program."""
    ep = to_edge_program(module.eval(), inputs)
    part = XnnpackPartitioner()
    out = {}
    for node in ep.graph.nodes:
        if node.op == "call_function":
            r = part.check_node(node, ep)
            out.setdefault(node.target, []).append(None if r is None else r.reason)
    return out


X4 = torch.randn(1, 3, 8, 8)


@pytest.mark.parametrize("name, module, inputs, target", [
    ("conv2d", Fn(lambda s, x: s.c(x), c=nn.Conv2d(3, 4, 3)), (X4,), aten.convolution.default),
    ("depthwise", Fn(lambda s, x: s.c(x), c=nn.Conv2d(3, 6, 3, groups=3)), (X4,), aten.convolution.default),
    ("conv_transpose", Fn(lambda s, x: s.c(x), c=nn.ConvTranspose2d(3, 4, 2, stride=2)), (X4,),
     aten.convolution.default),
    ("addmm", Fn(lambda s, x: s.l(x), l=nn.Linear(8, 2)), (torch.randn(2, 8),), aten.addmm.default),
    ("bmm", Fn(lambda s, a, b: torch.bmm(a, b)), (torch.randn(2, 3, 4), torch.randn(2, 4, 5)), aten.bmm.default),
    ("add", Fn(lambda s, a, b: a + b), (X4, X4), aten.add.Tensor),
    ("mul_scalar", Fn(lambda s, a: a * 3.0), (X4,), aten.mul.Tensor),
    ("mul_int_scalar", Fn(lambda s, a: a * 2), (X4,), aten.mul.Tensor),   # int64 0-d constant operand
    ("div_int_scalar", Fn(lambda s, a: a / 3), (X4,), aten.div.Tensor),
    ("relu6", Fn(lambda s, a: F.relu6(a)), (X4,), aten.hardtanh.default),
    ("gelu", Fn(lambda s, a: F.gelu(a)), (X4,), aten.gelu.default),
    ("softmax_last", Fn(lambda s, a: torch.softmax(a, -1)), (X4,), aten._softmax.default),
    ("global_mean", Fn(lambda s, a: a.mean([2, 3], keepdim=True)), (X4,), aten.mean.dim),
    ("max_pool", Fn(lambda s, a: F.max_pool2d(a, 2)), (X4,), aten.max_pool2d_with_indices.default),
    ("avg_pool", Fn(lambda s, a: F.avg_pool2d(a, 2)), (X4,), aten.avg_pool2d.default),
    ("cat", Fn(lambda s, a, b: torch.cat([a, b], 1)), (X4, X4), aten.cat.default),
    ("slice", Fn(lambda s, a: a[:, 1:3] + 0), (X4,), aten.slice_copy.Tensor),
    ("permute", Fn(lambda s, a: a.permute(0, 2, 3, 1) + 0), (X4,), aten.permute_copy.default),
    ("view", Fn(lambda s, a: a.reshape(1, -1) + 0), (X4,), aten.view_copy.default),
    ("layer_norm", Fn(lambda s, a: s.ln(a), ln=nn.LayerNorm(8)), (X4,), aten.native_layer_norm.default),
])
def test_config_accepts(name, module, inputs, target):
    got = decisions(module, *inputs)
    if target is aten.mul.Tensor and target not in got:
        target = aten.mul.Scalar
    assert target in got, f"{name}: {target} not in the edge graph {list(got)}"
    assert got[target] == [None] * len(got[target])


@pytest.mark.parametrize("name, module, inputs, target, reason", [
    ("conv_weight_input", Fn(lambda s, x, w: F.conv2d(x, w)), (X4, torch.randn(4, 3, 3, 3)),
     aten.convolution.default, "weight is not a constant"),
    ("addmm_dynamic_weight", Fn(lambda s, x, w, b: torch.addmm(b, x, w)),
     (torch.randn(2, 3), torch.randn(3, 4), torch.randn(4)), aten.addmm.default, "mat2 (weight) is not a constant"),
    ("softmax_dim1", Fn(lambda s, a: torch.softmax(a, 1)), (X4,), aten._softmax.default,
     "XNNPACK only supports the last dim"),
    ("mean_channels", Fn(lambda s, a: a.mean([1], keepdim=True)), (X4,), aten.mean.dim,
     "supports only the H and W dims"),
    ("add_alpha", Fn(lambda s, a, b: torch.add(a, b, alpha=2)), (X4, X4), aten.add.Tensor, "alpha=2"),
    ("avg_pool_ceil", Fn(lambda s, a: F.avg_pool2d(a, 3, ceil_mode=True)), (X4,), aten.avg_pool2d.default,
     "ceil_mode=True"),
    ("gelu_tanh", Fn(lambda s, a: F.gelu(a, approximate="tanh")), (X4,), aten.gelu.default, "approximate='tanh'"),
    ("int_add", Fn(lambda s, a, b: a + b), (torch.ones(3, dtype=torch.int32), torch.ones(3, dtype=torch.int32)),
     aten.add.Tensor, "dtype torch.int32 is not supported"),
    ("slice_step", Fn(lambda s, a: a[:, ::2] + 0), (X4,), aten.slice_copy.Tensor, "step=2"),
    ("where", Fn(lambda s, a: torch.where(a > 0, a, a * 2)), (X4,), aten.where.self, NOT_IN_ANY_CONFIG),
])
def test_config_rejects_with_reason(name, module, inputs, target, reason):
    got = decisions(module, *inputs)
    assert target in got, f"{name}: {target} not in the edge graph {list(got)}"
    assert got[target][0] is not None and reason in got[target][0], got[target]


def test_rejection_message_names_op_and_node():
    ep = to_edge_program(Fn(lambda s, x, w: F.conv2d(x, w)).eval(), (X4, torch.randn(4, 3, 3, 3)))
    part = XnnpackPartitioner()
    conv = next(n for n in ep.graph.nodes if n.target is aten.convolution.default)
    assert str(part.check_node(conv, ep)) == f"aten.convolution.default (node {conv.name}): weight is not a constant"


def test_batch_norm_is_accepted_after_conv_and_standalone_but_needs_constant_stats():
    conv_bn = Fn(lambda s, x: s.bn(s.c(x)), c=nn.Conv2d(3, 4, 3), bn=nn.BatchNorm2d(4))
    got = decisions(conv_bn, X4)
    assert got[aten._native_batch_norm_legit_no_training.default] == [None]
    standalone = Fn(lambda s, x: s.bn(x), bn=nn.BatchNorm2d(3))
    assert decisions(standalone, X4)[aten._native_batch_norm_legit_no_training.default] == [None]


def test_config_precisions_filters_configs():
    from etkit_xnnpack.partition import ConfigPrecisionType

    fp32 = {c.name for c in XnnpackPartitioner(config_precisions=ConfigPrecisionType.FP32).configs}
    static = {c.name for c in XnnpackPartitioner(config_precisions=[ConfigPrecisionType.STATIC_QUANT]).configs}
    assert {"ConvolutionConfig", "SoftmaxConfig"} <= fp32 and "QuantizeConfig" not in fp32
    assert static == {"QuantizeConfig", "DequantizeConfig", "ConvolutionConfig", "LinearConfig", "AddmmConfig",
                      "MmConfig", "BinaryConfig", "ClampConfig", "MeanDimConfig", "MaxPool2dConfig", "GetItemConfig",
                      "ReshapeConfig", "PermuteConfig", "CatConfig"}
    dynamic = {c.name for c in XnnpackPartitioner(config_precisions=[ConfigPrecisionType.DYNAMIC_QUANT]).configs}
    assert dynamic == {"DynamicQuantChainConfig", "LinearConfig", "GetItemConfig"}


def test_custom_config_list_limits_what_is_delegated():
    from etkit_xnnpack.partition.configs import BinaryConfig

    ep = to_edge_program(Fn(lambda s, a: torch.relu(a + a)).eval(), (X4,))
    part = XnnpackPartitioner(configs=[BinaryConfig])
    relu = next(n for n in ep.graph.nodes if n.target is aten.relu.default)
    add = next(n for n in ep.graph.nodes if n.target is aten.add.Tensor)
    assert part.check_node(add, ep) is None
    assert part.check_node(relu, ep).reason == NOT_IN_ANY_CONFIG
