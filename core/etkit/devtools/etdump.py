"""Read ETDump files (seed page "Prerequisite: ETDump"), written by etkit's runtime or ExecuTorch's.

    from etkit.devtools.etdump import read_etdump
    dump = read_etdump("model.etdp")                   # path or bytes
    for run in dump.run_data:                          # "Default" (loading), "Execute" (each execute)
        for event in run.events:                       # ProfileEvent | DebugEvent | AllocationEvent
            ...

The layout is schema/etdump.fbs, ExecuTorch 1.5.1's ``etdump_schema_flatcc.fbs`` (identifier ``ED00``,
size-prefixed). An ETDump is untrusted input: the C++ flatbuffers verifier checks the whole file before
any of it is read (``etkit._runtime.verify_etdump``), so a truncated or corrupted file raises
:class:`ETDumpError` naming the file and the failed check, never reads past the buffer and never
crashes. Debug events point into a separate debug buffer (``Tensor.offset``); :func:`debug_value`
turns one into a ``torch.Tensor`` (or a Python scalar).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

__all__ = [
    "AllocationEvent",
    "DebugEvent",
    "DebugValue",
    "ETDump",
    "ETDumpError",
    "ProfileEvent",
    "RunData",
    "debug_value",
    "read_etdump",
]

#: ETDump's ValueType numbering (schema/etdump.fbs).
VALUE_TYPES = ("Null", "Int", "Bool", "Float", "Double", "Tensor", "TensorList", "String")


class ETDumpError(ValueError):
    """An ETDump or its debug buffer cannot be read; the message names the file and the part."""


@dataclass(frozen=True)
class ProfileEvent:
    """A timed span. ``start_time``/``end_time`` are in the runtime's clock units (nanoseconds for
    etkit and for ExecuTorch on Linux). Delegate events carry a delegate debug id instead of a name."""

    name: Optional[str]
    chain_index: int
    instruction_id: int
    delegate_debug_id_int: int
    delegate_debug_id_str: Optional[str]
    delegate_debug_metadata: bytes
    start_time: int
    end_time: int

    @property
    def delegate_debug_id(self) -> "int | str | None":
        if self.delegate_debug_id_int != -1:
            return self.delegate_debug_id_int
        return self.delegate_debug_id_str or None


@dataclass(frozen=True)
class DebugValue:
    """One logged value: ``kind`` is one of :data:`VALUE_TYPES`. A tensor's bytes are at ``offset`` in
    the debug buffer (-1: they did not fit); a scalar is in ``scalar``; a TensorList in ``tensors``."""

    kind: str
    scalar_type: int = -1
    sizes: tuple = ()
    strides: tuple = ()
    offset: int = -1
    scalar: Any = None
    tensors: tuple = ()
    is_output: bool = False


@dataclass(frozen=True)
class DebugEvent:
    chain_index: int
    instruction_id: int
    value: DebugValue
    delegate_debug_id_int: int
    delegate_debug_id_str: Optional[str]
    name: Optional[str]


@dataclass(frozen=True)
class AllocationEvent:
    allocator_id: int
    allocation_size: int


@dataclass
class RunData:
    name: str
    bundled_input_index: int
    allocators: list = field(default_factory=list)
    events: list = field(default_factory=list)


@dataclass
class ETDump:
    version: int
    run_data: list


def _str(value) -> Optional[str]:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _ints(values) -> tuple:
    return tuple(int(v) for v in values) if values is not None else ()


def _bytes(values) -> bytes:
    return bytes(bytearray(int(v) for v in values)) if values is not None else b""


def _tensor_value(t, is_output: bool) -> DebugValue:
    return DebugValue("Tensor", scalar_type=int(t.scalarType), sizes=_ints(t.sizes), strides=_ints(t.strides),
                      offset=int(t.offset), is_output=is_output)


def _debug_value(v, where: str) -> DebugValue:
    if v is None:
        raise ETDumpError(f"{where}: a debug event without a debug_entry")
    kind = VALUE_TYPES[v.val] if 0 <= v.val < len(VALUE_TYPES) else f"ValueType({v.val})"
    is_output = bool(v.output is not None and v.output.boolVal)
    if kind == "Tensor":
        if v.tensor is None:
            raise ETDumpError(f"{where}: value says Tensor but has no tensor")
        return _tensor_value(v.tensor, is_output)
    if kind == "TensorList":
        tensors = tuple(_tensor_value(t, False) for t in (v.tensorList.tensors or [])) if v.tensorList else ()
        return DebugValue(kind, tensors=tensors, is_output=is_output)
    member = {"Int": ("intValue", "intVal"), "Bool": ("boolValue", "boolVal"), "Float": ("floatValue", "floatVal"),
              "Double": ("doubleValue", "doubleVal")}.get(kind)
    if member is not None:
        box = getattr(v, member[0])
        return DebugValue(kind, scalar=getattr(box, member[1]) if box is not None else None, is_output=is_output)
    return DebugValue(kind, is_output=is_output)


def read_etdump(source: "str | os.PathLike | bytes") -> ETDump:
    """Reads an ETDump from a path or bytes.

    Raises:
        ETDumpError: the file cannot be read, is truncated, has another identifier, or fails the
            flatbuffers verifier (message names the file and the check); a debug event without a value.
    """
    from etkit import _runtime

    if isinstance(source, (bytes, bytearray, memoryview)):
        data, what = bytes(source), "ETDump bytes"
    else:
        what = os.fspath(source)
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise ETDumpError(f"cannot read ETDump {what!r}: {exc}") from None
    try:
        _runtime.verify_etdump(data)
    except _runtime.EtkitRuntimeError as exc:
        raise ETDumpError(f"{what}: {exc}") from None
    from etkit.fb.etdump.ETDump import ETDumpT

    root = ETDumpT.InitFromPackedBuf(data, 4)  # after the 4-byte size prefix
    runs = []
    for r, run in enumerate(root.runData or []):
        events = []
        for e, event in enumerate(run.events or []):
            where = f"{what}: run_data[{r}].events[{e}]"
            set_members = [m for m in (event.profileEvent, event.allocationEvent, event.debugEvent) if m is not None]
            if len(set_members) != 1:
                raise ETDumpError(f"{where}: an Event must hold exactly one of profile_event, allocation_event, "
                                  f"debug_event (it holds {len(set_members)})")
            if event.profileEvent is not None:
                p = event.profileEvent
                events.append(ProfileEvent(_str(p.name), int(p.chainIndex), int(p.instructionId),
                                           int(p.delegateDebugIdInt), _str(p.delegateDebugIdStr),
                                           _bytes(p.delegateDebugMetadata), int(p.startTime),
                                           int(p.endTime)))
            elif event.allocationEvent is not None:
                a = event.allocationEvent
                events.append(AllocationEvent(int(a.allocatorId), int(a.allocationSize)))
            else:
                d = event.debugEvent
                events.append(DebugEvent(int(d.chainIndex), int(d.instructionId), _debug_value(d.debugEntry, where),
                                         int(d.delegateDebugIdInt), _str(d.delegateDebugIdStr), _str(d.name)))
        allocators = [_str(a.name) for a in (run.allocators or [])]
        runs.append(RunData(_str(run.name) or "", int(run.bundledInputIndex), allocators, events))
    return ETDump(int(root.version), runs)


def debug_value(value: DebugValue, debug_buffer: "bytes | None") -> "Union[Any, None]":
    """The logged value: a ``torch.Tensor`` (a copy, laid out as ``strides`` say) read from
    ``debug_buffer`` at ``value.offset``, a list of them for a TensorList, or a Python scalar. ``None``
    for a tensor whose bytes did not fit the debug buffer (offset -1) or when no buffer is given.

    Raises:
        ETDumpError: the tensor's bytes lie outside the debug buffer or its dtype is unknown.
    """
    import torch

    from etkit.emit.dtypes import DTYPE

    if value.kind == "TensorList":
        return [debug_value(t, debug_buffer) for t in value.tensors]
    if value.kind != "Tensor":
        return value.scalar
    if debug_buffer is None or value.offset < 0:
        return None
    dtype = DTYPE.get(value.scalar_type)
    if dtype is None:
        raise ETDumpError(f"debug value has ScalarType {value.scalar_type}, which has no torch dtype")
    numel = 1
    for s in value.sizes:
        if s < 0:
            raise ETDumpError(f"debug value has a negative size in {list(value.sizes)}")
        numel *= s
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    if value.offset + nbytes > len(debug_buffer):
        raise ETDumpError(f"debug value of {nbytes} bytes at offset {value.offset} lies outside the debug buffer "
                          f"({len(debug_buffer)} bytes): wrong or truncated debug buffer file")
    flat = torch.frombuffer(bytearray(debug_buffer[value.offset:value.offset + nbytes]), dtype=dtype) \
        if nbytes else torch.empty(0, dtype=dtype)
    sizes = list(value.sizes)
    strides = list(value.strides) if len(value.strides) == len(sizes) else None
    if strides is None or not sizes:
        return flat.reshape(sizes)
    # Bytes are in the tensor's memory layout; view them with its strides, then make them contiguous.
    if any(st < 0 for st in strides) or (numel and max((s - 1) * st for s, st in zip(sizes, strides)) >= numel):
        raise ETDumpError(f"debug value's strides {strides} do not fit sizes {sizes}")
    return torch.as_strided(flat, sizes, strides).contiguous()
