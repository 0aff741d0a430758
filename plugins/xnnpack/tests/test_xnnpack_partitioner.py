"""XnnpackPartitioner on whole models: partition count, tagging, report, per_op_mode, kept ops."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from etkit.backend import DELEGATION_TAG
from etkit_xnnpack import XnnpackPartitioner
from etkit_xnnpack.partition import NOT_IN_ANY_CONFIG
from helpers import lower, lowered_modules, to_edge_program
from oracle_models import conv_block, mobilenet_v2

aten = torch.ops.aten


@pytest.fixture(scope="module")
def mobilenet_lowered():
    model, inputs = mobilenet_v2()
    return lower(model, inputs)


def test_mobilenet_v2_becomes_exactly_one_delegate(mobilenet_lowered):
    manager, partitioner = mobilenet_lowered
    report = partitioner.report()
    assert report.num_partitions == 1
    assert report.rejected == []
    assert len(lowered_modules(manager)) == 1
    graph = manager.exported_program().graph
    compute = [n.target for n in graph.nodes if n.op == "call_function" and n.target.__name__ != "getitem"]
    assert [getattr(t, "__name__", str(t)) for t in compute] == ["executorch_call_delegate"]


def test_mobilenet_v2_report_counts_ops(mobilenet_lowered):
    delegated = mobilenet_lowered[1].report().delegated
    assert delegated["aten.convolution.default"] == 52
    assert delegated["aten._native_batch_norm_legit_no_training.default"] == 52
    assert delegated["aten.hardtanh.default"] == 35
    assert delegated["aten.linear.default"] == 1   # kept undecomposed (ops_to_not_decompose)


def test_partition_tags_compute_nodes_and_their_constants():
    model, inputs = conv_block()
    ep = to_edge_program(model, inputs)
    result = XnnpackPartitioner().partition(ep)
    assert list(result.partition_tags) == ["xnnpack_0"]
    assert result.partition_tags["xnnpack_0"].backend_id == "XnnpackBackend"
    for node in ep.graph.nodes:
        if node.op == "call_function":
            assert node.meta.get(DELEGATION_TAG) == "xnnpack_0", node.name
        elif node.op == "placeholder" and node.name.startswith(("p_", "b_")) and node.users:
            assert node.meta.get(DELEGATION_TAG) == "xnnpack_0", node.name


class Mixed(nn.Module):
    """Delegable ops around an op no config handles: two partitions, one rejection."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        y = torch.relu(self.a(x))
        y = torch.where(y > 0.5, y, -y)          # gt/where/neg: where and gt are not delegable
        return self.b(y)


def test_unsupported_op_splits_partitions_and_is_reported_with_reason():
    manager, partitioner = lower(Mixed().eval(), (torch.randn(2, 4),))
    report = partitioner.report()
    assert report.num_partitions == 2
    reasons = {r.target: r.reason for r in report.rejected}
    assert reasons["aten.where.self"] == NOT_IN_ANY_CONFIG
    assert reasons["aten.gt.Scalar"] == NOT_IN_ANY_CONFIG
    text = report.format()
    assert "aten.where.self (node where): op not in any config" in text
    assert len(lowered_modules(manager)) == 2


def test_per_op_mode_makes_one_partition_per_op():
    model, inputs = conv_block()
    ep = to_edge_program(model, inputs)
    result = XnnpackPartitioner(per_op_mode=True).partition(ep)
    anchors = [n for n in ep.graph.nodes if n.op == "call_function" and n.target.__name__ != "getitem"
               and n.target is not aten.permute_copy.default]
    assert len(result.partition_tags) == len(anchors)
    # the batch norm's getitem shares its producer's tag
    for node in ep.graph.nodes:
        if node.op == "call_function" and node.target.__name__ == "getitem":
            assert node.meta[DELEGATION_TAG] == node.args[0].meta[DELEGATION_TAG]


def test_ops_to_not_decompose_keeps_linear_only_when_delegable():
    partitioner = XnnpackPartitioner()
    ep = torch.export.export(nn.Linear(4, 3).eval(), (torch.randn(2, 4),))
    ops, node_filter = partitioner.ops_to_not_decompose(ep)
    assert aten.linear.default in ops and aten.hardswish.default in ops
    linear = next(n for n in ep.graph.nodes if n.target is aten.linear.default)
    assert node_filter(linear)

    class DynamicWeight(nn.Module):
        def forward(self, x, w):
            return torch.nn.functional.linear(x, w)

    ep2 = torch.export.export(DynamicWeight(), (torch.randn(2, 4), torch.randn(3, 4)))
    _, node_filter2 = partitioner.ops_to_not_decompose(ep2)
    linear2 = next(n for n in ep2.graph.nodes if n.target is aten.linear.default)
    assert not node_filter2(linear2)


def test_verbose_prints_the_report(capsys):
    model, inputs = conv_block()
    XnnpackPartitioner(verbose=True).partition(to_edge_program(model, inputs))
    assert "XnnpackBackend:" in capsys.readouterr().out


class TiedWeights(nn.Module):
    """The same Linear on both sides of an undelegable op, and its weight also used outside."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        y = torch.where(y > 0, y, y * 0.1)
        return self.lin(y) + self.lin.weight.sum()


def test_constants_shared_between_partitions_are_duplicated_per_partition():
    torch.manual_seed(0)
    manager, partitioner = lower(TiedWeights().eval(), (torch.randn(2, 4),))
    mods = lowered_modules(manager)
    assert partitioner.report().num_partitions == len(mods) == 2
    from etkit.backend.utils import get_constant, is_user_input

    for mod in mods:
        # Each delegate holds the [4, 4] weight as its own constant; no weight arrives as a run-time input.
        sub = mod.original_module
        placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
        constant_shapes = [tuple(get_constant(sub, n).shape) for n in placeholders if not is_user_input(sub, n)]
        input_shapes = [tuple(n.meta["val"].shape) for n in placeholders if is_user_input(sub, n)]
        assert (4, 4) in constant_shapes
        assert (4, 4) not in input_shapes
