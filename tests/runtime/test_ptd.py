"""`.ptd` data files (seed page "Separating the program and data"): ExecutorchBackendConfig(external_constants=...)
keeps weights in a FlatTensor file beside the .pte; Runtime.load_program(pte, data_path=ptd) and etkit_runner
--data_path run it. Outputs are compared with eager (float32, within 1e-5); a missing, mismatched or broken
data file is refused naming the key or the part."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
import torch

import etkit
from etkit.emit.external_data import DEFAULT_TAG
from etkit.runtime import EtkitRuntimeError, Runtime
from etkit.serialize.ptd import PtdEntry, PtdFormatError, TensorLayout, deserialize_ptd, serialize_ptd

DEFAULT_FILE = f"{DEFAULT_TAG}.ptd"


class PtdNet(torch.nn.Module):
    """Conv, linear and a buffer: five constants (tests/interop/test_ptd_interop.py uses it too)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.fc = torch.nn.Linear(8, 5)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 5))

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return self.fc(y) * self.scale


def _export(model, example, **config):
    return etkit.to_edge(torch.export.export(model, example)).to_executorch(etkit.ExecutorchBackendConfig(**config))


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    model = PtdNet().eval()
    x = torch.randn(1, 3, 10, 10)
    with torch.no_grad():
        return model, x, model(x)


def test_external_constants_run_from_the_data_file(net, tmp_path):
    model, x, want = net
    program = _export(model, (x,), external_constants=True)
    assert list(program.data_files) == [DEFAULT_FILE]
    entries = deserialize_ptd(program.data_files[DEFAULT_FILE])
    assert set(entries) == {"conv.weight", "conv.bias", "fc.weight", "fc.bias", "scale"}
    assert entries["conv.weight"].layout == TensorLayout(6, (8, 3, 3, 3), (0, 1, 2, 3))  # 6: Float
    assert np.array_equal(np.frombuffer(entries["fc.weight"].data, np.float32).reshape(5, 8),
                          model.fc.weight.detach().numpy())
    inline = _export(model, (x,))
    assert len(program.buffer) < len(inline.buffer) - 1000  # the weights left the .pte

    program.write_to_file(str(tmp_path / "net.pte"))
    [ptd] = program.write_tensor_data_to_file(tmp_path)
    assert ptd.endswith(DEFAULT_FILE)
    loaded = Runtime.get().load_program(tmp_path / "net.pte", data_path=ptd)
    out = loaded.load_method("forward").execute([x])[0]
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)


def test_without_its_data_file_the_method_names_the_missing_weight(net, tmp_path):
    model, x, _ = net
    pte = _export(model, (x,), external_constants=True).buffer
    with pytest.raises(EtkitRuntimeError, match=r"'conv\.weight' is not in this program, and no \.ptd data file was "
                                                r"given .*data_path"):
        Runtime.get().load_program(pte).load_method("forward")


def test_a_data_file_missing_a_key_or_holding_another_shape_is_refused(net, tmp_path):
    model, x, _ = net
    program = _export(model, (x,), external_constants=True)
    program.write_to_file(str(tmp_path / "net.pte"))
    entries = deserialize_ptd(program.data_files[DEFAULT_FILE])

    without_bias = {k: v for k, v in entries.items() if k != "fc.bias"}
    (tmp_path / "short.ptd").write_bytes(serialize_ptd(without_bias))
    with pytest.raises(EtkitRuntimeError, match=r"'fc\.bias' is in neither the program nor its \.ptd data file"):
        Runtime.get().load_program(tmp_path / "net.pte", data_path=tmp_path / "short.ptd").load_method("forward")

    reshaped = dict(entries)
    reshaped["fc.weight"] = PtdEntry(entries["fc.weight"].data, 16, TensorLayout(6, (8, 5), (0, 1)))
    (tmp_path / "other.ptd").write_bytes(serialize_ptd(reshaped))
    with pytest.raises(EtkitRuntimeError, match=r"'fc\.weight' is a Float tensor of 160 bytes in the program but a "
                                                r"Float tensor of 160 bytes \(2 dims, or another dim_order\) in the "
                                                r"\.ptd data file"):
        Runtime.get().load_program(tmp_path / "net.pte", data_path=tmp_path / "other.ptd").load_method("forward")


def test_a_data_file_with_another_dim_order_or_a_second_one_is_refused(net, tmp_path):
    model, x, _ = net
    program = _export(model, (x,), external_constants=True)
    program.write_to_file(str(tmp_path / "net.pte"))
    entries = deserialize_ptd(program.data_files[DEFAULT_FILE])
    transposed = dict(entries)
    transposed["conv.weight"] = PtdEntry(entries["conv.weight"].data, 16, TensorLayout(6, (8, 3, 3, 3), (0, 2, 3, 1)))
    (tmp_path / "nhwc.ptd").write_bytes(serialize_ptd(transposed))
    with pytest.raises(EtkitRuntimeError, match=r"'conv\.weight' .* another dim_order\) in the \.ptd data file"):
        Runtime.get().load_program(tmp_path / "net.pte", data_path=tmp_path / "nhwc.ptd").load_method("forward")

    [ptd] = program.write_tensor_data_to_file(tmp_path)
    loaded = Runtime.get().load_program(tmp_path / "net.pte", data_path=ptd)
    with pytest.raises(EtkitRuntimeError, match="already has a data file"):
        loaded._native.attach_data_file(ptd)  # methods loaded before may point into the first one


def test_two_programs_share_one_data_file(net, tmp_path):
    """Two methods of one model exported separately (different input sizes) keep the same weights: their
    data files are identical, and both programs run from one of them."""
    model, x, want = net
    big = torch.randn(2, 3, 16, 16)
    first = _export(model, (x,), external_constants=True)
    second = _export(model, (big,), external_constants=True)
    assert first.data_files == second.data_files
    first.write_to_file(str(tmp_path / "a.pte"))
    second.write_to_file(str(tmp_path / "b.pte"))
    [ptd] = first.write_tensor_data_to_file(tmp_path)
    a = Runtime.get().load_program(tmp_path / "a.pte", data_path=ptd).load_method("forward")
    b = Runtime.get().load_program(tmp_path / "b.pte", data_path=ptd).load_method("forward")
    torch.testing.assert_close(a.execute([x])[0], want, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(b.execute([big])[0], model(big), atol=1e-5, rtol=1e-5)


def test_a_callable_names_each_constants_file(net, tmp_path):
    model, x, want = net
    program = _export(model, (x,), external_constants=lambda node: "conv" if "conv" in node.name else None)
    assert list(program.data_files) == ["conv.ptd"]
    assert set(deserialize_ptd(program.data_files["conv.ptd"])) == {"conv.weight", "conv.bias"}
    [ptd] = program.write_tensor_data_to_file(tmp_path)
    out = Runtime.get().load_program(program.buffer, data_path=ptd).load_method("forward").execute([x])[0]
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="plain file name stem"):
        _export(model, (x,), external_constants=lambda node: "../weights")


def test_write_tensor_data_to_file_without_external_data_says_how(net, tmp_path):
    model, x, _ = net
    with pytest.raises(RuntimeError, match=r"external_constants=True"):
        _export(model, (x,)).write_tensor_data_to_file(tmp_path)


def test_serializer_layout_and_round_trip():
    entries = {"a": PtdEntry(b"\x01" * 12, 16, TensorLayout(6, (3,), (0,))), "b": PtdEntry(b"xyz", 64),
               "c": PtdEntry(b"\x01" * 12, 16, TensorLayout(6, (3,), (0,)))}
    blob = serialize_ptd(entries)
    assert blob[4:8] == b"FT01" and blob[8:12] == b"FH01"
    header = [int.from_bytes(blob[o:o + 8], "little") for o in (16, 24, 32, 40)]
    flatbuffer_offset, flatbuffer_size, segment_base, data_size = header
    assert flatbuffer_offset == 48 and segment_base % 128 == 0 and segment_base >= 48 + flatbuffer_size
    assert len(blob) == segment_base + data_size
    back = deserialize_ptd(blob)
    assert {k: (v.data, v.layout) for k, v in back.items()} == {k: (v.data, v.layout) for k, v in entries.items()}
    assert serialize_ptd(entries) == blob  # deterministic
    # "a" and "c" hold the same bytes: one segment, so 12 + padding + 3 bytes of data
    assert data_size == 128 + 3
    # an entry asking for more than the segment alignment gets it in the file, not only relative to the base
    wide = serialize_ptd({"x": PtdEntry(b"\x02" * 5, 16), "y": PtdEntry(b"\x03" * 7, 512)})
    base = int.from_bytes(wide[32:40], "little")
    from etkit.fb.flat_tensor.FlatTensor import FlatTensor
    root = FlatTensor.GetRootAs(wide, 0)
    assert base % 512 == 0 and all(root.Segments(i).Offset() % 512 == 0 for i in range(root.SegmentsLength()))
    assert deserialize_ptd(wide)["y"].data == b"\x03" * 7


@pytest.mark.parametrize("damage", ["truncated", "identifier", "header", "version", "segment", "pte"])
def test_a_broken_data_file_is_refused_naming_the_part(net, tmp_path, damage):
    model, x, _ = net
    program = _export(model, (x,), external_constants=True)
    blob = bytearray(program.data_files[DEFAULT_FILE])
    expected = {
        "truncated": r"truncated",
        "identifier": r"not a \.ptd data file: file identifier is 'FT99'",
        "header": r"not an 'FH01' header",
        "version": r"FlatTensor version 7; this runtime reads version 0",
        "segment": r"segment 0 \(1099511627776 bytes at offset 0\) is outside the \d+ bytes of segment data",
        "pte": r"a \.pte program's",
    }[damage]
    if damage == "truncated":
        blob = blob[:len(blob) - 100]
    elif damage == "identifier":
        blob[6:8] = b"99"
    elif damage == "header":
        blob[8:12] = b"XX01"
    elif damage == "version":
        blob = bytearray(_with_version(bytes(blob), 7))
    elif damage == "segment":
        blob = bytearray(_with_segment_size(bytes(blob), 1 << 40))
    elif damage == "pte":
        blob = bytearray(program.buffer)
    (tmp_path / "bad.ptd").write_bytes(bytes(blob))
    with pytest.raises(EtkitRuntimeError, match=expected):
        Runtime.get().load_program(program.buffer, data_path=tmp_path / "bad.ptd")


def _rewrite(blob: bytes, change) -> bytes:
    entries = deserialize_ptd(blob)
    from etkit.serialize import ptd

    saved = ptd.VERSION
    try:
        change(ptd)
        return serialize_ptd(entries)
    finally:
        ptd.VERSION = saved


def _with_version(blob: bytes, version: int) -> bytes:
    return _rewrite(blob, lambda ptd: setattr(ptd, "VERSION", version))


def _with_segment_size(blob: bytes, size: int) -> bytes:
    """The first segment's size field patched in place (the flatbuffer stores it as a uint64)."""
    from etkit.fb.flat_tensor.FlatTensor import FlatTensor

    root = FlatTensor.GetRootAs(blob, 0)
    segment = root.Segments(0)
    position = segment._tab.Offset(6) + segment._tab.Pos  # DataSegment.size (offset 0 is a default, not stored)
    patched = bytearray(blob)
    patched[position:position + 8] = size.to_bytes(8, "little")
    return bytes(patched)


def test_corrupted_data_files_never_crash(net, tmp_path):
    """Every truncation at 64-byte steps and 300 random byte flips of a real .ptd are loaded in a child
    process: each either loads or is refused with an EtkitRuntimeError, and the child exits cleanly."""
    model, x, _ = net
    program = _export(model, (x,), external_constants=True)
    (tmp_path / "net.pte").write_bytes(program.buffer)
    (tmp_path / "good.ptd").write_bytes(program.data_files[DEFAULT_FILE])
    script = f"""
import random, pathlib
from etkit.runtime import EtkitRuntimeError, Runtime
d = pathlib.Path({str(tmp_path)!r})
good = (d / "good.ptd").read_bytes()
cases = [good[:n] for n in range(0, len(good), 64)]
rng = random.Random(0)
for _ in range(300):
    b = bytearray(good)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(0, min(len(b), 512) if rng.random() < 0.8 else len(b))
        b[i] = rng.randrange(256)
    cases.append(bytes(b))
refused = 0
for blob in cases:
    (d / "case.ptd").write_bytes(blob)
    try:
        Runtime.get().load_program(d / "net.pte", data_path=d / "case.ptd").load_method("forward")
    except EtkitRuntimeError:
        refused += 1
print("cases", len(cases), "refused", refused)
"""
    proc = subprocess.run([__import__("sys").executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "refused" in proc.stdout and int(proc.stdout.split("refused")[1]) > 0


def test_runner_takes_the_data_file(net, etkit_runner, tmp_path):
    model, x, want = net
    program = _export(model, (x,), external_constants=True)
    program.write_to_file(str(tmp_path / "net.pte"))
    [ptd] = program.write_tensor_data_to_file(tmp_path)
    np.save(tmp_path / "x.npy", x.numpy())
    run = [str(etkit_runner), "--model_path", str(tmp_path / "net.pte"), "--input", str(tmp_path / "x.npy"),
           "--output_prefix", str(tmp_path / "out")]
    proc = subprocess.run([*run, "--data_path", ptd], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    torch.testing.assert_close(torch.from_numpy(np.load(tmp_path / "out0.npy")), want, atol=1e-5, rtol=1e-5)
    missing = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "'conv.weight' is not in this program" in missing.stderr


def test_the_docs_ptd_example_runs(capsys):
    """docs/runtime.md "Weights in a .ptd data file": its example, as written, and what it says it prints."""
    from tests.docs_examples import run_docs_example

    source = run_docs_example("runtime.md", "## Weights in a .ptd data file")
    printed = capsys.readouterr().out.strip()
    assert printed == "True ['_default_external_constant.ptd']" and f"# {printed}" in source


def test_loading_with_caller_memory_and_a_data_file_allocates_no_heap_memory(net, native_build, tmp_path):
    """runtime-cpp/tests/test_execute_no_alloc.cpp with a .pte and its .ptd: the data file is mapped and the
    method loaded in caller-owned memory; load_method and three executes count 0 heap allocations (the weights
    are read in place, never copied)."""
    from tests.runtime.conftest import NATIVE_TARGETS

    model, x, _ = net
    program = _export(model, (x,), external_constants=True)
    program.write_to_file(str(tmp_path / "net.pte"))
    [ptd] = program.write_tensor_data_to_file(tmp_path)
    tool = native_build / NATIVE_TARGETS["test_execute_no_alloc"]
    proc = subprocess.run([str(tool), str(tmp_path / "net.pte"), ptd], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "heap allocations during load_method with caller memory and a .ptd: 0" in proc.stdout
    assert "heap allocations during 3 x Method::execute: 0" in proc.stdout


def test_etkit_inspect_lists_a_data_files_keys(net, tmp_path, capsys):
    from etkit.cli import main

    model, x, _ = net
    [ptd] = _export(model, (x,), external_constants=True).write_tensor_data_to_file(tmp_path)
    assert main(["inspect", ptd]) == 0
    out = capsys.readouterr().out
    assert f".ptd data file {ptd}:" in out and "5 keys" in out
    assert "  conv.weight: Tensor float32[8, 3, 3, 3], 864 bytes" in out
