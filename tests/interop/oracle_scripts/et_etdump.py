"""(Runs in the ExecuTorch oracle.) ETDumps both ways with ExecuTorch 1.5.1's runtime and Inspector.

    et_etdump.py DIR

1. Reads DIR/etkit.etdp (written by etkit's runtime) with ExecuTorch's Inspector and writes its view to
   DIR/et_view_of_etkit.json; then with etkit's ETRecord DIR/etkit.etrecord too (parse_etrecord reads it),
   to DIR/et_view_of_etkit_with_etrecord.json, and the reference outputs parse_etrecord finds in it to
   DIR/et_reference_outputs_of_etkit.pt.
2. Lowers a small model (a conv and a linear on XNNPACK, a sum on portable kernels) with ExecuTorch, runs
   it twice in ExecuTorch's runtime with an ETDump and a debug buffer (intermediate outputs), writes
   DIR/et.etdp, DIR/et.bin, its ETRecord DIR/et.etrecord, the inputs DIR/et_inputs.pt, and ExecuTorch's
   Inspector's view of that dump and record to DIR/et_view_of_et.json.
A view is {"blocks": [{"name", "events": [{"name", "raw", "is_delegated_op", "op_types",
"delegate_backend_name"}], "run_output": [...]}]}
with run outputs as nested lists.
"""
import json
import sys
from pathlib import Path

import torch


def view(inspector) -> dict:
    blocks = []
    for block in inspector.event_blocks:
        events = [{"name": e.name, "raw": list(e.perf_data.raw) if e.perf_data is not None else None,
                   "is_delegated_op": bool(e.is_delegated_op), "op_types": [str(t) for t in (e.op_types or [])],
                   "delegate_backend_name": e.delegate_backend_name} for e in block.events]
        outputs = [o.tolist() if isinstance(o, torch.Tensor) else o for o in (block.run_output or [])]
        blocks.append({"name": block.name, "events": events, "run_output": outputs})
    return {"blocks": blocks}


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x, y):
        return self.conv(x).relu(), self.linear(y).sigmoid(), y.sum()


def main(directory: Path) -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools import Inspector
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    if (directory / "etkit.etdp").exists():
        inspector = Inspector(etdump_path=str(directory / "etkit.etdp"))
        (directory / "et_view_of_etkit.json").write_text(json.dumps(view(inspector)))
        inspector = Inspector(etdump_path=str(directory / "etkit.etdp"), etrecord=str(directory / "etkit.etrecord"))
        (directory / "et_view_of_etkit_with_etrecord.json").write_text(json.dumps(view(inspector)))
        from executorch.devtools.etrecord import parse_etrecord
        torch.save(parse_etrecord(str(directory / "etkit.etrecord"))._reference_outputs,
                   directory / "et_reference_outputs_of_etkit.pt")

    torch.manual_seed(1)
    inputs = (torch.randn(1, 3, 8, 8), torch.randn(2, 8))
    ep = torch.export.export(Small().eval(), inputs)
    program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()],
                                          generate_etrecord=True).to_executorch()
    (directory / "et.pte").write_bytes(program.buffer)
    program.get_etrecord().save(str(directory / "et.etrecord"))
    loaded = Runtime.get().load_program(str(directory / "et.pte"), enable_etdump=True, debug_buffer_size=1 << 20)
    method = loaded.load_method("forward")
    for _ in range(2):
        method.execute(list(inputs))
    loaded.write_etdump_result_to_file(str(directory / "et.etdp"), str(directory / "et.bin"))
    torch.save(list(inputs), directory / "et_inputs.pt")
    inspector = Inspector(etdump_path=str(directory / "et.etdp"), debug_buffer_path=str(directory / "et.bin"),
                          etrecord=str(directory / "et.etrecord"))
    (directory / "et_view_of_et.json").write_text(json.dumps(view(inspector)))
    print("etdump views written", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
