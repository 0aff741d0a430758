"""(Runs in the ExecuTorch oracle.) Lower saved ExportedPrograms with ExecuTorch 1.5.1's XNNPACK partitioner.

    et_lower.py DIR NAME [NAME ...]

Reads DIR/NAME.pt2, writes DIR/et_NAME.pte and DIR/et_NAME.json = {"lower_s": to_edge_transform_and_lower
seconds, "to_executorch_s": ..., "delegates": number of XNNPACK delegate calls}.
"""
import json
import sys
import time
from pathlib import Path

import torch


def main(directory: Path, names: list[str]) -> None:
    from torch.ao.quantization.fx._decomposed import quantized_decomposed_lib  # noqa: F401

    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    for name in names:
        ep = torch.export.load(directory / f"{name}.pt2")
        start = time.perf_counter()
        edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
        lowered = time.perf_counter()
        program = edge.to_executorch()
        buffer = program.buffer
        done = time.perf_counter()
        (directory / f"et_{name}.pte").write_bytes(buffer)
        delegates = sum(1 for n in edge.exported_program().graph.nodes
                        if n.op == "call_function" and "executorch_call_delegate" in str(n.target))
        (directory / f"et_{name}.json").write_text(json.dumps(
            {"lower_s": lowered - start, "to_executorch_s": done - lowered, "delegates": delegates}))
        print(f"{name}: {len(buffer)} bytes, {lowered - start:.1f} s + {done - lowered:.1f} s", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
