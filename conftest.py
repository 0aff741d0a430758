"""Repository-wide pytest settings: under CI (``CI=true``) a run cannot pass by not testing.

- ``pytest.importorskip`` of a package this repository builds (etkit and its backend plugins) fails
  instead of skipping: a missing build is a broken build, not an absent optional dependency.
- The session prints how many tests ran beside the count recorded in ``.ci/test-count`` (the last run
  that passed on a full checkout) and calls a smaller count suspect; a commit that removes tests
  updates the file and says why.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

#: top-level packages this repository builds; their absence under CI is a failure
BUILT_HERE = ("etkit", "etkit_xnnpack", "etkit_vulkan", "etkit_qnn", "etkit_coreml", "etkit_ethosu")
COUNT_FILE = Path(__file__).parent / ".ci" / "test-count"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


if in_ci():
    _importorskip = pytest.importorskip

    def _importorskip_built_here_fails(modname: str, *args, **kwargs):
        if modname.split(".")[0] not in BUILT_HERE:
            return _importorskip(modname, *args, **kwargs)
        try:
            return importlib.import_module(modname)
        except ImportError as exc:
            pytest.fail(f"CI: {modname} is built by this repository and must import (run `make install`): {exc}",
                        pytrace=False)

    pytest.importorskip = _importorskip_built_here_fails


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if config.option.collectonly:
        return
    ran = sum(len(terminalreporter.stats.get(kind, [])) for kind in ("passed", "failed", "error", "xfailed",
                                                                       "xpassed"))
    skipped = len(terminalreporter.stats.get("skipped", []))
    try:
        recorded = int(COUNT_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        recorded = None
    line = f"tests run: {ran} (skipped {skipped}); recorded in {COUNT_FILE.relative_to(COUNT_FILE.parents[1])}: " \
           f"{recorded if recorded is not None else 'none'}"
    if recorded is not None and ran < recorded and in_ci():
        line += " -- SUSPECT: fewer tests ran than recorded; if tests were removed on purpose, update the file " \
                "in the commit that says why"
    terminalreporter.write_line(line)
