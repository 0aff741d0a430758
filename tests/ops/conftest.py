"""Collects each op case's outcome and prints the coverage table at the end of the session."""
from __future__ import annotations

import json
import os

#: Outcome records of this session's op cases (see ``report.outcome_record``).
_RECORDS: list = []


def pytest_runtest_logreport(report):
    # user_properties travel with the report, so this also sees the cases run by pytest-xdist workers
    if report.when == "call":
        _RECORDS.extend(value for name, value in report.user_properties if name == "etkit_op_outcome")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _RECORDS:
        return
    from .report import format_table
    from .test_core_aten_ops import FULL

    title = "Core ATen op coverage, " + ("full run" if FULL else "CI slice (ETKIT_OPS_FULL=1 runs every dtype)")
    terminalreporter.write_sep("=", "etkit Core ATen op coverage")
    terminalreporter.write_line(format_table(_RECORDS, title))
    if os.environ.get("ETKIT_OPS_JSON"):  # every outcome, for tools (bench/op_coverage.py --json does the same)
        with open(os.environ["ETKIT_OPS_JSON"], "w") as f:
            json.dump(_RECORDS, f, indent=1)
