"""Interop with ExecuTorch 1.5.1 (the oracle, run in its own process; see tests/interop/oracle.py).

- etkit reads .pte files ExecuTorch made and rewrites them byte for byte;
- ExecuTorch's deserializer parses a file etkit wrote;
- ExecuTorch's runtime loads and runs programs etkit rewrote with a different segment alignment,
  and the outputs match torch eager.
Skipped, with the reason, when the oracle environment or its sample programs cannot be made.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from etkit.serialize import deserialize_pte, serialize_pte
from etkit.serialize.inspect import format_program

from ..interop.oracle import OracleError, oracle_dir, run_in_oracle
from .sample_programs import make_contents

pytestmark = pytest.mark.oracle

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).parent / "oracle_scripts"
SAMPLES = ["add_portable", "mlp_portable", "mlp_xnnpack"]
# ExecuTorchBackendConfig's default segment alignment.
ET_SEGMENT_ALIGNMENT = 128


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0]


@pytest.fixture(scope="module")
def oracle():
    try:
        oracle_dir()
    except OracleError as error:
        pytest.fail(f"ExecuTorch oracle environment cannot be made (run make oracle): {_first_line(error)}")
    return run_in_oracle


@pytest.fixture(scope="module")
def et_samples(oracle, tmp_path_factory) -> Path:
    """Directory of ExecuTorch-made NAME.pte (+ NAME.pt eager inputs/outputs, manifest.json)."""
    out = tmp_path_factory.mktemp("et_samples")
    try:
        oracle(REPO / "scripts" / "et_make_samples.py", out, "--only", *SAMPLES)
    except OracleError as error:
        pytest.fail(f"ExecuTorch could not make the sample programs: {_first_line(error)}")
    return out


def _tensor_nbytes(tensor) -> int:
    numel = 1
    for size in tensor.sizes:
        numel *= int(size)
    return numel * {6: 4, 4: 8, 3: 4}[tensor.scalarType]


def test_reads_constants_of_an_executorch_portable_program(et_samples):
    contents = deserialize_pte((et_samples / "mlp_portable.pte").read_bytes())
    (plan,) = contents.program.executionPlan
    assert plan.name == b"forward"
    # fc1.weight [16, 8], fc1.bias [16], fc2.weight [4, 16], fc2.bias [4], float32
    assert sorted(len(c) for c in contents.constant_data) == [0, 16, 64, 256, 512]
    constants = [v.val for v in plan.values if v.valType == 5 and v.val.dataBufferIdx]
    assert len(constants) == 4
    for tensor in constants:
        assert len(contents.constant_data[tensor.dataBufferIdx]) == _tensor_nbytes(tensor)
    assert contents.delegate_data == [] and contents.named_data == {}


def test_reads_delegate_and_named_data_of_an_executorch_delegated_program(et_samples):
    contents = deserialize_pte((et_samples / "mlp_xnnpack.pte").read_bytes())
    (plan,) = contents.program.executionPlan
    (delegate,) = plan.delegates
    assert delegate.id == b"XnnpackBackend"
    assert len(contents.delegate_data[delegate.processed.index]) > 0
    assert sorted(len(v) for v in contents.named_data.values()) == [16, 64, 256, 512]
    text = format_program(et_samples / "mlp_xnnpack.pte")
    assert "    0: DelegateCall XnnpackBackend#0 (args=[0,1])" in text.splitlines()


@pytest.mark.parametrize("name", SAMPLES)
def test_rewrites_executorch_programs_byte_for_byte(et_samples, name):
    data = (et_samples / f"{name}.pte").read_bytes()
    assert serialize_pte(deserialize_pte(data), segment_alignment=ET_SEGMENT_ALIGNMENT) == data


def test_executorch_deserializer_parses_our_file(oracle, tmp_path):
    contents = make_contents()
    path = tmp_path / "ours.pte"
    path.write_bytes(serialize_pte(contents))
    summary = json.loads(oracle(SCRIPTS / "et_parse_pte.py", path).stdout)
    assert [m["name"] for m in summary["methods"]] == ["forward", "other"]
    forward = summary["methods"][0]
    assert forward["instructions"] == ["KernelCall aten::add.out [0, 1, 2, 3]",
                                       "DelegateCall TestBackend [3, 5]",
                                       "MoveCall", "JumpFalseCall", "FreeCall"]
    assert forward["tensors"][1] == [6, [2, 3], 1]
    assert forward["delegates"][0][3] == [["threads", "04"]]
    # ExecuTorch's reader keeps each constant's alignment padding; the data must be a prefix.
    constants = [bytes.fromhex(c) for c in summary["constant_buffer"]]
    assert len(constants) == len(contents.constant_data)
    for theirs, ours in zip(constants, contents.constant_data):
        assert theirs[:len(ours)] == ours and not any(theirs[len(ours):])
    assert [bytes.fromhex(d) for d in summary["backend_delegate_data"]] == contents.delegate_data
    assert {k: bytes.fromhex(v) for k, v in summary["named_data"].items()} == contents.named_data


@pytest.mark.parametrize("name", SAMPLES)
def test_executorch_runtime_runs_programs_we_rewrote(oracle, et_samples, tmp_path, name):
    original = (et_samples / f"{name}.pte").read_bytes()
    ours = serialize_pte(deserialize_pte(original), segment_alignment=4096)
    if original[8:12] == b"eh00":  # has segments: moved to 4096-byte boundaries
        assert ours != original and ours[24:32] == (4096).to_bytes(8, "little")
    path = tmp_path / f"{name}.pte"
    path.write_bytes(ours)
    outputs_path = tmp_path / "outputs.pt"
    oracle(SCRIPTS / "et_run_pte.py", path, et_samples / f"{name}.pt", outputs_path)

    manifest = json.loads((et_samples / "manifest.json").read_text())[name]
    expected = torch.load(et_samples / f"{name}.pt")["outputs"]  # torch eager
    got = torch.load(outputs_path)["outputs"]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=manifest["rtol"], atol=manifest["atol"])
