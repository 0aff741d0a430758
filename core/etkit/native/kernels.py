"""The portable kernel library's kernel list, and the kernels a program needs (selective build).

Source of truth: ``portable_kernels.inc`` (one ``ETKIT_PORTABLE_KERNEL("aten::add.out", add_out, "<signature>")``
line per kernel), installed with the core's headers; the C++ table, the kernels' argument unpacking and the
selective registration file are all built from it.
"""
from __future__ import annotations

import re
from pathlib import Path

from .cmake import NativeBuildError, core_prefix

_LINE = re.compile(r'^ETKIT_PORTABLE_KERNEL\("([^"]+)", ([A-Za-z0-9_]+),', re.M)


def portable_kernel_list_path() -> Path:
    return core_prefix() / "include" / "etkit" / "kernels" / "portable_kernels.inc"


def portable_kernels() -> dict[str, str]:
    """``{kernel name: C++ function}`` of the installed portable kernel library.

    Raises:
        NativeBuildError: the list is not installed (core installed without native parts).
    """
    path = portable_kernel_list_path()
    if not path.is_file():
        raise NativeBuildError(f"{path} is missing: reinstall etkit from its wheel")
    return dict(_LINE.findall(path.read_text()))


def kernels_to_link(pte: bytes, model: str) -> dict[str, str]:
    """``{kernel name: C++ function}`` for every kernel ``pte`` calls, in name order (a selective build).

    Raises:
        NativeBuildError: the portable library lacks a kernel the program calls (``model`` names the program).
        etkit.serialize.PteFormatError: ``pte`` is not a valid program.
    """
    table = portable_kernels()
    kernels = program_kernels(pte)
    absent = [k for k in kernels if k not in table]
    if absent:
        raise NativeBuildError(f"{model} calls kernels the portable library does not have: {', '.join(absent)}; "
                               f"re-lower so a backend takes these ops")
    return {k: table[k] for k in kernels}


def program_kernels(pte: bytes) -> list[str]:
    """Sorted kernel names the ``KernelCall``s of every method of ``pte`` use.

    Raises:
        etkit.serialize.PteFormatError: ``pte`` is not a valid program.
    """
    from etkit.serialize.requirements import program_requirements
    return sorted(program_requirements(pte).kernels)
