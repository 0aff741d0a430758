"""What ``etkit inspect`` shows for a QNN payload, and what ``--dump`` writes."""
from __future__ import annotations

import json
import os
from dataclasses import asdict

from .compile_spec import QcomChipset
from .payload import unpack


def _tensor(t) -> str:
    if t.quantization is None:
        return f"{t.name}: float32{list(t.shape)}"
    q = t.quantization
    return (f"{t.name}: {q.dtype}{list(t.shape)} scale={q.scale:.6g} zero_point={q.zero_point} "
            f"(float32 at the delegate, converted on the CPU)")


def describe_payload(processed: bytes, compile_specs: dict | None = None) -> list[str]:
    """Lines: the QNN graph's name, the SoC and HTP architecture, precision, QNN SDK, context size and I/O."""
    p = unpack(processed)
    try:
        soc = f"{QcomChipset(p.soc_model).name} ({p.soc_model})"
    except ValueError:
        soc = str(p.soc_model)
    lines = [f"QNN graph: {p.graph_name}",
             f"soc model: {soc}, HTP architecture: v{p.htp_arch}, precision: {p.precision}",
             f"QNN SDK: {p.sdk_version or '?'}, context binary: {len(p.context_binary):,} bytes"]
    lines += [f"input {i}: {_tensor(t)}" for i, t in enumerate(p.inputs)]
    lines += [f"output {i}: {_tensor(t)}" for i, t in enumerate(p.outputs)]
    return lines


def dump_payload(processed: bytes, compile_specs: dict, directory: str, stem: str) -> list[str]:
    """Write ``<stem>.qnn_context.bin`` (the raw QNN context binary) and ``<stem>.qnn.json`` (the metadata)."""
    p = unpack(processed)
    binary = os.path.join(directory, f"{stem}.qnn_context.bin")
    with open(binary, "wb") as f:
        f.write(p.context_binary)
    meta = asdict(p)
    meta.pop("context_binary")
    meta["context_binary_bytes"] = len(p.context_binary)
    info = os.path.join(directory, f"{stem}.qnn.json")
    with open(info, "w") as f:
        json.dump(meta, f, indent=2)
    return [binary, info]
