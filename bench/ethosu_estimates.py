"""Vela's performance estimates for int8 models lowered with etkit-ethosu, per Ethos-U target.

    .venv/bin/python bench/ethosu_estimates.py [--models mobilenet_v2,digits_cnn]
                                               [--targets ethos-u55-128,ethos-u85-256]

Models: torchvision MobileNetV2 (random weights with batch-norm statistics estimated from random images,
examples/example_models.py; 1x3x224x224) and a small CNN trained here on scikit-learn's ``load_digits``
(1x1x8x8). Each is quantized once with ``quantize_for_ethosu`` (per-channel int8 weights; MobileNetV2 calibrated
on 4 random images, the CNN on every training image) and lowered with ``to_edge_transform_and_lower`` +
``EthosUPartitioner`` for each target. Per target it prints the Ethos-U partitions, the delegated ops (compute
ops / all nodes, quantize and dequantize included), Vela's estimate for the program (cycles, inference time and
inferences/s at the system config's clock, MACs, SRAM used, encoded weight bytes; summed over partitions), the
wall time to export + quantize (shared by the targets) and to lower (Vela included), the ``.pte`` size, and how
the program run on the TOSA reference model agrees with the PT2E reference model: max |diff| in output
quantization steps (LSBs) over the images run (MobileNetV2: 2 random images; CNN: the 360 test images, whose
accuracy is printed too). Then the U85/U55 cycle and time ratios per model.

Vela's figures come from its performance model; they are estimates, not measurements on an NPU.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")

MODELS = ("mobilenet_v2", "digits_cnn")
TARGETS = ("ethos-u55-128", "ethos-u85-256")


# ----------------------------------------------------------------------------------------------- models

def _mobilenet_v2():
    """(float model, example inputs, calibration batches, evaluation inputs, labels or None)."""
    from example_models import calibrated_mobilenet_v2

    model = calibrated_mobilenet_v2()
    gen = torch.Generator().manual_seed(1)
    example = (torch.randn(1, 3, 224, 224, generator=gen),)
    calibration = [(torch.randn(1, 3, 224, 224, generator=gen),) for _ in range(4)]
    images = [torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(100 + i)) for i in range(2)]
    return model, example, calibration, images, None


def _digits_cnn():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from torch import nn

    images, labels = load_digits(return_X_y=True)
    images = (images / 8.0 - 1.0).astype(np.float32).reshape(-1, 1, 8, 8)
    x_train, x_test, y_train, y_test = (torch.from_numpy(a) for a in train_test_split(
        images, labels, test_size=0.2, random_state=0, stratify=labels))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(32 * 4 * 4, 10))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a net this small trains faster on one thread
    try:
        order = torch.Generator().manual_seed(0)
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        for _ in range(10):
            perm = torch.randperm(len(x_train), generator=order)
            for i in range(0, len(x_train), 64):
                idx = perm[i:i + 64]
                optimizer.zero_grad()
                nn.functional.cross_entropy(model(x_train[idx]), y_train[idx]).backward()
                optimizer.step()
    finally:
        torch.set_num_threads(threads)
    model.eval()
    calibration = [(x_train[i:i + 1],) for i in range(len(x_train))]
    return model, (x_test[:1],), calibration, [x_test[i:i + 1] for i in range(len(x_test))], y_test


BUILDERS = {"mobilenet_v2": _mobilenet_v2, "digits_cnn": _digits_cnn}


# ----------------------------------------------------------------------------------------------- measuring

def _output_qparams(reference) -> tuple[float, int]:
    (out,) = [n for n in reference.graph.nodes if n.op == "output"]
    node = out.args[0][0]
    return float(node.args[1]), int(node.args[2])


def _codes(y, qparams):
    return (torch.round(y / qparams[0]) + qparams[1]).to(torch.int32)


def _measure(name: str, targets) -> tuple[list[dict], dict]:
    import etkit
    from etkit_ethosu import (EthosUCompileSpec, EthosUPartitioner, partition_estimates, quantize_for_ethosu,
                              run_on_tosa_reference)

    model, example, calibration, images, labels = BUILDERS[name]()
    start = time.perf_counter()
    reference = quantize_for_ethosu(model, example, calibration=calibration)
    ep = torch.export.export(reference, example)
    quantize_s = time.perf_counter() - start
    qparams = _output_qparams(reference)
    with torch.no_grad():
        expected = [reference(x) for x in images]
    info = {"quantize_s": quantize_s, "output_scale": qparams[0], "input_shape": tuple(example[0].shape),
            "images": len(images)}
    if labels is not None:
        with torch.no_grad():
            info["float_acc"] = float((torch.cat([model(x) for x in images]).argmax(1) == labels).float().mean())
        info["pt2e_acc"] = float((torch.cat(expected).argmax(1) == labels).float().mean())

    rows = []
    for target in targets:
        partitioner = EthosUPartitioner(EthosUCompileSpec(target))
        start = time.perf_counter()
        manager = etkit.to_edge_transform_and_lower(ep, partitioner=[partitioner])
        lower_s = time.perf_counter() - start
        report = partitioner.report()
        pte = manager.to_executorch().buffer
        results = partition_estimates(manager)
        summaries = [r.summary for r in results]
        actual = [run_on_tosa_reference(manager, [x])[0] for x in images]
        lsb = torch.cat([(_codes(a, qparams) - _codes(e, qparams)).abs().flatten() for a, e in zip(actual, expected)])
        compute = sum(v for k, v in report.delegated.items() if not k.startswith("quantized_decomposed."))
        row = {
            "model": name, "target": target, "partitions": report.num_partitions, "rejected": len(report.rejected),
            "ops": f"{compute}/{report.num_delegated}",
            "cycles": sum(int(s["cycles_total"]) for s in summaries),
            "time_ms": sum(float(s["inference_time"]) for s in summaries) * 1e3,
            "macs": sum(int(s["nn_macs"]) for s in summaries),
            "sram_kib": max((float(s["sram_memory_used"]) for s in summaries), default=0.0),
            "weights_b": sum(int(s["total_npu_encoded_weights"]) for s in summaries),
            "quantize_s": quantize_s, "lower_s": lower_s, "pte_b": len(pte),
            "max_lsb": int(lsb.max()), "mean_lsb": float(lsb.float().mean()),
            "clock_mhz": summaries[0].get("core_clock", 0) / 1e6 if summaries else 0.0,
            "system": f"{summaries[0].get('system_config', '?')}, {summaries[0].get('memory_mode', '?')}"
            if summaries else "-",
        }
        row["inf_s"] = 1e3 / row["time_ms"] if row["time_ms"] else 0.0
        if labels is not None:
            row["tosa_acc"] = float((torch.cat(actual).argmax(1) == labels).float().mean())
        rows.append(row)
        print(f"  {name} / {target}: lowered in {lower_s:.1f} s", file=sys.stderr, flush=True)
    return rows, info


# ----------------------------------------------------------------------------------------------- output

def _header() -> str:
    from etkit_ethosu.vela_compile import vela_version

    try:
        from importlib.metadata import version
        tosa_tools = version("tosa-tools")
    except Exception:  # noqa: BLE001
        tosa_tools = "?"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"Ethos-U estimates by Vela {vela_version()} (its performance model: ESTIMATES, not measurements on an "
            f"NPU)\nhost (wall times, TOSA reference runs): {cpu}, {os.cpu_count()} cores, {platform.system()} "
            f"{platform.release()}; torch {torch.__version__}, tosa-tools {tosa_tools}, "
            f"{time.strftime('%Y-%m-%d %H:%M %Z')}")


def _table(rows: list[dict]) -> str:
    columns = [("model", "model", "<", "{}"), ("target", "target", "<", "{}"), ("part.", "partitions", ">", "{}"),
               ("ops", "ops", ">", "{}"), ("est. cycles", "cycles", ">", "{:,}"),
               ("est. ms", "time_ms", ">", "{:.3f}"), ("est. inf/s", "inf_s", ">", "{:,.0f}"),
               ("MACs", "macs", ">", "{:,}"), ("SRAM KiB", "sram_kib", ">", "{:.1f}"),
               ("weights B", "weights_b", ">", "{:,}"), ("quant s", "quantize_s", ">", "{:.1f}"),
               ("lower s", "lower_s", ">", "{:.1f}"), (".pte B", "pte_b", ">", "{:,}"),
               ("max LSB", "max_lsb", ">", "{}"), ("mean LSB", "mean_lsb", ">", "{:.2f}")]
    cells = [[fmt.format(r[key]) for _, key, _, fmt in columns] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (h, *_) in enumerate(columns)]

    def line(values):
        return "  ".join(f"{v:{a}{w}}" for v, (_, _, a, _), w in zip(values, columns, widths)).rstrip()

    out = [line([h for h, *_ in columns]), line(["-" * w for w in widths])]
    out += [line(c) for c in cells]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {', '.join(MODELS)}")
    ap.add_argument("--targets", default=",".join(TARGETS), help="comma-separated Vela accelerator configs")
    args = ap.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    targets = [t for t in args.targets.split(",") if t]
    unknown = [m for m in models if m not in BUILDERS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; choose from {', '.join(MODELS)}")

    print(_header())
    rows, infos = [], {}
    for name in models:
        model_rows, infos[name] = _measure(name, targets)
        rows += model_rows
    print()
    print(_table(rows))
    print()
    print("part. = Ethos-U partitions; ops = delegated compute ops / all delegated nodes (quantize and dequantize "
          "included);\nest. * = Vela's estimate for the whole program at the target's system config clock; SRAM = "
          "the largest\npartition's; weights = Vela-encoded weight bytes; quant s = export + quantize + calibrate "
          "(once per model),\nlower s = to_edge_transform_and_lower (Vela included); max/mean LSB = |TOSA reference "
          "- PT2E reference|\nin output quantization steps.")
    for row in rows:
        if row["rejected"]:
            print(f"{row['model']} / {row['target']}: {row['rejected']} node(s) left outside the NPU")
    print()
    for target in dict.fromkeys(r["target"] for r in rows):
        row = next(r for r in rows if r["target"] == target)
        print(f"{target}: Vela system config {row['system']}, core clock {row['clock_mhz']:g} MHz")
    for name, info in infos.items():
        parts = [f"{name}: input {'x'.join(map(str, info['input_shape']))}, output scale {info['output_scale']:.4g}, "
                 f"{info['images']} image(s) compared"]
        if "float_acc" in info:
            tosa = ", ".join(f"{r['target']} {r['tosa_acc']:.2%}" for r in rows if r["model"] == name)
            parts.append(f"test accuracy float {info['float_acc']:.2%}, PT2E {info['pt2e_acc']:.2%}, "
                         f"TOSA reference {tosa}")
        print("; ".join(parts))
    by_key = {(r["model"], r["target"]): r for r in rows}
    for name in models:
        u55 = next((by_key[(name, t)] for t in targets if t.startswith("ethos-u55") and (name, t) in by_key), None)
        u85 = next((by_key[(name, t)] for t in targets if t.startswith("ethos-u85") and (name, t) in by_key), None)
        if u55 and u85 and u55["cycles"] and u55["time_ms"]:
            print(f"{name}: U85/U55 estimated cycles {u85['cycles'] / u55['cycles']:.2f} "
                  f"({u85['target']} vs {u55['target']}), estimated time {u85['time_ms'] / u55['time_ms']:.2f} "
                  f"(the clocks differ)")
    print("\nVela's cycles, times, inferences/s and memory figures are model estimates, not measurements on hardware.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
