"""The Ethos-U partitioner: quantized TOSA-expressible groups, tagged for EthosUBackend."""
from .partitioner import EthosUPartitioner

__all__ = ["EthosUPartitioner"]
