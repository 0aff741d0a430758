"""Bare-metal images: a ``.pte`` embedded in a Cortex-M55 program with the runtime and only the kernels it calls.

``etkit runner build --target cortex-m55 --model m.pte [--inputs x.npy]`` calls :func:`build_baremetal_image`:
it writes ``model_image.cpp`` (the program as a C array, the inputs, the kernel table of a selective build and
static arenas sized from the program's memory plan) and builds the CMake project the core ships in
``share/etkit/baremetal`` with Debian's ``arm-none-eabi-gcc`` and newlib. The runtime is compiled without
exceptions, RTTI, threads, a file system or an OS, and uses no heap after ``Program::load`` (seed pages
"Embedded Systems", "Portable C++ Programming", "Managing Tensor Memory in C++").

:func:`run_on_qemu` boots the image on QEMU's ``mps3-an547`` machine (Arm's MPS3 board with a Cortex-M55)
with semihosting and parses what the runner prints: the outputs, the memory it used and the heap
allocations it made after loading the program.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..scalar_types import NUMPY_DTYPE_NAMES
from .cmake import NativeBuildError, core_prefix, find_cmake, run_build_step
from .kernels import kernels_to_link

#: ``--target`` values and the toolchain file of each (in ``share/etkit/baremetal``).
TARGETS = {"cortex-m55": "toolchain-cortex-m55.cmake"}

#: QEMU machine that emulates the board the image is linked for (Arm MPS3 AN547: Cortex-M55).
QEMU_MACHINE = "mps3-an547"

#: Default sizes of the method allocator (the Method's own lists) and of the temp allocator (kernels'
#: scratch), in bytes; the planned arenas are sized from the program.
DEFAULT_METHOD_POOL_BYTES = 64 * 1024
DEFAULT_TEMP_POOL_BYTES = 64 * 1024

_APT_HINT = ("install Debian's gcc-arm-none-eabi, libnewlib-arm-none-eabi, libstdc++-arm-none-eabi-newlib and "
             "qemu-system-arm (scripts/setup_system.sh does)")


@dataclass
class BareMetalImage:
    """What :func:`build_baremetal_image` produced.

    Attributes:
        elf: the image (an ELF QEMU loads with ``-kernel``).
        target: the CPU it is built for, e.g. ``"cortex-m55"``.
        text, data, bss: section sizes in bytes, as ``arm-none-eabi-size`` prints them (``text`` holds code,
            read-only data and the embedded program; ``bss`` the static arenas).
        program_bytes: size of the embedded ``.pte``.
        kernels: the portable kernels registered (the selective build).
        planned_arena_bytes: size of each planned arena (one per ``mem_id``), in bytes.
        method_pool_bytes, temp_pool_bytes: sizes of the static method and temp allocator pools.
    """

    elf: Path
    target: str
    text: int
    data: int
    bss: int
    program_bytes: int
    kernels: list[str]
    planned_arena_bytes: list[int]
    method_pool_bytes: int
    temp_pool_bytes: int


@dataclass
class BareMetalRun:
    """What the image printed when it ran (:func:`run_on_qemu`).

    Attributes:
        outputs: the method's outputs: numpy arrays for tensors, Python numbers for scalars.
        planned_arena_bytes: bytes of each planned arena.
        method_allocator_bytes: bytes the Method took from the method allocator.
        temp_peak_bytes: the most bytes one instruction took from the temp allocator.
        heap_allocations_at_start_up: heap allocations up to and including ``Program::load`` (the runtime's
            program state), counted by the image's wrapped ``malloc``.
        heap_allocations_after_load: heap allocations in ``load_method``, ``set_input`` and ``execute`` (0: they
            ran in the static arenas alone).
        stdout: everything the runner printed.
    """

    outputs: list = field(default_factory=list)
    planned_arena_bytes: list[int] = field(default_factory=list)
    method_allocator_bytes: int = 0
    temp_peak_bytes: int = 0
    heap_allocations_at_start_up: int = -1
    heap_allocations_after_load: int = -1
    stdout: str = ""

    @property
    def peak_arena_bytes(self) -> int:
        """RAM the runtime used for this method: planned arenas + method allocator + temp peak, in bytes."""
        return sum(self.planned_arena_bytes) + self.method_allocator_bytes + self.temp_peak_bytes


class BareMetalRunError(RuntimeError):
    """The image failed to run: QEMU is missing, timed out, or the runner reported an error."""


def baremetal_project_dir() -> Path:
    """The installed bare-metal CMake project (``share/etkit/baremetal``)."""
    return core_prefix() / "share" / "etkit" / "baremetal"


def build_baremetal_image(out_dir: os.PathLike | str, model: os.PathLike | str,
                          inputs: Optional[Sequence] = None, method: str = "forward", target: str = "cortex-m55",
                          method_pool_bytes: int = DEFAULT_METHOD_POOL_BYTES,
                          temp_pool_bytes: int = DEFAULT_TEMP_POOL_BYTES, jobs: Optional[int] = None,
                          quiet: bool = True) -> BareMetalImage:
    """Build ``out_dir/etkit_baremetal_runner.elf``, which runs ``model``'s ``method`` once on ``inputs``.

    Args:
        out_dir: output directory (build tree in ``out_dir/build``).
        model: a ``.pte`` whose ``method`` runs on portable kernels alone (no delegate: a bare-metal image
            links no backend).
        inputs: one array per method input (numpy arrays, or anything ``np.asarray`` takes, e.g. CPU torch
            tensors), each with the dtype and shape the program plans; default: ones.
        method: the method to run.
        target: the CPU (:data:`TARGETS`).
        method_pool_bytes, temp_pool_bytes: sizes of the static method and temp allocator pools.
        jobs: parallel build jobs (default: CPU count).
        quiet: keep CMake's output unless the build fails.

    Raises:
        NativeBuildError: an unknown target, a program that delegates or calls a kernel the portable library
            lacks, inputs of the wrong count, dtype or shape, a missing cross compiler, or a failed build.
    """
    if target not in TARGETS:
        raise NativeBuildError(f"unknown bare-metal target {target!r}; known: {', '.join(TARGETS)}")
    pte = Path(model).read_bytes()
    from etkit.runtime import Runtime
    program = Runtime.get().load_program(pte)
    if method not in program.method_names:
        raise NativeBuildError(f"{model} has no method {method!r} (it has {', '.join(sorted(program.method_names))})")
    meta = program.metadata(method)
    if meta.backends:
        raise NativeBuildError(f"{model}: method {method!r} delegates to {', '.join(meta.backends)}; a bare-metal "
                               f"image runs portable kernels only: lower without a partitioner")
    kernels = kernels_to_link(pte, str(model))
    input_bytes = _input_bytes(meta, inputs)

    out = Path(out_dir).resolve()
    build_dir = out / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    image_source = out / "model_image.cpp"
    arenas = list(meta.memory_planned_buffer_sizes)
    image_source.write_text(model_image_source(pte, method, input_bytes, kernels, arenas,
                                               method_pool_bytes, temp_pool_bytes, source_name=Path(model).name))

    project = baremetal_project_dir()
    if not project.is_dir():
        raise NativeBuildError(f"{project} is missing: reinstall etkit from its wheel")
    if shutil.which("arm-none-eabi-g++") is None:
        raise NativeBuildError(f"arm-none-eabi-g++ not found: {_APT_HINT}")
    cmake, ninja = find_cmake()
    prefix = core_prefix()
    configure = [cmake, "-S", str(project), "-B", str(build_dir),
                 f"-DCMAKE_TOOLCHAIN_FILE={project / TARGETS[target]}",
                 f"-DETKIT_RUNTIME_SOURCE_DIR={prefix / 'share' / 'etkit' / 'runtime-src'}",
                 f"-DETKIT_INCLUDE_DIR={prefix / 'include'}", f"-DETKIT_MODEL_IMAGE={image_source}"]
    if ninja and not (build_dir / "CMakeCache.txt").exists():
        configure += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"]
    run_build_step(configure, "configuring the bare-metal image", quiet)
    run_build_step([cmake, "--build", str(build_dir), "-j", str(jobs or os.cpu_count() or 1)],
                   "building the bare-metal image", quiet)
    elf = out / "etkit_baremetal_runner.elf"
    shutil.copy2(build_dir / "etkit_baremetal_runner.elf", elf)
    text, data, bss = section_sizes(elf)
    return BareMetalImage(elf=elf, target=target, text=text, data=data, bss=bss, program_bytes=len(pte),
                          kernels=list(kernels), planned_arena_bytes=arenas, method_pool_bytes=method_pool_bytes,
                          temp_pool_bytes=temp_pool_bytes)


def _input_bytes(meta, inputs: Optional[Sequence]) -> list[bytes]:
    """Each input's bytes in the layout the program plans (its dtype, sizes and dim_order)."""
    infos = list(meta.inputs)
    if inputs is None:
        inputs = [None] * len(infos)
    if len(inputs) != len(infos):
        raise NativeBuildError(f"method {meta.name!r} takes {len(infos)} inputs; {len(inputs)} given")
    result = []
    for i, (value, info) in enumerate(zip(inputs, infos)):
        if info is None:
            raise NativeBuildError(f"method {meta.name!r} input {i} is a {meta.input_tags[i]}; the bare-metal "
                                   f"runner embeds tensor inputs only")
        dtype = NUMPY_DTYPE_NAMES.get(info.scalar_type)
        if dtype is None:
            raise NativeBuildError(f"input {i} has scalar type {info.scalar_type}, which numpy cannot hold")
        array = np.ones(info.sizes, dtype=dtype) if value is None else np.asarray(value)
        if array.dtype != np.dtype(dtype) or tuple(array.shape) != tuple(info.sizes):
            raise NativeBuildError(f"input {i}: the program plans {dtype}{list(info.sizes)}, got "
                                   f"{array.dtype}{list(array.shape)}")
        # dim_order lists the dimensions from outermost to innermost in memory
        result.append(np.ascontiguousarray(array.transpose(info.dim_order)).tobytes())
    return result


def model_image_source(pte: bytes, method: str, inputs: Sequence[bytes], kernels: dict[str, str],
                       arenas: Sequence[int], method_pool_bytes: int, temp_pool_bytes: int,
                       source_name: str = "model.pte") -> str:
    """The C++ of ``model_image.cpp`` (declared in ``share/etkit/baremetal/model_image.h``).

    Args:
        pte: the program's bytes.
        method: the method the runner runs.
        inputs: each input's bytes, in the planned layout.
        kernels: ``{kernel name: portable C++ function}`` to register.
        arenas: planned arena sizes in bytes (``MethodMeta.memory_planned_buffer_sizes``).
        method_pool_bytes, temp_pool_bytes: sizes of the method and temp allocator pools.
        source_name: named in the header comment.
    """
    planned = sum((n + 15) // 16 * 16 for n in arenas)
    lines = [f"// Generated by `etkit runner build --target` from {source_name}. Do not edit.",
             '#include "model_image.h"', "",
             "namespace etkit::portable {"]
    lines += [f"void {fn}(runtime::KernelRuntimeContext&, runtime::Span<runtime::EValue*>);"
              for fn in sorted(set(kernels.values()))]
    lines += ["}  // namespace etkit::portable", "",
              f"alignas(16) const uint8_t etkit_model_pte[{max(len(pte), 1)}] = {{", _c_bytes(pte), "};",
              f"const size_t etkit_model_pte_size = {len(pte)};",
              f"const char etkit_model_method[] = {_c_string(method)};"]
    for i, data in enumerate(inputs):
        lines += [f"alignas(16) static uint8_t input_{i}[{max(len(data), 1)}] = {{", _c_bytes(data), "};"]
    entries = "".join(f"{{input_{i}, {len(data)}}}, " for i, data in enumerate(inputs))
    lines += [f"const EtkitEmbeddedInput etkit_model_inputs[{max(len(inputs), 1)}] = {{{entries or '{nullptr, 0}'}}};",
              f"const size_t etkit_model_num_inputs = {len(inputs)};",
              f"const etkit::runtime::Kernel etkit_model_kernels[{len(kernels) + 1}] = {{"]
    lines += [f"    {{{_c_string(name)}, etkit::portable::{fn}}}," for name, fn in kernels.items()]
    lines += ["    {nullptr, nullptr},", "};", f"const size_t etkit_model_kernel_count = {len(kernels)};", ""]
    for pool, size in (("planned", planned), ("method", method_pool_bytes), ("temp", temp_pool_bytes)):
        lines += [f"alignas(16) uint8_t etkit_{pool}_pool[{max(size, 1)}];",
                  f"const size_t etkit_{pool}_pool_size = {size};"]
    return "\n".join(lines) + "\n"


def _c_bytes(data: bytes, per_line: int = 24) -> str:
    return "\n".join("  " + ",".join(f"0x{b:02x}" for b in data[i:i + per_line]) + ","
                     for i in range(0, len(data), per_line))


def _c_string(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_:.#@ -]*", text):
        raise NativeBuildError(f"name {text!r} has characters the generated C++ would have to escape")
    return f'"{text}"'


def section_sizes(elf: os.PathLike | str) -> tuple[int, int, int]:
    """``(text, data, bss)`` in bytes, as ``arm-none-eabi-size`` (Berkeley format) prints them."""
    size = shutil.which("arm-none-eabi-size")
    if size is None:
        raise NativeBuildError(f"arm-none-eabi-size not found: {_APT_HINT}")
    out = subprocess.run([size, str(elf)], check=True, capture_output=True, text=True).stdout.splitlines()
    text, data, bss = (int(v) for v in out[1].split()[:3])
    return text, data, bss


def run_on_qemu(elf: os.PathLike | str, timeout: float = 120.0) -> BareMetalRun:
    """Boot ``elf`` on QEMU's ``mps3-an547`` machine with semihosting and parse what the runner prints.

    Raises:
        BareMetalRunError: ``qemu-system-arm`` is missing, the run timed out (``timeout`` seconds), or the
            runner reported an error (its message, and QEMU's output, are in the exception's text).
    """
    qemu = shutil.which("qemu-system-arm")
    if qemu is None:
        raise BareMetalRunError(f"qemu-system-arm not found: {_APT_HINT}")
    cmd = [qemu, "-M", QEMU_MACHINE, "-nographic", "-monitor", "none", "-serial", "none",
           "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise BareMetalRunError(f"{elf} did not finish within {timeout} s on QEMU ({' '.join(cmd)})") from exc
    return parse_runner_output(proc.stdout, proc.stderr)


def parse_runner_output(stdout: str, stderr: str = "") -> BareMetalRun:
    """The :class:`BareMetalRun` of the bare-metal runner's printed lines (format in ``baremetal/main.cpp``).

    Raises:
        BareMetalRunError: no ``etkit-status ok`` line (the runner's error line is quoted).
    """
    run = BareMetalRun(stdout=stdout)
    status = None
    for line in stdout.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "etkit-output":
            index = int(parts[1])
            if parts[2] == "scalar":
                value = float(parts[3]) if any(c in parts[3] for c in ".eEn") else int(parts[3])
            elif parts[2] == "none":
                value = None
            else:
                sizes = () if parts[3] == "-" else tuple(int(s) for s in parts[3].split("x"))
                raw = bytes.fromhex(parts[4]) if len(parts) > 4 else b""
                code = int(parts[2])
                if code not in NUMPY_DTYPE_NAMES:
                    raise BareMetalRunError(f"output {index} has scalar type {code}, which numpy cannot hold")
                value = np.frombuffer(raw, dtype=NUMPY_DTYPE_NAMES[code]).reshape(sizes).copy()
            if index != len(run.outputs):
                raise BareMetalRunError(f"output {index} printed out of order:\n{stdout}")
            run.outputs.append(value)
        elif parts[0] == "etkit-memory":
            fields = dict(p.split("=", 1) for p in parts[1:])
            run.planned_arena_bytes = [int(v) for v in fields["planned"].split(",") if v]
            run.method_allocator_bytes = int(fields["method"])
            run.temp_peak_bytes = int(fields["temp"])
        elif parts[0] == "etkit-heap":
            fields = dict(p.split("=", 1) for p in parts[1:])
            run.heap_allocations_at_start_up = int(fields["start_up"])
            run.heap_allocations_after_load = int(fields["after_load_program"])
        elif parts[0] == "etkit-status":
            status = line[len("etkit-status "):]
    if status != "ok":
        reason = status[len("error "):] if status and status.startswith("error ") else status or "no status line"
        raise BareMetalRunError(f"the bare-metal runner failed: {reason}\n"
                                f"stdout:\n{stdout[-4000:]}\nstderr:\n{stderr[-4000:]}")
    return run

