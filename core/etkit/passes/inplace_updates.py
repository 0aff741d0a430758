"""Ops that update a mutable buffer in place (a KV cache written by ``llama::update_cache``).

``torch.export`` functionalizes a call of a mutating op: ``llama.update_cache(value, cache, pos)`` on a
buffer becomes ``auto_functionalized_v2(llama.update_cache, value=..., start_pos=..., _cache_base_index=0,
_all_bases=[b_cache])``, whose outputs are the op's return and the buffer's new value, and the method's
``BUFFER_MUTATION`` output names that new value. Emitting it functionally would copy the whole buffer
after every call (for a KV cache, all layers' caches per generated token). The emitter instead calls the
op's out variant on the buffer's own memory, so the new value *is* the buffer and no copy is written
(ExecuTorch's emitter does the same for its LLM ops).

That is only correct when nothing reads the buffer's old value after the update and the buffer is passed
whole (not a view of it); :func:`inplace_update_call` checks both and says why otherwise.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Optional, Union

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

_AUTO_FUNCTIONALIZED = tuple(op for op in (getattr(torch.ops.higher_order, "auto_functionalized_v2", None),)
                             if op is not None)


def is_inplace_update(node: torch.fx.Node) -> bool:
    """True for an ``auto_functionalized_v2`` node (a functionalized call of a mutating op)."""
    return node.op == "call_function" and node.target in _AUTO_FUNCTIONALIZED


@dataclass
class InplaceUpdate:
    """A mutating op called on mutable buffers: ``op(**arguments)``, writing into ``bases``."""

    op: torch._ops.OpOverload
    #: schema argument name -> value (an fx Node for tensors and symbolic ints, else the literal)
    arguments: dict
    #: the buffer placeholders the op writes, in ``_all_bases`` order
    bases: list


def inplace_update_call(ep: ExportedProgram, node: torch.fx.Node,
                        position: Optional[dict] = None) -> Union[InplaceUpdate, str]:
    """The in-place call behind ``node``, or a message saying why it cannot be run in place.

    Args:
        ep: the method's program (its graph signature says which placeholders are mutable buffers).
        node: an ``auto_functionalized_v2`` node.
        position: ``{node: index}`` of the graph's nodes; when given, also checks that no node after
            ``node`` reads a buffer's old value.
    """
    op = node.args[0]
    kwargs = dict(node.kwargs)
    bases = list(kwargs.pop("_all_bases", []))
    name = f"node {node.name} ({op})"
    mutated = {s.arg.name: s.target for s in ep.graph_signature.output_specs if s.kind == OutputKind.BUFFER_MUTATION}
    buffers = {s.arg.name: s.target for s in ep.graph_signature.input_specs if s.kind == InputKind.BUFFER}
    arguments = {}
    for arg in op._schema.arguments:
        mutable = arg.alias_info is not None and arg.alias_info.is_write
        if not mutable:
            if arg.name in kwargs:
                arguments[arg.name] = kwargs[arg.name]
            continue
        index = kwargs.get(f"_{arg.name}_base_index")
        if any(f"_{arg.name}_{suffix}" in kwargs for suffix in ("size", "stride", "storage_offset", "slice_dim")):
            return (f"{name}: argument {arg.name!r} is a view of a buffer; etkit updates whole buffers in place only "
                    f"(pass the buffer itself)")
        if not isinstance(index, int) or not 0 <= index < len(bases):
            return f"{name}: argument {arg.name!r} is not a buffer of the program"
        arguments[arg.name] = bases[index]
    for i, base in enumerate(bases):
        if not isinstance(base, torch.fx.Node) or base.op != "placeholder" or base.name not in buffers:
            return (f"{name}: it writes {getattr(base, 'name', base)!r}, which is not a buffer of the program; "
                    f"etkit runs such ops in place on mutable buffers (register the tensor with register_buffer)")
        new_values = [u for u in node.users if u.target is operator.getitem and u.args[1] == i + 1]
        if not any(mutated.get(v.name) == buffers[base.name] for v in new_values):
            return f"{name}: the new value of buffer {buffers[base.name]!r} is not written back to it"
        if position is not None:
            late = [u for u in base.users if u is not node and position[u] > position[node]]
            if late:
                return (f"{name}: {late[0].name} reads buffer {buffers[base.name]!r} after it was updated in place "
                        f"but expects its old value")
    return InplaceUpdate(op=op, arguments=arguments, bases=bases)
