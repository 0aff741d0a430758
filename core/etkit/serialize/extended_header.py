"""The ``eh00`` extended header of a .pte file.

Layout (seed page ".pte file format"; all numbers little-endian), starting at byte 8, right after
the flatbuffer's root offset (bytes 0..4) and file identifier (bytes 4..8):

====== ====== ===========================================================================
offset size   field
====== ====== ===========================================================================
8      4      magic ``eh00``
12     4      uint32 header length in bytes (32 when written; readers accept >= 24)
16     8      uint64 program_size: bytes of flatbuffer data from file offset 0, header included
24     8      uint64 segment_base_offset: file offset of the first segment (0: no segments)
32     8      uint64 segment_data_size: bytes from segment_base_offset to the end of the last
              segment (present when length >= 32)
====== ====== ===========================================================================

The writer pads the header with zeros to the flatbuffer's largest ``force_align`` so that
inserting it keeps the flatbuffer's internal alignment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from etkit.serialize.errors import PteFormatError

HEADER_OFFSET = 8
MAGIC = b"eh00"
# magic + length + program_size + segment_base_offset: the fields every version has.
MINIMUM_LENGTH = 4 + 4 + 8 + 8
# ... + segment_data_size: what this writer emits.
LENGTH = MINIMUM_LENGTH + 8

_ANY_VERSION = re.compile(rb"eh[0-9]{2}")


@dataclass(frozen=True)
class ExtendedHeader:
    """Decoded ``eh00`` fields. ``segment_data_size`` is 0 when the header is too short to hold it."""

    program_size: int
    segment_base_offset: int
    segment_data_size: int
    length: int = LENGTH

    def to_bytes(self) -> bytes:
        """The 32 header bytes (unpadded), always with magic ``eh00`` and length 32."""
        return (
            MAGIC
            + LENGTH.to_bytes(4, "little")
            + self.program_size.to_bytes(8, "little")
            + self.segment_base_offset.to_bytes(8, "little")
            + self.segment_data_size.to_bytes(8, "little")
        )


def read_extended_header(data: bytes) -> ExtendedHeader | None:
    """Decode the extended header of a whole .pte file held in ``data``.

    Returns None when bytes 8..12 hold no ``eh`` magic (a file without segments).

    Raises:
        PteFormatError: the magic names another header version, the header is cut off, or its
            length field is smaller than the 24 bytes every version has.
    """
    magic = bytes(data[HEADER_OFFSET : HEADER_OFFSET + 4])
    if not _ANY_VERSION.fullmatch(magic):
        return None
    if magic != MAGIC:
        raise PteFormatError(
            f"extended header at byte 8: version {magic.decode()!r} is not supported "
            f"(this etkit reads {MAGIC.decode()!r}); the file was written by a newer tool"
        )
    end = HEADER_OFFSET + MINIMUM_LENGTH
    if len(data) < end:
        raise PteFormatError(
            f"extended header at byte 8: file is {len(data)} bytes, the header needs bytes "
            f"8..{end} (file truncated?)"
        )
    length = int.from_bytes(data[12:16], "little")
    if length < MINIMUM_LENGTH:
        raise PteFormatError(
            f"extended header at byte 8: length field {length} < minimum {MINIMUM_LENGTH}"
        )
    if len(data) < HEADER_OFFSET + min(length, LENGTH):
        raise PteFormatError(
            f"extended header at byte 8: length {length} runs past the end of the "
            f"{len(data)}-byte file (file truncated?)"
        )
    program_size = int.from_bytes(data[16:24], "little")
    segment_base_offset = int.from_bytes(data[24:32], "little")
    segment_data_size = int.from_bytes(data[32:40], "little") if length >= LENGTH else 0
    return ExtendedHeader(program_size, segment_base_offset, segment_data_size, length)
