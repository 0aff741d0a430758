"""Op lowerings: each writes the XNNPACK nodes for one ATen op into an ``XnnGraphBuilder``.

Importing this package fills :data:`registry.LOWERINGS`.
"""
from . import convert, elementwise, gemm, norm, pooling, safe_softmax, shape  # noqa: F401  (registration)
from .context import LoweringContext, LoweringError
from .registry import LOWERINGS

__all__ = ["LOWERINGS", "LoweringContext", "LoweringError"]
