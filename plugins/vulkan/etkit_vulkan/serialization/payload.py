"""The Vulkan delegate payload's byte layout (ExecuTorch's Vulkan delegate layout, 1.5):

===========  ======  ===========================================================================
bytes        type    meaning
===========  ======  ===========================================================================
0..3         -       zero, so the magic sits where a flatbuffer's file identifier would
4..7         ascii   ``VH00``
8..9         u16 LE  header length: 30
10..13       u32 LE  offset of the VkGraph flatbuffer (the header padded to 16 bytes: 32)
14..17       u32 LE  size of the flatbuffer
18..21       u32 LE  offset of the raw-bytes region (16-byte aligned, after the flatbuffer)
22..29       u64 LE  size of the raw-bytes region
===========  ======  ===========================================================================

The flatbuffer is ``schema/vulkan_graph.fbs`` (identifier ``VK00``). etkit keeps constants in the
program's named data (``VkBytes.offset == UINT64_MAX``), so its raw-bytes region is empty; a payload
with constants in the region is read as well. ``runtime/src/payload.cpp`` is the C++ reader.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

MAGIC = b"VH00"
HEADER_LENGTH = 30
ALIGNMENT = 16
#: VkBytes.offset of a constant stored in the program's named data.
NAMED_DATA_OFFSET = 2 ** 64 - 1


class PayloadError(ValueError):
    """A Vulkan payload that cannot be read: the message says which field is wrong."""


def _pad(n: int) -> int:
    return (ALIGNMENT - n % ALIGNMENT) % ALIGNMENT


def pack(flatbuffer: bytes, raw: bytes = b"") -> bytes:
    """The payload for a VkGraph ``flatbuffer`` and its raw-bytes region ``raw``."""
    fb_offset = HEADER_LENGTH + _pad(HEADER_LENGTH)
    raw_offset = fb_offset + len(flatbuffer) + _pad(len(flatbuffer))
    header = (b"\x00" * 4 + MAGIC + struct.pack("<HIII", HEADER_LENGTH, fb_offset, len(flatbuffer), raw_offset)
              + struct.pack("<Q", len(raw)))
    assert len(header) == HEADER_LENGTH
    return (header + b"\x00" * _pad(HEADER_LENGTH) + flatbuffer + b"\x00" * _pad(len(flatbuffer)) + raw)


@dataclass(frozen=True)
class Payload:
    """A parsed payload: the flatbuffer's and the raw region's bytes."""

    flatbuffer: bytes
    raw: bytes


def unpack(data: bytes) -> Payload:
    """Splits a payload into its flatbuffer and raw region.

    Raises:
        PayloadError: the header is missing or points outside ``data``.
    """
    if len(data) < HEADER_LENGTH:
        raise PayloadError(f"payload is {len(data)} bytes, shorter than the {HEADER_LENGTH}-byte VH00 header")
    if data[4:8] != MAGIC:
        raise PayloadError(f"payload starts with {bytes(data[4:8])!r}, not the VH00 header magic")
    length, fb_off, fb_size, raw_off = struct.unpack_from("<HIII", data, 8)
    (raw_size,) = struct.unpack_from("<Q", data, 22)
    if length != HEADER_LENGTH:
        raise PayloadError(f"VH00 header length is {length}, expected {HEADER_LENGTH}")
    if fb_off < HEADER_LENGTH or fb_size == 0 or fb_off + fb_size > len(data):
        raise PayloadError(f"flatbuffer at [{fb_off}, {fb_off + fb_size}) is outside the {len(data)}-byte payload")
    if raw_off < fb_off + fb_size or raw_off + raw_size > len(data):
        raise PayloadError(f"raw bytes at [{raw_off}, {raw_off + raw_size}) are outside the {len(data)}-byte payload")
    return Payload(bytes(data[fb_off:fb_off + fb_size]), bytes(data[raw_off:raw_off + raw_size]))
