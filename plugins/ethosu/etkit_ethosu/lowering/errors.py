"""Errors of the Ethos-U lowering."""
from __future__ import annotations


class LoweringError(ValueError):
    """A partition cannot be expressed in TOSA 1.0 INT (the message names the node and the reason).

    The partitioner checks the same conditions, so this is raised only for graphs it did not tag, or for a
    condition that depends on values known late (quantization parameters)."""
