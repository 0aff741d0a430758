"""Two planned arenas (seed page "Memory Planning", "Custom Memory Plans"), both ways with ExecuTorch 1.5.1.

A MemoryPlanningPass subclass sets ``node.meta["spec"].mem_id = 2`` on the adds, as the seed page's example
does; the program then has two planned buffers. ExecuTorch's runtime runs etkit's program and reports the
same buffer sizes as etkit's MethodMeta; etkit runs ExecuTorch's program made with ExecuTorch's own pass.
Outputs are compared with eager (float32 elementwise ops: equal within 1e-6).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import etkit
from etkit.passes.memory_planning import MemoryPlanningPass
from etkit.runtime import Runtime

pytestmark = pytest.mark.oracle

SCRIPTS = Path(__file__).parent / "oracle_scripts"


class AddMul(torch.nn.Module):
    def forward(self, x, y):
        a = x * y
        b = a + x
        return torch.relu(b * 2.0) + y


class AddsInArenaTwo(MemoryPlanningPass):
    def run(self, graph_module, graph_signature=None):
        for node in graph_module.graph.nodes:
            if node.op == "call_function" and node.target == torch.ops.aten.add.Tensor:
                node.meta["spec"].mem_id = 2
        return super().run(graph_module, graph_signature)


def test_two_arena_programs_run_both_ways(et_oracle, tmp_path):
    torch.manual_seed(0)
    inputs = [torch.randn(4, 8), torch.randn(4, 8)]
    with torch.no_grad():
        want = AddMul()(*inputs)
    program = etkit.to_edge(torch.export.export(AddMul(), tuple(inputs))).to_executorch(
        etkit.ExecutorchBackendConfig(memory_planning_pass=AddsInArenaTwo()))
    program.write_to_file(str(tmp_path / "etkit_two_arenas.pte"))
    torch.save(inputs, tmp_path / "two_arenas.inputs.pt")
    ours = Runtime.get().load_program(tmp_path / "etkit_two_arenas.pte")
    sizes = list(ours.metadata("forward").memory_planned_buffer_sizes)
    # MethodMeta lists buffers 1.. (buffer 0 is reserved): arena 1 the rest, arena 2 the adds' outputs (4x8
    # float32 each; the two are not live at once, so they share 128 bytes)
    assert len(sizes) == 2 and sizes[0] > 0 and sizes[1] == 4 * 8 * 4
    torch.testing.assert_close(ours.load_method("forward").execute(inputs)[0], want, atol=1e-6, rtol=1e-6)

    et_oracle(SCRIPTS / "et_two_arenas.py", tmp_path)
    result = torch.load(tmp_path / "etkit_two_arenas.executorch.pt")
    assert "error" not in result, result.get("error")
    assert result["buffer_sizes"] == sizes
    torch.testing.assert_close(result["outputs"][0], want, atol=1e-6, rtol=1e-6)

    theirs = Runtime.get().load_program(tmp_path / "et_two_arenas.pte")
    their_sizes = list(theirs.metadata("forward").memory_planned_buffer_sizes)
    assert len(their_sizes) == 2 and their_sizes[1] > 0
    torch.testing.assert_close(theirs.load_method("forward").execute(inputs)[0], want, atol=1e-6, rtol=1e-6)
