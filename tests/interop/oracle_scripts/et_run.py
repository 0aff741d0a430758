"""(Runs in the ExecuTorch oracle.) Run .pte files made by etkit in ExecuTorch 1.5.1's runtime.

    et_run.py DIR NAME [NAME ...]

For each NAME reads DIR/etkit_NAME.pte and DIR/NAME.inputs.pt (a list of tensors) and writes
DIR/etkit_NAME.executorch.pt: {"outputs": [...]} or, when ExecuTorch refuses the program,
{"error": "<type>: <message>"} so the test can say exactly what failed.
"""
import sys
from pathlib import Path

import torch


def main(directory: Path, names: list[str]) -> None:
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    for name in names:
        inputs = torch.load(directory / f"{name}.inputs.pt")
        try:
            method = runtime.load_program(directory / f"etkit_{name}.pte").load_method("forward")
            out = method.execute(list(inputs))
            result = {"outputs": list(out) if isinstance(out, (tuple, list)) else [out]}
        except Exception as exc:  # reported by the test, with ExecuTorch's message
            result = {"error": f"{type(exc).__name__}: {exc}"}
        torch.save(result, directory / f"etkit_{name}.executorch.pt")
        print(f"{name}: {'error' if 'error' in result else 'ran'}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
