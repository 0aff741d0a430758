"""Corrupted programs are rejected by the C++ loader with a clear error, never a crash
(seed page ".pte file format"): through etkit.runtime (Python) and through etkit_runner (native).
The checks are the runtime's own (flatbuffers Verifier + header/segment bounds), not a Python pre-check."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from etkit.runtime import EtkitRuntimeError, Runtime

pytestmark = pytest.mark.oracle


def _program_bytes(et_programs, name="mlp") -> bytes:
    return (et_programs / f"{name}.pte").read_bytes()


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.1, 0.5, 0.9, 0.99])
def test_truncated_program_is_rejected_with_message(et_programs, tmp_path, fraction):
    data = _program_bytes(et_programs)  # has an eh00 header and a constant segment
    cut = data[: int(len(data) * fraction)]
    path = tmp_path / "cut.pte"
    path.write_bytes(cut)
    runtime = Runtime.get()
    for source in (cut, path):
        with pytest.raises(EtkitRuntimeError) as info:
            runtime.load_program(source).load_method("forward")
        msg = str(info.value)
        assert "InvalidProgram" in msg or "InvalidArgument" in msg, msg
        assert any(w in msg for w in ("truncated", "too short", "verification", "outside")), msg


def test_last_byte_missing_is_rejected(et_programs):
    data = _program_bytes(et_programs)
    with pytest.raises(EtkitRuntimeError, match="truncated"):
        Runtime.get().load_program(data[:-1]).load_method("forward")


def test_wrong_file_identifier_is_named(et_programs):
    data = bytearray(_program_bytes(et_programs))
    data[4:8] = b"XY99"
    with pytest.raises(EtkitRuntimeError, match="XY99"):
        Runtime.get().load_program(bytes(data))


_FLIP_SCRIPT = textwrap.dedent(
    """
    import sys, torch
    from etkit.runtime import Runtime, EtkitRuntimeError
    data = open(sys.argv[1], "rb").read()
    inputs = torch.load(sys.argv[2])["inputs"]
    rt = Runtime.get()
    rejected = ran = 0
    for pos in range(0, len(data), int(sys.argv[3])):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(data)
            bad[pos] ^= mask
            try:
                rt.load_program(bytes(bad)).load_method("forward").execute(inputs)
                ran += 1
            except (EtkitRuntimeError, ValueError) as e:
                assert str(e), "empty error message"
                rejected += 1
    print(f"rejected={rejected} ran={ran}")
    """
)


@pytest.mark.parametrize("name", ["mlp", "convnet"])
def test_bit_flipped_programs_never_crash_python_runtime(et_programs, name):
    pte = et_programs / f"{name}.pte"
    step = max(1, len(pte.read_bytes()) // 400)
    proc = subprocess.run(
        [sys.executable, "-c", _FLIP_SCRIPT, str(pte), str(et_programs / f"{name}.pt"), str(step)],
        capture_output=True, text=True, errors="replace", timeout=600,
    )
    assert proc.returncode == 0, f"runtime crashed or failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    rejected = int(proc.stdout.split("rejected=")[1].split()[0])
    assert rejected > 0, proc.stdout


def test_runner_rejects_truncated_program(et_programs, etkit_runner, tmp_path):
    data = _program_bytes(et_programs)
    for n in (0, 7, 40, len(data) // 2, len(data) - 1):
        path = tmp_path / f"cut{n}.pte"
        path.write_bytes(data[:n])
        proc = subprocess.run([str(etkit_runner), "--model_path", str(path)], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 1, (n, proc.returncode, proc.stderr)
        assert "cannot load program" in proc.stderr and "InvalidProgram" in proc.stderr, proc.stderr


def test_runner_survives_bit_flips(et_programs, etkit_runner, tmp_path):
    data = _program_bytes(et_programs)
    codes = set()
    for i, pos in enumerate(range(0, len(data), max(1, len(data) // 60))):
        bad = bytearray(data)
        bad[pos] ^= 0xFF
        path = tmp_path / f"flip{i}.pte"
        path.write_bytes(bytes(bad))
        proc = subprocess.run([str(etkit_runner), "--model_path", str(path), "--iterations", "1"],
                              capture_output=True, text=True, errors="replace", timeout=60)
        assert proc.returncode in (0, 1), f"byte {pos}: exit {proc.returncode} (crash)\n{proc.stderr}"
        if proc.returncode == 1:
            assert "etkit_runner:" in proc.stderr and len(proc.stderr.strip()) > 20, proc.stderr
        codes.add(proc.returncode)
    assert 1 in codes
