"""etkit's XNNPACK backend plugin: ``XnnpackPartitioner`` and ``XnnpackBackend`` (preprocess).

``weights_cache_stats()`` (from the native delegate) returns the process-wide packed-weights cache as a
dict: ``entries`` and ``bytes`` (blocks alive, their size in bytes), ``packs``, ``reuses`` and
``deduplicated`` (counts since the process started).

Attributes resolve lazily so that importing the package (e.g. from the plugin entry point) does not
import torch; the lowering side asked for where only etkit-runtime is installed says to install etkit.
"""
from __future__ import annotations

_LAZY = {
    "XnnpackPartitioner": "etkit_xnnpack.partition",
    "ConfigPrecisionType": "etkit_xnnpack.partition.config_base",
    "XnnpackBackend": "etkit_xnnpack.preprocess",
    "weights_cache_stats": "etkit_xnnpack._delegate",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        from etkit._compiler import import_compiler_module

        return getattr(import_compiler_module(_LAZY[name], f"etkit_xnnpack.{name}"), name)
    raise AttributeError(f"module 'etkit_xnnpack' has no attribute {name!r}")
