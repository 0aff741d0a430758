"""The directory ExecuTorch's Core ML runtime reads from a delegate payload, built deterministically.

Layout (a fact of ExecuTorch 1.5's Core ML format, ``backends/apple/coreml/compiler/coreml_preprocess.py``
in the ``executorch`` wheel); the directory is flattened into the payload with
:mod:`etkit_coreml.payload.inmemoryfs`::

    model.mlpackage/            the ML Program package coremltools saves (MODEL_TYPE.MODEL), or
    model.mlmodelc/             the package compiled by Core ML (MODEL_TYPE.COMPILED_MODEL, macOS only)
    metadata.json               {"inputNames": [...], "outputNames": [...], "identifier": "executorch_<id>"}
    debug_info.json             (when coremltools recorded debug handles) {"versionInfo", "debugSymbolToOperationPath",
                                 "debugSymbolToHandles"}

The runtime feeds the delegate's arguments to ``inputNames`` in order and returns ``outputNames`` in order.
Unlike ExecuTorch (which uses random UUIDs), the model identifier and the package manifest's item ids are
derived from the model's contents, so lowering the same program twice gives the same bytes.
"""
from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

MODEL_PACKAGE = "model.mlpackage"
COMPILED_MODEL = "model.mlmodelc"
METADATA = "metadata.json"
DEBUG_INFO = "debug_info.json"
#: Written into the package by coremltools' converter: debug handle -> MIL operation paths.
DEBUG_HANDLE_MAPPING = "executorch_debug_handle_mapping.json"


@dataclass
class ModelMetadata:
    """``metadata.json``: the Core ML model's input and output names (delegate argument order) and its id."""

    inputNames: list  # noqa: N815 - the format's field names
    outputNames: list  # noqa: N815
    identifier: str

    def to_json(self) -> str:
        return json.dumps({"inputNames": self.inputNames, "outputNames": self.outputNames,
                           "identifier": self.identifier})


def read_tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` as ``{relative posix path: bytes}``."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _stable_manifest(files: dict[str, bytes], prefix: str) -> None:
    """Replace the random item ids of ``<prefix>/Manifest.json`` with ids derived from the item paths
    and the model's contents."""
    key = f"{prefix}/Manifest.json"
    if key not in files:
        return
    manifest = json.loads(files[key])
    digest = hashlib.sha256(b"".join(files[k] for k in sorted(files) if k != key)).hexdigest()
    renamed = {}
    for old, entry in manifest.get("itemInfoEntries", {}).items():
        new = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{digest}/{entry.get('path', old)}")).upper()
        renamed[old] = new
    manifest["itemInfoEntries"] = {renamed[k]: v for k, v in manifest["itemInfoEntries"].items()}
    if manifest.get("rootModelIdentifier") in renamed:
        manifest["rootModelIdentifier"] = renamed[manifest["rootModelIdentifier"]]
    files[key] = json.dumps(manifest, indent=4, sort_keys=True).encode()


def _debug_info(mapping_json: bytes) -> Optional[dict]:
    """ExecuTorch's ``debug_info.json`` from coremltools' debug handle mapping (handles that are not
    integers are skipped; a debug symbol is ``<output name>:<operator>`` of the op path's last entry)."""
    try:
        data = json.loads(mapping_json)
    except ValueError:
        return None
    mapping = data.get("mapping") if isinstance(data, dict) else None
    if mapping is None:
        return None
    to_path, to_handles = {}, {}
    for handle, paths in mapping.items():
        try:
            value = int(handle)
        except (TypeError, ValueError):
            continue
        for path in paths:
            last = path[-1] if path else {}
            if "Output" not in last or "Operator" not in last:
                continue
            symbol = f"{last['Output']}:{last['Operator']}"
            to_handles.setdefault(symbol, []).append(value)
            to_path[symbol] = path
    return {"versionInfo": data.get("version", {}), "debugSymbolToOperationPath": to_path,
            "debugSymbolToHandles": to_handles}


def build_files(package_dir: Path, input_names: list, output_names: list,
                compiled_dir: Optional[Path] = None) -> tuple[dict[str, bytes], Optional[dict]]:
    """The payload directory as ``{path: bytes}`` from a saved ``.mlpackage`` (and, for a compiled
    model, the ``.mlmodelc`` Core ML produced), plus ``debugSymbolToHandles`` when recorded.

    Raises:
        ValueError: the model has no outputs (Core ML cannot run it).
    """
    if not output_names:
        raise ValueError("Core ML cannot run a model with no outputs")
    files = {f"{MODEL_PACKAGE}/{k}": v for k, v in read_tree(package_dir).items()}
    _stable_manifest(files, MODEL_PACKAGE)
    debug = None
    mapping = files.get(f"{MODEL_PACKAGE}/{DEBUG_HANDLE_MAPPING}")
    if mapping is not None:
        debug = _debug_info(mapping)
    if compiled_dir is not None:
        files = {f"{COMPILED_MODEL}/{k}": v for k, v in read_tree(compiled_dir).items()}
    digest = hashlib.sha256(b"".join(k.encode() + v for k, v in sorted(files.items()))).hexdigest()
    metadata = ModelMetadata(list(input_names), list(output_names), f"executorch_{digest[:32]}")
    files[METADATA] = metadata.to_json().encode()
    if debug is not None:
        files[DEBUG_INFO] = json.dumps(debug).encode()
    return files, (debug or {}).get("debugSymbolToHandles")
