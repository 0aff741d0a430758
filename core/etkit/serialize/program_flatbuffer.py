"""Pack and unpack the ``Program`` flatbuffer (schema/program.fbs) with the generated object API.

The Python code flatc generates ignores ``force_align``, so the two aligned byte vectors of the
schema (``Buffer.storage`` and ``BackendDelegateInlineData.data``, ``force_align: 16``) are packed
here with the requested alignment. Alignment is relative to the end of the flatbuffer, and the
builder pads the whole buffer to the largest alignment used, so it holds from byte 0 as well.
"""

from __future__ import annotations

import copy

import flatbuffers

try:
    from etkit.fb import BackendDelegateInlineData as _inline_data_fb
    from etkit.fb import Buffer as _buffer_fb
    from etkit.fb.BackendDelegateInlineData import BackendDelegateInlineDataT
    from etkit.fb.Buffer import BufferT
    from etkit.fb.Program import ProgramT
except ImportError as error:  # pragma: no cover - only without a build
    raise ImportError(
        "etkit.fb (Python code generated from schema/program.fbs) is missing; build and install "
        "etkit (`pip install -e .` in the repository root) so flatc generates it"
    ) from error

from etkit.serialize.errors import PteFormatError

FILE_IDENTIFIER = b"ET12"
# The force_align the schema gives constant tensor data and inline delegate data.
SCHEMA_ALIGNMENT = 16


def _aligned_byte_vector(builder: flatbuffers.Builder, data: bytes, alignment: int) -> int:
    builder.StartVector(1, len(data), alignment)
    builder.head = builder.Head() - len(data)
    builder.Bytes[builder.Head() : builder.Head() + len(data)] = data
    return builder.EndVector()


class _AlignedBufferT(BufferT):
    def __init__(self, storage: bytes, alignment: int):
        super().__init__()
        self.storage = storage
        self.alignment = alignment

    def Pack(self, builder):  # noqa: N802 - generated-code protocol
        vector = _aligned_byte_vector(builder, self.storage, self.alignment)
        _buffer_fb.BufferStart(builder)
        _buffer_fb.BufferAddStorage(builder, vector)
        return _buffer_fb.BufferEnd(builder)


class _AlignedInlineDataT(BackendDelegateInlineDataT):
    def __init__(self, data: bytes, alignment: int):
        super().__init__()
        self.data = data
        self.alignment = alignment

    def Pack(self, builder):  # noqa: N802 - generated-code protocol
        vector = _aligned_byte_vector(builder, self.data, self.alignment)
        _inline_data_fb.BackendDelegateInlineDataStart(builder)
        _inline_data_fb.BackendDelegateInlineDataAddData(builder, vector)
        return _inline_data_fb.BackendDelegateInlineDataEnd(builder)


def as_bytes(value) -> bytes:
    """A ``[ubyte]`` field as unpacked (numpy array, list, bytes or None) -> bytes."""
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    tobytes = getattr(value, "tobytes", None)
    if tobytes is not None:
        return tobytes()
    return bytes(value)


def pack_program(program: ProgramT, *, tensor_alignment: int, delegate_alignment: int) -> bytes:
    """Serialize ``program`` to flatbuffer bytes with file identifier ``ET12``.

    ``constantBuffer[i].storage`` is aligned to ``tensor_alignment`` and
    ``backendDelegateData[i].data`` to ``delegate_alignment`` (both powers of two). The result's
    length is a multiple of the largest alignment used, and identical inputs give identical bytes.
    """
    program = copy.copy(program)
    if program.constantBuffer is not None:
        program.constantBuffer = [
            _AlignedBufferT(as_bytes(b.storage), tensor_alignment) for b in program.constantBuffer
        ]
    if program.backendDelegateData is not None:
        program.backendDelegateData = [
            _AlignedInlineDataT(as_bytes(d.data), delegate_alignment)
            for d in program.backendDelegateData
        ]
    builder = flatbuffers.Builder(1024)
    builder.Finish(program.Pack(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


class _BoundsCheckedBytes(bytes):
    """bytes whose slices may not run past the end.

    The generated decoder slices strings out of the buffer; plain bytes would silently return a
    short string for a truncated or corrupt file.
    """

    def __getitem__(self, key):
        if isinstance(key, slice) and key.stop is not None and key.stop > len(self):
            raise IndexError(f"bytes {key.start}..{key.stop} are past the end ({len(self)})")
        return super().__getitem__(key)


def unpack_program(data: bytes) -> ProgramT:
    """Decode flatbuffer bytes (``data`` ends where the program data ends) into a ``ProgramT``.

    Raises:
        PteFormatError: the root offset points outside ``data`` or decoding fails (corrupt
            offsets); the message gives the byte range and the decoder's complaint.
    """
    if len(data) < 8:
        raise PteFormatError(f"program flatbuffer is {len(data)} bytes, needs at least 8")
    if len(data) % 4:
        raise PteFormatError(
            f"program flatbuffer is {len(data)} bytes, not a multiple of 4 as every flatbuffer "
            "is (file truncated?)"
        )
    root = int.from_bytes(data[0:4], "little")
    if not 8 <= root <= len(data) - 4:
        raise PteFormatError(
            f"flatbuffer root table offset {root} (bytes 0..4) is outside the program data "
            f"[8, {len(data)}): the file is corrupt or truncated"
        )
    try:
        return ProgramT.InitFromPackedBuf(_BoundsCheckedBytes(data), 0)
    except Exception as error:  # the generated decoder raises struct/Index/Value errors
        raise PteFormatError(
            f"program flatbuffer (bytes 0..{len(data)}) is corrupt: "
            f"{type(error).__name__}: {error}"
        ) from None
