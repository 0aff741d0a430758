"""What an ETDump costs: latency of MobileNetV2 and MiniLM on XNNPACK (1 thread) with the tracer off,
with profiling (an ETDump of events only) and with intermediate outputs (every kernel output and
delegate argument copied into a debug buffer), as ratios to off, and the ETDump's size.

    .venv/bin/python bench/devtools_overhead.py [--repeats 30] [--rounds 5]

Each configuration is its own Program in one process; the rounds interleave them (off, profiling,
intermediates, off again, ...) so that a slow stretch of the machine hits all of them. "off (again)"
is a second tracer-off program: its ratio to the first is the noise floor of the measurement.
Latency is the median of the rounds' median Method.execute times, in ms (Python call included).
Targets (issue 22): off within noise of a build without the tracer; profiling <= 1.05x.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _mobilenet():
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.mobilenet_v2(weights=None).eval(), (torch.randn(1, 3, 224, 224),)


def _minilm():
    from tests.interop.models import build
    program = build("minilm")
    return program.model, program.inputs


MODELS = {"mobilenet_v2": _mobilenet, "minilm": _minilm}
CONFIGS = {
    "off": {},
    "profiling": {"enable_etdump": True},
    "intermediates": {"enable_etdump": True, "debug_buffer_size": 256 << 20},
    "off (again)": {},
}


def _median_ms(method, inputs, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        method.execute(inputs)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure(name: str, repeats: int, rounds: int) -> dict:
    import etkit
    from etkit.runtime import Runtime
    from etkit_xnnpack import XnnpackPartitioner

    model, inputs = MODELS[name]()
    ep = torch.export.export(model, tuple(inputs))
    pte = etkit.to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    runtime = Runtime.get()
    runtime.set_backend_option("XnnpackBackend", "num_threads", 1)
    inputs = list(inputs)
    loaded = {}
    for config, kwargs in CONFIGS.items():
        program = runtime.load_program(pte, **kwargs, **({"etdump_capacity": 1 << 18} if kwargs else {}))
        method = program.load_method("forward")
        method.execute(inputs)  # warm-up: the first call plans XNNPACK's runtime
        loaded[config] = (program, method)
    samples = {config: [] for config in CONFIGS}
    for _ in range(rounds):
        for config, (_, method) in loaded.items():
            samples[config].append(_median_ms(method, inputs, repeats))
    result = {config: statistics.median(values) for config, values in samples.items()}
    with tempfile.TemporaryDirectory() as tmp:
        sizes = {}
        for config in ("profiling", "intermediates"):
            program = loaded[config][0]
            executes = 1 + rounds * repeats
            program.write_etdump_result_to_file(Path(tmp) / "d.etdp", Path(tmp) / "d.bin")
            sizes[config] = ((Path(tmp) / "d.etdp").stat().st_size / executes,
                             (Path(tmp) / "d.bin").stat().st_size / executes, program.etdump_dropped)
    return {"ms": result, "sizes": sizes}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30, help="executes per round and configuration")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args(argv)
    print(f"XNNPACK, 1 thread; median of {args.rounds} rounds x {args.repeats} executes; ratio = config / off")
    print(f"{'model':<14}{'config':<16}{'ms':>9}{'ratio':>8}   ETDump per execute (events / debug buffer)")
    for name in args.models.split(","):
        facts = measure(name, args.repeats, args.rounds)
        off = facts["ms"]["off"]
        for config, ms in facts["ms"].items():
            size = facts["sizes"].get(config)
            extra = ""
            if size is not None:
                extra = f"   {size[0] / 1024:.1f} KiB / {size[1] / 1024:.1f} KiB"
                if size[2] != (0, 0):
                    extra += f" (dropped: {size[2][0]} events, {size[2][1]} tensors)"
            print(f"{name:<14}{config:<16}{ms:>9.3f}{ms / off:>7.3f}x{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
