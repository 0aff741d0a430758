"""The programs and test cases of the bundled-program (.bpte) tests, built identically in both processes.

Imports only torch (never etkit, never executorch), so the etkit tests (tests/devtools, tests/interop)
and the ExecuTorch oracle (oracle_scripts/et_bundled.py) build the same eager models with the same
weights and the same test inputs (fixed seeds, same torch).

Models (``MODELS``):
    mlp_xnnpack     Linear -> ReLU -> Linear, two outputs (logits, softmax); lowered to XNNPACK
    conv_portable   Conv2d + a second input, ReLU, and a mean; no partitioner (portable kernels)
"""
from __future__ import annotations

import torch

MODELS = ("mlp_xnnpack", "conv_portable")
#: Test cases per bundle.
NUM_CASES = 2


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        logits = self.fc2(torch.relu(self.fc1(x)))
        return logits, torch.softmax(logits, dim=-1)


class ConvAdd(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x, y):
        z = torch.relu(self.conv(x) + y)
        return z, z.mean(dim=(2, 3))


def build(name: str) -> tuple[torch.nn.Module, bool]:
    """(eval-mode model with seeded weights, whether it is lowered to XNNPACK)."""
    torch.manual_seed(0)
    if name == "mlp_xnnpack":
        return Mlp().eval(), True
    if name == "conv_portable":
        return ConvAdd().eval(), False
    raise KeyError(f"unknown bundled test model {name!r}; known: {MODELS}")


def inputs(name: str, case: int) -> tuple:
    """The inputs of test case ``case`` (case -1: the inputs the model is exported with)."""
    g = torch.Generator().manual_seed(1000 + case)
    if name == "mlp_xnnpack":
        return (torch.randn(4, 16, generator=g),)
    if name == "conv_portable":
        return (torch.randn(1, 3, 8, 8, generator=g), torch.randn(1, 4, 6, 6, generator=g))
    raise KeyError(f"unknown bundled test model {name!r}; known: {MODELS}")


def expected(model: torch.nn.Module, case_inputs: tuple) -> list:
    """Eager outputs, flattened to a list."""
    with torch.no_grad():
        out = model(*case_inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]
