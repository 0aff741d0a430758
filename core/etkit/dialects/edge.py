"""The Edge dialect: Core ATen ops with view ops in their ``*_copy`` forms, checked dtypes.

ExecuTorch's Edge dialect wraps every op in an ``EdgeOpOverload``; etkit keeps plain
``torch.ops.aten`` overloads, so ``etkit.dialects.edge.ops.aten.add.Tensor is torch.ops.aten.add.Tensor``.
What makes a graph Edge is the set of ops it may contain (seed pages "Export IR Specification",
"Definition of the Core ATen Operator Set") and the view-to-copy rewrite: views become functional copies
(``aten.view`` → ``aten.view_copy``) so memory planning sees no aliasing.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import torch

from ..scalar_types import torch_dtypes

aten = torch.ops.aten


class _Ops:
    """``ops.aten.X`` is ``torch.ops.aten.X``: a namespace matching ExecuTorch's ``exir_ops.edge``."""

    aten = torch.ops.aten


ops = _Ops()

#: View ops and the functional copy that replaces each in the Edge dialect.
VIEW_TO_COPY: dict = {
    aten.view.default: aten.view_copy.default,
    aten._unsafe_view.default: aten.view_copy.default,
    aten.reshape.default: aten.view_copy.default,
    aten.permute.default: aten.permute_copy.default,
    aten.expand.default: aten.expand_copy.default,
    aten.slice.Tensor: aten.slice_copy.Tensor,
    aten.select.int: aten.select_copy.int,
    aten.unsqueeze.default: aten.unsqueeze_copy.default,
    aten.squeeze.dim: aten.squeeze_copy.dim,
    aten.squeeze.dims: aten.squeeze_copy.dims,
    aten.squeeze.default: aten.squeeze_copy.default,
    aten.transpose.int: aten.transpose_copy.int,
    aten.t.default: aten.t_copy.default,
    aten.alias.default: aten.alias_copy.default,
    aten.detach.default: aten.detach_copy.default,
    aten.as_strided.default: aten.as_strided_copy.default,
    aten.split_with_sizes.default: aten.split_with_sizes_copy.default,
    aten.unbind.int: aten.unbind_copy.int,
    aten.diagonal.default: aten.diagonal_copy.default,
    aten.unfold.default: aten.unfold_copy.default,
}

#: Ops that only check things at trace time; the Edge dialect drops them.
ASSERT_OPS = {
    aten._assert_tensor_metadata.default,
    aten._assert_scalar.default,
    aten.sym_constrain_range_for_size.default,
    aten._assert_async.msg,
}

#: Arithmetic on symbolic sizes (dynamic shapes), run by the runtime's prim ops under ExecuTorch's names
#: (``executorch_prim::add.Scalar``, ...): ``{python operator: prim op name}``.
SYM_OPS = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.floordiv: "floordiv",
    operator.truediv: "truediv", operator.mod: "mod", operator.neg: "neg", operator.eq: "eq",
    operator.gt: "gt", operator.lt: "lt", operator.ge: "ge", operator.le: "le", torch.sym_float: "sym_float",
    torch.sym_max: "sym_max", torch.sym_min: "sym_min", torch.sym_ite: "sym_ite",
}

#: Ops producing a scalar from a tensor (its symbolic size, its value); the runtime has kernels for
#: them under these names (ExecuTorch's prim ops).
SYM_SIZE_OPS = {aten.sym_size.int: ("aten::sym_size", "int"), aten.sym_numel.default: ("aten::sym_numel", ""),
                # Tensor.item(): a 1-element tensor's value as an Int/Double/Bool
                aten._local_scalar_dense.default: ("aten::_local_scalar_dense", "")}

#: Tensor dtypes a program can hold and the runtime can run (``etkit.scalar_types.RUNTIME_SCALAR_TYPES``).
SUPPORTED_DTYPES = set(torch_dtypes().values())


class EdgeDialectError(ValueError):
    """A graph cannot be expressed in the Edge dialect (unsupported dtype, op, or value)."""


@dataclass
class EdgeCompileConfig:
    """Options of ``to_edge`` (ExecuTorch's name and defaults).

    Attributes:
        _check_ir_validity: raise :class:`EdgeDialectError` for unsupported dtypes.
        _skip_dim_order: accepted for API compatibility; etkit always records ``dim_order``.
        preserve_ops: extra ops to keep undecomposed.
    """

    _check_ir_validity: bool = True
    _skip_dim_order: bool = False
    preserve_ops: tuple = ()


def _contiguous(val):
    """A copy op's output is a fresh contiguous tensor, whatever strides the view it replaces had."""
    if isinstance(val, torch.Tensor):
        return val.contiguous()
    if isinstance(val, (tuple, list)):
        return type(val)(_contiguous(v) for v in val)
    return val


def to_edge_graph(gm: torch.fx.GraphModule) -> None:
    """Rewrite a decomposed ATen graph in place into the Edge dialect: drop asserts, views → copies."""
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target in ASSERT_OPS and not node.users:
            graph.erase_node(node)
        elif node.target in VIEW_TO_COPY:
            node.target = VIEW_TO_COPY[node.target]
            node.meta["val"] = _contiguous(node.meta.get("val"))
    # size arithmetic that only fed the dropped asserts
    for node in reversed(list(graph.nodes)):
        if node.op == "call_function" and not node.users and (node.target in SYM_OPS or node.target in SYM_SIZE_OPS):
            graph.erase_node(node)
    graph.lint()
    gm.recompile()


def _is_tensor_type(arg) -> bool:
    return isinstance(arg.type, torch.TensorType)


def _scalar_dtype(value, node: torch.fx.Node) -> torch.dtype:
    """dtype of the 0-dim tensor replacing ``value`` so the op computes what it did with the scalar."""
    if isinstance(value, bool):
        return torch.bool
    peers = [a.meta.get("val") for a in node.all_input_nodes]
    peer = next((t.dtype for t in peers if isinstance(t, torch.Tensor)), None)
    if isinstance(value, float):
        return peer if peer is not None and peer.is_floating_point else torch.float32
    if peer is not None and peer != torch.bool:
        return peer  # int with an int tensor keeps its dtype; with a float tensor the result is that float
    return torch.int64


def scalars_to_tensors(ep) -> None:
    """Give every ``Tensor`` argument that holds a Python number a 0-dim constant tensor instead.

    ``x / 4.0`` exports as ``aten.div.Tensor(x, 4.0)``, but its out variant (and a backend's binary op)
    needs a tensor there. The constant takes the dtype of the op's tensor operand (a 0-dim operand never
    widens a dimensioned one of the same kind, so the result dtype is unchanged), and positional and
    keyword arguments are both converted.
    """
    from ..graph.constants import add_constant, fake_like
    for node in list(ep.graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        schema_args = node.target._schema.arguments
        args, kwargs = list(node.args), dict(node.kwargs)
        changed = False
        for i, arg in enumerate(schema_args):
            if i < len(args):
                value, put = args[i], (lambda v, i=i: args.__setitem__(i, v))
            elif arg.name in kwargs:
                value, put = kwargs[arg.name], (lambda v, k=arg.name: kwargs.__setitem__(k, v))
            else:
                continue
            if _is_tensor_type(arg) and isinstance(value, (bool, int, float)):
                tensor = torch.tensor(value, dtype=_scalar_dtype(value, node))
                put(add_constant(ep, f"_scalar_{node.name}_{arg.name}", tensor, fake_like(ep, tensor)))
                changed = True
        if changed:
            node.args, node.kwargs = tuple(args), kwargs
    ep.graph_module.recompile()


def check_edge_graph(gm: torch.fx.GraphModule) -> None:
    """Raise :class:`EdgeDialectError` naming the node if a value has a dtype a .pte cannot hold."""
    for node in gm.graph.nodes:
        vals = node.meta.get("val")
        for val in vals if isinstance(vals, (tuple, list)) else (vals,):
            if isinstance(val, torch.Tensor) and val.dtype not in SUPPORTED_DTYPES:
                raise EdgeDialectError(
                    f"node {node.name} ({node.target}) produces dtype {val.dtype}, which a .pte cannot hold; "
                    f"supported: {sorted(str(d) for d in SUPPORTED_DTYPES)}")
        if node.op == "call_function" and node.target is not operator.getitem and node.target not in SYM_OPS \
                and not isinstance(node.target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
            raise EdgeDialectError(f"node {node.name} calls {node.target!r}, which is not an ATen operator")
