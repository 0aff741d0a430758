"""Builds the VkGraph flatbuffer (``schema/vulkan_graph.fbs``) of one partition.

Values are numbered in the order they are created. Every fx node that produces a tensor gets a
``VkTensor`` value (a node producing several tensors gets a ``ValueList`` of them, and ``getitem``
reads its items); SymInt nodes get ``SymInt`` values the runtime recomputes when shapes change.
An operator call's ``args`` are one value per argument of its schema (defaults filled in), then the
output value, as ExecuTorch's Vulkan graph builder writes them.

Tensor dims are the upper bounds of dynamic dimensions. Intermediate tensors share memory objects
(``mem_obj_id``) when their lifetimes in the chain do not overlap (greedy, largest first within the
free objects); inputs, outputs and constants own their memory. Constants go to the program's named
data, keyed by the sha256 of their bytes.
"""
from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass, field
from typing import Any, Optional

import flatbuffers
import torch

from ..fb import GraphTypes as _GT
from ..fb.Bool import BoolT
from ..fb.BoolList import BoolListT
from ..fb.Double import DoubleT
from ..fb.DoubleList import DoubleListT
from ..fb.Int import IntT
from ..fb.IntList import IntListT
from ..fb.Null import NullT
from ..fb.OperatorCall import OperatorCallT
from ..fb.String import StringT
from ..fb.SymInt import SymIntT
from ..fb.ValueList import ValueListT
from ..fb.VkBytes import VkBytesT
from ..fb.VkDataType import VkDataType
from ..fb.VkGraph import VkGraphT
from ..fb.VkStorageType import VkStorageType
from ..fb.VkTensor import VkTensorT
from ..fb.VkValue import VkValueT
from .payload import NAMED_DATA_OFFSET

GT = _GT.GraphTypes
SCHEMA_VERSION = "0"

_DTYPES = {
    torch.bool: VkDataType.BOOL, torch.uint8: VkDataType.UINT8, torch.int8: VkDataType.INT8,
    torch.int32: VkDataType.INT32, torch.float16: VkDataType.FLOAT16, torch.float32: VkDataType.FLOAT32,
    torch.float64: VkDataType.FLOAT64, torch.int64: VkDataType.INT64,
}
_NULL_TYPES = (type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


class GraphBuildError(ValueError):
    """The partition holds something the Vulkan graph cannot express (names the node and why)."""


def upper_bound(size) -> int:
    """An int size, or a SymInt's upper bound from the export's range constraints."""
    if isinstance(size, int):
        return size
    bound = size.node.shape_env.bound_sympy(size.node.expr).upper
    try:
        value = int(bound)
    except (TypeError, OverflowError):
        value = None
    if value is None or value >= 2 ** 31:
        raise GraphBuildError(f"size {size} has no finite upper bound below 2**31; export with "
                              f"torch.export.Dim(..., max=N)")
    return value


@dataclass
class _Interval:
    value: int
    nbytes: int
    first: int
    last: int


@dataclass
class VkGraphBuilder:
    """Accumulates values, operator calls and constants; :meth:`finish` packs the flatbuffer.

    Args:
        force_fp16: float32 tensors are computed as float16; graph inputs and outputs keep float32 on the
            host side (``staging_datatype``), constants are stored as float16.
        storage: ``VkStorageType`` written as the graph's ``storage_type_override``.
    """

    force_fp16: bool = False
    storage: int = VkStorageType.DEFAULT_STORAGE
    values: list = field(default_factory=list)
    chain: list = field(default_factory=list)
    constants: list = field(default_factory=list)
    named_data: dict = field(default_factory=dict)
    input_ids: list = field(default_factory=list)
    output_ids: list = field(default_factory=list)
    node_values: dict = field(default_factory=dict)   # fx node -> value id
    _produced: dict = field(default_factory=dict)      # value id -> chain index of its producer
    _used: dict = field(default_factory=dict)          # value id -> last chain index reading it
    _tensor_bytes: dict = field(default_factory=dict)  # value id -> bytes at the upper bounds
    _constant_keys: dict = field(default_factory=dict)
    #: constant placeholders, turned into constant values when an operator first reads them
    pending_constants: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ values
    def _add(self, kind: int, obj) -> int:
        v = VkValueT()
        v.valueType = kind
        v.value = obj
        self.values.append(v)
        return len(self.values) - 1

    def null(self) -> int:
        return self._add(GT.Null, NullT())

    def int_value(self, x: int) -> int:
        o = IntT()
        o.intVal = int(x)
        return self._add(GT.Int, o)

    def double_value(self, x: float) -> int:
        o = DoubleT()
        o.doubleVal = float(x)
        return self._add(GT.Double, o)

    def bool_value(self, x: bool) -> int:
        o = BoolT()
        o.boolVal = bool(x)
        return self._add(GT.Bool, o)

    def string_value(self, s: str) -> int:
        o = StringT()
        o.stringVal = s
        return self._add(GT.String, o)

    def symint_value(self, hint: int) -> int:
        o = SymIntT()
        o.value = int(hint)
        return self._add(GT.SymInt, o)

    def value_list(self, items: list[int]) -> int:
        o = ValueListT()
        o.items = list(items)
        return self._add(GT.ValueList, o)

    def _dtype(self, dtype: torch.dtype, what: str) -> int:
        if dtype not in _DTYPES:
            raise GraphBuildError(f"{what}: dtype {dtype} has no Vulkan graph representation")
        vk = _DTYPES[dtype]
        if self.force_fp16 and vk == VkDataType.FLOAT32:
            return VkDataType.FLOAT16
        return vk

    def tensor_value(self, val: torch.Tensor, what: str, constant_id: int = -1) -> int:
        t = VkTensorT()
        t.datatype = self._dtype(val.dtype, what)
        t.dims = [upper_bound(s) for s in val.shape]
        t.constantId = constant_id
        t.memObjId = -1
        if t.datatype != _DTYPES[val.dtype]:
            t.stagingDatatype = _DTYPES[val.dtype]
        vid = self._add(GT.VkTensor, t)
        numel = 1
        for d in t.dims:
            numel *= d
        self._tensor_bytes[vid] = numel * val.element_size()
        return vid

    def constant(self, tensor: torch.Tensor, what: str, keep_dtype: bool = False) -> int:
        """A constant tensor value whose bytes go to the named data (deduplicated by content). With
        ``force_fp16``, float32 constants are stored as float16 unless ``keep_dtype``."""
        tensor = tensor.detach().contiguous()
        if self.force_fp16 and tensor.dtype == torch.float32 and not keep_dtype:
            tensor = tensor.to(torch.float16)
        data = tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        key = "vulkan_" + hashlib.sha256(data).hexdigest()
        if key not in self._constant_keys:
            b = VkBytesT()
            b.offset = NAMED_DATA_OFFSET
            b.length = len(data)
            b.namedKey = key
            self.constants.append(b)
            self.named_data[key] = data
            self._constant_keys[key] = len(self.constants) - 1
        vid = self.tensor_value(tensor, what, constant_id=self._constant_keys[key])
        if keep_dtype:
            self.values[vid].value.datatype = _DTYPES[tensor.dtype]
            self.values[vid].value.stagingDatatype = VkDataType.UNSET
        return vid

    def node_value(self, node: torch.fx.Node) -> int:
        """The value of an fx node that produces a tensor, tensors or a SymInt."""
        if node in self.node_values:
            return self.node_values[node]
        if node in self.pending_constants:
            vid = self.constant(self.pending_constants[node], node.name)
            self.node_values[node] = vid
            return vid
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            vid = self.tensor_value(val, node.name)
        elif isinstance(val, (list, tuple)) and all(isinstance(v, torch.Tensor) or v is None for v in val):
            vid = self.value_list([self.tensor_value(v, f"{node.name}[{i}]") if v is not None else self.null()
                                   for i, v in enumerate(val)])
        elif isinstance(val, (torch.SymInt, int)):
            vid = self.symint_value(upper_bound(val) if isinstance(val, torch.SymInt) else val)
        else:
            raise GraphBuildError(f"node {node.name} ({node.target}) has no tensor or SymInt value")
        self.node_values[node] = vid
        return vid

    def arg_value(self, arg: Any, what: str) -> int:
        """A value for one operator argument (node, scalar, list, dtype/None...)."""
        if isinstance(arg, torch.fx.Node):
            return self.node_value(arg)
        if isinstance(arg, _NULL_TYPES):
            return self.null()
        if isinstance(arg, bool):
            return self.bool_value(arg)
        if isinstance(arg, int):
            return self.int_value(arg)
        if isinstance(arg, float):
            return self.double_value(arg)
        if isinstance(arg, str):
            return self.string_value(arg)
        if isinstance(arg, (list, tuple)):
            items = list(arg)
            if any(isinstance(x, torch.fx.Node) for x in items):
                return self.value_list([self.arg_value(x, what) for x in items])
            if all(isinstance(x, bool) for x in items) and items:
                o = BoolListT()
                o.items = items
                return self._add(GT.BoolList, o)
            if all(isinstance(x, int) and not isinstance(x, bool) for x in items):
                o = IntListT()
                o.items = [int(x) for x in items]
                return self._add(GT.IntList, o)
            if all(isinstance(x, (int, float)) for x in items):
                o = DoubleListT()
                o.items = [float(x) for x in items]
                return self._add(GT.DoubleList, o)
        raise GraphBuildError(f"{what}: argument {arg!r} of type {type(arg).__name__} cannot be serialized")

    # ------------------------------------------------------------------ calls
    def call(self, name: str, args: list[int], out: int, node_id: Optional[int] = None) -> None:
        """Appends ``name(args) -> out`` to the chain and records value lifetimes for memory planning.
        ``node_id``: the fx node's debug handle; by default the call's index in the chain."""
        op = OperatorCallT()
        op.nodeId = len(self.chain) if node_id is None else node_id
        op.name = name
        op.args = list(args) + [out]
        index = len(self.chain)
        self.chain.append(op)
        for a in args:
            for vid in self._tensors_in(a):
                self._used[vid] = index
        for vid in self._tensors_in(out):
            self._produced.setdefault(vid, index)

    def _tensors_in(self, vid: int) -> list[int]:
        v = self.values[vid]
        if v.valueType == GT.VkTensor:
            return [vid]
        if v.valueType == GT.ValueList:
            return [i for item in v.value.items for i in self._tensors_in(item)]
        return []

    def schema_args(self, node: torch.fx.Node) -> list[int]:
        """One value per schema argument of ``node.target`` (positional, keyword, then default)."""
        target = node.target
        if not hasattr(target, "_schema"):
            return [self.arg_value(a, node.name) for a in node.args]
        out = []
        for i, arg in enumerate(target._schema.arguments):
            if not arg.kwarg_only and i < len(node.args):
                value = node.args[i]
            elif arg.name in node.kwargs:
                value = node.kwargs[arg.name]
            else:
                value = arg.default_value if arg.has_default_value() else None
            out.append(self.arg_value(value, f"{node.name}.{arg.name}"))
        return out

    # ------------------------------------------------------------------ memory planning
    def plan_memory(self) -> int:
        """Assigns ``mem_obj_id`` to intermediate tensors; returns the number of memory objects."""
        io = set(self.input_ids) | set(self.output_ids)
        intervals = []
        for vid, first in self._produced.items():
            t = self.values[vid].value
            if vid in io or t.constantId >= 0 or vid not in self._used:
                continue
            intervals.append(_Interval(vid, self._tensor_bytes.get(vid, 0), first, self._used[vid]))
        intervals.sort(key=lambda iv: (iv.first, -iv.nbytes))
        objects: list[list] = []  # [size, free_after]
        for iv in intervals:
            free = [i for i, (size, busy_until) in enumerate(objects) if busy_until < iv.first]
            fitting = [i for i in free if objects[i][0] >= iv.nbytes]
            if fitting:
                pick = min(fitting, key=lambda i: objects[i][0])
            elif free:
                pick = max(free, key=lambda i: objects[i][0])
            else:
                objects.append([0, -1])
                pick = len(objects) - 1
            objects[pick][0] = max(objects[pick][0], iv.nbytes)
            objects[pick][1] = iv.last
            self.values[iv.value].value.memObjId = pick
        return len(objects)

    # ------------------------------------------------------------------ output
    def finish(self) -> bytes:
        """The VkGraph flatbuffer (identifier ``VK00``)."""
        g = VkGraphT()
        g.version = SCHEMA_VERSION
        g.chain = self.chain
        g.values = self.values
        g.inputIds = list(self.input_ids)
        g.outputIds = list(self.output_ids)
        g.constants = self.constants
        g.shaders = []
        g.storageTypeOverride = self.storage
        b = flatbuffers.Builder(1024)
        b.Finish(g.Pack(b), file_identifier=b"VK00")
        return bytes(b.Output())
