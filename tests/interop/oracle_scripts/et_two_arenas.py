"""(Runs in the ExecuTorch oracle.) Two planned arenas with ExecuTorch 1.5.1's memory-planning hook.

    et_two_arenas.py DIR

1. Runs DIR/etkit_two_arenas.pte (etkit's program: add outputs in arena 2) on DIR/two_arenas.inputs.pt in
   ExecuTorch's runtime and writes {"outputs": [...], "buffer_sizes": [...]} (or {"error": ...}) to
   DIR/etkit_two_arenas.executorch.pt; buffer_sizes are the plan's non_const_buffer_sizes after entry 0 (which
   the format reserves) as ExecuTorch's deserializer reads them (its Python MethodMeta does not list them).
2. Lowers the same model with ExecuTorch, placing the outputs of add in arena 2 as the seed page "Memory
   Planning" shows (a MemoryPlanningPass subclass setting node.meta["spec"].mem_id), and writes
   DIR/et_two_arenas.pte.
"""
import sys
from pathlib import Path

import torch


class AddMul(torch.nn.Module):
    def forward(self, x, y):
        a = x * y
        b = a + x
        return torch.relu(b * 2.0) + y


def main(directory: Path) -> None:
    from executorch.exir import ExecutorchBackendConfig, to_edge
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.runtime import Runtime

    inputs = torch.load(directory / "two_arenas.inputs.pt")
    try:
        data = (directory / "etkit_two_arenas.pte").read_bytes()
        pte = deserialize_pte_binary(data)
        plan = getattr(pte, "program", pte).execution_plan[0]
        sizes = list(plan.non_const_buffer_sizes)[1:]
        method = Runtime.get().load_program(data).load_method("forward")
        out = method.execute(list(inputs))
        result = {"outputs": list(out), "buffer_sizes": sizes}
    except Exception as exc:  # reported by the test, with ExecuTorch's message
        result = {"error": f"{type(exc).__name__}: {exc}"}
    torch.save(result, directory / "etkit_two_arenas.executorch.pt")

    class AddsInArenaTwo(MemoryPlanningPass):
        def run(self, graph_module, graph_signature=None):
            for node in graph_module.graph.nodes:
                if node.op == "call_function" and node.target == torch.ops.aten.add.out:
                    node.meta["spec"].mem_id = 2
            return super().run(graph_module, graph_signature)

    program = to_edge(torch.export.export(AddMul(), tuple(inputs))).to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=AddsInArenaTwo()))
    (directory / "et_two_arenas.pte").write_bytes(program.buffer)
    print("two arenas: done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
