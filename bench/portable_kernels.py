"""Portable kernels (no delegate) against torch eager, 1 thread.

    .venv/bin/python bench/portable_kernels.py [--models resnet18,mobilenet_v2] [--repeats 5]

Lowers torchvision's ResNet-18 and MobileNetV2 (weights=None, 1x3x224x224, seed 0) with
``etkit.to_edge(ep).to_executorch()`` (no partitioner: every op runs on runtime-cpp/kernels/portable),
runs them with etkit's runtime and with torch eager (``torch.set_num_threads(1)``), and prints the
median latency of each, the ratio etkit / eager (> 1: etkit slower) and the max abs error against eager
(batch-norm statistics are estimated from a random batch first, so the outputs are O(1)).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torchvision

import etkit
from etkit.runtime import Runtime


def _median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _calibrated(name: str) -> torch.nn.Module:
    """weights=None (seed 0) with batch-norm statistics estimated from one random batch, so outputs are
    O(1) rather than ~1e-9 and the error column means something."""
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    for bn in (m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)):
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    with torch.no_grad():
        model(torch.randn(4, 3, 224, 224, generator=torch.Generator().manual_seed(1)))
    return model.eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,mobilenet_v2")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{'model':<14} {'etkit portable (ms)':>20} {'eager (ms)':>11} {'ratio':>7} {'max abs err':>12}")
    for name in args.models.split(","):
        model = _calibrated(name)
        x = torch.randn(1, 3, 224, 224)
        program = etkit.to_edge(torch.export.export(model, (x,))).to_executorch()
        method = Runtime.get().load_program(program.buffer).load_method("forward")
        with torch.no_grad():
            ref = model(x)
            eager = _median_ms(lambda: model(x), args.repeats)
        (y,) = method.execute([x])
        ours = _median_ms(lambda: method.execute([x]), args.repeats)
        err = float((y - ref).abs().max())
        print(f"{name:<14} {ours:>20.1f} {eager:>11.1f} {ours / eager:>7.2f} {err:>12.2e}")


if __name__ == "__main__":
    main()
