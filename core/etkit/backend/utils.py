"""Helpers partitioners and ``preprocess`` implementations share: constants and tags.

The constant and signature helpers (:func:`is_constant`, :func:`get_constant`, :func:`is_user_input`,
:func:`rename_output`, ``CONSTANT_KINDS``) live in :mod:`etkit.graph`, which passes use too; they stay
importable from here, where backends look for them.
"""
from __future__ import annotations

import collections
import logging
from typing import Callable, Iterable, Mapping, Optional

import torch
from torch.export import ExportedProgram

from ..graph.constants import get_constant
from ..graph.signature import CONSTANT_KINDS, input_spec_of, is_constant, is_user_input, rename_output
from .compile_spec import DelegationSpec
from .partitioner import DELEGATION_TAG, PartitionReport, PartitionResult, Rejection

__all__ = ["CONSTANT_KINDS", "get_constant", "give_each_user_its_own_copy", "is_constant", "is_delegate_call",
           "is_user_input", "node_target_name", "propose_partitions", "rename_output", "settle", "tag_constant_data",
           "tag_partitions"]


def tag_constant_data(ep: ExportedProgram) -> None:
    """Give each constant placeholder the tag of its users when all of them share one tag.

    A constant used by nodes of one partition moves into that delegate's payload; a constant also used
    outside stays in the program (and is passed to the delegate as an input), and so does a buffer the
    program mutates.
    """
    from torch.export.graph_signature import OutputKind

    # a mutated buffer stays in the program: it changes between executions, a payload cannot hold it
    mutated = {s.target for s in ep.graph_signature.output_specs if s.kind == OutputKind.BUFFER_MUTATION}
    for node in ep.graph.nodes:
        if not is_constant(ep, node) or not node.users:
            continue
        spec = input_spec_of(ep, node)
        if spec is not None and spec.target in mutated:
            continue
        tags = {user.meta.get(DELEGATION_TAG) for user in node.users}
        if len(tags) == 1 and None not in tags:
            node.meta[DELEGATION_TAG] = tags.pop()


def is_delegate_call(node: torch.fx.Node) -> bool:
    """True for a call of an already-lowered delegate (``executorch_call_delegate``) or a ``getitem`` of
    one: nodes an earlier partitioner took, which a later partitioner neither takes nor reports."""
    import operator

    from .delegate import executorch_call_delegate
    if node.op != "call_function":
        return False
    if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    return node.target is executorch_call_delegate


def node_target_name(node: torch.fx.Node) -> str:
    """A readable op name for reports: ``aten.convolution.default``."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._schema.name.split('::')[-1]}.{target._overloadname}"
    return getattr(target, "__name__", str(target))


def propose_partitions(ep: ExportedProgram, supported: set) -> list[list[torch.fx.Node]]:
    """Group the ``supported`` nodes of ``ep`` into connected partitions without cycles through unsupported
    nodes (torch's ``CapabilityBasedPartitioner``), ordered by their first node in the graph.

    Returns:
        One list of nodes per partition; tagging them is the partitioner's job.
    """
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    class _Supported(OperatorSupportBase):
        def is_node_supported(self, submodules, node) -> bool:
            return node in supported

    groups = [list(p.nodes) for p in CapabilityBasedPartitioner(
        ep.graph_module, _Supported(), allows_single_node_partition=True).propose_partitions()]
    order = {n: i for i, n in enumerate(ep.graph.nodes)}
    groups.sort(key=lambda g: min(order[n] for n in g))
    return groups


def settle(supported: set, verdict: Callable[[torch.fx.Node], tuple[bool, Optional[str]]],
           reasons: dict) -> None:
    """Drop nodes from ``supported`` until every node left passes ``verdict`` (a fixpoint: dropping one node
    can fail another that feeds it or reads it, e.g. a quantize whose producer left the partition).

    Args:
        supported: the candidate nodes; changed in place.
        verdict: ``verdict(node) -> (keep, why)`` for a node still in ``supported``; it reads ``supported``, so
            each answer sees the nodes dropped before it. ``why`` (shown to the user) may be None for a node
            whose reason was already given or needs none (e.g. a quantize node at a partition's edge).
        reasons: ``{node: why}``; each dropped node with a ``why`` is written here.
    """
    changed = True
    while changed:
        changed = False
        for node in list(supported):
            keep, why = verdict(node)
            if not keep:
                supported.discard(node)
                if why is not None:
                    reasons[node] = why
                changed = True


def tag_partitions(ep: ExportedProgram, groups: Iterable[list], delegation_spec: DelegationSpec, *,
                   backend_id: str, tag_prefix: str, reasons: Optional[Mapping[torch.fx.Node, str]] = None,
                   rejected: Iterable[Rejection] = (), take_constant_data: bool = True,
                   logger: Optional[logging.Logger] = None) -> tuple[PartitionResult, PartitionReport]:
    """What every partitioner ends with: tag each group, take the constants the groups read, and report.

    Args:
        ep: the program being partitioned; its nodes get ``node.meta["delegation_tag"]``.
        groups: the node groups to delegate, in the order their tags are numbered (``<tag_prefix>_0``,
            ``<tag_prefix>_1``, ...), e.g. :func:`propose_partitions`'s after the backend dropped the groups
            not worth a delegate call.
        delegation_spec: what every tag maps to in the result.
        backend_id: the report's backend.
        tag_prefix: the tags' prefix, e.g. ``"mybackend"``.
        reasons: why each refused node was refused; the ones left untagged become :class:`Rejection` rows.
        rejected: rejections the partitioner built itself, kept as they are.
        take_constant_data: tag the parameters, buffers and constants only delegated nodes read
            (:func:`tag_constant_data`), so they move into the delegate.
        logger: where the report is logged at INFO (None: not logged).
    Returns:
        ``(PartitionResult, PartitionReport)``: the report counts the delegated nodes per op and lists the
        rejections in graph order.
    """
    tags: dict = {}
    delegated = collections.Counter()
    for nodes in groups:
        tag = f"{tag_prefix}_{len(tags)}"
        tags[tag] = delegation_spec
        for n in nodes:
            n.meta[DELEGATION_TAG] = tag
            delegated[node_target_name(n)] += 1
    if take_constant_data:
        tag_constant_data(ep)
    rows = list(rejected) + [Rejection(n.name, node_target_name(n), why) for n, why in (reasons or {}).items()
                             if DELEGATION_TAG not in n.meta]
    position = {n.name: i for i, n in enumerate(ep.graph.nodes)}
    rows.sort(key=lambda r: position.get(r.node_name, 0))
    report = PartitionReport(backend_id, dict(sorted(delegated.items())), rows, len(tags))
    if logger is not None:
        logger.info("%s", report.format())
    return PartitionResult(tagged_exported_program=ep, partition_tags=tags), report


def give_each_user_its_own_copy(ep: ExportedProgram, predicate) -> int:
    """For every node with ``predicate(node)`` true and several users, give each user after the first its own
    copy of the node (same target, arguments and metadata), so that a user a partitioner leaves out does not
    keep the node, and with it the other users, out too. Quantized backends do this for ``dequantize`` nodes
    (ExecuTorch's backends do the same). Returns how many copies were made."""
    graph = ep.graph
    copies = 0
    for node in list(graph.nodes):
        if not predicate(node) or len(node.users) < 2:
            continue
        for user in list(node.users)[1:]:
            with graph.inserting_after(node):
                copy = graph.node_copy(node)
            copy.meta = dict(node.meta)
            user.replace_input_with(node, copy)
            copies += 1
    if copies:
        ep.graph_module.recompile()
    return copies
