"""The XNNPACK delegate payload: ``XH00`` header + ``XN01`` flatbuffer graph + constant data.

Layout (little-endian), as ExecuTorch 1.5's XNNPACK backend writes it
(``executorch/backends/xnnpack/serialization/xnnpack_graph_serialize.py``)::

    offset 0   4 bytes   zero padding
           4   4 bytes   magic b"XH00"
           8   2 bytes   header length (30)
          10   4 bytes   flatbuffer offset (from the start of the payload)
          14   4 bytes   flatbuffer size
          18   4 bytes   constant-data offset (from the start of the payload)
          22   8 bytes   constant-data size
          30             zero padding up to 32 (16-byte alignment)
          32             flatbuffer (file identifier "XN01"), zero padded to a multiple of 16
                         constant data: each constant starts on a 16-byte boundary relative to the
                         section start; ``ConstantDataOffset.offset`` is relative to the section start.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

#: Magic at bytes 4..8 of every payload.
HEADER_MAGIC = b"XH00"
#: Meaningful bytes of the header (the rest up to :data:`CONSTANT_ALIGNMENT` is padding).
HEADER_LENGTH = 30
#: Flatbuffer file identifier of the graph (``file_identifier`` in ``schema/xnnpack_graph.fbs``).
FLATBUFFER_IDENTIFIER = b"XN01"
#: Alignment of the flatbuffer and of every constant (XNNPACK reads weights with aligned loads).
CONSTANT_ALIGNMENT = 16

_HEADER_STRUCT = struct.Struct("<4s4sHIIIQ")
assert _HEADER_STRUCT.size == HEADER_LENGTH


def aligned(size: int, alignment: int = CONSTANT_ALIGNMENT) -> int:
    """``size`` rounded up to a multiple of ``alignment``."""
    return (size + alignment - 1) // alignment * alignment


@dataclass(frozen=True)
class XnnHeader:
    """The ``XH00`` header: where the flatbuffer and the constant data are in a payload."""

    flatbuffer_offset: int
    flatbuffer_size: int
    constant_data_offset: int
    constant_data_size: int

    def to_bytes(self) -> bytes:
        """The 30 header bytes (without the padding to 32).

        Raises:
            ValueError: if the offsets are inconsistent (flatbuffer empty, or constants overlapping it).
        """
        if self.flatbuffer_size <= 0 or self.constant_data_offset < self.flatbuffer_offset + self.flatbuffer_size:
            raise ValueError(f"XnnHeader: inconsistent offsets {self}; the flatbuffer must be non-empty and the "
                             f"constant data must start after it")
        return _HEADER_STRUCT.pack(b"\0\0\0\0", HEADER_MAGIC, HEADER_LENGTH, self.flatbuffer_offset,
                                   self.flatbuffer_size, self.constant_data_offset, self.constant_data_size)

    @staticmethod
    def from_payload(payload: bytes) -> "XnnHeader":
        """Parse the header at the start of ``payload``.

        Raises:
            ValueError: if the payload is shorter than the header, the magic is not ``XH00`` or the
                stored header length is not 30.
        """
        if len(payload) < HEADER_LENGTH:
            raise ValueError(f"XNNPACK payload of {len(payload)} bytes is shorter than its {HEADER_LENGTH}-byte header")
        _, magic, length, fb_off, fb_size, cd_off, cd_size = _HEADER_STRUCT.unpack_from(payload, 0)
        if magic != HEADER_MAGIC:
            raise ValueError(f"XNNPACK payload: header magic is {magic!r}, expected {HEADER_MAGIC!r}")
        if length != HEADER_LENGTH:
            raise ValueError(f"XNNPACK payload: header length is {length}, expected {HEADER_LENGTH}")
        return XnnHeader(fb_off, fb_size, cd_off, cd_size)


def assemble_payload(flatbuffer: bytes, constant_data: bytes) -> bytes:
    """Join header, flatbuffer and constant data into one payload (layout in the module docstring).

    Args:
        flatbuffer: a finished ``XNNGraph`` flatbuffer with identifier ``XN01``.
        constant_data: the constant-data section (already 16-byte aligned internally).
    Returns:
        The payload bytes for ``PreprocessResult.processed_bytes``.
    """
    if flatbuffer[4:8] != FLATBUFFER_IDENTIFIER:
        raise ValueError(f"XNNGraph flatbuffer has identifier {flatbuffer[4:8]!r}, expected {FLATBUFFER_IDENTIFIER!r}")
    fb_offset = aligned(HEADER_LENGTH)
    fb_padded = aligned(len(flatbuffer))
    header = XnnHeader(fb_offset, len(flatbuffer), fb_offset + fb_padded, len(constant_data)).to_bytes()
    return b"".join([header.ljust(fb_offset, b"\0"), flatbuffer.ljust(fb_padded, b"\0"), constant_data])


def split_payload(payload: bytes) -> tuple[XnnHeader, bytes, bytes]:
    """Inverse of :func:`assemble_payload`: ``(header, flatbuffer bytes, constant-data bytes)``.

    Raises:
        ValueError: on a bad header or offsets pointing outside the payload.
    """
    header = XnnHeader.from_payload(payload)
    fb_end = header.flatbuffer_offset + header.flatbuffer_size
    cd_end = header.constant_data_offset + header.constant_data_size
    if fb_end > len(payload) or cd_end > len(payload):
        raise ValueError(f"XNNPACK payload of {len(payload)} bytes is truncated: header {header} points past its end")
    return (header, payload[header.flatbuffer_offset:fb_end], payload[header.constant_data_offset:cd_end])
