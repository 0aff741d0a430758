"""Layer norm, written with XNNPACK nodes the payload schema has (XNNPACK 2024-11-08's subgraph API
has no layer-norm node, and the schema no static-mean node).

For ``x`` of shape ``S`` normalized over its last dims (``D`` elements, ``M = numel / D`` rows), the
input is viewed as NHWC ``[M, D, 1, 1]`` so that global average pooling averages each row::

    v    = reshape(x, [M, D, 1, 1])
    mean = global_avg_pool(v)                 [M, 1, 1, 1]
    d    = v - mean
    var  = global_avg_pool(square(d))
    y    = d * rsqrt(var + eps)
    out  = reshape(y, S) * weight + bias      (weight/bias broadcast over the normalized dims)
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

    rows = b.add_value([m, d, 1, 1])
    ctx.reshape(x_id, rows, [m, d, 1, 1])
    mean = b.add_value([m, 1, 1, 1])
    ctx.unary("XNNGlobalAvgPooling2d", rows, mean, flags=XNN_FLAG_KEEP_DIMS)
    centered = b.add_value([m, d, 1, 1])
    ctx.binary("XNNSubtract", rows, mean, centered)
    squared = b.add_value([m, d, 1, 1])
    ctx.unary("XNNSquare", centered, squared)
    var = b.add_value([m, 1, 1, 1])
    ctx.unary("XNNGlobalAvgPooling2d", squared, var, flags=XNN_FLAG_KEEP_DIMS)
    var_eps = b.add_value([m, 1, 1, 1])
    ctx.binary("XNNAdd", var, b.add_constant(np.asarray([eps], dtype=np.float32)), var_eps)
    inv_std = b.add_value([m, 1, 1, 1])
    ctx.unary("XNNReciprocalSquareRoot", var_eps, inv_std)
    normed = b.add_value([m, d, 1, 1])
    ctx.binary("XNNMultiply", centered, inv_std, normed)

    steps = [("XNNMultiply", weight), ("XNNAdd", bias)]
    steps = [(union, a) for union, a in steps if a is not None]
    current = b.add_value(shape) if steps else ctx.define(node, CONTIG)
    ctx.reshape(normed, current, shape)
    for i, (union, a) in enumerate(steps):
        out = ctx.define(node, CONTIG) if i == len(steps) - 1 else b.add_value(shape)
        ctx.binary(union, current, ctx.value(a, CONTIG), out)
        current = out
