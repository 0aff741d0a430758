"""CoreMLPartitioner decisions and reports, compile specs, enumerated shapes."""
from __future__ import annotations

import json

import pytest
import torch

from coreml_helpers import delegates, lower
from etkit_coreml import (COMPILE_SPEC_KEYS, CompileSpecError, CoreMLBackend, CoreMLPartitioner,
                          EnumeratedShapesError, UnsupportedByCoreMLError, generate_enumerated_shapes_compile_spec,
                          mlmodel_from_payload)
from etkit_coreml import compile_spec as specs

ct = pytest.importorskip("coremltools")


class _WithUnsupported(torch.nn.Module):
    """``acosh`` is in coremltools' registry but refused (Core ML loses precision); ``add`` with alpha=2
    has no conversion; the linear goes to Core ML."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.acosh(x.abs() + 1.5)
        return torch.add(self.fc(y), y, alpha=2)


def test_rejected_nodes_are_reported_with_reasons_and_run_outside():
    p = CoreMLPartitioner()
    manager = lower(_WithUnsupported().eval(), (torch.randn(2, 8),), [p])
    report = p.report()
    reasons = {r.target: r.reason for r in report.rejected}
    assert "acosh" in reasons["aten.acosh.default"]
    assert "alpha" in reasons["aten.add.Tensor"]
    assert report.num_partitions >= 1 and report.delegated
    assert len(delegates(manager)) == report.num_partitions


def test_lower_full_graph_names_every_unsupported_node():
    with pytest.raises(UnsupportedByCoreMLError) as info:
        lower(_WithUnsupported().eval(), (torch.randn(2, 8),), [CoreMLPartitioner(lower_full_graph=True)])
    message = str(info.value)
    assert "aten.acosh.default" in message and "aten.add.Tensor" in message and "2 node(s)" in message


def test_skip_ops_for_coreml_delegation_keeps_the_op_out():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    p = CoreMLPartitioner(skip_ops_for_coreml_delegation=["aten.relu.default"])
    lower(model, (torch.randn(1, 4),), [p])
    assert [r.target for r in p.report().rejected] == ["aten.relu.default"]
    assert "skip_ops_for_coreml_delegation" in p.report().rejected[0].reason


def test_option_conflicts_are_refused():
    with pytest.raises(ValueError, match="lower_full_graph"):
        CoreMLPartitioner(lower_full_graph=True, skip_ops_for_coreml_delegation=["aten.relu.default"])
    spec = CoreMLBackend.generate_compile_specs()[0].__class__(COMPILE_SPEC_KEYS.ENUMERATED_SHAPES.value, b"[]")
    with pytest.raises(ValueError, match="lower_full_graph=True"):
        CoreMLPartitioner(compile_specs=[spec])


def test_compile_specs_use_executorchs_keys_and_encodings():
    got = {s.key: s.value for s in CoreMLBackend.generate_compile_specs(
        compute_unit=ct.ComputeUnit.CPU_AND_NE, minimum_deployment_target=ct.target.iOS17,
        compute_precision=ct.precision.FLOAT32)}
    assert got == {"compute_units": b"cpu_and_ne", "min_deployment_target": str(int(ct.target.iOS17.value)).encode(),
                   "model_compute_precision": b"float32", "model_type": b"model"}
    round_trip = CoreMLBackend.generate_compile_specs(compute_unit=ct.ComputeUnit.CPU_ONLY)
    assert specs.compute_unit(round_trip) == ct.ComputeUnit.CPU_ONLY
    assert specs.minimum_deployment_target(round_trip) is None
    bad = [round_trip[0].__class__("model_compute_precision", b"float8")]
    with pytest.raises(CompileSpecError, match="float16 or float32"):
        specs.compute_precision(bad)


@pytest.mark.skipif(__import__("platform").system() == "Darwin", reason="checks the error off macOS")
def test_compiled_model_type_needs_macos():
    model = torch.nn.Linear(4, 4).eval()
    cs = CoreMLBackend.generate_compile_specs(model_type=CoreMLBackend.MODEL_TYPE.COMPILED_MODEL)
    with pytest.raises(Exception, match="exists only on macOS"):
        lower(model, (torch.randn(1, 4),), [CoreMLPartitioner(compile_specs=cs)])


class _SeqModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(24, 24)

    def forward(self, x):
        return torch.relu(self.fc(x))


def test_enumerated_shapes_appear_in_the_spec():
    model = _SeqModel().eval()
    x = torch.randn(1, 4, 24)
    seq = torch.export.Dim("seq", min=1, max=64)
    ep = torch.export.export(model, (x,), dynamic_shapes={"x": {1: seq}})
    spec = generate_enumerated_shapes_compile_spec(ep, {"x": [[1, 4, 24], [1, 16, 24], [1, 64, 24]]})
    payload = json.loads(spec.value)
    # ExecuTorch's layout: [symbolic shape, [enumerated shapes, input names]]
    assert payload[0][1] == [[[1, 4, 24], [1, 16, 24], [1, 64, 24]], ["x"]]
    assert payload[0][0]["shape"][1]["high"] == 64
    compile_specs = CoreMLBackend.generate_compile_specs(minimum_deployment_target=ct.target.iOS18) + [spec]
    manager = lower(model, (x,), [CoreMLPartitioner(compile_specs=compile_specs, lower_full_graph=True)],
                    dynamic_shapes={"x": {1: seq}})
    (delegate,) = delegates(manager)
    mlmodel, _ = mlmodel_from_payload(delegate.processed_bytes)
    array = mlmodel.get_spec().description.input[0].type.multiArrayType
    shapes = [list(s.shape) for s in array.enumeratedShapes.shapes]
    assert shapes == [[1, 4, 24], [1, 16, 24], [1, 64, 24]]


def test_enumerated_shapes_are_checked_against_the_export():
    model = _SeqModel().eval()
    seq = torch.export.Dim("seq", min=2, max=32)
    ep = torch.export.export(model, (torch.randn(1, 4, 24),), dynamic_shapes={"x": {1: seq}})
    with pytest.raises(EnumeratedShapesError, match="outside the exported range"):
        generate_enumerated_shapes_compile_spec(ep, {"x": [[1, 4, 24], [1, 64, 24]]})
    with pytest.raises(EnumeratedShapesError, match="static dim 2"):
        generate_enumerated_shapes_compile_spec(ep, {"x": [[1, 4, 24], [1, 8, 12]]})
    with pytest.raises(EnumeratedShapesError, match="not user inputs"):
        generate_enumerated_shapes_compile_spec(ep, {"y": [[1, 4, 24], [1, 8, 24]]})
