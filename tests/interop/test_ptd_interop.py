"""`.pte` + `.ptd` programs both ways with ExecuTorch 1.5.1 (seed page "Separating the program and data").

ExecuTorch's runtime runs etkit's program with its data file (portable kernels with EXTERNAL constants, and,
when the XNNPACK plugin is installed, XNNPACK's weights as named data in the file); etkit runs ExecuTorch's
program and data file made with ExecuTorch's ExecutorchBackendConfig(external_constants=True). Outputs are
compared with eager (float32: within 1e-5 on portable kernels, 1e-4 on XNNPACK).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

import etkit
from etkit.runtime import Runtime
from etkit.serialize.ptd import deserialize_ptd
from tests.runtime.test_ptd import PtdNet as Net

pytestmark = pytest.mark.oracle

SCRIPTS = Path(__file__).parent / "oracle_scripts"


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _write(program, directory: Path, name: str) -> None:
    program.write_to_file(str(directory / f"{name}.pte"))
    [ptd] = program.write_tensor_data_to_file(directory)
    Path(ptd).rename(directory / f"{name}.ptd")


def test_pte_and_ptd_run_both_ways(et_oracle, tmp_path):
    torch.manual_seed(0)
    net, mlp = Net().eval(), Mlp().eval()
    inputs = {"etkit_net": torch.randn(1, 3, 10, 10), "etkit_mlp_xnnpack": torch.randn(4, 32)}
    with torch.no_grad():
        want = {"etkit_net": net(inputs["etkit_net"]), "etkit_mlp_xnnpack": mlp(inputs["etkit_mlp_xnnpack"])}
    config = etkit.ExecutorchBackendConfig(external_constants=True)
    _write(etkit.to_edge(torch.export.export(net, (inputs["etkit_net"],))).to_executorch(config), tmp_path,
           "etkit_net")
    has_xnnpack = importlib.util.find_spec("etkit_xnnpack") is not None
    if has_xnnpack:
        from etkit_xnnpack import XnnpackPartitioner

        lowered = etkit.to_edge_transform_and_lower(torch.export.export(mlp, (inputs["etkit_mlp_xnnpack"],)),
                                                    partitioner=[XnnpackPartitioner()])
        _write(lowered.to_executorch(config), tmp_path, "etkit_mlp_xnnpack")
    torch.save(inputs, tmp_path / "ptd.inputs.pt")
    torch.save(net.state_dict(), tmp_path / "net.state.pt")

    et_oracle(SCRIPTS / "et_ptd.py", tmp_path)
    results = torch.load(tmp_path / "etkit_ptd.executorch.pt")
    for name in (["etkit_net", "etkit_mlp_xnnpack"] if has_xnnpack else ["etkit_net"]):
        assert "error" not in results[name], f"{name}: {results[name].get('error')}"
        tolerance = 1e-5 if name == "etkit_net" else 1e-4
        torch.testing.assert_close(results[name]["outputs"][0], want[name], atol=tolerance, rtol=tolerance)

    # ExecuTorch's data file holds the same keys and bytes etkit writes for the same model
    theirs = deserialize_ptd((tmp_path / "et_net.ptd").read_bytes())
    ours = deserialize_ptd((tmp_path / "etkit_net.ptd").read_bytes())
    assert set(theirs) == set(ours) == {"conv.weight", "conv.bias", "fc.weight", "fc.bias", "scale"}
    assert all(theirs[k].data == ours[k].data and theirs[k].layout == ours[k].layout for k in ours)
    method = Runtime.get().load_program(tmp_path / "et_net.pte", data_path=tmp_path / "et_net.ptd").load_method(
        "forward")
    torch.testing.assert_close(method.execute([inputs["etkit_net"]])[0], want["etkit_net"], atol=1e-5, rtol=1e-5)
