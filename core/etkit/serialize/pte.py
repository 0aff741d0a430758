"""Write and read ``.pte`` program files (seed page ".pte file format").

File layout, as ExecuTorch 1.5 writes it::

    [0..4)   uint32 offset of the flatbuffer root table
    [4..8)   file identifier "ET12"
    [8..40)  extended header "eh00" (only when there is segment data), zero-padded to the
             flatbuffer's largest force_align (16 unless a larger alignment was asked for)
    ...      rest of the Program flatbuffer                       } program_size bytes from 0
    padding  zeros up to segment_base_offset (a multiple of segment_alignment)
    segments each at segment_base_offset + Program.segments[i].offset, offsets aligned to
             segment_alignment; no padding after the last one

Segments are laid out in this order: the constant segment (every constant tensor, each padded
to ``constant_tensor_alignment`` except the last; ``Program.constant_segment.offsets[i]`` is
tensor i's start), the mutable-data segment (initial values of mutable buffers, unpadded), one
segment per distinct delegate blob (first use first), one per distinct named-data blob (key
order). A delegate with an empty blob keeps it inline in ``Program.backend_delegate_data``.

A named-data blob whose bytes equal a constant tensor's is not stored again: its
``Program.segments`` entry covers that tensor's bytes inside the constant segment (segments may
overlap; a loader reads each by offset and size). An LLM whose output projection (delegated, named
data) is tied to its token embedding (a kernel's constant) thus stores the table once, where
ExecuTorch 1.5.1 stores it twice; ExecuTorch's runtime reads such a file unchanged.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

from etkit.fb.BackendDelegateDataReference import BackendDelegateDataReferenceT
from etkit.fb.BackendDelegateInlineData import BackendDelegateInlineDataT
from etkit.fb.DataLocation import DataLocation
from etkit.fb.DataSegment import DataSegmentT
from etkit.fb.KernelTypes import KernelTypes
from etkit.fb.NamedData import NamedDataT
from etkit.fb.Program import ProgramT
from etkit.fb.SubsegmentOffsets import SubsegmentOffsetsT
from etkit.fb.TensorDataLocation import TensorDataLocation

from etkit.serialize.alignment import align_up, check_alignment, padding_to
from etkit.serialize.errors import PteFormatError
from etkit.serialize.extended_header import HEADER_OFFSET, LENGTH, ExtendedHeader, read_extended_header
from etkit.serialize.program_checks import check_program
from etkit.serialize.program_flatbuffer import (
    FILE_IDENTIFIER,
    SCHEMA_ALIGNMENT,
    as_bytes,
    pack_program,
    unpack_program,
)
from etkit.scalar_types import element_size


@dataclass
class PteContents:
    """A program and the bytes that go into its segments.

    Attributes:
        program: the Program table. ``execution_plan`` is what matters; ``constant_buffer``,
            ``backend_delegate_data``, ``segments``, ``constant_segment``,
            ``mutable_data_segments`` and ``named_data`` are written by ``serialize_pte`` and
            left empty (None) by ``deserialize_pte``. Each ``BackendDelegate.processed.index``
            indexes ``delegate_data`` (its ``location`` is ignored on write, INLINE on read).
        constant_data: constant tensor bytes; ``Tensor.data_buffer_idx`` i (for a tensor
            without ``allocation_info``) reads ``constant_data[i]``. Entry 0 is the empty
            placeholder ExecuTorch reserves.
        delegate_data: processed delegate blobs.
        named_data: key -> bytes, e.g. a backend's weights (``NamedDataMap`` at run time).
        mutable_data: initial bytes of mutable buffers (tensors with ``allocation_info`` and
            ``data_buffer_idx`` i > 0); entry 0 is the placeholder. Usually empty.
    """

    program: ProgramT
    constant_data: list[bytes] = field(default_factory=list)
    delegate_data: list[bytes] = field(default_factory=list)
    named_data: dict[str, bytes] = field(default_factory=dict)
    mutable_data: list[bytes] = field(default_factory=list)


@dataclass(frozen=True)
class _Segment:
    data: bytes
    alignment: int = 1
    #: (index of an earlier segment, offset in it) where these bytes are already stored, or None
    alias_of: tuple[int, int] | None = None


def _pack_subsegments(blobs: list[bytes], alignment: int | None) -> tuple[bytes, list[int]]:
    """Concatenate ``blobs``, padding each but the last to ``alignment``; return data, offsets."""
    parts: list[bytes] = []
    offsets: list[int] = []
    position = 0
    for i, blob in enumerate(blobs):
        offsets.append(position)
        parts.append(blob)
        position += len(blob)
        pad = padding_to(len(blob), alignment) if alignment else 0
        if i < len(blobs) - 1 and pad:
            parts.append(b"\x00" * pad)
        position += pad
    return b"".join(parts), offsets


def _move_delegates_to_segments(program: ProgramT, delegate_data: list[bytes],
                                segments: list[_Segment]) -> list[BackendDelegateInlineDataT]:
    """Point every delegate at a segment holding its blob (identical blobs share one)."""
    inline: list[BackendDelegateInlineDataT] = []
    segment_of_blob: dict[bytes, int] = {}
    used: set[int] = set()
    plans = []
    for plan in program.executionPlan or []:
        plan = copy.copy(plan)
        delegates = []
        for d, delegate in enumerate(plan.delegates or []):
            delegate = copy.copy(delegate)
            index = delegate.processed.index if delegate.processed is not None else None
            if index is None or not 0 <= index < len(delegate_data):
                raise ValueError(
                    f"serialize_pte: method {plan.name!r} delegates[{d}] ({delegate.id!r}) "
                    f"processed.index {index} does not index delegate_data "
                    f"(len {len(delegate_data)})"
                )
            used.add(index)
            blob = bytes(delegate_data[index])
            if blob:
                if blob not in segment_of_blob:
                    segment_of_blob[blob] = len(segments)
                    segments.append(_Segment(blob))
                location, new_index = DataLocation.SEGMENT, segment_of_blob[blob]
            else:
                location, new_index = DataLocation.INLINE, len(inline)
                inline.append(BackendDelegateInlineDataT(data=b""))
            delegate.processed = BackendDelegateDataReferenceT(location=location, index=new_index)
            delegates.append(delegate)
        if plan.delegates is not None:
            plan.delegates = delegates
        plans.append(plan)
    unused = sorted(set(range(len(delegate_data))) - used)
    if unused:
        raise ValueError(
            f"serialize_pte: delegate_data entries {unused} are not referenced by any "
            "BackendDelegate.processed.index"
        )
    program.executionPlan = plans
    return inline


def serialize_pte(contents: PteContents, *, segment_alignment: int = 4096,
                  constant_tensor_alignment: int = 16,
                  delegate_alignment: int | None = None) -> bytes:
    """Encode ``contents`` as ``.pte`` bytes that ExecuTorch 1.5's runtime loads.

    Args:
        segment_alignment: alignment of every segment's file offset (4096: page-aligned, so
            a loader can mmap segments).
        constant_tensor_alignment: alignment of each constant tensor inside the constant
            segment (and of inline ``Buffer.storage``). Power of two.
        delegate_alignment: alignment of inline delegate data; None keeps the schema's 16.

    Returns:
        The file bytes. The same contents always give the same bytes.

    Raises:
        ValueError: an alignment is not a power of two, or a delegate's ``processed.index``
            does not index ``delegate_data`` (or an entry is referenced by no delegate).
    """
    check_alignment("segment_alignment", segment_alignment)
    check_alignment("constant_tensor_alignment", constant_tensor_alignment)
    if delegate_alignment is None:
        delegate_alignment = SCHEMA_ALIGNMENT
    check_alignment("delegate_alignment", delegate_alignment)
    if contents.program is None or not contents.program.executionPlan:
        raise ValueError("serialize_pte: program has no execution_plan (no methods)")

    program = copy.copy(contents.program)
    segments: list[_Segment] = []

    constant_blob, constant_offsets = _pack_subsegments(
        [bytes(b) for b in contents.constant_data], constant_tensor_alignment)
    program.constantBuffer = []
    program.constantSegment = SubsegmentOffsetsT(segmentIndex=0, offsets=[])
    if constant_offsets:
        program.constantSegment = SubsegmentOffsetsT(segmentIndex=len(segments),
                                                     offsets=constant_offsets)
        segments.append(_Segment(constant_blob))

    program.mutableDataSegments = None
    mutable_blob, mutable_offsets = _pack_subsegments([bytes(b) for b in contents.mutable_data],
                                                      None)
    if mutable_blob:
        program.mutableDataSegments = [SubsegmentOffsetsT(segmentIndex=len(segments),
                                                          offsets=mutable_offsets)]
        segments.append(_Segment(mutable_blob))

    program.backendDelegateData = _move_delegates_to_segments(
        program, list(contents.delegate_data), segments)

    program.namedData = None
    if contents.named_data:
        program.namedData = []
        segment_of_blob: dict[bytes, int] = {}
        constant_at = {}  # bytes of a constant tensor -> its offset in the constant segment
        if constant_offsets:
            constant_at = {bytes(b): o for b, o in zip(contents.constant_data, constant_offsets) if len(b) > 0}
        for key, blob in contents.named_data.items():
            blob = bytes(blob)
            if blob not in segment_of_blob:
                segment_of_blob[blob] = len(segments)
                alias = None
                if blob in constant_at:
                    alias = (program.constantSegment.segmentIndex, constant_at[blob])
                segments.append(_Segment(blob, alias_of=alias))
            program.namedData.append(NamedDataT(key=key, segmentIndex=segment_of_blob[blob]))

    program.segments = []
    segment_parts: list[bytes] = []
    segment_data_size = 0
    for segment in segments:
        if segment.alias_of is not None:
            target, offset = segment.alias_of
            program.segments.append(DataSegmentT(offset=program.segments[target].offset + offset,
                                                 size=len(segment.data)))
            continue
        alignment = math.lcm(segment_alignment, segment.alignment)
        start = align_up(segment_data_size, alignment)
        segment_parts.append(b"\x00" * (start - segment_data_size))
        segment_parts.append(segment.data)
        program.segments.append(DataSegmentT(offset=start, size=len(segment.data)))
        segment_data_size = start + len(segment.data)

    flatbuffer = pack_program(program, tensor_alignment=constant_tensor_alignment,
                              delegate_alignment=delegate_alignment)
    if segment_data_size == 0:
        return flatbuffer

    # The header goes between the identifier and the rest of the flatbuffer; padding it to the
    # largest force_align keeps every aligned vector aligned.
    max_alignment = max(constant_tensor_alignment, delegate_alignment)
    header_size = align_up(LENGTH, max_alignment)
    program_size = len(flatbuffer) + header_size
    segment_base_offset = align_up(program_size, segment_alignment)
    header = ExtendedHeader(program_size=program_size, segment_base_offset=segment_base_offset,
                            segment_data_size=segment_data_size).to_bytes()
    root_offset = int.from_bytes(flatbuffer[0:4], "little") + header_size
    return b"".join([
        root_offset.to_bytes(4, "little"),
        flatbuffer[4:8],
        header + b"\x00" * (header_size - len(header)),
        flatbuffer[8:],
        b"\x00" * (segment_base_offset - program_size),
        *segment_parts,
    ])


@dataclass
class PteLayout:
    """A .pte file decoded but not rearranged: what ``etkit inspect`` shows.

    Attributes:
        file_size: bytes in the file.
        header: the extended header, or None when the file has none.
        program_size: bytes of flatbuffer data from offset 0.
        segment_base_offset: file offset of segment 0's ``offset`` 0 (0: no segment data).
        program: the Program exactly as stored.
        segment_ranges: (file offset, size) of each ``Program.segments`` entry.
    """

    file_size: int
    header: ExtendedHeader | None
    program_size: int
    segment_base_offset: int
    program: ProgramT
    segment_ranges: list[tuple[int, int]]


def _check_identifier(data: bytes) -> None:
    if len(data) < 8:
        raise PteFormatError(
            f"not a .pte program: {len(data)} bytes, shorter than the 8-byte flatbuffer prefix "
            "(root offset + file identifier)"
        )
    identifier = bytes(data[4:8])
    if identifier == FILE_IDENTIFIER:
        return
    if identifier[:2] == b"ET" and identifier[2:].isalnum():
        raise PteFormatError(
            f"unsupported .pte format version: file identifier {identifier.decode()!r} at bytes "
            f"4..8, this etkit reads {FILE_IDENTIFIER.decode()!r}"
        )
    raise PteFormatError(
        f"not a .pte program: bytes 4..8 are {identifier!r}, expected the file identifier "
        f"{FILE_IDENTIFIER!r}"
    )


def read_layout(data: bytes) -> PteLayout:
    """Decode the headers and Program of a .pte file and check that every reference resolves.

    Raises:
        PteFormatError: wrong identifier, truncated file, header fields inconsistent with the
            file size, corrupt flatbuffer, or an index pointing at nothing.
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    _check_identifier(data)
    header = read_extended_header(data)
    program_size, base = len(data), 0
    if header is not None:
        program_size, base = header.program_size, header.segment_base_offset
        if not HEADER_OFFSET + header.length <= program_size <= len(data):
            raise PteFormatError(
                f"extended header: program_size {program_size} does not fit the "
                f"{len(data)}-byte file (expected {HEADER_OFFSET + header.length}..{len(data)}; "
                "file truncated?)"
            )
        if base != 0 and not program_size <= base <= len(data):
            raise PteFormatError(
                f"extended header: segment_base_offset {base} is outside "
                f"[program_size {program_size}, file size {len(data)}] (file truncated?)"
            )
        if header.segment_data_size and base + header.segment_data_size > len(data):
            raise PteFormatError(
                f"extended header: segment data ends at {base} + {header.segment_data_size} = "
                f"{base + header.segment_data_size} but the file is {len(data)} bytes "
                "(file truncated?)"
            )
    program = unpack_program(bytes(data[:program_size]))
    ranges: list[tuple[int, int]] = []
    for i, segment in enumerate(program.segments or []):
        start, end = base + segment.offset, base + segment.offset + segment.size
        if segment.size and (base == 0 or end > len(data)):
            where = ("the file has no extended header, so no segment data" if base == 0
                     else f"the file is {len(data)} bytes (file truncated?)")
            raise PteFormatError(
                f"Program.segments[{i}] (offset {segment.offset}, size {segment.size}) "
                f"ends at file byte {end} but {where}"
            )
        ranges.append((start, segment.size))
    check_program(program, num_segments=len(ranges))
    return PteLayout(len(data), header, program_size, base, program, ranges)


def _needed_bytes(program: ProgramT, *, mutable: bool) -> dict[int, tuple[int, str]]:
    """data_buffer_idx -> (largest nbytes a tensor reading it needs, which value that is)."""
    needed: dict[int, tuple[int, str]] = {}
    for plan in program.executionPlan or []:
        for v, evalue in enumerate(plan.values or []):
            tensor = evalue.val
            if evalue.valType != KernelTypes.Tensor or tensor is None or not tensor.dataBufferIdx:
                continue
            if (tensor.allocationInfo is not None) != mutable:
                continue
            info = tensor.extraTensorInfo
            if info is not None and info.location == TensorDataLocation.EXTERNAL:
                continue
            numel = 1
            for size in tensor.sizes if tensor.sizes is not None else []:
                numel *= int(size)
            nbytes = (max(tensor.storageOffset, 0) + numel) * element_size(tensor.scalarType)
            if nbytes >= needed.get(tensor.dataBufferIdx, (-1, ""))[0]:
                name = plan.name.decode("utf-8", "replace") if isinstance(plan.name, bytes) \
                    else plan.name
                needed[tensor.dataBufferIdx] = (nbytes, f"method {name!r} values[{v}]")
    return needed


def _split_subsegment(what: str, subsegment, blob: bytes,
                      needed: dict[int, tuple[int, str]]) -> list[bytes]:
    offsets = [int(o) for o in subsegment.offsets]
    entries = []
    for i, start in enumerate(offsets):
        end = offsets[i + 1] if i + 1 < len(offsets) else len(blob)
        if end > len(blob):
            raise PteFormatError(
                f"Program.{what}.offsets[{i + 1}] = {end} is past the end of its "
                f"{len(blob)}-byte segment"
            )
        entries.append(blob[start:end])
    return _trim(what, entries, needed)


def _trim(what: str, entries: list[bytes], needed: dict[int, tuple[int, str]]) -> list[bytes]:
    """Drop the zero padding after each entry's tensor bytes.

    Only an all-zero tail is cut: a writer may store a tensor's whole storage, which can be
    longer than the tensor, and those bytes are kept as they are.
    """
    for index, (nbytes, reader) in needed.items():
        if index >= len(entries):
            raise PteFormatError(
                f"{reader}: Tensor.data_buffer_idx {index} is out of range; {what} has "
                f"{len(entries)} entries"
            )
        if nbytes > len(entries[index]):
            raise PteFormatError(
                f"{what} entry {index} holds {len(entries[index])} bytes but the tensor at "
                f"{reader} needs {nbytes}"
            )
        if not any(entries[index][nbytes:]):
            entries[index] = entries[index][:nbytes]
    return entries


def deserialize_pte(data: bytes) -> PteContents:
    """Decode ``.pte`` bytes (ours or ExecuTorch's) into the contents ``serialize_pte`` takes.

    Constants may be inline (``Program.constant_buffer``) or in the constant segment;
    delegates inline or in segments. Constant entries are cut to the bytes their tensors use,
    so alignment padding is dropped. ``serialize_pte(deserialize_pte(x))`` re-creates ``x``
    when ``x`` was written with the same alignments.

    Raises:
        PteFormatError: the bytes are not a well-formed .pte this etkit reads; the message
            names the field or byte range, the value, and what was expected.
    """
    layout = read_layout(data)
    program = layout.program
    segments = [bytes(data[start:start + size]) for start, size in layout.segment_ranges]

    constant_segment = program.constantSegment
    has_segment_constants = (constant_segment is not None and constant_segment.offsets is not None
                             and len(constant_segment.offsets) > 0)
    inline_constants = program.constantBuffer or []
    if has_segment_constants and len(constant_segment.offsets) > 1 and len(inline_constants) > 0:
        raise PteFormatError(
            f"Program has {len(inline_constants)} constant_buffer entries and "
            f"{len(constant_segment.offsets)} constant_segment offsets; only one may be used"
        )
    needed = _needed_bytes(program, mutable=False)
    if has_segment_constants and not inline_constants:
        constant_data = _split_subsegment("constant_segment", constant_segment,
                                          segments[constant_segment.segmentIndex], needed)
    else:
        constant_data = _trim("constant_buffer",
                              [as_bytes(b.storage) for b in inline_constants], needed)

    mutable_data: list[bytes] = []
    mutable_segments = [s for s in program.mutableDataSegments or []
                        if s.offsets is not None and len(s.offsets) > 0]
    if len(mutable_segments) > 1:
        raise PteFormatError(
            f"Program.mutable_data_segments has {len(mutable_segments)} entries; this etkit "
            "reads at most 1"
        )
    if mutable_segments:
        mutable_data = _split_subsegment("mutable_data_segments[0]", mutable_segments[0],
                                         segments[mutable_segments[0].segmentIndex],
                                         _needed_bytes(program, mutable=True))

    delegate_data: list[bytes] = []
    index_of_source: dict[tuple[int, int], int] = {}
    inline = program.backendDelegateData or []
    for plan in program.executionPlan:
        for delegate in plan.delegates or []:
            source = (delegate.processed.location, delegate.processed.index)
            if source not in index_of_source:
                index_of_source[source] = len(delegate_data)
                if source[0] == DataLocation.INLINE:
                    delegate_data.append(as_bytes(inline[source[1]].data))
                else:
                    delegate_data.append(segments[source[1]])
            delegate.processed = BackendDelegateDataReferenceT(
                location=DataLocation.INLINE, index=index_of_source[source])

    named_data: dict[str, bytes] = {}
    for i, entry in enumerate(program.namedData or []):
        try:
            key = entry.key.decode("utf-8") if isinstance(entry.key, bytes) else entry.key
        except UnicodeDecodeError as error:
            raise PteFormatError(
                f"Program.named_data[{i}].key is not valid UTF-8 ({error.reason} at byte "
                f"{error.start}): {entry.key[:64]!r}") from None
        if key in named_data:
            raise PteFormatError(f"Program.named_data[{i}]: key {key!r} appears twice")
        named_data[key] = segments[entry.segmentIndex]

    program.constantBuffer = None
    program.backendDelegateData = None
    program.segments = None
    program.constantSegment = None
    program.mutableDataSegments = None
    program.namedData = None
    return PteContents(program=program, constant_data=constant_data,
                       delegate_data=delegate_data, named_data=named_data,
                       mutable_data=mutable_data)
