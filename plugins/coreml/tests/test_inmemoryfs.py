"""etkit_coreml.payload.inmemoryfs: ExecuTorch's flattened-directory format for Core ML payloads.

The oracle tests run ExecuTorch 1.5.1's native executorchcoreml functions in a subprocess
(tests/interop/oracle.py) and fail with the reason when that environment is unavailable.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from etkit_coreml.payload import inmemoryfs as imfs
from etkit_coreml.payload.inmemoryfs import InMemoryFSError

ORACLE_SCRIPT = Path(__file__).resolve().parent / "oracle_scripts" / "flatten.py"

FILES = {
    "metadata.json": b'{"identifier":"executorch_x","inputNames":["x"],"outputNames":["y"]}',
    "model.mlpackage/Manifest.json": b'{"fileFormatVersion": "1.0.0"}\n',
    "model.mlpackage/Data/com.apple.CoreML/model.mlmodel": bytes(range(256)) * 3,
    "model.mlpackage/Data/com.apple.CoreML/weights/weight.bin": b"\x00\x01" * 5000 + b"{}\"\\",
    "odd names/q\"uote {b}\\ \u00e9\u4e2d\x01\t": b"}\x00{",
    "odd names/zz": b"\n",
}


def _tree_on_disk(root: Path) -> dict[str, bytes | None]:
    """Files (path -> bytes) and directories (path -> None) under root, relative posix paths."""
    found: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            found[(Path(dirpath) / name).relative_to(root).as_posix()] = None
        for name in filenames:
            path = Path(dirpath) / name
            found[path.relative_to(root).as_posix()] = path.read_bytes()
    return found


def _write_tree(root: Path, files: dict[str, bytes], empty_dirs: tuple[str, ...] = ()) -> Path:
    root.mkdir(parents=True)
    for rel, contents in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(contents)
    for rel in empty_dirs:
        (root / rel).mkdir(parents=True)
    return root


def _craft(metadata: object, data: bytes = b"") -> bytes:
    """A payload with hand-made metadata (any JSON value, or raw text)."""
    text = metadata if isinstance(metadata, str) else json.dumps(metadata, separators=(",", ":"))
    return data + text.encode("utf-8")[::-1]


def _file(name: str, offset: int, size: int) -> dict:
    return {"children": {}, "dataRegion": {"offset": offset, "size": size}, "kind": 0, "name": name}


def _dir(name: str, children: dict) -> dict:
    return {"children": children, "dataRegion": {"offset": 0, "size": 0}, "kind": 1, "name": name}


def _reencode_in_payload_order(data: bytes) -> bytes:
    """Re-flatten a payload's contents visiting entries in the payload's own node order."""
    parsed = imfs._parse(data)
    items: list[object] = []
    for node in parsed.nodes:
        if node["kind"] == imfs.FILE_KIND:
            items.append(data[node["offset"]:node["offset"] + node["size"]])
        else:
            items.append({name: items[i] for name, i in sorted(node["children"].items(), key=lambda kv: kv[1])})
    return imfs._encode_tree(parsed.root_name, items[-1])


# ------------------------------------------------------------------------------------------ writer/reader


def test_known_layout():
    expected_json = ('{"nodes":[{"children":{},"dataRegion":{"offset":0,"size":2},"kind":0,"name":"a"},'
                     '{"children":{},"dataRegion":{"offset":2,"size":3},"kind":0,"name":"c"},'
                     '{"children":{"c":1},"dataRegion":{"offset":0,"size":0},"kind":1,"name":"b"},'
                     '{"children":{"a":0,"b":2},"dataRegion":{"offset":0,"size":0},"kind":1,"name":"r"}]}')
    data = imfs.flatten_files({"b/c": b"xyz", "a": b"hi"}, root_name="r")
    assert data == b"hixyz" + expected_json.encode()[::-1]


def test_round_trip_files():
    files = dict(FILES, **{"empty": b"", "d/e/f/empty2": b""})
    data = imfs.flatten_files(files)
    assert imfs.read_files(data) == files
    assert imfs.read_root_name(data) == imfs.DEFAULT_ROOT_NAME
    assert imfs.read_files(bytearray(data)) == files
    assert imfs.read_files(memoryview(data)) == files
    assert imfs.read_root_name(imfs.flatten_files(files, root_name="other")) == "other"


def test_output_is_sorted_and_deterministic():
    forward = imfs.flatten_files(FILES)
    backward = imfs.flatten_files(dict(reversed(list(FILES.items()))))
    assert forward == backward
    assert imfs.flatten_files({}) == imfs.flatten_files({}, root_name=imfs.DEFAULT_ROOT_NAME)
    assert imfs.read_files(imfs.flatten_files({})) == {}


def test_trailing_zero_and_whitespace_bytes_are_ignored():
    data = imfs.flatten_files(FILES)
    assert imfs.read_files(data + b"\x00" * 5000 + b" \n\t\x00") == FILES


def test_directory_round_trip(tmp_path):
    src = _write_tree(tmp_path / "lowered_module", FILES, empty_dirs=("empty_dir", "model.mlpackage/x/y"))
    data = imfs.flatten_directory(src)
    assert imfs.read_root_name(data) == "lowered_module"
    assert imfs.read_files(data) == FILES
    out = tmp_path / "out"
    out.mkdir()
    imfs.unflatten_directory(data, out)
    assert _tree_on_disk(out / "lowered_module") == _tree_on_disk(src)
    with pytest.raises(FileExistsError):
        imfs.unflatten_directory(data, out)
    # Without empty directories the directory and in-memory writers agree.
    src2 = _write_tree(tmp_path / "lowered_module2" / "lowered_module", FILES)
    assert imfs.flatten_directory(src2) == imfs.flatten_files(FILES)


def test_directory_writer_rejects_symlinks(tmp_path):
    src = _write_tree(tmp_path / "root", {"a": b"1"})
    (src / "link").symlink_to(src / "a")
    with pytest.raises(InMemoryFSError, match="symbolic link"):
        imfs.flatten_directory(src)


@pytest.mark.parametrize("files, message", [
    ({"": b"x"}, "invalid file name"),
    ({"a//b": b"x"}, "invalid file name"),
    ({"/abs": b"x"}, "invalid file name"),
    ({"a/../b": b"x"}, "invalid file name"),
    ({"./a": b"x"}, "invalid file name"),
    ({"a\x00b": b"x"}, "invalid file name"),
    ({"bad\udcff": b"x"}, "not valid UTF-8"),
    ({"a": b"x", "a/b": b"y"}, "is also a file"),
    ({"a/b": b"y", "a": b"x"}, "is also a directory"),
    ({"a": "text"}, "must be bytes-like"),
    ({1: b"x"}, "must be a str"),
])
def test_writer_rejects_bad_input(files, message):
    with pytest.raises(InMemoryFSError, match=message):
        imfs.flatten_files(files)


def test_writer_rejects_bad_root_name():
    with pytest.raises(InMemoryFSError, match="invalid file name"):
        imfs.flatten_files({"a": b"x"}, root_name="a/b")


# ------------------------------------------------------------------------------------------ corrupt input


GOOD_FILE = _file("a", 0, 3)


@pytest.mark.parametrize("data, message", [
    (b"", "empty or all zero"),
    (b"\x00" * 100, "empty or all zero"),
    (b"abc", "expected '{'"),
    ("not bytes", "expected bytes-like"),
    (_craft('{"nodes":['), "truncated"),
    (_craft('{"nodes":[', b"abc"), "not valid JSON"),
    (_craft('{"nodes":"' + "a" * (imfs.MAX_METADATA_BYTES + 10)), "truncated"),
    (_craft("{" + "[" * 100000), "nested too deeply|not valid JSON"),
    (_craft('{"nodes":[1,]}'), "not valid JSON"),
    (_craft('{"nodes":NaN}'), "non-JSON number"),
    (_craft('{"nodes":[],"nodes":[]}'), "duplicate key"),
    (_craft({"nodes": {}}), '"nodes" array'),
    (_craft({"nodes": []}), "no nodes"),
    (_craft({"nodes": [5]}), "not a JSON object"),
    (_craft({"nodes": [{"name": "r"}]}), "lacks"),
    (_craft({"nodes": [dict(_dir("r", {}), kind=2)]}), "unknown kind"),
    (_craft({"nodes": [dict(_dir("r", {}), kind=True)]}), "unknown kind"),
    (_craft({"nodes": [_dir("..", {})]}), "invalid file name"),
    (_craft({"nodes": [_dir("a/b", {})]}), "invalid file name"),
    (_craft({"nodes": [_dir("", {})]}), "invalid file name"),
    (_craft({"nodes": [_dir("r", [])]}), '"children" is not'),
    (_craft({"nodes": [dict(_dir("r", {}), dataRegion=3)]}), '"dataRegion" is not'),
    (_craft({"nodes": [_file("a", 0, 3)]}, b"abc"), "root .* is not a directory"),
    (_craft({"nodes": [_file("a", -1, 3), _dir("r", {"a": 0})]}, b"abc"), "non-negative integer"),
    (_craft({"nodes": [_file("a", 0, 3.0), _dir("r", {"a": 0})]}, b"abc"), "non-negative integer"),
    (_craft({"nodes": [_file("a", 1, 3), _dir("r", {"a": 0})]}, b"abc"), "runs past the end"),
    (_craft({"nodes": [_file("a", 0, 4), _dir("r", {"a": 0})]}, b"abc"), "runs past the end"),
    (_craft({"nodes": [dict(GOOD_FILE, children={"x": 0}), _dir("r", {"a": 0})]}, b"abc"), "file but has children"),
    (_craft({"nodes": [GOOD_FILE, _dir("r", {"a": 1})]}, b"abc"), "expected an earlier node"),
    (_craft({"nodes": [GOOD_FILE, _dir("r", {"a": 5})]}, b"abc"), "expected an earlier node"),
    (_craft({"nodes": [GOOD_FILE, _dir("r", {"a": "0"})]}, b"abc"), "non-negative integer"),
    (_craft({"nodes": [GOOD_FILE, _dir("r", {"b": 0})]}, b"abc"), "that node is named 'a'"),
    (_craft({"nodes": [GOOD_FILE, _dir("d", {"a": 0}), _dir("r", {"a": 0, "d": 1})]}, b"abc"), "child of both"),
    (_craft({"nodes": [GOOD_FILE, _dir("r", {})]}, b"abc"), "not reachable"),
    (_craft({"nodes": [GOOD_FILE, _dir("r", {"a": 0})]}, b"\xff\xfe\xfd") + b"\x80", "expected '{'"),
    (b"abc" + '{"nodes":[{"name":"\xff"}]}'.encode("latin-1")[::-1], "not valid UTF-8"),
])
def test_reader_rejects_corrupt_data(data, message, tmp_path):
    with pytest.raises(InMemoryFSError, match=message):
        imfs.read_files(data)
    with pytest.raises(InMemoryFSError, match=message):
        imfs.unflatten_directory(data, tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing is written for a bad payload


def test_reader_accepts_minimal_hand_made_payload():
    assert imfs.read_files(_craft({"nodes": [GOOD_FILE, _dir("r", {"a": 0})]}, b"abc")) == {"a": b"abc"}
    # Missing optional keys default like ExecuTorch's from_json: children {}, region (0, 0).
    assert imfs.read_files(_craft({"nodes": [{"kind": 1, "name": "r"}]})) == {}


def test_every_truncation_is_rejected():
    data = imfs.flatten_files({"a/b": b"hello", "c": b"world!"})
    for n in range(len(data)):
        with pytest.raises(InMemoryFSError):
            imfs.read_files(data[:n])
        if n:
            with pytest.raises(InMemoryFSError):
                imfs.read_files(data[n:])


def test_byte_corruption_never_escapes_as_another_error():
    data = imfs.flatten_files({"a/b": b"hello", "c": b"world!", "d": b""})
    for position in range(len(data)):
        for flip in (0x01, 0x20, 0x80, 0xFF):
            corrupt = bytearray(data)
            corrupt[position] ^= flip
            try:
                imfs.read_files(bytes(corrupt))
            except InMemoryFSError:
                pass


# ------------------------------------------------------------------------------------------ oracle interop


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory):
    """Run the native flatten/unflatten once over several trees; return paths and per-op results."""
    from tests.interop.oracle import OracleError, run_in_oracle

    work = tmp_path_factory.mktemp("inmemoryfs_oracle")
    # Every directory holds one entry: the native entry order is forced, so the bytes must match.
    chain = _write_tree(work / "chain" / "lowered_module", {"a/b/c.bin": bytes(range(256)) * 4})
    # Realistic tree (no empty files: the native writer segfaults on them) plus an empty directory.
    full = _write_tree(work / "full" / "lowered_module", FILES, empty_dirs=("empty_dir",))
    # Our payloads for the native reader, including an empty file.
    ours = {
        "ours_full": imfs.flatten_directory(full),
        "ours_files": imfs.flatten_files(dict(FILES, **{"empty": b"", "x/empty2": b""})),
    }
    args: list[object] = ["flatten", chain, work / "chain.bin", "flatten", full, work / "full.bin"]
    for name, data in ours.items():
        (work / f"{name}.bin").write_bytes(data)
        (work / name).mkdir()
        args += ["unflatten", work / f"{name}.bin", work / name]
    try:
        proc = run_in_oracle(ORACLE_SCRIPT, *args)
    except OracleError as e:
        pytest.fail(f"ExecuTorch oracle unavailable or failed: {e}")
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(args) // 3, proc.stdout + proc.stderr
    for result in results:
        assert result["ok"], result
    return {"work": work, "chain": chain, "full": full}


@pytest.mark.oracle
def test_oracle_bytes_identical_when_order_is_forced(oracle_run):
    native = (oracle_run["work"] / "chain.bin").read_bytes()
    assert imfs.flatten_directory(oracle_run["chain"]) == native
    assert imfs.flatten_files({"a/b/c.bin": bytes(range(256)) * 4}) == native
    assert imfs.read_files(native) == {"a/b/c.bin": bytes(range(256)) * 4}


@pytest.mark.oracle
def test_oracle_payload_reads_and_reencodes_identically(oracle_run):
    native = (oracle_run["work"] / "full.bin").read_bytes()
    assert imfs.read_root_name(native) == "lowered_module"
    assert imfs.read_files(native) == FILES
    # The native writer's entry order is std::unordered_map order; visiting entries in that same order,
    # our writer reproduces the native bytes exactly.
    assert _reencode_in_payload_order(native) == native
    out = oracle_run["work"] / "reread"
    out.mkdir()
    imfs.unflatten_directory(native, out)
    assert _tree_on_disk(out / "lowered_module") == _tree_on_disk(oracle_run["full"])


@pytest.mark.oracle
def test_oracle_reads_our_payloads(oracle_run):
    work = oracle_run["work"]
    assert _tree_on_disk(work / "ours_full" / "lowered_module") == _tree_on_disk(oracle_run["full"])
    expected = dict(FILES, **{"empty": b"", "x/empty2": b""})
    on_disk = _tree_on_disk(work / "ours_files" / "lowered_module")
    assert {k: v for k, v in on_disk.items() if v is not None} == expected
