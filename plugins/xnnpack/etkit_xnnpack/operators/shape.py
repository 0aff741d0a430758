"""Data-movement ops: reshape, transpose, concatenate, slice, pad (PyTorch layout)."""
from __future__ import annotations

import torch

from . import dynamic_shapes as dyn
from .context import CONTIG, NHWC, PERM_NCHW_TO_NHWC, LoweringContext, LoweringError, node_desc
from .registry import lowers, op

_CAT_UNIONS = {2: "XNNConcatenate2", 3: "XNNConcatenate3", 4: "XNNConcatenate4", 5: "XNNConcatenate5"}


@lowers(op("view_copy"), op("view"), op("_unsafe_view"), op("reshape"), op("unsqueeze_copy"), op("unsqueeze"),
        op("squeeze_copy", "dim"), op("squeeze_copy", "dims"), op("squeeze_copy"), op("squeeze", "dim"),
        op("squeeze", "dims"), op("squeeze"))
def lower_reshape(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """All reshapes become XNNStaticReshape to the node's output shape (a dynamic dim written as 0:
    inferred at run time). With several dynamic dims (see :func:`.dynamic_shapes.plan_reshapes`) a
    reshape to the shape its input is already held in, or an unsqueeze whose leading 1s are dropped,
    names its input's value."""
    src = node.args[0]
    new_shape = dyn.sym_shape(node)
    if len(dyn.dynamic_dims(new_shape)) > 1:
        if node in ctx.stored_shapes or dyn.shapes_equal(new_shape, ctx.shape(src)):
            ctx.alias(node, src)
            return
        raise LoweringError(f"{node_desc(node)}: reshape {dyn.format_shape(ctx.shape(src))} -> "
                            f"{dyn.format_shape(new_shape)} has several dynamic dims; XNNPACK's static_reshape "
                            f"infers only one (the partitioner should not have delegated it)")
    ctx.reshape(ctx.value(src, CONTIG), ctx.define(node, CONTIG), new_shape or [1])


@lowers(op("expand_copy"), op("expand"))
def lower_noop_expand(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """Only expands that keep the shape are partitioned; they name their input's value."""
    if not dyn.shapes_equal(dyn.sym_shape(node), dyn.sym_shape(node.args[0])):
        raise LoweringError(f"{node_desc(node)}: only shape-preserving expand is supported")
    ctx.alias(node, node.args[0])


@lowers(op("permute_copy"), op("permute"))
def lower_permute(ctx: LoweringContext, node: torch.fx.Node) -> None:
    rank = len(dyn.sym_shape(node))
    if rank == 0:  # XNNPACK's transpose refuses 0 dims; permuting a scalar copies it
        ctx.unary("XNNCopy", ctx.value(node.args[0], CONTIG), ctx.define(node, CONTIG))
        return
    perm = [int(d) % rank for d in node.args[1]]
    ctx.transpose(ctx.value(node.args[0], CONTIG), ctx.define(node, CONTIG), perm)


@lowers(op("t_copy"), op("t"), op("transpose_copy", "int"), op("transpose", "int"))
def lower_transpose(ctx: LoweringContext, node: torch.fx.Node) -> None:
    rank = len(dyn.sym_shape(node))
    if rank == 0:  # see lower_permute
        ctx.unary("XNNCopy", ctx.value(node.args[0], CONTIG), ctx.define(node, CONTIG))
        return
    perm = list(range(rank))
    if rank >= 2:
        d0, d1 = (node.args[1] % rank, node.args[2] % rank) if len(node.args) > 2 else (0, 1)
        perm[d0], perm[d1] = perm[d1], perm[d0]
    ctx.transpose(ctx.value(node.args[0], CONTIG), ctx.define(node, CONTIG), perm)


@lowers(op("cat"))
def lower_cat(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """XNNConcatenate{2..5}; longer lists are concatenated in chunks (left to right)."""
    tensors = list(node.args[0])
    rank = len(dyn.sym_shape(node))
    axis = (node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) % rank
    # Concatenate 4-D tensors that already are NHWC in NHWC (the axis moves with the layout).
    layout = CONTIG
    if rank == 4 and any(ctx.primary_layout(t) == NHWC for t in tensors):
        layout = NHWC
        axis = PERM_NCHW_TO_NHWC.index(axis)
    ids = [ctx.value(t, layout) for t in tensors]
    shapes = [ctx.builder.dims(i) for i in ids]
    out = None
    while True:
        chunk, ids, chunk_shapes, shapes = ids[:5], ids[5:], shapes[:5], shapes[5:]
        if len(chunk) == 1:  # only possible when the whole cat has one input
            ctx.unary("XNNCopy", chunk[0], ctx.define(node, layout))
            return
        if not ids:
            out = ctx.define(node, layout)
        else:
            dims = list(chunk_shapes[0])
            dims[axis] = sum(s[axis] for s in chunk_shapes)
            out = ctx.intermediate(node, dims)
        fields = {f"input{i + 1}Id": vid for i, vid in enumerate(chunk)}
        for i in range(len(chunk), 5):
            fields[f"input{i + 1}Id"] = 0xFFFFFFFF
        ctx.builder.add_node(_CAT_UNIONS[len(chunk)], "_XNNCat", axis=axis, outputId=out, flags=0,
                             debug_handle=ctx.debug_handle, **fields)
        if not ids:
            return
        ids, shapes = [out] + ids, [ctx.builder.dims(out)] + shapes


def _slice(ctx: LoweringContext, src: int, in_shape: list, dim: int, start: int, size, dst: int) -> None:
    """XNNStaticSlice of ``size`` elements from ``start`` along ``dim``; a dynamic dim (symbolic in
    ``in_shape``) is kept whole with offset 0 and size 0 (XNNPACK: "the input's size")."""
    offsets = [0] * len(in_shape)
    sizes = [0 if dyn.is_dynamic(d) else int(d) for d in in_shape]
    if dyn.is_dynamic(size):  # only the whole dim (a static size from a static offset is written as is)
        if start != 0 or not dyn.dims_equal(size, in_shape[dim]):
            raise LoweringError(f"node with debug handle {ctx.debug_handle}: slice of {size} elements from {start} "
                                f"along dynamic dim {dim} ({in_shape[dim]}) is not supported")
        size = 0
    offsets[dim], sizes[dim] = start, size
    ctx.builder.add_node("XNNStaticSlice", "XNNStaticSlice", numDims=len(in_shape), offsets=offsets, sizes=sizes,
                         inputId=src, outputId=dst, flags=0, debug_handle=ctx.debug_handle)


@lowers(op("slice_copy", "Tensor"), op("slice", "Tensor"))
def lower_slice(ctx: LoweringContext, node: torch.fx.Node) -> None:
    src = node.args[0]
    in_shape = dyn.sym_shape(src)
    dim = (node.args[1] if len(node.args) > 1 else 0) % len(in_shape)
    step = node.args[4] if len(node.args) > 4 else 1
    if step != 1:
        raise LoweringError(f"{node_desc(node)}: slice step {step} is not supported (only 1)")
    start = node.args[2] if len(node.args) > 2 and node.args[2] is not None else 0
    size = dyn.sym_shape(node)[dim]
    if dyn.is_dynamic(in_shape[dim]):
        if dyn.dims_equal(size, in_shape[dim]):
            start = 0  # the whole dynamic dim
        elif start < 0 or dyn.is_dynamic(size):
            raise LoweringError(f"{node_desc(node)}: slice from {start} along dynamic dim {dim} ({in_shape[dim]}) "
                                f"to {size} elements is not supported")
    else:
        if start < 0:
            start += in_shape[dim]
        start = min(max(start, 0), in_shape[dim])
    _slice(ctx, ctx.value(src, CONTIG), in_shape, dim, start, size, ctx.define(node, CONTIG))


@lowers(op("select_copy", "int"), op("select", "int"))
def lower_select(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """A size-1 slice followed by a reshape that drops the dim."""
    src = node.args[0]
    in_shape = dyn.sym_shape(src)
    dim = node.args[1] % len(in_shape)
    if dyn.is_dynamic(in_shape[dim]):
        if node.args[2] < 0:
            raise LoweringError(f"{node_desc(node)}: select of index {node.args[2]} along dynamic dim {dim} "
                                f"({in_shape[dim]}) is not supported")
        index = node.args[2]
    else:
        index = node.args[2] % in_shape[dim]
    sliced_shape = ctx.bounds(src)
    sliced_shape[dim] = 1
    tmp = ctx.builder.add_value(sliced_shape)
    _slice(ctx, ctx.value(src, CONTIG), in_shape, dim, index, 1, tmp)
    ctx.reshape(tmp, ctx.define(node, CONTIG), dyn.sym_shape(node) or [1])


@lowers(op("constant_pad_nd"))
def lower_constant_pad(ctx: LoweringContext, node: torch.fx.Node) -> None:
    src = node.args[0]
    rank = len(dyn.sym_shape(src))
    pad = list(node.args[1])
    value = float(node.args[2]) if len(node.args) > 2 else 0.0
    pre, post = [0] * rank, [0] * rank
    # PyTorch lists (before, after) pairs starting from the last dim.
    for i in range(len(pad) // 2):
        pre[rank - 1 - i], post[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    if any(p < 0 for p in pre + post):
        raise LoweringError(f"{node_desc(node)}: negative padding {pad} is not supported")
    ctx.builder.add_node("XNNStaticConstantPad", "XNNStaticConstantPad", prePaddings=pre, postPaddings=post,
                         paddingValue=value, inputId=ctx.value(src, CONTIG), outputId=ctx.define(node, CONTIG),
                         flags=0, debug_handle=ctx.debug_handle)


@lowers(op("split_with_sizes_copy"), op("split_with_sizes"), op("split_copy", "Tensor"), op("split", "Tensor"))
def lower_split(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """Nothing to emit here: each ``getitem(split, i)`` becomes one XNNStaticSlice (see lower_split_item)."""
    ctx.multi_output_ops.add(node)


def lower_split_item(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """``getitem(split_with_sizes(x, sizes, dim), i)`` -> slice of ``sizes[i]`` along ``dim``."""
    split, index = node.args
    src = split.args[0]
    in_shape = dyn.sym_shape(src)
    dim = (split.args[2] if len(split.args) > 2 else split.kwargs.get("dim", 0)) % len(in_shape)
    if dyn.is_dynamic(in_shape[dim]):
        raise LoweringError(f"{node_desc(node)}: split along dynamic dim {dim} ({in_shape[dim]}) is not supported")
    if split.target in (op("split_copy", "Tensor"), op("split", "Tensor")):
        size = split.args[1]
        sizes = [min(size, in_shape[dim] - s) for s in range(0, in_shape[dim], size)]
    else:
        sizes = list(split.args[1])
    start = sum(sizes[:index])
    _slice(ctx, ctx.value(src, CONTIG), in_shape, dim, start, sizes[index], ctx.define(node, CONTIG))
