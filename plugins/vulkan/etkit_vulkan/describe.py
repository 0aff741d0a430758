"""What ``etkit inspect`` shows for a Vulkan payload (``BackendSpec.describe_payload``)."""
from __future__ import annotations

import collections

from .fb.GraphTypes import GraphTypes
from .fb.VkDataType import VkDataType
from .fb.VkGraph import VkGraph
from .fb.VkStorageType import VkStorageType
from .serialization.payload import NAMED_DATA_OFFSET, unpack

_DTYPE_NAMES = {v: k.lower() for k, v in vars(VkDataType).items() if not k.startswith("_")}
_STORAGE_NAMES = {v: k.lower() for k, v in vars(VkStorageType).items() if not k.startswith("_")}


def _tensor(graph: VkGraph, vid: int):
    value = graph.Values(vid)
    if value.ValueType() != GraphTypes.VkTensor:
        return None
    from .fb.VkTensor import VkTensor

    t = VkTensor()
    t.Init(value.Value().Bytes, value.Value().Pos)
    return t


def _describe_tensor(t) -> str:
    dims = [t.Dims(i) for i in range(t.DimsLength())]
    staging = t.StagingDatatype()
    host = f" (host {_DTYPE_NAMES.get(staging)})" if staging not in (VkDataType.UNSET, t.Datatype()) else ""
    return f"{_DTYPE_NAMES.get(t.Datatype(), t.Datatype())}{dims}{host}"


def describe_payload(processed: bytes, compile_specs: dict) -> list[str]:
    """Lines for one delegate: storage, float type, inputs and outputs, operator counts, constants and the
    planned memory objects.

    Raises:
        etkit_vulkan.serialization.payload.PayloadError: not a Vulkan payload.
    """
    payload = unpack(processed)
    graph = VkGraph.GetRootAs(payload.flatbuffer, 0)
    ops = collections.Counter(graph.Chain(i).Name().decode(errors="replace") for i in range(graph.ChainLength()))
    tensors = [t for t in (_tensor(graph, i) for i in range(graph.ValuesLength())) if t is not None]
    constants = [graph.Constants(i) for i in range(graph.ConstantsLength())]
    named = sum(1 for c in constants if c.Offset() == NAMED_DATA_OFFSET)
    const_bytes = sum(c.Length() for c in constants)
    mem_objs = {t.MemObjId() for t in tensors if t.MemObjId() >= 0}
    floats = {t.Datatype() for t in tensors if t.ConstantId() < 0 and t.Datatype() in (VkDataType.FLOAT16,
                                                                                       VkDataType.FLOAT32)}
    spec_fp16 = compile_specs.get("force_fp16", b"\x00")[:1] == b"\x01"
    lines = [f"Vulkan graph (VK00 version {graph.Version().decode() if graph.Version() else '?'}): "
             f"storage {_STORAGE_NAMES.get(graph.StorageTypeOverride(), '?')}, computes in "
             f"{', '.join(sorted(_DTYPE_NAMES[f] for f in floats)) or 'float32'}"
             f"{' (force_fp16)' if spec_fp16 else ''}"]
    lines.append("inputs: " + ", ".join(_describe_tensor(_tensor(graph, graph.InputIds(i)))
                                        for i in range(graph.InputIdsLength()) if _tensor(graph, graph.InputIds(i))))
    lines.append("outputs: " + ", ".join(_describe_tensor(_tensor(graph, graph.OutputIds(i)))
                                         for i in range(graph.OutputIdsLength())))
    lines.append(f"{graph.ChainLength()} operator calls: " + ", ".join(f"{name} x{n}" for name, n in sorted(ops.items())))
    lines.append(f"{graph.ValuesLength()} values ({len(tensors)} tensors), {len(constants)} constants "
                 f"({const_bytes} bytes, {named} in named data), {len(mem_objs)} shared memory objects")
    return lines
