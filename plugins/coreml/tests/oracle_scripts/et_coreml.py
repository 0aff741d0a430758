"""(Runs in the ExecuTorch oracle.) ExecuTorch 1.5.1's side of the Core ML interop test.

    et_coreml.py DIR

1. Lowers DIR/model.pt2 with ExecuTorch's own CoreMLPartitioner (fp32 compute precision) and writes the
   delegate payload to DIR/et_payload.bin.
2. Loads etkit's DIR/etkit_fallback.pte in ExecuTorch's runtime: lists its methods, tries "forward"
   (needs Core ML) and runs "forward#fallback" on DIR/inputs.pt; writes DIR/et_result.pt with
   {"methods", "forward_error", "fallback_outputs"}.
"""
import sys
from pathlib import Path

import torch


def lower_with_executorch(directory: Path) -> None:
    import coremltools as ct
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    from executorch.exir import to_edge_transform_and_lower

    ep = torch.export.load(directory / "model.pt2")
    specs = CoreMLBackend.generate_compile_specs(compute_precision=ct.precision.FLOAT32)
    manager = to_edge_transform_and_lower(ep, partitioner=[CoreMLPartitioner(compile_specs=specs)])
    program = manager.to_executorch().executorch_program
    (delegate,) = program.execution_plan[0].delegates
    data = program.backend_delegate_data
    payload = data[delegate.processed.index].data if delegate.processed.location.name == "INLINE" else None
    if payload is None:
        raise SystemExit("ExecuTorch stored the Core ML payload in a segment; this script reads inline data only")
    (directory / "et_payload.bin").write_bytes(bytes(payload))


def run_etkit_program(directory: Path) -> None:
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(directory / "etkit_fallback.pte")
    result = {"methods": sorted(program.method_names)}
    try:
        program.load_method("forward")
        result["forward_error"] = None
    except Exception as exc:  # expected: no Core ML backend in this runtime
        result["forward_error"] = f"{type(exc).__name__}: {exc}"
    inputs = torch.load(directory / "inputs.pt")
    out = program.load_method("forward#fallback").execute(list(inputs))
    result["fallback_outputs"] = list(out)
    torch.save(result, directory / "et_result.pt")


if __name__ == "__main__":
    lower_with_executorch(Path(sys.argv[1]))
    run_etkit_program(Path(sys.argv[1]))
