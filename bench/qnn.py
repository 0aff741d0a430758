"""QNN HTP simulator figures: compile time, context size, load time, simulator latency and accuracy per model
and scheme.

    .venv/bin/python bench/qnn.py [--models mobilenet_v2,minilm] [--schemes 8a8w,16a8w,fp16] [--runs 3]

Each model is lowered with ``QnnPartitioner`` (SM8650, HTP v75) as 8a8w and 16a8w (``QnnQuantizer``,
per-channel weights, calibrated on the benchmark input) and as fp16, written to a .pte, loaded with etkit's
runtime and run on the x86 HTP simulator of onnxruntime-qnn (the simulator's latency says nothing about a
phone's). Lowering time includes export and, for the quantized schemes, quantization and calibration; "compile"
is the HTP prepare alone (summed over partitions). Accuracy is against the PT2E reference model in eager
(quantized schemes) or torch eager (fp16): cosine similarity, largest absolute difference, and that difference
in quantization steps of the output (its range over ``2**bits - 1``), largest and mean; and how far the PT2E
reference itself is from the float model (cosine).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "plugins", "qnn", "tests"))


def _models():
    from example_models import calibrated_mobilenet_v2, minilm

    mv2 = calibrated_mobilenet_v2()
    text = "A quick brown fox jumps over the lazy dog near the river bank."
    bert, inputs = minilm([text], max_length=16)
    return {"mobilenet_v2": (mv2, (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1)),)),
            "minilm": (bert, inputs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,minilm")
    parser.add_argument("--schemes", default="8a8w,16a8w,fp16")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import etkit
    import etkit_qnn.htp_compile as htp
    from etkit.runtime import Runtime
    from etkit_qnn import QnnPartitioner, generate_htp_compiler_spec, generate_qnn_executorch_compiler_spec, quantize_for_qnn
    from etkit_qnn.payload import unpack
    from etkit_qnn.quantizer import QuantDtype
    from qnn_helpers import output_step

    compile_seconds = []
    original = htp.compile_onnx

    def timed(*a, **k):
        start = time.perf_counter()
        try:
            return original(*a, **k)
        finally:
            compile_seconds.append(time.perf_counter() - start)

    htp.compile_onnx = timed
    import etkit_qnn.preprocess as pre
    pre.compile_onnx = timed

    models = _models()
    print("| model | scheme | partitions | lowering s | HTP compile s | context bytes | load s | simulator run ms "
          "(median) | cosine | max abs diff | output steps max / mean | reference vs float cosine |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.models.split(","):
        model, inputs = models[name]
        for scheme in args.schemes.split(","):
            compile_seconds.clear()
            start = time.perf_counter()
            program = model.eval() if scheme == "fp16" else \
                quantize_for_qnn(model, inputs, quant_dtype=QuantDtype[f"use_{scheme}"])
            specs = generate_qnn_executorch_compiler_spec(
                soc_model="SM8650", backend_options=generate_htp_compiler_spec(use_fp16=scheme == "fp16"))
            edge = etkit.to_edge_transform_and_lower(torch.export.export(program, inputs),
                                                     partitioner=[QnnPartitioner(specs)])
            lowering = time.perf_counter() - start
            report = edge.partition_reports["forward"][0]
            gm = edge.exported_program().graph_module
            context = sum(len(unpack(m.processed_bytes).context_binary) for _, m in gm.named_children())
            buffer = edge.to_executorch().buffer
            start = time.perf_counter()
            method = Runtime.get().load_program(buffer).load_method("forward")
            load = time.perf_counter() - start
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                (out,) = method.execute(list(inputs))
                times.append((time.perf_counter() - start) * 1e3)
            with torch.no_grad():
                expected, exact = program(*inputs), model(*inputs)
            cos = torch.nn.functional.cosine_similarity
            cosine = float(cos(out.flatten(), expected.flatten(), dim=0))
            ref_cosine = "" if scheme == "fp16" else f"{float(cos(expected.flatten(), exact.flatten(), dim=0)):.4f}"
            worst = float((out - expected).abs().max())
            step = output_step(expected, scheme)
            mean = float((out - expected).abs().mean())
            steps = "" if scheme == "fp16" else f"{worst / step:.1f} / {mean / step:.2f}"
            print(f"| {name} | {scheme} | {report.num_partitions} | {lowering:.1f} | {sum(compile_seconds):.1f} | "
                  f"{context:,} | {load:.2f} | {statistics.median(times):.0f} | {cosine:.5f} | {worst:.3g} | "
                  f"{steps} | {ref_cosine} |", flush=True)



if __name__ == "__main__":
    main()
