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
        if overlaps(a, b):
            assert (a.mem_offset + a.nbytes <= b.mem_offset or b.mem_offset + b.nbytes <= a.mem_offset), (
                f"{a.name} {a.lifetime} @{a.mem_offset}+{a.nbytes} overlaps {b.name} {b.lifetime} "
                f"@{b.mem_offset}+{b.nbytes}")
    for a in allocs:
        assert a.mem_offset % 16 == 0
        assert a.mem_offset + a.nbytes <= plan.buffer_sizes[1]


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
