"""serialize_pte / deserialize_pte are inverses and deterministic."""

from __future__ import annotations

import copy

from etkit.serialize import PteContents, deserialize_pte, serialize_pte
from etkit.fb.Program import ProgramT
from .sample_programs import make_contents, make_plan
from .structure import as_plain, plans


def test_write_then_read_gives_the_same_methods_and_data():
    contents = make_contents()
    back = deserialize_pte(serialize_pte(contents))
    assert plans(back.program) == plans(contents.program)
    assert back.program.version == 0
    assert back.constant_data == contents.constant_data
    assert back.delegate_data == contents.delegate_data
    assert back.named_data == contents.named_data


def test_read_points_each_delegate_at_its_own_blob():
    back = deserialize_pte(serialize_pte(make_contents()))
    forward, other = back.program.executionPlan
    assert back.delegate_data[forward.delegates[0].processed.index] == b"delegate-blob" * 10
    assert back.delegate_data[other.delegates[0].processed.index] == b"second-blob"


def test_read_leaves_the_serializer_owned_fields_empty():
    program = deserialize_pte(serialize_pte(make_contents())).program
    assert program.constantBuffer is None and program.backendDelegateData is None
    assert program.segments is None and program.constantSegment is None
    assert program.namedData is None and program.mutableDataSegments is None


def test_same_contents_give_identical_bytes():
    assert serialize_pte(make_contents()) == serialize_pte(make_contents())


def test_rewriting_a_read_file_gives_identical_bytes():
    for alignment in (128, 4096):
        data = serialize_pte(make_contents(), segment_alignment=alignment)
        assert serialize_pte(deserialize_pte(data), segment_alignment=alignment) == data


def test_serialize_does_not_modify_its_input():
    contents = make_contents()
    before = as_plain(contents.program), copy.deepcopy(contents.delegate_data)
    serialize_pte(contents)
    assert (as_plain(contents.program), contents.delegate_data) == before


def test_mutable_data_round_trips():
    contents = make_contents()
    contents.mutable_data = [b"", b"\x11" * 24]
    plan = contents.program.executionPlan[0]
    plan.values[3].val.dataBufferIdx = 1  # planned tensor with initial data
    back = deserialize_pte(serialize_pte(contents))
    assert back.mutable_data == contents.mutable_data


def test_program_without_any_data_round_trips():
    plan = make_plan()
    plan.delegates = []
    plan.chains[0].instructions = plan.chains[0].instructions[:1]
    for v in plan.values:
        if v.valType == 5:
            v.val.dataBufferIdx = 0
    contents = PteContents(program=ProgramT(version=0, executionPlan=[plan]))
    back = deserialize_pte(serialize_pte(contents))
    assert plans(back.program) == plans(contents.program)
    assert (back.constant_data, back.delegate_data, back.named_data) == ([], [], {})
