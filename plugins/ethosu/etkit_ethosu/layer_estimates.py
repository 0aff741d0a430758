"""Vela's per-layer estimates, stored in the program for the delegate's ETDump events.

An Ethos-U NPU runs a whole command stream per delegate call; the driver does not time its layers. So that an
ETDump still shows where a partition's time goes, ``preprocess`` stores Vela's per-layer cycle estimates (see
:class:`~etkit_ethosu.vela_compile.LayerEstimate`) in the program's named data, and the delegate, when the
Method is traced, logs one event per layer after each run: the run's measured time split by the layers'
estimated cycles, each labelled ``"... (Vela estimate)"``. Events carry the layer's index as delegate debug
id; ``PreprocessResult.debug_handle_map`` maps it to the Edge nodes whose TOSA operator the layer runs.

The blob lives under a key derived from the command stream (:func:`named_data_key`), so the payload itself
stays byte-identical to ExecuTorch's and ExecuTorch's runtime, which never asks for the key, ignores it.
Layout (little-endian): ``b"EUL1"``, uint32 layer count, then per layer uint64 estimated cycles, uint16
label length in bytes including its terminating NUL, the label (UTF-8, NUL-terminated). The C++ reader is
``runtime/src/layer_estimates.cpp``.
"""
from __future__ import annotations

import struct

MAGIC = b"EUL1"
#: Labels are cut to this many bytes (the runtime's event names hold 95 characters).
MAX_LABEL = 95
_FNV_OFFSET, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def fnv1a64(data: bytes) -> int:
    """64-bit FNV-1a of ``data`` (cheap enough for a microcontroller to compute at init)."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def named_data_key(cmd_data: bytes) -> str:
    """The named-data key of the estimates of the partition whose command stream is ``cmd_data``."""
    return f"etkit_ethosu.layers.{fnv1a64(cmd_data):016x}"


def label(layer) -> str:
    """The event label of a :class:`~etkit_ethosu.vela_compile.LayerEstimate`, e.g.
    ``"Conv2D clamped_12 (Vela estimate)"``, cut to :data:`MAX_LABEL` bytes keeping the suffix. A layer on a
    tensor Vela made itself (named ``"#<n>"``, numbered by a counter that runs on across compiles in one
    process) is labelled ``"Transpose #vela (Vela estimate)"``, so the stored bytes are the same every compile."""
    suffix = " (Vela estimate)"
    name = "#vela" if layer.name.startswith("#") else layer.name
    head = f"{layer.original_operator} {name}".encode()[:MAX_LABEL - len(suffix)].decode(errors="ignore")
    return head + suffix


def pack_layer_estimates(layers: list) -> bytes:
    """The blob for ``layers`` (:class:`~etkit_ethosu.vela_compile.LayerEstimate`, in Vela's order)."""
    out = [MAGIC, struct.pack("<I", len(layers))]
    for layer in layers:
        text = label(layer).encode() + b"\0"
        out.append(struct.pack("<QH", max(0, int(layer.op_cycles)), len(text)) + text)
    return b"".join(out)


def unpack_layer_estimates(data: bytes) -> list:
    """``[(cycles, label)]`` from a blob.

    Raises:
        ValueError: the bytes are not a well-formed blob (says where).
    """
    if len(data) < 8 or data[:4] != MAGIC:
        raise ValueError("not an Ethos-U layer estimates blob (no EUL1 header)")
    (count,) = struct.unpack_from("<I", data, 4)
    at, layers = 8, []
    for k in range(count):
        if at + 10 > len(data):
            raise ValueError(f"layer {k}: truncated at byte {at}")
        cycles, size = struct.unpack_from("<QH", data, at)
        at += 10
        if size == 0 or at + size > len(data) or data[at + size - 1] != 0:
            raise ValueError(f"layer {k}: label of {size} bytes does not fit or is not NUL-terminated")
        layers.append((cycles, data[at:at + size - 1].decode()))
        at += size
    if at != len(data):
        raise ValueError(f"{len(data) - at} bytes after the last layer")
    return layers


def layer_debug_handles(layers: list, owners: dict) -> dict:
    """``{layer index: Edge debug handles}``: each Vela layer is named after a TOSA tensor (``owners``:
    tensor -> handles, from the lowering); a tensor Vela derived from one of ours (``"clamped_23_int32"``) counts
    as that one. Layers on tensors of Vela's own (``"#394"``) map nowhere."""
    mapping = {}
    for k, layer in enumerate(layers):
        handles = owners.get(layer.name)
        if handles is None:
            prefixes = [n for n in owners if layer.name.startswith(n + "_")]
            handles = owners[max(prefixes, key=len)] if prefixes else None
        if handles:
            mapping[k] = tuple(handles)
    return mapping
