"""Quantized linears on the Vulkan delegate (seed page "Quantization", Vulkan): PT2E with VulkanQuantizer
(weight-only and dynamic int8 activations, 8- and 4-bit weights) and torchao's quantize_ (IntxWeightOnlyConfig,
Int8DynamicActivationIntxWeightConfig; per channel and per group of 32).

Reference: the quantized model run in eager (PT2E's converted model, torchao's quantized module). The delegate
dequantizes the same integer weights and, for dynamic activations, repeats the reference's rounding, so outputs
agree to float32 accumulation order: within FP32_TOL of the output range (a mismatch of one activation
quantization step would exceed it)."""
from __future__ import annotations

import copy

import pytest
import torch
from torchao.quantization import Int8DynamicActivationIntxWeightConfig, IntxWeightOnlyConfig, quantize_
from torchao.quantization.granularity import PerAxis, PerGroup
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from etkit_vulkan.quantizer import VulkanQuantizer, get_symmetric_quantization_config
from vulkan_helpers import FP32_TOL, assert_close, load, lower

pytestmark = pytest.mark.device_sim


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(128, 96), torch.nn.ReLU(), torch.nn.Linear(96, 64),
                               torch.nn.Linear(64, 32, bias=False)).eval()


X = torch.randn(6, 128, generator=torch.Generator().manual_seed(1))


def _pt2e(model, config):
    prepared = prepare_pt2e(torch.export.export(model, (X,)).module(), VulkanQuantizer().set_global(config))
    prepared(X)
    return convert_pt2e(prepared)


def _check(reference, what):
    edge, pte = lower(reference, (X,))
    report = edge.partition_reports["forward"][0]
    assert not report.rejected, report.format()
    assert "etkit_vk" not in str(report.delegated)  # report lists graph ops, the payload holds the fused ones
    out = load(pte).execute([X])
    with torch.no_grad():
        ref = reference(X)
    assert_close(out, ref, FP32_TOL, what)
    return edge, pte


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("dynamic", [False, True])
def test_pt2e_vulkan_quantizer_matches_the_converted_model(bits, dynamic):
    _check(_pt2e(mlp(), get_symmetric_quantization_config(is_dynamic=dynamic, weight_bits=bits)),
           f"PT2E {'dynamic' if dynamic else 'weight-only'} int{bits}")


@pytest.mark.parametrize("config", [
    IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
    IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)),
    Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32)),
    Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerAxis(0)),
], ids=["4w-group32", "8w-channel", "8da4w-group32", "8da4w-channel"])
def test_torchao_quantize_matches_the_quantized_module(config):
    model = copy.deepcopy(mlp())
    quantize_(model, config)
    _check(model, type(config).__name__)


def test_quantized_weights_stay_integers_in_the_program():
    """int8 weights take a quarter of the float program's weight bytes, int4 an eighth (two per byte)."""
    sizes = {}
    for name, model in [("float", mlp()),
                        ("int8", _pt2e(mlp(), get_symmetric_quantization_config(weight_bits=8))),
                        ("int4", _pt2e(mlp(), get_symmetric_quantization_config(weight_bits=4)))]:
        edge, _ = lower(model, (X,))
        sizes[name] = _weight_bytes(edge)
    assert sizes["int8"] < 0.3 * sizes["float"], sizes
    assert sizes["int4"] < 0.6 * sizes["int8"], sizes


def _weight_bytes(edge) -> int:
    """Bytes the Vulkan delegates put in the program's named data."""
    total = 0
    gm = edge.exported_program().graph_module
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            lowered = getattr(gm, node.target)
            total += sum(len(v) for v in (getattr(lowered, "named_data", None) or {}).values())
    return total


def test_asymmetric_weights_stay_outside_with_the_reason_and_still_run():
    model = copy.deepcopy(mlp())
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32),
                                          mapping_type=__import__("torchao").quantization.MappingType.ASYMMETRIC))
    edge, pte = lower(model, (X,))
    text = edge.partition_reports["forward"][0].format()
    out = load(pte).execute([X])
    with torch.no_grad():
        ref = model(X)
    assert_close(out, ref, FP32_TOL, "asymmetric int4")
    assert "not delegated" in text, text
