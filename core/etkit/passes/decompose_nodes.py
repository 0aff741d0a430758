"""Decompose chosen nodes of a graph, leaving other nodes of the same op whole.

``Partitioner.ops_to_not_decompose`` returns ops to keep and a filter deciding per node (seed page
"Partitioner API": the filter lets a backend keep, say, one ``linear`` it can run while another
decomposes). ``run_decompositions`` only works per op, so ``to_edge_transform_and_lower`` keeps every
op some node wants kept and then calls :func:`decompose_nodes` on the nodes the filter refused.
"""
from __future__ import annotations

from typing import Iterable

import torch
from torch._guards import detect_fake_mode
from torch.fx.experimental.proxy_tensor import make_fx


class NodeDecompositionError(RuntimeError):
    """A node could not be decomposed (names the node and op)."""


def decompose_nodes(gm: torch.fx.GraphModule, nodes: Iterable[torch.fx.Node], table: dict) -> int:
    """Replace each of ``nodes`` (``call_function`` nodes of ``gm``) by its decomposition under
    ``table`` (an op -> decomposition mapping such as ``torch.export.default_decompositions()``).

    The decomposition is traced on the node's fake inputs (``node.meta["val"]``), so every new node
    carries its own ``meta["val"]``; the node's other metadata (stack trace, debug handle) is copied.

    Returns:
        how many nodes were replaced.
    Raises:
        NodeDecompositionError: a node has no fake-tensor metadata or its decomposition fails to trace.
    """
    count = 0
    for node in list(nodes):
        _decompose_one(gm, node, dict(table))
        count += 1
    if count:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return count


def _decompose_one(gm: torch.fx.GraphModule, node: torch.fx.Node, table: dict) -> None:
    inputs = list(node.all_input_nodes)
    vals = [n.meta.get("val") for n in inputs]
    if any(v is None for v in vals):
        raise NodeDecompositionError(f"node {node.name} ({node.target}): an input has no meta['val']; re-export")
    target, args, kwargs = node.target, node.args, node.kwargs

    def call(*tensors):
        env = dict(zip(inputs, tensors))
        a, k = torch.fx.node.map_arg((args, kwargs), lambda n: env[n])
        return target(*a, **k)

    fake_mode = detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])
    try:
        if fake_mode is not None:
            with fake_mode:
                sub = make_fx(call, decomposition_table=table, tracing_mode="real")(*vals)
        else:
            sub = make_fx(call, decomposition_table=table, tracing_mode="fake")(*vals)
    except Exception as exc:  # noqa: BLE001 - the tracer raises many kinds; name the node instead
        raise NodeDecompositionError(f"node {node.name} ({target}) could not be decomposed: {exc}") from exc
    env: dict = {}
    placeholders = iter(inputs)
    result = None
    with gm.graph.inserting_before(node):
        for sub_node in sub.graph.nodes:
            if sub_node.op == "placeholder":
                env[sub_node] = next(placeholders)
            elif sub_node.op == "output":
                result = torch.fx.node.map_arg(sub_node.args[0], lambda n: env[n])
            elif sub_node.op == "get_attr":
                raise NodeDecompositionError(f"node {node.name} ({target}): its decomposition creates a constant "
                                             f"tensor, which is not supported here")
            else:
                new = gm.graph.node_copy(sub_node, lambda n: env[n])
                for key in ("stack_trace", "nn_module_stack", "source_fn_stack", "debug_handle", "from_node"):
                    if key in node.meta and key not in new.meta:
                        new.meta[key] = node.meta[key]
                env[sub_node] = new
    if isinstance(result, (list, tuple)):
        for user in list(node.users):
            if user.target.__name__ != "getitem":
                raise NodeDecompositionError(f"node {node.name}: a multi-output op read other than by getitem")
            user.replace_all_uses_with(result[user.args[1]])
            gm.graph.erase_node(user)
    else:
        node.replace_all_uses_with(result)
    gm.graph.erase_node(node)
