"""Block-wise int4 weights (``QuantDtype.use_16a4w_block`` with ``QnnQuantizer.set_block_size_map``), lowered to a
QNN HTP context (ONNX's blocked ``DequantizeLinear``) and run on the HTP simulator, against the PT2E reference.

The weight's first 64 input features are 50x smaller than the rest (and their inputs 50x larger), so one scale per
output channel rounds most of those weights to zero while one scale per block of 32 keeps them: the block-wise reference is several times closer to
the float model than the per-channel one, and the HTP must follow the block-wise one. Tolerance: 40 steps of the 16-bit output, 0.06% of its range (measured 27; int4 weights with
16-bit activations come out 14-27 steps from the float emulation on the simulator, per channel or per block).
"""
from __future__ import annotations

import pytest
import torch

from etkit_qnn.quantizer import QnnQuantizer, QuantDtype, quantize_for_qnn
from qnn_helpers import lower, output_step, run

pytestmark = pytest.mark.device_sim


@pytest.fixture(scope="module")
def uneven_linear():
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(128, 32), torch.nn.ReLU()).eval()
    with torch.no_grad():
        module[0].weight[:, :64] *= 0.02
    x = torch.randn(4, 128, generator=torch.Generator().manual_seed(1))
    x[:, :64] *= 50  # the small weights' inputs are large: half of the signal goes through them
    return module, (x,)


def test_block_wise_linear_follows_its_reference_on_the_htp(uneven_linear):
    module, inputs = uneven_linear
    with torch.no_grad():
        exact = module(*inputs)
    blocked = quantize_for_qnn(module, inputs, quant_dtype=QuantDtype.use_16a4w_block,
                               block_size_map={"linear": (1, 32)})
    per_channel = quantize_for_qnn(module, inputs, quant_dtype=QuantDtype.use_16a4w_block)
    with torch.no_grad():
        expected, coarse = blocked(*inputs), per_channel(*inputs)
    # The blocks matter: per-channel int4 loses the small features.
    assert float((coarse - exact).abs().max()) > 3 * float((expected - exact).abs().max())
    edge = lower(blocked, inputs, fp16=False)
    report = edge.partition_reports["forward"][0]
    assert report.num_partitions == 1 and not report.rejected, report.format()
    (out,) = run(edge, inputs)
    steps = float((out - expected).abs().max()) / output_step(expected, "16a4w")
    assert steps <= 40, f"{steps:.1f} output steps from the block-wise reference"


def test_block_size_map_is_checked():
    x = (torch.randn(2, 96),)
    with pytest.raises(ValueError, match="use_16a4w_block"):
        quantize_for_qnn(torch.nn.Linear(96, 8).eval(), x, quant_dtype=QuantDtype.use_16a8w,
                         block_size_map={"linear": (1, 32)})
    with pytest.raises(ValueError, match="divisor"):
        quantize_for_qnn(torch.nn.Linear(96, 8).eval(), x, quant_dtype=QuantDtype.use_16a4w_block,
                         block_size_map={"linear": (1, 64)})
    conv = torch.nn.Conv2d(32, 4, 1).eval()
    with pytest.raises(ValueError, match="only linear weights"):
        quantize_for_qnn(conv, (torch.randn(1, 32, 4, 4),), quant_dtype=QuantDtype.use_16a4w_block,
                         block_size_map={"conv2d": (1, 16, 1, 1)})
    assert QnnQuantizer().block_size_map == {}
