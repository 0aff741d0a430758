"""The portable kernel library's kernel list, and the kernels a program needs (selective build).

Source of truth: ``portable_kernels.inc`` (one ``ETKIT_PORTABLE_KERNEL("aten::add.out", add_out)``
line per kernel), installed with the core's headers; the C++ table and the selective registration
file are both built from it.
"""
from __future__ import annotations

import re
from pathlib import Path

from .cmake import NativeBuildError, core_prefix

_LINE = re.compile(r'^ETKIT_PORTABLE_KERNEL\("([^"]+)", ([A-Za-z0-9_]+)\)', re.M)


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


def program_kernels(pte: bytes) -> list[str]:
    """Sorted kernel names the ``KernelCall``s of every method of ``pte`` use.

    Raises:
        etkit.serialize.PteFormatError: ``pte`` is not a valid program.
    """
    from etkit.serialize.requirements import program_requirements
    return sorted(program_requirements(pte).kernels)
