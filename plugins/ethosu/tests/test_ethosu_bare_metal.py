"""The PT2E-quantized digits CNN of test_models_lower_to_ethosu.py on a Cortex-M55 without its NPU: the
quantized model (``quantize_for_ethosu``, calibrated on the training images) lowered with no partitioner, so
its quantize / dequantize ops and the float ops between them run on the portable kernels, built into a
bare-metal image (``etkit.native.baremetal``) and run on QEMU's mps3-an547 board.

The image's logits are compared with the PT2E reference model (the quantized GraphModule in eager) on 16 test
images: every output within 1 quantization step of the output (the float ops between the int8 tensors may
round differently on another CPU and C library), and the same predicted class. It makes no heap allocation
after ``Program::load``.

Cost: training the CNN (~5 s), one image build (~1-2 min on 2 cores), under a second on QEMU.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import etkit
from etkit.native.baremetal import build_baremetal_image, run_on_qemu
from etkit_ethosu import quantize_for_ethosu

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
from example_models import DigitsCNN, digits_data, train_digits_cnn  # noqa: E402  (examples/: torch only)

pytestmark = pytest.mark.device_sim

BATCH = 16


def test_pt2e_digits_cnn_on_cortex_m55_matches_the_pt2e_reference(tmp_path):
    x_train, x_test, y_train, _ = digits_data()
    torch.manual_seed(0)
    model = train_digits_cnn(DigitsCNN(), x_train, y_train)
    x = x_test[:BATCH]
    calibration = [(b,) for b in x_train[:len(x_train) // BATCH * BATCH].split(BATCH)]
    reference = quantize_for_ethosu(model, (x,), calibration=calibration)
    edge = etkit.to_edge_transform_and_lower(torch.export.export(reference, (x,)))
    ops = {str(n.target) for n in edge.exported_program().graph.nodes if n.op == "call_function"}
    assert any("quantize_per_tensor" in op for op in ops), ops  # the quantized ops run on the portable kernels
    (tmp_path / "digits.pte").write_bytes(edge.to_executorch().buffer)

    image = build_baremetal_image(tmp_path / "image", tmp_path / "digits.pte", inputs=[x.numpy()])
    assert "quantized_decomposed::quantize_per_tensor.out" in image.kernels
    run = run_on_qemu(image.elf)
    (logits,) = run.outputs
    with torch.no_grad():
        expected = reference(x).numpy()
    (out,) = [n for n in reference.graph.nodes if n.op == "output"]
    scale = float(out.args[0][0].args[1])  # the dequantize that produces the output
    steps = np.abs(np.round(logits / scale) - np.round(expected / scale))
    assert steps.max() <= 1, f"{steps.max()} output steps apart (scale {scale})"
    np.testing.assert_array_equal(logits.argmax(1), expected.argmax(1))
    assert run.heap_allocations_after_load == 0
