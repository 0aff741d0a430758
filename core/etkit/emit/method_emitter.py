"""Emit one method: values, memory plan, instructions (``ExecutionPlan`` of schema/program.fbs).

Conventions follow ExecuTorch's emitter, so ExecuTorch's runtime reads the result:
- every tensor is one ``EValue``; constants point into the constant segment (``data_buffer_idx`` > 0)
  or, when ``ExecutorchBackendConfig.external_constants`` tags them, into a ``.ptd`` data file
  (``extra_tensor_info``: location EXTERNAL, looked up by fully qualified name); everything else is
  memory-planned (``allocation_info``) in buffer 1;
- a ``KernelCall`` passes every argument of the op's out-variant schema in order (its out tensors
  included), then its return: the out tensor again, or a ``TensorList`` of the out tensors;
- ``IntList`` items are indices of ``Int`` values (boxed, as the format requires);
- a ``DelegateCall`` passes the delegate's inputs, then its outputs.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind
from torch.utils import _pytree as pytree

from etkit import fb
from etkit.fb.AllocationDetails import AllocationDetailsT
from etkit.fb.BackendDelegate import BackendDelegateT
from etkit.fb.BackendDelegateDataReference import BackendDelegateDataReferenceT
from etkit.fb.Bool import BoolT
from etkit.fb.BoolList import BoolListT
from etkit.fb.Chain import ChainT
from etkit.fb.CompileSpec import CompileSpecT
from etkit.fb.ContainerMetadata import ContainerMetadataT
from etkit.fb.DelegateCall import DelegateCallT
from etkit.fb.Double import DoubleT
from etkit.fb.DoubleList import DoubleListT
from etkit.fb.EValue import EValueT
from etkit.fb.ExecutionPlan import ExecutionPlanT
from etkit.fb.ExtraTensorInfo import ExtraTensorInfoT
from etkit.fb.InstructionArguments import InstructionArguments
from etkit.fb.Instruction import InstructionT
from etkit.fb.Int import IntT
from etkit.fb.IntList import IntListT
from etkit.fb.KernelCall import KernelCallT
from etkit.fb.KernelTypes import KernelTypes
from etkit.fb.Null import NullT
from etkit.fb.Operator import OperatorT
from etkit.fb.OptionalTensorList import OptionalTensorListT
from etkit.fb.String import StringT
from etkit.fb.Tensor import TensorT
from etkit.fb.TensorDataLocation import TensorDataLocation
from etkit.fb.TensorList import TensorListT

from ..backend.delegate import executorch_call_delegate
from ..dialects.edge import SYM_OPS, SYM_SIZE_OPS
from ..graph.constants import get_constant
from ..graph.signature import CONSTANT_KINDS
from ..passes.inplace_updates import inplace_update_call, is_inplace_update
from ..passes.memory_planning import MemoryPlanningPass, TensorAllocation, TensorSpec
from ..passes.out_variants import bind_arguments, kernel_name, out_variant
from .dtypes import LAYOUT, MEMORY_FORMAT, dim_order, scalar_type, tensor_bytes
from .external_data import ExternalData



class EmitError(RuntimeError):
    """A graph cannot be written as a program; the message names the node."""


@dataclass
class ProgramData:
    """Data shared by all methods of one program, filled while emitting them."""

    constant_data: list = field(default_factory=lambda: [b""])
    delegate_data: list = field(default_factory=list)
    #: initial values of mutable buffers (planned tensors with a data_buffer_idx); entry 0 is reserved
    mutable_data: list = field(default_factory=lambda: [b""])
    named_data: dict = field(default_factory=dict)
    #: the ``.ptd`` files' contents (constants and named data tagged for a data file)
    external: ExternalData = field(default_factory=ExternalData)
    _constant_ids: dict = field(default_factory=dict)

    def add_constant(self, tensor: torch.Tensor) -> int:
        """Index of ``tensor``'s bytes (contiguous) in the constant segment; equal bytes are stored once."""
        raw = tensor_bytes(tensor)
        if raw not in self._constant_ids:
            self.constant_data.append(raw)
            self._constant_ids[raw] = len(self.constant_data) - 1
        return self._constant_ids[raw]

    def add_mutable(self, tensor: torch.Tensor) -> int:
        """Index of ``tensor``'s bytes in the mutable data segment (each mutable buffer gets its own), or 0
        (no stored initial state) when every byte is zero: the runtime zeroes planned memory before a method
        first runs, its own and a caller's (``MemoryManager``), so a KV cache of ``max_context_len`` rows costs
        the ``.pte`` nothing. (ExecuTorch's emitter stores no initial state for any mutated buffer unless
        ``meta["et_init_buffer"]`` is set, so its runtime runs such programs too.)"""
        raw = tensor_bytes(tensor)
        if raw.count(0) == len(raw):
            return 0
        self.mutable_data.append(raw)
        return len(self.mutable_data) - 1

    def add_named_data(self, entries: dict, owner: str) -> None:
        tag = self.external.named_data_tag
        for key, data in entries.items():
            data = bytes(data)
            if tag is not None:
                self.external.add_named_data(tag, key, data, owner)
                continue
            if key in self.named_data and self.named_data[key] != data:
                raise EmitError(f"{owner}: named data key {key!r} already holds different bytes")
            self.named_data[key] = data


def upper_bound(node: torch.fx.Node, size) -> int:
    """``size`` itself, or a symbolic size's upper bound (``torch.export.Dim(max=...)``).

    Raises:
        EmitError: the size has no finite upper bound, so no memory can be planned for it.
    """
    if isinstance(size, int):
        return size
    bound = size.node.shape_env.bound_sympy(size.node.expr).upper
    try:
        value = int(bound)
    except (TypeError, AttributeError, OverflowError):  # sympy's oo / torch's int_oo
        value = None
    if value is None or value >= 2 ** 62:
        raise EmitError(f"node {node.name}: size {size} has no upper bound, so its memory cannot be planned; "
                        f"export with torch.export.Dim(..., max=N)")
    return value


def _attach_specs(allocations: list) -> dict:
    """Gives each planned tensor's node ``meta["spec"]`` (a :class:`TensorSpec`, or a tuple of them for a node
    with several outputs, as ExecuTorch's nodes carry) and returns ``{(node, output index): spec}``."""
    by_node: dict = {}
    for alloc, _ in allocations:
        if alloc.node is not None:
            by_node.setdefault(alloc.node, {})[alloc.output_index] = alloc
    specs = {}
    for node, outputs in by_node.items():
        vals = node.meta.get("val")
        count = len(vals) if isinstance(vals, (tuple, list)) else 1
        made = [None] * max(count, max(outputs) + 1)
        for i, alloc in outputs.items():
            val = vals[i] if isinstance(vals, (tuple, list)) else vals
            made[i] = specs[(node, i)] = TensorSpec(getattr(val, "dtype", None), tuple(getattr(val, "shape", ())),
                                                    alloc.nbytes)
        node.meta["spec"] = tuple(made) if isinstance(vals, (tuple, list)) else made[0]
    return specs


def _concrete_sizes(node: torch.fx.Node, t: torch.Tensor) -> list:
    """Sizes written in the program: the upper bound of every symbolic dimension."""
    return [upper_bound(node, s) for s in t.shape]


def _is_dynamic(t: torch.Tensor) -> bool:
    return any(not isinstance(s, int) for s in t.shape)


def _tensor_vals(node: torch.fx.Node) -> list:
    val = node.meta.get("val")
    vals = list(val) if isinstance(val, (tuple, list)) else [val]
    return vals


class MethodEmitter:
    """Builds the ``ExecutionPlanT`` of one method of an Edge program after lowering."""

    def __init__(self, name: str, ep: ExportedProgram, data: ProgramData, planner: MemoryPlanningPass,
                 alignment: int) -> None:
        self.name = name
        self.ep = ep
        self.data = data
        self.planner = planner
        self.alignment = alignment
        self.values: list = []
        self.node_values: dict = {}
        self.operators: list = []
        self._operator_ids: dict = {}
        self.delegates: list = []
        self.instructions: list = []
        self.allocations: list = []  # (TensorAllocation, value index)
        self.plan = None
        #: instruction index -> the Edge debug handle of the node it runs, or the sorted list of a
        #: delegate's partition (ExecuTorch's emitter output ``debug_handle_map``)
        self.debug_handle_map: dict = {}
        #: delegate-call instruction index -> {"name": backend id, "delegate_map": the backend's
        #: PreprocessResult.debug_handle_map or {}} (ExecuTorch's ``delegate_map``)
        self.delegate_map: dict = {}
        #: delegate-call instruction index -> its number of outputs (``instruction_id_to_num_outs_map``)
        self.instruction_num_outs: dict = {}
        self._current_node = None

    # -- values -------------------------------------------------------------------------------------------
    def _add_value(self, kind: int, val) -> int:
        self.values.append(EValueT(valType=kind, val=val))
        return len(self.values) - 1

    def _tensor_value(self, node, t: torch.Tensor, data_buffer_idx: int = 0) -> int:
        # shapeDynamism 1 = DYNAMIC_BOUND: sizes are upper bounds; kernels resize within them
        tensor = TensorT(scalarType=scalar_type(t.dtype), storageOffset=0, sizes=_concrete_sizes(node, t),
                         dimOrder=dim_order(t), requiresGrad=False, dataBufferIdx=data_buffer_idx,
                         allocationInfo=None, layout=0, shapeDynamism=1 if _is_dynamic(t) else 0)
        return self._add_value(KernelTypes.Tensor, tensor)

    def _planned_tensor(self, node, t: torch.Tensor, label: str, lifetime: tuple, data_buffer_idx: int = 0,
                        output_index: int = 0) -> int:
        index = self._tensor_value(node, t, data_buffer_idx=data_buffer_idx)
        numel = 1
        for size in _concrete_sizes(node, t):
            numel *= size
        nbytes = numel * t.element_size()
        self.allocations.append((TensorAllocation(label, nbytes, lifetime, node=node, output_index=output_index),
                                 index))
        return index

    def _scalar(self, value, arg_type=None) -> int:
        if value is None:
            return self._add_value(KernelTypes.Null, NullT())
        if isinstance(value, bool):
            return self._add_value(KernelTypes.Bool, BoolT(boolVal=value))
        if isinstance(value, int):
            if arg_type is not None and str(arg_type).rstrip("?") == "float":
                return self._add_value(KernelTypes.Double, DoubleT(doubleVal=float(value)))
            return self._add_value(KernelTypes.Int, IntT(intVal=value))
        if isinstance(value, float):
            return self._add_value(KernelTypes.Double, DoubleT(doubleVal=value))
        if isinstance(value, str):
            return self._add_value(KernelTypes.String, StringT(stringVal=value))
        if isinstance(value, torch.dtype):
            return self._add_value(KernelTypes.Int, IntT(intVal=scalar_type(value)))
        if isinstance(value, torch.memory_format):
            return self._add_value(KernelTypes.Int, IntT(intVal=MEMORY_FORMAT[value]))
        if isinstance(value, torch.layout):
            return self._add_value(KernelTypes.Int, IntT(intVal=LAYOUT[value]))
        if isinstance(value, torch.device):
            return self._add_value(KernelTypes.Null, NullT())
        raise EmitError(f"cannot emit argument value {value!r} of type {type(value).__name__}")

    def _symbolic_scalar(self, node, val) -> int:
        """An Int/Double/Bool value computed at run time (a size, or arithmetic on sizes); written with its
        example value (0 for a data-dependent one, which has none), which the op overwrites."""
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            val = val.node.hint if val.node.hint is not None else type(val.node.pytype())()
        if isinstance(val, bool):
            return self._add_value(KernelTypes.Bool, BoolT(boolVal=val))
        if isinstance(val, float):
            return self._add_value(KernelTypes.Double, DoubleT(doubleVal=val))
        return self._add_value(KernelTypes.Int, IntT(intVal=int(val)))

    def _argument(self, node, arg, value) -> int:
        type_str = str(arg.type)
        if isinstance(value, torch.fx.Node):
            return self._value_of(node, value)
        if isinstance(value, (list, tuple)):
            if type_str.startswith("Tensor?[]") or type_str.startswith("List[Optional[Tensor]]"):
                items = [-1 if v is None else self._value_of(node, v) for v in value]
                return self._add_value(KernelTypes.OptionalTensorList, OptionalTensorListT(items=items))
            if any(isinstance(v, torch.fx.Node) for v in value) and ("int" in type_str.lower()):
                # SymInt[] with symbolic entries: IntList items are indices of Int values (boxed)
                items = [self._value_of(node, v) if isinstance(v, torch.fx.Node) else self._scalar(int(v))
                         for v in value]
                return self._add_value(KernelTypes.IntList, IntListT(items=items))
            if any(isinstance(v, torch.fx.Node) for v in value):
                return self._add_value(KernelTypes.TensorList,
                                       TensorListT(items=[self._value_of(node, v) for v in value]))
            if "float" in type_str:
                return self._add_value(KernelTypes.DoubleList, DoubleListT(items=[float(v) for v in value]))
            if "bool" in type_str:
                return self._add_value(KernelTypes.BoolList, BoolListT(items=[bool(v) for v in value]))
            return self._add_value(KernelTypes.IntList, IntListT(items=[self._scalar(int(v)) for v in value]))
        return self._scalar(value, arg.type)

    def _value_of(self, user, node) -> int:
        value = self.node_values.get(node)
        if value is None:
            raise EmitError(f"node {user.name}: argument {node.name} has no value (emitted out of order?)")
        if isinstance(value, tuple):
            raise EmitError(f"node {user.name}: argument {node.name} is a tuple; index it with getitem")
        return value

    # -- lifetimes ----------------------------------------------------------------------------------------
    def _last_use(self, node, position: dict, end: int) -> int:
        last = position[node]
        for user in node.users:
            if user.op == "output":
                return end
            if user.op == "call_function" and user.target is operator.getitem:
                last = max(last, self._last_use(user, position, end))
            else:
                last = max(last, position[user])
        return last

    # -- emission -----------------------------------------------------------------------------------------
    def emit(self) -> ExecutionPlanT:
        ep, graph = self.ep, self.ep.graph
        nodes = list(graph.nodes)
        position = {n: i for i, n in enumerate(nodes)}
        end = len(nodes)
        specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
        # Mutable buffers (a KV cache, batch-norm statistics in training mode): the buffer is a planned
        # tensor alive for the whole method, never shared, so its value survives between executions;
        # its initial value is in the mutable data segment unless it is all zeros (see add_mutable); after
        # the last instruction `aten::copy_`
        # writes the new value into it (ExecuTorch's scheme).
        # An input the program mutates in place gets the same copy_ into the input's tensor (in the
        # method's memory: the caller's tensor is copied in by set_input, so it does not change).
        mutated = {}  # buffer FQN -> name of the node holding its new value
        mutated_inputs = {}  # input placeholder name -> name of the node holding its new value
        for spec in ep.graph_signature.output_specs:
            if spec.kind == OutputKind.BUFFER_MUTATION:
                mutated[spec.target] = spec.arg.name
            elif spec.kind == OutputKind.USER_INPUT_MUTATION:
                mutated_inputs[spec.target] = spec.arg.name
            elif spec.kind != OutputKind.USER_OUTPUT:
                raise EmitError(f"method {self.name}: output {spec.arg.name} is a {spec.kind.name} (gradients); "
                                f"etkit supports user outputs and mutated buffers and inputs")
        mutable_values = {}  # buffer FQN -> value index

        inputs = []
        for node in nodes:
            if node.op == "placeholder":
                spec = specs[node.name]
                val = node.meta.get("val")
                if spec.kind == InputKind.BUFFER and spec.target in mutated:
                    tensor = get_constant(ep, node)
                    index = self._planned_tensor(node, tensor.contiguous(), node.name, (0, end + 1),
                                                 data_buffer_idx=self.data.add_mutable(tensor))
                    self.node_values[node] = mutable_values[spec.target] = index
                elif spec.kind in CONSTANT_KINDS and (tag := self.data.external.tag_of(node)) is not None:
                    tensor = get_constant(ep, node).contiguous()
                    fqn = self.data.external.add_constant(tag, spec.target or node.name, tensor, self.name)
                    index = self._tensor_value(node, tensor)
                    self.values[index].val.extraTensorInfo = ExtraTensorInfoT()
                    self.values[index].val.extraTensorInfo.fullyQualifiedName = fqn
                    self.values[index].val.extraTensorInfo.location = TensorDataLocation.EXTERNAL
                    self.node_values[node] = index
                elif spec.kind in CONSTANT_KINDS:
                    tensor = get_constant(ep, node)
                    idx = self.data.add_constant(tensor)
                    # stored contiguous (see add_constant), so the value says so whatever the source strides
                    self.node_values[node] = self._tensor_value(node, tensor.contiguous(), data_buffer_idx=idx)
                elif spec.kind == InputKind.USER_INPUT:
                    if isinstance(val, torch.Tensor):
                        if self.planner.alloc_graph_input:
                            last = end if node.name in mutated_inputs else self._last_use(node, position, end)
                            index = self._planned_tensor(node, val, node.name, (0, last))
                        else:
                            index = self._tensor_value(node, val)
                    else:
                        index = self._scalar(val)
                    self.node_values[node] = index
                    inputs.append(index)
                else:
                    raise EmitError(f"method {self.name}: input {node.name} of kind {spec.kind.name} is not supported")
            elif node.op == "call_function":
                self._allocate_outputs(node, position, end)
        self._plan_memory()
        for node in nodes:
            if node.op == "call_function":
                self._emit_call(node)
            elif node.op == "output":
                self._current_node = None
                leaves = pytree.tree_leaves(node.args[0])
                kinds = [spec.kind for spec in ep.graph_signature.output_specs]
                by_name = {a.name: a for a in leaves if isinstance(a, torch.fx.Node)}
                for fqn, index in mutable_values.items():
                    self._emit_copy_into(index, self._value_of(node, by_name[mutated[fqn]]))
                for placeholder in nodes:
                    if placeholder.op == "placeholder" and placeholder.name in mutated_inputs:
                        self._emit_copy_into(self.node_values[placeholder],
                                             self._value_of(node, by_name[mutated_inputs[placeholder.name]]))
                # an output export folded to a constant (an int, a bool) is a constant value of the plan
                outputs = [self._value_of(node, a) if isinstance(a, torch.fx.Node) else self._scalar(a)
                           for a, kind in zip(leaves, kinds) if kind == OutputKind.USER_OUTPUT]
        return ExecutionPlanT(
            name=self.name,
            containerMetaType=ContainerMetadataT(
                encodedInpStr=pytree.treespec_dumps(ep.call_spec.in_spec) if ep.call_spec.in_spec else "",
                encodedOutStr=pytree.treespec_dumps(ep.call_spec.out_spec) if ep.call_spec.out_spec else ""),
            values=self.values, inputs=inputs, outputs=outputs,
            chains=[ChainT(inputs=inputs, outputs=outputs, instructions=self.instructions, stacktrace=None)],
            operators=self.operators, delegates=self.delegates,
            nonConstBufferSizes=list(self.plan.buffer_sizes), nonConstBufferDevice=None)

    def _allocate_outputs(self, node, position, end) -> None:
        if is_inplace_update(node):
            self._allocate_inplace_update(node, position, end)
            return
        if node.target is operator.getitem:
            source = self.node_values.get(node.args[0])
            if not isinstance(source, tuple):
                raise EmitError(f"node {node.name}: getitem of {node.args[0].name}, which is not a tuple")
            self.node_values[node] = source[node.args[1]]
            return
        vals = node.meta.get("val")
        if isinstance(vals, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
            self.node_values[node] = self._symbolic_scalar(node, vals)
            return
        is_tuple = isinstance(vals, (tuple, list))
        outs = []
        for i, t in enumerate(vals if is_tuple else [vals]):
            if not isinstance(t, torch.Tensor):
                raise EmitError(f"node {node.name} ({node.target}) produces {type(t).__name__}, not a tensor; "
                                f"only tensor-valued ops can be emitted")
            if is_tuple:
                users = [u for u in node.users if u.target is operator.getitem and u.args[1] == i]
                last = max([self._last_use(u, position, end) for u in users], default=position[node])
            else:
                last = self._last_use(node, position, end)
            label = f"{node.name}[{i}]" if is_tuple else node.name
            readers = [u for u in node.users if u.target is operator.getitem and u.args[1] == i] if is_tuple \
                else [node]
            is_method_output = any(u.op == "output" for r in readers for u in r.users)
            if is_method_output and not self.planner.alloc_graph_output:
                outs.append(self._tensor_value(node, t))  # the caller provides this output's memory
            else:
                outs.append(self._planned_tensor(node, t, label, (position[node], last), output_index=i))
        self.node_values[node] = tuple(outs) if is_tuple else outs[0]

    def _plan_memory(self) -> None:
        specs = _attach_specs(self.allocations)
        self.planner.run(self.ep.graph_module, self.ep.graph_signature)  # ExecuTorch's hook: may set mem_id
        for alloc, _ in self.allocations:
            spec = specs.get((alloc.node, alloc.output_index))
            if spec is not None and spec.mem_id is not None:
                alloc.mem_id = spec.mem_id
        self.plan = self.planner.plan([a for a, _ in self.allocations], self.alignment)
        for alloc, _ in self.allocations:
            spec = specs.get((alloc.node, alloc.output_index))
            if spec is not None:
                spec.mem_id, spec.mem_offset = alloc.mem_id, alloc.mem_offset
        for alloc, index in self.allocations:
            tensor = self.values[index].val
            tensor.allocationInfo = AllocationDetailsT(memoryId=alloc.mem_id,
                                                       memoryOffsetLow=alloc.mem_offset & 0xFFFFFFFF,
                                                       memoryOffsetHigh=alloc.mem_offset >> 32)

    def _operator_index(self, op) -> int:
        key = kernel_name(op)
        if key not in self._operator_ids:
            self.operators.append(OperatorT(name=key[0], overload=key[1]))
            self._operator_ids[key] = len(self.operators) - 1
        return self._operator_ids[key]

    def _out_indices(self, node) -> list:
        value = self.node_values[node]
        return list(value) if isinstance(value, tuple) else [value]

    def _emit_call(self, node) -> None:
        if node.target is operator.getitem:
            return
        if is_inplace_update(node):
            self._emit_inplace_update(node)
            return
        self._current_node = node
        if node.target is executorch_call_delegate:
            lowered = getattr(self.ep.graph_module, node.args[0].target)
            index = len(self.instructions)
            if lowered.debug_handles:
                self.debug_handle_map[index] = list(lowered.debug_handles)
            self.delegate_map[index] = {"name": lowered.backend_id, "delegate_map": {
                str(k): (list(v) if isinstance(v, (list, tuple, set)) else v)
                for k, v in (lowered.debug_handle_map or {}).items()}}
            self.instruction_num_outs[index] = lowered.num_outputs
            self.data.delegate_data.append(lowered.processed_bytes)
            self.data.add_named_data(lowered.named_data, f"delegate {lowered.backend_id}")
            self.delegates.append(BackendDelegateT(
                id=lowered.backend_id,
                processed=BackendDelegateDataReferenceT(location=0, index=len(self.data.delegate_data) - 1),
                compileSpecs=[CompileSpecT(key=s.key, value=list(s.value)) for s in lowered.compile_specs]))
            args = [self._value_of(node, a) for a in node.args[1:]] + self._out_indices(node)
            self._instruction(InstructionArguments.DelegateCall,
                              DelegateCallT(delegateIndex=len(self.delegates) - 1, args=args))
            return
        if node.target in SYM_OPS or node.target in SYM_SIZE_OPS:
            self._emit_sym_op(node)
            return
        if not isinstance(node.target, torch._ops.OpOverload):
            raise EmitError(f"node {node.name} calls {node.target!r}, which is not an operator")
        try:
            out_op = out_variant(node.target)
        except LookupError as exc:
            raise EmitError(f"node {node.name}: {exc}") from None
        args = [self._argument(node, arg, value) for arg, value in bind_arguments(node.target, out_op, node)]
        out_args = [a for a in out_op._schema.arguments if a.is_out]
        outs = self._out_indices(node)
        if len(out_args) == 1 and isinstance(out_args[0].type, torch.ListType):
            # one `Tensor(a!)[] out` (split_with_sizes_copy, unbind_copy, ...): a TensorList of the outputs;
            # such ops return () so nothing follows it
            listed = self._add_value(KernelTypes.TensorList, TensorListT(items=list(outs)))
            returns = [listed] if out_op._schema.returns else []
            self._instruction(InstructionArguments.KernelCall,
                              KernelCallT(opIndex=self._operator_index(out_op), args=args + [listed] + returns))
            return
        if len(out_args) != len(outs):
            raise EmitError(f"node {node.name}: {out_op} has {len(out_args)} out arguments but the node "
                            f"produces {len(outs)} tensors")
        # The boxed calling convention passes the return after the arguments. An out variant returns its
        # out tensor (one more reference to it), or a tuple of them, written as one TensorList value
        # (as ExecuTorch's emitter writes it).
        if len(outs) == 1:
            returned = outs[0]
        else:
            returned = self._add_value(KernelTypes.TensorList, TensorListT(items=list(outs)))
        self._instruction(InstructionArguments.KernelCall,
                          KernelCallT(opIndex=self._operator_index(out_op), args=args + outs + [returned]))

    def _emit_copy_into(self, dst: int, src: int) -> None:
        """``aten::copy_(dst, src, non_blocking=False)``, its return (dst) last, as a KernelCall; nothing when
        ``dst`` already holds the value (a buffer an op updated in place)."""
        if dst == src:
            return
        op = torch.ops.aten.copy_.default
        self._instruction(InstructionArguments.KernelCall,
                          KernelCallT(opIndex=self._operator_index(op), args=[dst, src, self._scalar(False), dst]))

    # -- ops that update a mutable buffer in place (llama::update_cache) ------------------------------------
    def _allocate_inplace_update(self, node, position, end) -> None:
        """An ``auto_functionalized_v2`` call of a mutating op whose mutated arguments are mutable buffers:
        the op writes into the buffers' own memory, so its "new value" outputs are the buffers' values, and
        only its return is planned."""
        call = inplace_update_call(self.ep, node, position)
        if isinstance(call, str):
            raise EmitError(call)
        ret = node.meta["val"][0] if isinstance(node.meta.get("val"), (tuple, list)) else None
        outs = []
        if isinstance(ret, torch.Tensor):
            users = [u for u in node.users if u.target is operator.getitem and u.args[1] == 0]
            last = max([self._last_use(u, position, end) for u in users], default=position[node])
            outs.append(self._planned_tensor(node, ret, f"{node.name}[0]", (position[node], last)))
        else:
            raise EmitError(f"node {node.name}: {call.op} returns {type(ret).__name__}; etkit emits in-place "
                            f"updates of ops that return one tensor (as llama::update_cache does)")
        outs += [self._value_of(node, base) for base in call.bases]
        self.node_values[node] = tuple(outs)

    def _emit_inplace_update(self, node) -> None:
        call = inplace_update_call(self.ep, node)
        try:
            out_op = out_variant(call.op)
        except LookupError as exc:
            raise EmitError(f"node {node.name}: {exc}") from None
        args = [self._argument(node, arg, call.arguments[arg.name] if arg.name in call.arguments
                               else (arg.default_value if arg.has_default_value() else None))
                for arg in out_op._schema.arguments if not arg.is_out]
        ret = self.node_values[node][0]
        self._instruction(InstructionArguments.KernelCall,
                          KernelCallT(opIndex=self._operator_index(out_op), args=args + [ret, ret]))

    def _emit_sym_op(self, node) -> None:
        """Size arithmetic: ``executorch_prim::<op>.Scalar(a, b, out)`` / ``aten::sym_size.int(self, dim, out)``,
        the boxed calls ExecuTorch's prim ops take (the result EValue is the last argument)."""
        if node.target in SYM_SIZE_OPS:
            name, overload = SYM_SIZE_OPS[node.target]
        else:
            name, overload = f"executorch_prim::{SYM_OPS[node.target]}", "Scalar"
        args = [self._value_of(node, a) if isinstance(a, torch.fx.Node) else self._scalar(a) for a in node.args]
        key = (name, overload)
        if key not in self._operator_ids:
            self.operators.append(OperatorT(name=name, overload=overload))
            self._operator_ids[key] = len(self.operators) - 1
        self._instruction(InstructionArguments.KernelCall,
                          KernelCallT(opIndex=self._operator_ids[key], args=args + [self.node_values[node]]))

    def _instruction(self, kind: int, args) -> None:
        node = self._current_node
        index = len(self.instructions)
        if (node is not None and index not in self.debug_handle_map
                and isinstance(node.meta.get("debug_handle"), int)):
            self.debug_handle_map[index] = node.meta["debug_handle"]
        self.instructions.append(InstructionT(instrArgsType=kind, instrArgs=args))
