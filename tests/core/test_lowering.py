"""Partition tagging, fusion into delegate calls, and the plugin registry, through a toy backend."""
import operator

import pytest
import torch

import etkit
from etkit.backend import executorch_call_delegate
from etkit.backend.lowering import LoweringError
from etkit.plugins import BackendSpec, PluginError, get_plugin_manager, hookimpl
from etkit.serialize import deserialize_pte

from .toy_backend import TOY_ID, ToyPartitioner


class AddMulRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("bias", torch.arange(6, dtype=torch.float32).reshape(2, 3))

    def forward(self, x, y):
        a = x + y
        b = a * self.bias
        return torch.relu(b) + x


def _export():
    return torch.export.export(AddMulRelu(), (torch.randn(2, 3), torch.randn(2, 3)))


def _delegate_calls(ep):
    return [n for n in ep.graph.nodes if n.op == "call_function" and n.target is executorch_call_delegate]


def test_tagged_nodes_are_fused_into_one_delegate_call(toy_plugin):
    class AddMul(torch.nn.Module):
        def forward(self, x, y):
            return torch.relu((x + y) * y)
    ep = torch.export.export(AddMul(), (torch.randn(2, 3), torch.randn(2, 3)))
    edge = etkit.to_edge_transform_and_lower(ep, partitioner=[ToyPartitioner()])
    graph = edge.exported_program().graph
    (call,) = _delegate_calls(edge.exported_program())
    assert [str(n.target) for n in graph.nodes if n.op == "call_function"] == [
        "executorch_call_delegate", "<built-in function getitem>", "aten.relu.default"]
    assert [a.name for a in call.args[1:]] == ["x", "y"]
    lowered = getattr(edge.exported_program().graph_module, call.args[0].target)
    assert lowered.processed_bytes == b"ops=aten.add.Tensor,aten.mul.Tensor;inputs=x,y"


def test_cycle_creating_partition_is_refused(toy_plugin):
    class Chain(torch.nn.Module):
        def forward(self, x):
            a = x + 1.0 * x          # mul then add: delegated
            b = torch.relu(a)        # outside
            return b * a             # delegated, same tag -> a -> relu -> mul is a cycle
    ep = torch.export.export(Chain(), (torch.randn(4),))
    with pytest.raises(LoweringError, match="cycle"):
        etkit.to_edge_transform_and_lower(ep, partitioner=[ToyPartitioner()])


def test_one_partition_per_node_gives_one_delegate_per_op(toy_plugin):
    edge = etkit.to_edge_transform_and_lower(_export(), partitioner=[ToyPartitioner(one_partition_per_node=True)])
    ep = edge.exported_program()
    calls = _delegate_calls(ep)
    assert len(calls) == 3
    lowered = [getattr(ep.graph_module, c.args[0].target) for c in calls]
    payloads = [m.processed_bytes.decode() for m in lowered]
    assert payloads[0].startswith("ops=aten.add.Tensor;")
    assert payloads[1].startswith("ops=aten.mul.Tensor;")
    # the buffer used only by the mul partition moved into that partition
    assert "b_bias" in payloads[1]
    assert "b_bias" not in {n.name for n in ep.graph.nodes if n.op == "placeholder"}
    # every delegate output is read through getitem
    for c in calls:
        assert all(u.target is operator.getitem for u in c.users)


def test_report_lists_each_rejected_node_with_reason(toy_plugin):
    edge = etkit.to_edge_transform_and_lower(_export(), partitioner=[ToyPartitioner(one_partition_per_node=True)])
    (report,) = edge.partition_reports["forward"]
    assert report.delegated == {"aten.add.Tensor": 2, "aten.mul.Tensor": 1}
    assert [r.target for r in report.rejected] == ["aten.relu.default"]
    assert "only adds and multiplies" in report.format()


def test_delegate_is_written_to_the_program(toy_plugin):
    edge = etkit.to_edge_transform_and_lower(_export(), partitioner=[ToyPartitioner(one_partition_per_node=True)])
    contents = deserialize_pte(edge.to_executorch().buffer)
    plan = contents.program.executionPlan[0]
    assert [d.id.decode() if isinstance(d.id, bytes) else d.id for d in plan.delegates] == [TOY_ID] * 3
    assert contents.named_data == {"toy.key": b"toy-data"}
    assert any(b"ops=aten.mul.Tensor" in d for d in contents.delegate_data)


def test_lowering_to_an_unknown_backend_names_installed_ones():
    from etkit.plugins import BackendNotFoundError
    with pytest.raises(BackendNotFoundError, match="no installed etkit plugin provides backend 'ToyBackend'"):
        etkit.to_edge_transform_and_lower(_export(), partitioner=[ToyPartitioner()])


def test_duplicate_backend_id_is_an_error(toy_plugin):
    class Again:
        @hookimpl
        def etkit_register_backends(self, register):
            register(BackendSpec(backend_id=TOY_ID, backend_details="x:y"))
    toy_plugin.add_plugin(Again(), name="again")
    try:
        with pytest.raises(PluginError, match="registered twice"):
            toy_plugin.registry.specs()
    finally:
        toy_plugin.remove_plugin("again")


@pytest.mark.parametrize("stated", ["1.0", "3.0"])
def test_incompatible_plugin_api_is_refused_naming_both_versions(stated):
    class Other:
        @hookimpl
        def etkit_register_backends(self, register):
            register(BackendSpec(backend_id="OtherBackend", backend_details="x:y", plugin_api=stated, version="9.9"))
    manager = get_plugin_manager()
    manager.add_plugin(Other(), name="other")
    try:
        with pytest.raises(PluginError, match=rf"plugin API {stated[0]}\.0.*provides plugin API 2\.0"):
            manager.registry.specs()
    finally:
        manager.remove_plugin("other")


def test_misspelled_hook_fails_loudly():
    class Typo:
        @hookimpl
        def etkit_register_backend(self, register):  # missing "s"
            pass
    from pluggy import PluginValidationError
    with pytest.raises(PluginValidationError):
        get_plugin_manager().add_plugin(Typo(), name="typo")
    get_plugin_manager().remove_plugin("typo")


def test_etkit_backends_lists_the_toy_backend(toy_plugin, capsys):
    from etkit.cli import main
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert TOY_ID in out and "0.0.1" in out and "yes" in out


def test_lowered_program_signature_names_the_delegate_outputs(toy_plugin):
    class TwoOutputs(torch.nn.Module):
        def forward(self, x, y):
            a = x + y
            return a * y, torch.relu(a)
    ep = torch.export.export(TwoOutputs(), (torch.randn(2), torch.randn(2)))
    lowered = etkit.to_edge_transform_and_lower(ep, partitioner=[ToyPartitioner()]).exported_program()
    graph_outputs = [a.name for a in list(lowered.graph.nodes)[-1].args[0]]
    assert [s.arg.name for s in lowered.graph_signature.output_specs] == graph_outputs
    lowered.validate()


def test_tagging_a_user_input_is_refused_naming_the_node(toy_plugin):
    class TagsInputs(ToyPartitioner):
        def partition(self, ep):
            result = super().partition(ep)
            for node in ep.graph.nodes:
                if node.op == "placeholder":
                    node.meta["delegation_tag"] = "toy_0"
            return result
    class AddOnly(torch.nn.Module):
        def forward(self, x):
            return x + x
    ep = torch.export.export(AddOnly(), (torch.randn(2),))
    with pytest.raises(LoweringError, match="node x .*only operator calls and constant placeholders"):
        etkit.to_edge_transform_and_lower(ep, partitioner=[TagsInputs()])


def test_multi_method_program_stores_shared_weights_once():
    linear = torch.nn.Linear(64, 64)

    class A(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = linear

        def forward(self, x):
            return self.fc(x)

    class B(A):
        def forward(self, x):
            return torch.relu(self.fc(x))

    x = torch.randn(2, 64)
    programs = {"a": torch.export.export(A(), (x,)), "b": torch.export.export(B(), (x,))}
    contents = deserialize_pte(etkit.to_edge(programs).to_executorch().buffer)
    weight_bytes = 64 * 64 * 4
    assert sum(len(c) >= weight_bytes for c in contents.constant_data) == 1


class _KeepSomeLinears(ToyPartitioner):
    """Asks to keep ``aten.linear`` whole, but only for linears whose weight has 3 rows; delegates nothing
    and records the ops it was shown."""

    seen: list = []

    def ops_to_not_decompose(self, ep):
        return [torch.ops.aten.linear.default], lambda node: node.args[1].meta["val"].shape[0] == 3

    def partition(self, ep):
        type(self).seen = [n.target for n in ep.graph.nodes if n.op == "call_function"]
        return etkit.backend.PartitionResult(tagged_exported_program=ep, partition_tags={})


def test_node_filter_keeps_some_nodes_of_an_op_whole_and_decomposes_the_others():
    """ops_to_not_decompose's filter decides per node (seed "Partitioner API"): the partitioner sees the
    nodes it wants kept whole and the refused ones decomposed. A kept node it then does not delegate is
    decomposed after partitioning (no kernel runs ``aten.linear``), so the program still runs."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 5)).eval()
    x = torch.randn(2, 4)
    edge = etkit.to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[_KeepSomeLinears()])
    seen = _KeepSomeLinears.seen
    assert seen.count(torch.ops.aten.linear.default) == 1              # the [3, 4] weight: kept whole
    assert torch.ops.aten.addmm.default in seen                        # the [5, 3] weight: decomposed
    final = [n.target for n in edge.exported_program().graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.linear.default not in final                  # declined: decomposed afterwards
    torch.testing.assert_close(edge.exported_program().module()(x), model(x), atol=1e-6, rtol=1e-6)
    from etkit.runtime import Runtime
    (y,) = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward").execute([x])
    torch.testing.assert_close(y, model(x), atol=1e-5, rtol=1e-5)
