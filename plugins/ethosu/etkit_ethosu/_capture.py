"""Capture what native code prints (Vela's C++ core, the TOSA reference model) while it runs."""
from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile


class CaptureOutput:
    """Capture everything written to stdout/stderr while active: Python's ``sys.stdout``/``sys.stderr`` and the
    process's file descriptors 1 and 2 (Vela's C++ core writes its traces to fd 1 directly).

    Both go, in order, to one temporary file; ``text`` holds it after exit. When fds 1/2 cannot be duplicated
    (closed in a daemon), only the Python streams are captured.
    """

    def __init__(self):
        self.text = ""

    def __enter__(self):
        self._file = tempfile.TemporaryFile()
        self._saved = {}
        _flush_all()
        try:
            for fd in (1, 2):
                self._saved[fd] = os.dup(fd)
            for fd in (1, 2):
                os.dup2(self._file.fileno(), fd)
        except OSError:
            self._restore_fds()
        # unbuffered writes through the same open file, so Python and C++ output stay in order
        raw = open(self._file.fileno(), "wb", buffering=0, closefd=False)
        self._stream = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", write_through=True)
        self._redirects = contextlib.ExitStack()
        self._redirects.enter_context(contextlib.redirect_stdout(self._stream))
        self._redirects.enter_context(contextlib.redirect_stderr(self._stream))
        return self

    def _restore_fds(self):
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)
            os.close(saved)
        self._saved = {}

    def __exit__(self, *exc):
        try:
            self._redirects.close()
            self._stream.flush()
            _flush_all()
        finally:
            self._restore_fds()
            self._stream.detach()
            self._file.seek(0)
            self.text = self._file.read().decode("utf-8", "replace")
            self._file.close()
        return False


def _flush_all() -> None:
    """Flush Python's streams and C stdio buffers (C++ ``std::cout`` is synchronised with C stdio)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
