"""``VulkanPartitioner``: tags the edge ops the Vulkan delegate runs (seed page "Partitioner API", Vulkan).

    VulkanPartitioner(compile_options=None, operator_blocklist=None, operator_allowlist=None)

``compile_options`` is the seed's dictionary (:mod:`etkit_vulkan.compile_spec`); the block/allow lists
hold edge ops (``torch.ops.aten.convolution.default``) or their names (``"aten.convolution.default"``).
Every node left out is listed in :meth:`report` with the reason (:mod:`etkit_vulkan.op_support`).
"""
from __future__ import annotations

import collections
import logging
import operator
from typing import Callable, Iterable, Optional

import torch
from torch.export import ExportedProgram

from etkit.backend import DelegationSpec, Partitioner, PartitionReport, PartitionResult
from etkit.backend.utils import is_delegate_call, node_target_name, propose_partitions, tag_partitions

from ..compile_spec import VulkanCompileOptions
from ..op_support import BY_TARGET, FAMILIES, FLOAT_DTYPES, SYM_OPS, dynamic_chain, tensor_outputs
from ..plugin import BACKEND_ID

logger = logging.getLogger(__name__)

_SYM_SIZE = torch.ops.aten.sym_size.int


def _names(ops: Optional[Iterable]) -> Optional[set]:
    if ops is None:
        return None
    return {str(op) for op in ops}  # an OpOverload's str is its name: "aten.convolution.default"


def _flat_args(node: torch.fx.Node):
    """(position, value) of every argument, lists flattened (position of the list)."""
    for i, a in enumerate(node.args):
        if isinstance(a, (list, tuple)):
            for x in a:
                yield i, x
        else:
            yield i, a


class VulkanPartitioner(Partitioner):
    """Delegates every node whose op the Vulkan shader library implements, with its constraints.

    Args:
        compile_options: ``require_dynamic_shapes``, ``force_fp16``, ``storage_type_override``
            (see :class:`~etkit_vulkan.compile_spec.VulkanCompileOptions`).
        operator_blocklist: ops never delegated.
        operator_allowlist: when given, only these ops are delegated.

    Raises:
        ValueError: an unknown compile option.
    """

    def __init__(self, compile_options: Optional[dict] = None, operator_blocklist=None, operator_allowlist=None,
                 nn_module_blocklist=None, nn_module_allowlist=None) -> None:
        self.options = VulkanCompileOptions.parse(compile_options)
        super().__init__(DelegationSpec(BACKEND_ID, self.options.to_compile_specs()))
        self.blocklist = _names(operator_blocklist) or set()
        self.allowlist = _names(operator_allowlist)
        self.nn_module_blocklist = set(nn_module_blocklist or ())
        self.nn_module_allowlist = set(nn_module_allowlist) if nn_module_allowlist else None
        self._report: Optional[PartitionReport] = None

    # ------------------------------------------------------------------ per-node decision
    def check_node(self, node: torch.fx.Node, ep: ExportedProgram) -> Optional[str]:
        """Why ``node`` cannot be delegated, or None (SymInt arithmetic and getitem are decided by their
        neighbours in :meth:`partition`)."""
        name = node_target_name(node)
        family = BY_TARGET.get(node.target)
        if family is None:
            return "not implemented by the Vulkan delegate"
        if name in self.blocklist:
            return "in operator_blocklist"
        if self.allowlist is not None and name not in self.allowlist:
            return "not in operator_allowlist"
        stack = [str(v[0]) if isinstance(v, tuple) else str(v)
                 for v in (node.meta.get("nn_module_stack") or {}).values()]
        if self.nn_module_blocklist & set(stack):
            return "inside a module of nn_module_blocklist"
        if self.nn_module_allowlist is not None and not self.nn_module_allowlist & set(stack):
            return "outside the modules of nn_module_allowlist"
        if family.quantization:
            return family.check(node, ep)
        for pos, a in _flat_args(node):
            val = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
            if not isinstance(val, torch.Tensor):
                continue
            if val.dtype not in FLOAT_DTYPES and not (pos in family.int_inputs and not val.is_floating_point()):
                return f"input {pos} is a {val.dtype} tensor; the Vulkan delegate computes on float16/float32"
            if val.dim() > family.max_dims:
                return f"input {pos} has {val.dim()} dimensions; at most {family.max_dims} are supported"
        outs = tensor_outputs(node)
        if not outs:
            return "produces no tensor"
        for out in outs[:1]:
            if out.dtype not in FLOAT_DTYPES:
                return f"produces a {out.dtype} tensor; the Vulkan delegate computes on float16/float32"
            if out.dim() > family.max_dims:
                return f"produces a {out.dim()}-D tensor; at most {family.max_dims} dimensions are supported"
        return family.check(node, ep) if family.check is not None else None

    # ------------------------------------------------------------------ contract
    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Optional[Callable[[torch.fx.Node], bool]]]:
        """Composite ops the shaders implement whole (linear, layer_norm, gelu, hardswish, ...), kept when the
        node passes its check."""
        ops = [op for f in FAMILIES for op in f.keep_undecomposed]
        return ops, lambda node: self.check_node(node, ep) is None

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        ep = exported_program
        supported, reasons = set(), {}
        for node in ep.graph.nodes:
            if node.op != "call_function" or is_delegate_call(node):
                continue
            if node.target is operator.getitem or node.target in SYM_OPS or node.target is _SYM_SIZE:
                continue
            why = self.check_node(node, ep)
            if why is None:
                supported.add(node)
            else:
                reasons[node] = why
        self._one_float_type(supported, reasons)
        for node in list(supported):  # a run-time quantization chain is delegated whole or not at all
            if node in supported and BY_TARGET[node.target].quantization:
                chain, _ = dynamic_chain(node)
                members = [n for n in chain.nodes if n.target is not operator.getitem] if chain else []
                missing = [n for n in members if n not in supported]
                if missing:
                    for n in members:
                        supported.discard(n)
                        reasons.setdefault(n, f"part of a run-time quantization whose node {missing[0].name} is "
                                              f"not delegated ({reasons.get(missing[0], 'not supported')})")
        for node in list(supported):  # a linear reads its dequantized weight inside the delegate or not at all
            w = node.args[1] if node.target is torch.ops.aten.linear.default else None
            if isinstance(w, torch.fx.Node) and w.op == "call_function" and w not in supported:
                supported.discard(node)
                reasons[node] = f"its weight {w.name} is computed outside the delegate ({reasons.get(w, 'not delegated')})"
        for node in ep.graph.nodes:  # tuple items of supported nodes; size arithmetic the partition reads
            if node.op != "call_function":
                continue
            if node.target is operator.getitem and node.args[0] in supported:
                supported.add(node)
            elif (node.target is _SYM_SIZE or node.target in SYM_OPS) and any(
                    u in supported or u.target in SYM_OPS for u in node.users):
                supported.add(node)
        # a group of only tuple items and size arithmetic computes nothing on the device
        groups = [nodes for nodes in propose_partitions(ep, supported) if any(n.target in BY_TARGET for n in nodes)]
        result, self._report = tag_partitions(ep, groups, self.delegation_spec, backend_id=BACKEND_ID,
                                              tag_prefix="vulkan", reasons=reasons, logger=logger)
        return result

    def report(self) -> Optional[PartitionReport]:
        """Delegated op counts and every rejected node with its reason, for the last :meth:`partition`."""
        return self._report

    @staticmethod
    def _one_float_type(supported: set, reasons: dict) -> None:
        """A partition computes in one float type: keep the graph's most common one."""
        computing = [n for n in supported if not BY_TARGET[n.target].quantization]
        kinds = collections.Counter(outs[0].dtype for n in computing if (outs := tensor_outputs(n)))
        if len(kinds) < 2:
            return
        keep = kinds.most_common(1)[0][0]
        for n in computing:
            outs = tensor_outputs(n)
            if outs and outs[0].dtype != keep:
                supported.discard(n)
                reasons[n] = f"computes in {outs[0].dtype} in a {keep} graph; a Vulkan partition has one float type"
