"""How etkit's XNNPACK delegate scales from 1 to 2 threads on the benchmark models (issue 20, item 7).

    .venv/bin/python bench/threads.py [--models a,b] [--threads 1,2] [--repeats 30] [--rounds 3]

Each model of bench/xnnpack_vs_executorch.py (same weights, inputs and PT2E quantization) is lowered
once with etkit's XnnpackPartitioner; then, alternating thread counts over ``--rounds`` fresh processes
each (bench/pte_runner.py: ``etkit.runtime.set_num_threads`` before the method loads), the median
latency is taken (median over rounds of each process's median). Printed per model: the median ms at
each thread count and the speedup of the largest count over 1 thread. Targets: no model slower with
a second thread (speedup >= 1.0); ResNet-18 fp32 >= 1.6x. The SmolLM2 prefill/decode figures at 1
and 2 threads are in bench/llm.py.

Run it on a quiet machine: with 2 cores, anything else running takes the second thread's core.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import xnnpack_vs_executorch as models  # noqa: E402  (the model zoo and the fresh-process runner)

TARGETS = {"resnet18_fp32": 1.6}


def _lower(name: str, out: Path) -> tuple[Path, Path]:
    import etkit
    from etkit_xnnpack import XnnpackPartitioner

    factory, quantize = models.MODELS[name]
    model, inputs = factory()
    module = models._quantize(model, inputs, quantize) if quantize else model
    ep = torch.export.export(module, inputs)
    pte, saved = out / f"{name}.pte", out / f"{name}.inputs.pt"
    etkit.to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch() \
        .write_to_file(str(pte))
    torch.save(list(inputs), saved)
    return pte, saved


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(models.MODELS))
    parser.add_argument("--threads", default="1,2", type=lambda s: [int(t) for t in s.split(",")])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    names = args.models.split(",")
    unknown = sorted(set(names) - set(models.MODELS))
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {sorted(models.MODELS)}")
    out = Path(tempfile.mkdtemp(prefix="etkit-bench-threads-"))
    header = f"{'model':22s} " + " ".join(f"{f'{t} thr ms':>9s}" for t in args.threads) + \
        f" {'speedup':>8s}  target"
    print("etkit XNNPACK, median latency per thread count (fresh process per round)")
    print(header)
    failed = []
    for name in names:
        pte, inputs = _lower(name, out)
        runs = {t: [] for t in args.threads}
        for _ in range(args.rounds):
            for t in args.threads:
                result = models._run_pte("etkit", pte, inputs, t, args.repeats)
                if "error" in result:
                    raise SystemExit(f"{name}, {t} thread(s): {result['error']}")
                runs[t].append(result["median_ms"])
        ms = {t: statistics.median(v) for t, v in runs.items()}
        speedup = ms[args.threads[0]] / ms[args.threads[-1]]
        target = TARGETS.get(name, 1.0)
        ok = speedup >= target
        if not ok:
            failed.append(name)
        print(f"{name:22s} " + " ".join(f"{ms[t]:9.2f}" for t in args.threads) +
              f" {speedup:7.2f}x  >= {target:.1f}x {'met' if ok else 'MISSED'}", flush=True)
    print(f"targets missed: {', '.join(failed)}" if failed else "all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
