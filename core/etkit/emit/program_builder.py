"""Build a whole program: emit every method, collect constants, delegate payloads and named data."""
from __future__ import annotations

import copy
from typing import Optional

import torch

from etkit.fb.Program import ProgramT

from ..passes.constant_folding import fold_constants
from ..passes.memory_planning import MemoryPlanningPass, planned_alignment
from ..serialize import PteContents
from .constant_methods import emit_constant_method, validate_constant_methods
from .external_data import ExternalData
from .method_emitter import MethodEmitter, ProgramData

#: ``Program.version`` ExecuTorch 1.5 writes and reads.
PROGRAM_VERSION = 0


def _sync_signature_names(ep) -> None:
    """Deep-copying a graph re-creates its node names and renames the ones that shadow Python
    builtins (``nn.Sequential``'s ``input`` becomes ``input_1``) while the signature keeps the old
    names: give the signature the placeholders' names again (they are in the same order)."""
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    outputs = [n for n in ep.graph.nodes if n.op == "output"]
    returned = list(outputs[0].args[0]) if outputs else []
    pairs = list(zip(placeholders, ep.graph_signature.input_specs)) + \
        list(zip(returned, ep.graph_signature.output_specs))
    for node, spec in pairs:
        if isinstance(node, torch.fx.Node) and getattr(spec.arg, "name", node.name) != node.name:
            spec.arg.name = node.name


def copy_program(ep):
    """A deep copy of ``ep`` whose signature names its (possibly renamed) nodes."""
    ep = copy.deepcopy(ep)
    _sync_signature_names(ep)
    return ep


def build_program(programs: dict, config, constant_methods: Optional[dict] = None,
                  debug_info: Optional[dict] = None) -> tuple:
    """Emit ``{method name: lowered Edge ExportedProgram}``; returns ``(PteContents, {method: MemoryPlan},
    ExternalData)``, the last holding what ``config.external_constants`` / ``external_named_data`` send to
    ``.ptd`` files (:mod:`etkit.emit.external_data`).

    The methods' plans are sorted by name; the plans of ``constant_methods`` (``{name: value}``, see
    :mod:`etkit.emit.constant_methods`) follow them in the order given, as ExecuTorch's ``emit_program``
    appends them (so the first plan is always a real method). ``debug_info``, when given, receives
    ``{method: {"debug_handle_map": ..., "delegate_map": ..., "instruction_id_to_num_outs_map": ...}}``
    (instruction index -> debug handles, delegate calls' backend and debug maps, delegates' output counts).
    """
    constant_methods = validate_constant_methods(constant_methods, programs)
    planner = config.memory_planning_pass or MemoryPlanningPass()
    alignment = planned_alignment(getattr(planner, "alignment", None))
    data = ProgramData(external=ExternalData(getattr(config, "external_constants", False),
                                             getattr(config, "external_named_data", None)))
    plans, plans_by_name = [], {}
    if config.constant_folding:
        programs = copy.deepcopy(programs)  # one copy for all methods, so weights they share stay shared
        for ep in programs.values():
            _sync_signature_names(ep)
    for name in sorted(programs):
        ep = programs[name]
        if config.constant_folding:
            # constants bound for a data file keep their own names and bytes (ExecuTorch's keys)
            fold_constants(ep, keep=lambda node: data.external.tag_of(node) is not None)
        emitter = MethodEmitter(name, ep, data, planner, alignment)
        plans.append(emitter.emit())
        plans_by_name[name] = emitter.plan
        if debug_info is not None:
            debug_info[name] = {"debug_handle_map": emitter.debug_handle_map, "delegate_map": emitter.delegate_map,
                                "instruction_id_to_num_outs_map": emitter.instruction_num_outs}
    for name, value in constant_methods.items():
        plans.append(emit_constant_method(name, value, data))
    program = ProgramT(version=PROGRAM_VERSION, executionPlan=plans)
    contents = PteContents(program=program, constant_data=data.constant_data, delegate_data=data.delegate_data,
                           mutable_data=data.mutable_data if len(data.mutable_data) > 1 else [],
                           named_data=data.named_data)
    return contents, plans_by_name, data.external
