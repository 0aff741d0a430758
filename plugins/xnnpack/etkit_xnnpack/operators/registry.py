"""Which function writes the XNNPACK nodes of each ATen op (filled by the op modules)."""
from __future__ import annotations

from typing import Callable

import torch

from .context import LoweringContext

Lowering = Callable[[LoweringContext, torch.fx.Node], None]

#: ``{OpOverload or callable: lowering}``.
LOWERINGS: dict[object, Lowering] = {}


def lowers(*targets):
    """Decorator: register a lowering for ``targets`` (OpOverloads; missing overloads are skipped)."""
    def deco(fn: Lowering) -> Lowering:
        for t in targets:
            if t is not None:
                LOWERINGS[t] = fn
        return fn
    return deco


def op(name: str, overload: str = "default"):
    """``torch.ops.aten.<name>.<overload>`` or None if this torch lacks it."""
    packet = getattr(torch.ops.aten, name, None)
    return getattr(packet, overload, None) if packet is not None else None
