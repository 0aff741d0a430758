"""What the XNNPACK delegate's process-wide weights cache saves when a program is loaded again.

    .venv/bin/python bench/xnnpack_weights_cache.py [--models mobilenet_v2,resnet18,minilm] [--loads 3]

For each model (fp32, whole network in XNNPACK, 1 thread) one process loads the same .pte ``--loads``
times, keeping every method alive, first with the shared cache (the default) and then, in a second
process, with ``set_backend_option("XnnpackBackend", "weights_cache", 0)`` (a private cache per load,
etkit's behaviour before the shared cache). It prints the load time of the first and of a later load
(median, ms), the packed-weight bytes the cache holds (MB), and the process's resident memory after all
loads (VmRSS, MB). Every loaded method is run once and checked against torch eager (max abs error).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _build(name: str, out: Path) -> None:
    import torch
    import torchvision

    import etkit
    from etkit_xnnpack import XnnpackPartitioner

    torch.manual_seed(0)
    if name == "mobilenet_v2":
        model, inputs = torchvision.models.mobilenet_v2(weights=None).eval(), (torch.randn(1, 3, 224, 224),)
    elif name == "resnet18":
        model, inputs = torchvision.models.resnet18(weights=None).eval(), (torch.randn(1, 3, 224, 224),)
    elif name == "minilm":
        from example_models import minilm

        model, inputs = minilm(["etkit packs weights once.", "A second sentence."], max_length=128)
    else:
        raise SystemExit(f"unknown model {name!r}")
    edge = etkit.to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[XnnpackPartitioner()])
    edge.to_executorch().write_to_file(str(out / f"{name}.pte"))
    with torch.no_grad():
        torch.save({"inputs": inputs, "expected": model(*inputs)}, out / f"{name}.pt")


def _child(pte: str, data: str, loads: int, shared: bool) -> None:
    import torch

    from etkit.runtime import Runtime, set_num_threads
    from etkit_xnnpack import weights_cache_stats

    torch.set_num_threads(1)
    set_num_threads(1)
    saved = torch.load(data)
    runtime = Runtime.get()
    runtime.set_backend_option("XnnpackBackend", "weights_cache", 1 if shared else 0)
    methods, load_ms = [], []
    for _ in range(loads):
        start = time.perf_counter()
        methods.append(runtime.load_program(pte).load_method("forward"))
        load_ms.append((time.perf_counter() - start) * 1000)
    err = max(float((m.execute(list(saved["inputs"]))[0] - saved["expected"]).abs().max()) for m in methods)
    print(json.dumps({"first_ms": load_ms[0], "later_ms": statistics.median(load_ms[1:]),
                      "cache_mb": weights_cache_stats()["bytes"] / 2**20, "rss_mb": _rss_mb(), "err": err}))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mobilenet_v2,resnet18,minilm")
    ap.add_argument("--loads", type=int, default=3)
    ap.add_argument("--child", nargs=4, metavar=("PTE", "DATA", "LOADS", "SHARED"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        pte, data, loads, shared = args.child
        _child(pte, data, int(loads), shared == "1")
        return 0
    if args.loads < 2:
        raise SystemExit("--loads must be at least 2")
    print(f"{args.loads} loads of the same .pte per process, all kept alive; XNNPACK 1 thread; fp32")
    print(f"{'model':13} {'cache':>7} {'1st load ms':>11} {'later load ms':>13} {'packed MB':>9} "
          f"{'RSS MB':>7} {'max abs err':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for name in args.models.split(","):
            _build(name, out)
            for shared in (True, False):
                cmd = [sys.executable, __file__, "--child", str(out / f"{name}.pte"), str(out / f"{name}.pt"),
                       str(args.loads), "1" if shared else "0"]
                env = dict(os.environ, HF_HUB_OFFLINE="1")
                line = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout.splitlines()[-1]
                r = json.loads(line)
                print(f"{name:13} {'shared' if shared else 'private':>7} {r['first_ms']:11.1f} {r['later_ms']:13.1f} "
                      f"{r['cache_mb']:9.1f} {r['rss_mb']:7.0f} {r['err']:11.1e}", flush=True)
    print("packed MB: bytes held by the shared cache (0 with private caches, whose blocks it does not see)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
