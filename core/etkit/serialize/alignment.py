"""Padding arithmetic shared by the .pte writer and reader."""

from __future__ import annotations


def padding_to(offset: int, alignment: int) -> int:
    """Bytes of zero padding needed after ``offset`` to reach a multiple of ``alignment``."""
    return -offset % alignment


def align_up(offset: int, alignment: int) -> int:
    """``offset`` rounded up to the next multiple of ``alignment``."""
    return offset + padding_to(offset, alignment)


def is_power_of_two(value: int) -> bool:
    return isinstance(value, int) and value > 0 and value & (value - 1) == 0


def check_alignment(name: str, value: int) -> None:
    """Raise ValueError unless ``value`` is a positive power of two."""
    if not is_power_of_two(value):
        raise ValueError(f"{name} must be a positive power of two, got {value!r}")
