"""Constant folding: compute ahead of time every op whose inputs are all constants.

A transposed weight (``permute_copy(weight)``) or a mask built from ``arange``/``full`` costs nothing
at run time once folded. Results larger than their inputs (and than ``max_growth_bytes``) are left to
run, so folding never inflates the file much.
"""
from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram

from ..graph.constants import add_constant, drop_unused_constants, get_constant
from ..graph.signature import rename_output

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


def fold_constants(ep: ExportedProgram, max_growth_bytes: int = 1 << 16, keep=None) -> int:
    """Fold constant subexpressions of ``ep`` in place into lifted constants; returns how many ops folded.

    ``keep(placeholder) -> bool``, when given, marks constants to keep as they are: nothing computed from them
    is folded (the weights a program keeps in a ``.ptd`` stay the model's own tensors under their names).
    """
    from torch.export.graph_signature import InputKind, OutputKind

    graph = ep.graph
    # a buffer the program mutates changes between executions: nothing computed from it is constant
    mutated = {s.target for s in ep.graph_signature.output_specs if s.kind == OutputKind.BUFFER_MUTATION}
    mutable_inputs = {s.arg.name for s in ep.graph_signature.input_specs
                      if s.kind == InputKind.BUFFER and s.target in mutated}
    values = {}
    for node in graph.nodes:
        if node.op == "placeholder" and node.name not in mutable_inputs:
            t = get_constant(ep, node)
            if t is not None and not (keep is not None and keep(node)):
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
    count = 0
    for node in folded:
        if not any(u not in folded for u in node.users) and not any(u.op == "output" for u in node.users):
            continue  # only feeds other folded nodes
        placeholder = add_constant(ep, f"_folded_{node.name}", values[node], node.meta["val"])
        node.replace_all_uses_with(placeholder)
        rename_output(ep, node.name, placeholder.name)
        count += 1
    for node in reversed(folded):
        if not node.users:
            graph.erase_node(node)
    drop_unused_constants(ep)
    graph.lint()
    ep.graph_module.recompile()
    return count
