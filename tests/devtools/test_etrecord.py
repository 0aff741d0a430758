"""ETRecord: debug handles kept through lowering and emission, the record written and read, and the
Inspector mapping ETDump events back to the Edge nodes and the eager module hierarchy.

The lowered program is also compared with torch eager on the same inputs (|d| <= 1e-4: XNNPACK's sums run
in another order).
"""
from __future__ import annotations

import random

import pytest
import torch

import etkit
from etkit.devtools import Inspector
from etkit.devtools.etrecord import ETRecordError, generate_etrecord, parse_etrecord
from etkit.runtime import Runtime

from .models import ConvHeadTail as Net

pytest.importorskip("etkit_xnnpack")


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    """Conv, relu and linear on XNNPACK; the cumsum (module ``tail``) and the sum on portable kernels."""
    from etkit_xnnpack import XnnpackPartitioner

    model = Net().eval()
    x = torch.randn(1, 3, 8, 8)
    ep = torch.export.export(model, (x,))
    partitioner = XnnpackPartitioner()
    edge = etkit.to_edge_transform_and_lower(ep, partitioner=[partitioner], generate_etrecord=True)
    program = edge.to_executorch()
    directory = tmp_path_factory.mktemp("etrecord")
    (directory / "model.pte").write_bytes(program.buffer)
    program.get_etrecord().save(directory / "model.etrecord")
    loaded = Runtime.get().load_program(directory / "model.pte", enable_etdump=True)
    method = loaded.load_method("forward")
    for _ in range(2):
        outputs = method.execute([x])
    with torch.no_grad():
        for got, want in zip(outputs, model(x)):
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    loaded.write_etdump_result_to_file(directory / "model.etdp")
    return directory, edge, program


def test_debug_handles_reach_every_instruction(lowered):
    _, edge, program = lowered
    handles = program.debug_handle_map["forward"]
    delegates = program.delegate_map["forward"]
    assert delegates, "the model has a delegate call"
    record = program.get_etrecord()
    nodes = record._node_tables["forward"]
    # every Edge operator node has a distinct handle, and every instruction maps to nodes of the record
    assert sorted(nodes) == list(range(1, len(nodes) + 1))
    for index, value in handles.items():
        for h in ([value] if isinstance(value, int) else value):
            assert h in nodes, (index, h)
    # the delegate call maps to its partition: the convolution is in it, the sin is not
    (delegate_index,) = delegates
    partition = {nodes[h].target for h in handles[delegate_index]}
    assert "aten.convolution.default" in partition and "aten.cumsum.default" not in partition
    assert delegates[delegate_index]["name"] == "XnnpackBackend"


def test_inspector_maps_events_to_nodes_and_modules(lowered):
    directory, _, _ = lowered
    inspector = Inspector(etdump_path=directory / "model.etdp", etrecord=directory / "model.etrecord")
    execute = inspector.event_blocks[-1]
    by_name = {}
    for event in execute.events:
        by_name.setdefault(event.name, []).append(event)
    (call,) = by_name["DELEGATE_CALL"]
    assert call.delegate_backend_name == "XnnpackBackend"
    assert "aten.convolution.default" in call.op_types
    operator_types = {t for e in by_name["OPERATOR_CALL"] for t in e.op_types}
    assert "aten.cumsum.default" in operator_types
    cumsum = [e for e in execute.events if e.name.startswith("native_call_cumsum")]
    assert cumsum and any("torch.cumsum" in (t or "") for t in cumsum[0].stack_traces.values())
    # module "tail": its kernel's time, found through the module hierarchy of its node
    tail = [e for e in execute.events if e.name != "OPERATOR_CALL" and any(
        h and any("tail" in key for key in h) for h in e.module_hierarchy.values())]
    assert [e.name for e in tail] == [cumsum[0].name]
    assert inspector.find_total_for_module("tail") == pytest.approx(cumsum[0].perf_data.avg)
    # module "head" ran inside the delegate call: the XNNPACK operators that map to its nodes count for it
    # (the delegate call itself is not counted on top of them)
    inside = [e for e in execute.events if e.is_delegated_op]
    assert inside and all(e.debug_handles for e in inside)
    in_head = [e for e in inside if any(h and any("head" in key for key in h) for h in e.module_hierarchy.values())]
    assert in_head and inspector.find_total_for_module("head") == pytest.approx(sum(e.perf_data.avg for e in in_head))
    assert inspector.find_total_for_module("head") <= call.perf_data.avg
    assert inspector.find_total_for_module("no_such_module") == 0.0
    assert "aten.convolution.default" in str(inspector.get_exported_program().graph)


def test_generate_etrecord_function_and_missing_record(lowered, tmp_path):
    _, edge, program = lowered
    path = tmp_path / "again.etrecord"
    generate_etrecord(path, edge, program)
    record = parse_etrecord(path)
    assert record._debug_handle_map == {"forward": {str(k): v for k, v in program.debug_handle_map["forward"].items()}}
    plain = etkit.to_edge(torch.export.export(Net().eval(), (torch.randn(1, 3, 8, 8),))).to_executorch()
    with pytest.raises(RuntimeError, match="generate_etrecord=True"):
        plain.get_etrecord()
    from etkit_xnnpack import XnnpackPartitioner

    already = etkit.to_edge(torch.export.export(Net().eval(), (torch.randn(1, 3, 8, 8),))).to_backend(
        XnnpackPartitioner())
    with pytest.raises(ETRecordError, match="already lowered"):
        generate_etrecord(tmp_path / "late.etrecord", already, already.to_executorch())
    with pytest.raises(ValueError, match="needs the module hierarchy of an ETRecord"):
        Inspector(etdump_path=lowered[0] / "model.etdp").find_total_for_module("head")


def test_etrecord_of_another_program_is_refused(lowered, tmp_path):
    directory, _, _ = lowered
    other = etkit.to_edge(torch.export.export(Net().eval(), (torch.randn(1, 3, 8, 8),)), generate_etrecord=True)
    other.to_executorch().get_etrecord().save(tmp_path / "other.etrecord")
    with pytest.raises(ETRecordError, match="not of this program"):
        Inspector(etdump_path=directory / "model.etdp", etrecord=tmp_path / "other.etrecord")


def test_corrupted_etrecords_raise_precise_errors(lowered, tmp_path):
    directory, _, _ = lowered
    data = (directory / "model.etrecord").read_bytes()
    with pytest.raises(ETRecordError, match="not a readable zip"):
        parse_etrecord(data[: len(data) // 2])
    with pytest.raises(ETRecordError, match="not a readable zip"):
        parse_etrecord(b"not a zip at all")
    rng = random.Random(3)
    outcomes = {"read": 0, "refused": 0}
    for _ in range(60):
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        try:
            parse_etrecord(bytes(flipped))
            outcomes["read"] += 1
        except ETRecordError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0  # damaged entries fail their CRC or JSON; nothing else escapes


def test_reference_outputs_reach_the_blocks_run_on_bundled_inputs(tmp_path):
    """The ETRecord carries a bundled program's expected outputs (update_reference_outputs); the runtime marks
    each block run after load_bundled_input(k) with k, and the Inspector gives that block case k's reference
    outputs, which equal eager's and the logged run outputs (|d| <= 1e-5, portable kernels). A run on test
    case 2 of an ETRecord with two cases is refused, naming both counts."""
    from etkit.devtools.bundled_program import BundledProgram, MethodTestCase, MethodTestSuite
    from etkit.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer
    from etkit.runtime import DebugLevel, load_bundled_input

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.Tanh()).eval()
    cases = [torch.randn(3, 8) for _ in range(3)]
    edge = etkit.to_edge(torch.export.export(model, (cases[0],)), generate_etrecord=True)
    program = edge.to_executorch()
    with torch.no_grad():
        expected = [model(x) for x in cases]
    bundle = BundledProgram(program, [MethodTestSuite("forward", [MethodTestCase([x], [y])
                                                                  for x, y in zip(cases, expected)])])
    (tmp_path / "m.bpte").write_bytes(serialize_from_bundled_program_to_flatbuffer(bundle))
    record = program.get_etrecord()
    record.update_reference_outputs(bundle)
    record.update_representative_inputs(bundle)
    record.save(tmp_path / "m.etrecord")
    read_back = parse_etrecord(tmp_path / "m.etrecord")
    assert [len(i) for i in read_back.representative_inputs] == [1, 1, 1]
    for (got,), x in zip(read_back.representative_inputs, cases):
        torch.testing.assert_close(got, x)

    loaded = Runtime.get().load_program(tmp_path / "m.bpte", enable_etdump=True, debug_buffer_size=1 << 16,
                                        debug_level=DebugLevel.ProgramOutputs)
    method = loaded.load_method("forward")
    method.execute([cases[0]])  # not a bundled run
    for k in (1, 0):
        load_bundled_input(method, tmp_path / "m.bpte", k)
        method.execute()
    loaded.write_etdump_result_to_file(tmp_path / "m.etdp", tmp_path / "m.bin")
    blocks = [b for b in Inspector(etdump_path=tmp_path / "m.etdp", etrecord=tmp_path / "m.etrecord",
                                   debug_buffer_path=tmp_path / "m.bin").event_blocks if b.name == "Execute"]
    assert [b.bundled_input_index for b in blocks] == [None, 1, 0]
    assert blocks[0].reference_output is None
    for block in blocks[1:]:
        (reference,) = block.reference_output
        torch.testing.assert_close(reference, expected[block.bundled_input_index])
        torch.testing.assert_close(block.run_output[0], reference, atol=1e-5, rtol=1e-5)

    # a reference_outputs entry of the wrong shape is refused when read
    import io
    import zipfile
    wrong = io.BytesIO()
    torch.save([1, 2], wrong)
    with zipfile.ZipFile(tmp_path / "m.etrecord") as src, zipfile.ZipFile(tmp_path / "bad.etrecord", "w") as dst:
        for name in src.namelist():
            dst.writestr(name, wrong.getvalue() if name == "reference_outputs" else src.read(name))
    with pytest.raises(ETRecordError, match=r"entry reference_outputs is not \{method: \[output lists\]\}"):
        parse_etrecord(tmp_path / "bad.etrecord")

    with pytest.raises(ValueError, match=r"test case 0 of method 'forward' is a Tensor; give each test case's "
                                         r"outputs as a list"):
        record.update_reference_outputs(expected[:2])
    record.update_reference_outputs([[y] for y in expected[:2]])
    record.save(tmp_path / "two.etrecord")
    load_bundled_input(method, tmp_path / "m.bpte", 2)
    method.execute()
    loaded.write_etdump_result_to_file(tmp_path / "m2.etdp", tmp_path / "m2.bin")
    with pytest.raises(ETRecordError, match=r"ran bundled test case 2; the ETRecord has reference outputs for 2 "
                                            r"test case\(s\) of 'forward'"):
        Inspector(etdump_path=tmp_path / "m2.etdp", etrecord=tmp_path / "two.etrecord")
