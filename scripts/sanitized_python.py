"""Python tests against the runtime and delegates built with AddressSanitizer + UndefinedBehaviorSanitizer.

    python scripts/sanitized_python.py [--jobs J] [-- PYTEST_ARGS...]

What `make test-sanitize` runs after the C++ tests. The core (etkit._runtime, libetkit_runtime.so and the
portable kernels) and every plugin with a native delegate (XNNPACK, Vulkan, QNN) are built again with
`-fsanitize=address,undefined -fno-sanitize-recover=all` (gcc, the compiler their ordinary builds use) and
installed, not editable, into a venv of their own, build/sanitize-python/venv. That venv holds only these
packages; a path line (never the .pth files) appends the dev venv's site-packages, so torch, pytest and the
rest come from there while every `etkit*` import resolves to the sanitized builds. The pure-Python plugins
(Core ML, Ethos-U) are installed there too, so that every backend's entry point loads.

pytest then runs in that venv with gcc's ASan runtime preloaded (the interpreter is not built with it).
A sanitizer report ends the process with status 99, which fails the run. Leak checking is off: CPython and
torch keep allocations alive until exit by design; the C++ tests (`ctest` in build/sanitize) and the fuzz
targets check for leaks.

Builds are incremental (one scikit-build-core build directory per package under build/sanitize-python/).
Prebuilt third-party code (XNNPACK's static libraries, ONNX Runtime, Mesa's lavapipe) is not instrumented:
ASan still checks every access the etkit code makes to their buffers.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from lib.dev_env import PY, ROOT, run, site_packages, xnnpack_prefix  # scripts/lib/dev_env.py

BUILD = ROOT / "build" / "sanitize-python"
SAN_VENV = BUILD / "venv"
FLAGS = "-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=all -fno-omit-frame-pointer"
LOCK = "/tmp/etkit-build.lock"

# What the lane runs by default: the loaders' refusals (Python paths), ExecuTorch's programs, the hostile
# programs of the core and of the XNNPACK and Vulkan delegates, .ptd data files (damaged ones too), the ETDump
# writer and reader (with
# XNNPACK's per-operator events and a debug buffer too small), and the CI slice of the Core ATen op conformance
# suite (portable kernels). Not the tests that start native executables (etkit_runner, test_execute_no_alloc):
# `make test-sanitize` runs the runner's with its own ASan build. Not QNN's: its context binaries come from ONNX
# Runtime's QNN HTP compiler, which refuses every op with the ASan runtime preloaded ("QNN does not support:
# Gemm"); the QNN payload reader is fuzzed under ASan up to ONNX Runtime instead (fuzz_qnn_payload).
DEFAULT_ARGS = [
    "tests/runtime/test_load_errors.py",
    "tests/runtime/test_hostile_programs.py",
    "tests/runtime/test_et_programs.py",
    "tests/runtime/test_backends.py",
    "tests/ops/test_core_aten_ops.py",
    "plugins/xnnpack/tests/test_xnnpack_hostile_programs.py",
    "plugins/xnnpack/tests/test_xnnpack_runtime_numerics.py",
    "plugins/vulkan/tests/test_vulkan_runtime.py",
    "tests/devtools/test_etdump.py",
    "tests/runtime/test_ptd.py",
    "plugins/xnnpack/tests/test_xnnpack_ptd.py",
    "-k", "not runner and not allocates_no_heap_memory",
]


def _run(cmd, **kw) -> None:
    run("sanitized_python.py", cmd, **kw)


def _site(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def make_venv() -> Path:
    """build/sanitize-python/venv: its own site-packages first, then the dev venv's (a plain path line)."""
    site = _site(SAN_VENV)
    if not (SAN_VENV / "bin" / "python").exists():
        _run([sys.executable, "-m", "venv", "--without-pip", SAN_VENV])
    (site / "_etkit_dev_venv.pth").write_text(f"{site_packages()}\n")
    return site


def install(site: Path, jobs: int) -> None:
    cmake_defines = {
        "CMAKE_BUILD_TYPE": "RelWithDebInfo",
        "CMAKE_C_FLAGS": FLAGS, "CMAKE_CXX_FLAGS": FLAGS,
        "CMAKE_SHARED_LINKER_FLAGS": FLAGS, "CMAKE_MODULE_LINKER_FLAGS": FLAGS, "CMAKE_EXE_LINKER_FLAGS": FLAGS,
    }
    native = {
        ".": ({}, {}),
        "plugins/xnnpack": ({"XNNPACK_ROOT": xnnpack_prefix("sanitized_python.py")}, {"ETKIT_XNNPACK_BUILD_TESTS": "OFF"}),
        "plugins/vulkan": ({}, {}),
        "plugins/qnn": ({"ONNXRUNTIME_INCLUDE_DIR": subprocess.run(
            ["bash", ROOT / "scripts" / "onnxruntime_headers.sh"], check=True, capture_output=True,
            text=True).stdout.strip().splitlines()[-1]}, {}),
        "plugins/coreml": ({}, {}),  # the payload reader only (its delegate builds on Apple platforms)
        "plugins/ethosu": ({}, {}),  # the payload reader only (its delegate builds for an Ethos-U target)
    }
    pip = [PY, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--no-build-isolation",
           "--upgrade", "--target", site]
    for source, (env, defines) in native.items():
        name = "core" if source == "." else Path(source).name
        args = [f"-Ccmake.define.{k}={v}" for k, v in {**cmake_defines, **defines}.items()]
        args += [f"-Cbuild-dir={BUILD / name}", "-Ccmake.build-type=RelWithDebInfo", "-Cinstall.strip=false"]
        print(f"sanitized_python.py: building {name} with {FLAGS}", flush=True)
        _run(["flock", LOCK, *pip, *args, ROOT / source], cwd=ROOT,
             env={**os.environ, **env, "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs)})


def run_pytest(pytest_args: list[str], jobs: int) -> int:
    def gcc_file(name: str) -> str:
        return subprocess.run(["g++", f"-print-file-name={name}"], check=True, capture_output=True,
                              text=True).stdout.strip()
    env = {
        **os.environ,
        # libstdc++ too: ASan intercepts __cxa_throw and must find the real one when it starts, before the
        # first C++ extension module loads libstdc++.
        "LD_PRELOAD": f"{gcc_file('libasan.so')} {gcc_file('libstdc++.so')}",
        # exitcode=99: no test accepts it as a refusal. Leaks: see the module docstring.
        "ASAN_OPTIONS": "exitcode=99:detect_leaks=0:allocator_may_return_null=1:abort_on_error=0",
        "UBSAN_OPTIONS": "exitcode=99:print_stacktrace=1:halt_on_error=1",
        "ETKIT_SANITIZED": "1",
    }
    env.pop("PYTHONPATH", None)
    cmd = [SAN_VENV / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(jobs),
           "--dist", "loadfile", "--lane", "sanitize", *(pytest_args or DEFAULT_ARGS)]
    print("sanitized_python.py:", " ".join(map(str, cmd)), flush=True)
    return subprocess.run([str(c) for c in cmd], cwd=ROOT, env=env).returncode


def check_sanitized(site: Path) -> None:
    """The lane is worthless if the modules it imports are the dev venv's: check they link the ASan runtime."""
    modules = [*site.glob("etkit/_runtime*.so"), *site.glob("etkit/lib/libetkit_runtime.so"),
               *site.glob("etkit_*/_delegate*.so")]
    if len(modules) < 5:
        sys.exit(f"sanitized_python.py: expected etkit's and 3 delegates' modules in {site}, found {modules}")
    for module in modules:
        needed = subprocess.run(["readelf", "-d", module], check=True, capture_output=True, text=True).stdout
        if "libasan" not in needed:
            sys.exit(f"sanitized_python.py: {module} was not built with AddressSanitizer")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="build jobs and pytest workers")
    parser.add_argument("--no-build", action="store_true", help="run pytest on the last build")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest arguments (default: the lane's tests)")
    args = parser.parse_args(argv)
    site = make_venv()
    if not args.no_build:
        install(site, args.jobs)
    check_sanitized(site)
    return run_pytest(args.pytest_args, args.jobs)


if __name__ == "__main__":
    sys.exit(main())
