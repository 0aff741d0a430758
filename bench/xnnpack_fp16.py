"""What float16 does on this machine's CPU with etkit's XNNPACK backend (XNNPACK 2024-11).

    .venv/bin/python bench/xnnpack_fp16.py [--repeats 30]

Prints, at 1 thread, the median latency of the same weights run three ways: float32; float32 with
``XnnpackPartitioner(fp16_inference=True)`` (XNNPACK converts the graph to fp16 when it creates the
runtime); and the ``model.half()`` program. Models: MobileNetV2 (1x3x224x224) and an 8-layer MLP
(1024 wide, batch 64). The ratio column is latency / float32 latency. Also prints the fp16 runs' max
error relative to the float32 output's spread.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from example_models import calibrated_mobilenet_v2  # noqa: E402


def _median_ms(method, inputs, repeats: int) -> float:
    for _ in range(3):
        method.execute(inputs)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        method.execute(inputs)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _lowered(model, x, **kwargs):
    import etkit
    from etkit.runtime import Runtime
    from etkit_xnnpack import XnnpackPartitioner

    edge = etkit.to_edge_transform_and_lower(torch.export.export(model, (x,)),
                                             partitioner=[XnnpackPartitioner(**kwargs)])
    return Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args(argv)
    from etkit.runtime import set_num_threads

    set_num_threads(1)
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)]).eval()
    models = {"mobilenet_v2": (calibrated_mobilenet_v2(), torch.randn(1, 3, 224, 224)),
              "mlp_8x1024": (mlp, torch.randn(64, 1024))}
    print(f"{'model':14} {'variant':26} {'median ms':>9} {'ratio':>6} {'max err / spread':>17}")
    for name, (model, x) in models.items():
        with torch.no_grad():
            reference = model(x)
        spread = float(reference.max() - reference.min())
        runs = [("float32", model, x, {}), ("float32, fp16_inference", model, x, {"fp16_inference": True}),
                ("model.half()", copy.deepcopy(model).half(), x.half(), {})]
        base = None
        for variant, m, inp, kwargs in runs:
            method = _lowered(m, inp, **kwargs)
            out = method.execute([inp])[0].float()
            ms = _median_ms(method, [inp], args.repeats)
            base = base or ms
            error = float((out - reference).abs().max()) / spread
            print(f"{name:14} {variant:26} {ms:9.2f} {ms / base:6.2f} {error:17.2e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
