"""Adding constant tensors to an ``ExportedProgram`` as lifted constants (``InputKind.CONSTANT_TENSOR``).

The code lives in :mod:`etkit.graph.constants`, which backends' lowering uses too; the names stay
importable from here.
"""
from __future__ import annotations

from ..graph.constants import add_constant, drop_unused_constants, fake_like, get_constant

__all__ = ["add_constant", "drop_unused_constants", "fake_like", "get_constant"]
