"""Quantized embedding tables under ExecuTorch's names: ``quantized_decomposed::embedding_byte`` (int8) and
``quantized_decomposed::embedding_4bit`` (two signed 4-bit values per byte), with ``.out`` variants the
runtime's kernels implement (``runtime-cpp/kernels/llm/quantized_embedding.cpp``). Only the looked-up rows
are dequantized, never the whole table.

Semantics follow ExecuTorch's ``exir/passes/_quant_patterns_and_replacements.py``: ``weight`` [V, D] int8
(``embedding_4bit``: uint8 [V, D/2], byte ``j`` holding element ``2j`` in its high nibble and ``2j+1`` in its
low nibble, each stored plus 8), ``weight_scales`` [V] or [V, G] (G groups of D/G elements per row),
optional ``weight_zero_points`` of the same shape; element = (q - zero_point) * scale; ``indices`` int64 of
any shape; the result is ``indices.shape + [D]`` in the scales' dtype.
"""
from __future__ import annotations

from typing import Optional

import torch

_ARGS = ("Tensor weight, Tensor weight_scales, Tensor? weight_zero_points, int weight_quant_min, "
         "int weight_quant_max, Tensor indices")
_SCHEMAS = {
    "embedding_byte": f"embedding_byte({_ARGS}) -> Tensor",
    "embedding_byte.out": f"embedding_byte.out({_ARGS}, *, Tensor(a!) out) -> Tensor(a!)",
    "embedding_4bit": f"embedding_4bit({_ARGS}) -> Tensor",
    "embedding_4bit.out": f"embedding_4bit.out({_ARGS}, *, Tensor(a!) out) -> Tensor(a!)",
}


def unpack_4bit(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [V, D/2] -> int8 [V, D] in -8..7 (ExecuTorch's embedding_4bit packing)."""
    high = (packed >> 4).to(torch.int16) - 8
    low = (packed & 0x0F).to(torch.int16) - 8
    return torch.stack((high, low), dim=-1).reshape(packed.shape[0], -1).to(torch.int8)


def pack_4bit(q: torch.Tensor) -> torch.Tensor:
    """int8 [V, D] in -8..7 (D even) -> uint8 [V, D/2]; the inverse of :func:`unpack_4bit`."""
    shifted = (q.to(torch.int16) + 8).to(torch.uint8).reshape(q.shape[0], -1, 2)
    return (shifted[..., 0] << 4) | shifted[..., 1]


def _dequantize_rows(q: torch.Tensor, scales: torch.Tensor, zero_points: Optional[torch.Tensor]) -> torch.Tensor:
    groups = scales.shape[1] if scales.dim() == 2 else 1
    s = scales.reshape(q.shape[0], groups, 1)
    x = q.reshape(q.shape[0], groups, -1).to(scales.dtype)
    if zero_points is not None:
        x = x - zero_points.reshape(q.shape[0], groups, 1).to(scales.dtype)
    return (x * s).reshape(q.shape[0], -1)


def _check(weight, scales, zero_points, name: str) -> None:
    torch._check(weight.dim() == 2, lambda: f"{name}: weight must be 2-D, got {weight.dim()}-D")
    torch._check(scales.dim() in (1, 2) and scales.shape[0] == weight.shape[0],
                 lambda: f"{name}: weight_scales {list(scales.shape)} must have one row per weight row "
                         f"({weight.shape[0]})")
    torch._check(zero_points is None or zero_points.shape == scales.shape,
                 lambda: f"{name}: weight_zero_points must have the scales' shape {list(scales.shape)}")


def embedding_byte_reference(weight, weight_scales, weight_zero_points, weight_quant_min, weight_quant_max, indices):
    _check(weight, weight_scales, weight_zero_points, "embedding_byte")
    rows = weight[indices.reshape(-1)]
    sel = lambda t: None if t is None else t[indices.reshape(-1)]  # noqa: E731
    out = _dequantize_rows(rows, sel(weight_scales), sel(weight_zero_points))
    return out.reshape(*indices.shape, weight.shape[1])


def embedding_4bit_reference(weight, weight_scales, weight_zero_points, weight_quant_min, weight_quant_max, indices):
    _check(weight, weight_scales, weight_zero_points, "embedding_4bit")
    return embedding_byte_reference(unpack_4bit(weight), weight_scales, weight_zero_points, weight_quant_min,
                                    weight_quant_max, indices)


def _register() -> None:
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines the quantized_decomposed namespace)
    packet = torch.ops.quantized_decomposed
    if hasattr(packet, "embedding_byte") and hasattr(packet, "embedding_4bit"):
        return  # ExecuTorch's library (or an earlier import) defined them with the same schemas
    lib = torch.library.Library("quantized_decomposed", "FRAGMENT")
    _register.lib = lib
    for schema in _SCHEMAS.values():
        lib.define(schema)
    for name, ref in (("embedding_byte", embedding_byte_reference), ("embedding_4bit", embedding_4bit_reference)):
        lib.impl(name, ref, "CompositeExplicitAutograd")

        def out_impl(weight, weight_scales, weight_zero_points, weight_quant_min, weight_quant_max, indices, *, out,
                     _ref=ref):
            out.copy_(_ref(weight, weight_scales, weight_zero_points, weight_quant_min, weight_quant_max, indices))
            return out

        lib.impl(f"{name}.out", out_impl, "CompositeExplicitAutograd")

        def fake(weight, weight_scales, weight_zero_points, weight_quant_min, weight_quant_max, indices, _name=name):
            _check(weight, weight_scales, weight_zero_points, _name)
            width = weight.shape[1] * (2 if _name == "embedding_4bit" else 1)
            return weight_scales.new_empty((*indices.shape, width))

        torch.library.register_fake(f"quantized_decomposed::{name}", fake, lib=lib)


_register()


def quantize_rows(weight: torch.Tensor, bits: int, group: int) -> tuple:
    """Symmetric ``bits``-bit quantization of a float [R, D] table per row and group of ``group`` columns:
    scale = max |w| / (2^(bits-1) - 1) (at least 1e-12), q = round(w / scale) clamped to the int range.

    Returns:
        ``q`` int8 [R, D] (unpacked), ``scales`` float32 [R, D / group].
    """
    rows, dim = weight.shape
    qmax = 2 ** (bits - 1) - 1
    grouped = weight.to(torch.float32).reshape(rows, dim // group, group)
    scales = grouped.abs().amax(dim=-1).clamp(min=1e-12) / qmax
    q = torch.clamp(torch.round(grouped / scales.unsqueeze(-1)), -qmax - 1, qmax).to(torch.int8).reshape(rows, dim)
    return q, scales


class QuantizedEmbedding(torch.nn.Module):
    """An ``nn.Embedding`` with its table quantized symmetrically per row or per group of columns.

    Args:
        embedding: the float embedding ([V, D] weight).
        bits: 8 (``embedding_byte``) or 4 (``embedding_4bit``, D must be even).
        group_size: columns per scale (0: one scale per row); must divide D.
    Raises:
        ValueError: unsupported bits, or a group size that does not divide D.
    """

    def __init__(self, embedding: torch.nn.Embedding, bits: int = 8, group_size: int = 0) -> None:
        super().__init__()
        self.out_dtype = embedding.weight.dtype  # rows come back in the table's dtype (float16 models)
        weight = embedding.weight.detach().to(torch.float32)
        rows, dim = weight.shape
        if bits not in (4, 8):
            raise ValueError(f"embedding quantization to {bits} bits is not supported (4 or 8)")
        group = group_size or dim
        if dim % group or (bits == 4 and group % 2):
            raise ValueError(f"group size {group_size} does not divide the embedding dimension {dim} "
                             f"(4-bit groups must also be even)")
        qmax = 2 ** (bits - 1) - 1
        q, scales = quantize_rows(weight, bits, group)
        self.bits, self.qmin, self.qmax = bits, -qmax - 1, qmax
        self.register_buffer("weight", pack_4bit(q) if bits == 4 else q)
        self.register_buffer("scales", scales if group_size else scales.reshape(rows))

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        op = torch.ops.quantized_decomposed.embedding_4bit if self.bits == 4 else \
            torch.ops.quantized_decomposed.embedding_byte
        return op.default(self.weight, self.scales, None, self.qmin, self.qmax, indices).to(self.out_dtype)
