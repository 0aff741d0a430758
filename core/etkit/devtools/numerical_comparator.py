"""Numerical comparators for :meth:`etkit.devtools.Inspector.calculate_numeric_gap` (ExecuTorch's
``executorch.devtools.inspector.numerical_comparator``; seed page "Debugging Models in ExecuTorch").

A comparator gets a mapping ``{(aot debug handles, reference output): (runtime debug handles, runtime output)}``,
may transform it in :meth:`~NumericalComparatorBase.preprocessing` (e.g. dequantize, change layout) and
scores each pair with :meth:`~NumericalComparatorBase.element_compare`. Subclass it for a metric of your own:

    class MaxAbs(NumericalComparatorBase):
        def element_compare(self, a, b) -> float:
            return float((a.double() - b.double()).abs().max())

    inspector.calculate_numeric_gap(MaxAbs())
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Optional

__all__ = ["L1Comparator", "MSEComparator", "NumericalComparatorBase", "SNRComparator", "comparator_for"]


class NumericalComparatorBase(ABC):
    """Compares a reference (ahead-of-time) output with a runtime output.

    Attributes:
        inspector: the :class:`~etkit.devtools.Inspector` asking (set by ``calculate_numeric_gap``), for
            comparators that need the program or the ETRecord.
    """

    def __init__(self, inspector: Optional[Any] = None) -> None:
        self.inspector = inspector

    def preprocessing(self, mapping: dict) -> dict:
        """The mapping to compare (default: unchanged). Keys are ``(aot debug handles, reference output)``,
        values ``(runtime debug handles, runtime output)``; handles are tuples of ints."""
        return mapping

    @abstractmethod
    def element_compare(self, a: Any, b: Any) -> float:
        """The gap between reference output ``a`` and runtime output ``b`` (same shape and dtype)."""


class MSEComparator(NumericalComparatorBase):
    """Mean squared difference (in float64; 0 for empty tensors)."""

    def element_compare(self, a, b) -> float:
        return float((a.double() - b.double()).pow(2).mean()) if a.numel() else 0.0


class L1Comparator(NumericalComparatorBase):
    """Mean absolute difference (in float64; 0 for empty tensors)."""

    def element_compare(self, a, b) -> float:
        return float((a.double() - b.double()).abs().mean()) if a.numel() else 0.0


class SNRComparator(NumericalComparatorBase):
    """Signal-to-noise ratio in dB, ``10 log10(mean(a^2) / mean((a - b)^2))``; infinite when equal, and lower
    is worse."""

    def element_compare(self, a, b) -> float:
        import torch

        a, b = a.double(), b.double()
        if torch.equal(a, b):
            return float("inf")
        return float(10 * torch.log10(a.pow(2).mean() / (a - b).pow(2).mean()))


_BUILT_IN = {"MSE": MSEComparator, "L1": L1Comparator, "SNR": SNRComparator}


def comparator_for(distance) -> NumericalComparatorBase:
    """``distance`` as a comparator: one of ``"MSE"``, ``"L1"``, ``"SNR"`` (any case), or a comparator.

    Raises:
        ValueError: an unknown name or another type (says which names exist).
    """
    if isinstance(distance, NumericalComparatorBase):
        return distance
    if isinstance(distance, str) and distance.upper() in _BUILT_IN:
        return _BUILT_IN[distance.upper()]()
    raise ValueError(f"unknown distance {distance!r}; use one of {sorted(_BUILT_IN)} or a NumericalComparatorBase")
