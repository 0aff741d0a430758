"""Malformed input raises PteFormatError with a message naming the field and value."""

from __future__ import annotations

import random

import pytest

from etkit.fb.BackendDelegateInlineData import BackendDelegateInlineDataT
from etkit.fb.Program import ProgramT
from etkit.serialize import PteFormatError, deserialize_pte, read_layout, serialize_pte
from etkit.serialize.program_flatbuffer import pack_program
from .sample_programs import make_contents, make_plan


@pytest.fixture(scope="module")
def pte() -> bytes:
    return serialize_pte(make_contents(), segment_alignment=128)


def patched(data: bytes, at: int, new: bytes) -> bytes:
    return data[:at] + new + data[at + len(new):]


def test_every_truncation_is_reported(pte):
    lengths = list(range(0, 200)) + list(range(200, len(pte), 37)) + [len(pte) - 1]
    for n in lengths:
        with pytest.raises(PteFormatError):
            deserialize_pte(pte[:n])


def test_truncation_names_the_header_field(pte):
    with pytest.raises(PteFormatError, match=r"segment data ends at .* file is \d+ bytes"):
        deserialize_pte(pte[:-1])
    with pytest.raises(PteFormatError, match="program_size"):
        deserialize_pte(pte[:100])


def test_segment_past_the_end_names_the_segment(pte):
    header_size = int.from_bytes(pte[32:40], "little")
    short = patched(pte[:-1], 32, (header_size - 1).to_bytes(8, "little"))
    with pytest.raises(PteFormatError, match=r"Program.segments\[\d\] .* ends at file byte"):
        deserialize_pte(short)


def test_not_a_pte_names_the_identifier_bytes():
    with pytest.raises(PteFormatError, match=r"not a .pte program: bytes 4..8 are b'PK\\x03\\x04'"):
        deserialize_pte(b"\x00\x00\x00\x00PK\x03\x04" + bytes(64))
    with pytest.raises(PteFormatError, match="not a .pte program: 3 bytes"):
        deserialize_pte(b"abc")


def test_other_format_version_is_named(pte):
    with pytest.raises(PteFormatError, match="file identifier 'ET13'.*reads 'ET12'"):
        deserialize_pte(patched(pte, 4, b"ET13"))


def test_unknown_extended_header_version_is_named(pte):
    with pytest.raises(PteFormatError, match="version 'eh01' is not supported"):
        deserialize_pte(patched(pte, 8, b"eh01"))


def test_too_short_extended_header_length_is_named(pte):
    with pytest.raises(PteFormatError, match="length field 16 < minimum 24"):
        deserialize_pte(patched(pte, 12, (16).to_bytes(4, "little")))


def test_newer_program_version_is_named():
    data = pack_program(ProgramT(version=7, executionPlan=[make_plan()]),
                        tensor_alignment=16, delegate_alignment=16)
    with pytest.raises(PteFormatError, match="Program.version is 7; this etkit reads version 0"):
        deserialize_pte(data)


def _program_with(mutate) -> bytes:
    plan = make_plan()
    mutate(plan)
    inline = [BackendDelegateInlineDataT(data=b"blob")]
    return pack_program(ProgramT(version=0, executionPlan=[plan], backendDelegateData=inline),
                        tensor_alignment=16, delegate_alignment=16)


@pytest.mark.parametrize("mutate, message", [
    (lambda p: setattr(p.chains[0].instructions[0].instrArgs, "opIndex", 17),
     r"instructions\[0\]: KernelCall.op_index = 17 is out of range; the operators table "
     r"has 1 entries"),
    (lambda p: setattr(p.chains[0].instructions[0].instrArgs, "args", [0, 99]),
     r"KernelCall.args\[1\] = 99 is out of range; the values table has 13"),
    (lambda p: setattr(p, "outputs", [40]), r"'forward'\): outputs\[0\] = 40"),
    (lambda p: setattr(p.delegates[0].processed, "location", 5),
     r"delegates\[0\].processed.location 5"),
    (lambda p: setattr(p.delegates[0].processed, "index", 3),
     r"delegates\[0\] \('TestBackend'\) processed.index 3 >= len\(Program.backend_delegate_data\) 1"),
    (lambda p: setattr(p.values[0].val, "scalarType", 99), r"Tensor.scalar_type 99"),
])
def test_dangling_index_is_named(mutate, message):
    with pytest.raises(PteFormatError, match=message):
        deserialize_pte(_program_with(mutate))


def test_constant_smaller_than_its_tensor_is_reported():
    contents = make_contents()
    contents.constant_data[1] = b"\x00" * 20  # tensor 1 is float32[2, 3]: 24 bytes
    contents.constant_data[2] = b""  # last entry: no padding after it
    with pytest.raises(PteFormatError, match=r"constant_segment entry 2 holds 0 bytes but the "
                                             r"tensor at method 'other' values\[4\] needs 7"):
        deserialize_pte(serialize_pte(contents))


def test_constant_index_past_the_constants_is_reported():
    contents = make_contents()
    contents.constant_data = contents.constant_data[:2]
    with pytest.raises(PteFormatError, match=r"method 'other' values\[4\]: Tensor.data_buffer_idx 2 "
                                             r"is out of range; constant_segment has 2 entries"):
        deserialize_pte(serialize_pte(contents))


def test_bit_flips_give_a_program_or_a_format_error(pte):
    program_size = int.from_bytes(pte[16:24], "little")
    rng = random.Random(1234)
    errors = 0
    for _ in range(400):
        data = bytearray(pte)
        data[rng.randrange(program_size)] ^= 1 << rng.randrange(8)
        try:
            deserialize_pte(bytes(data))
        except PteFormatError:
            errors += 1
    assert errors > 50  # most flips of offsets and indices are caught


def test_read_layout_accepts_bytearray_and_memoryview(pte):
    assert read_layout(bytearray(pte)).program_size == read_layout(memoryview(pte)).program_size
