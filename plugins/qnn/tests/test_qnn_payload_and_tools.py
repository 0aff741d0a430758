"""The QNN payload (round trip, the C++ reader on corrupt bytes), the delegate's run-time checks, ``etkit inspect``,
the partitioner's reasons, the compile specs and the availability probe."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import etkit_qnn
from etkit_qnn import QcomChipset, generate_htp_compiler_spec, generate_qnn_executorch_compiler_spec
from etkit_qnn.compile_spec import QnnCompileSpec
from etkit_qnn.payload import PayloadError, QnnPayload, TensorInfo, TensorQuantization, pack, unpack

from qnn_helpers import lower, reference, run


@pytest.fixture(scope="module")
def lowered():
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    inputs = (torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(0)),)
    program = reference(module, inputs, "8a8w")
    return program, inputs, lower(program, inputs, fp16=False)


def _payload(edge) -> bytes:
    gm = edge.exported_program().graph_module
    (lm,) = [m for _, m in gm.named_children()]
    return bytes(lm.processed_bytes)


def test_payload_round_trip_keeps_every_field():
    p = QnnPayload("g", 57, 75, "quantized", "v2.51", b"\x01\x02" * 100,
                   [TensorInfo("input_0", (1, 3), TensorQuantization("uint8", 0.5, 128))], [TensorInfo("output_0", (1, 3))])
    q = unpack(pack(p))
    assert q == p


def test_payload_is_a_real_context_binary_for_the_target(lowered):
    p = unpack(_payload(lowered[2]))
    assert (p.soc_model, p.htp_arch, p.precision) == (int(QcomChipset.SM8650), 75, "quantized")
    assert p.sdk_version.startswith("v2.")
    # QNN writes its HTP prepare configuration in clear text into the binary (qnn-route.md section 2).
    assert b"SM8650" in p.context_binary and b"arch=75" in p.context_binary.replace(b" ", b"")
    assert [i.shape for i in p.inputs] == [(1, 3, 8, 8)] and p.inputs[0].quantization.dtype == "uint8"


def test_python_reader_refuses_corrupt_payloads():
    with pytest.raises(PayloadError, match="file identifier"):
        unpack(b"\0" * 64)
    good = pack(QnnPayload("g", 57, 75, "fp16", "", b"x" * 64, [TensorInfo("a", (1,))], [TensorInfo("b", (1,))]))
    with pytest.raises(PayloadError, match="corrupt|version"):
        unpack(good[:40])


def _checker() -> str:
    for folder in etkit_qnn.__path__:
        path = os.path.join(folder, "bin", "etkit_qnn_payload_check")
        if os.path.isfile(path):
            return path
    pytest.fail("etkit_qnn_payload_check is not installed (reinstall etkit-qnn)")


def _check(tmp_path, data: bytes) -> subprocess.CompletedProcess:
    path = tmp_path / "payload.bin"
    path.write_bytes(data)
    return subprocess.run([_checker(), str(path)], capture_output=True, text=True, timeout=60)


def test_cpp_reader_accepts_the_payload(lowered, tmp_path):
    proc = _check(tmp_path, _payload(lowered[2]))
    assert proc.returncode == 0 and proc.stdout.startswith("ok graph=QNNExecutionProvider"), proc.stdout + proc.stderr


def test_cpp_reader_refuses_corrupt_payloads_without_crashing(lowered, tmp_path):
    data = _payload(lowered[2])
    cases = {"empty": b"", "identifier": b"XXXX" + data[4:8].replace(b"EQNN", b"NOPE") + data[8:],
             "truncated": data[: len(data) // 3], "header only": data[:16]}
    rng = torch.Generator().manual_seed(3)
    for i in range(20):  # flipped bytes in the flatbuffer's tables (the first 2 kB)
        corrupt = bytearray(data)
        for pos in torch.randint(8, 2048, (4,), generator=rng).tolist():
            corrupt[pos] ^= 0xFF
        cases[f"flipped {i}"] = bytes(corrupt)
    for name, payload in cases.items():
        proc = _check(tmp_path, payload)
        assert proc.returncode in (0, 2), f"{name}: exit {proc.returncode} (crash?) {proc.stderr}"
        if name in ("empty", "identifier", "truncated", "header only"):
            assert proc.returncode == 2 and proc.stdout.startswith("error: "), f"{name}: {proc.stdout}"
    assert "file identifier" in _check(tmp_path, cases["identifier"]).stdout
    assert "does not verify" in _check(tmp_path, cases["truncated"]).stdout


def test_cpp_reader_refuses_a_bad_boundary_quantization_and_an_old_version(lowered, tmp_path):
    p = unpack(_payload(lowered[2]))
    x = p.inputs[0]
    for bad, message in ((TensorQuantization("uint32", 0.5, 0), "quantization dtype 'uint32'"),
                         (TensorQuantization("uint8", 0.0, 0), "scale 0"),
                         (TensorQuantization("uint8", 0.5, 300), "zero point 300")):
        p.inputs = [TensorInfo(x.name, x.shape, bad)]
        proc = _check(tmp_path, pack(p))
        assert proc.returncode == 2 and message in proc.stdout, proc.stdout + proc.stderr
    p.inputs, p.version = [x], 1
    proc = _check(tmp_path, pack(p))
    assert proc.returncode == 2 and "payload version 1" in proc.stdout and "re-lower" in proc.stdout, proc.stdout


def test_cpp_reader_refuses_a_damaged_context_binary(lowered, tmp_path):
    """The context binary's CRC-32 (written at lowering) is checked before the bytes reach ONNX Runtime's QNN
    provider, whose context loader crashes or hangs on damaged input."""
    data = _payload(lowered[2])
    binary = unpack(data).context_binary
    start = data.find(binary)
    assert start > 0 and data.find(binary, start + 1) == -1
    for where in (0, len(binary) // 2, len(binary) - 1):
        damaged = bytearray(data)
        damaged[start + where] ^= 0x01
        proc = _check(tmp_path, bytes(damaged))
        assert proc.returncode == 2 and "CRC-32" in proc.stdout and "damaged" in proc.stdout, proc.stdout + proc.stderr
    assert _check(tmp_path, data).returncode == 0


def test_delegate_refuses_a_wrong_input_shape(lowered):
    from etkit.runtime import Runtime
    program, inputs, edge = lowered
    method = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    (out,) = method.execute(list(inputs))
    torch.testing.assert_close(out, program(*inputs), atol=0.1, rtol=0)
    with pytest.raises(Exception, match=r"shape|input"):
        method.execute([torch.randn(1, 3, 9, 9)])


def test_inspect_shows_graph_soc_and_htp_arch(lowered, tmp_path):
    pte = tmp_path / "m.pte"
    lowered[2].to_executorch().write_to_file(str(pte))
    cli = [sys.executable, "-m", "etkit"]
    out = subprocess.run([*cli, "inspect", str(pte)], capture_output=True, text=True, timeout=300).stdout
    assert "QNN graph: QNNExecutionProvider" in out
    assert "soc model: SM8650 (57), HTP architecture: v75, precision: quantized" in out
    dump = tmp_path / "dump"
    subprocess.run([*cli, "inspect", str(pte), "--dump", str(dump)], check=True, capture_output=True, timeout=300)
    binary = dump / "forward_0.qnn_context.bin"
    assert binary.read_bytes() == unpack(_payload(lowered[2])).context_binary
    assert (dump / "forward_0.qnn.json").is_file()


def test_float_ops_in_quantized_precision_are_reported_with_the_reason():
    module = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    report = lower(module, (torch.randn(2, 8),), fp16=False).partition_reports["forward"][0]
    assert report.num_partitions == 0
    relu = [r for r in report.rejected if r.target == "aten.relu.default"]
    assert relu and "quantize the model with QnnQuantizer" in relu[0].reason, report.format()


def test_skip_sets_keep_nodes_outside_and_say_so():
    module = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)).eval()
    x = (torch.randn(2, 8),)
    report = lower(module, x, fp16=True, skip_node_op_set={"aten.relu.default"}).partition_reports["forward"][0]
    assert report.num_partitions == 2
    assert any(r.target == "aten.relu.default" and "skip_node_op_set" in r.reason for r in report.rejected)
    (out,) = run(lower(module, x, fp16=True, skip_node_op_set={"aten.relu.default"}), x)
    torch.testing.assert_close(out, module(*x), atol=1e-2, rtol=1e-2)


def test_compile_specs_follow_the_seed_api_and_refuse_unknown_values():
    specs = generate_qnn_executorch_compiler_spec(soc_model=QcomChipset.SM8750,
                                                  backend_options=generate_htp_compiler_spec(use_fp16=True))
    spec = QnnCompileSpec.from_list(specs)
    assert (spec.soc_model, int(spec.htp_arch), spec.use_fp16) == (QcomChipset.SM8750, 79, True)
    with pytest.raises(ValueError, match="unknown SoC model"):
        generate_qnn_executorch_compiler_spec(soc_model="SM0000", backend_options=generate_htp_compiler_spec(False))
    with pytest.raises(NotImplementedError, match="use_multi_contexts"):
        generate_htp_compiler_spec(use_fp16=False, use_multi_contexts=True)
    with pytest.raises(ValueError, match="qnn_precision"):
        QnnCompileSpec.from_list({"qnn_soc_model": b"57", "qnn_precision": b"int3"})


def test_missing_vendor_libraries_make_the_backend_unavailable_with_the_reason(monkeypatch, tmp_path):
    from etkit_qnn.plugin import availability
    monkeypatch.setenv("ETKIT_QNN_EP_LIBRARY", str(tmp_path / "missing.so"))
    result = availability()
    assert not result.available
    assert "install etkit-qnn's runtime extra" in result.reason and "onnxruntime-qnn" in result.reason


@pytest.mark.parametrize("scheme", ["8a8w", "16a8w"])
def test_boundary_quantization_is_the_references_bit_for_bit(scheme):
    """The delegate quantizes inputs and dequantizes outputs itself (payload version 2): a data-movement program
    returns exactly the PT2E reference's values, for inputs placed on rounding ties (round half to even) and
    beyond the calibrated range (clamped). The HTP, given float32 I/O, converts through fp16 instead."""
    module = torch.nn.Flatten(1).eval()
    calibration = (torch.linspace(-1.0, 3.0, 64).reshape(1, 4, 16),)
    program = reference(module, calibration, scheme)
    edge = lower(program, calibration, fp16=False)
    p = unpack(_payload(edge))
    (qin,), (qout,) = [i.quantization for i in p.inputs], [o.quantization for o in p.outputs]
    assert qin is not None and qout is not None and qin.dtype == ("uint8" if scheme == "8a8w" else "uint16")
    qmax = 255 if scheme == "8a8w" else 65535
    k = torch.arange(64, dtype=torch.float32) * (qmax // 64) - qin.zero_point
    ties = ((k + 0.5) * qin.scale).reshape(1, 4, 16)
    beyond = torch.linspace(-3.0, 6.0, 64).reshape(1, 4, 16)
    for x in (calibration[0], ties, beyond):
        (out,) = run(edge, (x,))
        with torch.no_grad():
            expected = program(x)
        assert torch.equal(out, expected), f"{int((out != expected).sum())} values differ"
