"""(Runs in the ExecuTorch oracle.) .pte + .ptd programs both ways with ExecuTorch 1.5.1.

    et_ptd.py DIR

1. Runs etkit's programs in ExecuTorch's runtime with their data files, each on DIR/ptd.inputs.pt:
   DIR/etkit_net.pte + etkit_net.ptd (portable kernels, constants EXTERNAL) and, when present,
   DIR/etkit_mlp_xnnpack.pte + etkit_mlp_xnnpack.ptd (XNNPACK's named data in the data file). Writes
   {name: {"outputs": [...]} or {"error": ...}} to DIR/etkit_ptd.executorch.pt.
2. Exports the same Net (weights from DIR/net.state.pt) with ExecuTorch's
   ExecutorchBackendConfig(external_constants=True) and writes DIR/et_net.pte and DIR/et_net.ptd.
"""
import sys
from pathlib import Path

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.fc = torch.nn.Linear(8, 5)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 5))

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return self.fc(y) * self.scale


def main(directory: Path) -> None:
    from executorch.exir import ExecutorchBackendConfig, to_edge
    from executorch.runtime import Runtime

    inputs = torch.load(directory / "ptd.inputs.pt")
    results = {}
    for name in ("etkit_net", "etkit_mlp_xnnpack"):
        pte, ptd = directory / f"{name}.pte", directory / f"{name}.ptd"
        if not pte.exists():
            continue
        try:
            method = Runtime.get().load_program(pte, data_path=ptd).load_method("forward")
            results[name] = {"outputs": list(method.execute([inputs[name]]))}
        except Exception as exc:  # reported by the test, with ExecuTorch's message
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    torch.save(results, directory / "etkit_ptd.executorch.pt")

    model = Net().eval()
    model.load_state_dict(torch.load(directory / "net.state.pt"))
    program = to_edge(torch.export.export(model, (inputs["etkit_net"],))).to_executorch(
        ExecutorchBackendConfig(external_constants=True))
    (directory / "et_net.pte").write_bytes(program.buffer)
    out = directory / "et_files"
    out.mkdir(exist_ok=True)
    program.write_tensor_data_to_file(str(out))
    [ptd] = list(out.glob("*.ptd"))
    ptd.rename(directory / "et_net.ptd")
    print("ptd: done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
