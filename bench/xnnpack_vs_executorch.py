"""etkit's XNNPACK backend vs ExecuTorch 1.5.1's, ONNX Runtime and torch eager, on the same models, weights
and inputs.

    .venv/bin/python bench/xnnpack_vs_executorch.py [--models a,b] [--threads 1,2] [--repeats 30] [--out DIR]

For each model: etkit and ExecuTorch each lower the same ExportedProgram (int8 models: quantized once
with etkit's XNNPACKQuantizer, PT2E per-channel, static or dynamic, and saved, so both lower the same
graph) and run the .pte in fresh processes of their own (bench/pte_runner.py; ExecuTorch from the oracle
environment of scripts/et_oracle.sh, never imported by etkit), alternating the two systems over
``--rounds`` processes each so that load on the machine hits both alike. Printed per model and thread
count: median latency (median over rounds of each process's median) of etkit / ExecuTorch / ONNX
Runtime (fp32 models only: exported with ``torch.onnx.export(dynamo=True)``, CPU execution provider, run
in this process) / eager (int8: the converted PT2E model in eager, a float simulation), the ratio
etkit/ExecuTorch, lowering time (to_edge_transform_and_lower + to_executorch + serialization;
torch.export excluded), load time, .pte size and the peak RSS of the running process.

2-thread figures are noisy on this shared 2-core machine; the targets (issue 4) are for 1 thread.
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

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(REPO / "examples"))
from example_models import calibrated_mobilenet_v2  # noqa: E402  (shared with the demo and interop suite)
from tests.interop.oracle import oracle_dir  # noqa: E402

BENCH = Path(__file__).resolve().parent


def _randn(seed, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _resnet18():
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None).eval()


def _encoder():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False).eval()


def _minilm():
    from tests.interop.models import build
    program = build("minilm")
    return program.model, program.inputs


IMAGE = (_randn(1, 1, 3, 224, 224),)
CALIBRATION = [(_randn(10 + i, 1, 3, 224, 224),) for i in range(4)]

#: name -> (factory returning (model, inputs), quantization: None, "static" or "dynamic")
MODELS = {
    "mobilenet_v2_fp32": (lambda: (calibrated_mobilenet_v2(), IMAGE), None),
    "mobilenet_v2_int8": (lambda: (calibrated_mobilenet_v2(), IMAGE), "static"),
    "resnet18_fp32": (lambda: (_resnet18(), IMAGE), None),
    "resnet18_int8": (lambda: (_resnet18(), IMAGE), "static"),
    "transformer_encoder": (lambda: (_encoder(), (_randn(2, 1, 128, 256),)), None),
    "minilm_fp32": (_minilm, None),
    "minilm_dynamic_int8": (_minilm, "dynamic"),
}


def _quantize(model, inputs, mode: str):
    """PT2E per-channel int8: static (calibrated on CALIBRATION) or dynamic (linears, activations
    quantized at run time)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from etkit_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=mode == "dynamic")
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), XNNPACKQuantizer().set_global(config))
    with torch.no_grad():
        for batch in (CALIBRATION if mode == "static" else [inputs]):
            prepared(*batch)
    return convert_pt2e(prepared)


def _eager_ms(module, inputs, threads: int, repeats: int) -> float:
    torch.set_num_threads(threads)
    with torch.no_grad():
        module(*inputs)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            module(*inputs)
            times.append((time.perf_counter() - start) * 1000)
    torch.set_num_threads(1)
    return statistics.median(times)


def _ort_ms(model, inputs, out: Path, name: str, threads: list[int], repeats: int) -> dict:
    """ONNX Runtime (CPU execution provider) median ms per thread count, on the same weights and
    inputs: the model exported with ``torch.onnx.export(dynamo=True)``. Empty if export fails."""
    import onnxruntime as ort

    path = out / f"{name}.onnx"
    try:
        torch.onnx.export(model, inputs, dynamo=True, verbose=False).save(str(path))
    except Exception as exc:  # noqa: BLE001 - report and go on; ORT is a reference column only
        print(f"[ort] {name}: export failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        return {}
    result = {}
    for t in threads:
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = t, 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        feeds = {i.name: x.numpy() for i, x in zip(session.get_inputs(), inputs)}
        for _ in range(3):
            session.run(None, feeds)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            session.run(None, feeds)
            times.append((time.perf_counter() - start) * 1000)
        result[t] = statistics.median(times)
    return result


def _run_pte(runtime: str, pte: Path, inputs: Path, threads: int, repeats: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    if runtime == "executorch":
        env["PYTHONPATH"] = str(oracle_dir())
    cmd = [sys.executable, str(BENCH / "pte_runner.py"), "--runtime", runtime, "--pte", str(pte),
           "--inputs", str(inputs), "--threads", str(threads), "--repeats", str(repeats)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def prepare(names: list[str], out: Path, threads: list[int], repeats: int) -> dict:
    """Export (and quantize), lower with etkit, time eager; returns per-model facts."""
    import etkit
    from etkit_xnnpack import XnnpackPartitioner

    facts = {}
    for name in names:
        factory, quantize = MODELS[name]
        model, inputs = factory()
        module = _quantize(model, inputs, quantize) if quantize else model
        ep = torch.export.export(module, inputs)
        torch.export.save(ep, out / f"{name}.pt2")
        torch.save(list(inputs), out / f"{name}.inputs.pt")
        start = time.perf_counter()
        edge = etkit.to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
        buffer = edge.to_executorch().buffer
        lower_s = time.perf_counter() - start
        (out / f"etkit_{name}.pte").write_bytes(buffer)
        report = edge.partition_reports["forward"][0]
        facts[name] = {"etkit_lower_s": lower_s, "etkit_delegates": report.num_partitions,
                       "etkit_outside": len(report.rejected),
                       "eager_ms": {t: _eager_ms(module, inputs, t, repeats) for t in threads},
                       "ort_ms": {} if quantize else _ort_ms(model, inputs, out, name, threads, repeats)}
        print(f"[etkit] {name}: lowered in {lower_s:.2f} s, {report.num_partitions} delegate(s), "
              f"{len(report.rejected)} op(s) outside", flush=True)
    return facts


def lower_with_executorch(names: list[str], out: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(oracle_dir())
    subprocess.run([sys.executable, str(BENCH / "et_lower.py"), str(out), *names], env=env, check=True)


def _fmt(value, spec=".2f") -> str:
    return "-" if value is None else format(value, spec)


def _interleaved(runtime_a: str, pte_a: Path, runtime_b: str, pte_b: Path, inputs: Path, threads: int,
                 repeats: int, rounds: int) -> tuple[dict, dict]:
    """Run A and B alternately, ``rounds`` times each (so load on the machine hits both alike);
    per system: the median over rounds of each round's median, and the first round's load/RSS."""
    results: dict[str, list] = {runtime_a: [], runtime_b: []}
    for _ in range(rounds):
        for runtime, pte in ((runtime_a, pte_a), (runtime_b, pte_b)):
            results[runtime].append(_run_pte(runtime, pte, inputs, threads, repeats))
    merged = []
    for runtime in (runtime_a, runtime_b):
        runs = results[runtime]
        errors = [r for r in runs if "error" in r]
        if errors:
            merged.append(errors[0])
            continue
        first = dict(runs[0])
        first["median_ms"] = statistics.median(r["median_ms"] for r in runs)
        merged.append(first)
    return merged[0], merged[1]


def report(names, facts, out: Path, threads: list[int], repeats: int, rounds: int) -> None:
    header = ("model", "thr", "etkit ms", "ET ms", "etkit/ET", "ORT ms", "eager ms", "lower etkit s", "lower ET s",
              "lower ratio", "load etkit/ET ms", "size etkit/ET MB", "RSS etkit/ET MB", "delegates etkit/ET")
    rows = [header]
    for name in names:
        et_meta = json.loads((out / f"et_{name}.json").read_text())
        et_lower = et_meta["lower_s"] + et_meta["to_executorch_s"]
        sizes = [(out / f"{p}_{name}.pte").stat().st_size / 1e6 for p in ("etkit", "et")]
        for t in threads:
            mine = _interleaved("etkit", out / f"etkit_{name}.pte", "executorch", out / f"et_{name}.pte",
                                out / f"{name}.inputs.pt", t, repeats, rounds)
            mine, theirs = mine
            if "error" in mine or "error" in theirs:
                print(f"{name} ({t} thread(s)): etkit {mine.get('error', 'ok')}; ExecuTorch {theirs.get('error', 'ok')}")
                continue
            rows.append((name, str(t), _fmt(mine["median_ms"]), _fmt(theirs["median_ms"]),
                         _fmt(mine["median_ms"] / theirs["median_ms"]), _fmt(facts[name]["ort_ms"].get(t)),
                         _fmt(facts[name]["eager_ms"][t]),
                         _fmt(facts[name]["etkit_lower_s"]), _fmt(et_lower),
                         _fmt(facts[name]["etkit_lower_s"] / et_lower),
                         f"{mine['load_ms']:.0f}/{theirs['load_ms']:.0f}", f"{sizes[0]:.1f}/{sizes[1]:.1f}",
                         f"{mine['peak_rss_mb']:.0f}/{theirs['peak_rss_mb']:.0f}",
                         f"{facts[name]['etkit_delegates']}/{et_meta['delegates']}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    print()
    for row in rows:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {', '.join(MODELS)}")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=20, help="timed runs per process")
    ap.add_argument("--rounds", type=int, default=3, help="processes per system, alternating etkit/ExecuTorch")
    ap.add_argument("--out", type=Path, default=None, help="keep the .pte files here (default: a temp dir)")
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; choose from {', '.join(MODELS)}")
    threads = [int(t) for t in args.threads.split(",")]
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="etkit-bench-") as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        facts = prepare(names, out, threads, args.repeats)
        lower_with_executorch(names, out)
        report(names, facts, out, threads, args.repeats, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
