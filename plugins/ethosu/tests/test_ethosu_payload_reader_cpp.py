"""The C++ side of the Ethos-U delegate on a host.

The payload reader (runtime/src/vela_payload.cpp) is portable: it is built here with AddressSanitizer and
UndefinedBehaviorSanitizer and must read what ``etkit_ethosu.payload.pack`` writes exactly as
``etkit_ethosu.payload.unpack`` does, refuse corrupt payloads with a precise message and never read out of
bounds. The one intended difference: the C++ reader also refuses region-1 inputs and outputs that do not
fit in the scratch region (the delegate copies tensors to scratch + offset); ``unpack`` does not check that.

The delegate (runtime/src/ethosu_backend.cpp) needs the Ethos-U core driver, which no host has. It is built
here against a stand-in driver header (runtime/tests/fake_driver) and the installed etkit runtime, and run
by runtime/tests/ethosu_backend_main.cpp, whose driver functions simulate the NPU.

Sanitizer reports exit with 99, so an overread can never pass for the reader's own refusal (exit 1).
"""
from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from etkit_ethosu.payload import PayloadError, VelaIO, VelaPayload, pack, unpack

pytestmark = pytest.mark.sanitize

RUNTIME = Path(__file__).resolve().parents[1] / "runtime"
REPO_ROOT = Path(__file__).resolve().parents[3]
CXXFLAGS = ["-std=c++17", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all"]
SANITIZER_ENV = {**os.environ, "ASAN_OPTIONS": "exitcode=99:detect_leaks=1",
                 "UBSAN_OPTIONS": "exitcode=99:halt_on_error=1:print_stacktrace=1"}
HEADER = struct.Struct("<16sIB11s")


# ----------------------------------------------------------------------------------------- helpers

def _compile(out: Path, sources: list[Path], includes: list[Path], extra: tuple = ()) -> Path:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.fail("no C++ compiler: install build-essential (make system does)")
    cmd = [cxx, *CXXFLAGS, *extra, *[f"-I{p}" for p in includes], *map(str, sources), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def _fnv(data: bytes) -> str:
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def _describe(p: VelaPayload) -> str:
    """What runtime/tests/vela_payload_main.cpp prints for a payload read as ``p``."""
    lines = [f"CMD {len(p.cmd_data)} {_fnv(p.cmd_data)}", f"WEIGHTS {len(p.weight_data)} {_fnv(p.weight_data)}",
             f"SCRATCH {p.scratch_size}"]
    for kind, ios in (("INPUT", p.inputs), ("OUTPUT", p.outputs)):
        lines += [" ".join(map(str, (kind, i, *_io(io)))) for i, io in enumerate(ios)]
    lines.append("TOSA none" if p.tosa is None else f"TOSA {len(p.tosa)} {_fnv(p.tosa)}")
    return "\n".join(lines) + "\n"


def _fits_scratch(p: VelaPayload) -> bool:
    """Whether every region-1 input and output lies inside the scratch region (the C++ reader's extra rule)."""
    return all(io.offset + io.nbytes <= p.scratch_size for io in p.inputs + p.outputs if io.region == 1)


def _python_reading(data: bytes) -> VelaPayload | None:
    try:
        return unpack(data)
    except PayloadError:
        return None


def _run(exe: Path, data: bytes, path: Path, *args: str) -> subprocess.CompletedProcess:
    path.write_bytes(data)
    return subprocess.run([str(exe), str(path), *args], capture_output=True, text=True, errors="replace", timeout=120,
                          env=SANITIZER_ENV)


def _run_many(exe: Path, payloads: list[bytes], tmp_path: Path) -> list[subprocess.CompletedProcess]:
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return list(pool.map(lambda item: _run(exe, item[1], tmp_path / f"p{item[0]}.bin"), enumerate(payloads)))


def _check_sane(proc: subprocess.CompletedProcess, what) -> None:
    """The reader either read the payload (exit 0) or refused it with one ERROR line (exit 1)."""
    assert proc.returncode in (0, 1), (what, proc.returncode, proc.stdout, proc.stderr[-3000:])
    if proc.returncode == 1:
        assert proc.stdout.startswith("ERROR: ") and proc.stdout.count("\n") == 1, (what, proc.stdout)


def _block(name: bytes, data: bytes, *, external: int = 0, length: int | None = None, reserved: bytes = b"") -> bytes:
    """One block written by hand (unlike ``pack``, any name, flag or declared length)."""
    header = HEADER.pack(name, len(data) if length is None else length, external, reserved)
    return header + data + b"\0" * (-len(data) % 16)


def _io(io: VelaIO) -> tuple:
    """The nine int32 of an I/O record."""
    return (*io.shape, io.elem_size, io.offset, io.region)


def _ios(*records: tuple, count: int | None = None) -> bytes:
    """An inputs/outputs block: the count (by default, the number of records), then the records."""
    head = struct.pack("<i", len(records) if count is None else count)
    return head + b"".join(struct.pack("<9i", *r) for r in records)


def _blocks(p: VelaPayload) -> list[list]:
    """``[name, data]`` of every block ``pack(p)`` writes, to be edited before ``_join``."""
    blocks = [[b"vela_bin_stream", b""], [b"cmd_data", p.cmd_data], [b"weight_data", p.weight_data],
              [b"scratch_size", struct.pack("<I", p.scratch_size)],
              [b"inputs", _ios(*map(_io, p.inputs))], [b"outputs", _ios(*map(_io, p.outputs))]]
    if p.tosa is not None:
        blocks.append([b"tosa_graph", p.tosa])
    return blocks + [[b"vela_end_stream", b""]]


def _join(blocks: list[list]) -> bytes:
    return b"".join(_block(name, data) for name, data in blocks)


# ----------------------------------------------------------------------------------------- payloads

_rng = random.Random(1234)
_CMD = b"COP1" + bytes(_rng.randrange(256) for _ in range(100))  # 104 bytes: padded
_WEIGHTS = bytes(_rng.randrange(256) for _ in range(333))
_TOSA = bytes(_rng.randrange(256) for _ in range(77))
# Two inputs and two outputs; input 1 and output 0 share scratch offset 384, as Vela's I/O buffers do.
_IO_IN = [VelaIO((1, 1, 1, 8, 8, 4), 1, 768, 1), VelaIO((1, 1, 1, 2, 3, 4), 2, 384, 1)]
_IO_OUT = [VelaIO((1, 1, 1, 8, 8, 6), 1, 384, 1), VelaIO((1, 1, 1, 1, 2, 8), 4, 0, 1)]
BASIC = VelaPayload(_CMD, _WEIGHTS, 1024, _IO_IN, _IO_OUT)

CASES = {
    "two_in_two_out": BASIC,
    "with_tosa": VelaPayload(_CMD, _WEIGHTS, 1024, _IO_IN, _IO_OUT, _TOSA),
    "empty_tosa": VelaPayload(_CMD, _WEIGHTS, 1024, _IO_IN, _IO_OUT, b""),
    # the worked example of docs/design/ethosu-route.md section 2.5 (1424 bytes)
    "doc_example": VelaPayload(b"COP1" + bytes(628), bytes(range(256)) + bytes(128), 1024,
                               [VelaIO((1, 1, 1, 8, 8, 4), 1, 768, 1), VelaIO((1, 1, 1, 8, 8, 6), 1, 384, 1)],
                               [VelaIO((1, 1, 1, 8, 8, 6), 1, 384, 1), VelaIO((1, 1, 1, 8, 8, 6), 1, 0, 1)]),
    "minimal": VelaPayload(b"COP1", b"", 0, [], []),
    # element sizes 1, 2, 4, 8; the last input ends exactly at the end of the scratch region
    "elem_sizes": VelaPayload(_CMD, b"\x01" * 16, 200,
                              [VelaIO((1, 1, 1, 1, 2, 3), 8, 0, 1), VelaIO((1, 1, 1, 1, 1, 5), 4, 48, 1),
                               VelaIO((1, 1, 1, 1, 3, 7), 2, 70, 1), VelaIO((1, 1, 1, 1, 1, 88), 1, 112, 1)],
                              [VelaIO((2, 1, 1, 1, 1, 3), 4, 0, 1)]),
    # only region 1 is bounded by scratch_size: huge tensors in other regions are read as they are
    "other_regions": VelaPayload(_CMD, _WEIGHTS, 16, [VelaIO((1, 1, 1, 1, 1, 16), 1, 0, 1)],
                                 [VelaIO((2**31 - 1,) * 6, 8, 2**31 - 1, 2), VelaIO((1,) * 6, 8, 0, 0)], _TOSA),
}


# ----------------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def reader(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reader") / "vela_payload_main"
    return _compile(out, [RUNTIME / "src" / "vela_payload.cpp", RUNTIME / "tests" / "vela_payload_main.cpp"],
                    [RUNTIME / "include"])


def _etkit_prefix() -> Path:
    from etkit.native.cmake import NativeBuildError, core_prefix
    try:
        prefix = core_prefix()
    except NativeBuildError as e:
        pytest.fail(str(e))
    if not (prefix / "lib" / "libetkit_runtime_static.a").is_file():
        pytest.fail(f"{prefix}/lib/libetkit_runtime_static.a is missing: reinstall etkit from its wheel")
    return prefix


def _build_backend(out: Path, *defines: str) -> Path:
    prefix = _etkit_prefix()
    sources = [RUNTIME / "src" / "ethosu_backend.cpp", RUNTIME / "src" / "vela_payload.cpp",
               RUNTIME / "src" / "layer_estimates.cpp",
               RUNTIME / "tests" / "ethosu_backend_main.cpp", prefix / "lib" / "libetkit_runtime_static.a"]
    includes = [RUNTIME / "include", RUNTIME / "tests" / "fake_driver", prefix / "include"]
    return _compile(out, sources, includes, tuple(f"-D{d}" for d in defines))


@pytest.fixture(scope="module")
def backend(tmp_path_factory) -> Path:
    return _build_backend(tmp_path_factory.mktemp("backend") / "ethosu_backend_main")


# ----------------------------------------------------------------------------------------- reader

@pytest.mark.parametrize("case", sorted(CASES))
def test_cpp_reader_reads_what_pack_writes(reader, case, tmp_path):
    payload = CASES[case]
    data = pack(payload)
    assert unpack(data) == payload
    proc = _run(reader, data, tmp_path / "p.bin")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout == _describe(payload)
    if case == "doc_example":
        assert len(data) == 1424 and data[:16] == b"vela_bin_stream\0"


def test_every_truncation_is_refused(reader, tmp_path):
    data = pack(CASES["with_tosa"])
    cuts = list(range(len(data)))
    procs = _run_many(reader, [data[:cut] for cut in cuts], tmp_path)
    for cut, proc in zip(cuts, procs):
        _check_sane(proc, cut)
        assert proc.returncode == 1 and proc.stdout.startswith("ERROR: truncated payload: "), (cut, proc.stdout)
        with pytest.raises(PayloadError, match="^truncated payload"):
            unpack(data[:cut])
    # the messages say where: the last cut misses one byte of the footer's header
    footer = len(data) - 32
    assert procs[-1].stdout == f"ERROR: truncated payload: a block header at byte {footer} needs 32 bytes, 31 remain\n"
    assert procs[0].stdout == "ERROR: truncated payload: a block header at byte 0 needs 32 bytes, 0 remain\n"
    cmd_cut = 32 + 32 + 50  # 50 of the command stream's 112 padded bytes
    assert procs[cmd_cut].stdout == "ERROR: truncated payload: block 'cmd_data' needs 112 bytes, 50 remain\n"


def _structure(data: bytes) -> tuple[list[int], list[int], dict[bytes, int]]:
    """Byte positions of block headers, of the small blocks' data (magic, scratch_size, inputs, outputs,
    markers), and the offset of every block, in a well-formed payload."""
    headers, small, offsets, at = [], [], {}, 0
    while at < len(data):
        raw, length, _, _ = HEADER.unpack_from(data, at)
        name = raw.rstrip(b"\0")
        offsets[name] = at
        headers += range(at, at + 32)
        body = range(at + 32, at + 32 + length)
        small += body[:4] if name in (b"cmd_data", b"weight_data", b"tosa_graph") else body
        at += 32 + length + (-length % 16)
    return headers, small, offsets


def _mutate(data: bytes, rng: random.Random) -> bytes:
    headers, small, offsets = _structure(data)
    out = bytearray(data)
    kind = rng.random()
    if kind < 0.35:  # one byte of a header or of a small block
        out[rng.choice(headers + small)] = rng.randrange(256)
    elif kind < 0.5:  # one byte anywhere
        out[rng.randrange(len(out))] = rng.randrange(256)
    elif kind < 0.65:  # a block's declared length, a little off or anything
        at = rng.choice(list(offsets.values()))
        (length,) = struct.unpack_from("<I", out, at + 16)
        new = rng.choice([length + rng.randint(-20, 40), rng.randrange(2**32), 0, 2**32 - 1])
        struct.pack_into("<I", out, at + 16, new % 2**32)
    elif kind < 0.85:  # an int32 of the I/O records or of scratch_size, set to an edge value
        name = rng.choice([b"inputs", b"outputs", b"scratch_size"])
        length = struct.unpack_from("<I", out, offsets[name] + 16)[0]
        pos = offsets[name] + 32 + 4 * rng.randrange(max(1, length // 4))
        struct.pack_into("<i", out, pos, rng.choice([0, 1, -1, 2, 3, 8, 16, 2**31 - 1, -2**31, 1023, 1024, 1025,
                                                     rng.randrange(-2**31, 2**31)]))
    elif kind < 0.93:  # bytes added at the end or in the middle
        extra = bytes(rng.randrange(256) for _ in range(rng.choice([1, 15, 16, 32, rng.randrange(1, 64)])))
        pos = rng.choice([len(out), rng.randrange(len(out))])
        out[pos:pos] = extra
    else:  # a chunk removed
        pos = rng.randrange(len(out))
        del out[pos:pos + rng.choice([1, 16, 32, rng.randrange(1, 64)])]
    return bytes(out)


@pytest.mark.parametrize("case", ["with_tosa", "two_in_two_out"])
def test_random_mutations_agree_with_python(reader, case, tmp_path):
    """Refused or read, never a crash or an overread; and read exactly when ``unpack`` reads it (and the
    I/O fits in scratch), with the same result."""
    data = pack(CASES[case])
    rng = random.Random(case)
    mutants = [_mutate(data, rng) for _ in range(500)]
    procs = _run_many(reader, mutants, tmp_path)
    outcomes = {"read": 0, "refused": 0, "outside scratch": 0}
    for i, (mutant, proc) in enumerate(zip(mutants, procs)):
        _check_sane(proc, i)
        expected = _python_reading(mutant)
        if expected is not None and _fits_scratch(expected):
            assert proc.returncode == 0 and proc.stdout == _describe(expected), (i, mutant.hex(), proc.stdout)
            outcomes["read"] += 1
        elif expected is not None:  # unpack reads it, but an input or output lies outside the scratch region
            assert proc.returncode == 1 and "scratch region" in proc.stdout, (i, mutant.hex(), proc.stdout)
            outcomes["outside scratch"] += 1
        else:
            assert proc.returncode == 1, (i, mutant.hex(), proc.stdout)
            outcomes["refused"] += 1
    # the mutations exercise both sides: some payloads still read, most are refused
    assert outcomes["read"] >= 20 and outcomes["refused"] >= 200, outcomes


def _edited(**changes) -> bytes:
    """BASIC's blocks with some replaced: ``changes`` maps a block name to its new data."""
    blocks = _blocks(BASIC)
    for block in blocks:
        block[1] = changes.get(block[0].decode(), block[1])
    return _join(blocks)


_CMD_AT = 32
_WEIGHTS_AT = 32 + 32 + 112
_FOOTER_AT = len(pack(BASIC)) - 32
_CASES_REFUSED = {
    "empty": (b"", "truncated payload: a block header at byte 0 needs 32 bytes, 0 remain"),
    "external_cmd": (_join(_blocks(BASIC)[:1]) + _block(b"cmd_data", _CMD, external=1) + _join(_blocks(BASIC)[2:]),
                     "block 'cmd_data' at byte 32 is placed externally: externally placed blocks (named data) are "
                     "not supported by this reader"),
    "external_weights": (
        _join(_blocks(BASIC)[:2]) + _block(b"weight_data", bytes(64), external=1) + _join(_blocks(BASIC)[3:]),
        f"block 'weight_data' at byte {_WEIGHTS_AT} is placed externally: externally placed blocks (named data) are "
        "not supported by this reader"),
    "trailing_16": (pack(BASIC) + bytes(16), "16 bytes follow the vela_end_stream footer"),
    "trailing_1": (pack(BASIC) + b"\x01", "1 bytes follow the vela_end_stream footer"),
    "two_footers": (pack(BASIC) + _block(b"vela_end_stream", b""), "32 bytes follow the vela_end_stream footer"),
    "non_empty_header": (_edited(vela_bin_stream=b"\0"), "the header and footer blocks must be empty"),
    "non_empty_footer": (_edited(vela_end_stream=b"x" * 20), "the header and footer blocks must be empty"),
    "no_magic": (_edited(cmd_data=b"COP2" + _CMD[4:]), 'the command stream does not start with "COP1"'),
    "short_cmd": (_edited(cmd_data=b"COP"), 'the command stream does not start with "COP1"'),
    "empty_cmd": (_edited(cmd_data=b""), 'the command stream does not start with "COP1"'),
    "scratch_8_bytes": (_edited(scratch_size=bytes(8)), "block scratch_size is 8 bytes, expected 4"),
    "scratch_empty": (_edited(scratch_size=b""), "block scratch_size is 0 bytes, expected 4"),
    "unknown_block": (_join([[b"vela_bin_stream", b""], [b"cmd_dat", _CMD]]),
                      "block 'cmd_dat' at byte 32 is not an Ethos-U block"),
    "name_without_nul": (_join([[b"vela_bin_stream", b""], [b"cmd_data\xffABCDEFG", _CMD]]),
                         "block 'cmd_data\\xffABCDEFG' at byte 32 is not an Ethos-U block"),
    "swapped": (_join([_blocks(BASIC)[i] for i in (0, 2, 1, 3, 4, 5, 6)]),
                "block 'weight_data' at byte 32 is out of order (expected 'cmd_data')"),
    "tosa_too_early": (_join(_blocks(BASIC)[:5] + [[b"tosa_graph", b"t"]] + _blocks(BASIC)[5:]),
                       f"block 'tosa_graph' at byte {_FOOTER_AT - 112} is out of order (expected 'outputs')"),
    "inputs_twice": (_join(_blocks(BASIC)[:5] + _blocks(BASIC)[4:]),
                     f"block 'inputs' at byte {_FOOTER_AT - 112} is out of order (expected 'outputs')"),
    "footer_first": (_join([[b"vela_bin_stream", b""], [b"vela_end_stream", b""]]),
                     "block 'vela_end_stream' at byte 32 is out of order (expected 'cmd_data')"),
    "no_footer": (pack(BASIC)[:-32],
                  f"truncated payload: a block header at byte {_FOOTER_AT} needs 32 bytes, 0 remain"),
    "huge_length": (_join(_blocks(BASIC)[:2]) + HEADER.pack(b"weight_data", 2**32 - 1, 0, b"") + bytes(64),
                    "truncated payload: block 'weight_data' needs 4294967296 bytes, 64 remain"),
    "length_past_padding": (_join(_blocks(BASIC)[:1]) + HEADER.pack(b"cmd_data", 113, 0, b"") + _CMD + bytes(8),
                            "truncated payload: block 'cmd_data' needs 128 bytes, 112 remain"),
    # I/O records
    "count_too_high": (_edited(inputs=_ios(*map(_io, _IO_IN), count=3)),
                       "block inputs says 3 tensors but holds 76 bytes (expected 112)"),
    "count_too_low": (_edited(outputs=_ios(*map(_io, _IO_OUT), count=1)),
                      "block outputs says 1 tensors but holds 76 bytes (expected 40)"),
    "count_negative": (_edited(inputs=_ios(count=-1)), "block inputs says -1 tensors but holds 4 bytes (expected 4)"),
    "count_min_int": (_edited(inputs=_ios(count=-2**31)),
                      "block inputs says -2147483648 tensors but holds 4 bytes (expected 4)"),
    "count_huge": (_edited(inputs=_ios(count=2**31 - 1)),
                   "block inputs says 2147483647 tensors but holds 4 bytes (expected 77309411296)"),
    "no_count": (_edited(outputs=b"\0\0"), "block outputs is 2 bytes; it needs at least the 4-byte count"),
    "zero_dim": (_edited(inputs=_ios((1, 1, 1, 0, 8, 4, 1, 0, 1))),
                 "inputs[0]: dimension 3 of shape (1, 1, 1, 0, 8, 4) is not positive"),
    "negative_dim": (_edited(outputs=_ios(_io(_IO_OUT[0]), (1, 1, 1, 1, 2, -8, 4, 0, 1))),
                     "outputs[1]: dimension 5 of shape (1, 1, 1, 1, 2, -8) is not positive"),
    "elem_size_3": (_edited(outputs=_ios(_io(_IO_OUT[0]), (1, 1, 1, 1, 2, 8, 3, 0, 1))),
                    "outputs[1]: element size 3 is not 1, 2, 4 or 8"),
    "elem_size_0": (_edited(inputs=_ios((1, 1, 1, 1, 1, 1, 0, 0, 1))), "inputs[0]: element size 0 is not 1, 2, 4 or 8"),
    "elem_size_16": (_edited(inputs=_ios((1, 1, 1, 1, 1, 1, 16, 0, 1))),
                     "inputs[0]: element size 16 is not 1, 2, 4 or 8"),
    "negative_offset": (_edited(inputs=_ios((1, 1, 1, 1, 1, 1, 1, -16, 1))), "inputs[0]: offset -16 is negative"),
    "negative_region": (_edited(inputs=_ios((1, 1, 1, 1, 1, 1, 1, 0, -1))), "inputs[0]: region -1 is negative"),
    # region 1 must fit in scratch_size (1024); unpack does not check this
    "input_past_scratch": (_edited(inputs=_ios((1, 1, 1, 8, 8, 4, 1, 769, 1))),
                           "inputs[0]: 256 bytes at offset 769 do not fit in the 1024-byte scratch region (region 1)"),
    "output_larger_than_scratch": (
        _edited(outputs=_ios(_io(_IO_OUT[0]), (1, 1, 1, 1, 1, 257, 4, 0, 1))),
        "outputs[1]: 1028 bytes at offset 0 do not fit in the 1024-byte scratch region (region 1)"),
    "offset_max_int": (_edited(inputs=_ios((1, 1, 1, 1, 1, 1, 1, 2**31 - 1, 1))),
                       "inputs[0]: 1 bytes at offset 2147483647 do not fit in the 1024-byte scratch region (region 1)"),
    "no_scratch": (_edited(scratch_size=bytes(4)),
                   "inputs[0]: 256 bytes at offset 768 do not fit in the 0-byte scratch region (region 1)"),
    "huge_tensor": (_edited(inputs=_ios((2**31 - 1,) * 2 + (2**31 - 1,) + (1,) * 3 + (8, 0, 1))),
                    "inputs[0]: shape (2147483647, 2147483647, 2147483647, 1, 1, 1) of 8-byte elements is more than "
                    "2^64 bytes, far beyond the 1024-byte scratch region"),
    "tensor_2_pow_64": (_edited(inputs=_ios((65536, 65536, 65536, 65536, 1, 1, 1, 0, 1))),
                        "inputs[0]: shape (65536, 65536, 65536, 65536, 1, 1) of 1-byte elements is more than 2^64 "
                        "bytes, far beyond the 1024-byte scratch region"),
    # 6700417 * 65537 * 641 * 257 * 255 = 2^64 - 1: offset + bytes wraps around in 64 bits
    "tensor_wraps_64_bits": (_edited(inputs=_ios((6700417, 65537, 641, 257, 255, 1, 1, 1, 1))),
                             "inputs[0]: 18446744073709551615 bytes at offset 1 do not fit in the 1024-byte scratch "
                             "region (region 1)"),
    "tensor_below_2_pow_64": (_edited(inputs=_ios((65536, 65536, 65536, 65535, 1, 1, 1, 0, 1))),
                              "inputs[0]: 18446462598732840960 bytes at offset 0 do not fit in the 1024-byte scratch "
                              "region (region 1)"),
}


@pytest.mark.parametrize("case", sorted(_CASES_REFUSED))
def test_cpp_reader_refuses_with_a_precise_message(reader, case, tmp_path):
    data, message = _CASES_REFUSED[case]
    proc = _run(reader, data, tmp_path / "p.bin")
    assert (proc.returncode, proc.stdout) == (1, f"ERROR: {message}\n"), proc.stderr[-3000:]
    # unpack refuses it too, except what only this reader checks (I/O outside the scratch region)
    python = _python_reading(data)
    assert python is None or not _fits_scratch(python), case


@pytest.mark.parametrize("case,data", [
    ("input_at_scratch_end", _edited(inputs=_ios((1, 1, 1, 8, 8, 4, 1, 768, 1), (1, 1, 1, 1, 1, 1, 1, 1023, 1)))),
    ("name_with_bytes_after_nul", _join([[b"vela_bin_stream", b""], [b"cmd_data\0junk", _CMD]] + _blocks(BASIC)[2:])),
    ("reserved_bytes_set", _join(_blocks(BASIC)[:2]) + _block(b"weight_data", _WEIGHTS, reserved=b"\xff" * 11) +
     _join(_blocks(BASIC)[3:])),
    ("padding_not_zero", pack(BASIC).replace(_CMD + bytes(8), _CMD + b"\xaa" * 8)),
])
def test_cpp_reader_tolerates_what_unpack_tolerates(reader, case, data, tmp_path):
    """Both readers ignore the reserved bytes, the padding and what follows a name's NUL, and the scratch
    region may be filled to its last byte."""
    assert data != pack(BASIC)
    proc = _run(reader, data, tmp_path / "p.bin")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout == _describe(unpack(data))


@pytest.mark.parametrize("args,expected", [
    (("input", "0", "256", "1"), "MATCH"),
    (("input", "1", "24", "2"), "MATCH"),
    (("output", "1", "16", "4"), "MATCH"),
    (("input", "0", "256", "2"),
     "MISMATCH: the tensor has 2-byte elements, the command stream expects 1-byte elements"),
    (("input", "1", "48", "1"), "MISMATCH: the tensor has 1-byte elements, the command stream expects 2-byte elements"),
    (("output", "0", "383", "1"),
     "MISMATCH: the tensor has 383 elements, the command stream expects 384 (shape (1, 1, 1, 8, 8, 6))"),
    (("output", "1", str(2**64 - 1), "4"),
     "MISMATCH: the tensor has 18446744073709551615 elements, the command stream expects 16 "
     "(shape (1, 1, 1, 1, 2, 8))"),
], ids=["input0", "input1", "output1", "input0_elem_size", "input1_elem_size", "output0_numel", "output1_numel_max"])
def test_tensor_check_against_io_records(reader, args, expected, tmp_path):
    proc = _run(reader, pack(BASIC), tmp_path / "p.bin", "--match", *args)
    assert (proc.returncode, proc.stdout) == (0 if expected == "MATCH" else 1, expected + "\n"), proc.stderr[-3000:]


def test_tensor_check_of_a_record_beyond_64_bits(reader, tmp_path):
    data = pack(CASES["other_regions"])  # output 0: (2^31-1)^6 elements, only possible outside region 1
    proc = _run(reader, data, tmp_path / "p.bin", "--match", "output", "0", "1", "8")
    assert proc.returncode == 1 and proc.stdout == (
        "MISMATCH: the tensor has 1 elements, the command stream expects more than 2^64 "
        "(shape (2147483647, 2147483647, 2147483647, 2147483647, 2147483647, 2147483647))\n"), proc.stderr[-3000:]


# ----------------------------------------------------------------------------------------- delegate

def test_delegate_compiles_against_the_source_tree_headers(tmp_path):
    """ethosu_backend.cpp against runtime-cpp/include of this checkout (the harness below uses the installed
    etkit's headers, which must match its library)."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.fail("no C++ compiler: install build-essential (make system does)")
    for scratch_in_handle in ("0", "1"):
        proc = subprocess.run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                               f"-DETKIT_ETHOSU_SCRATCH_IN_HANDLE={scratch_in_handle}", f"-I{RUNTIME / 'include'}",
                               f"-I{RUNTIME / 'tests' / 'fake_driver'}", f"-I{REPO_ROOT / 'runtime-cpp' / 'include'}",
                               str(RUNTIME / "src" / "ethosu_backend.cpp")], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-4000:]


def _invokes(payload: VelaPayload, n: int) -> list[str]:
    return [f"INVOKE cmd={len(payload.cmd_data)} weights={len(payload.weight_data)} scratch={payload.scratch_size}"] * n


@pytest.mark.parametrize("scenario,placement", [("run", "in-place"), ("misaligned", "copied")])
def test_delegate_runs_the_command_stream(backend, scenario, placement, tmp_path):
    """init keeps (or, when misaligned, copies) the payload; execute hands the driver the command stream,
    weights and aligned scratch holding the inputs, and copies the NPU's outputs back (twice)."""
    for case in ("two_in_two_out", "with_tosa"):
        proc = _run(backend, pack(CASES[case]), tmp_path / "p.bin", scenario)
        assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
        assert proc.stdout.splitlines() == ["REGISTER 0", f"PAYLOAD {placement}", *_invokes(CASES[case], 2), "OK 2"]


_STAND_IN_DRIVER_CMAKE = """cmake_minimum_required(VERSION 3.21)
project(stand_in_ethosu_core_driver LANGUAGES CXX)
# what a firmware build gets from Arm's driver: the target ethosu_core_driver and its public header
add_library(ethosu_core_driver INTERFACE)
target_include_directories(ethosu_core_driver INTERFACE ${CMAKE_CURRENT_LIST_DIR}/include)
"""

_FIRMWARE_CMAKE = """cmake_minimum_required(VERSION 3.21)
project(firmware LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(etkit_ethosu CONFIG REQUIRED)
add_executable(firmware ${HARNESS})
target_link_libraries(firmware PRIVATE etkit_ethosu::delegate)
target_include_directories(firmware PRIVATE ${DRIVER_INCLUDE})
"""


def test_delegate_package_builds_with_etkit_add_delegate_and_runs_in_a_firmware_build(tmp_path):
    """The delegate half of plugins/ethosu/CMakeLists.txt (ETKIT_ETHOSU_CORE_DRIVER_DIR set), on the host
    compiler against a stand-in driver: it builds etkit_ethosu_delegate through etkit_add_delegate and installs
    the etkit_ethosu package; a firmware project finds it with find_package, links etkit_ethosu::delegate and runs
    the delegate harness (which defines the driver functions) on a payload."""
    from etkit.native.cmake import find_cmake

    prefix = _etkit_prefix()
    cmake, ninja = find_cmake()
    generator = ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"] if ninja else []
    driver = tmp_path / "ethos-u-core-driver"
    (driver / "include").mkdir(parents=True)
    shutil.copy(RUNTIME / "tests" / "fake_driver" / "ethosu_driver.h", driver / "include")
    (driver / "CMakeLists.txt").write_text(_STAND_IN_DRIVER_CMAKE)

    def step(*args: str) -> None:
        proc = subprocess.run([cmake, *args], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    build, installed = tmp_path / "build", tmp_path / "installed"
    step("-S", str(RUNTIME.parent), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={prefix}",
         f"-DPython_EXECUTABLE={sys.executable}", f"-DETKIT_ETHOSU_CORE_DRIVER_DIR={driver}")
    step("--build", str(build), "--target", "etkit_ethosu_delegate", "-j", "2")
    step("--install", str(build), "--prefix", str(installed))
    package = installed / "etkit_ethosu" / "lib" / "cmake" / "etkit_ethosu" / "etkit_ethosuConfig.cmake"
    assert package.is_file(), sorted(str(p.relative_to(installed)) for p in installed.rglob("*"))
    assert not (installed / "etkit_ethosu" / "bin").exists()  # the host payload check is no firmware's business

    firmware = tmp_path / "firmware"
    firmware.mkdir()
    (firmware / "CMakeLists.txt").write_text(_FIRMWARE_CMAKE)
    step("-S", str(firmware), "-B", str(firmware / "build"), *generator, "-DCMAKE_BUILD_TYPE=Release",
         f"-DCMAKE_PREFIX_PATH={installed};{prefix}", f"-DHARNESS={RUNTIME / 'tests' / 'ethosu_backend_main.cpp'}",
         f"-DDRIVER_INCLUDE={driver / 'include'}")
    step("--build", str(firmware / "build"), "-j", "2")
    proc = _run(firmware / "build" / "firmware", pack(CASES["two_in_two_out"]), tmp_path / "p.bin", "run")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["REGISTER 0", "PAYLOAD in-place", *_invokes(CASES["two_in_two_out"], 2),
                                        "OK 2"]


_EXECUTE_REFUSALS = {
    "bad-dtype": "EthosUBackend: input 0 has scalar type Float; the NPU exchanges Byte, Char, Short, Int and Bool "
                 "tensors",
    "bad-elem": "EthosUBackend: input 0: the tensor has 2-byte elements, the command stream expects 1-byte elements",
    "bad-numel": "EthosUBackend: input 0: the tensor has 192 elements, the command stream expects 256 "
                 "(shape (1, 1, 1, 8, 8, 4))",
    "bad-args": "EthosUBackend: 3 arguments, the command stream has 2 inputs and 2 outputs",
    "not-tensor": "EthosUBackend: input 0 is not a tensor",
    "no-temp": "EthosUBackend: the execution context has no temp allocator for the 1024 bytes of 16-byte aligned "
               "scratch; give the method a temp arena large enough, or build the delegate with "
               "ETKIT_ETHOSU_SCRATCH_IN_HANDLE=1",
    "small-temp": "EthosUBackend: the execution context's temp allocator cannot provide the 1024 bytes of 16-byte "
                  "aligned scratch; give the method a temp arena large enough, or build the delegate with "
                  "ETKIT_ETHOSU_SCRATCH_IN_HANDLE=1",
    "busy": "EthosUBackend: no Ethos-U driver is available (ethosu_reserve_driver)",
    "npu-error": "EthosUBackend: the NPU run failed (ethosu_invoke_v3 returned -1)",
}


@pytest.mark.parametrize("scenario", list(_EXECUTE_REFUSALS))
def test_delegate_refuses_to_execute(backend, scenario, tmp_path):
    message = _EXECUTE_REFUSALS[scenario]
    proc = _run(backend, pack(BASIC), tmp_path / "p.bin", scenario)
    invokes = _invokes(BASIC, 1) if scenario == "npu-error" else []
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["REGISTER 0", "PAYLOAD in-place", *invokes, f"EXECUTE ERROR: {message}"]


@pytest.mark.parametrize("data,message", [
    (_CASES_REFUSED["external_cmd"][0], "EthosUBackend: " + _CASES_REFUSED["external_cmd"][1]),
    (_CASES_REFUSED["input_past_scratch"][0], "EthosUBackend: " + _CASES_REFUSED["input_past_scratch"][1]),
    (b"", "EthosUBackend: " + _CASES_REFUSED["empty"][1]),
    (pack(CASES["other_regions"]), "EthosUBackend: output 0 is in Vela region 2; this delegate places inputs and "
                                   "outputs in the scratch region (1) only"),
], ids=["external_cmd", "input_past_scratch", "empty", "other_regions"])
def test_delegate_init_refuses_with_the_reader_message(backend, data, message, tmp_path):
    proc = _run(backend, data, tmp_path / "p.bin", "init")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["REGISTER 0", f"INIT ERROR: {message}"]


def test_delegate_with_scratch_in_handle_needs_no_temp_allocator(tmp_path):
    exe = _build_backend(tmp_path / "ethosu_backend_main", "ETKIT_ETHOSU_SCRATCH_IN_HANDLE=1")
    proc = _run(exe, pack(BASIC), tmp_path / "p.bin", "no-temp")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["REGISTER 0", "PAYLOAD in-place", *_invokes(BASIC, 1), "OK 1"]


# ----------------------------------------------------------------------------------------- real Vela output

def _vela_compiled(target: str) -> VelaPayload:
    """A one-operator TOSA graph (int8 CLAMP on 1x8x8x4) compiled by Vela for ``target``, TOSA kept."""
    import tosa_serializer as ts
    import ethosu.vela  # noqa: F401
    import numpy as np

    from etkit_ethosu.compile_spec import EthosUCompileSpec
    from etkit_ethosu.vela_compile import compile_tosa

    graph = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    block = graph.currRegion.currBasicBlock
    graph.addInputTensor(ts.TosaSerializerTensor("x", [1, 8, 8, 4], ts.DType.INT8))
    block.addTensor("y", [1, 8, 8, 4], ts.DType.INT8)
    clamp = ts.TosaSerializerAttribute()
    clamp.ClampAttribute(list(np.int8([-5]).view(np.uint8)), [100], ts.NanPropagationMode.PROPAGATE)
    graph.addOperator(ts.Op.CLAMP, ["x"], ["y"], clamp)
    graph.addOutputTensor(block.tensors["y"])
    tosa = bytes(graph.serialize())
    payload = compile_tosa(tosa, EthosUCompileSpec(target), estimate=False).payload
    payload.tosa = tosa
    return payload


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_cpp_reader_and_delegate_take_a_vela_compiled_payload(reader, backend, target, tmp_path):
    payload = _vela_compiled(target)
    data = pack(payload)
    proc = _run(reader, data, tmp_path / "p.bin")
    assert proc.returncode == 0 and proc.stdout == _describe(unpack(data)), proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.startswith(f"CMD {len(payload.cmd_data)} ") and "TOSA none" not in proc.stdout
    proc = _run(backend, data, tmp_path / "p.bin", "run")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["REGISTER 0", "PAYLOAD in-place", *_invokes(payload, 2), "OK 2"]


# ----------------------------------------------------------------------------------------- per-layer events

class _ConvStack(__import__("torch").nn.Module):
    def __init__(self):
        import torch
        super().__init__()
        torch.manual_seed(0)
        self.conv1 = torch.nn.Conv2d(3, 8, 3)
        self.conv2 = torch.nn.Conv2d(8, 8, 3)

    def forward(self, x):
        import torch
        return torch.relu(self.conv2(torch.relu(self.conv1(x)))) + 1


@pytest.fixture(scope="module")
def lowered_partition():
    """A quantized two-convolution model lowered to Ethos-U: its delegate (payload, named data, debug handle map)
    and the Edge program's node types by debug handle."""
    import torch
    from ethosu_helpers import lower
    from etkit.backend.delegate import LoweredBackendModule

    manager = lower(_ConvStack(), (torch.randn(1, 3, 16, 16),)).manager
    ep = manager.exported_program()
    (delegate,) = [getattr(ep.graph_module, n.target) for n in ep.graph.nodes if n.op == "get_attr"
                   and isinstance(getattr(ep.graph_module, n.target), LoweredBackendModule)]
    targets = {n.meta["debug_handle"]: str(n.target) for n in delegate.original_module.graph.nodes
               if isinstance(n.meta.get("debug_handle"), int)}
    return delegate, targets


def test_preprocess_stores_vela_layer_estimates_mapped_to_edge_nodes(lowered_partition):
    """Beside the payload (unchanged, ExecuTorch's), the named data holds Vela's per-layer estimates under the
    command stream's key, and the debug handle map sends each layer to the Edge nodes of its TOSA operator:
    both convolutions' layers reach their aten.convolution node."""
    from etkit_ethosu.compile_spec import EthosUCompileSpec
    from etkit_ethosu.layer_estimates import named_data_key, unpack_layer_estimates
    from etkit_ethosu.reference import delegate_tosa
    from etkit_ethosu.vela_compile import compile_tosa

    delegate, targets = lowered_partition
    payload = unpack(delegate.processed_bytes)
    layers = unpack_layer_estimates(delegate.named_data[named_data_key(payload.cmd_data)])
    vela = compile_tosa(delegate_tosa(delegate), EthosUCompileSpec.from_list(delegate.compile_specs), estimate=True)
    assert [c for c, _ in layers] == [layer.op_cycles for layer in vela.layers]
    assert all(text.endswith(" (Vela estimate)") for _, text in layers)
    mapped = delegate.debug_handle_map
    # every layer maps but those on tensors Vela made itself ("Transpose #vela": layout changes it inserted)
    assert sorted(mapped) == [k for k, (_, text) in enumerate(layers) if " #" not in text]
    conv_layers = [k for k, (_, text) in enumerate(layers) if text.startswith("Conv2D ")]
    assert len(conv_layers) == 2
    for k in conv_layers:
        assert "aten.convolution.default" in {targets[h] for h in mapped[k]}


def test_traced_delegate_logs_one_event_per_layer(backend, lowered_partition, tmp_path):
    """With an event tracer, execute() logs each Vela layer after the NPU run: ids 0..n-1, the estimates' labels,
    durations in the proportion of the estimated cycles (within 1 us of rounding) that sum to the run's time
    (the stand-in NPU takes 2 ms). Without a tracer, or without the named data, no layer event."""
    from etkit_ethosu.layer_estimates import named_data_key, unpack_layer_estimates

    delegate, _ = lowered_partition
    data = delegate.processed_bytes
    key = named_data_key(unpack(data).cmd_data)
    blob = delegate.named_data[key]
    (tmp_path / "layers.bin").write_bytes(blob)
    layers = unpack_layer_estimates(blob)
    proc = _run(backend, data, tmp_path / "p.bin", "traced", str(tmp_path / "layers.bin"), key)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    events = [line.split(" ", 4) for line in proc.stdout.splitlines() if line.startswith("EVENT ")]
    assert proc.stdout.splitlines()[-1] == "OK 2" and len(events) == 2 * len(layers)
    total_cycles = sum(c for c, _ in layers)
    for run in ("0", "1"):
        mine = [e for e in events if e[1] == run]
        assert [int(e[2]) for e in mine] == list(range(len(layers)))
        assert [e[4] for e in mine] == [text for _, text in layers]
        durations = [int(e[3]) for e in mine]
        span = sum(durations)
        assert 2_000_000 <= span < 200_000_000
        for d, (cycles, _) in zip(durations, layers):
            assert abs(d - span * cycles / total_cycles) <= 1000
    for args in (("run", str(tmp_path / "layers.bin"), key), ("traced", str(tmp_path / "layers.bin"), "other"),
                 ("traced",)):
        proc = _run(backend, data, tmp_path / "p.bin", *args)
        assert proc.returncode == 0 and "EVENT" not in proc.stdout, (args, proc.stdout + proc.stderr[-3000:])


@pytest.mark.parametrize("blob,message", [
    (b"EUL1\x01\x00\x00\x00", "layer estimates: 1 layers cannot fit in 8 bytes"),
    (b"EUL1\x01\x00\x00\x00" + bytes(8) + b"\x05\x00abc\0", "layer estimates: the label of layer 0 (5 bytes) does not "
                                                           "fit or is not NUL-terminated"),
    (b"EUL1\x01\x00\x00\x00" + bytes(8) + b"\x02\x00ab", "layer estimates: the label of layer 0 (2 bytes) does not "
                                                        "fit or is not NUL-terminated"),
    (b"EUL1\x00\x00\x00\x00!", "layer estimates: 1 bytes after the last layer"),
    (b"EUL0", "layer estimates: no EUL1 header in 4 bytes"),
], ids=["count", "label-past-end", "no-nul", "trailing", "magic"])
def test_traced_delegate_refuses_malformed_estimates(backend, lowered_partition, blob, message, tmp_path):
    from etkit_ethosu.layer_estimates import named_data_key

    delegate, _ = lowered_partition
    data = delegate.processed_bytes
    key = named_data_key(unpack(data).cmd_data)
    (tmp_path / "layers.bin").write_bytes(blob)
    proc = _run(backend, data, tmp_path / "p.bin", "traced", str(tmp_path / "layers.bin"), key)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == f"INIT ERROR: EthosUBackend: named data '{key}': {message}"
