"""A program with a mutable buffer, made by etkit, runs in ExecuTorch 1.5.1's runtime: the initial
value comes from the mutable data segment and the output matches eager and etkit's runtime."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

import etkit
from etkit.runtime import Runtime

from ..e2e.test_mutable_buffers import RunningMean

pytestmark = pytest.mark.oracle

SCRIPTS = Path(__file__).parent / "oracle_scripts"


def test_executorch_runs_an_etkit_program_with_a_mutable_buffer(et_oracle, tmp_path):
    torch.manual_seed(0)
    model = RunningMean().eval()
    x = torch.randn(4)
    etkit.to_edge(torch.export.export(copy.deepcopy(model), (x,))).to_executorch().write_to_file(
        str(tmp_path / "etkit_running_mean.pte"))
    torch.save([x], tmp_path / "running_mean.inputs.pt")
    et_oracle(SCRIPTS / "et_run.py", tmp_path, "running_mean")
    result = torch.load(tmp_path / "etkit_running_mean.executorch.pt")
    assert "error" not in result, result.get("error")
    with torch.no_grad():
        want = copy.deepcopy(model)(x)
    (ours,) = Runtime.get().load_program(str(tmp_path / "etkit_running_mean.pte")).load_method("forward").execute([x])
    torch.testing.assert_close(result["outputs"][0], want, atol=1e-6, rtol=1e-6)  # fp32, 4x4 linear
    torch.testing.assert_close(ours, result["outputs"][0], atol=1e-6, rtol=1e-6)
