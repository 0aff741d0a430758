"""The ``quantized_decomposed`` dialect: the ops a quantized graph carries, named once for every
partitioner and lowering (sets and predicates below), and the out variants of those ops, so a quantized
program with nothing delegated still runs on the portable kernels.

torch defines only the functional ops (``quantize_per_tensor``, ...); ExecuTorch's quantized kernel
library adds these out variants (kernels/quantized/quantized.yaml) and its programs name them, so the
schemas here are the same, overload names included. Defining the schemas is all the Python side needs:
the emitter looks an op's out variant up by its arguments (passes/out_variants.py).
"""
from __future__ import annotations

import functools
from typing import Iterable, Optional

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers the quantized_decomposed ops)

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
    _lib = torch.library.Library("quantized_decomposed", "FRAGMENT")
    packet = torch.ops.quantized_decomposed
    for schema in _SCHEMAS:
        name, _, rest = schema.partition("(")
        op, _, overload = name.partition(".")
        if hasattr(getattr(packet, op), overload):
            continue
        _lib.define(schema)


# ------------------------------------------------------------------ the ops a quantized graph carries
# One place for what every partitioner and lowering asks of a quantized graph: which node quantizes,
# dequantizes or chooses parameters. PT2E (static) leaves quantize_per_tensor.default around activations and
# dequantize_per_tensor/per_channel.default on weights; dynamic quantization (8da4w, 8da8w) adds
# choose_qparams.tensor feeding quantize_per_tensor.tensor / dequantize_per_tensor.tensor, or torchao's
# *_affine ops (torchao >= 0.10 leaves those). A backend picks the sets it lowers; each set is a tuple in
# the order written (the quantized_decomposed op first), without the torchao ops torchao does not define.

_qd = torch.ops.quantized_decomposed

#: Static (PT2E) per-tensor quantize / dequantize, scale and zero point as Python numbers.
QUANTIZE_PER_TENSOR = _qd.quantize_per_tensor.default
DEQUANTIZE_PER_TENSOR = _qd.dequantize_per_tensor.default
#: Per-channel weight dequantize (scales and zero points as constant tensors, an axis).
DEQUANTIZE_PER_CHANNEL = _qd.dequantize_per_channel.default
#: Dynamic quantization: parameters chosen at run time, passed as tensors.
QUANTIZE_PER_TENSOR_TENSOR = _qd.quantize_per_tensor.tensor
DEQUANTIZE_PER_TENSOR_TENSOR = _qd.dequantize_per_tensor.tensor
CHOOSE_QPARAMS = _qd.choose_qparams.tensor


@functools.lru_cache(maxsize=None)
def torchao_op(name: str) -> Optional[torch._ops.OpOverload]:
    """``torch.ops.torchao.<name>.default`` (e.g. ``"dequantize_affine"``), or None when torchao is not
    installed or does not define it. Imports torchao (about a second) on the first call only."""
    try:
        import torchao.quantization.quant_primitives  # noqa: F401  (registers torch.ops.torchao)
        return getattr(torch.ops.torchao, name).default
    except (ImportError, AttributeError, RuntimeError):
        return None


def _present(*ops) -> tuple:
    return tuple(op for op in ops if op is not None)


@functools.lru_cache(maxsize=None)
def weight_dequantize_ops() -> tuple:
    """Dequantize ops found on constant weights: per-tensor, per-channel and torchao's block-wise
    ``dequantize_affine`` (int4 groups)."""
    return _present(DEQUANTIZE_PER_TENSOR, DEQUANTIZE_PER_CHANNEL, torchao_op("dequantize_affine"))


@functools.lru_cache(maxsize=None)
def dynamic_quantize_ops() -> tuple:
    """Quantize ops of a dynamically quantized activation (parameters from :func:`choose_qparams_ops`)."""
    return _present(QUANTIZE_PER_TENSOR_TENSOR, torchao_op("quantize_affine"))


@functools.lru_cache(maxsize=None)
def dynamic_dequantize_ops() -> tuple:
    """Dequantize ops of a dynamically quantized activation."""
    return _present(DEQUANTIZE_PER_TENSOR_TENSOR, torchao_op("dequantize_affine"))


@functools.lru_cache(maxsize=None)
def choose_qparams_ops() -> tuple:
    """Ops choosing an activation's scale and zero point at run time."""
    return _present(CHOOSE_QPARAMS, torchao_op("choose_qparams_affine"))


def is_op(node, ops: Iterable) -> bool:
    """True when ``node`` is an FX ``call_function`` node whose target is one of ``ops``."""
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in ops


def is_quantize(node) -> bool:
    """A static per-tensor quantize (``quantize_per_tensor.default``): the output side of a PT2E
    quantized op."""
    return is_op(node, (QUANTIZE_PER_TENSOR,))


def is_dequantize(node, *, per_channel: bool = False, blockwise: bool = False) -> bool:
    """A static per-tensor dequantize (``dequantize_per_tensor.default``: the input side of a PT2E quantized
    op); with ``per_channel`` also ``dequantize_per_channel`` (PT2E weights), with ``blockwise`` also torchao's
    ``dequantize_affine`` (group-wise int4 weights)."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False
    if node.target is DEQUANTIZE_PER_TENSOR or (per_channel and node.target is DEQUANTIZE_PER_CHANNEL):
        return True
    return blockwise and node.target is torchao_op("dequantize_affine")
