"""The QNN partitioner: QDQ groups the HTP runs (configs.py), tagged for QnnBackend."""
from .partitioner import QnnPartitioner

__all__ = ["QnnPartitioner"]
