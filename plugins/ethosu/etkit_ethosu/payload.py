"""The Ethos-U delegate payload: Vela's compiled output as a ``vela_bin_stream`` (ExecuTorch's layout).

A sequence of blocks, each a 32-byte header ``struct "<16sIB11s"`` (name, NUL-padded ASCII; unpadded data
length; external flag; reserved zeros) followed by the data, zero-padded to a multiple of 16. The blocks
always come in this order: ``vela_bin_stream`` (empty), ``cmd_data`` (the command stream, starting ``COP1``),
``weight_data`` (region 0), ``scratch_size`` (uint32: bytes of region 1 the runtime provides), ``inputs`` and
``outputs`` (int32 count, then per tensor nine int32: 6-D shape, element size in bytes, byte offset, region),
``vela_end_stream`` (empty). All integers are little-endian. The bytes are identical to ExecuTorch 1.5.1's
``arm_vela.vela_compile`` for the same Vela output (docs/design/ethosu-route.md, section 2.5).

etkit adds one optional block, ``tosa_graph`` (the partition's TOSA 1.0 flatbuffer, for debugging), just
before the footer when the compile spec asks for it (``keep_tosa=True``). ExecuTorch's runtime refuses
unknown blocks, so such payloads run only on etkit's runtime.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Optional

_HEADER = struct.Struct("<16sIB11s")
_IO = struct.Struct("<9i")
#: Block names in their required order; ``tosa_graph`` is optional.
ORDER = ("vela_bin_stream", "cmd_data", "weight_data", "scratch_size", "inputs", "outputs", "tosa_graph",
         "vela_end_stream")
COMMAND_STREAM_MAGIC = b"COP1"


class PayloadError(ValueError):
    """The bytes are not a well-formed Ethos-U payload; the message says where and what."""


@dataclass(frozen=True)
class VelaIO:
    """One input or output of the compiled graph, where the NPU reads or writes it.

    Attributes:
        shape: 6-D shape, left-padded with 1s (the delegate's tensor in its own layout, NCHW for images).
        elem_size: bytes per element (1 for int8).
        offset: byte offset inside ``region``.
        region: Vela memory region (1 = scratch; inputs and outputs may share bytes of it).
    """

    shape: tuple
    elem_size: int
    offset: int
    region: int

    @property
    def nbytes(self) -> int:
        n = self.elem_size
        for d in self.shape:
            n *= d
        return n


@dataclass
class VelaPayload:
    """The decoded payload (see the module docstring).

    Attributes:
        cmd_data: the Ethos-U command stream.
        weight_data: encoded weights, biases and scales.
        scratch_size: bytes of scratch memory (region 1) the runtime must provide.
        inputs, outputs: :class:`VelaIO` in the delegate's argument order.
        tosa: the partition's TOSA flatbuffer when kept for debugging, else ``None``.
    """

    cmd_data: bytes
    weight_data: bytes
    scratch_size: int
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    tosa: Optional[bytes] = None


def _block(name: str, data: bytes) -> bytes:
    raw = name.encode("ascii")[:15]
    return _HEADER.pack(raw, len(data), 0, b"") + data + b"\0" * (-len(data) % 16)


def _io_block(ios) -> bytes:
    out = struct.pack("<i", len(ios))
    for io in ios:
        if len(io.shape) != 6:
            raise ValueError(f"Vela I/O shapes are 6-D, got {io.shape}")
        out += _IO.pack(*io.shape, io.elem_size, io.offset, io.region)
    return out


def pack(payload: VelaPayload) -> bytes:
    """The payload bytes for ``payload`` (deterministic; byte-identical to ExecuTorch's for the same parts)."""
    parts = [_block("vela_bin_stream", b""), _block("cmd_data", payload.cmd_data),
             _block("weight_data", payload.weight_data),
             _block("scratch_size", struct.pack("<I", payload.scratch_size)),
             _block("inputs", _io_block(payload.inputs)), _block("outputs", _io_block(payload.outputs))]
    if payload.tosa is not None:
        parts.append(_block("tosa_graph", payload.tosa))
    parts.append(_block("vela_end_stream", b""))
    return b"".join(parts)


def _read_ios(data: bytes, what: str) -> list:
    if len(data) < 4:
        raise PayloadError(f"block {what} is {len(data)} bytes; it needs at least the 4-byte count")
    (count,) = struct.unpack_from("<i", data, 0)
    if count < 0 or 4 + count * _IO.size != len(data):
        raise PayloadError(f"block {what} says {count} tensors but holds {len(data)} bytes "
                           f"(expected {4 + max(count, 0) * _IO.size})")
    ios = []
    for i in range(count):
        *shape, elem_size, offset, region = _IO.unpack_from(data, 4 + i * _IO.size)
        if any(d <= 0 for d in shape) or elem_size not in (1, 2, 4, 8) or offset < 0 or region < 0:
            raise PayloadError(f"{what}[{i}]: invalid shape {tuple(shape)}, element size {elem_size}, offset {offset} "
                               f"or region {region}")
        ios.append(VelaIO(tuple(shape), elem_size, offset, region))
    return ios


def unpack(data: bytes) -> VelaPayload:
    """Decode payload bytes.

    Raises:
        PayloadError: truncated data, a block out of order or unknown, bad padding, a command stream
            without the ``COP1`` magic, an external (named-data) block, or I/O records that do not add up.
    """
    data = bytes(data)
    blocks, at, expected = {}, 0, 0
    while True:
        if at + _HEADER.size > len(data):
            raise PayloadError(f"truncated payload: a block header at byte {at} needs {_HEADER.size} bytes, "
                               f"{len(data) - at} remain")
        raw, length, external, _ = _HEADER.unpack_from(data, at)
        name = raw.split(b"\0", 1)[0].decode("ascii", "replace")
        index = ORDER.index(name) if name in ORDER else -1
        optional_skipped = ORDER[expected] == "tosa_graph" and name == "vela_end_stream"
        if index != expected and not optional_skipped:
            what = "is not an Ethos-U block" if index < 0 else f"is out of order (expected {ORDER[expected]!r})"
            raise PayloadError(f"block {name!r} at byte {at} {what}")
        if external:
            raise PayloadError(f"block {name!r} is placed externally (named data); etkit writes inline blocks only")
        start, end = at + _HEADER.size, at + _HEADER.size + length
        padded = end + (-length % 16)
        if padded > len(data):
            raise PayloadError(f"truncated payload: block {name!r} needs {padded - start} bytes, {len(data) - start} "
                               f"remain")
        blocks[name] = data[start:end]
        at, expected = padded, index + 1
        if name == "vela_end_stream":
            break
    if at != len(data):
        raise PayloadError(f"{len(data) - at} bytes follow the vela_end_stream footer")
    if blocks["vela_bin_stream"] or blocks["vela_end_stream"]:
        raise PayloadError("the header and footer blocks must be empty")
    if not blocks["cmd_data"].startswith(COMMAND_STREAM_MAGIC):
        raise PayloadError(f"the command stream does not start with {COMMAND_STREAM_MAGIC!r}")
    if len(blocks["scratch_size"]) != 4:
        raise PayloadError(f"block scratch_size is {len(blocks['scratch_size'])} bytes, expected 4")
    (scratch,) = struct.unpack("<I", blocks["scratch_size"])
    payload = VelaPayload(blocks["cmd_data"], blocks["weight_data"], scratch, _read_ios(blocks["inputs"], "inputs"),
                          _read_ios(blocks["outputs"], "outputs"), blocks.get("tosa_graph"))
    for what, ios in (("inputs", payload.inputs), ("outputs", payload.outputs)):
        for i, io in enumerate(ios):
            if io.region == 1 and io.offset + io.nbytes > scratch:
                raise PayloadError(f"{what}[{i}]: {io.nbytes} bytes at offset {io.offset} do not fit in the "
                                   f"{scratch}-byte scratch region (region 1)")
    return payload
