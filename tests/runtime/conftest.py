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
    NAME.pte and NAME.pt ({"inputs", "outputs"}) for add, mlp, elementwise, reductions, convnet,
    shape_ops (see oracle_scripts/make_portable_programs.py)."""
    from tests.interop.oracle import OracleError, run_in_oracle

    out = tmp_path_factory.mktemp("et_programs")
    try:
        run_in_oracle(ORACLE_SCRIPTS / "make_portable_programs.py", out)
    except OracleError as exc:
        pytest.skip(f"ExecuTorch oracle unavailable: {exc}")
    return out


def _runner_from_build() -> Path | None:
    env = os.environ.get("ETKIT_RUNNER")
    if env:
        return Path(env)
    for candidate in (REPO_ROOT / "build" / "native" / "runner" / "etkit_runner",):
        if candidate.exists():
            return candidate
    return None


@pytest.fixture(scope="session")
def etkit_runner() -> Path:
    """The etkit_runner binary: $ETKIT_RUNNER, else build/native/runner/etkit_runner (what `make native`
    builds), else built now (portable kernels only) in build/native-pytest with
    `cmake -S runtime-cpp -B build/native-pytest -DETKIT_BUILD_RUNNER=ON`."""
    found = _runner_from_build()
    if found is not None:
        return found
    cmake = shutil.which("cmake", path=str(Path(sys.executable).parent)) or shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake not found; cannot build etkit_runner")
    build = REPO_ROOT / "build" / "native-pytest"
    lock = ["flock", "/tmp/etkit-build.lock"] if shutil.which("flock") else []
    generator = ["-G", "Ninja"] if shutil.which("ninja", path=str(Path(sys.executable).parent)) else []
    cfg = subprocess.run(
        [*lock, cmake, "-S", str(REPO_ROOT / "runtime-cpp"), "-B", str(build), *generator,
         "-DETKIT_BUILD_RUNNER=ON", f"-DPython_EXECUTABLE={sys.executable}"],
        capture_output=True, text=True,
    )
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    bld = subprocess.run([*lock, cmake, "--build", str(build), "--target", "etkit_runner", "-j2"],
                         capture_output=True, text=True)
    assert bld.returncode == 0, bld.stdout[-4000:] + bld.stderr[-4000:]
    return build / "runner" / "etkit_runner"
