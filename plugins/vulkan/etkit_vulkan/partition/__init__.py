"""The Vulkan partitioner: the op families of op_support.py, tagged for VulkanBackend."""
from .partitioner import VulkanPartitioner

__all__ = ["VulkanPartitioner"]
