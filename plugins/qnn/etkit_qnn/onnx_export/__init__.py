"""Partitions written as ONNX graphs for ONNX Runtime's QNN execution provider (``builder.py``, ``ops.py``)."""
from .builder import ExportError, ExportedGraph, IOTensor, QParams, export_partition

__all__ = ["ExportError", "ExportedGraph", "IOTensor", "QParams", "export_partition"]
