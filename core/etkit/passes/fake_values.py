"""Recompute every node's ``meta["val"]`` after a pass rewrote ops in place.

Replacing view ops by their ``*_copy`` forms changes what their users see: ``x.permute(...)`` is a
strided view, ``permute_copy`` a contiguous tensor, so an ``add`` after it produces a contiguous
result where eager's produced a permuted one. Metadata left from export would still describe the
eager strides, and memory planning, the emitted dim orders and partitioners' checks read them.
"""
from __future__ import annotations

import torch
from torch._guards import detect_fake_mode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp


def propagate_fake_values(gm: torch.fx.GraphModule) -> None:
    """Re-run every node on fake tensors (the graph's own fake mode and shape environment, so
    symbolic sizes stay symbolic) and store the results in ``meta["val"]``. Placeholders keep theirs.

    Raises:
        RuntimeError: from the op when a rewritten node no longer accepts its inputs.
    """
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    values = [n.meta.get("val") for n in placeholders]
    mode = detect_fake_mode([v for v in values if isinstance(v, torch.Tensor)])
    if mode is None or any(v is None for v in values):
        return  # nothing to propagate from (a graph built by hand, without export metadata)
    FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*values)
