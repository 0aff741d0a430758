"""``EthosUPartitioner``: tags the int8 regions of a PT2E-quantized program that the Ethos-U NPU runs.

A region starts at int8 values (the outputs of ``quantize`` nodes, or int8 program inputs) and ends at
``quantize`` nodes, so a delegate takes and returns int8 tensors and the float<->int8 conversions at its
edges run outside, as in ExecuTorch's Arm backend. Inside, every op must have a TOSA 1.0 INT lowering and
satisfy the target's constraints (:mod:`etkit_ethosu.lowering.ops`): Vela has no CPU fallback for TOSA
input, so one op it refuses would fail the whole partition. Every op left outside is reported with its
reason (:meth:`EthosUPartitioner.report`).

Seed pages: "Arm Ethos-U Backend", "Partitioner API" (Ethos-U).
"""
from __future__ import annotations

import logging
from typing import Callable, Optional, Sequence

import torch
from torch.export import ExportedProgram

from etkit.backend import DelegationSpec, Partitioner, PartitionReport, PartitionResult
from etkit.backend.utils import (give_each_user_its_own_copy, is_constant, is_delegate_call, is_user_input,
                                 propose_partitions, settle, tag_partitions)

from ..compile_spec import EthosUCompileSpec
from ..lowering import ops
from ..plugin import BACKEND_ID

logger = logging.getLogger(__name__)


def _tensor_inputs(node: torch.fx.Node) -> list:
    """Node arguments that carry tensors (lists flattened: ``cat``)."""
    found = []
    for arg in node.args:
        for a in (arg if isinstance(arg, (list, tuple)) else [arg]):
            if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor):
                found.append(a)
    return found


def _is_int8_activation_qdq(node) -> bool:
    return node.args[5] == torch.int8 and tuple(node.args[3:5]) == (-128, 127)


def _duplicate_dequantize(ep: ExportedProgram) -> None:
    """One ``dequantize`` per user, so a user left outside does not keep the others out."""
    give_each_user_its_own_copy(ep, ops.is_dequantize)


class EthosUPartitioner(Partitioner):
    """Delegates to the Ethos-U NPU the quantized ops it can run.

    Args:
        compile_spec: the target (default ``EthosUCompileSpec("ethos-u55-128")``); stored in each delegate's
            compile specs and used for the target's operator constraints.
        additional_checks: more vetoes, as ExecuTorch accepts them: ``torch.fx`` ``OperatorSupportBase``
            objects (``is_node_supported(submodules, node)``) or callables ``node -> bool``; a node any of them
            refuses stays outside, reported as such.

    The graph must be quantized (``EthosUQuantizer`` + ``prepare_pt2e``/``convert_pt2e``): float ops are left
    outside with the reason "not quantized".
    """

    def __init__(self, compile_spec: Optional[EthosUCompileSpec] = None,
                 additional_checks: Optional[Sequence] = None) -> None:
        self.compile_spec = compile_spec or EthosUCompileSpec()
        super().__init__(DelegationSpec(BACKEND_ID, self.compile_spec.to_list()))
        self.additional_checks = list(additional_checks or [])
        self._report: Optional[PartitionReport] = None

    # ---- decisions ---------------------------------------------------------------------------------------

    def _vetoed(self, node) -> Optional[str]:
        for check in self.additional_checks:
            ok = check.is_node_supported({}, node) if hasattr(check, "is_node_supported") else check(node)
            if not ok:
                return f"refused by additional check {type(check).__name__}"
        return None

    def _candidates(self, ep: ExportedProgram) -> tuple[set, dict]:
        """Nodes that could be delegated on their own merits, and why the others cannot."""
        u55 = self.compile_spec.is_u55_family
        candidates, reasons = set(), {}
        quantized_flow = set()  # nodes computing on dequantized values (directly or through other such nodes)
        for node in ep.graph.nodes:
            if node.op != "call_function" or is_delegate_call(node):
                continue
            inputs = node.all_input_nodes
            if ops.is_dequantize(node) or any(ops.is_dequantize(a) or a in quantized_flow for a in inputs):
                if not ops.is_quantize(node):
                    quantized_flow.add(node)
            if ops.is_quantize(node) or ops.is_dequantize(node):
                if _is_int8_activation_qdq(node):
                    candidates.add(node)
                continue
            if ops.is_weight_dequantize(node):
                source = node.args[0]
                if isinstance(source, torch.fx.Node) and source.op == "placeholder" and is_constant(ep, source):
                    candidates.add(node)
                continue
            if node not in quantized_flow:
                reasons[node] = ("not quantized: it computes on float tensors; quantize the model with "
                                 "EthosUQuantizer (the NPU runs int8 only)")
                continue
            reason = ops.constraint(node, u55) or self._vetoed(node)
            if reason is None:
                candidates.add(node)
            else:
                reasons[node] = reason
        return candidates, reasons

    def _settle(self, ep: ExportedProgram, supported: set, reasons: dict) -> None:
        """Drop nodes until every float value inside comes from inside and stays inside (fixpoint)."""

        def inside_or_constant(arg) -> bool:
            return arg in supported or (arg.op == "placeholder" and is_constant(ep, arg))

        def compute_users_ok(node) -> bool:
            for user in node.users:
                while ops.is_tail(user) and len(user.users) == 1 and user in supported:
                    user = next(iter(user.users))
                if not (ops.is_quantize(user) and user in supported):
                    return False
            return True

        def verdict(node) -> tuple[bool, Optional[str]]:
            if ops.is_quantize(node):
                return node.args[0] in supported, None
            if ops.is_dequantize(node):
                src = node.args[0]
                from_quantized = ops.is_quantize(src) or (
                    src.op == "placeholder" and (is_user_input(ep, src) or is_constant(ep, src)))
                return from_quantized and all(u in supported for u in node.users), None
            if ops.is_weight_dequantize(node):
                return all(u in supported for u in node.users), None
            inputs = _tensor_inputs(node)
            missing = [a for a in inputs if not inside_or_constant(a)]
            if missing and not any(ops.is_dequantize(a) for a in inputs):
                return False, (f"not quantized: its input {missing[0].name} is a float tensor; quantize the model "
                               f"with EthosUQuantizer (the NPU runs int8 only)")
            if missing:
                return False, f"its input {missing[0].name} stays outside the NPU partition"
            if ops.is_compute(node) and not compute_users_ok(node):
                return False, ("its result is not quantized (no quantize node after it); quantize the model with "
                               "EthosUQuantizer")
            if not ops.is_compute(node) and not all(u in supported for u in node.users):
                return False, "its result is used outside the NPU partition as a float tensor"
            return True, None

        settle(supported, verdict, reasons)

    # ---- Partitioner API ---------------------------------------------------------------------------------

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        """Tag the int8 regions, one tag per connected group; returns ``{tag: DelegationSpec("EthosUBackend")}``."""
        ep = exported_program
        _duplicate_dequantize(ep)
        supported, reasons = self._candidates(ep)
        self._settle(ep, supported, reasons)

        # quantize/dequantize pairs alone are nothing for the NPU to do
        groups = [nodes for nodes in propose_partitions(ep, supported)
                  if any(ops.is_compute(n) or ops.is_pass_through(n) for n in nodes)]
        result, self._report = tag_partitions(ep, groups, self.delegation_spec, backend_id=BACKEND_ID,
                                              tag_prefix="ethosu", reasons=reasons, logger=logger)
        return result

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Optional[Callable[[torch.fx.Node], bool]]]:
        """``aten.linear`` and the unary ops lowered as a TABLE stay whole where their input is quantized
        (a decomposed ``gelu`` would need a quantize node after every piece)."""
        keep = {torch.ops.aten.linear.default}
        for name in ops.TABLE_OPS:
            _, op, overload = name.split(".")
            keep.add(getattr(getattr(torch.ops.aten, op), overload))

        def quantized_input(node: torch.fx.Node) -> bool:
            return bool(node.args) and isinstance(node.args[0], torch.fx.Node) and ops.is_dequantize(node.args[0])

        present = {n.target for n in ep.graph.nodes if n.op == "call_function" and n.target in keep}
        return sorted(present, key=str), quantized_input

    def report(self) -> Optional[PartitionReport]:
        """Delegated op counts and every op left outside with its reason, for the last :meth:`partition`."""
        return self._report
