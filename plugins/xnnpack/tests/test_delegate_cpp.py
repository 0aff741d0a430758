"""Runs the C++ tests of the XNNPACK delegate (runtime/tests/delegate_test.cpp) built by the plugin's
CMake build (ETKIT_XNNPACK_BUILD_TESTS, on by default) in plugins/xnnpack/build/<wheel tag>/.

They drive the delegate through etkit's BackendInterface with payloads built in C++: numerics of a
fully-connected + relu graph against a reference, shape changes between runs, named-data constants,
a bare XN01 flatbuffer, thread-pool option, argument checks, and every single-byte corruption of a
payload failing with a message (never a crash). Skipped when the executable was not built.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

PLUGIN_ROOT = Path(__file__).resolve().parents[1]


def _test_executable() -> Path:
    found = sorted(PLUGIN_ROOT.glob("build/*/etkit_xnnpack_delegate_test"), key=lambda p: p.stat().st_mtime)
    if not found:
        pytest.skip("etkit_xnnpack_delegate_test is not built (pip install -e plugins/xnnpack with "
                    "ETKIT_XNNPACK_BUILD_TESTS=ON, the default)")
    return found[-1]


def test_cpp_delegate_tests_pass():
    proc = subprocess.run([str(_test_executable())], capture_output=True, text=True, timeout=600)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lines and lines[-1].endswith("0 failed"), proc.stdout
