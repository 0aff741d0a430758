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
from . import dynamic_shapes as dyn
from .context import CONTIG, LoweringContext
from .registry import lowers, op


@lowers(op("native_layer_norm"))
def lower_layer_norm(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """With a dynamic number of rows (tokens), ``M`` is written as 0 in the reshapes (XNNPACK infers it)
    and the values are defined with its upper bound."""
    x, normalized_shape, weight, bias, eps = node.args[:5]
    shape = dyn.sym_shape(x)
    bounds = ctx.bounds(x)
    d = math.prod(normalized_shape)
    m = dyn.rows(shape, len(shape) - len(normalized_shape))  # an int, or INFERRED
    mb = math.prod(bounds) // d
    b = ctx.builder
    x_id = ctx.value(x, CONTIG)

    rows, k = row_view(ctx, x_id, m, mb, d)
    mean = row_mean(ctx, rows, m, mb, k)
    centered = b.add_value([mb, d // k, 1, k])
    ctx.binary("XNNSubtract", rows, mean, centered)
    squared = b.add_value([mb, d // k, 1, k])
    ctx.unary("XNNSquare", centered, squared)
    var = row_mean(ctx, squared, m, mb, k)
    var_eps = b.add_value([mb, 1, 1, 1])
    ctx.binary("XNNAdd", var, b.add_constant(np.asarray([eps], dtype=np.float32)), var_eps)
    inv_std = b.add_value([mb, 1, 1, 1])
    ctx.unary("XNNReciprocalSquareRoot", var_eps, inv_std)
    normed = b.add_value([mb, d // k, 1, k])
    ctx.binary("XNNMultiply", centered, inv_std, normed)

    steps = [("XNNMultiply", weight), ("XNNAdd", bias)]
    steps = [(union, a) for union, a in steps if a is not None]
    current = b.add_value(bounds) if steps else ctx.define(node, CONTIG)
    ctx.reshape(normed, current, shape)
    for i, (union, a) in enumerate(steps):
        out = ctx.define(node, CONTIG) if i == len(steps) - 1 else b.add_value(bounds)
        ctx.binary(union, current, ctx.value(a, CONTIG), out)
        current = out


def row_view(ctx: LoweringContext, x_id: int, m, mb: int, d: int) -> tuple[int, int]:
    """``x`` (``m`` rows of ``d``; ``m`` may be INFERRED, ``mb`` its upper bound) viewed as the NHWC value
    [M, D / k, 1, k]; returns ``(value id, k)``."""
    k = next((c for c in (64, 32, 16, 8) if d % c == 0 and d > c), 1)
    rows = ctx.builder.add_value_like(x_id, [mb, d // k, 1, k])
    ctx.reshape(x_id, rows, [m, d // k, 1, k])
    return rows, k


def row_mean(ctx: LoweringContext, rows: int, m, mb: int, k: int) -> int:
    """Mean of each row of the NHWC value ``rows`` [M, D / k, 1, k], as [M, 1, 1, 1] (``m``: M, or
    INFERRED when it is dynamic; ``mb``: its upper bound)."""
    b = ctx.builder
    partial = b.add_value([mb, 1, 1, k])
    ctx.unary("XNNGlobalAvgPooling2d", rows, partial, flags=XNN_FLAG_KEEP_DIMS)
    if k == 1:
        return partial
    stacked = b.add_value([mb, k, 1, 1])
    ctx.reshape(partial, stacked, [m, k, 1, 1])
    mean = b.add_value([mb, 1, 1, 1])
    ctx.unary("XNNGlobalAvgPooling2d", stacked, mean, flags=XNN_FLAG_KEEP_DIMS)
    return mean
