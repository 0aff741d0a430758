"""``etkit runner build``: a native ``etkit_runner`` for chosen backends, from the installed packages.

The core wheel ships the runner's sources (``etkit/share/etkit/runner``) and its static runtime and
portable-kernel libraries; each backend plugin ships its delegate as a static library with a CMake
package. This module configures that CMake project against them: every backend's register function
and the kernels are called from a generated list, so nothing depends on static initialisers or
``--whole-archive``. With a model, only the kernels the model calls are registered and the linker
drops the rest (selective build).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from .cmake import NativeBuildError, cmake_prefixes, core_prefix, find_cmake, run_build_step
from .kernels import kernels_to_link


@dataclass
class RunnerBuild:
    """What ``build_runner`` produced.

    Attributes:
        binary: path of the ``etkit_runner`` executable.
        size_bytes: its size on disk, in bytes.
        backends: backend ids linked in.
        kernels: portable kernels registered (``None``: all of them, no selective build).
    """

    binary: Path
    size_bytes: int
    backends: list[str]
    kernels: Optional[list[str]]


def resolve_backends(names: Sequence[str]):
    """BackendSpecs for ``names``: plugin entry-point names or backend ids (``etkit backends`` lists both).

    Raises:
        NativeBuildError: a name matches no installed backend, or the backend ships no native library.
    """
    from etkit.plugins import get_plugin_manager
    registry = get_plugin_manager().registry
    specs = []
    for name in names:
        matches = registry.find(name)
        if not matches:
            known = ", ".join(registry.names()) or "none"
            raise NativeBuildError(f"no installed backend named {name!r} (installed: {known}); pip install its "
                                   f"plugin, then check `etkit backends`")
        for spec in matches:
            if not (spec.cmake_package and spec.register_function):
                availability = spec.is_available()
                why = "" if availability else f" ({availability.reason})"
                raise NativeBuildError(f"backend {spec.backend_id!r} declares no native library (cmake_package / "
                                       f"register_function in its BackendSpec), so it cannot be linked into a "
                                       f"runner{why}")
            if spec not in specs:
                specs.append(spec)
    return specs


def backend_cmake_args(specs, prefix: str = "ETKIT_RUNNER") -> list[str]:
    """The CMake cache arguments that link ``specs``' delegates: ``-D<prefix>_PACKAGES=<pkg>;...`` (the packages
    to find) and ``-D<prefix>_BACKENDS=<target>=<register function>;...`` (what to link and call), read from
    each ``BackendSpec`` (``cmake_package``, ``cmake_target``, ``register_function``)."""
    packages = ";".join(dict.fromkeys(s.cmake_package for s in specs))
    backends = ";".join(f"{s.cmake_target or s.cmake_package + '::delegate'}={s.register_function}" for s in specs)
    return [f"-D{prefix}_PACKAGES={packages}", f"-D{prefix}_BACKENDS={backends}"]


def build_runner(out_dir: os.PathLike | str, backends: Sequence[str] = (), model: Optional[os.PathLike | str] = None,
                 strip: bool = False, jobs: Optional[int] = None, quiet: bool = True) -> RunnerBuild:
    """Configure and build ``etkit_runner`` into ``out_dir`` (build tree in ``out_dir/build``).

    Args:
        out_dir: output directory; the binary is ``out_dir/etkit_runner``.
        backends: plugins to link (entry-point names or backend ids); empty links none (portable only).
        model: a ``.pte``: register only the kernels it calls, and check that every backend it
            delegates to is among ``backends``.
        strip: strip symbols from the binary (smaller; no symbols for profilers).
        jobs: parallel build jobs (default: CPU count).
        quiet: keep CMake's output unless the build fails.

    Raises:
        NativeBuildError: unknown backend, model needs a backend or kernel that is not available,
            no CMake, or the configure/build failed (CMake's output is in the message).
    """
    out = Path(out_dir).resolve()
    specs = resolve_backends(list(backends))
    kernels: Optional[list[str]] = None
    if model is not None:
        data = Path(model).read_bytes()
        from etkit.serialize.requirements import program_requirements
        needed_backends = set(program_requirements(data).backends)
        missing = sorted(needed_backends - {s.backend_id for s in specs})
        if missing:
            raise NativeBuildError(f"{model} delegates to {', '.join(missing)}, which is not in --backends; add the "
                                   f"plugin that provides it")
        kernels = list(kernels_to_link(data, str(model)))

    cmake, ninja = find_cmake()
    prefixes = [str(p) for p in cmake_prefixes().values()]
    core = core_prefix()
    if str(core) not in prefixes:
        prefixes.insert(0, str(core))
    build_dir = out / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    configure = [cmake, "-S", str(core / "share" / "etkit" / "runner"), "-B", str(build_dir),
                 "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={';'.join(prefixes)}",
                 *backend_cmake_args(specs),
                 f"-DETKIT_RUNNER_SELECTIVE={'ON' if kernels is not None else 'OFF'}",
                 f"-DETKIT_RUNNER_KERNELS={';'.join(kernels or [])}",
                 f"-DETKIT_RUNNER_STRIP={'ON' if strip else 'OFF'}"]
    if ninja and not (build_dir / "CMakeCache.txt").exists():
        configure += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"]
    run_build_step(configure, "configuring the runner", quiet)
    run_build_step([cmake, "--build", str(build_dir), "-j", str(jobs or os.cpu_count() or 1)], "building the runner",
                   quiet)
    binary = out / "etkit_runner"
    shutil.copy2(build_dir / "etkit_runner", binary)
    return RunnerBuild(binary=binary, size_bytes=binary.stat().st_size, backends=[s.backend_id for s in specs],
                       kernels=kernels)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m etkit.native.runner_build --cmake-args mynpu,othernpu [--prefix ETKIT_TEST]``: prints
    :func:`backend_cmake_args` for those plugins, each argument quoted for a shell (the Makefile's native
    builds read it, so no build file repeats what a BackendSpec declares)."""
    import argparse
    import shlex
    import sys
    parser = argparse.ArgumentParser(prog="python -m etkit.native.runner_build")
    parser.add_argument("--cmake-args", required=True, help="comma-separated plugins (names or backend ids)")
    parser.add_argument("--prefix", default="ETKIT_RUNNER", help="the cache variables' prefix")
    args = parser.parse_args(argv)
    try:
        specs = resolve_backends([n for n in args.cmake_args.split(",") if n])
    except NativeBuildError as exc:
        print(f"python -m etkit.native.runner_build: {exc}", file=sys.stderr)
        return 1
    print(" ".join(shlex.quote(a) for a in backend_cmake_args(specs, args.prefix)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
