"""The steps ``to_edge_transform_and_lower`` runs on each method, as functions of one program.

1. :func:`ops_to_keep` asks the partitioners which ops they want whole (not decomposed);
2. :func:`decompose_to_edge` decomposes an exported program to the Edge dialect, keeping those ops;
3. :func:`lower_edge_program` applies the partitioners in order, then decomposes the kept nodes that no
   partitioner took (:func:`decompose_declined`).

:mod:`etkit.program` runs them for every method. :mod:`etkit.fallback` builds a fallback twin from the
Edge program kept before partitioning: :func:`decompose_unwanted` undoes what step 2 kept only for the
partitioners left out, then step 3 runs with the others.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch.export import ExportedProgram

from .backend.lowering import to_backend
from .backend.partitioner import PartitionReport, Partitioner
from .dialects.edge import EdgeCompileConfig, check_edge_graph, scalars_to_tensors, to_edge_graph
from .graph.debug_handles import assign_debug_handles
from .passes.decompose_nodes import decompose_nodes
from .passes.fake_values import propagate_fake_values


def ops_to_keep(partitioners: Sequence[Partitioner], ep: ExportedProgram) -> list:
    """Ops that some partitioner keeps whole for at least one node, or that have no node before
    decomposition (the refused nodes are decomposed one by one afterwards, see
    :func:`nodes_refused_by_filters`)."""
    keep: list = []
    for p in partitioners:
        ops, node_filter = p.ops_to_not_decompose(ep)
        for op in ops:
            nodes = [n for n in ep.graph.nodes if n.op == "call_function" and n.target == op]
            # An op with no node yet may appear while others decompose (sdpa -> _safe_softmax): keep
            # it, and let the filter judge its nodes afterwards.
            if node_filter is None or not nodes or any(node_filter(n) for n in nodes):
                keep.append(op)
    return keep


def nodes_refused_by_filters(partitioners: Sequence[Partitioner], ep: ExportedProgram, kept: set) -> list:
    """Nodes of the ``kept`` ops that none of ``partitioners`` wants whole (each is asked on ``ep`` as it
    is now), in graph order."""
    wanted: set = set()
    candidates = [n for n in ep.graph.nodes if n.op == "call_function" and n.target in kept]
    if not candidates:
        return []
    for p in partitioners:
        ops, node_filter = p.ops_to_not_decompose(ep)
        for n in candidates:
            if n.target in ops and (node_filter is None or node_filter(n)):
                wanted.add(n)
    return [n for n in candidates if n not in wanted]


def _to_edge_form(ep: ExportedProgram) -> None:
    """The steps after a decomposition: Edge ops, debug handles, fake values, scalars as tensors."""
    to_edge_graph(ep.graph_module)
    assign_debug_handles(ep.graph_module)
    propagate_fake_values(ep.graph_module)
    scalars_to_tensors(ep)


def decompose_to_edge(ep: ExportedProgram, keep: Sequence, config: EdgeCompileConfig,
                      partitioners: Sequence[Partitioner] = ()) -> ExportedProgram:
    """Decompose ``ep`` to the Edge dialect except the ops in ``keep`` (and ``config.preserve_ops``);
    nodes of kept ops that no partitioner wants whole are decomposed too. Returns the Edge program, every
    operator node with a debug handle.

    Raises:
        etkit.dialects.edge.EdgeDialectError: ``config`` checks IR validity and a node is not Edge.
    """
    table = torch.export.default_decompositions()
    # training-mode batch norm after functionalization (new running stats as outputs): no kernel takes
    # that form, torch's decomposition turns it into core ops
    table.update(torch._decomp.get_decompositions([torch.ops.aten._native_batch_norm_legit_functional]))
    for op in list(keep) + list(config.preserve_ops):
        if op in table:
            table.pop(op)
    ep = ep.run_decompositions(table)
    refused = nodes_refused_by_filters(partitioners, ep, set(keep) - set(config.preserve_ops))
    if refused:
        decompose_nodes(ep.graph_module, refused, torch.export.default_decompositions())
    _to_edge_form(ep)
    if config._check_ir_validity:
        check_edge_graph(ep.graph_module)
    return ep


def decompose_unwanted(ep: ExportedProgram, partitioners: Sequence[Partitioner], kept: Sequence,
                       config: EdgeCompileConfig) -> list:
    """Bring the Edge program ``ep`` (changed in place), decomposed keeping the ops in ``kept``, to what
    :func:`decompose_to_edge` gives when only ``partitioners`` are asked: nodes of ``kept`` ops none of
    them wants whole are decomposed, keeping the ops they do want whole (an op such a decomposition makes,
    e.g. ``_safe_softmax`` from ``scaled_dot_product_attention``).

    Returns:
        the ops to treat as kept when lowering ``ep`` with ``partitioners`` (``kept`` and the ones they keep).
    Raises:
        etkit.passes.decompose_nodes.NodeDecompositionError: a node could not be decomposed.
    """
    wanted = ops_to_keep(partitioners, ep)
    kept_now = list(kept) + [op for op in wanted if op not in kept]
    refused = nodes_refused_by_filters(partitioners, ep, set(kept) - set(config.preserve_ops))
    if not refused:
        return kept_now
    table = torch.export.default_decompositions()
    for op in list(wanted) + list(config.preserve_ops):
        table.pop(op, None)
    decompose_nodes(ep.graph_module, refused, table)
    # nodes of wanted ops the decomposition made that the partitioners' filters refuse, as decompose_to_edge does
    refused = nodes_refused_by_filters(partitioners, ep, set(kept_now) - set(config.preserve_ops))
    if refused:
        decompose_nodes(ep.graph_module, refused, torch.export.default_decompositions())
    _to_edge_form(ep)
    return kept_now


def decompose_nodes_in_edge(ep: ExportedProgram, nodes: Sequence[torch.fx.Node]) -> int:
    """Decompose ``nodes`` of the Edge program ``ep`` (in place) with torch's default decompositions and
    bring the new nodes to Edge (edge ops, debug handles, fake values). Returns how many were decomposed."""
    if not nodes:
        return 0
    count = decompose_nodes(ep.graph_module, list(nodes), torch.export.default_decompositions())
    to_edge_graph(ep.graph_module)
    assign_debug_handles(ep.graph_module)
    propagate_fake_values(ep.graph_module)
    return count


def decompose_declined(ep: ExportedProgram, kept: Sequence, config: EdgeCompileConfig) -> int:
    """Decompose nodes of kept non-core ops that no partitioner delegated after all.

    ``ops_to_not_decompose`` is asked before partitioning; a partitioner may still decline a kept node when
    it sees the whole graph (a quantization chain it cannot take whole, one float type per partition).
    Such a node (``aten.linear``, torchao's quantize ops) has no portable kernel: it is decomposed now so
    the program stays runnable. Returns how many nodes were decomposed.
    """
    kept = {op for op in kept if op not in config.preserve_ops and torch.Tag.core not in getattr(op, "tags", ())}
    return decompose_nodes_in_edge(ep, [n for n in ep.graph.nodes if n.op == "call_function" and n.target in kept])


def lower_edge_program(ep: ExportedProgram, partitioners: Sequence[Partitioner], kept: Sequence,
                       config: EdgeCompileConfig) -> tuple[ExportedProgram, list[PartitionReport]]:
    """Lower the Edge program ``ep`` with each of ``partitioners`` in order, then decompose the nodes of
    the ``kept`` ops none of them took (:func:`decompose_declined`).

    Returns:
        ``(lowered program, [PartitionReport, ...])``, one report per partitioner that gave one. ``ep``
        itself is changed only when ``partitioners`` is empty (then it is the program returned).
    Raises:
        etkit.backend.lowering.LoweringError: a partition could not be lowered.
        etkit.plugins.BackendNotFoundError: a partition names a backend no installed plugin provides.
    """
    reports = []
    for p in partitioners:
        ep, report = to_backend(ep, p)
        if report is not None:
            reports.append(report)
    decompose_declined(ep, kept, config)
    return ep, reports
