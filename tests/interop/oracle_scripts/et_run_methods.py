"""(Runs in the ExecuTorch oracle.) Run every method of one .pte in ExecuTorch 1.5.1's runtime.

    et_run_methods.py PTE INPUTS OUT

INPUTS is a torch.save'd ``{method name: [inputs]}`` (``[]`` for a constant method). Writes OUT:
``{"method_names": [...], "outputs": {name: [...]}, "errors": {name: "<type>: <message>"}}``, so the
test can say exactly what ExecuTorch refused.
"""
import sys

import torch


def main(pte: str, inputs_path: str, out_path: str) -> None:
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    result = {"method_names": sorted(program.method_names), "outputs": {}, "errors": {}}
    for name, inputs in torch.load(inputs_path).items():
        try:
            out = program.load_method(name).execute(list(inputs))
            result["outputs"][name] = list(out) if isinstance(out, (tuple, list)) else [out]
        except Exception as exc:  # reported by the test, with ExecuTorch's message
            result["errors"][name] = f"{type(exc).__name__}: {exc}"
    torch.save(result, out_path)


if __name__ == "__main__":
    main(*sys.argv[1:4])
