"""``to_backend``: fuse each tagged partition into one delegate call (seed: "Lowering a Model as a Delegate").

For every tag a partitioner returned, the tagged nodes are cut out into their own Edge ``ExportedProgram``,
handed to the backend's ``preprocess``, and replaced by::

    lowered = get_attr[lowered_module_N]
    call = executorch_call_delegate(lowered, *inputs)
    out_i = getitem(call, i)
"""
from __future__ import annotations

import copy
import operator
from typing import Optional

import torch
from torch.export import ExportedProgram
from torch.export.exported_program import ExportGraphSignature
from torch.export.graph_signature import InputKind, InputSpec, OutputKind, OutputSpec, TensorArgument

from ..graph.constants import drop_unused_constants
from ..graph.debug_handles import debug_handles_of
from ..graph.signature import is_constant, rename_output
from ..plugins import get_backend_spec
from .backend_details import PreprocessResult
from .delegate import LoweredBackendModule, executorch_call_delegate
from .partitioner import DELEGATION_TAG, PartitionReport, Partitioner


class LoweringError(RuntimeError):
    """A partition could not be lowered (cycle, failed preprocess, unknown backend)."""


def _partition_nodes(ep: ExportedProgram, tag: str) -> tuple[list, list]:
    compute, consts = [], []
    for node in ep.graph.nodes:
        if node.meta.get(DELEGATION_TAG) != tag:
            continue
        if node.op == "call_function":
            compute.append(node)
        elif node.op == "placeholder" and is_constant(ep, node):
            consts.append(node)
        else:
            raise LoweringError(
                f"partition {tag!r}: node {node.name} ({node.op}) was tagged, but only operator calls and "
                f"constant placeholders can move into a delegate; the partitioner must not tag it")
    return compute, consts


def _check_no_cycle(compute: list, tag: str) -> None:
    """Fusing ``compute`` must not create a cycle: no path may leave the partition and come back."""
    members = set(compute)
    outside_reached: set = set()
    frontier = [user for n in compute for user in n.users if user not in members]
    while frontier:
        node = frontier.pop()
        if node in outside_reached:
            continue
        outside_reached.add(node)
        for user in node.users:
            if user in members:
                raise LoweringError(
                    f"partition {tag!r}: fusing it would create a cycle through node {node.name} "
                    f"({node.target}), which depends on the partition and feeds it; the partitioner must split "
                    f"this partition")
            frontier.append(user)


def _stable_topological_sort(graph: torch.fx.Graph) -> None:
    order = {n: i for i, n in enumerate(graph.nodes)}
    pending = {n: len(n.all_input_nodes) for n in graph.nodes}
    import heapq
    ready = [(order[n], n.name, n) for n, k in pending.items() if k == 0]
    heapq.heapify(ready)
    sorted_nodes = []
    while ready:
        _, _, node = heapq.heappop(ready)
        sorted_nodes.append(node)
        for user in node.users:
            pending[user] -= 1
            if pending[user] == 0:
                heapq.heappush(ready, (order[user], user.name, user))
    if len(sorted_nodes) != len(order):
        raise LoweringError("graph has a cycle after fusion")
    cursor = graph._root  # noqa: SLF001 (fx exposes no public reorder API)
    for node in sorted_nodes:
        cursor.append(node)
        cursor = node


def _extract_partition(ep: ExportedProgram, compute: list, consts: list):
    """Build the partition's own ExportedProgram; returns (program, external inputs, outputs)."""
    members = set(compute) | set(consts)
    inputs: list = []
    for node in compute:
        for arg in node.all_input_nodes:
            if arg not in members and arg not in inputs:
                inputs.append(arg)
    outputs = [n for n in compute if any(u not in members for u in n.users)]

    graph = torch.fx.Graph()
    env: dict = {}
    input_specs = []
    state_dict, constants = {}, {}
    for node in consts:
        new = graph.placeholder(node.name)
        new.meta = copy.copy(node.meta)
        env[node] = new
        spec = next(s for s in ep.graph_signature.input_specs if s.arg.name == node.name)
        input_specs.append(InputSpec(kind=spec.kind, arg=TensorArgument(name=new.name), target=spec.target,
                                     persistent=spec.persistent))
        if spec.target in ep.state_dict:
            state_dict[spec.target] = ep.state_dict[spec.target]
        else:
            constants[spec.target] = ep.constants[spec.target]
    for node in inputs:
        new = graph.placeholder(node.name)
        new.meta = copy.copy(node.meta)
        env[node] = new
        input_specs.append(InputSpec(kind=InputKind.USER_INPUT, arg=TensorArgument(name=new.name), target=None))
    for node in compute:
        env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(tuple(env[n] for n in outputs))
    output_specs = [OutputSpec(kind=OutputKind.USER_OUTPUT, arg=TensorArgument(name=env[n].name), target=None)
                    for n in outputs]
    gm = torch.fx.GraphModule(ep.graph_module, graph)
    sub = ExportedProgram(
        root=gm, graph=gm.graph,
        graph_signature=ExportGraphSignature(input_specs=input_specs, output_specs=output_specs),
        state_dict=state_dict, range_constraints=copy.copy(ep.range_constraints), module_call_graph=[],
        constants=constants, verifiers=[ep.verifier],
    )
    return sub, inputs, outputs


def _preprocess(backend_id: str, sub: ExportedProgram, compile_specs: list, tag: str) -> PreprocessResult:
    details = get_backend_spec(backend_id).load_backend_details()
    try:
        result = details.preprocess(sub, list(compile_specs))
    except Exception as exc:
        raise LoweringError(f"backend {backend_id!r} failed to preprocess partition {tag!r}: "
                            f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(result, PreprocessResult):
        raise LoweringError(f"backend {backend_id!r}: preprocess returned {type(result).__name__}, "
                            f"expected PreprocessResult")
    return result


def _next_module_index(gm: torch.fx.GraphModule) -> int:
    i = 0
    while hasattr(gm, f"lowered_module_{i}"):
        i += 1
    return i


def lower_partitions(ep: ExportedProgram, partition_tags: dict) -> ExportedProgram:
    """Replace every tagged partition of ``ep`` (modified in place) with a delegate call."""
    gm = ep.graph_module
    for tag, delegation_spec in partition_tags.items():
        compute, consts = _partition_nodes(ep, tag)
        if not compute:
            continue
        _check_no_cycle(compute, tag)
        sub, inputs, outputs = _extract_partition(ep, compute, consts)
        result = _preprocess(delegation_spec.backend_id, sub, delegation_spec.compile_specs, tag)
        lowered = LoweredBackendModule(delegation_spec.backend_id, result.processed_bytes,
                                       delegation_spec.compile_specs, sub, result.named_data,
                                       num_inputs=len(inputs), num_outputs=len(outputs),
                                       debug_handles=debug_handles_of(compute),
                                       debug_handle_map=result.debug_handle_map)
        name = f"lowered_module_{_next_module_index(gm)}"
        gm.add_submodule(name, lowered)
        anchor = compute[-1]
        with gm.graph.inserting_after(anchor):
            attr = gm.graph.get_attr(name)
        with gm.graph.inserting_after(attr):
            call = gm.graph.call_function(executorch_call_delegate, (attr, *inputs))
        call.meta["val"] = tuple(n.meta.get("val") for n in outputs)
        call.meta["delegation_tag"] = tag
        prev = call
        for i, out in enumerate(outputs):
            with gm.graph.inserting_after(prev):
                item = gm.graph.call_function(operator.getitem, (call, i))
            item.meta = {"val": out.meta.get("val")}
            out.replace_all_uses_with(item, delete_user_cb=lambda user: user.meta.get(DELEGATION_TAG) != tag
                                      or user.op == "output")
            rename_output(ep, out.name, item.name)
            prev = item
        for node in reversed(compute):
            node.meta.pop(DELEGATION_TAG, None)
            gm.graph.erase_node(node)
        drop_unused_constants(ep)
        _stable_topological_sort(gm.graph)
    for node in gm.graph.nodes:
        node.meta.pop(DELEGATION_TAG, None)
    gm.graph.lint()
    gm.recompile()
    return ep


def to_backend(ep: ExportedProgram, partitioner: Partitioner) -> tuple[ExportedProgram, Optional[PartitionReport]]:
    """Partition ``ep`` with ``partitioner`` and lower every partition; returns a new program and the report.

    Raises:
        LoweringError: a partition would create a cycle, or its backend's preprocess failed.
        etkit.plugins.BackendNotFoundError: a tag names a backend no installed plugin provides.
    """
    work = copy.deepcopy(ep)
    result = partitioner.partition(work)
    tagged = result.tagged_exported_program
    for spec in result.partition_tags.values():
        get_backend_spec(spec.backend_id)  # fail before any work when a backend is not installed
    lowered = lower_partitions(tagged, result.partition_tags)
    return lowered, partitioner.report()
