"""A thin builder over ``tosa_serializer`` (Arm's TOSA serialization library, from ``tosa-tools``) for
TOSA 1.0 graphs: unique tensor names, typed constants and the operand conventions of TOSA 1.0 (zero points,
rescale multipliers, shapes and table contents are constant input tensors, not attributes).

Reference: the TOSA 1.0 specification (operators RESCALE, CONV2D, CLAMP, TABLE, ...); the serializer's
calls and pitfalls are in docs/design/ethosu-route.md, sections 2.3 and 7.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .errors import LoweringError

_NP = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "BOOL": np.bool_}


def import_serializer():
    """``tosa_serializer``, or an ImportError that says how to install it."""
    try:
        import tosa_serializer
    except ImportError as exc:
        raise ImportError(
            "the Ethos-U lowering needs Arm's TOSA serializer from tosa-tools: `pip install --no-deps "
            "tosa-tools==2026.8.0` (its numpy<2.2 / ml-dtypes==0.5.3 pins conflict with current numpy; it works "
            "with numpy 2.4, see etkit-ethosu's README, \"Set-up notes and limits\")") from exc
    return tosa_serializer


def mult_shift(scale: float) -> tuple[int, int]:
    """TOSA's 32-bit fixed-point form of a positive real ``scale``: ``scale ~= multiplier * 2**-shift`` with a
    31-bit ``multiplier`` and ``2 <= shift <= 62`` (TOSA 1.0, RESCALE; the same decomposition as ExecuTorch's).

    Raises:
        LoweringError: ``scale`` is not positive and finite, or too large to represent (shift < 2).
    """
    if not (scale > 0 and math.isfinite(scale)):
        raise LoweringError(f"rescale factor {scale!r} is not a positive finite number")
    mantissa, exponent = math.frexp(scale)
    multiplier = round(mantissa * (1 << 31))
    if multiplier == 1 << 31:
        multiplier //= 2
        exponent += 1
    shift = 31 - exponent
    if shift > 62:
        multiplier >>= min(31, shift - 62)
        shift = 62
    if shift < 2:
        raise LoweringError(f"rescale factor {scale:g} is too large for TOSA's RESCALE (at most 2**29)")
    return multiplier, shift


class TosaWriter:
    """Builds one TOSA 1.0 graph (one region, one basic block) and serializes it."""

    def __init__(self) -> None:
        self.ts = ts = import_serializer()
        if ts.TOSA_VERSION_MAJOR != 1:
            raise ImportError(f"tosa-tools serializes TOSA {ts.TOSA_VERSION_MAJOR}.x; etkit-ethosu writes TOSA 1.0")
        self.graph = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
        self.block = self.graph.currRegion.currBasicBlock
        self._count = 0
        self.operators: list[str] = []
        #: The Edge debug handles the operators written now belong to (set by the lowering per Edge node), and
        #: for each tensor made or written by an operator meanwhile, the handles it was written with.
        self.owner: tuple = ()
        self.owners: dict[str, tuple] = {}

    def dtype(self, name: str):
        return getattr(self.ts.DType, name)

    def fresh(self, base: str) -> str:
        """A new tensor name; it belongs to the current :attr:`owner` (constants included: Vela may give a
        constant operand a layer of its own, e.g. rescaling it)."""
        self._count += 1
        name = f"{base}_{self._count}"
        if self.owner:
            self.owners[name] = self.owner
        return name

    # ---- tensors ------------------------------------------------------------------------------------

    def input(self, name: str, shape: Sequence[int], dtype: str) -> str:
        self.graph.addInputTensor(self.ts.TosaSerializerTensor(name, list(shape), self.dtype(dtype), None))
        return name

    def output(self, name: str) -> None:
        self.graph.addOutputTensor(self.block.tensors[name])

    def tensor(self, base: str, shape: Sequence[int], dtype: str) -> str:
        name = self.fresh(base)
        self.block.addTensor(name, list(shape), self.dtype(dtype))
        return name

    def const(self, base: str, values, dtype: str, shape: Sequence[int] | None = None) -> str:
        array = np.asarray(values, dtype=_NP[dtype])
        shape = list(array.shape if shape is None else shape)
        name = self.fresh(base)
        self.graph.addConst(shape, self.dtype(dtype), array.reshape(-1), name=name)
        return name

    def shape_const(self, values: Sequence[int]) -> str:
        name = self.fresh("shape")
        self.graph.addConst([len(values)], self.ts.DType.SHAPE, np.asarray(values, dtype=np.int64), name=name)
        return name

    # ---- operators ----------------------------------------------------------------------------------

    def op(self, op: str, inputs: Sequence[str], outputs: Sequence[str], attribute: str, *args) -> None:
        """Add operator ``op`` (a ``ts.Op`` name); ``attribute`` is the ``TosaSerializerAttribute`` method to
        call with ``args`` (TOSA 1.0 needs one on every operator, even argument-less)."""
        attr = self.ts.TosaSerializerAttribute()
        getattr(attr, attribute)(*args)
        self.graph.addOperator(getattr(self.ts.Op, op), list(inputs), list(outputs), attr)
        self.operators.append(op)
        for name in outputs:
            self.owners[name] = self.owner

    def rescale(self, x: str, in_dtype: str, in_zp: int, scales: Sequence[float], out_shape: Sequence[int],
                out_dtype: str, out_zp: int) -> str:
        """RESCALE ``x`` (SINGLE_ROUND, 32-bit multipliers): ``out = clamp(round((x - in_zp) * scale) + out_zp)``;
        one scale per tensor or one per channel (the innermost dimension)."""
        pairs = [mult_shift(float(s)) for s in scales]
        out = self.tensor("rescaled", out_shape, out_dtype)
        inputs = [x, self.const("multiplier", [m for m, _ in pairs], "INT32"),
                  self.const("shift", [s for _, s in pairs], "INT8"),
                  self.const("input_zp", [in_zp], in_dtype), self.const("output_zp", [out_zp], out_dtype)]
        self.op("RESCALE", inputs, [out], "RescaleAttribute", True, self.ts.RoundingMode.SINGLE_ROUND,
                len(pairs) > 1, False, False)
        return out

    def clamp(self, x: str, shape: Sequence[int], dtype: str, low: int, high: int) -> str:
        out = self.tensor("clamped", shape, dtype)
        as_bytes = lambda v: list(np.asarray([v], dtype=_NP[dtype]).view(np.uint8))  # noqa: E731
        self.op("CLAMP", [x], [out], "ClampAttribute", as_bytes(low), as_bytes(high),
                self.ts.NanPropagationMode.PROPAGATE)
        return out

    def reshape(self, x: str, shape: Sequence[int], dtype: str) -> str:
        out = self.tensor("reshaped", shape, dtype)
        self.op("RESHAPE", [x, self.shape_const(shape)], [out], "ReshapeAttribute")
        return out

    def transpose(self, x: str, shape: Sequence[int], perms: Sequence[int], dtype: str) -> str:
        out = self.tensor("transposed", [shape[p] for p in perms], dtype)
        self.op("TRANSPOSE", [x], [out], "TransposeAttribute", list(perms))
        return out

    def serialize(self) -> bytes:
        return bytes(self.graph.serialize())
