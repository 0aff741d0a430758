"""Interop with ExecuTorch 1.5.1 (the oracle): its Core ML lowering and ours produce the same payload
layout and the same ML Program, and its runtime loads etkit's fallback program and runs the twin."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import coremltools as ct
from coreml_helpers import delegates, lower
from etkit import ExecutorchBackendConfig
from etkit_coreml import CoreMLBackend, CoreMLPartitioner
from etkit_coreml.payload import inmemoryfs

from tests.interop.oracle import run_in_oracle

pytestmark = pytest.mark.oracle

ORACLE_SCRIPT = Path(__file__).parent / "oracle_scripts" / "et_coreml.py"


class SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return self.fc(y.mean(dim=(2, 3)))


@pytest.fixture(scope="module")
def interop(tmp_path_factory):
    xnnpack = pytest.importorskip("etkit_xnnpack")
    directory = tmp_path_factory.mktemp("coreml_interop")
    torch.manual_seed(0)
    model = SmallCnn().eval()
    inputs = (torch.randn(1, 3, 16, 16),)
    ep = torch.export.export(model, inputs)
    torch.export.save(ep, directory / "model.pt2")
    torch.save(list(inputs), directory / "inputs.pt")
    specs = CoreMLBackend.generate_compile_specs(compute_precision=ct.precision.FLOAT32)
    ours = lower(model, inputs, [CoreMLPartitioner(compile_specs=specs)])
    fallback = lower(model, inputs, [CoreMLPartitioner(compile_specs=specs), xnnpack.XnnpackPartitioner()])
    fallback.to_executorch(ExecutorchBackendConfig(delegate_fallback=True)).write_to_file(directory / "etkit_fallback.pte")
    run_in_oracle(ORACLE_SCRIPT, directory, timeout=600)
    (delegate,) = delegates(ours)
    return {"model": model, "inputs": inputs, "ours": inmemoryfs.read_files(delegate.processed_bytes),
            "theirs": inmemoryfs.read_files((directory / "et_payload.bin").read_bytes()),
            "et": torch.load(directory / "et_result.pt")}


def test_payload_holds_the_same_files_as_executorchs(interop):
    ours, theirs = interop["ours"], interop["theirs"]
    assert sorted(ours) == sorted(theirs)
    import json
    a, b = json.loads(ours["metadata.json"]), json.loads(theirs["metadata.json"])
    assert sorted(a) == sorted(b) == ["identifier", "inputNames", "outputNames"]
    assert len(a["inputNames"]) == len(b["inputNames"]) == 1 and len(a["outputNames"]) == len(b["outputNames"]) == 1


def test_ml_program_matches_executorchs(interop):
    from coremltools.proto import Model_pb2

    from coreml_helpers import op_counts

    specs = []
    for files in (interop["ours"], interop["theirs"]):
        spec = Model_pb2.Model()
        spec.ParseFromString(files["model.mlpackage/Data/com.apple.CoreML/model.mlmodel"])
        specs.append(spec)
    ours, theirs = specs
    assert ours.specificationVersion == theirs.specificationVersion
    assert op_counts(ours) == op_counts(theirs)
    weights = "model.mlpackage/Data/com.apple.CoreML/weights/weight.bin"
    # same weights, stored the same way (fp32 compute precision: the model's own values)
    assert interop["ours"][weights] == interop["theirs"][weights]


def test_executorch_runs_the_fallback_twin_of_an_etkit_program(interop):
    et = interop["et"]
    assert et["methods"] == ["forward", "forward#fallback"]
    assert et["forward_error"] is not None  # ExecuTorch's runtime here has no Core ML backend either
    with torch.no_grad():
        expected = interop["model"](*interop["inputs"])
    (actual,) = et["fallback_outputs"]
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)
