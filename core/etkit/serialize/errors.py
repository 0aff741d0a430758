"""The one error type the .pte reader raises."""

from __future__ import annotations


class PteFormatError(ValueError):
    """Bytes that are not a well-formed ``.pte`` program this etkit can read.

    The message names the field or byte range at fault, the value found and what was expected,
    e.g. ``extended header: program_size 9000 > file size 4120 (file truncated?)``.
    """
