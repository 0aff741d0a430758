"""ETDump: written by the runtime (Python API and etkit_runner), read by etkit.devtools.Inspector.

Every program is compared with torch eager: the logged method outputs and intermediate outputs must
equal eager's values of the same computation (portable kernels: |d| <= 1e-5; XNNPACK: 1e-4 on O(1)
values, its GEMMs sum in another order).
"""
from __future__ import annotations

import random
import subprocess
import warnings

import pytest
import torch

import etkit
from etkit.devtools import Inspector
from etkit.devtools.etdump import ETDumpError, read_etdump
from etkit.runtime import DebugLevel, Runtime

ATOL = 1e-5


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(8, 6)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 2.0


@pytest.fixture(scope="module")
def small_pte(tmp_path_factory):
    model = Small().eval()
    x = torch.randn(3, 8)
    program = etkit.to_edge(torch.export.export(model, (x,))).to_executorch()
    path = tmp_path_factory.mktemp("etdump") / "small.pte"
    path.write_bytes(program.buffer)
    return path, model


def _run(pte, x, runs=2, **kwargs):
    program = Runtime.get().load_program(pte, enable_etdump=True, **kwargs)
    method = program.load_method("forward")
    outputs = [method.execute([x]) for _ in range(runs)]
    return program, outputs


def test_etdump_blocks_events_and_values_match_eager(small_pte, tmp_path):
    pte, model = small_pte
    x = torch.randn(3, 8)
    program, outputs = _run(pte, x, debug_buffer_size=1 << 16)
    program.write_etdump_result_to_file(tmp_path / "m.etdp", tmp_path / "m.bin")
    assert program.etdump_dropped == (0, 0)

    dump = read_etdump(tmp_path / "m.etdp")
    assert [r.name for r in dump.run_data] == ["Default", "Execute", "Execute"]

    inspector = Inspector(etdump_path=tmp_path / "m.etdp", debug_buffer_path=tmp_path / "m.bin")
    names = [b.name for b in inspector.event_blocks]
    assert names == ["Default", "Execute"]  # the two executes have one signature: one block, 2 samples
    execute = inspector.event_blocks[1]
    assert [e.name for e in execute.events][-1] == "Method::execute"
    assert all(len(e.perf_data.raw) == 2 for e in execute.events)
    operator_calls = [e for e in execute.events if e.name == "OPERATOR_CALL"]
    kernels = [e.name for e in execute.events if e.name.startswith("native_call_")]
    assert any("addmm" in k or "linear" in k or "mm" in k for k in kernels), kernels
    assert any("relu" in k for k in kernels), kernels

    with torch.no_grad():
        eager = model(x)
        eager_relu = torch.relu(model.linear(x))
    # the method's output, as logged, and as returned
    assert len(execute.run_output) == 1
    torch.testing.assert_close(execute.run_output[0], eager, atol=ATOL, rtol=0)
    torch.testing.assert_close(outputs[-1][0], eager, atol=ATOL, rtol=0)
    # every kernel's output was logged; the relu's is eager's relu(linear(x))
    logged = [e.debug_data[0] for e in operator_calls]
    assert all(isinstance(t, torch.Tensor) for t in logged)
    assert any(t.shape == eager_relu.shape and torch.allclose(t, eager_relu, atol=ATOL) for t in logged)
    torch.testing.assert_close(logged[-1], eager, atol=ATOL, rtol=0)

    df = inspector.to_dataframe()
    assert {"event_block_name", "event_name", "raw", "p50", "is_delegated_op", "debug_data"} <= set(df.columns)
    assert (df["p50"].dropna() >= 0).all()


def test_debug_levels(small_pte, tmp_path):
    pte, model = small_pte
    x = torch.randn(3, 8)
    for level, expect_intermediates, expect_outputs in (
        (DebugLevel.NoLogging, False, False),
        (DebugLevel.ProgramOutputs, False, True),
        (DebugLevel.IntermediateOutputs, True, True),
    ):
        program, _ = _run(pte, x, runs=1, debug_buffer_size=1 << 16, debug_level=level)
        program.write_etdump_result_to_file(tmp_path / "d.etdp")
        events = read_etdump(tmp_path / "d.etdp").run_data[-1].events
        values = [e for e in events if hasattr(e, "value")]
        assert any(not v.value.is_output for v in values) == expect_intermediates, level
        assert any(v.value.is_output for v in values) == expect_outputs, level


def test_debug_buffer_too_small_marks_dropped_tensors(small_pte, tmp_path):
    pte, model = small_pte
    x = torch.randn(3, 8)
    program, outputs = _run(pte, x, runs=1, debug_buffer_size=100)  # room for one [3, 6] float tensor
    assert program.etdump_dropped[1] > 0
    program.write_etdump_result_to_file(tmp_path / "s.etdp", tmp_path / "s.bin")
    assert (tmp_path / "s.bin").stat().st_size <= 100
    values = [e.value for e in read_etdump(tmp_path / "s.etdp").run_data[-1].events if hasattr(e, "value")]
    assert sum(v.offset == -1 for v in values) == program.etdump_dropped[1]
    assert any(v.offset == 0 for v in values)  # the first tensor fitted
    inspector = Inspector(etdump_path=tmp_path / "s.etdp", debug_buffer_path=tmp_path / "s.bin")
    assert inspector.event_blocks[-1].run_output == [None]  # dropped, and said so, not garbage
    torch.testing.assert_close(outputs[0][0], model(x).detach(), atol=ATOL, rtol=0)


def test_event_storage_full_is_counted_and_reported(small_pte, tmp_path):
    pte, _ = small_pte
    program, _ = _run(pte, torch.randn(3, 8), runs=3, etdump_capacity=10)
    dropped = program.etdump_dropped[0]
    assert dropped > 0
    program.write_etdump_result_to_file(tmp_path / "f.etdp")
    assert read_etdump(tmp_path / "f.etdp").run_data[-1].name == f"etkit: {dropped} events dropped (event storage full)"
    with pytest.warns(UserWarning, match=f"dropped {dropped} events"):
        inspector = Inspector(etdump_path=tmp_path / "f.etdp")
    assert inspector.dropped_events == dropped


def test_write_without_etdump_and_bad_arguments_are_refused(small_pte, tmp_path):
    pte, _ = small_pte
    program = Runtime.get().load_program(pte)
    with pytest.raises(RuntimeError, match="enable_etdump=True"):
        program.write_etdump_result_to_file(tmp_path / "x.etdp")
    with pytest.raises(ValueError, match="need enable_etdump=True"):
        Runtime.get().load_program(pte, debug_buffer_size=10)
    with pytest.raises(ValueError, match="debug_buffer_size must be >= 0"):
        Runtime.get().load_program(pte, enable_etdump=True, debug_buffer_size=-1)


def test_corrupted_etdumps_raise_precise_errors(small_pte, tmp_path):
    pte, _ = small_pte
    program, _ = _run(pte, torch.randn(3, 8), runs=1, debug_buffer_size=1 << 12)
    program.write_etdump_result_to_file(tmp_path / "c.etdp", tmp_path / "c.bin")
    data = (tmp_path / "c.etdp").read_bytes()
    with pytest.raises(ETDumpError, match="size prefix"):
        read_etdump(data[:-7])
    with pytest.raises(ETDumpError, match="too short"):
        read_etdump(data[:5])
    wrong = bytearray(data)
    wrong[8:12] = b"XX00"
    with pytest.raises(ETDumpError, match="identifier"):
        read_etdump(bytes(wrong))
    rng = random.Random(7)
    rejected = 0
    for _ in range(300):
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            flipped[rng.randrange(4, len(flipped))] ^= 1 << rng.randrange(8)
        try:
            read_etdump(bytes(flipped))
        except ETDumpError:
            rejected += 1
    assert rejected > 0  # some flips break the file; none crashed the reader
    with pytest.raises(ETDumpError, match="cannot read ETDump"):
        read_etdump(tmp_path / "missing.etdp")


@pytest.fixture(scope="module")
def mobilenet_pte(tmp_path_factory):
    pytest.importorskip("etkit_xnnpack")
    import torchvision
    from etkit_xnnpack import XnnpackPartitioner

    model = torchvision.models.mobilenet_v2(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    ep = torch.export.export(model, (x,))
    program = etkit.to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()],
                                                generate_etrecord=True).to_executorch()
    path = tmp_path_factory.mktemp("mv2") / "mobilenet_v2.pte"
    path.write_bytes(program.buffer)
    program.get_etrecord().save(path.with_suffix(".etrecord"))
    return path, model, x


def test_xnnpack_logs_one_event_per_operator(mobilenet_pte, tmp_path):
    """MobileNetV2 on XNNPACK (1 thread): one row per XNNPACK operator (at least 60), whose times sum to
    within 10% of the delegate call's own event once warm (the first call also reshapes and plans the
    runtime, which no operator's time includes)."""
    pte, model, x = mobilenet_pte
    Runtime.get().set_backend_option("XnnpackBackend", "num_threads", 1)
    program, outputs = _run(pte, x, runs=3)
    torch.testing.assert_close(outputs[-1][0], model(x).detach(), atol=1e-4, rtol=1e-4)
    program.write_etdump_result_to_file(tmp_path / "mv2.etdp")
    execute = Inspector(etdump_path=tmp_path / "mv2.etdp").event_blocks[-1]
    delegated = [e for e in execute.events if e.is_delegated_op]
    assert len(delegated) >= 60
    assert all(" #" in e.name for e in delegated)
    assert any(e.name.startswith("Convolution (NHWC, F32)") for e in delegated)
    (call,) = [e for e in execute.events if e.name == "DELEGATE_CALL"]
    for run in (1, 2):
        inside = sum(e.perf_data.raw[run] for e in delegated)
        assert 0.9 * call.perf_data.raw[run] <= inside <= call.perf_data.raw[run], (run, inside, call.perf_data.raw)

    # With the ETRecord, each operator names the Edge ops its XNode computes (the delegate's debug id is the
    # XNode index, XnnpackBackend's debug_handle_map the rest): a convolution row lists the convolution and
    # the batch norm folded into it, an add row the add.
    mapped = [e for e in Inspector(etdump_path=tmp_path / "mv2.etdp", etrecord=pte.with_suffix(".etrecord"))
              .event_blocks[-1].events if e.is_delegated_op]
    assert [e.name for e in mapped] == [e.name for e in delegated]
    assert all(isinstance(e.delegate_debug_identifier, int) and e.debug_handles for e in mapped)
    convs = [e for e in mapped if e.name.startswith("Convolution")]
    assert len(convs) == 52 and all("aten.convolution.default" in e.op_types for e in convs)
    assert all("aten._native_batch_norm_legit_no_training.default" in e.op_types for e in convs)
    adds = [e for e in mapped if e.name.startswith("Binary Elementwise")]
    assert len(adds) == 10 and all(e.op_types == ["aten.add.Tensor"] for e in adds)


def test_runner_writes_etdump(etkit_runner, small_pte, tmp_path):
    pte, model = small_pte
    etdp, dbg = tmp_path / "r.etdp", tmp_path / "r.bin"
    proc = subprocess.run([str(etkit_runner), "--model_path", str(pte), "--iterations", "2", "--etdump_path",
                           str(etdp), "--debug_buffer_path", str(dbg)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"etdump: wrote {etdp}" in proc.stdout
    inspector = Inspector(etdump_path=etdp, debug_buffer_path=dbg)
    (execute,) = [b for b in inspector.event_blocks if b.name == "Execute"]
    assert len(execute.events[0].perf_data.raw) == 3  # warm-up plus 2 iterations
    # the runner's inputs are all ones
    torch.testing.assert_close(execute.run_output[0], model(torch.ones(3, 8)).detach(), atol=ATOL, rtol=0)

    bad = subprocess.run([str(etkit_runner), "--model_path", str(pte), "--etdump_path", str(etdp), "--debug_level",
                          "everything"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--debug_level must be none, program_outputs or intermediate_outputs" in bad.stderr
    lonely = subprocess.run([str(etkit_runner), "--model_path", str(pte), "--debug_buffer_path", str(dbg)],
                            capture_output=True, text=True, timeout=60)
    assert lonely.returncode == 2 and "need --etdump_path" in lonely.stderr
