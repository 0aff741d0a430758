"""Dynamic shapes: tensors with a symbolic dimension (``torch.export.Dim``).

The payload defines such a tensor with its upper bounds (the program's memory is planned for them);
at run time the delegate reshapes its inputs to their actual sizes and XNNPACK re-derives every
other shape (``xnn_reshape_runtime``). Most XNNPACK nodes compute their output shape from their
inputs' shapes, so they follow; the ones that store shapes in their parameters need care:

- ``XNNStaticReshape``: ``new_shape`` is fixed, except that one entry may be 0, meaning "infer it
  from the number of elements". A reshape whose result has one dynamic dim is written with 0
  there; one with several (``[4, s, s] -> [1, 4, s, s]`` in attention) cannot be, see
  :func:`plan_reshapes`.
- ``XNNStaticSlice``: a size of 0 keeps the input's whole dim, so a dynamic dim is sliced with
  offset 0 and size 0; slicing along a dynamic dim is refused.

:func:`plan_reshapes` handles the attention pattern ``bmm -> view [1, H, s, s] -> mul / softmax ->
view [H, s, s] -> bmm``: a view that only adds or removes leading 1s of a shape with several dynamic
dims is not written at all, and the element-wise ops and bmm after it run on the shape with or
without those 1s (the same numbers) until a reshape takes the value to a shape XNNPACK can write.
"""
from __future__ import annotations

import operator
from typing import Callable, Iterable, Optional

import torch

aten = torch.ops.aten


def _ops(*names) -> set:
    out = set()
    for name in names:
        packet, _, overload = name.partition(".")
        p = getattr(aten, packet, None)
        o = getattr(p, overload or "default", None) if p is not None else None
        if o is not None:
            out.add(o)
    return out


#: Reshape-like ops (all lowered to XNNStaticReshape).
RESHAPE_OPS = _ops("view_copy", "view", "_unsafe_view", "reshape", "unsqueeze_copy", "unsqueeze", "squeeze_copy.dim",
                   "squeeze_copy.dims", "squeeze_copy", "squeeze.dim", "squeeze.dims", "squeeze")

#: Ops whose XNNPACK node gives the same numbers whatever leading 1s the operands have: element-wise
#: ops (XNNPACK broadcasts like PyTorch), softmax over the last dim, copies, bmm (batch dims broadcast).
_UNARY_AGNOSTIC = _ops("tanh", "sigmoid", "abs", "neg", "floor", "ceil", "sqrt", "rsqrt", "exp", "log", "sin", "cos",
                       "clone", "alias_copy", "detach_copy", "_to_copy", "hardswish", "relu", "hardtanh", "clamp",
                       "gelu", "leaky_relu", "elu", "pow.Tensor_Scalar", "_softmax", "expand_copy", "expand")
_BMM = _ops("bmm")
_BINARY_AGNOSTIC = _ops("add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "mul.Tensor", "mul.Scalar",
                        "div.Tensor", "div.Scalar", "maximum", "minimum")


class _Inferred:
    """A dim XNNPACK infers at run time (a reshape's new_shape entry 0), for shapes the lowering builds
    itself (the rows of a layer norm over a dynamic number of tokens)."""

    def __repr__(self) -> str:
        return "?"


#: See :class:`_Inferred`.
INFERRED = _Inferred()


def rows(shape, count: int):
    """``prod(shape[:count])``: an int, or :data:`INFERRED` when one of those dims is dynamic."""
    out = 1
    for d in shape[:count]:
        if is_dynamic(d):
            return INFERRED
        out *= int(d)
    return out


def reads_held_values(target) -> bool:
    """Whether the lowering of ``target`` reads a held value as it is (see :func:`plan_reshapes`); any
    other lowering gets it reshaped to its PyTorch shape first."""
    return target in _UNARY_AGNOSTIC or target in _BINARY_AGNOSTIC or target in _BMM or target in RESHAPE_OPS


def sym_shape(node) -> list:
    """The (first) tensor result's shape: ints and ``torch.SymInt`` s."""
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if isinstance(val, (tuple, list)):
        val = val[0]
    if not isinstance(val, torch.Tensor):
        raise ValueError(f"node {getattr(node, 'name', node)} has no tensor metadata")
    return list(val.shape)


def is_dynamic(d) -> bool:
    return not isinstance(d, int)


def dynamic_dims(shape) -> list[int]:
    """Positions of the symbolic dims of ``shape``."""
    return [i for i, d in enumerate(shape) if is_dynamic(d)]


def has_dynamic_dims(shape) -> bool:
    return any(is_dynamic(d) for d in shape)


def dim_upper_bound(d) -> Optional[int]:
    """``d`` itself, or a symbolic dim's upper bound; None when it has none (``Dim`` without max)."""
    if isinstance(d, int):
        return d
    try:
        bound = d.node.shape_env.bound_sympy(d.node.expr).upper
        value = int(bound)
    except (TypeError, AttributeError, OverflowError, ValueError):  # sympy's oo / torch's int_oo
        return None
    return value if value < 2 ** 62 else None


def bound_shape(shape) -> list[int]:
    """``shape`` with every symbolic dim replaced by its upper bound.

    Raises:
        ValueError: a dim has no upper bound.
    """
    out = []
    for i, d in enumerate(shape):
        b = dim_upper_bound(d)
        if b is None:
            raise ValueError(f"dynamic dim {i} ({d}) has no upper bound; export with torch.export.Dim(..., max=N)")
        out.append(b)
    return out


def dims_equal(a, b) -> bool:
    """Whether two dims are the same (ints by value, symbols by their expression; never guards)."""
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    try:
        return a.node.expr == b.node.expr
    except AttributeError:
        return False


def shapes_equal(a, b) -> bool:
    return len(a) == len(b) and all(dims_equal(x, y) for x, y in zip(a, b))


def format_shape(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def reshape_new_shape(shape) -> list[int]:
    """``new_shape`` of an XNNStaticReshape to ``shape`` (at most one dynamic dim, written as 0)."""
    dyn = dynamic_dims(shape)
    if len(dyn) > 1:
        raise ValueError(f"shape {format_shape(shape)} has {len(dyn)} dynamic dims; XNNPACK's static_reshape "
                         f"infers at most one")
    return [0 if is_dynamic(d) else int(d) for d in shape]


def strip_leading_ones(shape) -> list:
    shape = list(shape)
    while shape and isinstance(shape[0], int) and shape[0] == 1:
        shape = shape[1:]
    return shape


def same_but_leading_ones(a, b) -> bool:
    """Whether ``a`` and ``b`` differ at most by leading 1s (XNNPACK broadcasts them alike)."""
    return shapes_equal(strip_leading_ones(a), strip_leading_ones(b))


def _is_tensor_node(arg) -> bool:
    if not isinstance(arg, torch.fx.Node):
        return False
    val = arg.meta.get("val")
    return isinstance(val[0] if isinstance(val, (tuple, list)) and val else val, torch.Tensor)


def _fit(shape, rank: int) -> Optional[list]:
    """``shape`` written with ``rank`` dims by adding or dropping leading 1s (None if a dropped dim is not 1)."""
    shape = list(shape)
    if rank >= len(shape):
        return [1] * (rank - len(shape)) + shape
    dropped = shape[:len(shape) - rank]
    if any(not (isinstance(d, int) and d == 1) for d in dropped):
        return None
    return shape[len(shape) - rank:]


def plan_reshapes(nodes: Iterable[torch.fx.Node], member: Callable[[torch.fx.Node], bool],
                  operand_rank: Callable[[object], Optional[int]]) -> tuple[dict, dict]:
    """Decide how the reshapes of one partition with several dynamic dims are written.

    XNNPACK's static_reshape infers at most one dim, so a reshape whose result has several dynamic
    dims (``[4, s, s] -> [1, 4, s, s]`` and back in attention) cannot be a node of its own. When such a
    reshape only adds or removes leading 1s, it is written as nothing: its result is "held" in its
    input's shape, which differs from its PyTorch shape by leading 1s. The ops after it that give the
    same numbers whatever leading 1s their operands have (element-wise ops, softmax over the last dim,
    bmm, which broadcasts batch dims) run on held values; their result is held with the rank XNNPACK
    computes for it (the largest operand rank). A held value read by any other op, or leaving the
    partition, is first reshaped to its PyTorch shape, which needs that shape to have at most one
    dynamic dim.

    Args:
        nodes: the graph's nodes in topological order.
        member: True for the nodes of the partition (the output node is never one).
        operand_rank: the rank XNNPACK gives an operand that is a number (1) or a constant (its rank),
            None for any other operand (then its PyTorch rank).
    Returns:
        ``(held, errors)``: ``held`` maps each node whose XNNPACK value has another shape than its
        PyTorch shape to that (symbolic) shape; ``errors`` maps each reshape XNNPACK cannot write to
        the reason.
    """
    held: dict = {}
    origin: dict = {}  # held node -> the reshapes that made it held
    errors: dict = {}

    def shape_of(n):
        return held[n] if n in held else sym_shape(n)

    def conflict(n, why: str) -> None:
        for r in origin.get(n, ()):
            errors.setdefault(r, f"its result, held as {format_shape(held[n])} by XNNPACK instead of "
                                 f"{format_shape(sym_shape(n))}, {why}")

    def needs_pytorch_shape(n, why: str) -> None:
        if n in held and len(dynamic_dims(sym_shape(n))) > 1:
            conflict(n, why)

    for node in nodes:
        if node.op != "call_function" or not member(node) or not _is_tensor_node(node):
            continue
        tensor_args = [a for a in node.args if _is_tensor_node(a)]
        for a in node.args:
            if isinstance(a, (list, tuple)):
                tensor_args += [x for x in a if _is_tensor_node(x)]
        if node.target in RESHAPE_OPS:
            src = node.args[0]
            out, source = sym_shape(node), shape_of(src)
            if len(dynamic_dims(out)) <= 1 or shapes_equal(out, source):
                continue
            if same_but_leading_ones(out, source):
                held[node] = source
                origin[node] = {node} | origin.get(src, set())
                continue
            errors[node] = (f"reshape {format_shape(source)} -> {format_shape(out)} has "
                            f"{len(dynamic_dims(out))} dynamic dims (dims {dynamic_dims(out)}); XNNPACK's "
                            f"static_reshape infers at most one (a new_shape entry of 0)")
            continue
        held_args = [a for a in tensor_args if a in held]
        if not held_args:
            continue
        if node.target in _UNARY_AGNOSTIC or node.target in _BINARY_AGNOSTIC or node.target in _BMM:
            ranks = []
            for a in node.args[:2] if node.target not in _UNARY_AGNOSTIC else node.args[:1]:
                if isinstance(a, torch.fx.Node) and a in held:
                    ranks.append(len(held[a]))
                    continue
                r = operand_rank(a)
                if r is None and _is_tensor_node(a):
                    r = len(sym_shape(a))
                if r is not None:
                    ranks.append(max(1, r))  # XNNPACK writes a 0-dim tensor as [1]
            fitted = _fit(sym_shape(node), max(ranks))
            if fitted is None:
                for a in held_args:
                    conflict(a, f"does not broadcast in {node.name}")
                continue
            if not shapes_equal(fitted, sym_shape(node)):
                held[node] = fitted
                origin[node] = set().union(*(origin.get(a, set()) for a in held_args))
            continue
        for a in held_args:
            needs_pytorch_shape(a, f"is read by {node.name} ({node.target}), which needs its PyTorch shape")
    # Held values that leave the partition are reshaped to their PyTorch shape.
    for n in list(held):
        if any(u.op != "call_function" or not member(u) for u in n.users):
            needs_pytorch_shape(n, "leaves the delegate, which returns it in its PyTorch shape")
    return held, errors


def is_size_node(node) -> bool:
    """A node that computes a size (``sym_size``, arithmetic on sizes), not a tensor: it stays with the
    program (the delegate reads sizes from its input tensors)."""
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return isinstance(val, (torch.SymInt, torch.SymBool, torch.SymFloat)) or (
        isinstance(val, int) and node.op == "call_function" and (
            node.target in _ops("sym_size.int", "sym_numel", "sym_stride.int")
            or getattr(node.target, "__module__", None) in ("_operator", operator.__name__)))
