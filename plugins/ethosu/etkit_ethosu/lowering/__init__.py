"""Quantized edge subgraph -> TOSA 1.0 INT flatbuffer (the first half of the Ethos-U ``preprocess``)."""
from .errors import LoweringError
from .lower import LoweredTosa, lower_to_tosa

__all__ = ["LoweringError", "LoweredTosa", "lower_to_tosa"]
