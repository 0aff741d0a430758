"""Constant folding: compute ahead of time every op whose inputs are all constants.

A transposed weight (``permute_copy(weight)``) or a mask built from ``arange``/``full`` costs nothing
at run time once folded. Results larger than their inputs (and than ``max_growth_bytes``) are left to
run, so folding never inflates the file much.
"""
from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

from ..backend.utils import get_constant

#: Ops never folded: their result depends on more than their inputs.
_NONDETERMINISTIC_TAGS = (torch.Tag.nondeterministic_seeded,)


def _foldable(node: torch.fx.Node, values: dict) -> bool:
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    if any(tag in node.target.tags for tag in _NONDETERMINISTIC_TAGS):
        return False
    if not isinstance(node.meta.get("val"), torch.Tensor):
        return False
    return all(n in values for n in node.all_input_nodes)


def fold_constants(ep: ExportedProgram, max_growth_bytes: int = 1 << 16) -> int:
    """Fold constant subexpressions of ``ep`` in place into lifted constants; returns how many ops folded."""
    graph = ep.graph
    values = {}
    for node in graph.nodes:
        if node.op == "placeholder":
            t = get_constant(ep, node)
            if t is not None:
                values[node] = t
    folded = []
    for node in list(graph.nodes):
        if not _foldable(node, values):
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: values[n])
        with torch.no_grad():
            result = node.target(*args, **kwargs)
        in_bytes = sum(values[n].numel() * values[n].element_size() for n in node.all_input_nodes)
        out_bytes = result.numel() * result.element_size()
        if out_bytes > max(in_bytes, max_growth_bytes):
            continue
        values[node] = result.contiguous()
        folded.append(node)
    if not folded:
        return 0
    first_user_input = next(n for n in graph.nodes if n.op == "placeholder" and get_constant(ep, n) is None) \
        if any(n.op == "placeholder" and get_constant(ep, n) is None for n in graph.nodes) else None
    count = 0
    for node in folded:
        if not any(u not in folded for u in node.users) and not any(u.op == "output" for u in node.users):
            continue  # only feeds other folded nodes
        name = f"_folded_{node.name}"
        anchor = first_user_input or next(n for n in graph.nodes if n.op != "placeholder")
        with graph.inserting_before(anchor):
            placeholder = graph.placeholder(name)
        placeholder.meta["val"] = node.meta["val"]
        ep.constants[name] = values[node]
        specs = ep.graph_signature.input_specs
        position = next(i for i, s in enumerate(specs) if s.kind == InputKind.USER_INPUT) \
            if any(s.kind == InputKind.USER_INPUT for s in specs) else len(specs)
        specs.insert(position, InputSpec(kind=InputKind.CONSTANT_TENSOR, arg=TensorArgument(name=placeholder.name),
                                         target=name))
        node.replace_all_uses_with(placeholder)
        count += 1
    for node in reversed(folded):
        if not node.users:
            graph.erase_node(node)
    _drop_unused_constants(ep)
    graph.lint()
    ep.graph_module.recompile()
    return count


def _drop_unused_constants(ep: ExportedProgram) -> None:
    for node in list(ep.graph.nodes):
        if node.op == "placeholder" and not node.users and get_constant(ep, node) is not None:
            spec = next(s for s in ep.graph_signature.input_specs if s.arg.name == node.name)
            ep.graph_signature.input_specs.remove(spec)
            ep.graph.erase_node(node)
            if not any(s.target == spec.target for s in ep.graph_signature.input_specs):
                ep.state_dict.pop(spec.target, None)
                ep.constants.pop(spec.target, None)
