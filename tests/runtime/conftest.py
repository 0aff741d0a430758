"""Fixtures for the runtime tests: ExecuTorch-made programs (made in the oracle process), programs
built directly with the generated flatbuffers classes, and the native etkit_runner binary."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
ORACLE_SCRIPTS = Path(__file__).parent / "oracle_scripts"


@pytest.fixture(scope="session")
def et_programs(tmp_path_factory) -> Path:
    """Directory of portable-only programs made by ExecuTorch 1.5.1 with eager references:
    NAME.pte and NAME.pt ({"inputs", "outputs", ...}) for add, mlp, elementwise, reductions, convnet,
    shape_ops, stateful, dynamic, vision (see oracle_scripts/make_portable_programs.py)."""
    from tests.interop.oracle import OracleError, run_in_oracle

    out = tmp_path_factory.mktemp("et_programs")
    try:
        run_in_oracle(ORACLE_SCRIPTS / "make_portable_programs.py", out)
    except OracleError as exc:
        pytest.fail(f"ExecuTorch oracle unavailable (run make oracle to see why): {exc}")
    return out


NATIVE_TARGETS = {"etkit_runner": "runner/etkit_runner", "test_execute_no_alloc": "tests/test_execute_no_alloc"}


@pytest.fixture(scope="session")
def native_build() -> Path:
    """A native build tree holding etkit_runner and the C++ test binaries: build/native (what
    `make native` builds) when it has them, else build/native-pytest, configured and built now with
    `cmake -S runtime-cpp -B build/native-pytest -DETKIT_BUILD_RUNNER=ON -DETKIT_BUILD_TESTS=ON`."""
    made = REPO_ROOT / "build" / "native"
    if all((made / rel).exists() for rel in NATIVE_TARGETS.values()):
        return made
    bindir = Path(sys.executable).parent
    cmake = shutil.which("cmake", path=str(bindir)) or shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake not found; cannot build the native tools")
    build = REPO_ROOT / "build" / "native-pytest"
    lock = ["flock", "/tmp/etkit-build.lock"] if shutil.which("flock") else []
    generator = ["-G", "Ninja"] if shutil.which("ninja", path=str(bindir)) else []
    cfg = subprocess.run(
        [*lock, cmake, "-S", str(REPO_ROOT / "runtime-cpp"), "-B", str(build), *generator,
         "-DETKIT_BUILD_RUNNER=ON", "-DETKIT_BUILD_TESTS=ON", f"-DPython_EXECUTABLE={sys.executable}"],
        capture_output=True, text=True,
    )
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    bld = subprocess.run([*lock, cmake, "--build", str(build), "-j2", "--target", *NATIVE_TARGETS],
                         capture_output=True, text=True)
    assert bld.returncode == 0, bld.stdout[-4000:] + bld.stderr[-4000:]
    return build


@pytest.fixture(scope="session")
def etkit_runner(native_build) -> Path:
    """The etkit_runner binary ($ETKIT_RUNNER if set)."""
    env = os.environ.get("ETKIT_RUNNER")
    return Path(env) if env else native_build / NATIVE_TARGETS["etkit_runner"]
