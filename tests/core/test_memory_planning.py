"""Memory planning: simultaneously live tensors never share bytes; greedy shares what it can."""
import itertools

import pytest
import torch
import torchvision

import etkit
from etkit.passes.memory_planning import MemoryPlanningPass, TensorAllocation, overlaps


def _check_no_overlap(plan):
    allocs = plan.allocations
    assert allocs, "nothing was planned"
    for a, b in itertools.combinations(allocs, 2):
        if overlaps(a, b) and a.mem_id == b.mem_id:
            assert (a.mem_offset + a.nbytes <= b.mem_offset or b.mem_offset + b.nbytes <= a.mem_offset), (
                f"{a.name} {a.lifetime} @{a.mem_offset}+{a.nbytes} overlaps {b.name} {b.lifetime} "
                f"@{b.mem_offset}+{b.nbytes}")
    for a in allocs:
        assert a.mem_offset % 16 == 0
        assert a.mem_offset + a.nbytes <= plan.buffer_sizes[a.mem_id]


@pytest.fixture(scope="module")
def resnet_edge():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    return etkit.to_edge(torch.export.export(model, (torch.randn(1, 3, 64, 64),)))


@pytest.mark.parametrize("algo", ["greedy", "naive"])
def test_live_tensors_never_overlap(resnet_edge, algo):
    program = resnet_edge.to_executorch(etkit.ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(algo)))
    _check_no_overlap(program.memory_plans["forward"])


def test_greedy_reuses_memory(resnet_edge):
    greedy = resnet_edge.to_executorch().memory_plans["forward"]
    naive = resnet_edge.to_executorch(
        etkit.ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass("naive"))).memory_plans["forward"]
    # lower bound: the most bytes live at any one instruction
    points = {a.lifetime[0] for a in greedy.allocations}
    peak = max(sum(a.nbytes for a in greedy.allocations if a.lifetime[0] <= t <= a.lifetime[1]) for t in points)
    assert greedy.total_bytes < naive.total_bytes / 2, (greedy.total_bytes, naive.total_bytes)
    assert greedy.total_bytes <= 1.25 * peak, (greedy.total_bytes, peak)


def test_greedy_places_disjoint_lifetimes_at_the_same_offset():
    a = TensorAllocation("a", 100, (0, 1))
    b = TensorAllocation("b", 100, (2, 3))
    c = TensorAllocation("c", 50, (1, 2))
    plan = MemoryPlanningPass("greedy").plan([a, b, c])
    assert a.mem_offset == b.mem_offset == 0
    assert c.mem_offset == 112  # after a/b, 16-byte aligned
    assert plan.buffer_sizes == [0, 176]


def test_unknown_algorithm_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match="greedy"):
        MemoryPlanningPass("best")


def test_alloc_graph_input_and_output_false_leave_those_tensors_unplanned():
    from etkit.serialize import deserialize_pte

    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x):
            return torch.relu(self.fc(x))

    edge = etkit.to_edge(torch.export.export(Mlp(), (torch.randn(2, 4),)))
    config = etkit.ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=False))
    plan = deserialize_pte(edge.to_executorch(config).buffer).program.executionPlan[0]
    (inp,), (out,) = plan.inputs, plan.outputs
    assert plan.values[inp].val.allocationInfo is None
    assert plan.values[out].val.allocationInfo is None
    planned = [v.val for v in plan.values if v.valType == 5 and v.val.allocationInfo is not None]
    assert planned, "intermediate tensors must still be planned"


def test_emitted_program_never_shares_bytes_between_tensors_live_at_once(resnet_edge):
    """Recompute lifetimes from the written instructions alone (not the planner's input) and check them."""
    from etkit.serialize import deserialize_pte

    plan = deserialize_pte(resnet_edge.to_executorch().buffer).program.executionPlan[0]
    instructions = plan.chains[0].instructions
    end = len(instructions)
    first, last = {}, {}
    for i in plan.inputs:
        first[i], last[i] = -1, -1
    for k, ins in enumerate(instructions):
        for v in ins.instrArgs.args:
            first.setdefault(v, k)
            last[v] = k
    for o in plan.outputs:
        last[o] = end
    spans = []
    for v, (start, stop) in ((v, (first[v], last[v])) for v in first):
        val = plan.values[v]
        if val.valType != 5 or val.val.allocationInfo is None:  # 5 = Tensor
            continue
        nbytes = 4 * int(torch.tensor(list(val.val.sizes)).prod()) if len(val.val.sizes) else 4
        offset = val.val.allocationInfo.memoryOffsetLow
        spans.append((v, start, stop, offset, offset + nbytes))
    assert len(spans) > 50
    for (a, s1, e1, lo1, hi1), (b, s2, e2, lo2, hi2) in itertools.combinations(spans, 2):
        if s1 <= e2 and s2 <= e1:
            assert hi1 <= lo2 or hi2 <= lo1, f"values {a} and {b} are live together but share bytes"


class SmallInArenaOne(MemoryPlanningPass):
    """The seed page's "Custom Memory Plans" hook: tensors up to 64 KiB in arena 1 (say, SRAM), the rest in 2."""

    def run(self, graph_module, graph_signature=None):
        for node in graph_module.graph.nodes:
            specs = node.meta.get("spec")
            for spec in specs if isinstance(specs, tuple) else [specs]:
                if spec is not None:
                    spec.mem_id = 1 if spec.nbytes <= 64 * 1024 else 2
        return super().run(graph_module, graph_signature)


def test_custom_pass_places_tensors_in_two_arenas(resnet_edge):
    """Each arena is planned on its own (no two live tensors overlap within one), every spec gets the mem_id
    and mem_offset it was planned at, the runtime reports both arenas (MethodMeta), and the program's output
    equals the one-arena program's exactly (the same kernels on the same inputs)."""
    from etkit.runtime import Runtime

    program = resnet_edge.to_executorch(etkit.ExecutorchBackendConfig(memory_planning_pass=SmallInArenaOne()))
    plan = program.memory_plans["forward"]
    _check_no_overlap(plan)
    assert len(plan.buffer_sizes) == 3 and plan.buffer_sizes[1] > 0 and plan.buffer_sizes[2] > 0
    assert all((a.mem_id == 1) == (a.nbytes <= 64 * 1024) for a in plan.allocations)
    for a in plan.allocations:
        spec = a.node.meta["spec"]
        spec = spec[a.output_index] if isinstance(spec, tuple) else spec
        assert (spec.mem_id, spec.mem_offset) == (a.mem_id, a.mem_offset)
    loaded = Runtime.get().load_program(program.buffer)
    assert list(loaded.metadata("forward").memory_planned_buffer_sizes) == plan.buffer_sizes[1:]
    x = torch.randn(1, 3, 64, 64)
    one_arena = Runtime.get().load_program(resnet_edge.to_executorch().buffer).load_method("forward").execute([x])
    torch.testing.assert_close(loaded.load_method("forward").execute([x])[0], one_arena[0], atol=0, rtol=0)


def test_a_mem_id_that_is_not_a_buffer_is_refused():
    a = TensorAllocation("a", 100, (0, 1), mem_id=0)
    with pytest.raises(ValueError, match=r"tensor a: mem_id 0 is not a planned buffer id \(an int >= 1"):
        MemoryPlanningPass().plan([a])
    b = TensorAllocation("b", 100, (0, 1), mem_id=3)
    assert MemoryPlanningPass().plan([b]).buffer_sizes == [0, 0, 0, 112]


def test_the_docs_two_arena_example_runs(capsys):
    """docs/runtime.md "Several planned arenas": its example, as written, and the sizes it states."""
    from tests.docs_examples import run_docs_example

    source = run_docs_example("runtime.md", "### Several planned arenas")
    printed = capsys.readouterr().out.strip()
    assert printed == "(1024, 8192)" and f"# {printed}: arena 1, arena 2" in source
