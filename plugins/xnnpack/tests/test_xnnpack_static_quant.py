"""Statically quantized (PT2E, 8-bit) programs lower to XNNPACK int8 ops and match the PT2E reference.

Each model is quantized the way seed 001 shows (``prepare_pt2e`` with an XNNPACK quantizer,
calibration, ``convert_pt2e``), re-exported and lowered with ``XnnpackPartitioner``. The reference is
the converted model run in eager (float math between quantize/dequantize nodes).

Tolerance: 2 quantization steps of the output (the scale of the last quantize node). XNNPACK computes
in integers and requantizes with rounding, so a result may differ from the float reference by one
step per quantized op in a chain (these cases have at most two); a wrong scale, zero point, weight
layout or bias scale gives errors of many steps.

Every case runs with etkit's ``XNNPACKQuantizer`` and with torchao's testing copy of the upstream
XNNPACK quantizer (the annotation rules ExecuTorch's ``XNNPACKQuantizer`` uses), so graphs quantized
either way lower and run.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers import requires_fb
from helpers import Fn, lowered_modules, parse_payload
from helpers import seeded_randn as _randn

pytestmark = requires_fb

runtime = pytest.importorskip("etkit.runtime")
pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")

QINT8, QCINT8, QCINT32 = 3, 6, 7


X = _randn(0, 1, 8, 10, 10)
CASES = {
    "conv": (lambda: Fn(lambda s, x: s.c(x), c=nn.Conv2d(8, 16, 3, padding=1)), (X,)),
    "conv_stride_no_bias": (lambda: Fn(lambda s, x: s.c(x), c=nn.Conv2d(8, 4, 3, stride=2, bias=False)), (X,)),
    "depthwise_conv": (lambda: Fn(lambda s, x: s.c(x), c=nn.Conv2d(8, 8, 3, padding=1, groups=8)), (X,)),
    "conv_relu": (lambda: Fn(lambda s, x: torch.relu(s.c(x)), c=nn.Conv2d(8, 8, 1)), (X,)),
    "conv_hardtanh": (lambda: Fn(lambda s, x: nn.functional.hardtanh(s.c(x), 0.0, 6.0), c=nn.Conv2d(8, 8, 3)), (X,)),
    "linear": (lambda: Fn(lambda s, x: s.l(x), l=nn.Linear(32, 16)), (_randn(1, 4, 32),)),
    "linear_relu": (lambda: Fn(lambda s, x: torch.relu(s.l(x)), l=nn.Linear(32, 16)), (_randn(1, 4, 32),)),
    "add": (lambda: Fn(lambda s, a, b: a + b), (_randn(2, 1, 8, 4, 4), _randn(3, 1, 8, 4, 4) * 3)),
    "add_relu": (lambda: Fn(lambda s, a, b: torch.relu(a + b)), (_randn(2, 1, 8, 4, 4), _randn(3, 1, 8, 4, 4))),
    "mul": (lambda: Fn(lambda s, a, b: a * b), (_randn(4, 2, 16), _randn(5, 2, 16))),
    "cat": (lambda: Fn(lambda s, x: torch.cat([s.a(x), s.b(x)], dim=1), a=nn.Conv2d(8, 4, 1), b=nn.Conv2d(8, 4, 1)),
            (X,)),
    "max_pool": (lambda: Fn(lambda s, x: nn.functional.max_pool2d(s.c(x), 2), c=nn.Conv2d(8, 8, 1)), (X,)),
    "avg_pool_flatten_linear": (
        lambda: Fn(lambda s, x: s.l(torch.flatten(nn.functional.adaptive_avg_pool2d(s.c(x), 1), 1)),
                   c=nn.Conv2d(8, 16, 3), l=nn.Linear(16, 5)), (X,)),
}


def _quantizer(per_channel: bool, which: str):
    if which == "etkit":
        from etkit_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
    else:
        from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=per_channel))


def _quantize(model, inputs, per_channel: bool, which: str = "etkit"):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = _quantizer(per_channel, which)
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    with torch.no_grad():
        for seed in range(3):
            prepared(*[_randn(100 + seed, *x.shape) * x.abs().max() for x in inputs])
            prepared(*inputs)
    converted = convert_pt2e(prepared)
    return torch.export.export(converted, inputs), converted


def _lower(ep):
    import etkit
    from etkit_xnnpack import XnnpackPartitioner

    partitioner = XnnpackPartitioner()
    manager = etkit.to_edge_transform_and_lower(ep, partitioner=[partitioner])
    return manager, partitioner.report()


def _output_step(ep) -> float:
    from etkit_xnnpack.operators.quant import QUANTIZE_PER_TENSOR
    out = [n for n in ep.graph.nodes if n.op == "call_function" and n.target is QUANTIZE_PER_TENSOR]
    return float(out[-1].args[1])


@pytest.mark.parametrize("which", ["etkit", "upstream"])
@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_quantized_op_runs_on_int8_and_matches_pt2e_reference(name, per_channel, which):
    factory, inputs = CASES[name]
    torch.manual_seed(0)
    ep, converted = _quantize(factory().eval(), inputs, per_channel, which)
    with torch.no_grad():
        reference = converted(*inputs)
    manager, report = _lower(ep)
    assert report.rejected == [], report.format()
    (module,) = lowered_modules(manager)
    _, graph, _ = parse_payload(module.processed_bytes)
    datatypes = {v.xvalueUnion.tensorValue.datatype for v in graph.xvalues if hasattr(v.xvalueUnion, "tensorValue")}
    assert QINT8 in datatypes, "no int8 activations in the payload: the op ran in float"
    if any(k in name for k in ("conv", "linear")):
        assert {QCINT8} <= datatypes, "weights are not int8 per-channel (qcint8)"
    method = runtime.Runtime.get().load_program(manager.to_executorch().buffer).load_method("forward")
    (actual,) = method.execute(list(inputs))
    step = _output_step(ep)
    torch.testing.assert_close(actual, reference, atol=2 * step, rtol=0)
    assert (reference.max() - reference.min()).item() > 10 * step, "degenerate case: the output is nearly constant"


def test_float_op_between_quantized_ops_runs_in_float_with_converts():
    """An op the quantizer leaves in float (sigmoid here) between int8 ops: the dequantize and the
    quantize around it become XNNPACK converts, the whole graph stays one delegate, results match."""
    model = Fn(lambda s, x: s.b(torch.sigmoid(s.a(x))), a=nn.Conv2d(8, 8, 1), b=nn.Conv2d(8, 4, 1)).eval()
    ep, converted = _quantize(model, (X,), True)
    with torch.no_grad():
        reference = converted(X)
    manager, report = _lower(ep)
    assert report.rejected == [] and report.num_partitions == 1, report.format()
    (module,) = lowered_modules(manager)
    from helpers import node_kind_names
    _, graph, _ = parse_payload(module.processed_bytes)
    kinds = [node_kind_names()[n.xnodeUnionType] for n in graph.xnodes]
    assert kinds.count("XNNConvert") >= 3 and "XNNSigmoid" in kinds
    method = runtime.Runtime.get().load_program(manager.to_executorch().buffer).load_method("forward")
    torch.testing.assert_close(method.execute([X])[0], reference, atol=2 * _output_step(ep), rtol=0)


def test_int8_payload_stores_weights_once_as_int8_named_data():
    """Weights are int8 (not float) and live in the program's named data, keyed by sha256."""
    model = CASES["conv"][0]().eval()
    ep, _ = _quantize(model, (X,), True)
    manager, _ = _lower(ep)
    (module,) = lowered_modules(manager)
    weight_bytes = 16 * 8 * 3 * 3
    sizes = sorted(len(v) for v in module.named_data.values())
    assert weight_bytes in sizes and 4 * weight_bytes not in sizes


def test_etkit_quantizer_fuses_activations_into_the_op():
    """conv -> hardtanh gets one quantize after the activation (fused as the conv's output clamp),
    where the upstream rules quantize between them."""
    from etkit_xnnpack.operators.quant import QUANTIZE_PER_TENSOR

    model = CASES["conv_hardtanh"][0]().eval()
    ep, _ = _quantize(model, (X,), True, "etkit")
    conv = next(n for n in ep.graph.nodes if n.target is torch.ops.aten.conv2d.default)
    assert [u.target for u in conv.users] != [QUANTIZE_PER_TENSOR]
    (module,) = lowered_modules(_lower(ep)[0])
    _, graph, _ = parse_payload(module.processed_bytes)
    conv_nodes = [n for n in graph.xnodes if n.outputMinMax is not None]
    assert conv_nodes and (conv_nodes[0].outputMinMax.outputMin, conv_nodes[0].outputMinMax.outputMax) == (0.0, 6.0)


def test_qat_config_prepares_and_converts():
    """``prepare_qat_pt2e`` with ``is_qat=True``: a few training steps, then convert, lower, run."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_qat_pt2e

    from etkit_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    model = CASES["conv_relu"][0]()
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_qat=True))
    prepared = prepare_qat_pt2e(torch.export.export(model, (X,)).module(), quantizer)
    optimizer = torch.optim.SGD(prepared.parameters(), lr=1e-3)
    for seed in range(3):
        loss = prepared(_randn(seed, *X.shape)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    converted = convert_pt2e(prepared)
    ep = torch.export.export(converted, (X,))
    with torch.no_grad():
        reference = converted(X)
    manager, report = _lower(ep)
    assert report.rejected == [], report.format()
    method = runtime.Runtime.get().load_program(manager.to_executorch().buffer).load_method("forward")
    torch.testing.assert_close(method.execute([X])[0], reference, atol=2 * _output_step(ep), rtol=0)


def test_fp32_only_partitioner_delegates_float_work_and_leaves_quantize_nodes_outside():
    """``config_precisions=FP32`` on a quantized model: the convolution is delegated in float (its
    int8 weight dequantized at compile time), the quantize/dequantize nodes stay outside with the
    reason and run on the portable quantized_decomposed kernels; the program matches the reference."""
    from etkit_xnnpack.partition import ConfigPrecisionType

    import etkit
    from etkit_xnnpack import XnnpackPartitioner

    ep, converted = _quantize(CASES["conv_relu"][0]().eval(), (X,), True)
    partitioner = XnnpackPartitioner(config_precisions=ConfigPrecisionType.FP32)
    manager = etkit.to_edge_transform_and_lower(ep, partitioner=[partitioner])
    report = partitioner.report()
    assert report.num_partitions == 1 and report.delegated.get("aten.convolution.default") == 1, report.format()
    outside = {r.target for r in report.rejected}
    assert outside == {"quantized_decomposed.quantize_per_tensor.default",
                       "quantized_decomposed.dequantize_per_tensor.default"}, report.format()
    method = runtime.Runtime.get().load_program(manager.to_executorch().buffer).load_method("forward")
    with torch.no_grad():
        reference = converted(X)
    # the float conv may round differently from the reference's at a quantization boundary: 1 step
    torch.testing.assert_close(method.execute([X])[0], reference, atol=_output_step(ep) + 1e-6, rtol=0)
