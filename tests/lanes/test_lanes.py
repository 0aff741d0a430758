"""The test lanes of conftest.py: ``--lane ci`` (``make test``) leaves out the tests marked ``slow`` but
refuses to lose what the CI lane must keep; ``--lane all`` (``make test-all``) runs everything."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_TESTS = "tests/llm/test_llm_readme.py"          # both of its tests are marked slow
KEPT = "tests/interop/test_shared_weight_interop.py"    # listed in CI_LANE_KEEPS


def _collect(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0",
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def _counts(out: str) -> tuple[int, int]:
    """(collected, deselected) from pytest's last line, e.g. ``0/2 tests collected (2 deselected)``."""
    last = out.strip().splitlines()[-1]
    selected = re.search(r"(\d+)(?:/\d+)? tests? collected", last) or re.search(r"no tests collected", last)
    deselected = re.search(r"(\d+) deselected", last)
    return (int(selected.group(1)) if selected and selected.groups() else 0,
            int(deselected.group(1)) if deselected else 0)


def test_ci_lane_leaves_out_slow_tests_and_all_lane_keeps_them():
    ci, every = _collect("--lane", "ci", README_TESTS), _collect("--lane", "all", README_TESTS)
    assert _counts(ci.stdout) == (0, 2), ci.stdout[-600:]
    assert _counts(every.stdout) == (2, 0), every.stdout[-600:]
    assert "test_readme_llm_commands_run" in every.stdout


def test_ci_lane_refuses_to_lose_a_kept_file():
    proc = _collect("--lane", "ci", "-p", "tests.lanes.mark_all_slow", KEPT)
    assert proc.returncode == 4, proc.stdout[-600:] + proc.stderr[-600:]   # pytest's usage-error exit
    assert f"must keep at least one test of {KEPT}" in proc.stderr + proc.stdout
    # the same marks with no lane (plain pytest) select as asked
    assert _collect("-p", "tests.lanes.mark_all_slow", KEPT).returncode == 0


def test_markers_are_registered_and_select():
    listing = subprocess.run([sys.executable, "-m", "pytest", "--markers"], cwd=ROOT, capture_output=True, text=True,
                             timeout=300).stdout
    for marker in ("slow", "oracle", "sanitize", "device_sim"):
        assert f"@pytest.mark.{marker}:" in listing, marker
    oracle = _collect("-m", "oracle", "tests/interop/test_oracle_fixture.py", README_TESTS)
    assert _counts(oracle.stdout) == (2, 2), oracle.stdout[-600:]
