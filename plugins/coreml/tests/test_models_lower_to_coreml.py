"""MobileNetV2, ResNet-18 and all-MiniLM-L6-v2 lower to Core ML ML Programs whose ops and weights match the
source model. Core ML cannot run on Linux, so the spec is checked instead of outputs (the fallback test
runs the same kind of program end to end)."""
from __future__ import annotations

import pytest
import torch
import torchvision

from coreml_helpers import delegates, dtype_name, load_demo, lower, op_counts, program_ops, weight_of
from etkit_coreml import CoreMLBackend, CoreMLPartitioner, mlmodel_from_payload

ct = pytest.importorskip("coremltools")


def _single_payload_spec(manager):
    (delegate,) = delegates(manager)
    model, metadata = mlmodel_from_payload(delegate.processed_bytes)
    return model.get_spec(), metadata


def _conv_weights(model) -> list:
    return sorted(tuple(m.weight.shape) for m in model.modules() if isinstance(m, torch.nn.Conv2d))


@pytest.fixture(scope="module")
def mobilenet():
    model = torchvision.models.mobilenet_v2(weights=None).eval()
    return model, lower(model, (torch.randn(1, 3, 224, 224),), [CoreMLPartitioner()])


def test_mobilenet_v2_is_one_core_ml_program_with_the_models_convolutions(mobilenet):
    model, manager = mobilenet
    (report,) = manager.partition_reports["forward"]
    assert report.num_partitions == 1 and not report.rejected, report.format()
    spec, metadata = _single_payload_spec(manager)
    assert spec.WhichOneof("Type") == "mlProgram"
    counts = op_counts(spec)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert counts["conv"] == len(convs) == 52
    assert counts["linear"] == 1
    weights = weight_of(spec, "conv")
    assert sorted(s for s, _, _ in weights) == _conv_weights(model)
    # default compute precision is fp16 (seed "Partitioner API"): weights are stored as fp16
    assert {d for _, d, _ in weights} == {"FLOAT16"}
    assert metadata["inputNames"] == [i.name for i in spec.description.input]
    assert metadata["outputNames"] == [o.name for o in spec.description.output]
    assert metadata["identifier"].startswith("executorch_")


def test_resnet18_lowers_whole_in_fp32_when_asked():
    model = torchvision.models.resnet18(weights=None).eval()
    specs = CoreMLBackend.generate_compile_specs(compute_precision=ct.precision.FLOAT32,
                                                 minimum_deployment_target=ct.target.iOS17)
    manager = lower(model, (torch.randn(1, 3, 64, 64),), [CoreMLPartitioner(compile_specs=specs)])
    (report,) = manager.partition_reports["forward"]
    assert report.num_partitions == 1 and not report.rejected, report.format()
    spec, _ = _single_payload_spec(manager)
    counts = op_counts(spec)
    assert counts["conv"] == 20 and counts["linear"] == 1 and counts["add"] == 8
    weights = weight_of(spec, "conv")
    assert sorted(s for s, _, _ in weights) == _conv_weights(model)
    assert {d for _, d, _ in weights} == {"FLOAT32"}
    assert "cast" not in counts  # fp32 end to end: no casts to fp16
    assert spec.specificationVersion == 8  # iOS17


def test_minilm_lowers_with_every_linear_and_real_weights():
    demo = load_demo()
    model, (inputs,) = demo.minilm_case()
    manager = lower(model, inputs, [CoreMLPartitioner()])
    reports = manager.partition_reports["forward"]
    assert reports[0].num_delegated > 0, reports[0].format()
    linears = []
    for d in delegates(manager):
        linears += weight_of(mlmodel_from_payload(d.processed_bytes)[0].get_spec(), "linear")
    # every linear of the 6 encoder layers (q, k, v, output, 2 feed-forward); BERT's pooler is unused
    torch_linears = sorted(tuple(m.weight.shape) for name, m in model.named_modules()
                           if isinstance(m, torch.nn.Linear) and "pooler" not in name)
    assert sorted(s for s, _, _ in linears) == torch_linears and len(torch_linears) == 36


def test_op_linear_quantizer_config_stores_int8_weights():
    # coremltools compresses weights of at least 2048 elements (OpLinearQuantizerConfig.weight_threshold)
    model = torch.nn.Sequential(torch.nn.Linear(256, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64)).eval()
    specs = CoreMLBackend.generate_compile_specs(
        minimum_deployment_target=ct.target.iOS18,
        op_linear_quantizer_config={"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"})
    manager = lower(model, (torch.randn(2, 256),), [CoreMLPartitioner(compile_specs=specs)])
    spec, _ = _single_payload_spec(manager)
    weights = weight_of(spec, "linear")
    assert [s for s, _, _ in weights] == [(128, 256), (64, 128)]
    # the weights are no longer fp16 constants but int8 data dequantized when the model loads
    producers = {p for _, _, p in weights}
    assert producers <= {"constexpr_blockwise_shift_scale", "constexpr_affine_dequantize"}, producers
    quantized = [op for op in program_ops(spec) if op.type in producers]
    data = {dtype_name(op.inputs["data"].arguments[0].value.type) for op in quantized}
    assert len(quantized) == 2 and data == {"INT8"}, (data, [op.type for op in quantized])


def test_op_palettizer_config_stores_4bit_lookup_tables():
    model = torch.nn.Sequential(torch.nn.Linear(256, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64)).eval()
    specs = CoreMLBackend.generate_compile_specs(
        minimum_deployment_target=ct.target.iOS18,
        op_palettizer_config={"mode": "kmeans", "nbits": 4, "granularity": "per_tensor"})
    manager = lower(model, (torch.randn(2, 256),), [CoreMLPartitioner(compile_specs=specs)])
    spec, _ = _single_payload_spec(manager)
    weights = weight_of(spec, "linear")
    assert [s for s, _, _ in weights] == [(128, 256), (64, 128)]
    assert {p for _, _, p in weights} == {"constexpr_lut_to_dense"}
    luts = [op for op in program_ops(spec) if op.type == "constexpr_lut_to_dense"]
    indices = {dtype_name(op.inputs["indices"].arguments[0].value.type) for op in luts}
    assert indices == {"UINT4"}, indices


def test_readme_core_ml_example_runs(tmp_path, monkeypatch):
    """The plugin README's Core ML example, as written."""
    import pathlib
    import re

    readme = pathlib.Path(__file__).resolve().parents[1] / "README.md"   # plugins/coreml/README.md
    blocks = [b for b in re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)
              if "CoreMLPartitioner(compile_specs=specs)" in b]
    assert len(blocks) == 1, f"{readme} should have one Core ML python example"
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "readme_example"}
    exec(compile(blocks[0], str(readme), "exec"), scope)
    data = (tmp_path / "mv2_coreml.pte").read_bytes()
    assert data[4:8] == b"ET12"
    (report,) = scope["edge"].partition_reports["forward"]
    assert report.backend_id == "CoreMLBackend" and report.num_partitions == 1 and not report.rejected
