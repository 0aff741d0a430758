"""Byte layout of written files: header fields, segment and tensor alignment, sharing."""

from __future__ import annotations

import pytest

from etkit.fb.Program import ProgramT
from etkit.serialize import PteContents, deserialize_pte, read_layout, serialize_pte
from etkit.serialize.program_flatbuffer import pack_program
from etkit.fb.Buffer import BufferT
from etkit.fb.BackendDelegateInlineData import BackendDelegateInlineDataT
from .sample_programs import make_contents, make_plan


def u32(data, at):
    return int.from_bytes(data[at:at + 4], "little")


def u64(data, at):
    return int.from_bytes(data[at:at + 8], "little")


@pytest.mark.parametrize("segment_alignment", [128, 4096])
def test_extended_header_fields_describe_the_file(segment_alignment):
    data = serialize_pte(make_contents(), segment_alignment=segment_alignment)
    assert data[4:8] == b"ET12" and data[8:12] == b"eh00"
    assert u32(data, 12) == 32
    program_size, base, segment_size = u64(data, 16), u64(data, 24), u64(data, 32)
    assert base == -(-program_size // segment_alignment) * segment_alignment
    assert base + segment_size == len(data)  # no padding after the last segment
    assert data[program_size:base] == bytes(base - program_size)
    assert 40 <= u32(data, 0) < program_size  # root table lies after the header


@pytest.mark.parametrize("segment_alignment", [128, 4096])
def test_segments_are_aligned_and_hold_the_blobs(segment_alignment):
    contents = make_contents()
    data = serialize_pte(contents, segment_alignment=segment_alignment)
    layout = read_layout(data)
    for start, _ in layout.segment_ranges:
        assert start % segment_alignment == 0
    blobs = [data[s:s + n] for s, n in layout.segment_ranges]
    program = layout.program
    assert blobs[program.constantSegment.segmentIndex][24:32] == bytes(8)  # tensor 1 padded
    for plan in program.executionPlan:
        delegate = plan.delegates[0]
        assert delegate.processed.location == 1  # SEGMENT
    assert blobs[program.executionPlan[0].delegates[0].processed.index] == b"delegate-blob" * 10
    assert blobs[program.executionPlan[1].delegates[0].processed.index] == b"second-blob"
    named = {e.key.decode(): blobs[e.segmentIndex] for e in program.namedData}
    assert named == contents.named_data


@pytest.mark.parametrize("tensor_alignment", [16, 64])
def test_constant_tensors_start_at_the_tensor_alignment(tensor_alignment):
    contents = make_contents()
    contents.constant_data = [b"", b"a" * 5, b"b" * 17, b"c" * 3]
    data = serialize_pte(contents, constant_tensor_alignment=tensor_alignment)
    program = read_layout(data).program
    offsets = list(program.constantSegment.offsets)
    padded_17 = -(-17 // tensor_alignment) * tensor_alignment
    assert offsets == [0, 0, tensor_alignment, tensor_alignment + padded_17]
    assert program.constantSegment.segmentIndex == 0 and program.constantBuffer == []


def test_larger_alignment_pads_the_header_to_keep_flatbuffer_alignment():
    contents = make_contents()
    plain = serialize_pte(contents)
    data = serialize_pte(contents, constant_tensor_alignment=64)
    assert data[40:8 + 64] == bytes(8 + 64 - 40)  # header padded to 64 bytes
    assert u32(data, 0) == u32(plain, 0) + 64 - 32  # root offset moved by the larger header
    assert deserialize_pte(data).constant_data == contents.constant_data


def test_identical_blobs_share_one_segment():
    contents = make_contents()
    contents.delegate_data = [b"same", b"same"]
    program = read_layout(serialize_pte(contents)).program
    a, b = (p.delegates[0].processed.index for p in program.executionPlan)
    assert a == b
    named = {e.key.decode(): e.segmentIndex for e in program.namedData}
    assert named["weights"] == named["same"] != named["small"]


def test_named_data_equal_to_a_constant_is_stored_once():
    contents = make_contents()
    table = bytes(range(256)) * 64
    contents.constant_data = [*contents.constant_data, table]
    contents.named_data = {"tied": table, "small": b"abc"}
    data = serialize_pte(contents)
    assert data.count(table) == 1
    layout = read_layout(data)
    program = layout.program
    start, size = layout.segment_ranges[{e.key.decode(): e.segmentIndex for e in program.namedData}["tied"]]
    constants_start, _ = layout.segment_ranges[program.constantSegment.segmentIndex]
    assert (start, size) == (constants_start + program.constantSegment.offsets[-1], len(table))
    back = deserialize_pte(data)
    assert back.named_data == contents.named_data and back.constant_data == contents.constant_data
    assert serialize_pte(back) == data  # a round trip keeps the sharing


def test_empty_delegate_blob_stays_inline():
    contents = make_contents()
    contents.delegate_data = [b"", b"x"]
    data = serialize_pte(contents)
    program = read_layout(data).program
    processed = program.executionPlan[0].delegates[0].processed
    assert (processed.location, processed.index) == (0, 0)
    assert deserialize_pte(data).delegate_data == [b"", b"x"]


def test_no_segment_data_means_no_extended_header():
    plan = make_plan()
    plan.delegates, plan.chains[0].instructions = [], plan.chains[0].instructions[:1]
    data = serialize_pte(PteContents(program=ProgramT(version=0, executionPlan=[plan]),
                                     constant_data=[b""]))
    assert data[8:12] != b"eh00"
    layout = read_layout(data)
    assert layout.header is None
    assert [(s.offset, s.size) for s in layout.program.segments] == [(0, 0)]


def test_inline_vectors_are_aligned_in_the_flatbuffer():
    # Files from older writers keep constants and delegate data inline, force_align 16.
    plan = make_plan()
    blobs = [b"", b"\x01" * 24, b"\x02" * 7]
    program = ProgramT(version=0, executionPlan=[plan],
                       constantBuffer=[BufferT(storage=b) for b in blobs],
                       backendDelegateData=[BackendDelegateInlineDataT(data=b"D" * 13),
                                            BackendDelegateInlineDataT(data=b"E" * 3)])
    data = pack_program(program, tensor_alignment=16, delegate_alignment=32)
    for needle in (b"\x01" * 24, b"\x02" * 7, b"E" * 3):
        position = data.find(needle)
        assert position % 16 == 0, needle
    assert data.find(b"D" * 13) % 32 == 0
    back = deserialize_pte(data)
    assert back.constant_data == blobs
    assert back.delegate_data == [b"D" * 13]


@pytest.mark.parametrize("kwargs", [{"segment_alignment": 100}, {"constant_tensor_alignment": 0},
                                    {"delegate_alignment": 24}])
def test_alignment_must_be_a_power_of_two(kwargs):
    with pytest.raises(ValueError, match="power of two"):
        serialize_pte(make_contents(), **kwargs)


def test_delegate_index_outside_delegate_data_is_refused():
    contents = make_contents()
    contents.delegate_data = contents.delegate_data[:1]
    with pytest.raises(ValueError, match=r"delegates\[0\].*processed.index 1"):
        serialize_pte(contents)


def test_unreferenced_delegate_data_is_refused():
    contents = make_contents()
    contents.delegate_data.append(b"orphan")
    with pytest.raises(ValueError, match=r"entries \[2\] are not referenced"):
        serialize_pte(contents)
