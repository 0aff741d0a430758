"""Element-wise ops: binary arithmetic and unary activations (any layout)."""
from __future__ import annotations

import math

import torch

from .context import CONTIG, NHWC, LoweringContext, LoweringError, node_desc
from .registry import lowers, op

BINARY_UNIONS = {
    "add": "XNNAdd", "sub": "XNNSubtract", "mul": "XNNMultiply", "div": "XNNDiv",
    "maximum": "XNNMaximum", "minimum": "XNNMinimum",
}


def _is_scalar_operand(ctx: LoweringContext, arg) -> bool:
    if isinstance(arg, (int, float)) and not isinstance(arg, bool):
        return True
    const = ctx.constant(arg)
    return const is not None and const.numel() == 1


def _rank(ctx: LoweringContext, arg) -> int:
    const = ctx.constant(arg)
    if const is not None:
        return const.dim()
    return len(arg.meta["val"].shape)


def binary_layout(ctx: LoweringContext, args) -> str:
    """NHWC when some computed input is already NHWC and every operand is 4-D or a scalar
    (so broadcasting means the same in both layouts); else CONTIG."""
    tensors = [a for a in args if isinstance(a, torch.fx.Node)]
    if not any(ctx.primary_layout(a) == NHWC for a in tensors):
        return CONTIG
    for a in args:
        if _is_scalar_operand(ctx, a):
            continue
        if _rank(ctx, a) != 4:
            return CONTIG
    return NHWC


def _operand(ctx: LoweringContext, arg, layout: str) -> int:
    const = ctx.constant(arg) if isinstance(arg, torch.fx.Node) else None
    if const is not None and const.numel() == 1 and layout == NHWC and const.dim() != 4:
        return ctx.constant_value(const.reshape([1]), key=arg)
    return ctx.value(arg, layout)


def _lower_binary(ctx: LoweringContext, node: torch.fx.Node) -> None:
    name = node.target._schema.name.split("::")[-1]
    union = BINARY_UNIONS[name]
    alpha = node.kwargs.get("alpha", 1)
    if alpha != 1:
        raise LoweringError(f"{node_desc(node)}: alpha={alpha} is not supported")
    a, b = node.args[0], node.args[1]
    if node in ctx.stored_shapes or a in ctx.stored_shapes or b in ctx.stored_shapes:
        # held values (dynamic shapes, see dynamic_shapes.plan_reshapes): XNNPACK broadcasts them as they are
        ctx.binary(union, ctx.value(a, CONTIG), ctx.value(b, CONTIG), ctx.define(node, CONTIG),
                   output_min_max=ctx.output_clamp(node))
        return
    layout = binary_layout(ctx, [a, b])
    ia, ib = _operand(ctx, a, layout), _operand(ctx, b, layout)
    ctx.binary(union, ia, ib, ctx.define(node, layout), output_min_max=ctx.output_clamp(node))


for _name in BINARY_UNIONS:
    for _ov in ("Tensor", "Scalar", "default"):
        lowers(op(_name, _ov))(_lower_binary)


# ---- unary --------------------------------------------------------------------------------------

UNARY_UNIONS = {
    op("tanh"): "XNNTanh", op("sigmoid"): "XNNSigmoid", op("hardswish"): "XNNHardswish",
    op("abs"): "XNNAbs", op("neg"): "XNNNegate", op("floor"): "XNNFloor", op("ceil"): "XNNCeiling",
    op("sqrt"): "XNNSquareRoot", op("rsqrt"): "XNNReciprocalSquareRoot", op("exp"): "XNNExp",
    op("log"): "XNNLog", op("sin"): "XNNSin", op("cos"): "XNNCos",
}


def _same_layout_unary(ctx: LoweringContext, node: torch.fx.Node, union: str, output_min_max=None) -> None:
    src = node.args[0]
    layout = ctx.primary_layout(src)
    ctx.unary(union, ctx.value(src, layout), ctx.define(node, layout), output_min_max)


@lowers(*UNARY_UNIONS)
def lower_unary(ctx: LoweringContext, node: torch.fx.Node) -> None:
    _same_layout_unary(ctx, node, UNARY_UNIONS[node.target])


@lowers(op("gelu"))
def lower_gelu(ctx: LoweringContext, node: torch.fx.Node) -> None:
    if node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none") != "none":
        raise LoweringError(f"{node_desc(node)}: only approximate='none' is supported")
    _same_layout_unary(ctx, node, "XNNGelu")


@lowers(op("pow", "Tensor_Scalar"))
def lower_square(ctx: LoweringContext, node: torch.fx.Node) -> None:
    if node.args[1] != 2:
        raise LoweringError(f"{node_desc(node)}: only exponent 2 is supported")
    _same_layout_unary(ctx, node, "XNNSquare")


@lowers(op("relu"))
def lower_relu(ctx: LoweringContext, node: torch.fx.Node) -> None:
    _same_layout_unary(ctx, node, "XNNClamp", (0.0, math.inf))


@lowers(op("hardtanh"))
def lower_hardtanh(ctx: LoweringContext, node: torch.fx.Node) -> None:
    lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min_val", -1.0)
    hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max_val", 1.0)
    _same_layout_unary(ctx, node, "XNNClamp", (float(lo), float(hi)))


@lowers(op("clamp"))
def lower_clamp(ctx: LoweringContext, node: torch.fx.Node) -> None:
    lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
    hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    _same_layout_unary(ctx, node, "XNNClamp",
                       (-math.inf if lo is None else float(lo), math.inf if hi is None else float(hi)))


@lowers(op("leaky_relu"))
def lower_leaky_relu(ctx: LoweringContext, node: torch.fx.Node) -> None:
    slope = float(node.args[1]) if len(node.args) > 1 else float(node.kwargs.get("negative_slope", 0.01))
    src = node.args[0]
    layout = ctx.primary_layout(src)
    ctx.builder.add_node("XNNLeakyReLU", "XNNLeakyReLU", negativeSlope=slope, inputId=ctx.value(src, layout),
                         outputId=ctx.define(node, layout), flags=0, debug_handle=ctx.debug_handle)


@lowers(op("prelu"))
def lower_prelu(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """prelu(x, slope[C] or [1]) -> XNNPReLU; 4-D inputs run in NHWC so the slope applies along the
    channels, which XNNPACK broadcasts over its last dim."""
    src, weight = node.args[0], node.args[1]
    slope = ctx.constant(weight)
    if slope is None:
        raise LoweringError(f"{node_desc(node)}: the slope is not a constant")
    layout = NHWC if len(src.meta["val"].shape) == 4 else CONTIG
    slope_id = ctx.constant_value(slope.reshape(-1), key=weight)
    ctx.binary("XNNPReLU", ctx.value(src, layout), slope_id, ctx.define(node, layout))


@lowers(op("elu"))
def lower_elu(ctx: LoweringContext, node: torch.fx.Node) -> None:
    alpha = float(node.args[1]) if len(node.args) > 1 else float(node.kwargs.get("alpha", 1.0))
    src = node.args[0]
    layout = ctx.primary_layout(src)
    ctx.builder.add_node("XNNELU", "XNNELU", alpha=alpha, inputId=ctx.value(src, layout),
                         outputId=ctx.define(node, layout), flags=0, debug_handle=ctx.debug_handle)


@lowers(op("_softmax"))
def lower_softmax(ctx: LoweringContext, node: torch.fx.Node) -> None:
    src, dim = node.args[0], node.args[1]
    rank = len(src.meta["val"].shape)
    if dim % rank != rank - 1:
        raise LoweringError(f"{node_desc(node)}: softmax over dim {dim} of a {rank}-D tensor; XNNPACK only "
                            f"supports the last dim")
    ctx.unary("XNNSoftmax", ctx.value(src, CONTIG), ctx.define(node, CONTIG))


@lowers(op("clone"), op("alias_copy"), op("detach_copy"), op("_to_copy"))
def lower_copy(ctx: LoweringContext, node: torch.fx.Node) -> None:
    """Copies that keep dtype and layout (the only ones partitioned) name the same value as their
    input, as ExecuTorch removes such clones; a delegate output that aliases an input or another
    output gets an explicit XNNCopy at the end of preprocess."""
    src = node.args[0]
    if not ctx.has_value(src):
        ctx.value(src)  # materialize a constant
        ctx.alias_constant(node, src)
        return
    ctx.alias(node, src)
