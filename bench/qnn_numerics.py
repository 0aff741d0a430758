"""The QNN HTP simulator's numerics behind etkit-qnn's workarounds (docs/design/qnn-route.md section 5b).

    .venv/bin/python bench/qnn_numerics.py [--skip-model]

Each section compares the HTP simulator (onnxruntime-qnn, SM8650 / v75) with a float32 emulation of the same
QDQ graph (ONNX Runtime's CPU provider, the PT2E reference's arithmetic) or with the PT2E reference itself, in
quantization steps of the result:

1. a 16-bit LayerNorm feeding a FullyConnected (hand-built graph), as is and with the exporter's ``Mul`` by 1;
2. op cases of plugins/qnn/tests/test_qnn_ops.py at 16a8w through etkit's runtime: with the delegate
   quantizing the context's I/O (payload version 2), with float32 graph I/O (what version 1 did), and with
   integer outputs after Sigmoid/Tanh (which the exporter avoids); then the ops whose 16-bit tolerance is wider;
3. the HTP's requantization precision on a hand-built 8-bit convolution given identical integer inputs;
4. a product of two 16-bit activations (why the partitioner refuses it);
5. MobileNetV2 8a8w end to end: the HTP and the CPU emulation of the same graph against the PT2E reference.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch
from onnx import TensorProto as T
from onnx import helper, numpy_helper

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "plugins", "qnn", "tests"))


def _session(model, htp: bool):
    import onnxruntime as ort
    from etkit_qnn.htp_compile import provider_options, register_qnn_ep

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    if not htp:
        return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    so.add_provider_for_devices(register_qnn_ep(), provider_options(57, 75, False))
    return ort.InferenceSession(model.SerializeToString(), so)


def _both(model, feeds: dict) -> tuple:
    """(CPU emulation, HTP simulator) outputs of ``model`` on ``feeds``."""
    return _session(model, False).run(None, feeds)[0], _session(model, True).run(None, feeds)[0]


class _Graph:
    """A small QDQ graph under construction (opset 21)."""

    def __init__(self) -> None:
        self.nodes, self.inits = [], []

    def const(self, name: str, array) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op: str, inputs: list, output: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    def qdq(self, x: str, lo: float, hi: float, bits: int, tag: str) -> tuple:
        qmax, dtype = (255, np.uint8) if bits == 8 else (65535, np.uint16)
        scale = (hi - lo) / qmax
        self.const(f"{tag}_s", np.float32(scale))
        self.const(f"{tag}_z", np.array(round(-lo / scale), dtype=dtype))
        q = self.node("QuantizeLinear", [x, f"{tag}_s", f"{tag}_z"], f"{tag}_q")
        return self.node("DequantizeLinear", [q, f"{tag}_s", f"{tag}_z"], f"{tag}_dq"), scale

    def weight(self, w: np.ndarray, tag: str, axis: int = 0) -> str:
        scale = (np.abs(w).reshape(w.shape[0], -1).max(1) / 127).astype(np.float32)
        shape = (-1,) + (1,) * (w.ndim - 1)
        self.const(f"{tag}_w", np.round(w / scale.reshape(shape)).astype(np.int8))
        self.const(f"{tag}_ws", scale)
        self.const(f"{tag}_wz", np.zeros(w.shape[0], np.int8))
        return self.node("DequantizeLinear", [f"{tag}_w", f"{tag}_ws", f"{tag}_wz"], f"{tag}_wdq", axis=axis)

    def model(self, inputs: list, output: str):
        graph = helper.make_graph(self.nodes, "g", inputs, [helper.make_tensor_value_info(output, T.FLOAT, None)],
                                  self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
        model.ir_version = 10
        return model


def layer_norm_then_linear(bits: int, isolate: bool, rng) -> float:
    g = _Graph()
    x, _ = g.qdq("x", -1.4, 9.3, bits, "in")
    gamma = g.const("gamma", rng.uniform(0.5, 1.5, 384).astype(np.float32))
    beta = g.const("beta", rng.normal(0, 0.1, 384).astype(np.float32))
    y, in_scale = g.qdq(g.node("LayerNormalization", [x, gamma, beta], "ln", axis=-1, epsilon=1e-12), -2.6, 3.9,
                        bits, "ln")
    if isolate:
        g.const("one_q", np.array(65535 if bits == 16 else 255, np.uint16 if bits == 16 else np.uint8))
        g.const("one_s", np.float32(1 / (65535 if bits == 16 else 255)))
        g.const("one_z", np.array(0, np.uint16 if bits == 16 else np.uint8))
        one = g.node("DequantizeLinear", ["one_q", "one_s", "one_z"], "one")
        y, _ = g.qdq(g.node("Mul", [y, one], "mul"), -2.6, 3.9, bits, "mul")
    w = rng.normal(0, 0.05, (1536, 384)).astype(np.float32)
    wdq = g.weight(w, "fc")
    bias_scale = (in_scale * np.abs(w).max(1) / 127).astype(np.float32)
    g.const("b_q", np.round(rng.normal(0, 0.1, 1536) / bias_scale).astype(np.int32))
    g.const("b_s", bias_scale)
    g.const("b_z", np.zeros(1536, np.int32))
    bias = g.node("DequantizeLinear", ["b_q", "b_s", "b_z"], "b_dq", axis=0)
    out, out_scale = g.qdq(g.node("Gemm", [y, wdq, bias], "fc", transB=1), -8.0, 4.0, bits, "out")
    model = g.model([helper.make_tensor_value_info("x", T.FLOAT, [16, 384])], out)
    cpu, htp = _both(model, {"x": rng.uniform(-1.3, 9.2, (16, 384)).astype(np.float32)})
    return float(np.abs(cpu - htp).max()) / out_scale


def op_cases_16bit() -> None:
    import etkit_qnn.onnx_export.builder as builder
    import test_qnn_ops as cases
    from qnn_helpers import lower, output_step, reference, run

    def steps(name: str) -> float:
        module, inputs = cases.CASES[name]()
        for p in module.parameters():
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(99)) * 0.3)
        program = reference(module, inputs, "16a8w")
        (out,) = run(lower(program, inputs, False), inputs)
        with torch.no_grad():
            expected = program(*inputs)
        return float((out - expected).abs().max()) / output_step(expected, "16a8w")

    integer_boundary, fixed = builder._integer_boundary, builder._FIXED_ENCODING_OPS
    print("| op (16a8w) | integer I/O (as built) | float32 graph I/O (payload v1) | integer outputs after Sigmoid/Tanh too |")
    print("| --- | --- | --- | --- |")
    for name in ("conv2d", "linear_relu", "hardswish", "sigmoid", "tanh"):
        built = steps(name)
        builder._integer_boundary = lambda b, inputs, outputs: None
        try:
            float_io = steps(name)
        finally:
            builder._integer_boundary = integer_boundary
        forced = ""
        if name in ("sigmoid", "tanh"):
            builder._FIXED_ENCODING_OPS = ()
            try:
                forced = f"{steps(name):.1f}"
            finally:
                builder._FIXED_ENCODING_OPS = fixed
        print(f"| {name} | {built:.1f} | {float_io:.1f} | {forced} |", flush=True)
    wide = ", ".join(f"{name} {steps(name):.1f}" for name in sorted(cases.WIDE_16BIT) if name not in ("sigmoid", "tanh"))
    print(f"the other ops of test_qnn_ops.WIDE_16BIT (16-bit kernels coarser than 3 steps), as built: {wide}")


def requantization_precision(rng) -> None:
    g = _Graph()
    g.const("in_s", np.float32(0.035))
    g.const("in_z", np.array(60, np.uint8))
    x = g.node("DequantizeLinear", ["x", "in_s", "in_z"], "x_dq")
    w = rng.normal(0, 0.2, (32, 16, 3, 3)).astype(np.float32)
    conv = g.node("Conv", [x, g.weight(w, "conv")], "conv", pads=[1, 1, 1, 1])
    out_scale, out_zero = 0.05, 128
    g.const("out_s", np.float32(out_scale))
    g.const("out_z", np.array(out_zero, np.uint8))
    q = g.node("QuantizeLinear", [conv, "out_s", "out_z"], "out_q")
    g.node("DequantizeLinear", [q, "out_s", "out_z"], "out")
    inputs = [helper.make_tensor_value_info("x", T.UINT8, [1, 16, 56, 56])]
    feeds = {"x": rng.integers(0, 256, (1, 16, 56, 56)).astype(np.uint8)}
    cpu, htp = _both(g.model(inputs, "out"), feeds)
    exact = _session(g.model(inputs, conv), False).run(None, feeds)[0] / out_scale + out_zero
    flipped = np.round(htp / out_scale) != np.round(cpu / out_scale)
    inside = (exact > -0.5) & (exact < 255.5)
    distance = np.abs(exact - np.floor(exact) - 0.5)   # from the rounding boundary, in steps
    print(f"8-bit conv 16->32 3x3 on 1x16x56x56, identical integer inputs: {100 * flipped.mean():.2f}% of outputs "
          f"one step off; largest distance of a flipped value from its rounding boundary "
          f"{distance[flipped & inside].max():.3f} step; of the values within 0.005 step, "
          f"{100 * flipped[(distance < 0.005) & inside].mean():.0f}% flipped; largest difference "
          f"{np.abs(np.round(htp / out_scale) - np.round(cpu / out_scale)).max():.0f} step(s)")


def matmul_16x16(rng) -> float:
    g = _Graph()
    for name, scale, zero in (("a", 4 / 65535, 32768), ("b", 2 / 65535, 30000), ("y", 40 / 65535, 32768)):
        g.const(f"{name}_s", np.float32(scale))
        g.const(f"{name}_z", np.array(zero, np.uint16))
    a = g.node("DequantizeLinear", ["a", "a_s", "a_z"], "a_dq")
    b = g.node("DequantizeLinear", ["b", "b_s", "b_z"], "b_dq")
    q = g.node("QuantizeLinear", [g.node("MatMul", [a, b], "mm"), "y_s", "y_z"], "y_q")
    g.node("DequantizeLinear", [q, "y_s", "y_z"], "y")
    inputs = [helper.make_tensor_value_info("a", T.UINT16, [1, 16, 64]),
              helper.make_tensor_value_info("b", T.UINT16, [1, 64, 16])]
    feeds = {"a": rng.integers(4000, 61000, (1, 16, 64)).astype(np.uint16),
             "b": rng.integers(1000, 62000, (1, 64, 16)).astype(np.uint16)}
    cpu, htp = _both(g.model(inputs, "y"), feeds)
    return float(np.abs(cpu - htp).max()) / (40 / 65535)


def mobilenet_drift() -> None:
    import etkit_qnn.preprocess as preprocess
    from example_models import calibrated_mobilenet_v2
    from qnn_helpers import lower, output_step, reference, run

    captured = []
    export = preprocess.export_partition

    def capture(*args):
        captured.append(export(*args))
        return captured[-1]

    preprocess.export_partition = capture
    model = calibrated_mobilenet_v2()
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    calibration = [(torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(10 + i)),) for i in range(2)]
    program = reference(model, (x,), "8a8w", calibration + [(x,)])
    try:
        (out,) = run(lower(program, (x,), False), (x,))
    finally:
        preprocess.export_partition = export
    with torch.no_grad():
        expected = program(x)
    step = output_step(expected, "8a8w")
    graph = captured[0]
    # The captured graph takes the input as uint8 (the delegate quantizes it): quantize it the same way here.
    q = graph.inputs[0].qparams
    xq = torch.clamp(torch.round(x * (1.0 / float(q.scale))) + int(q.zero_point), 0, 255).to(torch.uint8).numpy()
    cpu = _session(graph.model, False).run(None, {graph.inputs[0].name: xq})[0]
    o = graph.outputs[0].qparams
    cpu = (cpu.astype(np.float32) - int(o.zero_point)) * float(o.scale) if o is not None else cpu
    print(f"MobileNetV2 8a8w against the PT2E reference, in output steps (largest / mean): HTP simulator "
          f"{float((out - expected).abs().max()) / step:.1f} / {float((out - expected).abs().mean()) / step:.2f}; "
          f"ONNX Runtime CPU on the same QDQ graph {np.abs(cpu - expected.numpy()).max() / step:.1f} / "
          f"{np.abs(cpu - expected.numpy()).mean() / step:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-model", action="store_true", help="leave out section 5 (MobileNetV2, ~30 s)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("## 1. LayerNorm -> FullyConnected (1536x384), HTP vs CPU emulation, output steps")
    for bits in (8, 16):
        for isolate in (False, True):
            print(f"{bits}-bit, {'with' if isolate else 'without'} Mul(1) between: "
                  f"{layer_norm_then_linear(bits, isolate, rng):.0f}", flush=True)
    print("\n## 2. Op cases against the PT2E reference through etkit's runtime, output steps")
    op_cases_16bit()
    print("\n## 3. Requantization precision")
    requantization_precision(rng)
    print(f"\n## 4. 16-bit x 16-bit MatMul (1x16x64 @ 1x64x16), HTP vs CPU emulation: {matmul_16x16(rng):.0f} steps")
    if not args.skip_model:
        print("\n## 5. Whole model")
        mobilenet_drift()


if __name__ == "__main__":
    main()
