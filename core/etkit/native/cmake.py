"""Where the installed etkit packages keep their CMake package configs, and which CMake to run.

Every etkit distribution with native parts (the core and each backend plugin) declares a
``cmake.prefix`` entry point naming its package; the package directory is a CMake prefix holding
``lib/cmake/<Package>/<Package>Config.cmake``. scikit-build-core adds these prefixes to
``CMAKE_PREFIX_PATH`` by itself; other builds use ``etkit cmake-prefix-path``.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

#: scikit-build-core's entry-point group for CMake prefixes.
CMAKE_PREFIX_GROUP = "cmake.prefix"


class NativeBuildError(RuntimeError):
    """A native build cannot be configured or failed; the message says what to install or change."""


def package_prefix(module: str) -> Path | None:
    """Directory of the installed package ``module`` (without importing it), or ``None``."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    # editable installs may list the source directory first; the CMake files live in the installed one
    for location in spec.submodule_search_locations:
        if (Path(location) / "lib" / "cmake").is_dir():
            return Path(location)
    return Path(list(spec.submodule_search_locations)[0])


def cmake_prefixes() -> dict[str, Path]:
    """``{entry-point name: prefix}`` for every installed distribution that exports a CMake package.

    Only prefixes holding a ``lib/cmake`` directory are returned, so an entry point of a package built
    without its native parts does not put a useless path on ``CMAKE_PREFIX_PATH``.
    """
    prefixes: dict[str, Path] = {}
    for ep in sorted(metadata.entry_points(group=CMAKE_PREFIX_GROUP), key=lambda e: e.name):
        module = ep.value.split(":")[0]
        if not (module == "etkit" or module.startswith("etkit_")):
            continue  # other projects' prefixes are not ours to print
        prefix = package_prefix(module)
        if prefix is not None and (prefix / "lib" / "cmake").is_dir():
            prefixes[ep.name] = prefix
    return prefixes


def core_prefix() -> Path:
    """The core package's prefix (``etkit/``: ``include/``, ``lib/``, ``share/etkit/runner``).

    Raises:
        NativeBuildError: the core was installed without its native parts.
    """
    prefix = package_prefix("etkit")
    if prefix is None or not (prefix / "lib" / "cmake" / "etkit").is_dir():
        raise NativeBuildError("etkit's CMake package (etkit/lib/cmake/etkit) is not installed: reinstall "
                               "etkit-runtime from its wheel (pip install etkit_runtime-*.whl)")
    return prefix


def find_cmake() -> tuple[str, str | None]:
    """``(cmake, ninja or None)`` executables: from PATH, else from the ``cmake``/``ninja`` PyPI packages.

    Raises:
        NativeBuildError: no CMake found, saying how to install it.
    """
    cmake = shutil.which("cmake")
    if cmake is None:
        try:
            import cmake as cmake_pkg  # the PyPI package
            cmake = os.path.join(cmake_pkg.CMAKE_BIN_DIR, "cmake")
        except ImportError:
            raise NativeBuildError("no CMake found: `pip install cmake ninja` (CMake >= 3.24 and a C++17 compiler "
                                   "are needed to build native runners)") from None
    ninja = shutil.which("ninja")
    if ninja is None:
        try:
            import ninja as ninja_pkg
            ninja = os.path.join(ninja_pkg.BIN_DIR, "ninja")
        except ImportError:
            ninja = None
    return cmake, ninja


def run_build_step(cmd: list[str], what: str, quiet: bool) -> None:
    """Runs one CMake configure or build command; ``quiet`` keeps its output unless it fails.

    Raises:
        NativeBuildError: the command failed (``what`` and the end of its output are in the message).
    """
    proc = subprocess.run(cmd, stdout=subprocess.PIPE if quiet else None, stderr=subprocess.STDOUT if quiet else None,
                          text=True)
    if proc.returncode != 0:
        output = (proc.stdout or "")[-6000:]
        raise NativeBuildError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{output}")
