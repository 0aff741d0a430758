"""The XNNPACK partitioner and its per-op-family configs."""
from .config_base import ConfigPrecisionType, XnnpackOpConfig
from .partitioner import NOT_IN_ANY_CONFIG, XnnpackPartitioner

__all__ = ["ConfigPrecisionType", "NOT_IN_ANY_CONFIG", "XnnpackOpConfig", "XnnpackPartitioner"]
