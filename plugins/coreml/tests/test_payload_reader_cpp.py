"""The C++ payload reader of the Core ML delegate (runtime/src/payload_reader.cpp) is portable: it is
built here with AddressSanitizer and must read what preprocess writes exactly as the Python reader does,
and refuse corrupt payloads with a message, never reading out of bounds."""
from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from coreml_helpers import delegates, lower
from etkit_coreml import CoreMLPartitioner
from etkit_coreml.payload import inmemoryfs

pytestmark = pytest.mark.sanitize

RUNTIME = Path(__file__).resolve().parents[1] / "runtime"


def _fnv(data: bytes) -> str:
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


@pytest.fixture(scope="module")
def reader(tmp_path_factory) -> Path:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.fail("no C++ compiler: install build-essential (make system does)")
    exe = tmp_path_factory.mktemp("reader") / "payload_reader_main"
    subprocess.run([cxx, "-std=c++17", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", "-I", str(RUNTIME / "include"),
                    str(RUNTIME / "src" / "payload_reader.cpp"), str(RUNTIME / "tests" / "payload_reader_main.cpp"),
                    "-o", str(exe)], check=True, capture_output=True, text=True)
    return exe


@pytest.fixture(scope="module")
def payload() -> bytes:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 6 * 6, 3)).eval()
    (delegate,) = delegates(lower(model, (torch.randn(1, 3, 8, 8),), [CoreMLPartitioner()]))
    return delegate.processed_bytes


def _read(reader: Path, data: bytes, tmp_path: Path, name: str = "p.bin") -> subprocess.CompletedProcess:
    path = tmp_path / name
    path.write_bytes(data)
    # sanitizer reports exit 99, so an overread can never pass for the reader's own refusal (exit 1)
    env = {**os.environ, "ASAN_OPTIONS": "exitcode=99:detect_leaks=1", "UBSAN_OPTIONS": "exitcode=99:halt_on_error=1"}
    return subprocess.run([str(reader), str(path)], capture_output=True, text=True, errors="replace", timeout=60,
                          env=env)


def test_cpp_reader_reads_what_preprocess_writes(reader, payload, tmp_path):
    proc = _read(reader, payload, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    files = inmemoryfs.read_files(payload)
    assert sorted(line.split(" ", 1)[1] for line in lines if line.startswith("FILE ")) == \
        sorted(f"{path} {len(data)} {_fnv(data)}" for path, data in files.items())
    import json
    meta = json.loads(files["metadata.json"])
    assert [l[6:] for l in lines if l.startswith("INPUT ")] == meta["inputNames"]
    assert [l[7:] for l in lines if l.startswith("OUTPUT ")] == meta["outputNames"]
    assert f"ID {meta['identifier']}" in lines and "ROOT lowered_module" in lines and "COMPILED 0" in lines


def test_cpp_reader_refuses_truncated_and_corrupt_payloads(reader, payload, tmp_path):
    cuts = [0, 1, 10, len(payload) // 2, len(payload) - 200, len(payload) - 1]
    for cut in cuts:
        proc = _read(reader, payload[:cut], tmp_path, f"cut{cut}.bin")
        assert proc.returncode == 1 and proc.stdout.startswith("ERROR: "), (cut, proc.stdout, proc.stderr[-2000:])
    rng = random.Random(0)
    metadata_start = len(payload) - 400
    for i in range(40):  # flips in the metadata: refused or read, but never a crash or an overread
        data = bytearray(payload)
        pos = rng.randrange(metadata_start, len(payload))
        data[pos] = rng.randrange(256)
        proc = _read(reader, bytes(data), tmp_path, f"flip{i}.bin")
        assert proc.returncode in (0, 1), (pos, proc.stdout, proc.stderr[-2000:])
        assert proc.returncode == 0 or proc.stdout.startswith("ERROR: "), proc.stdout
    proc = _read(reader, inmemoryfs.flatten_files({"model.mlpackage/x": b"1"}), tmp_path)
    assert proc.stdout == "ERROR: Core ML payload has no metadata.json\n"
    # an identifier is a directory name on the device: a path in it is refused
    meta = b'{"inputNames": ["x"], "outputNames": ["y"], "identifier": "../../etc"}'
    proc = _read(reader, inmemoryfs.flatten_files({"model.mlpackage/x": b"1", "metadata.json": meta}), tmp_path)
    assert proc.stdout == "ERROR: metadata.json has an identifier that is not [A-Za-z0-9_-]{1,128}\n"
    proc = _read(reader, b"", tmp_path)
    assert proc.stdout == "ERROR: the Core ML payload is empty\n"
