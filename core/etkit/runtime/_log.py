"""The C++ runtime's log messages (runtime-cpp/include/etkit/runtime/log.h) as records of Python's
``logging``, on the logger ``etkit.runtime``.

The native module registers a platform-layer log sink (``et_pal_emit_log_message``'s place, seed page
"Runtime Platform Abstraction Layer (PAL)") that calls :func:`_emit` with each message, so delegates and
kernels loaded into the process log here too. Two filters apply: the runtime drops messages below
:func:`set_log_level` before formatting them (default ``"info"``), then ``logging`` filters as configured.
At ``"debug"`` every failure the runtime records is logged ("<ErrorName>: <message>") as well as raised.
"""
from __future__ import annotations

import atexit
import logging

from etkit import _runtime

logger = logging.getLogger("etkit.runtime")

# The runtime's levels (ExecuTorch's: Debug, Info, Error, Fatal) by name, their logging levels by letter.
_LEVELS = {"debug": 0, "info": 1, "error": 2, "fatal": 3}
_BY_LETTER = {"D": logging.DEBUG, "I": logging.INFO, "E": logging.ERROR, "F": logging.CRITICAL}
_FROM_LOGGING = ((logging.DEBUG, "debug"), (logging.INFO, "info"), (logging.ERROR, "error"),
                 (logging.CRITICAL, "fatal"))


def _emit(letter: str, filename: str, function: str, line: int, message: str) -> None:
    level = _BY_LETTER.get(letter, logging.WARNING)
    if logger.isEnabledFor(level):
        logger.handle(logger.makeRecord(logger.name, level, filename or "(etkit runtime)", line, message, None, None,
                                        func=function or None))


def set_log_level(level: str | int) -> None:
    """Lowest level of the runtime's messages that reach ``logging`` (process-wide).

    Args:
        level: ``"debug"``, ``"info"`` (the default), ``"error"`` or ``"fatal"``, or a ``logging`` level
            (``logging.DEBUG`` ...; WARNING maps to ``"error"``, the runtime having no warning level).
    Raises:
        ValueError: any other value.
    """
    if isinstance(level, int) and not isinstance(level, bool):
        name = next((n for lv, n in _FROM_LOGGING if level <= lv), "fatal")
    elif isinstance(level, str) and level.lower() in _LEVELS:
        name = level.lower()
    else:
        raise ValueError(f"log level must be one of {sorted(_LEVELS)} or a logging level, got {level!r}")
    _runtime.set_log_level(_LEVELS[name])


def log_level() -> str:
    """The runtime's current level: ``"debug"``, ``"info"``, ``"error"`` or ``"fatal"``."""
    value = _runtime.log_level()
    return next(n for n, v in _LEVELS.items() if v == value)


_runtime._set_log_handler(_emit)
# Messages after this (from threads still running at exit) go to stderr instead of a finalising interpreter.
atexit.register(_runtime._set_log_handler, None)
