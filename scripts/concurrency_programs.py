"""Programs for the concurrency test under ThreadSanitizer (`make test-sanitize`, docs/runtime.md).

    python scripts/concurrency_programs.py OUT_DIR

Writes, lowered to XNNPACK (each method's XNNPACK runtime on one thread, the delegate's default):

- ``xnnpack_convnet.pte``: conv + batch norm + ReLU, max pool, linear: float32 weights that every Method
  of the Program packs through the shared XNNPACK weights cache;
- ``xnnpack_linear_8da4w.pte``: a linear with int4 group-wise weights and 8-bit dynamic activations.

`runtime-cpp/tests/test_concurrent_methods PROGRAM.pte` loads one, gives 8 threads their own Method and
compares 1,000 executions each with a lone Method's outputs, byte for byte.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn

import etkit


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.fc(y.flatten(1))


def _lower(model: nn.Module, inputs: tuple) -> bytes:
    from etkit_xnnpack import XnnpackPartitioner

    exported = torch.export.export(model.eval(), inputs)
    return etkit.to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def _linear_8da4w() -> bytes:
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16)).eval()
    quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32)))
    return _lower(model, (torch.randn(2, 64),))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    programs = {"xnnpack_convnet": _lower(ConvNet(), (torch.randn(1, 3, 8, 8),)),
                "xnnpack_linear_8da4w": _linear_8da4w()}
    for name, pte in programs.items():
        (args.out_dir / f"{name}.pte").write_bytes(pte)
        print(f"{args.out_dir / name}.pte: {len(pte)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
