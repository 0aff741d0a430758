"""What the op conformance suite covers: the Core ATen overloads, the dtypes, and the written-down
exceptions (ops that are not applicable, ops checked by properties instead of values, tolerances).

Every exception the suite makes is in one of the tables below, with its reason; the suite never
skips a case silently.
"""
from __future__ import annotations

import functools

import torch

aten = torch.ops.aten

#: The dtypes in scope, in the order the coverage table prints them.
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64,
          torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)
DTYPE_NAMES = {d: str(d).removeprefix("torch.") for d in DTYPES}
DTYPE_BY_NAME = {v: k for k, v in DTYPE_NAMES.items()}


@functools.lru_cache(maxsize=None)
def core_aten_ops() -> tuple:
    """Every ``torch.ops.aten`` overload tagged ``torch.Tag.core`` in the installed torch, by name.

    Enumerated from the dispatcher's list of registered operators: ``dir(torch.ops.aten)`` only
    lists the packets already touched, so it would miss ops nothing has used yet.
    """
    ops = []
    for qualified in torch._C._dispatch_get_all_op_names():
        if not qualified.startswith("aten::"):
            continue
        packet_name, _, overload_name = qualified[len("aten::"):].partition(".")
        packet = getattr(aten, packet_name, None)
        overload = getattr(packet, overload_name or "default", None) if packet is not None else None
        if overload is not None and torch.Tag.core in overload.tags:
            ops.append(overload)
    return tuple(sorted(set(ops), key=str))


def op_by_name(name: str) -> torch._ops.OpOverload:
    """``"aten.add.Tensor"`` -> ``torch.ops.aten.add.Tensor``."""
    _, packet, overload = name.split(".")
    return getattr(getattr(aten, packet), overload)


_BACKWARD = ("a gradient op: it appears only in training graphs (autograd's backward), never in a model "
             "exported for inference, and etkit programs are inference programs")
_COMPLEX = ("its input or output is complex, and complex dtypes are outside the dtype scope of this suite "
            "(schema/scalar_type.fbs has no complex types, so etkit's Edge dialect refuses them)")

#: Ops with no case at all, and why. Everything else in :func:`core_aten_ops` gets cases.
NOT_APPLICABLE: dict = {
    "aten._adaptive_avg_pool2d_backward.default": _BACKWARD,
    "aten.avg_pool2d_backward.default": _BACKWARD,
    "aten.convolution_backward.default": _BACKWARD,
    "aten.embedding_dense_backward.default": _BACKWARD,
    "aten.max_pool2d_with_indices_backward.default": _BACKWARD,
    "aten.native_group_norm_backward.default": _BACKWARD,
    "aten.native_layer_norm_backward.default": _BACKWARD,
    "aten._fft_r2c.default": _COMPLEX,
    "aten._fft_c2r.default": _COMPLEX,
    "aten.resize_.default": (
        "in-place storage resize of its argument; a program cannot call it on a graph input (export "
        "rejects a shape-changing mutation of an input) and functionalization never emits it for "
        "temporaries, so no exported program contains it"),
}

#: Ops whose output cannot be compared value for value with eager, and what is checked instead.
#: The check names are implemented in :mod:`tests.ops.harness`.
PROPERTY_CHECKS: dict = {
    "aten.empty.memory_format": ("shape_dtype", "output memory is uninitialized: shape and dtype only"),
    "aten.empty_strided.default": ("shape_dtype", "output memory is uninitialized: shape and dtype only"),
    "aten.rand.default": ("uniform", "random: shape, dtype, every value in [0, 1)"),
    "aten.randn.default": ("normal", "random: shape, dtype, finite values, not all equal"),
    "aten.randperm.default": ("permutation", "random: a permutation of 0..n-1"),
    "aten.native_dropout.default": ("dropout", "random in training mode: each output is 0 (mask False) "
                                                "or input/(1-p) (mask True); exact when train=False"),
    "aten._embedding_bag.default": ("embedding_bag", (
        "in sum mode (0) offset2bag, bag_size and max_indices are backward-pass bookkeeping that "
        "eager's CPU kernel leaves empty or zero: only the bag sums are compared (all outputs in "
        "mean and max modes)")),
    # Unstable sorts may order equal keys differently: values must match, and each index must point
    # at an input element equal to its value.
    "aten.sort.default": ("sorted_with_indices", "ties may be ordered differently by an unstable sort"),
    "aten.topk.default": ("sorted_with_indices", "ties may be ordered differently"),
}

#: Default tolerances per floating dtype: (atol, rtol).
TOLERANCES: dict = {
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}

#: Looser float tolerances for some ops, with the reason; ``{op: {dtype: (atol, rtol)}}``.
TOLERANCE_OVERRIDES: dict = {}


def tolerance(op_name: str, dtype: torch.dtype) -> tuple:
    return TOLERANCE_OVERRIDES.get(op_name, {}).get(dtype, TOLERANCES.get(dtype, (0.0, 0.0)))


#: Ops whose eager CPU kernel computes float16/bfloat16 in that precision step by step, where etkit's
#: kernel computes in double and rounds once: for those dtypes the reference is eager run on float32
#: copies of the inputs, rounded to the dtype (the more accurate answer), compared with the dtype's
#: usual tolerance.
FLOAT_REFERENCE: dict = {
    "aten._adaptive_avg_pool3d.default": "eager sums a window in half precision (bf16: 5 ulp off the float sum)",
    "aten.grid_sampler_2d.default": "eager interpolates in half precision (bf16: up to 0.18 off on values ~10)",
    "aten.convolution.default": "eager's transposed convolution accumulates in half precision (8 ulp off at 13)",
}

#: Known gaps: cases that fail today, as ``{op: reason}`` (every dtype) or ``{(op, dtype name): reason}``.
#: Each becomes ``xfail(strict=True)``: when a kernel lands or a bug is fixed the case XPASSes, the
#: run fails, and the entry must be removed from here.
KNOWN_GAPS: dict = {
    # emitter / lowering (core/etkit), not kernels
    # kernels: missing capability
    # kernels: wrong numbers
    # torch, not etkit
    ("aten._native_batch_norm_legit.default", "float16"): (
        "training mode: to_edge decomposes the functionalized op (_native_batch_norm_legit_functional) "
        "with torch's decomposition, which computes in float16; etkit matches that decomposition run in "
        "eager, eager's kernel computes in float"),
    ("aten.col2im.default", "bfloat16"): (
        "to_edge decomposes col2im with torch's decomposition, which accumulates in bfloat16; etkit "
        "matches that decomposition run in eager, eager's col2im kernel accumulates in float"),
}


def known_gap(op_name: str, dtype_name: str):
    """The known-gap reason of a case, or None."""
    return KNOWN_GAPS.get((op_name, dtype_name)) or KNOWN_GAPS.get(op_name)
