"""etkit's Vulkan delegate on this machine's Vulkan device (Mesa's lavapipe: a CPU emulation of a GPU), next
to etkit's XNNPACK delegate and torch eager, on the four models of the Vulkan issue.

    .venv/bin/python bench/vulkan.py [--repeats 5] [--models mobilenet_v2,resnet18,encoder,minilm]
                                     [--lavapipe-threads 1]

lavapipe runs shaders on the CPU, so the latency column is not a GPU figure: the point is correctness and
overhead. Printed per model: median latency of Vulkan, XNNPACK and eager (1 thread each; lavapipe's worker
threads are set by --lavapipe-threads through LP_NUM_THREADS), the number of dispatches, the share of the
delegate call spent inside shaders (sum of the device-timed dispatches; the rest is host staging, submission
and barriers), and the max error vs eager relative to the output range. Then the per-dispatch overhead: the
extra time of a chain of 64 one-element adds over a chain of 1, per dispatch.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))


def _models(names):
    import torch
    import torchvision

    from example_models import calibrated_mobilenet_v2, minilm

    out = {}
    torch.manual_seed(0)
    if "mobilenet_v2" in names:
        out["mobilenet_v2"] = (calibrated_mobilenet_v2(), (torch.randn(1, 3, 224, 224),))
    if "resnet18" in names:
        model = torchvision.models.resnet18(weights=None)
        model.train()
        with torch.no_grad():
            for i in range(2):
                model(torch.randn(4, 3, 224, 224, generator=torch.Generator().manual_seed(100 + i)))
        out["resnet18"] = (model.eval(), (torch.randn(1, 3, 224, 224),))
    if "encoder" in names:
        layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
        out["encoder"] = (torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).eval(),
                          (torch.randn(1, 128, 256),))
    if "minilm" in names:
        model, inputs = minilm(["etkit runs all-MiniLM-L6-v2 on Vulkan.", "A second sentence, for a batch of two."],
                               max_length=128)
        out["minilm"] = (model, inputs)
    return out


def _median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _lower(model, inputs, partitioner):
    import torch

    import etkit
    from etkit.runtime import Runtime

    edge = etkit.to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[partitioner])
    report = edge.partition_reports["forward"][0]
    return Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward"), report


def _shader_share(method, inputs) -> tuple[int, float]:
    from etkit.runtime import ProfileEventKind

    method.enable_profiling()
    method.execute(list(inputs))
    events = method.profiling_events()
    method.enable_profiling(False)
    calls = sum(e.duration_ns for e in events if e.kind == ProfileEventKind.DELEGATE_CALL)
    dispatches = [e for e in events if e.kind == ProfileEventKind.DELEGATE_INTERNAL and "/" in e.name]
    inside = sum(e.duration_ns for e in dispatches)
    return len(dispatches), inside / calls if calls else 0.0


def _dispatch_overhead(repeats: int) -> float:
    import torch

    from etkit_vulkan import VulkanPartitioner

    class Chain(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.n = n

        def forward(self, x):
            for _ in range(self.n):
                x = x + 1.0
            return x

    x = torch.zeros(1)
    per = {}
    for n in (1, 64):
        method, _ = _lower(Chain(n), (x,), VulkanPartitioner())
        per[n] = _median_ms(lambda: method.execute([x]), repeats * 4)
    return (per[64] - per[1]) / 63


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--models", default="mobilenet_v2,resnet18,encoder,minilm")
    ap.add_argument("--lavapipe-threads", type=int, default=1)
    args = ap.parse_args(argv)
    os.environ["LP_NUM_THREADS"] = str(args.lavapipe_threads)  # read when lavapipe starts (first Vulkan use)

    import torch

    from etkit.runtime import set_num_threads
    from etkit_vulkan import VulkanPartitioner
    from etkit_vulkan.plugin import availability
    from etkit_xnnpack import XnnpackPartitioner

    a = availability()
    if not a.available:
        print(f"no Vulkan device: {a.reason}")
        return 1
    from etkit_vulkan import _delegate

    print(f"Vulkan device: {_delegate.probe()[1]}; lavapipe threads {args.lavapipe_threads}; XNNPACK and eager "
          f"1 thread; median of {args.repeats} runs")
    torch.set_num_threads(1)
    set_num_threads(1)
    header = (f"{'model':13} {'vulkan ms':>10} {'xnnpack ms':>10} {'eager ms':>9} {'vk/xnn':>7} {'vk/eager':>8} "
              f"{'dispatches':>10} {'in shaders':>10} {'err/range':>9}")
    print(header)
    for name, (model, inputs) in _models(args.models.split(",")).items():
        with torch.no_grad():
            ref = model(*inputs)
        vk, report = _lower(model, inputs, VulkanPartitioner())
        xnn, _ = _lower(model, inputs, XnnpackPartitioner())
        out = vk.execute(list(inputs))[0]
        err = (out - ref).abs().max().item() / max(1e-12, (ref.max() - ref.min()).item())
        t_vk = _median_ms(lambda: vk.execute(list(inputs)), args.repeats)
        t_xnn = _median_ms(lambda: xnn.execute(list(inputs)), max(args.repeats, 10))
        with torch.no_grad():
            t_eager = _median_ms(lambda: model(*inputs), max(args.repeats, 10))
        dispatches, share = _shader_share(vk, inputs)
        print(f"{name:13} {t_vk:10.1f} {t_xnn:10.2f} {t_eager:9.2f} {t_vk / t_xnn:7.1f} {t_vk / t_eager:8.1f} "
              f"{dispatches:10d} {share * 100:9.1f}% {err:9.1e}", flush=True)
        if report.rejected:
            print(f"{'':13} ({len(report.rejected)} ops outside Vulkan: "
                  f"{', '.join(sorted({r.target for r in report.rejected}))})")
    print(f"per-dispatch overhead (a chain of one-element adds, 64 vs 1): {_dispatch_overhead(args.repeats):.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
