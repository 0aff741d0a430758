"""Keep the 4-bit grid a GGUF file's weights already lie on (``LlmConfig(weight_qparams="gguf")``).

A model read from a GGUF file with Q4_1 linears has, after transformers dequantizes it, weights that are
exactly ``d * q + m`` per block of 32 input columns, with ``q`` in 0..15 reaching both ends, a float scale
``d`` and a float minimum ``m`` (ggml's ``block_q4_1``, quantized from each block's minimum and maximum). Choosing new 4-bit scales for them
(min/max, HQQ) rounds every weight a second time; here the grid is recovered instead and kept exactly:

    W = d * (q - 8) + c,   c = m + 8 d      (per output row and block of ``group`` input columns)

The first term is a symmetric int4 weight with scale ``d``, which a CPU delegate runs as int8-activation x
int4-weight matmul; the second is constant per block, so ``x @ W.T = x @ (d (q - 8)).T + sum_b c_b * s_b(x)``
with ``s_b(x)`` the sum of ``x`` over block ``b``: a float32 matmul over ``in_features / group`` block sums
(:class:`GridLinear`); when every ``c`` is 0 that term is left out.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn


class GridError(ValueError):
    """The weights do not lie on a 4-bit grid per group (they were not read from a Q4_1 GGUF file)."""


def recover_grid(weight: torch.Tensor, group: int, name: str = "weight") -> tuple:
    """Recover ``(q, d, c)`` with ``weight == d * (q - 8) + c`` per block of ``group`` columns.

    Args:
        weight: float [out, in], ``in`` a multiple of ``group``.
        group: columns per block (32 for GGUF's Q4_1).
        name: the layer's name, for the error message.
    Returns:
        ``q`` int8 [out, in] in -8..7 (``q - 8`` of the formula above), ``d`` float32 [out, in / group]
        (positive; 1 for a constant block), ``c`` float32 [out, in / group].
    Raises:
        GridError: a block's values are not 16 evenly spaced levels from its minimum to its maximum
            (within 1% of a step): the weights were not quantized this way.
    """
    out_features, in_features = weight.shape
    if in_features % group:
        raise GridError(f"{name}: {in_features} input features are not a multiple of the group size {group}")
    w = weight.detach().to(torch.float64).reshape(out_features, in_features // group, group)
    low, high = w.amin(-1), w.amax(-1)
    step = (high - low) / 15
    flat = step == 0
    step = torch.where(flat, torch.ones_like(step), step)
    levels = torch.round((w - low[..., None]) / step[..., None])
    error = (w - (low[..., None] + levels * step[..., None])).abs().amax(-1) / step
    worst = float(error.max()) if error.numel() else 0.0
    if worst > 0.01:
        row, block = divmod(int(error.argmax()), in_features // group)
        raise GridError(f"{name}: block {block} of row {row} is not on a 4-bit grid (off by {worst:.2f} of a step); "
                        f"weight_qparams='gguf' needs weights read from a Q4_1 GGUF file, use 'hqq' otherwise")
    levels = torch.where(flat[..., None], torch.full_like(levels, 8), levels)
    offset = torch.where(flat, low, low + 8 * step)  # a constant block: q - 8 = 0 and c = its value
    q = (levels - 8).to(torch.int8).reshape(out_features, in_features)
    return q, step.to(torch.float32), offset.to(torch.float32)


class GridLinear(nn.Module):
    """``linear`` with weights ``d * (q - 8) + c`` (see the module docstring): the int4 part in ``linear``,
    the per-block constants as a float32 matmul of the input's block sums.

    Args:
        linear: the layer whose weight holds ``d * (q - 8)`` (already quantized with scales ``d``).
        offsets: ``c`` float32 [out, in / group], or ``None`` when all are 0 (a symmetric grid).
        group: columns per block.
    Input ``x`` [..., in] -> [..., out].
    """

    def __init__(self, linear: nn.Module, offsets: Optional[torch.Tensor], group: int) -> None:
        super().__init__()
        self.linear = linear
        self.group = group
        # block means, not sums, go to the matmul (scaled back here): aten.mean is what a CPU delegate runs
        self.offsets = None if offsets is None else nn.Parameter(offsets * group, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if self.offsets is None:
            return y
        means = x.unflatten(-1, (x.shape[-1] // self.group, self.group)).mean(-1)
        return y + nn.functional.linear(means, self.offsets.to(x.dtype))


def quantize_on_grid(module: nn.Module, group: int, activations: bool, skip: tuple = ()) -> int:
    """Replace every ``nn.Linear`` under ``module`` (but the names in ``skip``) by a :class:`GridLinear`
    whose int4 weights are the recovered grid, as torchao's ``IntxUnpackedToInt8Tensor`` (with int8
    per-token dynamic activations when ``activations``) so a delegate lowers them like any 8da4w/4w layer.

    Returns:
        how many layers were replaced.
    Raises:
        GridError: a layer's weights are not on a 4-bit grid per ``group`` columns (names the layer).
    """
    targets = [(name, sub) for name, sub in module.named_modules()
               if isinstance(sub, nn.Linear) and name not in skip]
    for name, linear in targets:
        q, d, c = recover_grid(linear.weight, group, name)
        linear.weight = nn.Parameter(int_weight(q, d, group, linear.weight.dtype, activations), requires_grad=False)
        offsets = None if bool((c == 0).all()) else c
        parent_name, _, child = name.rpartition(".")
        parent = module.get_submodule(parent_name) if parent_name else module
        setattr(parent, child, GridLinear(linear, offsets, group))
    return len(targets)


def int_weight(q: torch.Tensor, scales: torch.Tensor, group: int, dtype: torch.dtype, activations: bool,
               bits: int = 4):
    """torchao's ``IntxUnpackedToInt8Tensor`` (what its ``quantize_`` makes for 8da4w/4w/8da8w layers) from
    given integers and scales, zero points 0.

    Args:
        q: int8 [out, in] (in -8..7 for 4 bits).
        scales: [out, in / group].
        group: columns per scale (``in`` for per channel).
        dtype: the layer's float dtype (the dequantized weight's).
        activations: int8 per-token dynamic activations (the 8da forms) or weight-only.
        bits: 4 or 8.
    """
    from torchao.quantization.quantize_.workflows.intx.intx_unpacked_to_int8_tensor import IntxUnpackedToInt8Tensor
    return IntxUnpackedToInt8Tensor(
        qdata=q, scale=scales.to(dtype), zero_point=torch.zeros(scales.shape, dtype=torch.int8),
        target_dtype=torch.int4 if bits == 4 else torch.int8, block_size=(1, group), dtype=dtype,
        activation_quantization="int8_asym_per_token" if activations else None)
