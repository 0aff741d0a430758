"""Recompute every node's ``meta["val"]`` after a pass rewrote ops in place.

Replacing view ops by their ``*_copy`` forms changes what their users see: ``x.permute(...)`` is a
strided view, ``permute_copy`` a contiguous tensor, so an ``add`` after it produces a contiguous
result where eager's produced a permuted one. Metadata left from export would still describe the
eager strides, and memory planning, the emitted dim orders and partitioners' checks read them.
"""
from __future__ import annotations

import operator

import torch
from torch._guards import detect_fake_mode


def propagate_fake_values(gm: torch.fx.GraphModule) -> None:
    """Re-run every op node on fake tensors (the graph's own fake mode) and store the results in
    ``meta["val"]``. Placeholders keep theirs; graphs with symbolic sizes are left as they are.

    Raises:
        RuntimeError: from the op when a rewritten node no longer accepts its inputs.
    """
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    values = [n.meta.get("val") for n in placeholders]
    mode = detect_fake_mode([v for v in values if isinstance(v, torch.Tensor)])
    if mode is None or any(v is None for v in values):
        return  # nothing to propagate from (a graph built by hand, without export metadata)
    if any(isinstance(v, torch.Tensor) and any(not isinstance(d, int) for d in v.shape) for v in values):
        # Dynamic shapes: re-running the *_copy ops' meta functions would specialize the symbolic sizes
        # (permute_copy guards on them). Such graphs keep export's strides; the portable kernels follow
        # any dim order, and a backend checks the dim order it is given.
        return
    with mode:
        for node in gm.graph.nodes:
            if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
                continue  # getitem follows its producer below; size arithmetic keeps its symbols
            args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
            if any(isinstance(a, torch.SymInt) for a in torch.utils._pytree.tree_leaves((args, kwargs))):
                # a size computed from data (``input_pos[0].item()``): export's metadata already holds the
                # result's symbolic shape, which re-running would have to guard on
                continue
            node.meta["val"] = node.target(*args, **kwargs)
            for user in node.users:
                if user.op == "call_function" and user.target is operator.getitem:
                    user.meta["val"] = node.meta["val"][user.args[1]]
