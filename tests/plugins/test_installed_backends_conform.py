"""Every installed backend plugin passes the conformance suite (``pytest --etkit-backend NAME``).

A backend that runs here is compared with eager; one that cannot (a platform-only backend) is checked in
"lower only" mode: lowering, the contract, the unavailable-backend error and its fallback twin. The
suite runs in a subprocess, as a vendor would run it.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from etkit.plugins.manager import get_backend_specs

SPECS = [s for s in get_backend_specs() if s.partitioners]
#: Suites of a minute or so (QNN 61 s, Core ML 42 s under `pytest -n 2`, 2026-11-26) run only in
#: `make test-all`; each plugin's own end-to-end tests stay in the CI lane (conftest.py CI_LANE_KEEPS).
SLOW_SUITES = {"QnnBackend", "CoreMLBackend"}


@pytest.mark.parametrize("backend_id", [pytest.param(s.backend_id, marks=[pytest.mark.slow] * (s.backend_id in SLOW_SUITES))
                                        for s in SPECS])
def test_backend_passes_the_conformance_suite(backend_id, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                           "--etkit-backend", backend_id], cwd=tmp_path, capture_output=True, text=True,
                          timeout=1800)
    tail = "\n".join(proc.stdout.splitlines()[-40:])
    assert proc.returncode == 0, f"conformance of {backend_id} failed:\n{tail}\n{proc.stderr[-2000:]}"
    assert f"etkit conformance: {backend_id}" in proc.stdout, tail
    assert "FAILED" not in proc.stdout.split(f"etkit conformance: {backend_id}", 1)[1], tail
    spec = next(s for s in SPECS if s.backend_id == backend_id)
    summary = proc.stdout.split(f"etkit conformance: {backend_id}", 1)[1]
    if spec.is_available():
        assert "delegated and matching torch eager" in summary, tail
    else:
        assert "lower only" in summary and "fallback twin matching torch eager" in summary, tail
