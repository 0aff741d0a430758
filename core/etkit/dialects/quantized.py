"""Out variants of the ``quantized_decomposed`` ops PT2E leaves in a graph, so a quantized program
with nothing delegated still runs on the portable kernels.

torch defines only the functional ops (``quantize_per_tensor``, ...); ExecuTorch's quantized kernel
library adds these out variants (kernels/quantized/quantized.yaml) and its programs name them, so the
schemas here are the same, overload names included. Defining the schemas is all the Python side needs:
the emitter looks an op's out variant up by its arguments (passes/out_variants.py).
"""
from __future__ import annotations

import torch

_SCHEMAS = [
    "quantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min, int quant_max, "
    "ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "quantize_per_tensor.tensor_out(Tensor input, Tensor scale, Tensor zero_point, int quant_min, int quant_max, "
    "ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "dequantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min, int quant_max, "
    "ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "dequantize_per_tensor.tensor_out(Tensor input, Tensor scale, Tensor zero_point, int quant_min, int quant_max, "
    "ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "quantize_per_channel.out(Tensor input, Tensor scales, Tensor zero_points, int axis, int quant_min, "
    "int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "dequantize_per_channel.out(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min, "
    "int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "quantize_per_token.out(Tensor input, Tensor scales, Tensor zero_points, int quant_min, int quant_max, "
    "ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "dequantize_per_token.out(Tensor input, Tensor scales, Tensor zero_points, int quant_min, int quant_max, "
    "ScalarType dtype, ScalarType output_dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "choose_qparams.Tensor_out(Tensor input, int quant_min, int quant_max, float eps, ScalarType dtype, *, "
    "Tensor(a!) scale_out, Tensor(b!) zero_point_out) -> (Tensor(a!), Tensor(b!))",
    "choose_qparams_per_token_asymmetric.out(Tensor input, ScalarType dtype, *, Tensor(a!) scale_out, "
    "Tensor(b!) zero_point_out) -> (Tensor(a!), Tensor(b!))",
]

_lib = None


def define_out_variants() -> None:
    """Define the schemas once per process (idempotent); ops another library already defined are kept."""
    global _lib
    if _lib is not None:
        return
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines the functional ops)

    _lib = torch.library.Library("quantized_decomposed", "FRAGMENT")
    packet = torch.ops.quantized_decomposed
    for schema in _SCHEMAS:
        name, _, rest = schema.partition("(")
        op, _, overload = name.partition(".")
        if hasattr(getattr(packet, op), overload):
            continue
        _lib.define(schema)
