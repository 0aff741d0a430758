"""The C++ runtime's log messages reach Python's ``logging`` (logger ``etkit.runtime``) through the platform
layer's log sink: level, call site and text; the runtime-side level filter (``set_log_level``); failures
logged at debug with the same text as the exception."""
from __future__ import annotations

import logging

import pytest

from etkit import _runtime
from etkit.runtime import EtkitRuntimeError, Runtime, log_level, set_log_level


@pytest.fixture
def runtime_level():
    before = log_level()
    yield
    set_log_level(before)


def _records(caplog):
    return [r for r in caplog.records if r.name == "etkit.runtime"]


def test_a_message_arrives_with_its_level_and_call_site(caplog, runtime_level):
    caplog.set_level(logging.DEBUG, logger="etkit.runtime")
    set_log_level("info")
    _runtime._log(1, "hello from the runtime")
    _runtime._log(2, "an error line")
    _runtime._log(0, "dropped in C++: below info")
    records = _records(caplog)
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.INFO, "hello from the runtime"), (logging.ERROR, "an error line")]
    assert records[0].filename == "runtime_module.cpp" and records[0].lineno > 0 and records[0].funcName == "_log"


def test_failures_are_logged_at_debug_with_the_exception_text(caplog, runtime_level):
    caplog.set_level(logging.DEBUG, logger="etkit.runtime")
    set_log_level("info")
    with pytest.raises(EtkitRuntimeError):
        Runtime.get().load_program(b"\0" * 64)
    assert not _records(caplog)  # at info, a failure is raised, not logged
    set_log_level(logging.DEBUG)
    assert log_level() == "debug"
    with pytest.raises(EtkitRuntimeError) as raised:
        Runtime.get().load_program(b"\0" * 64)
    (record,) = _records(caplog)
    assert record.levelno == logging.DEBUG and record.getMessage().startswith("InvalidProgram: ")
    assert record.getMessage().split(": ", 1)[1] in str(raised.value)


def test_log_levels_by_name_and_by_logging_level(runtime_level):
    for given, want in (("fatal", "fatal"), ("ERROR", "error"), (logging.WARNING, "error"), (logging.INFO, "info"),
                        (logging.CRITICAL, "fatal"), (5, "debug")):
        set_log_level(given)
        assert log_level() == want, given
    for bad in ("verbose", None, True, 1.5):
        with pytest.raises(ValueError, match="log level must be one of"):
            set_log_level(bad)


def test_the_docs_example_runs(caplog, capsys, runtime_level):
    """docs/runtime.md "Platform layer and logging": its Python example, as written."""
    from tests.docs_examples import run_docs_example

    caplog.set_level(logging.DEBUG, logger="etkit.runtime")
    run_docs_example("runtime.md", "## Platform layer and logging")
    assert capsys.readouterr().out.strip() == "EtkitRuntimeError"
    assert any(r.getMessage().startswith("InvalidProgram: not an ExecuTorch program") for r in _records(caplog))
