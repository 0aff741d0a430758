"""``_safe_softmax``: softmax over the last dim whose fully masked rows (every entry ``-inf``) give 0
instead of NaN (PyTorch's ``scaled_dot_product_attention`` math path, used by
``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer``).

Decomposed, it leaves comparisons, ``any`` and ``where`` on booleans that XNNPACK cannot run, which
splits every attention block out of the delegate. Written with XNNPACK's arithmetic instead, for
``x`` viewed as ``M`` rows of ``D``::

    live = clamp(0.5 * x + FLT_MAX, 0, 1)          1 where x > -inf, else 0 (0.5 * -FLT_MAX + FLT_MAX > 0)
    any  = clamp(D * mean(live), 0, 1)              per row: 1 if some entry is > -inf
    low  = log(1 - any)                             per row: -inf, or 0 for a fully masked row
    out  = softmax(maximum(x, low)) * any           rows with a live entry: exactly softmax(x);
                                                    fully masked rows: softmax(0...) * 0 = 0

so every row with a finite entry gives exactly what ``softmax`` gives (``maximum(x, -inf) = x``) and a
fully masked row gives 0, as PyTorch defines ``_safe_softmax``.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..serialization.graph_builder import XNN_FLAG_KEEP_DIMS
from . import dynamic_shapes as dyn
from .context import CONTIG, LoweringContext, LoweringError, node_desc
from .registry import lowers, op

FLT_MAX = float(np.finfo(np.float32).max)


@lowers(op("_safe_softmax"))
def lower_safe_softmax(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """With a dynamic shape (at most one dynamic dim: the rows or the last dim), that dim is written as 0
    in the reshapes and ``D`` in ``D * mean(live)`` is its upper bound (``mean(live) >= 1 / D`` when a
    row has a live entry, so the clamp still gives 1)."""
    src, dim = node.args[0], node.args[1]
    shape = dyn.sym_shape(src)
    if not shape or dim % len(shape) != len(shape) - 1:
        raise LoweringError(f"{node_desc(node)}: softmax over dim {dim} of shape {shape}; XNNPACK only supports "
                            f"the last dim")
    if len(dyn.dynamic_dims(shape)) > 1:
        raise LoweringError(f"{node_desc(node)}: shape {dyn.format_shape(shape)} has more than one dynamic dim")
    bounds = ctx.bounds(src)
    d = dyn.INFERRED if dyn.is_dynamic(shape[-1]) else shape[-1]
    m = dyn.rows(shape, len(shape) - 1)
    db, mb = bounds[-1], math.prod(bounds[:-1])
    b = ctx.builder

    def const(value: float) -> int:
        return b.add_constant(np.asarray([value], dtype=np.float32))

    rows = b.add_value([mb, db])
    ctx.reshape(ctx.value(src, CONTIG), rows, [m, d])
    half = b.add_value([mb, db])
    ctx.binary("XNNMultiply", rows, const(0.5), half)
    live = b.add_value([mb, db])
    ctx.binary("XNNAdd", half, const(FLT_MAX), live, output_min_max=(0.0, 1.0))
    live4 = b.add_value([mb, db, 1, 1])
    ctx.reshape(live, live4, [m, d, 1, 1])
    frac = b.add_value([mb, 1, 1, 1])
    ctx.unary("XNNGlobalAvgPooling2d", live4, frac, flags=XNN_FLAG_KEEP_DIMS)
    frac2 = b.add_value([mb, 1])
    ctx.reshape(frac, frac2, [m, 1])
    alive = b.add_value([mb, 1])
    ctx.binary("XNNMultiply", frac2, const(float(db)), alive, output_min_max=(0.0, 1.0))
    dead = b.add_value([mb, 1])
    ctx.binary("XNNSubtract", const(1.0), alive, dead)
    low = b.add_value([mb, 1])
    ctx.unary("XNNLog", dead, low)
    lifted = b.add_value([mb, db])
    ctx.binary("XNNMaximum", rows, low, lifted)
    soft = b.add_value([mb, db])
    ctx.unary("XNNSoftmax", lifted, soft)
    masked = b.add_value([mb, db])
    ctx.binary("XNNMultiply", soft, alive, masked)
    ctx.reshape(masked, ctx.define(node, CONTIG), shape)
