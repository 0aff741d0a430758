"""ETDumps both ways with ExecuTorch 1.5.1 (oracle_scripts/et_etdump.py).

- etkit's runtime runs MobileNetV2 lowered to XNNPACK (1 thread) with an ETDump; ExecuTorch's Inspector
  reads the file and lists the same blocks and events as etkit's Inspector, with the same durations
  (they read the same integers; ExecuTorch converts them through float32: equal within 10 ns), among them one row per XNNPACK operator (>= 60).
- ExecuTorch's runtime writes an ETDump (and debug buffer) of a model it lowered; etkit's Inspector lists
  the same events and durations as ExecuTorch's, and the same logged method outputs, which equal torch
  eager's on the same inputs (|d| <= 1e-4: XNNPACK's sums run in another order).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import etkit
from etkit.devtools import Inspector
from etkit.runtime import Runtime

pytestmark = pytest.mark.oracle

SCRIPT = Path(__file__).parent / "oracle_scripts" / "et_etdump.py"


def _et_name(event) -> str:
    """The name ExecuTorch's Inspector gives an event: a delegate event with an integer debug id is named by
    the integer; etkit's Inspector names it by the delegate's label ("Convolution (NHWC, F32) IGEMM #1")."""
    return str(event.delegate_debug_identifier) if isinstance(event.delegate_debug_identifier, int) else event.name


def _view(inspector) -> dict:
    return {"blocks": [{"name": b.name,
                        "events": [{"name": _et_name(e), "raw": list(e.perf_data.raw) if e.perf_data else None,
                                    "is_delegated_op": bool(e.is_delegated_op), "op_types": list(e.op_types),
                                    "delegate_backend_name": e.delegate_backend_name} for e in b.events]}
                       for b in inspector.event_blocks]}


def _short(op: str) -> str:
    """ExecuTorch's Inspector names an Edge op by its overload ("convolution.default"), etkit's with its
    namespace ("aten.convolution.default")."""
    return op.split(".", 1)[1] if op.startswith("aten.") else op.rsplit(".", 2)[-2] + "." + op.rsplit(".", 1)[-1] \
        if op.count(".") > 1 else op


def _assert_same(ours: dict, theirs: dict) -> None:
    assert [b["name"] for b in ours["blocks"]] == [b["name"] for b in theirs["blocks"]]
    for mine, other in zip(ours["blocks"], theirs["blocks"]):
        assert [(e["name"], e["is_delegated_op"]) for e in mine["events"]] == \
            [(e["name"], e["is_delegated_op"]) for e in other["events"]], mine["name"]
        for a, b in zip(mine["events"], other["events"]):
            assert a["raw"] == pytest.approx(b["raw"], rel=1e-6, abs=1e-5), a["name"]


@pytest.fixture(scope="module")
def exchanged(tmp_path_factory, et_oracle):
    pytest.importorskip("etkit_xnnpack")
    import torchvision
    from etkit_xnnpack import XnnpackPartitioner

    directory = tmp_path_factory.mktemp("etdump_interop")
    model = torchvision.models.mobilenet_v2(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    program = etkit.to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[XnnpackPartitioner()],
                                                generate_etrecord=True).to_executorch()
    record = program.get_etrecord()
    with torch.no_grad():
        record.update_reference_outputs([[model(x)]])
    record.save(directory / "etkit.etrecord")
    Runtime.get().set_backend_option("XnnpackBackend", "num_threads", 1)
    loaded = Runtime.get().load_program(program.buffer, enable_etdump=True)
    method = loaded.load_method("forward")
    for _ in range(2):
        out = method.execute([x])
    torch.testing.assert_close(out[0], model(x).detach(), atol=1e-4, rtol=1e-4)
    loaded.write_etdump_result_to_file(directory / "etkit.etdp")
    et_oracle(SCRIPT, directory)
    return directory


def test_executorch_inspector_reads_etkit_etdump(exchanged):
    theirs = json.loads((exchanged / "et_view_of_etkit.json").read_text())
    ours = _view(Inspector(etdump_path=exchanged / "etkit.etdp"))
    _assert_same(ours, theirs)
    execute = [b for b in theirs["blocks"] if b["name"] == "Execute"][0]
    assert sum(e["is_delegated_op"] for e in execute["events"]) >= 60


def test_etkit_inspector_reads_executorch_etdump(exchanged):
    theirs = json.loads((exchanged / "et_view_of_et.json").read_text())
    inspector = Inspector(etdump_path=exchanged / "et.etdp", debug_buffer_path=exchanged / "et.bin")
    _assert_same(_view(inspector), theirs)
    execute = [b for b in inspector.event_blocks if b.name == "Execute"][0]
    their_outputs = [b for b in theirs["blocks"] if b["name"] == "Execute"][0]["run_output"]
    assert len(execute.run_output) == len(their_outputs) == 3
    for mine, other in zip(execute.run_output, their_outputs):
        torch.testing.assert_close(mine, torch.tensor(other, dtype=mine.dtype).reshape(mine.shape))

    import importlib.util
    spec = importlib.util.spec_from_file_location("et_etdump", Path(__file__).parent / "oracle_scripts" / "et_etdump.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    inputs = torch.load(exchanged / "et_inputs.pt")
    with torch.no_grad():
        eager = module.Small().eval()(*inputs)
    for mine, expected in zip(execute.run_output, eager):
        torch.testing.assert_close(mine, expected, atol=1e-4, rtol=1e-4)


def test_executorch_reads_etkit_reference_outputs(exchanged):
    """ExecuTorch's parse_etrecord reads the reference outputs etkit's ETRecord carries: forward's one case,
    MobileNetV2's eager logits."""
    theirs = torch.load(exchanged / "et_reference_outputs_of_etkit.pt", weights_only=True)
    ours = __import__("etkit.devtools.etrecord", fromlist=["x"]).parse_etrecord(exchanged / "etkit.etrecord")
    assert list(theirs) == ["forward"] and len(theirs["forward"]) == 1
    torch.testing.assert_close(theirs["forward"][0][0], ours._reference_outputs["forward"][0][0], atol=0, rtol=0)
    assert theirs["forward"][0][0].shape == (1, 1000)


def test_etrecords_both_ways(exchanged):
    """ExecuTorch's parse_etrecord and Inspector read etkit's ETRecord, etkit's Inspector reads ExecuTorch's:
    each side's events get the same operator types and backend names as the other side gives them."""
    theirs = json.loads((exchanged / "et_view_of_etkit_with_etrecord.json").read_text())
    ours = _view(Inspector(etdump_path=exchanged / "etkit.etdp", etrecord=exchanged / "etkit.etrecord"))
    for views in ((ours, theirs),
                  (_view(Inspector(etdump_path=exchanged / "et.etdp", etrecord=exchanged / "et.etrecord")),
                   json.loads((exchanged / "et_view_of_et.json").read_text()))):
        mine, other = views
        execute_mine = [b for b in mine["blocks"] if b["name"] == "Execute"][0]["events"]
        execute_other = [b for b in other["blocks"] if b["name"] == "Execute"][0]["events"]
        assert [e["name"] for e in execute_mine] == [e["name"] for e in execute_other]
        for a, b in zip(execute_mine, execute_other):
            assert sorted(map(_short, a["op_types"])) == sorted(map(_short, b["op_types"])), a["name"]
            assert (a["delegate_backend_name"] or None) == (b["delegate_backend_name"] or None), a["name"]
        (call,) = [e for e in execute_mine if e["name"] == "DELEGATE_CALL"]
        assert call["delegate_backend_name"] == "XnnpackBackend" and call["op_types"]
    # Inside the delegate: every XNNPACK operator of etkit's run maps to Edge ops on both sides (its XNode's
    # entry in the debug handle map): MobileNetV2's 52 convolutions, and the input's NCHW -> NHWC transpose,
    # which goes to the convolution that needs it.
    for view in (ours, theirs):
        inside = [e for e in [b for b in view["blocks"] if b["name"] == "Execute"][0]["events"] if e["is_delegated_op"]]
        assert len(inside) >= 60 and all(e["op_types"] for e in inside)
        assert sum("convolution.default" in map(_short, e["op_types"]) for e in inside) == 52 + 1
