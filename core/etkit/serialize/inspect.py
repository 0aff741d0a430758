"""``etkit inspect``: a human-readable dump of a .pte file.

Shows the file identifier, program version, extended header fields, segments (file offset,
size, what uses them), named data, and per method its inputs, outputs, values, operators,
delegates and one line per instruction, e.g. ``  3: KernelCall aten::add.out(args=[0, 1, 2, 3])``.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from typing import TextIO

from etkit.fb.DataLocation import DataLocation
from etkit.fb.InstructionArguments import InstructionArguments
from etkit.fb.KernelTypes import KernelTypes

from etkit.serialize.errors import PteFormatError
from etkit.serialize.program_flatbuffer import as_bytes
from etkit.serialize.pte import PteLayout, read_layout
from etkit.scalar_types import scalar_type_name

_KIND_NAMES = {v: k for k, v in vars(KernelTypes).items() if not k.startswith("_")}
_DYNAMISM = {0: "", 1: " dynamic-bound", 2: " dynamic-unbound"}
_PREVIEW = 8  # list items shown before "..."


def _text(value) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _ints(values) -> list[int]:
    return [] if values is None else [int(v) for v in values]


def _short_list(values, limit: int = _PREVIEW) -> str:
    items = list(values)
    shown = ", ".join(str(v) for v in items[:limit])
    return f"[{shown}{', ...' if len(items) > limit else ''}]"


def _describe_value(evalue) -> str:
    kind, val = evalue.valType, evalue.val
    if kind == KernelTypes.NONE or val is None or kind == KernelTypes.Null:
        return "None"
    if kind == KernelTypes.Tensor:
        sizes = _ints(val.sizes)
        text = f"Tensor {scalar_type_name(val.scalarType)}{sizes}{_DYNAMISM.get(val.shapeDynamism, '')}"
        dim_order = _ints(val.dimOrder)
        if dim_order != list(range(len(sizes))):
            text += f" dim_order={dim_order}"
        if val.allocationInfo is not None:
            info = val.allocationInfo
            offset = (info.memoryOffsetHigh << 32) | info.memoryOffsetLow
            text += f" planned(mem {info.memoryId} @ {offset})"
        if val.dataBufferIdx:
            text += f" {'initial data' if val.allocationInfo else 'constant'} #{val.dataBufferIdx}"
        extra = val.extraTensorInfo
        if extra is not None and extra.fullyQualifiedName:
            where = "external" if extra.location == 1 else "segment"
            text += f" {where} {_text(extra.fullyQualifiedName)!r}"
        if val.allocationInfo is None and not val.dataBufferIdx and not (extra and extra.location):
            text += " (memory from caller)"
        return text
    if kind == KernelTypes.Int:
        return f"Int {val.intVal}"
    if kind == KernelTypes.Bool:
        return f"Bool {bool(val.boolVal)}"
    if kind == KernelTypes.Double:
        return f"Double {val.doubleVal!r}"
    if kind == KernelTypes.String:
        return f"String {_text(val.stringVal)!r}"
    if kind in (KernelTypes.IntList, KernelTypes.TensorList, KernelTypes.OptionalTensorList):
        return f"{_KIND_NAMES[kind]} {_short_list(_ints(val.items))}"
    if kind == KernelTypes.DoubleList:
        return f"DoubleList {_short_list([float(v) for v in val.items or []])}"
    if kind == KernelTypes.BoolList:
        return f"BoolList {_short_list([bool(v) for v in val.items or []])}"
    return f"<type {kind}>"


def _operator_name(operator) -> str:
    name, overload = _text(operator.name), _text(operator.overload)
    return f"{name}.{overload}" if overload else name


def _args(values) -> str:
    return "[" + ",".join(str(v) for v in _ints(values)) + "]"


def _describe_instruction(kind, args, operators, delegates) -> str:
    if kind == InstructionArguments.KernelCall:
        return f"KernelCall {_operator_name(operators[args.opIndex])}(args={_args(args.args)})"
    if kind == InstructionArguments.DelegateCall:
        backend = _text(delegates[args.delegateIndex].id)
        return f"DelegateCall {backend}#{args.delegateIndex} (args={_args(args.args)})"
    if kind == InstructionArguments.MoveCall:
        return f"MoveCall {args.moveFrom} -> {args.moveTo}"
    if kind == InstructionArguments.JumpFalseCall:
        return (f"JumpFalseCall if not values[{args.condValueIndex}] goto "
                f"{args.destinationInstruction}")
    if kind == InstructionArguments.FreeCall:
        return f"FreeCall {args.valueIndex}"
    return f"<instruction type {kind}>"


def _segment_users(layout: PteLayout) -> dict[int, list[str]]:
    program = layout.program
    users: dict[int, list[str]] = {}
    constant_segment = program.constantSegment
    if constant_segment is not None and constant_segment.offsets is not None \
            and len(constant_segment.offsets) > 0:
        users.setdefault(constant_segment.segmentIndex, []).append(
            f"constants ({len(constant_segment.offsets)} offsets)")
    for i, mutable in enumerate(program.mutableDataSegments or []):
        users.setdefault(mutable.segmentIndex, []).append(f"mutable data {i}")
    for plan in program.executionPlan:
        for d, delegate in enumerate(plan.delegates or []):
            if delegate.processed.location == DataLocation.SEGMENT:
                users.setdefault(delegate.processed.index, []).append(
                    f"delegate {_text(delegate.id)}#{d} of {_text(plan.name)!r}")
    for entry in program.namedData or []:
        users.setdefault(entry.segmentIndex, []).append(f"named data {_text(entry.key)!r}")
    return users


def _format_layout(layout: PteLayout, label: str, data: bytes = b"") -> list[str]:
    program = layout.program
    lines = [f"{label}: .pte program, {layout.file_size} bytes",
             f"  file identifier ET12, Program.version {program.version}"]
    header = layout.header
    if header is None:
        lines.append("  extended header: none (no segment data)")
    else:
        lines.append(
            f"  extended header eh00: length {header.length}, program_size {header.program_size}, "
            f"segment_base_offset {header.segment_base_offset}, "
            f"segment_data_size {header.segment_data_size}")
    users = _segment_users(layout)
    lines.append(f"  segments ({len(layout.segment_ranges)}):")
    for i, (start, size) in enumerate(layout.segment_ranges):
        offset = program.segments[i].offset
        used_by = "; ".join(users.get(i, ["unused"]))
        within = next((j for j, (s, n) in enumerate(layout.segment_ranges[:i])
                       if s <= start and start + size <= s + n), None)
        shared = f" (bytes stored once, inside segment {within})" if within is not None else ""
        lines.append(f"    [{i}] offset {offset} (file byte {start}), size {size}{shared}: {used_by}")
    if program.constantBuffer:
        total = sum(len(as_bytes(b.storage)) for b in program.constantBuffer)
        lines.append(f"  constant_buffer (inline): {len(program.constantBuffer)} entries, "
                     f"{total} bytes")
    if program.backendDelegateData:
        lines.append(f"  backend_delegate_data (inline): {len(program.backendDelegateData)} entries")
    named = program.namedData or []
    lines.append(f"  named data ({len(named)}):")
    for entry in named:
        size = layout.segment_ranges[entry.segmentIndex][1]
        lines.append(f"    {_text(entry.key)!r}: segment {entry.segmentIndex}, {size} bytes")
    for plan in program.executionPlan:
        lines.extend(_format_plan(plan, layout, data))
    return lines


def _delegate_size(delegate, layout: PteLayout) -> str:
    processed = delegate.processed
    if processed.location == DataLocation.SEGMENT:
        return f"{layout.segment_ranges[processed.index][1]} bytes in segment {processed.index}"
    data = layout.program.backendDelegateData[processed.index].data
    return f"{len(as_bytes(data))} bytes inline (backend_delegate_data[{processed.index}])"


def _format_compile_spec(spec) -> str:
    value = as_bytes(spec.value)
    shown = value.decode("ascii") if value.isascii() and value.decode("ascii").isprintable() \
        else value[:16].hex() + ("..." if len(value) > 16 else "")
    return f"{_text(spec.key)}={shown} ({len(value)} bytes)"


def _delegate_payload(delegate, layout: PteLayout, data: bytes) -> bytes:
    processed = delegate.processed
    if processed.location == DataLocation.SEGMENT:
        offset, size = layout.segment_ranges[processed.index]
        return bytes(data[offset:offset + size])
    return bytes(as_bytes(layout.program.backendDelegateData[processed.index].data))


def _plugin_description(delegate, layout: PteLayout, data: bytes) -> list[str]:
    """Lines the backend's plugin gives for this payload (``BackendSpec.describe_payload``)."""
    specs = {_text(s.key): bytes(as_bytes(s.value)) for s in delegate.compileSpecs or []}
    try:
        from etkit.plugins import backend_behaviour
        describe = backend_behaviour(_text(delegate.id), "describe_payload")
        if describe is None:
            return []
        lines = describe(_delegate_payload(delegate, layout, data), specs)
    except Exception as exc:  # a plugin's bug must not hide the rest of the program
        return [f"(its plugin could not describe the payload: {type(exc).__name__}: {exc})"]
    return [str(line) for line in lines or []]


def _format_plan(plan, layout: PteLayout, data: bytes = b"") -> list[str]:
    values = plan.values or []
    operators = plan.operators or []
    delegates = plan.delegates or []
    lines = [f"method {_text(plan.name)!r}:",
             f"  inputs {_ints(plan.inputs)}, outputs {_ints(plan.outputs)}",
             f"  non_const_buffer_sizes {_ints(plan.nonConstBufferSizes)}"]
    kinds = Counter(_KIND_NAMES.get(v.valType, str(v.valType)) for v in values)
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
    lines.append(f"  values ({len(values)}: {summary}):")
    lines.extend(f"    {i}: {_describe_value(v)}" for i, v in enumerate(values))
    lines.append(f"  operators ({len(operators)}):")
    lines.extend(f"    {i}: {_operator_name(op)}" for i, op in enumerate(operators))
    lines.append(f"  delegates ({len(delegates)}):")
    for i, delegate in enumerate(delegates):
        specs = ", ".join(_format_compile_spec(s) for s in delegate.compileSpecs or [])
        lines.append(f"    {i}: {_text(delegate.id)}, {_delegate_size(delegate, layout)}, "
                     f"compile specs: {specs or 'none'}")
        if data:
            lines.extend(f"       {line}" for line in _plugin_description(delegate, layout, data))
    for c, chain in enumerate(plan.chains or []):
        instructions = chain.instructions or []
        lines.append(f"  chain {c} (inputs {_ints(chain.inputs)}, outputs {_ints(chain.outputs)}, "
                     f"{len(instructions)} instructions):")
        for i, instruction in enumerate(instructions):
            text = _describe_instruction(instruction.instrArgsType, instruction.instrArgs,
                                         operators, delegates)
            lines.append(f"    {i}: {text}")
    return lines


def delegate_payloads(path_or_bytes: str | os.PathLike | bytes) -> list[tuple]:
    """Every delegate of a .pte with its payload: ``(method name, delegate index, backend id, payload bytes,
    {compile spec key: value bytes})`` in file order (for plugins' own tools, e.g. dumping a compiled graph).

    Raises:
        PteFormatError: the data is not a .pte this etkit reads.
        OSError: the path cannot be read.
    """
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
    else:
        with open(os.fspath(path_or_bytes), "rb") as f:
            data = f.read()
    layout = read_layout(data)
    found = []
    for plan in layout.program.executionPlan or []:
        for i, delegate in enumerate(plan.delegates or []):
            specs = {_text(s.key): bytes(as_bytes(s.value)) for s in delegate.compileSpecs or []}
            found.append((_text(plan.name), i, _text(delegate.id), _delegate_payload(delegate, layout, data), specs))
    return found


def dump_payloads(path_or_bytes: str | os.PathLike | bytes, directory: str | os.PathLike) -> list[str]:
    """Write every delegate's payload under ``directory`` (created): as the backend's plugin lays it out
    (``BackendSpec.dump_payload``), else raw as ``<method>_<index>.<backend id>.bin``. Returns one line per delegate
    saying what was written (or why nothing was).

    Raises:
        PteFormatError: the data is not a .pte this etkit reads.
        OSError: the path cannot be read or the directory cannot be written.
    """
    from etkit.plugins import backend_behaviour

    os.makedirs(directory, exist_ok=True)
    lines = []
    for method, index, backend_id, payload, specs in delegate_payloads(path_or_bytes):
        stem = f"{method}_{index}"
        try:
            dump = backend_behaviour(backend_id, "dump_payload")
            written = None if dump is None else dump(payload, specs, os.fspath(directory), stem)
        except Exception as exc:  # a plugin's bug: fall back to the raw bytes
            lines.append(f"{stem} ({backend_id}): its plugin could not dump it ({type(exc).__name__}: {exc}); "
                         f"writing the raw payload")
            written = None
        if written is None:
            path = os.path.join(os.fspath(directory), f"{stem}.{backend_id}.bin")
            with open(path, "wb") as f:
                f.write(payload)
            written = [path]
        lines.append(f"{stem} ({backend_id}): " + (", ".join(str(p) for p in written) or "nothing to write"))
    return lines


def format_program(path_or_bytes: str | os.PathLike | bytes) -> str:
    """Render a .pte file (a path or its bytes) as text, one fact per line.

    Raises:
        PteFormatError: the data is not a .pte this etkit reads (not a .pte, truncated, a newer
            format); the message says which field, what value and what was expected.
        OSError: the path cannot be read.
    """
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data, label = bytes(path_or_bytes), "<bytes>"
    else:
        label = os.fspath(path_or_bytes)
        with open(label, "rb") as f:
            data = f.read()
    return "\n".join(_format_layout(read_layout(data), label, data)) + "\n"


def run_inspect(path: str, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """``etkit inspect PATH``: print the dump, or one line naming the problem. Returns the exit code."""
    try:
        out.write(format_program(path))
        return 0
    except PteFormatError as error:
        err.write(f"etkit inspect: {path}: {error}\n")
    except OSError as error:
        err.write(f"etkit inspect: cannot read {path}: {error.strerror or error}\n")
    return 1
