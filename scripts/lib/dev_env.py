"""What the developer scripts (scripts/fuzz.py, scripts/sanitized_python.py) need to know about the dev
environment `make` sets up: the repository, the venv, the packages installed into it and the XNNPACK build."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("ETKIT_VENV", ROOT / ".venv"))
PY = VENV / "bin" / "python"


def run(tool: str, cmd, **kw) -> None:
    """Runs `cmd`; exits naming `tool` and the command when it fails."""
    proc = subprocess.run([str(c) for c in cmd], **kw)
    if proc.returncode != 0:
        sys.exit(f"{tool}: failed ({proc.returncode}): {' '.join(map(str, cmd))}")


def site_packages() -> Path:
    """The dev venv's site-packages (purelib), where the editable installs put the native parts."""
    out = subprocess.run([str(PY), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True).stdout.strip()
    return Path(out)


def xnnpack_prefix(tool: str) -> str:
    """The XNNPACK install prefix `make xnnpack` wrote into $(VENV)/xnnpack-prefix."""
    path = VENV / "xnnpack-prefix"
    if not path.is_file() or not path.read_text().strip():
        sys.exit(f"{tool}: no XNNPACK build ({path}): run `make xnnpack install` first")
    return path.read_text().strip()


def backend_link_args(tool: str, plugins: str, prefix: str) -> list[str]:
    """The CMake arguments that link the installed ``plugins`` (comma-separated) into a native tree, read from
    their ``BackendSpec``s by ``etkit.native.runner_build`` (``-D<prefix>_PACKAGES=...``,
    ``-D<prefix>_BACKENDS=<target>=<register function>;...``)."""
    proc = subprocess.run([str(PY), "-m", "etkit.native.runner_build", "--cmake-args", plugins, "--prefix", prefix],
                          capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        sys.exit(f"{tool}: cannot read the CMake arguments of {plugins} from their BackendSpecs: "
                 f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.split()
