"""Run Python files inside the ExecuTorch 1.5.1 oracle environment, in a separate process.

ExecuTorch (the `executorch` wheel on PyPI) is a test oracle for etkit's interop tests: it loads
etkit's .pte files and makes .pte files for etkit to load. It is never a dependency of etkit and the
two never share a process. The oracle is a `pip install --target` directory made by
`scripts/et_oracle.sh` (cached in ~/.cache/etkit/et-oracle-1.5.1) and used with the main venv's
Python and torch.

    from tests.interop.oracle import run_in_oracle
    proc = run_in_oracle(Path(__file__).parent / "oracle_scripts" / "run_pte.py", pte_path, out_path)
    proc.stdout  # text

The script runs as `__main__` with `sys.argv = [script, *args]`, with the oracle directory first on
`sys.path`, in a temporary working directory; any attempt to import `etkit` (or `etkit_*`) there
raises ImportError, so a test cannot pass by accident through etkit's own code.
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
ORACLE_SCRIPT = REPO_ROOT / "scripts" / "et_oracle.sh"

# Runs first in the oracle process: block etkit imports, then run the script as __main__.
_BOOTSTRAP = r"""
import importlib.abc, runpy, sys
class _NoEtkit(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "etkit" or name.startswith(("etkit.", "etkit_")):
            raise ImportError(f"{name} must not be imported inside the ExecuTorch oracle process")
        return None
sys.meta_path.insert(0, _NoEtkit())
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
"""


class OracleError(RuntimeError):
    """The oracle environment could not be made, or a script run in it failed."""


@functools.lru_cache(maxsize=1)
def oracle_dir() -> Path:
    """Create the oracle environment if needed (scripts/et_oracle.sh) and return its directory.

    Raises OracleError with the script's output if it cannot be made (e.g. PyPI unreachable).
    """
    proc = subprocess.run(["bash", str(ORACLE_SCRIPT)], capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise OracleError(
            f"{ORACLE_SCRIPT} failed (exit {proc.returncode}); run it by hand to see why.\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return Path(proc.stdout.strip().splitlines()[-1])


def oracle_python() -> str:
    """The interpreter the oracle uses: the main venv's Python (it provides torch)."""
    return os.environ.get("ETKIT_PYTHON", sys.executable)


def run_in_oracle(script_path, *args, timeout: float = 900.0, check: bool = True) -> subprocess.CompletedProcess:
    """Run `script_path` with `args` (converted with str()) in the ExecuTorch oracle.

    Returns the CompletedProcess (stdout/stderr as text). With check=True (default) a non-zero
    exit raises OracleError carrying the script's stdout and stderr.
    """
    directory = oracle_dir()
    # The oracle is ExecuTorch, not the code under test: it never runs under the sanitized lane's preloaded
    # ASan runtime (scripts/sanitized_python.py).
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    env["PYTHONPATH"] = str(directory)
    env["PYTHONNOUSERSITE"] = "1"
    cmd = [oracle_python(), "-c", _BOOTSTRAP, str(Path(script_path).resolve()), *map(str, args)]
    with tempfile.TemporaryDirectory(prefix="etkit-oracle-") as cwd:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    if check and proc.returncode != 0:
        raise OracleError(
            f"oracle script {script_path} {' '.join(map(str, args))} failed (exit {proc.returncode})\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc
