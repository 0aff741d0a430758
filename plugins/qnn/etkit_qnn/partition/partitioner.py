"""``QnnPartitioner``: tags what the Qualcomm HTP runs (seed page "Qualcomm AI Engine Backend", "Partitioner API").

Precision follows the compile specs (``generate_htp_compiler_spec(use_fp16=...)``):

* quantized (default): the program is PT2E-quantized (``QnnQuantizer``). An op is delegated when the HTP has
  it (:mod:`etkit_qnn.partition.configs`) and it sits in a QDQ group: every float input comes from a
  ``dequantize`` (or is a constant) and every user is a ``quantize`` (or, for a convolution, linear or add,
  a ReLU/clamp fused into it whose users are). The ``quantize`` nodes of the group's
  inputs and the ``dequantize`` nodes of its outputs go inside as well, so a delegate takes and returns
  float32 tensors (the delegate converts them to and from the context's integer tensors, as PT2E does).
* fp16: float32 ops the HTP has run in fp16; ``quantize``/``dequantize`` nodes stay outside.

Every op left outside is in :meth:`QnnPartitioner.report` with its reason.
"""
from __future__ import annotations

import functools
import logging
import operator
from typing import Callable, Optional

import torch
from torch.export import ExportedProgram

from etkit.backend import CompileSpec, DelegationSpec, Partitioner, PartitionReport, PartitionResult
from etkit.backend.utils import (give_each_user_its_own_copy, is_constant, is_delegate_call,
                                 node_target_name, propose_partitions, settle, tag_partitions)
from etkit.dialects import quantized
from etkit.dialects.quantized import is_quantize

from ..compile_spec import QnnCompileSpec
from ..plugin import BACKEND_ID
from . import configs

logger = logging.getLogger(__name__)
qd = torch.ops.quantized_decomposed
DEQUANTIZE_AFFINE = configs.DEQUANTIZE_AFFINE
#: Every dequantize QnnQuantizer leaves: activations per tensor, weights per channel or block-wise.
is_dequantize = functools.partial(quantized.is_dequantize, per_channel=True, blockwise=True)


def _duplicate_dequantize(ep: ExportedProgram) -> None:
    """One ``dequantize`` per user, so a user left outside does not keep the others out."""
    give_each_user_its_own_copy(ep, is_dequantize)


class QnnPartitioner(Partitioner):
    """Delegates to the Qualcomm HTP (QNN) the ops it runs.

    Args:
        compiler_specs: from :func:`etkit_qnn.generate_qnn_executorch_compiler_spec` (default: SM8650,
            quantized precision).
        skip_node_id_set: node names to keep outside (reported as skipped).
        skip_node_op_set: op names to keep outside, as ``str(target)`` (``"aten.add.Tensor"``) or OpOverloads.
    """

    def __init__(self, compiler_specs: Optional[list[CompileSpec]] = None, skip_node_id_set: Optional[set] = None,
                 skip_node_op_set: Optional[set] = None, skip_mutable_buffer: bool = False) -> None:
        specs = list(compiler_specs) if compiler_specs else QnnCompileSpec().to_list()
        self.spec = QnnCompileSpec.from_list(specs)
        super().__init__(DelegationSpec(BACKEND_ID, specs))
        self.skip_node_id_set = set(skip_node_id_set or ())
        self.skip_node_op_set = {str(op) if not isinstance(op, str) else op for op in (skip_node_op_set or ())}
        self._report: Optional[PartitionReport] = None

    # ---- decisions ---------------------------------------------------------------------------------------

    def _skipped(self, node) -> Optional[str]:
        if node.name in self.skip_node_id_set:
            return "skipped: its name is in skip_node_id_set"
        if node_target_name(node) in self.skip_node_op_set or str(node.target) in self.skip_node_op_set:
            return "skipped: its op is in skip_node_op_set"
        return None

    def _candidates(self, ep: ExportedProgram) -> tuple[set, dict]:
        fp16 = self.spec.use_fp16
        candidates, reasons = set(), {}
        for node in ep.graph.nodes:
            if node.op != "call_function" or is_delegate_call(node):
                continue
            reason = self._skipped(node)
            if reason is None and (is_quantize(node) or is_dequantize(node)):
                if fp16:
                    reason = ("quantize/dequantize stays outside: the compile specs ask for fp16 precision; lower a "
                              "quantized program with generate_htp_compiler_spec(use_fp16=False)")
                else:
                    reason = self._qdq_reason(ep, node)
            elif reason is None:
                reason = configs.check_node(node, fp16)
            if reason is None:
                candidates.add(node)
            else:
                reasons[node] = reason
        return candidates, reasons

    @staticmethod
    def _qdq_reason(ep, node) -> Optional[str]:
        if is_quantize(node) and len(node.args) < 6:
            return "quantize with tensor-valued parameters is not lowered"
        dtype = node.args[6] if node.target is qd.dequantize_per_channel.default else \
            node.args[4] if node.target is DEQUANTIZE_AFFINE else node.args[-1]
        if dtype not in (torch.uint8, torch.int8, torch.uint16, torch.int16, torch.int32):
            return f"quantized dtype {dtype} is not supported"
        if node.target in (qd.dequantize_per_channel.default, DEQUANTIZE_AFFINE) and not (
                node.args[0].op == "placeholder" and is_constant(ep, node.args[0])):
            return "per-channel or block-wise dequantize of a computed value is not lowered (only of constant weights)"
        return None

    def _settle(self, ep: ExportedProgram, supported: set, reasons: dict) -> None:
        """Quantized precision: drop nodes until every delegated op sits in a QDQ group (fixpoint)."""
        if self.spec.use_fp16:
            return

        def constant(a) -> bool:
            return a.op == "placeholder" and is_constant(ep, a)

        def inside_or_constant(a) -> bool:
            return a in supported or constant(a)

        def quantized_users(node) -> bool:
            activation = configs.fused_activation(node)  # the HTP fuses it: quantized after it
            if activation is not None:
                return activation in supported
            return all(u in supported and (is_quantize(u) or u.target is operator.getitem) for u in node.users)

        def verdict(node) -> tuple[bool, Optional[str]]:
            if is_quantize(node):       # its integer result must not leave the partition
                return all(u in supported for u in node.users), None
            if is_dequantize(node):     # of a quantize inside, or of a constant weight used inside
                src = node.args[0]
                return (is_quantize(src) and src in supported) or \
                    (constant(src) and all(u in supported for u in node.users)), None
            if node.target is operator.getitem:
                return node.args[0] in supported and quantized_users(node), None
            inputs = [a for a in node.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
            outside = [a for a in inputs if not inside_or_constant(a)]
            if outside:
                a = outside[0]
                return False, (f"its input {a.name} stays outside the QNN partition" if is_dequantize(a) else
                               f"not quantized: its input {a.name} is not a dequantized value; quantize the model "
                               f"with QnnQuantizer (or compile with use_fp16=True)")
            if not quantized_users(node):
                return False, ("its result is not quantized (no quantize node after it); quantize the model with "
                               "QnnQuantizer (or compile with use_fp16=True)")
            return True, None

        settle(supported, verdict, reasons)

    # ---- Partitioner API ---------------------------------------------------------------------------------

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        """Tag the supported regions, one tag per connected group: ``{tag: DelegationSpec("QnnBackend")}``."""
        ep = exported_program
        if not self.spec.use_fp16:
            _duplicate_dequantize(ep)
        supported, reasons = self._candidates(ep)
        while True:
            self._settle(ep, supported, reasons)
            groups = propose_partitions(ep, supported)
            # A quantize whose dequantize landed in another group (split to avoid a cycle) would make a delegate
            # return integers: leave it outside, and settle again.
            group_of = {n: i for i, nodes in enumerate(groups) for n in nodes}
            leaking = [n for n in supported if is_quantize(n) and any(group_of.get(u) != group_of.get(n) for u in n.users)]
            if not leaking:
                break
            supported.difference_update(leaking)
        # quantize/dequantize pairs alone are nothing for the HTP to do
        worth = [nodes for nodes in groups
                 if any(n.target in configs.BY_TARGET and n.target is not operator.getitem for n in nodes)]
        result, self._report = tag_partitions(
            ep, worth, self.delegation_spec, backend_id=BACKEND_ID, tag_prefix="qnn", logger=logger,
            reasons={n: why for n, why in reasons.items() if not (is_quantize(n) or is_dequantize(n))})
        return result

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Optional[Callable[[torch.fx.Node], bool]]]:
        """``linear``, ``matmul``, ``gelu``, ``hardswish``, ``hardsigmoid`` and ``adaptive_avg_pool2d`` stay whole
        (QNN has them as single ops; a decomposed ``matmul`` would put float reshapes between its dequantize and
        the batched product). In quantized precision only nodes reading dequantized values are kept."""
        present = {n.target for n in ep.graph.nodes if n.op == "call_function" and n.target in configs.KEEP_UNDECOMPOSED}
        if self.spec.use_fp16:
            return sorted(present, key=str), None

        # torchao's dequantize_affine (block-wise weights) stays whole too, to become a blocked DequantizeLinear.
        if DEQUANTIZE_AFFINE is not None and any(n.target is DEQUANTIZE_AFFINE for n in ep.graph.nodes):
            present.add(DEQUANTIZE_AFFINE)

        def reads_quantized(node: torch.fx.Node) -> bool:
            if node.target is DEQUANTIZE_AFFINE:  # only for the linears the HTP takes; else the CPU runs its parts
                return self._qdq_reason(ep, node) is None and all(
                    u.target is torch.ops.aten.linear.default for u in node.users)
            return any(is_dequantize(a) for a in node.all_input_nodes) and configs.check_node(node, False) is None

        return sorted(present, key=str), reads_quantized

    def report(self) -> Optional[PartitionReport]:
        """Delegated op counts and every op left outside with its reason, for the last :meth:`partition`."""
        return self._report
