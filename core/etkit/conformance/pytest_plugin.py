"""pytest plugin: ``pytest --etkit-backend NAME`` runs etkit's backend conformance suite.

Registered through the ``pytest11`` entry point of the etkit distribution (or ``-p
etkit.conformance.pytest_plugin``). Without ``--etkit-backend`` it does nothing. With it, the bundled
tests (:mod:`etkit.conformance.suite`) are collected: instead of the directory pytest would search when
no paths are given (so it works from any directory, even an empty one), or besides the paths given.

Options:
    --etkit-backend NAME       backend id (``MyBackend``) or plugin entry-point name (``mybackend``)
    --etkit-partitioner NAME   which of the backend's partitioners to use (default: its first)
    --etkit-atol / --etkit-rtol  override the tolerances against torch eager
    --etkit-write-bpte DIR     also write each delegated case as a bundled program, DIR/<backend id>_<case>.bpte
                               (the .pte plus its inputs and torch eager's outputs), to replay on a device with
                               ``etkit_runner --bundled_program`` or ExecuTorch's bundled-program runner
"""
from __future__ import annotations

from pathlib import Path

import pytest

BACKEND_KEY = pytest.StashKey["etkit.conformance.checks.BackendUnderTest"]()
#: The bundled test module.
SUITE = Path(__file__).resolve().with_name("suite.py")


def pytest_addoption(parser) -> None:
    group = parser.getgroup("etkit", "etkit backend conformance")
    group.addoption("--etkit-backend", metavar="NAME", default=None,
                    help="run etkit's backend conformance suite against NAME (backend id or plugin name)")
    group.addoption("--etkit-partitioner", metavar="NAME", default=None,
                    help="partitioner of the backend to use (default: the first its BackendSpec lists)")
    group.addoption("--etkit-atol", type=float, default=None, help="absolute tolerance against torch eager")
    group.addoption("--etkit-rtol", type=float, default=None, help="relative tolerance against torch eager")
    group.addoption("--etkit-write-bpte", metavar="DIR", default=None,
                    help="write each delegated case as DIR/<backend id>_<case>.bpte (inputs + eager outputs) to "
                         "replay on a device")


def pytest_configure(config) -> None:
    if not config.getoption("etkit_backend"):
        return
    # The suite's directory is added to the paths to collect; pytest_collect_file picks suite.py in it.
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        config.args.append(str(SUITE.parent))
    else:  # no paths given: run only the suite, not whatever the current directory holds
        config.args[:] = [str(SUITE.parent)]


def pytest_collect_file(file_path, parent):
    if file_path == SUITE and parent.config.getoption("etkit_backend"):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(config, items) -> None:
    """Without --etkit-write-bpte the bundled-program writer is deselected (not reported as 24 skips)."""
    if not config.getoption("etkit_backend") or config.getoption("etkit_write_bpte"):
        return
    dropped = [item for item in items if item.name.startswith("test_bundled_program_written[")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not item.name.startswith("test_bundled_program_written[")]


def pytest_sessionstart(session) -> None:
    config = session.config
    name = config.getoption("etkit_backend")
    if not name:
        return
    from .checks import ConformanceUsageError, resolve_backend
    try:
        config.stash[BACKEND_KEY] = resolve_backend(name, config.getoption("etkit_partitioner"),
                                                    config.getoption("etkit_atol"), config.getoption("etkit_rtol"))
    except ConformanceUsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_report_header(config) -> list[str]:
    backend = config.stash.get(BACKEND_KEY, None)
    if backend is None:
        return []
    availability = backend.spec.is_available()
    available = "yes" if availability else f"no ({availability.reason})"
    return [f"etkit conformance: backend {backend.backend_id} (plugin {backend.plugin}, version "
            f"{backend.spec.version}), partitioner {backend.partitioner_name}, available: {available}"]


def _suite_reports(terminalreporter) -> list:
    reports = []
    for outcome in ("passed", "failed", "skipped", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            if "suite.py::" in nodeid and (report.when == "call" or report.outcome != "passed"):
                reports.append((outcome, nodeid.split("suite.py::", 1)[1], report))
    return reports


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = longrepr[2]
        return reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason
    return str(longrepr)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    backend = config.stash.get(BACKEND_KEY, None)
    if backend is None:
        return
    reports = _suite_reports(terminalreporter)
    programs = [(o, test.split("[", 1)[1].rstrip("]"), r) for o, test, r in reports
                if test.startswith("test_program_matches_eager[")]
    import torch
    atol, rtol = backend.tolerance(torch.float32)
    tw = terminalreporter
    tw.section(f"etkit conformance: {backend.backend_id}", sep="-")
    availability = backend.spec.is_available()
    if not availability:
        # lower-only mode: the programs cannot run here; report what was checked instead
        def cases(prefix):
            return [t.split("[", 1)[1].rstrip("]") for o, t, _ in reports if t.startswith(prefix) and o == "passed"]
        tw.write_line(f"lower only: {backend.backend_id} is not available here ({availability.reason})")
        said = cases("test_unavailable_backend_says_why[")
        tw.write_line(f"delegated, and loading fails with that reason: {len(said)}: {', '.join(said) or '-'}")
        twins = cases("test_fallback_twin_matches_eager[")
        from .checks import default_tolerance
        tatol, trtol = default_tolerance(torch.float32)
        tw.write_line(f"fallback twin matching torch eager (float32 atol={tatol:g}, rtol={trtol:g}): "
                      f"{len(twins)}: {', '.join(twins) or '-'}")
        reference = cases("test_reference_run_matches_eager[")
        if reference:
            tw.write_line(f"delegated program on the backend's host reference matching eager (float32 atol={atol:g}, "
                          f"rtol={rtol:g}): {len(reference)}: {', '.join(reference)}")
        programs = [(o, c, r) for o, c, r in programs if not (o == "skipped" and "is not available here" in
                                                             _skip_reason(r))]
    else:
        matched = [case for o, case, _ in programs if o == "passed"]
        tw.write_line(f"delegated and matching torch eager (float32 atol={atol:g}, rtol={rtol:g}): "
                      f"{len(matched)}: {', '.join(matched) or '-'}")
    skipped = [(case, _skip_reason(r)) for o, case, r in programs if o == "skipped"]
    if skipped:
        tw.write_line(f"skipped: {len(skipped)}")
        for case, reason in skipped:
            tw.write_line(f"  {case}: {reason}")
    written = [t.split("[", 1)[1].rstrip("]") for o, t, _ in reports if t.startswith("test_bundled_program_written[")
               and o == "passed"]
    if config.getoption("etkit_write_bpte"):
        tw.write_line(f"bundled programs written to {config.getoption('etkit_write_bpte')}: {len(written)}: "
                      f"{', '.join(written) or '-'}")
    failed = [(test, o) for o, test, _ in reports if o in ("failed", "error")]
    if failed:
        tw.write_line(f"FAILED: {len(failed)}: " + ", ".join(f"{t}" + (" (error)" if o == "error" else "")
                                                          for t, o in failed), red=True)
    else:
        outputs = ("test_program_matches_eager[", "test_unavailable_backend_says_why[", "test_fallback_twin_matches_eager[",
                   "test_reference_run_matches_eager[", "test_bundled_program_written[")
        contract = sum(1 for o, t, _ in reports if not t.startswith(outputs) and o == "passed")
        tw.write_line(f"contract checks passed: {contract} (tags, preprocess determinism, lifecycle, registration)")
