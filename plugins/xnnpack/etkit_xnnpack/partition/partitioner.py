"""``XnnpackPartitioner``: tags the nodes of an Edge program that XNNPACK can run.

Follows ExecuTorch's XNNPACK partitioner (seed pages "XNNPACK Backend", "Partitioner API"): one
config per op family decides per node; supported nodes are grouped into cycle-free partitions by
torch's ``CapabilityBasedPartitioner``; every partition gets its own tag
(``node.meta["delegation_tag"]``) and the constants only it uses are tagged with it (a constant
that several partitions use is first duplicated, one copy per partition, because XNNPACK needs
static weights). Every node left out is reported with the reason (``report()``).
"""
from __future__ import annotations

import operator
from typing import Callable, Iterable, Optional, Sequence

import torch
from torch.export import ExportedProgram
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from etkit.backend import (DELEGATION_TAG, CompileSpec, DelegationSpec, Partitioner, PartitionReport, PartitionResult,
                           Rejection)
from etkit.backend.utils import is_delegate_call, node_target_name, tag_constant_data, tag_partitions

from ..preprocess import BACKEND_ID
from ..operators.dynamic_shapes import is_size_node
from .config_base import ConfigPrecisionType, XnnpackOpConfig, is_constant, reset_constants, tensor_vals
from .configs import ALL_CONFIGS

#: Compile spec key read by the C++ delegate (runtime/src/xnnpack_backend.cpp).
FP16_INFERENCE = "fp16_inference"

#: Reason given for a node whose op no config handles.
NOT_IN_ANY_CONFIG = "op not in any config"


class _Supported(OperatorSupportBase):
    def __init__(self, nodes: set) -> None:
        super().__init__()
        self.nodes = nodes

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node in self.nodes


def duplicate_shared_constants(ep: ExportedProgram) -> None:
    """Give every partition its own copy of a constant that several partitions (or a partition and
    undelegated nodes) use, so that each delegate gets its weights as constants (XNNPACK needs static
    weights) instead of as run-time inputs. Copies are lifted tensor constants named
    ``<placeholder>_<tag>``; the original stays with undelegated users (or the first partition)."""
    from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

    from etkit.backend.utils import get_constant, is_constant as is_constant_placeholder

    graph = ep.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for node in placeholders:
        if not is_constant_placeholder(ep, node):
            continue
        groups: dict = {}
        for user in node.users:
            groups.setdefault(user.meta.get(DELEGATION_TAG), []).append(user)
        if len(groups) <= 1:
            continue
        keep = None if None in groups else next(iter(groups))
        value = get_constant(ep, node)
        for tag, users in groups.items():
            if tag == keep:
                continue
            last_placeholder = [n for n in graph.nodes if n.op == "placeholder"][-1]
            first_user_input = next((n for n in graph.nodes if n.op == "placeholder"
                                     and not is_constant_placeholder(ep, n)), None)
            with graph.inserting_before(first_user_input) if first_user_input is not None \
                    else graph.inserting_after(last_placeholder):
                copy = graph.placeholder(f"{node.name}_{tag}")
            copy.meta = dict(node.meta)
            target = f"_xnnpack_{tag}_{node.name}"
            ep.constants[target] = value
            index = [n for n in graph.nodes if n.op == "placeholder"].index(copy)
            ep.graph_signature.input_specs.insert(
                index, InputSpec(kind=InputKind.CONSTANT_TENSOR, arg=TensorArgument(name=copy.name), target=target))
            for user in users:
                user.replace_input_with(node, copy)
    graph.lint()


class XnnpackPartitioner(Partitioner):
    """Partition an Edge program for ``XnnpackBackend``.

    Args:
        configs: config classes (or instances) to use; default :data:`configs.ALL_CONFIGS`.
        config_precisions: a :class:`ConfigPrecisionType` or list of them; keep only configs that
            support one of them (default: all). FP32 and STATIC_QUANT are implemented.
        per_op_mode: one partition per supported op (debugging aid, as in ExecuTorch).
        verbose: print the report after each :meth:`partition`.
        fp16_inference: ask XNNPACK to run the float32 partitions in float16 (weights and
            activations; ``XNN_FLAG_FORCE_FP16_INFERENCE``) where it can for the CPU and graph, else
            in fp32; inputs, outputs and the ``.pte`` stay fp32. Stored as the compile spec
            ``fp16_inference`` = ``b"\x01"``, which ExecuTorch's runtime ignores.
    """

    def __init__(self, configs: Optional[Iterable] = None,
                 config_precisions: Optional[ConfigPrecisionType | Sequence[ConfigPrecisionType]] = None,
                 per_op_mode: bool = False, verbose: bool = False, fp16_inference: bool = False) -> None:
        specs = [CompileSpec(FP16_INFERENCE, b"\x01")] if fp16_inference else []
        super().__init__(DelegationSpec(BACKEND_ID, specs))
        instances = [c() if isinstance(c, type) else c for c in (configs if configs is not None else ALL_CONFIGS)]
        if config_precisions is not None:
            wanted = {config_precisions} if isinstance(config_precisions, ConfigPrecisionType) else set(config_precisions)
            instances = [c for c in instances if wanted & set(c.precisions)]
        self.configs: list[XnnpackOpConfig] = instances
        self._by_target: dict = {}
        for cfg in instances:
            for t in cfg.targets:
                self._by_target.setdefault(t, cfg)
        self.per_op_mode = per_op_mode
        self.verbose = verbose
        self._report: Optional[PartitionReport] = None
        #: node name -> why a composite op was not kept whole (it is decomposed, so the node is gone
        #: by partition time; the report still names it).
        self._refused_whole: dict[str, Rejection] = {}

    # ---- decisions ----------------------------------------------------------------------------

    def check_node(self, node: torch.fx.Node, ep: ExportedProgram) -> Optional[Rejection]:
        """``None`` if ``node`` can be delegated, else the rejection with its reason."""
        cfg = self._by_target.get(node.target)
        if cfg is None:
            return Rejection(node.name, node_target_name(node), NOT_IN_ANY_CONFIG)
        return cfg.check(node, ep)

    def _supported_nodes(self, ep: ExportedProgram) -> tuple[set, list]:
        reset_constants(ep)
        supported, rejected = set(), []
        const_derived = []
        for node in ep.graph.nodes:
            if node.op != "call_function" or is_delegate_call(node):
                continue
            if is_size_node(node):
                continue  # sizes stay with the program; a delegate reads them from its input tensors
            if is_constant(node, ep):
                # Folded by preprocess whatever its op (a permute or dequantize of a weight), so no
                # config is needed; decided below: only worth delegating next to its users.
                const_derived.append(node)
                continue
            rejection = self.check_node(node, ep)
            if rejection is not None:
                rejected.append(rejection)
            else:
                supported.add(node)
        # Fold-at-compile-time nodes (e.g. permute_copy(weight)) go with their users; walk users first
        # so chains of them follow.
        for node in reversed(const_derived):
            if node.users and all(u in supported for u in node.users):
                supported.add(node)
        # getitem of an unsupported producer cannot go alone.
        for node in list(supported):
            if node.target is operator.getitem and node.args[0] not in supported:
                supported.discard(node)
                rejected.append(Rejection(node.name, "getitem", f"its producer {node.args[0].name} is not delegated"))
        return supported, rejected

    # ---- Partitioner API ----------------------------------------------------------------------

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        """Tag delegable nodes; returns the tags, each mapped to ``DelegationSpec("XnnpackBackend")``."""
        ep = exported_program
        supported, rejected = self._supported_nodes(ep)
        while True:
            groups = self._groups(ep, supported)
            # Reshapes with several dynamic dims are written (or not) depending on their neighbours in
            # the partition; drop the ones that cannot be and partition again.
            refused = self._unwritable_reshapes(ep, groups)
            if not refused:
                break
            for node, reason in refused.items():
                supported.discard(node)
                rejected.append(Rejection(node.name, node_target_name(node), reason))
        # A partition of only compile-time constants would compute nothing at run time: skip it.
        groups = [g for g in groups if not all(is_constant(n, ep) for n in g)]
        order = self._order(ep)
        groups.sort(key=lambda g: min(order[n] for n in g))
        in_partition = {n for g in groups for n in g}
        for n in supported - in_partition:
            rejected.append(Rejection(n.name, node_target_name(n), "supported, but only compile-time constant "
                                      "work was around it; left to constant folding / the portable kernels"))
        name_to_node = {n.name: n for n in ep.graph.nodes}
        whole = []  # ops refused whole whose decomposition then ran: first in the report
        for name, r in self._refused_whole.items():
            if name not in name_to_node:
                whole.insert(0, Rejection(r.node_name, r.target, f"{r.reason}; decomposed into Core ATen ops "
                                          f"instead (see the nodes below)"))
        self._refused_whole = {}
        result, self._report = tag_partitions(ep, groups, self.delegation_spec, backend_id=BACKEND_ID,
                                              tag_prefix="xnnpack", rejected=whole + rejected,
                                              take_constant_data=False)
        duplicate_shared_constants(ep)  # after tagging: a constant read inside and outside gets two copies
        tag_constant_data(ep)
        if self.verbose:
            print(self._report.format())
        return result

    def _groups(self, ep: ExportedProgram, supported: set) -> list[list]:
        if self.per_op_mode:
            return self._per_op_groups(ep, supported)
        proposer = CapabilityBasedPartitioner(ep.graph_module, _Supported(supported),
                                              allows_single_node_partition=True)
        return [list(p.nodes) for p in proposer.propose_partitions()]

    @staticmethod
    def _unwritable_reshapes(ep: ExportedProgram, groups: list[list]) -> dict:
        """``{reshape node: reason}`` for the reshapes with several dynamic dims that XNNPACK cannot write
        within their partition (see :func:`operators.dynamic_shapes.plan_reshapes`)."""
        from ..operators.dynamic_shapes import RESHAPE_OPS, dynamic_dims, plan_reshapes, sym_shape

        def operand_rank(arg):
            if isinstance(arg, (int, float)) and not isinstance(arg, bool):
                return 1
            vals = tensor_vals(arg) if isinstance(arg, torch.fx.Node) else []
            return vals[0].dim() if vals and is_constant(arg, ep) else None

        refused: dict = {}
        order = {n: i for i, n in enumerate(ep.graph.nodes)}
        for group in groups:
            if not any(n.target in RESHAPE_OPS and tensor_vals(n) and len(dynamic_dims(sym_shape(n))) > 1
                       for n in group):
                continue
            members = set(group)
            nodes = sorted(group, key=order.__getitem__)
            _, errors = plan_reshapes(nodes, members.__contains__, operand_rank)
            refused.update(errors)
        return refused

    def _per_op_groups(self, ep: ExportedProgram, supported: set) -> list[list]:
        """One group per op, keeping helpers with the op they serve: getitem with its producer,
        compile-time constant nodes (folded weights) with their first user."""
        owner: dict[torch.fx.Node, torch.fx.Node] = {}
        for node in reversed(list(ep.graph.nodes)):
            if node not in supported:
                continue
            if is_constant(node, ep):
                user = next(iter(node.users))
                owner[node] = owner.get(user, user)
            elif node.target is operator.getitem:
                owner[node] = node.args[0]
            else:
                owner[node] = node
        groups: dict[torch.fx.Node, list] = {}
        for node in ep.graph.nodes:
            if node in owner:
                groups.setdefault(owner[node], []).append(node)
        return list(groups.values())

    @staticmethod
    def _order(ep: ExportedProgram) -> dict:
        return {n: i for i, n in enumerate(ep.graph.nodes)}

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Optional[Callable[[torch.fx.Node], bool]]]:
        """Composite ops kept whole when XNNPACK can run them (``aten.linear``, ``aten.hardswish``)."""
        ops = [op for cfg in self.configs for op in cfg.keep_undecomposed]

        reset_constants(ep)

        def delegable(node: torch.fx.Node) -> bool:
            if is_constant(node, ep):
                # A dequantized weight: folded at compile time by the delegate that reads it.
                return bool(node.users) and all(is_constant(u, ep) or self.check_node(u, ep) is None
                                                for u in node.users)
            rejection = self.check_node(node, ep)
            if rejection is not None:
                self._refused_whole[node.name] = rejection
            return rejection is None

        return ops, delegable

    def report(self) -> Optional[PartitionReport]:
        """Delegated op counts and every rejected node with its reason, for the last :meth:`partition`."""
        return self._report
