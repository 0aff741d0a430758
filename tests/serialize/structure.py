"""Compare flatbuffer object-API trees by value (numpy arrays, bytes and str normalised)."""

from __future__ import annotations


def as_plain(obj):
    """ProgramT and friends -> nested dicts/lists of ints, floats, str."""
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    if isinstance(obj, (bytes, str)):
        return obj.decode("utf-8") if isinstance(obj, bytes) else obj
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (list, tuple)):
        return [as_plain(v) for v in obj]
    return {k: as_plain(v) for k, v in sorted(vars(obj).items())}


def plans(program) -> list:
    return as_plain(program.executionPlan)
