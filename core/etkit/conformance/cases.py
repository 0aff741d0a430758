"""The standard programs of the conformance suite: single ops and a few small models.

Every case builds its module and example inputs from fixed seeds, so all backends (and every run) see
the same programs. Shapes are static and small; models are in eval mode.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

F = torch.nn.functional


@dataclass(frozen=True)
class Case:
    """One program of the suite.

    Attributes:
        name: test id, e.g. ``"conv2d"``.
        kind: ``"op"`` (one operator) or ``"model"``.
        build: returns ``(module, example_inputs)``; deterministic.
    """

    name: str
    kind: str
    build: Callable[[], tuple]


class Fn(nn.Module):
    """``forward(*xs) = fn(self, *xs)``; keyword arguments become attributes (layers, parameters)."""

    def __init__(self, fn, **attrs) -> None:
        super().__init__()
        self.fn = fn
        for name, value in attrs.items():
            setattr(self, name, value)

    def forward(self, *xs):
        return self.fn(self, *xs)


def randn(seed: int, *shape: int) -> torch.Tensor:
    """``torch.randn(*shape)`` (float32) from a generator seeded with ``seed``."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _seeded(module: nn.Module, seed: int) -> nn.Module:
    """Re-initialise ``module``'s parameters and buffers from ``seed``, in eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
        for name, b in module.named_buffers():
            if b.is_floating_point():
                # running_var must stay positive
                b.copy_(torch.rand(b.shape, generator=generator) + 0.5 if "var" in name
                        else torch.randn(b.shape, generator=generator) * 0.1)
    return module.eval()


def _op(fn, *shapes, **attrs):
    return lambda: (_seeded(Fn(fn, **attrs), 1), tuple(randn(10 + i, *s) for i, s in enumerate(shapes)))


def _mlp():
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    return _seeded(model, 2), (randn(20, 4, 32),)


class _SmallCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.conv2(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class _ResidualBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return F.relu(x + self.conv2(F.relu(self.conv1(x))))


def _elementwise_chain():
    return _seeded(Fn(lambda m, x, y, z: torch.relu(x * y + z) - x), 3), (randn(30, 2, 3, 8), randn(31, 2, 3, 8),
                                                                          randn(32, 2, 3, 8))


#: The standard set, in the order the suite runs them.
CASES: tuple[Case, ...] = (
    Case("add", "op", _op(lambda m, x, y: x + y, (2, 3, 8), (2, 3, 8))),
    Case("sub", "op", _op(lambda m, x, y: x - y, (2, 3, 8), (2, 3, 8))),
    Case("mul", "op", _op(lambda m, x, y: x * y, (2, 3, 8), (2, 3, 8))),
    Case("div", "op", _op(lambda m, x, y: x / (y.abs() + 0.5), (2, 3, 8), (2, 3, 8))),
    Case("add_broadcast", "op", _op(lambda m, x, y: x + y, (2, 3, 8), (8,))),
    Case("relu", "op", _op(lambda m, x: torch.relu(x), (2, 3, 8))),
    Case("sigmoid", "op", _op(lambda m, x: torch.sigmoid(x), (2, 3, 8))),
    Case("tanh", "op", _op(lambda m, x: torch.tanh(x), (2, 3, 8))),
    Case("hardtanh", "op", _op(lambda m, x: F.hardtanh(x, -0.5, 0.5), (2, 3, 8))),
    Case("linear", "op", _op(lambda m, x: m.fc(x), (4, 16), fc=nn.Linear(16, 8))),
    Case("conv2d", "op", _op(lambda m, x: m.conv(x), (1, 3, 16, 16), conv=nn.Conv2d(3, 8, 3, padding=1))),
    Case("max_pool2d", "op", _op(lambda m, x: F.max_pool2d(x, 2), (1, 4, 8, 8))),
    Case("avg_pool2d", "op", _op(lambda m, x: F.avg_pool2d(x, 2), (1, 4, 8, 8))),
    Case("softmax", "op", _op(lambda m, x: torch.softmax(x, dim=-1), (2, 4, 10))),
    Case("mean", "op", _op(lambda m, x: x.mean(dim=-1, keepdim=True), (2, 4, 10))),
    Case("cat", "op", _op(lambda m, x, y: torch.cat([x, y], dim=1), (2, 3, 4), (2, 5, 4))),
    Case("view", "op", _op(lambda m, x: x.view(4, 12) * 2.0, (2, 3, 8))),
    Case("permute", "op", _op(lambda m, x: x.permute(0, 2, 1) + 1.0, (2, 3, 8))),
    Case("matmul", "op", _op(lambda m, x, y: torch.matmul(x, y), (2, 4, 8), (2, 8, 5))),
    Case("layer_norm", "op", _op(lambda m, x: m.norm(x), (2, 5, 16), norm=nn.LayerNorm(16))),
    Case("elementwise_chain", "model", _elementwise_chain),
    Case("mlp", "model", _mlp),
    Case("small_cnn", "model", lambda: (_seeded(_SmallCnn(), 4), (randn(40, 1, 3, 16, 16),))),
    Case("residual_block", "model", lambda: (_seeded(_ResidualBlock(), 5), (randn(50, 1, 8, 8, 8),))),
)

CASES_BY_NAME = {case.name: case for case in CASES}
