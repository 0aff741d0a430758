"""Shared by the QNN plugin's tests: lower a module to QNN, run it on etkit's runtime, compare."""
from __future__ import annotations

import torch

import etkit
from etkit.runtime import Runtime
from etkit_qnn import (QnnPartitioner, generate_htp_compiler_spec, generate_qnn_executorch_compiler_spec,
                       quantize_for_qnn)
from etkit_qnn.quantizer import QuantDtype


def specs(fp16: bool, soc: str = "SM8650"):
    return generate_qnn_executorch_compiler_spec(soc_model=soc, backend_options=generate_htp_compiler_spec(use_fp16=fp16))


def reference(module, inputs, scheme: str, calibration=None):
    """The program to lower and compare with: ``module`` itself for fp16, else its PT2E reference model."""
    if scheme == "fp16":
        return module.eval()
    return quantize_for_qnn(module.eval(), inputs, calibration, quant_dtype=QuantDtype[f"use_{scheme}"])


def lower(program, inputs, fp16: bool, **partitioner_args):
    edge = etkit.to_edge_transform_and_lower(torch.export.export(program, tuple(inputs)),
                                             partitioner=[QnnPartitioner(specs(fp16), **partitioner_args)])
    return edge


def run(edge, inputs) -> list:
    method = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    return method.execute(list(inputs))


def output_step(reference_out: torch.Tensor, scheme: str) -> float:
    """The quantization step of an output with this value range under ``scheme`` (min/max calibration on the
    same input): ``(max(out, 0) - min(out, 0)) / (2**bits - 1)``."""
    bits = 16 if scheme.startswith("16") else 8
    span = float(reference_out.max().clamp(min=0) - reference_out.min().clamp(max=0))
    return max(span, 1e-6) / (2 ** bits - 1)
