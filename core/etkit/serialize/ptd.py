"""Write and read ``.ptd`` data files: weights and backends' named data kept beside a ``.pte``.

The format is ExecuTorch 1.5.1's FlatTensor (schema/flat_tensor.fbs, file identifier ``FT01``; seed
page "Separating the program and data"; layout facts from ExecuTorch's
``extension/flat_tensor/serialize/serialize.py``)::

    [0..4)    uint32 offset of the flatbuffer root table
    [4..8)    file identifier "FT01"
    [8..56)   header: "FH01", uint32 length 40, uint64 flatbuffer_offset (48, the padded header's
              length), uint64 flatbuffer_size, uint64 segment_base_offset, uint64 segment_data_size
              (little-endian), zero-padded to 48 bytes
    ...       rest of the FlatTensor flatbuffer: [0, flatbuffer_offset + flatbuffer_size)
    padding   zeros up to segment_base_offset
    segments  FlatTensor.segments[i] at segment_base_offset + offset; the base and every offset are
              multiples of lcm(segment_alignment, every entry's alignment)

A ``.pte`` whose constants are EXTERNAL names them by fully qualified name (``linear.weight``); each
is a ``.ptd`` key with a :class:`TensorLayout`. A backend's named data (a delegate's weights)
are keys without a layout. Entries with identical bytes share one segment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional

import flatbuffers

from etkit.serialize.alignment import align_up, check_alignment
from etkit.serialize.errors import PteFormatError
from etkit.serialize.program_flatbuffer import _BoundsCheckedBytes, as_bytes

try:
    from etkit.fb.flat_tensor.DataSegment import DataSegmentT
    from etkit.fb.flat_tensor.FlatTensor import FlatTensorT
    from etkit.fb.flat_tensor.NamedData import NamedDataT
    from etkit.fb.flat_tensor.TensorLayout import TensorLayoutT
except ImportError as error:  # pragma: no cover - a broken install
    raise ImportError("etkit.fb.flat_tensor (Python code generated from schema/flat_tensor.fbs) is missing; "
                      "build and install etkit again (make install)") from error

FILE_IDENTIFIER = b"FT01"
HEADER_MAGIC = b"FH01"
HEADER_OFFSET = 8
HEADER_LENGTH = 40
#: the header padded to the flatbuffer's alignment: also the header's flatbuffer_offset
PADDED_HEADER_LENGTH = 48
#: FlatTensor.version written and read
VERSION = 0
#: ExecuTorch 1.5.1's FlatTensorConfig.segment_alignment
DEFAULT_SEGMENT_ALIGNMENT = 128


class PtdFormatError(PteFormatError):
    """Bytes that are not a well-formed ``.ptd`` data file; the message names the part at fault."""


@dataclass(frozen=True)
class TensorLayout:
    """Element type (``etkit.fb.ScalarType`` value), sizes and dim_order of a tensor entry."""

    scalar_type: int
    sizes: tuple
    dim_order: tuple


@dataclass(frozen=True)
class PtdEntry:
    """One key's bytes, their alignment in the file (bytes, a power of two) and, for a tensor, its layout."""

    data: bytes
    alignment: int = 16
    layout: Optional[TensorLayout] = None


def serialize_ptd(entries: Mapping[str, PtdEntry], *, segment_alignment: int = DEFAULT_SEGMENT_ALIGNMENT) -> bytes:
    """Encode ``{key: PtdEntry}`` as ``.ptd`` bytes that ExecuTorch 1.5.1's runtime loads.

    Keys keep their order. The same entries always give the same bytes.

    Raises:
        ValueError: an alignment is not a power of two, or a key is empty.
    """
    check_alignment("segment_alignment", segment_alignment)
    for key, entry in entries.items():
        check_alignment(f"alignment of {key!r}", entry.alignment)
    # offsets are relative to segment_base_offset, which must then be aligned as strictly as any entry
    segment_alignment = math.lcm(segment_alignment, *(e.alignment for e in entries.values()))
    segments: list[DataSegmentT] = []
    parts: list[bytes] = []
    segment_of: dict[tuple, int] = {}
    named: list[NamedDataT] = []
    end = 0
    for key, entry in entries.items():
        if not key:
            raise ValueError("serialize_ptd: an entry has an empty key")
        data = bytes(entry.data)
        if (data, entry.alignment) not in segment_of:
            start = align_up(end, segment_alignment)
            parts.append(b"\x00" * (start - end))
            parts.append(data)
            end = start + len(data)
            segment_of[data, entry.alignment] = len(segments)
            segments.append(DataSegmentT())
            segments[-1].offset, segments[-1].size = start, len(data)
        item = NamedDataT()
        item.key, item.segmentIndex = key, segment_of[data, entry.alignment]
        if entry.layout is not None:
            item.tensorLayout = TensorLayoutT()
            item.tensorLayout.scalarType = int(entry.layout.scalar_type)
            item.tensorLayout.sizes = [int(s) for s in entry.layout.sizes]
            item.tensorLayout.dimOrder = [int(d) for d in entry.layout.dim_order]
        named.append(item)

    root = FlatTensorT()
    root.version, root.segments, root.namedData = VERSION, segments, named
    builder = flatbuffers.Builder(1024)
    builder.Finish(root.Pack(builder), file_identifier=FILE_IDENTIFIER)
    flatbuffer = bytes(builder.Output())

    segment_base_offset = align_up(len(flatbuffer) + PADDED_HEADER_LENGTH, segment_alignment)
    header = b"".join([
        HEADER_MAGIC,
        HEADER_LENGTH.to_bytes(4, "little"),
        PADDED_HEADER_LENGTH.to_bytes(8, "little"),
        len(flatbuffer).to_bytes(8, "little"),
        segment_base_offset.to_bytes(8, "little"),
        end.to_bytes(8, "little"),
    ])
    root_offset = int.from_bytes(flatbuffer[0:4], "little") + PADDED_HEADER_LENGTH
    head = b"".join([root_offset.to_bytes(4, "little"), flatbuffer[4:8],
                     header.ljust(PADDED_HEADER_LENGTH, b"\x00"), flatbuffer[8:]])
    return b"".join([head, b"\x00" * (segment_base_offset - len(head)), *parts])


def is_ptd(data: bytes) -> bool:
    """True when ``data`` carries the ``.ptd`` file identifier at bytes 4..8."""
    return len(data) >= 8 and bytes(data[4:8]) == FILE_IDENTIFIER


def deserialize_ptd(data: bytes) -> dict[str, PtdEntry]:
    """Decode ``.ptd`` bytes into ``{key: PtdEntry}`` (alignment is not kept: entries say 1).

    Raises:
        PtdFormatError: not a ``.ptd``, another version, truncated or corrupted; the message names the part.
    """
    data = bytes(data)
    if len(data) < HEADER_OFFSET + HEADER_LENGTH:
        raise PtdFormatError(f"data file is {len(data)} bytes, too short to be a .ptd")
    if not is_ptd(data):
        raise PtdFormatError(f"not a .ptd data file: file identifier is {data[4:8]!r}, expected {FILE_IDENTIFIER!r}")
    h = data[HEADER_OFFSET:HEADER_OFFSET + HEADER_LENGTH]
    if h[0:4] != HEADER_MAGIC or int.from_bytes(h[4:8], "little") < HEADER_LENGTH:
        raise PtdFormatError(f"header at byte 8 is not an {HEADER_MAGIC!r} header of at least {HEADER_LENGTH} bytes")
    fb_offset, fb_size, base, data_size = (int.from_bytes(h[i:i + 8], "little") for i in (8, 16, 24, 32))
    fb_end = fb_offset + fb_size
    if not HEADER_OFFSET + HEADER_LENGTH <= fb_end <= len(data):
        raise PtdFormatError(f"header: the index spans {fb_offset} + {fb_size} bytes but the file has {len(data)}")
    if not fb_end <= base <= len(data) or data_size > len(data) - base:
        raise PtdFormatError(f"header: {data_size} bytes of data from offset {base} do not fit the {len(data)}-byte "
                             f"file (the index ends at {fb_end})")
    try:
        root = FlatTensorT.InitFromPackedBuf(_BoundsCheckedBytes(data[:fb_end]), 0)
    except Exception as error:  # the generated decoder raises struct/Index/Value errors
        raise PtdFormatError(f"index flatbuffer is corrupt: {type(error).__name__}: {error}") from None
    if root.version > VERSION:
        raise PtdFormatError(f"FlatTensor version {root.version}; this etkit reads version {VERSION}")
    segments = root.segments or []
    for i, s in enumerate(segments):
        if s.offset + s.size > data_size:
            raise PtdFormatError(f"segment {i} ({s.size} bytes at offset {s.offset}) is outside the "
                                 f"{data_size} bytes of data")
    out: dict[str, PtdEntry] = {}
    for i, item in enumerate(root.namedData or []):
        key = item.key.decode() if isinstance(item.key, bytes) else item.key
        if not key or not 0 <= item.segmentIndex < len(segments):
            raise PtdFormatError(f"named_data[{i}] ({key!r}): no key, or segment index {item.segmentIndex} out of "
                                 f"range ({len(segments)} segments)")
        s = segments[item.segmentIndex]
        layout = None
        if item.tensorLayout is not None:
            t = item.tensorLayout
            layout = TensorLayout(int(t.scalarType), tuple(int(x) for x in (t.sizes if t.sizes is not None else [])),
                                  tuple(int(x) for x in as_bytes(t.dimOrder)))
        out[key] = PtdEntry(data[base + s.offset:base + s.offset + s.size], 1, layout)
    return out


def format_ptd(data: bytes) -> str:
    """A ``.ptd`` as ``etkit inspect`` prints it: one line per key with its layout (or "bytes") and size.

    Raises:
        PtdFormatError: as :func:`deserialize_ptd`.
    """
    from etkit.scalar_types import scalar_type_name

    entries = deserialize_ptd(data)
    total = sum(len(e.data) for e in entries.values())
    lines = [f".ptd data file <bytes>: {len(data)} bytes, FlatTensor version {VERSION}, {len(entries)} keys, "
             f"{total} bytes of data"]
    for key, entry in entries.items():
        if entry.layout is not None:
            what = f"Tensor {scalar_type_name(entry.layout.scalar_type)}{list(entry.layout.sizes)}"
            if list(entry.layout.dim_order) != list(range(len(entry.layout.sizes))):
                what += f" dim_order={list(entry.layout.dim_order)}"
        else:
            what = "bytes"
        lines.append(f"  {key}: {what}, {len(entry.data)} bytes")
    return "\n".join(lines) + "\n"
