"""(Runs in the ExecuTorch oracle.) Lower the interop programs with ExecuTorch 1.5.1 and run them in
ExecuTorch's own runtime.

    et_lower.py OUTDIR NAME [NAME ...]

For each NAME of tests/interop/models.py, writes to OUTDIR:
    et_NAME.pte       ExecuTorch's program (XnnpackPartitioner when the program is delegated,
                      plain ``to_edge`` otherwise)
    NAME.io.pt        {"inputs": [...], "reference": [...] (eager, or the PT2E model run in eager),
                       "executorch": [...] (ExecuTorch's runtime on et_NAME.pte),
                       "lower_seconds": to_edge[_transform_and_lower] + to_executorch}
    NAME.pt2          quantized programs only: the converted PT2E ExportedProgram (ExecuTorch's
                      XNNPACKQuantizer, per-channel symmetric), for etkit to lower the same graph
"""
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import models  # noqa: E402  (tests/interop/models.py: torch only)


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def main(outdir: Path, names: list[str]) -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge, to_edge_transform_and_lower
    from executorch.runtime import Runtime

    outdir.mkdir(parents=True, exist_ok=True)
    for name in names:
        program = models.build(name)
        if program.quantized:
            from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
                XNNPACKQuantizer, get_symmetric_quantization_config)
            quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
            ep = models.quantize(program, quantizer)
            torch.export.save(ep, outdir / f"{name}.pt2")
            module = ep.module()
        else:
            ep = torch.export.export(program.model, program.inputs)
            module = program.model
        with torch.no_grad():
            reference = as_list(module(*program.inputs))
        start = time.perf_counter()
        if program.delegate:
            edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
        else:
            edge = to_edge(ep)
        buffer = edge.to_executorch().buffer
        lower_seconds = time.perf_counter() - start
        pte = outdir / f"et_{name}.pte"
        pte.write_bytes(buffer)
        method = Runtime.get().load_program(pte).load_method("forward")
        outputs = as_list(method.execute(list(program.inputs)))
        torch.save({"inputs": list(program.inputs), "reference": reference, "executorch": outputs,
                    "lower_seconds": lower_seconds}, outdir / f"{name}.io.pt")
        print(f"{name}: {len(buffer)} bytes, lowered in {lower_seconds:.1f} s", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
