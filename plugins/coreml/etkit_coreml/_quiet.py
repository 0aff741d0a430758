"""Keep coremltools' chatter (version warnings at import, progress bars at every conversion) out of the
user's terminal; it is still logged at DEBUG under ``etkit_coreml``."""
from __future__ import annotations

import contextlib
import io
import logging
import sys

logger = logging.getLogger("etkit_coreml")


@contextlib.contextmanager
def quiet():
    out, err = io.StringIO(), io.StringIO()
    ct_logger = logging.getLogger("coremltools")
    level = ct_logger.level
    ct_logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield
    finally:
        ct_logger.setLevel(level)
        if out.getvalue() or err.getvalue():
            logger.debug("coremltools: %s%s", out.getvalue(), err.getvalue())


def import_coremltools():
    """``import coremltools`` without its import-time warnings (untested torch version, no native
    Core ML library off macOS: both expected here)."""
    if "coremltools" not in sys.modules:
        with quiet():
            import coremltools  # noqa: F401
    return sys.modules["coremltools"]
