"""Layer norm, written with XNNPACK nodes the payload schema has (XNNPACK 2024-11-08's subgraph API
has no layer-norm node, and the schema no static-mean node).

For ``x`` of shape ``S`` normalized over its last dims (``D`` elements, ``M = numel / D`` rows), the
input is viewed as NHWC ``[M, D / k, 1, k]`` so that global average pooling averages each row in two
steps (``k`` partial means per row, then their mean)::

    v    = reshape(x, [M, D / k, 1, k])
    mean = row_mean(v)                        [M, 1, 1, 1]
    d    = v - mean
    var  = row_mean(square(d))
    y    = d * rsqrt(var + eps)
    out  = reshape(y, S) * weight + bias      (weight/bias broadcast over the normalized dims)

    row_mean(v) = global_avg_pool(reshape(global_avg_pool(v), [M, k, 1, 1]))

``k`` is the largest of 64, 32, 16, 8 that divides ``D`` (else 1). XNNPACK's pooling runs across
channels, so the first pooling works on ``k`` channels at once instead of one: with ``k = 1`` (one
channel) it is several times slower, and the second pooling only sees ``k`` values per row.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..serialization.graph_builder import XNN_FLAG_KEEP_DIMS
from .context import CONTIG, LoweringContext, static_shape
from .registry import lowers, op


@lowers(op("native_layer_norm"))
def lower_layer_norm(ctx: LoweringContext, node: torch.fx.Node) -> None:
    x, normalized_shape, weight, bias, eps = node.args[:5]
    shape = static_shape(x)
    d = math.prod(normalized_shape)
    m = math.prod(shape) // d
    b = ctx.builder
    x_id = ctx.value(x, CONTIG)

    k = next((c for c in (64, 32, 16, 8) if d % c == 0 and d > c), 1)
    view = [m, d // k, 1, k]
    rows = b.add_value(view)
    ctx.reshape(x_id, rows, view)
    mean = _row_mean(ctx, rows, m, k)
    centered = b.add_value(view)
    ctx.binary("XNNSubtract", rows, mean, centered)
    squared = b.add_value(view)
    ctx.unary("XNNSquare", centered, squared)
    var = _row_mean(ctx, squared, m, k)
    var_eps = b.add_value([m, 1, 1, 1])
    ctx.binary("XNNAdd", var, b.add_constant(np.asarray([eps], dtype=np.float32)), var_eps)
    inv_std = b.add_value([m, 1, 1, 1])
    ctx.unary("XNNReciprocalSquareRoot", var_eps, inv_std)
    normed = b.add_value(view)
    ctx.binary("XNNMultiply", centered, inv_std, normed)

    steps = [("XNNMultiply", weight), ("XNNAdd", bias)]
    steps = [(union, a) for union, a in steps if a is not None]
    current = b.add_value(shape) if steps else ctx.define(node, CONTIG)
    ctx.reshape(normed, current, shape)
    for i, (union, a) in enumerate(steps):
        out = ctx.define(node, CONTIG) if i == len(steps) - 1 else b.add_value(shape)
        ctx.binary(union, current, ctx.value(a, CONTIG), out)
        current = out


def _row_mean(ctx: LoweringContext, rows: int, m: int, k: int) -> int:
    """Mean of each row of the NHWC value ``rows`` [M, D / k, 1, k], as [M, 1, 1, 1]."""
    b = ctx.builder
    partial = b.add_value([m, 1, 1, k])
    ctx.unary("XNNGlobalAvgPooling2d", rows, partial, flags=XNN_FLAG_KEEP_DIMS)
    if k == 1:
        return partial
    stacked = b.add_value([m, k, 1, 1])
    ctx.reshape(partial, stacked, [m, k, 1, 1])
    mean = b.add_value([m, 1, 1, 1])
    ctx.unary("XNNGlobalAvgPooling2d", stacked, mean, flags=XNN_FLAG_KEEP_DIMS)
    return mean
