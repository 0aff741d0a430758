"""Import a module of etkit's compiler, saying what to install when torch is missing.

``etkit-runtime`` (the deployment install) carries etkit's Python code but not torch; the compiler side
(``to_edge``, partitioners, quantizers) needs the ``etkit`` distribution, which brings torch.
"""
from __future__ import annotations

import importlib
from types import ModuleType


def import_compiler_module(module: str, what: str) -> ModuleType:
    """``importlib.import_module(module)``; ``what`` names the thing asked for in the error.

    Raises:
        ModuleNotFoundError: torch is not installed; the message says to ``pip install etkit``.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != "torch" and not (exc.name or "").startswith("torch."):
            raise
        raise ModuleNotFoundError(
            f"{what} is part of etkit's compiler, which needs torch: `pip install etkit` (this environment has "
            f"etkit-runtime, which runs .pte files without torch)", name=exc.name) from None
