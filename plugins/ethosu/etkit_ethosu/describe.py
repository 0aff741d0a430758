"""What ``etkit inspect`` shows for an Ethos-U delegate (``BackendSpec.describe_payload``)."""
from __future__ import annotations

from .payload import unpack


def describe_payload(processed: bytes, compile_specs: dict) -> list[str]:
    """Lines describing one ``vela_bin_stream`` payload.

    Raises:
        etkit_ethosu.payload.PayloadError: the bytes are not an Ethos-U payload.
    """
    payload = unpack(processed)
    target = compile_specs.get("target", b"?").decode(errors="replace")
    tosa = compile_specs.get("tosa_spec", b"?").decode(errors="replace")
    lines = [f"Ethos-U target {target} ({tosa}); command stream {len(payload.cmd_data)} bytes, "
             f"weights {len(payload.weight_data)} bytes, scratch {payload.scratch_size} bytes"]
    for kind, ios in (("input", payload.inputs), ("output", payload.outputs)):
        for i, io in enumerate(ios):
            shape = "x".join(str(d) for d in io.shape)
            lines.append(f"{kind} {i}: {shape}, {io.elem_size}-byte elements, scratch offset {io.offset} "
                         f"(region {io.region})")
    if payload.tosa is not None:
        lines.append(f"TOSA graph kept: {len(payload.tosa)} bytes (write it out with etkit inspect MODEL.pte --dump DIR)")
    return lines


def dump_payload(processed: bytes, compile_specs: dict, directory: str, stem: str) -> list[str]:
    """Write ``<stem>.cmd_data.bin`` (the command stream), ``<stem>.weight_data.bin`` and, when kept,
    ``<stem>.tosa`` (the TOSA 1.0 flatbuffer, for ``tosa_reference_model``, Vela or ``flatc`` with
    ``tosa.fbs``) into ``directory``; returns the paths."""
    import os

    payload = unpack(processed)
    parts = [("cmd_data.bin", payload.cmd_data), ("weight_data.bin", payload.weight_data)]
    if payload.tosa is not None:
        parts.append(("tosa", payload.tosa))
    written = []
    for suffix, data in parts:
        path = os.path.join(directory, f"{stem}.{suffix}")
        with open(path, "wb") as f:
            f.write(data)
        written.append(path)
    return written
