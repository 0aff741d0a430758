"""Debug handles: the integer id of every Edge operator node, kept through partitioning and emission.

ExecuTorch numbers the ``call_function`` nodes of the Edge graph 1, 2, ... in graph order and stores the
number in ``node.meta["debug_handle"]``. The emitter then maps each instruction to the debug handles of
the node(s) it runs (``ExecutorchProgramManager.debug_handle_map``; a delegate call maps to the handles
of its partition), and the Inspector maps ETDump events back to nodes through that map and an ETRecord
(seed pages "Prerequisite: ETRecord", "Debugging Delegation").
"""
from __future__ import annotations

import torch

DEBUG_HANDLE = "debug_handle"


def assign_debug_handles(gm: torch.fx.GraphModule) -> int:
    """Gives every ``call_function`` node without a debug handle the next free one (after the largest
    already assigned), in graph order. Returns how many nodes got one."""
    taken = [n.meta[DEBUG_HANDLE] for n in gm.graph.nodes if isinstance(n.meta.get(DEBUG_HANDLE), int)]
    next_handle = max(taken, default=0) + 1
    assigned = 0
    for node in gm.graph.nodes:
        if node.op == "call_function" and not isinstance(node.meta.get(DEBUG_HANDLE), int):
            node.meta[DEBUG_HANDLE] = next_handle
            next_handle += 1
            assigned += 1
    return assigned


def debug_handles_of(nodes) -> list:
    """The sorted, distinct debug handles of ``nodes`` (those that have one)."""
    return sorted({n.meta[DEBUG_HANDLE] for n in nodes if isinstance(n.meta.get(DEBUG_HANDLE), int)})
