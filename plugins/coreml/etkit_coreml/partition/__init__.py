"""The Core ML partitioner: what coremltools can convert, tagged for CoreMLBackend."""
from .partitioner import CoreMLPartitioner, UnsupportedByCoreMLError

__all__ = ["CoreMLPartitioner", "UnsupportedByCoreMLError"]
