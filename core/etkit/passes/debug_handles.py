"""Debug handles of Edge operator nodes; the code lives in :mod:`etkit.graph.debug_handles` (backends'
lowering reads the handles too), the names stay importable from here."""
from __future__ import annotations

from ..graph.debug_handles import DEBUG_HANDLE, assign_debug_handles, debug_handles_of

__all__ = ["DEBUG_HANDLE", "assign_debug_handles", "debug_handles_of"]
