"""Dynamically quantized linears (XNNPACK qd8) from both front ends of seed 001:

- PT2E: ``XNNPACKQuantizer`` with ``get_symmetric_quantization_config(is_dynamic=True)``;
- torchao ``quantize_``: ``Int8DynamicActivationIntxWeightConfig`` (int4 weights per group of 32 or
  per channel, int8 weights per channel) and ``IntxWeightOnlyConfig`` embeddings.

The reference is the quantized model run in eager (float math around the quantize / dequantize ops).
XNNPACK quantizes each activation row with its own scale (PT2E's reference uses one per tensor) and
stores int4 group scales as bf16 (torchao keeps fp32), so results agree to quantization error, not
bit for bit. Tolerance: max abs error <= 3% of the reference's spread and cosine >= 0.999; a wrong
weight layout, nibble order or scale gives errors of the size of the output itself. Each test also
reads the payload, so a silent fallback to float weights fails.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers import requires_fb
from helpers import lowered_modules, parse_payload

pytestmark = requires_fb

runtime = pytest.importorskip("etkit.runtime")
pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")

FP32, QCINT8, QCINT4, QDINT8, QBINT4 = 1, 6, 8, 9, 10
MAX_ERROR_OF_SPREAD = 0.03
MIN_COSINE = 0.999


def _lower_and_run(ep, inputs):
    import etkit
    from etkit_xnnpack import XnnpackPartitioner

    partitioner = XnnpackPartitioner()
    manager = etkit.to_edge_transform_and_lower(ep, partitioner=[partitioner])
    program = manager.to_executorch()
    method = runtime.Runtime.get().load_program(program.buffer).load_method("forward")
    return manager, partitioner.report(), method.execute(list(inputs))[0]


def _datatypes(manager) -> list[set]:
    out = []
    for module in lowered_modules(manager):
        _, graph, _ = parse_payload(module.processed_bytes)
        out.append({(v.xvalueUnion.tensorValue if hasattr(v.xvalueUnion, "tensorValue") else v.xvalueUnion).datatype
                    for v in graph.xvalues})
    return out


@torch.no_grad()
def _assert_matches(actual, reference, what):
    spread = float(reference.max() - reference.min())
    error = float((actual - reference).abs().max())
    cosine = float(nn.functional.cosine_similarity(actual.flatten(), reference.flatten(), dim=0))
    assert error <= MAX_ERROR_OF_SPREAD * spread, f"{what}: max error {error:.4g} > {MAX_ERROR_OF_SPREAD} x {spread:.4g}"
    assert cosine >= MIN_COSINE, f"{what}: cosine {cosine:.5f} < {MIN_COSINE}"


class _MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(64, 96), nn.Linear(96, 64), nn.Linear(64, 10)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def _pt2e_dynamic(model, inputs, per_channel):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from etkit_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=per_channel,
                                                                                is_dynamic=True))
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*inputs)  # dynamic: no ranges are recorded, but prepare needs one call to trace shapes
    converted = convert_pt2e(prepared)
    return torch.export.export(converted, inputs), converted


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("shape", [(4, 64), (2, 5, 64)], ids=["2d", "3d"])
def test_pt2e_dynamic_linears_run_as_qd8_and_match_reference(per_channel, shape):
    torch.manual_seed(0)
    model = _MLP().eval()
    x = torch.randn(*shape)
    ep, reference = _pt2e_dynamic(model, (x,), per_channel)
    manager, report, y = _lower_and_run(ep, (x,))
    assert report.num_partitions == 1 and not report.rejected, report.format()
    (types,) = _datatypes(manager)
    assert {QDINT8, QCINT8} <= types, f"payload datatypes {types}: linears did not run on qd8 x qc8w"
    _assert_matches(y, reference(x), "PT2E dynamic vs reference")
    _assert_matches(y, model(x), "PT2E dynamic vs fp32 eager")


def _torchao(model, config, filter_fn=None):
    from torchao.quantization import quantize_

    quantize_(model, config, filter_fn)
    return model


@pytest.mark.parametrize("weight_dtype,granularity,expected", [
    ("int4", "group32", QBINT4), ("int4", "axis", QCINT4), ("int8", "axis", QCINT8),
])
def test_one_row_8da_linears_match_eager(weight_dtype, granularity, expected):
    """One row of activations (an LLM's decode step) runs XNNPACK's 1-row kernels, whose weight prefetching
    scripts/patches/ changes (xnnpack-qb4w-gemv-far-prefetch, xnnpack-qd8-gemv-hardware-prefetch): 576 inputs
    and 1056 outputs (66 column tiles of 16), a bias, compared with torchao's eager model."""
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig
    from torchao.quantization.granularity import PerAxis, PerGroup

    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(576, 1056), nn.ReLU(), nn.Linear(1056, 576, bias=False)).eval()
    gran = PerAxis(0) if granularity == "axis" else PerGroup(32)
    _torchao(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=getattr(torch, weight_dtype),
                                                          weight_granularity=gran))
    x = torch.randn(1, 576)
    manager, report, y = _lower_and_run(torch.export.export(model, (x,)), (x,))
    assert report.num_partitions == 1 and not report.rejected, report.format()
    (types,) = _datatypes(manager)
    assert {QDINT8, expected} <= types, f"payload datatypes {types}: expected qdint8 activations and {expected}"
    _assert_matches(y, model(x), f"one row, torchao {weight_dtype} {granularity} vs eager")


@pytest.mark.parametrize("weight_dtype,granularity,expected", [
    ("int4", "group32", QBINT4), ("int4", "group64", QBINT4), ("int4", "axis", QCINT4), ("int8", "axis", QCINT8),
])
def test_torchao_int8_dynamic_activation_intx_weight_linears_run_on_xnnpack(weight_dtype, granularity, expected):
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig
    from torchao.quantization.granularity import PerAxis, PerGroup

    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(128, 96, bias=False), nn.ReLU(), nn.Linear(96, 64), nn.ReLU(),
                          nn.Linear(64, 10)).eval()
    gran = PerAxis(0) if granularity == "axis" else PerGroup(int(granularity[5:]))
    group = 1 if granularity == "axis" else gran.group_size
    _torchao(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=getattr(torch, weight_dtype),
                                                          weight_granularity=gran),
             lambda m, fqn: isinstance(m, nn.Linear) and m.in_features % group == 0)
    x = torch.randn(3, 7, 128)
    reference = model(x)
    manager, report, y = _lower_and_run(torch.export.export(model, (x,)), (x,))
    assert report.num_partitions == 1 and not report.rejected, report.format()
    (types,) = _datatypes(manager)
    assert {QDINT8, expected} <= types, f"payload datatypes {types}: expected qdint8 activations and {expected}"
    _assert_matches(y, reference, f"torchao {weight_dtype} {granularity} vs reference")


@pytest.mark.parametrize("weight_dtype,granularity,expected", [
    ("int8", "axis", QCINT8), ("int4", "axis", QCINT4), ("int4", "group32", FP32),
])
def test_torchao_weight_only_linears_keep_their_integer_weights(weight_dtype, granularity, expected):
    """``IntxWeightOnlyConfig`` linears (``LlmConfig(quantize="8w")``): float32 activations times int8 / int4
    per-channel weights as stored (XNNPACK's f32_qc8w / f32_qc4w), so the payload holds the integers, not a
    float32 copy; per-group int4 has no float32-input kernel and is dequantized into the payload. The
    reference dequantizes the same integers, so only summation order differs: atol = rtol = 1e-4."""
    from torchao.quantization import IntxWeightOnlyConfig
    from torchao.quantization.granularity import PerAxis, PerGroup

    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(128, 96), nn.ReLU(), nn.Linear(96, 64, bias=False)).eval()
    gran = PerAxis(0) if granularity == "axis" else PerGroup(32)
    _torchao(model, IntxWeightOnlyConfig(weight_dtype=getattr(torch, weight_dtype), granularity=gran),
             lambda m, fqn: isinstance(m, nn.Linear))
    x = torch.randn(3, 5, 128)
    manager, report, y = _lower_and_run(torch.export.export(model, (x,)), (x,))
    assert report.num_partitions == 1 and not report.rejected, report.format()
    (types,) = _datatypes(manager)
    assert expected in types and QDINT8 not in types, f"payload datatypes {types}: expected {expected}, no qd8"
    torch.testing.assert_close(y, model(x), atol=1e-4, rtol=1e-4)


def test_weight_only_int4_with_an_odd_input_size_stays_float32():
    """int4 packs two values a byte, so a weight-only int4 linear with 33 inputs is dequantized into the payload
    as float32 instead of failing to pack; it matches eager at 1e-4."""
    from torchao.quantization import IntxWeightOnlyConfig
    from torchao.quantization.granularity import PerAxis

    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(33, 16)).eval()
    _torchao(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerAxis(0)))
    x = torch.randn(2, 33)
    manager, report, y = _lower_and_run(torch.export.export(model, (x,)), (x,))
    assert report.num_partitions == 1 and not report.rejected, report.format()
    (types,) = _datatypes(manager)
    assert QCINT4 not in types, types
    torch.testing.assert_close(y, model(x), atol=1e-4, rtol=1e-4)


def test_torchao_weight_only_embedding_runs_and_linears_stay_qd8():
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, IntxWeightOnlyConfig
    from torchao.quantization.granularity import PerAxis, PerGroup

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.fc = nn.Embedding(1000, 64), nn.Linear(64, 32)

        def forward(self, tokens):
            return self.fc(self.emb(tokens))

    torch.manual_seed(2)
    model = Model().eval()
    _torchao(model, IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)),
             lambda m, fqn: isinstance(m, nn.Embedding))
    _torchao(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32)),
             lambda m, fqn: isinstance(m, nn.Linear))
    tokens = torch.randint(0, 1000, (2, 9))
    manager, report, y = _lower_and_run(torch.export.export(model, (tokens,)), (tokens,))
    assert any(r.target == "aten.embedding.default" for r in report.rejected), report.format()
    assert any({QDINT8, QBINT4} <= t for t in _datatypes(manager)), "the linear did not run on qd8 x qb4w"
    _assert_matches(y, model(tokens), "weight-only embedding + int4 linear vs reference")


def test_group_size_xnnpack_cannot_express_is_reported_and_the_program_still_runs():
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig
    from torchao.quantization.granularity import PerGroup

    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(64, 16)).eval()
    _torchao(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(16)))
    x = torch.randn(2, 64)
    manager, report, y = _lower_and_run(torch.export.export(model, (x,)), (x,))
    reasons = [r.reason for r in report.rejected]
    assert any("group size 16 is not a multiple of 32" in r for r in reasons), report.format()
    assert not any({QDINT8} <= t for t in _datatypes(manager))
    torch.testing.assert_close(y, model(x), atol=1e-4, rtol=1e-4)  # decomposed: float math, same as eager


def test_minilm_dynamic_int8_embeddings_stay_close_to_fp32():
    """Issue 4's accuracy target for the dynamic-int8 MiniLM: cosine >= 0.99 against fp32 eager."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    from example_models import minilm

    model, inputs = minilm(["A dynamically quantized encoder.", "Embeddings should stay close to fp32.",
                            "The cat sat on the mat."])
    expected = model(*inputs)
    ep, _ = _pt2e_dynamic(model, inputs, per_channel=True)
    manager, report, y = _lower_and_run(ep, inputs)
    assert sum(1 for t in _datatypes(manager) if QDINT8 in t) >= 1
    assert report.num_delegated >= 36, report.format()  # 6 layers x 6 linears
    cosine = nn.functional.cosine_similarity(y, expected, dim=-1)
    assert float(cosine.min()) >= 0.99, f"per-sentence cosine {cosine.tolist()}"


def test_dynamic_quant_precision_alone_delegates_only_the_qd8_linears():
    from etkit_xnnpack.partition import ConfigPrecisionType

    import etkit
    from etkit_xnnpack import XnnpackPartitioner

    torch.manual_seed(4)
    model, x = _MLP().eval(), torch.randn(4, 64)
    ep, reference = _pt2e_dynamic(model, (x,), per_channel=True)
    partitioner = XnnpackPartitioner(config_precisions=ConfigPrecisionType.DYNAMIC_QUANT)
    manager = etkit.to_edge_transform_and_lower(ep, partitioner=[partitioner])
    report = partitioner.report()
    assert report.num_partitions == 3 and [r.target for r in report.rejected] == ["aten.relu.default"] * 2, \
        report.format()
    assert all({QDINT8, QCINT8} <= t for t in _datatypes(manager))
    method = runtime.Runtime.get().load_program(manager.to_executorch().buffer).load_method("forward")
    _assert_matches(method.execute([x])[0], reference(x), "DYNAMIC_QUANT-only partitioning vs reference")
