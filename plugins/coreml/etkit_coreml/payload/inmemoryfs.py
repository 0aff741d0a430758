"""ExecuTorch's Core ML "inmemoryfs" flattened-directory format, in pure Python.

ExecuTorch's Core ML backend turns its ``lowered_module/`` directory into the delegate payload with the
native ``executorchcoreml.flatten_directory_contents(path)``; its runtime reads the payload back with
``inmemoryfs::make_from_buffer``. This module writes and reads the same bytes without the native code.

Sources of the format facts below (ExecuTorch, ``backends/apple/coreml/runtime/``):
``inmemoryfs/inmemory_filesystem.cpp`` (``populate``/``flatten``, ``InMemoryFileSystem::serialize``,
``make_from_buffer``/``unflatten``), ``inmemoryfs/inmemory_filesystem_utils.cpp`` and ``.mm``
(``serialize_metadata``), ``inmemoryfs/inmemory_filesystem_metadata_keys.hpp`` (key names),
``inmemoryfs/inmemory_filesystem_py.cpp`` (alignment choice) and ``util/json_util.cpp`` (metadata reader).
Checked byte for byte against ExecuTorch 1.5.1's wheel.

Layout (``N`` = payload length)::

    [0, D)          file contents, back to back
    [D, M)          zero padding up to the alignment (empty: the Python entry point uses alignment 1)
    [M, N)          the metadata JSON text, UTF-8, stored byte-reversed (so byte N-1 is ``{``)

There are no binary integers (hence no endianness): every offset and size is a decimal number in the JSON.
The JSON is compact (no whitespace) with object keys in sorted (bytewise) order::

    {"nodes":[NODE,...]}
    NODE = {"children":{NAME:INDEX,...},"dataRegion":{"offset":OFFSET,"size":SIZE},"kind":KIND,"name":NAME}

* ``kind`` is 0 for a file, 1 for a directory. A file's bytes are ``payload[offset:offset+size]``; its
  ``children`` is ``{}``. A directory has ``dataRegion`` ``{"offset":0,"size":0}`` and maps each entry name
  to that entry's index in ``nodes``.
* ``nodes`` is in post-order: each directory comes right after all its descendants, so every child index is
  smaller than its parent's and the last node is the root directory, named after the flattened directory's
  base name (ExecuTorch: ``lowered_module``). Paths are never stored, only names.
* File data is laid out in node order: a file starts at ``align(end of the previous file, A)`` (the first at
  0) and the metadata at ``align(end of the last file, A)``. ``flatten_directory_contents`` uses ``A = 1``
  (no padding at all) unless the alignment-1 payload would exceed 1 GiB; then it page-aligns file data
  relative to the *memory address* of the Python bytes buffer and over-allocates (trailing zeros), which is
  not reproducible across platforms. This writer always produces the ``A = 1`` layout; its reader accepts
  both, since offsets are explicit and trailing zero bytes are skipped.
* Strings are escaped as nlohmann::json's ``dump()`` does: ``\\"``, ``\\\\``, ``\\b \\f \\n \\r \\t``, other
  bytes below 0x20 as ``\\u00xx`` (lower-case hex); everything else (``/``, 0x7f, non-ASCII) is raw UTF-8.
  That is exactly ``json.dumps(..., ensure_ascii=False, separators=(",", ":"), sort_keys=True)``.
* No timestamps, permissions or other attributes are stored.
* Reading: skip trailing 0x00 and ASCII whitespace bytes, then read backwards: the first byte must be ``{``
  and the metadata ends at its matching ``}`` (ExecuTorch gives up beyond 10 MiB of metadata).

Entry order (the one thing not reproduced exactly): the native writer visits a directory's entries in
``std::unordered_map`` iteration order, which depends on the C++ library's string hash and the order
``readdir`` returned them in, so it is not a function of the directory contents. This writer visits
entries in sorted (bytewise UTF-8) order, so its output is deterministic. When every directory holds at
most one entry the bytes equal the native ones; otherwise they differ only by that permutation (the
nodes, their indices and the file data placement), and either reader reads either output.

Other native quirks: ``flatten_directory_contents`` crashes on empty files (this writer stores them as
zero-size regions, which the native reader accepts) and gives a symlinked entry its target's name (this
writer rejects symlinks).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping, Union

__all__ = [
    "DEFAULT_ROOT_NAME",
    "InMemoryFSError",
    "flatten_directory",
    "flatten_files",
    "read_files",
    "read_root_name",
    "unflatten_directory",
]

#: The directory name ExecuTorch's Core ML backend flattens (``coreml_preprocess.py``).
DEFAULT_ROOT_NAME = "lowered_module"
FILE_KIND = 0
DIRECTORY_KIND = 1
#: ExecuTorch's metadata reader stops after this many bytes (``json_util.hpp``).
MAX_METADATA_BYTES = 10 * 1024 * 1024

_SKIPPED_TRAILING = b"\x00 \t\n\v\f\r"
_KEY_CHILDREN, _KEY_REGION, _KEY_KIND, _KEY_NAME = "children", "dataRegion", "kind", "name"

BytesLike = Union[bytes, bytearray, memoryview]
#: A directory: entry name -> file contents or sub-directory, visited in the mapping's order.
Tree = Mapping[str, Union[BytesLike, "Tree"]]


class InMemoryFSError(ValueError):
    """Bytes that are not a valid flattened directory, or input that cannot be flattened."""


# --------------------------------------------------------------------------------------------- writer


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str):
        raise InMemoryFSError(f"{what}: name must be a str, got {type(name).__name__}")
    if name in ("", ".", "..") or "/" in name or "\x00" in name:
        raise InMemoryFSError(f"{what}: invalid file name {name!r}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InMemoryFSError(f"{what}: name {name!r} is not valid UTF-8") from e
    return name


def _encode_tree(root_name: str, tree: Tree) -> bytes:
    """Flatten ``tree`` visiting entries in the mapping's own order (the public API sorts first)."""
    _check_name(root_name, "root")
    nodes: list[dict] = []
    chunks: list[BytesLike] = []
    end = 0  # end of the data written so far (alignment 1: the next file's offset)

    def visit(name: str, item: Union[BytesLike, Tree], where: str) -> int:
        nonlocal end
        if isinstance(item, (bytes, bytearray, memoryview)):
            size = memoryview(item).nbytes
            region = {"offset": end, "size": size}
            nodes.append({_KEY_CHILDREN: {}, _KEY_REGION: region, _KEY_KIND: FILE_KIND, _KEY_NAME: name})
            chunks.append(item)
            end += size
        elif isinstance(item, Mapping):
            children = {}
            for child, value in item.items():
                child_where = f"{where}/{child}" if where else str(child)
                children[_check_name(child, child_where)] = visit(child, value, child_where)
            region = {"offset": 0, "size": 0}
            nodes.append({_KEY_CHILDREN: children, _KEY_REGION: region, _KEY_KIND: DIRECTORY_KIND, _KEY_NAME: name})
        else:
            raise InMemoryFSError(f"{where or '<root>'}: expected bytes or a directory mapping, "
                                  f"got {type(item).__name__}")
        return len(nodes) - 1

    visit(root_name, tree, "")
    text = json.dumps({"nodes": nodes}, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    chunks.append(text.encode("utf-8")[::-1])
    return b"".join(chunks)


def _sorted_tree(tree: Mapping) -> dict:
    return {name: (_sorted_tree(v) if isinstance(v, Mapping) else v) for name, v in sorted(tree.items())}


def flatten_files(files: Mapping[str, BytesLike], root_name: str = DEFAULT_ROOT_NAME) -> bytes:
    """Flatten ``{relative posix path: contents}`` as a directory named ``root_name``.

    Intermediate directories are implied by the paths; entries are visited in sorted order.
    Raises InMemoryFSError for an invalid path, a path that is both a file and a directory, or
    contents that are not bytes-like.
    """
    tree: dict = {}
    for path in files:
        if not isinstance(path, str):
            raise InMemoryFSError(f"path must be a str, got {type(path).__name__}: {path!r}")
        parts = path.split("/")
        for part in parts:
            _check_name(part, f"path {path!r}")
        contents = files[path]
        if not isinstance(contents, (bytes, bytearray, memoryview)):
            raise InMemoryFSError(f"path {path!r}: contents must be bytes-like, got {type(contents).__name__}")
        directory = tree
        for i, part in enumerate(parts[:-1]):
            directory = directory.setdefault(part, {})
            if not isinstance(directory, dict):
                raise InMemoryFSError(f"path {path!r}: {'/'.join(parts[:i + 1])!r} is also a file")
        if isinstance(directory.get(parts[-1]), dict):
            raise InMemoryFSError(f"path {path!r} is also a directory")
        directory[parts[-1]] = contents
    return _encode_tree(root_name, _sorted_tree(tree))


def _read_directory(path: Path) -> dict:
    tree: dict = {}
    with os.scandir(path) as entries:
        for entry in entries:
            where = os.path.join(path, entry.name)
            if entry.is_symlink():
                raise InMemoryFSError(f"{where}: symbolic links are not supported")
            if entry.is_dir():
                tree[entry.name] = _read_directory(Path(entry.path))
            elif entry.is_file():
                tree[entry.name] = Path(entry.path).read_bytes()
            else:
                raise InMemoryFSError(f"{where}: not a regular file or directory")
    return tree


def flatten_directory(path: Union[str, os.PathLike]) -> bytes:
    """Flatten the directory at ``path`` (like ``executorchcoreml.flatten_directory_contents``).

    The root node is named after the resolved directory's base name; empty directories are kept.
    """
    directory = Path(path).resolve()
    if not directory.is_dir():
        raise NotADirectoryError(f"not a directory: {directory}")
    return _encode_tree(directory.name, _sorted_tree(_read_directory(directory)))


# --------------------------------------------------------------------------------------------- reader


class _Parsed:
    """Validated metadata: ``nodes`` in payload order and the data area length."""

    def __init__(self, nodes: list[dict], data_end: int):
        self.nodes = nodes
        self.data_end = data_end

    @property
    def root_name(self) -> str:
        return self.nodes[-1][_KEY_NAME]

    def paths(self) -> list[str]:
        """Path of every node relative to the root ("" for the root). Parents come after children."""
        paths = [""] * len(self.nodes)
        for index in range(len(self.nodes) - 1, -1, -1):
            for name, child in self.nodes[index][_KEY_CHILDREN].items():
                paths[child] = f"{paths[index]}/{name}" if paths[index] else name
        return paths


def _last_significant_byte(view: memoryview) -> int:
    """Index of the last byte that is neither 0x00 nor ASCII whitespace, or -1."""
    end = len(view)
    while end > 0:
        start = max(0, end - 65536)
        stripped = bytes(view[start:end]).rstrip(_SKIPPED_TRAILING)
        if stripped:
            return start + len(stripped) - 1
        end = start
    return -1


def _reject_constant(token: str) -> None:
    raise InMemoryFSError(f"metadata contains the non-JSON number {token}")


def _no_duplicate_keys(pairs: list) -> dict:
    result = {}
    for key, value in pairs:
        if key in result:
            raise InMemoryFSError(f"metadata has duplicate key {key!r}")
        result[key] = value
    return result


def _uint(value: object, what: str) -> int:
    if type(value) is not int or value < 0:
        raise InMemoryFSError(f"{what} must be a non-negative integer, got {value!r}")
    return value


def _decode_metadata(view: memoryview, last: int) -> tuple[object, str]:
    """Decode the JSON object whose byte-reversed text ends at ``view[last]``; return it and its text."""
    decoder = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)
    window = 65536  # metadata is usually a few KiB: try a small window before the 10 MiB limit
    while True:
        window = min(window, MAX_METADATA_BYTES, last + 1)
        text = bytes(view[last + 1 - window:last + 1])[::-1].decode("utf-8", errors="surrogateescape")
        try:
            metadata, consumed = decoder.raw_decode(text)
            return metadata, text[:consumed]
        except json.JSONDecodeError as e:
            if window < min(MAX_METADATA_BYTES, last + 1):
                pass  # the window may have cut the metadata short: retry with a bigger one
            elif e.pos >= len(text) or e.msg.startswith("Unterminated"):
                raise InMemoryFSError(f"metadata is truncated: no complete JSON object in the last {window} "
                                      f"bytes of the payload ({e.msg})") from None
            else:
                raise InMemoryFSError(f"metadata is not valid JSON: {e.msg} at metadata char {e.pos}") from None
        except RecursionError:
            raise InMemoryFSError("metadata JSON is nested too deeply") from None
        window *= 16


def _parse(data: BytesLike) -> _Parsed:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InMemoryFSError(f"expected bytes-like data, got {type(data).__name__}")
    view = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
    last = _last_significant_byte(view)
    if last < 0:
        raise InMemoryFSError(f"no metadata: the {len(view)}-byte payload is empty or all zero/whitespace bytes")
    if view[last] != ord("{"):
        raise InMemoryFSError(f"no metadata: byte {last} (the last significant byte) is {view[last]:#04x}, "
                              "expected '{' (the start of the byte-reversed JSON)")
    metadata, json_text = _decode_metadata(view, last)
    data_end = last + 1 - len(json_text.encode("utf-8", errors="surrogateescape"))
    if any("\udc80" <= ch <= "\udcff" for ch in json_text):
        raise InMemoryFSError("metadata is not valid UTF-8")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("nodes"), list):
        raise InMemoryFSError('metadata must be a JSON object with a "nodes" array')
    nodes = metadata["nodes"]
    if not nodes:
        raise InMemoryFSError("metadata has no nodes")
    return _Parsed(_validate_nodes(nodes, data_end), data_end)


def _validate_nodes(raw_nodes: list, data_end: int) -> list[dict]:
    nodes: list[dict] = []
    parent_of: list[int] = []
    for index, raw in enumerate(raw_nodes):
        what = f"node {index}"
        if not isinstance(raw, dict):
            raise InMemoryFSError(f"{what} is not a JSON object")
        if _KEY_KIND not in raw or _KEY_NAME not in raw:
            raise InMemoryFSError(f'{what} lacks "{_KEY_KIND}" or "{_KEY_NAME}"')
        kind = raw[_KEY_KIND]
        if type(kind) is not int or kind not in (FILE_KIND, DIRECTORY_KIND):
            raise InMemoryFSError(f"{what} has unknown kind {kind!r} (0 = file, 1 = directory)")
        name = _check_name(raw[_KEY_NAME], what)
        region = raw.get(_KEY_REGION, {})
        children = raw.get(_KEY_CHILDREN, {})
        if not isinstance(region, dict):
            raise InMemoryFSError(f'{what} ({name!r}): "{_KEY_REGION}" is not a JSON object')
        if not isinstance(children, dict):
            raise InMemoryFSError(f'{what} ({name!r}): "{_KEY_CHILDREN}" is not a JSON object')
        offset = _uint(region.get("offset", 0), f"{what} ({name!r}) offset")
        size = _uint(region.get("size", 0), f"{what} ({name!r}) size")
        if kind == FILE_KIND:
            if children:
                raise InMemoryFSError(f"{what} ({name!r}) is a file but has children")
            if offset + size > data_end:
                raise InMemoryFSError(f"{what} ({name!r}) data [{offset}, {offset + size}) runs past the end "
                                      f"of the data area ({data_end} bytes)")
        for child_name, child in children.items():
            child = _uint(child, f"{what} ({name!r}) child {child_name!r} index")
            if child >= index:
                raise InMemoryFSError(f"{what} ({name!r}) child {child_name!r} has index {child}, "
                                      f"expected an earlier node")
            if parent_of[child] != -1:
                raise InMemoryFSError(f"node {child} is a child of both node {parent_of[child]} and node {index}")
            if nodes[child][_KEY_NAME] != child_name:
                raise InMemoryFSError(f"{what} ({name!r}) lists node {child} as {child_name!r}, "
                                      f"but that node is named {nodes[child][_KEY_NAME]!r}")
            parent_of[child] = index
        nodes.append({_KEY_KIND: kind, _KEY_NAME: name, _KEY_CHILDREN: dict(children), "offset": offset, "size": size})
        parent_of.append(-1)
    if nodes[-1][_KEY_KIND] != DIRECTORY_KIND:
        raise InMemoryFSError(f"the root (last node, {nodes[-1][_KEY_NAME]!r}) is not a directory")
    orphans = [i for i, parent in enumerate(parent_of[:-1]) if parent == -1]
    if orphans:
        raise InMemoryFSError(f"nodes {orphans[:10]} are not reachable from the root")
    return nodes


def read_root_name(data: BytesLike) -> str:
    """The root directory's name stored in a flattened payload (ExecuTorch: ``lowered_module``)."""
    return _parse(data).root_name


def read_files(data: BytesLike) -> dict[str, bytes]:
    """Every file in a flattened payload as ``{path relative to the root: contents}``, sorted by path.

    Empty directories are not represented. Raises InMemoryFSError (a ValueError) for bytes that are
    not a valid flattened directory.
    """
    parsed = _parse(data)
    view = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
    files = {}
    for node, path in zip(parsed.nodes, parsed.paths()):
        if node[_KEY_KIND] == FILE_KIND:
            files[path] = bytes(view[node["offset"]:node["offset"] + node["size"]])
    return dict(sorted(files.items()))


def unflatten_directory(data: BytesLike, path: Union[str, os.PathLike]) -> None:
    """Write a flattened payload out as ``path/<root name>/...`` (as ``unflatten_directory_contents`` does).

    ``path`` must be an existing directory and ``path/<root name>`` must not exist. The payload is
    validated completely before anything is written.
    """
    parsed = _parse(data)
    view = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
    target = Path(path)
    if not target.is_dir():
        raise NotADirectoryError(f"not a directory: {target}")
    root = target / parsed.root_name
    root.mkdir()
    # Parents come after their children in `nodes`, so create in reverse order.
    for node, rel in reversed(list(zip(parsed.nodes, parsed.paths()))):
        if not rel:
            continue
        if node[_KEY_KIND] == DIRECTORY_KIND:
            (root / rel).mkdir()
        else:
            (root / rel).write_bytes(view[node["offset"]:node["offset"] + node["size"]])
