"""etkit's Vulkan backend (backend id ``VulkanBackend``): GLSL compute shaders run through the Vulkan API
on any Vulkan 1.1 device, including Mesa's lavapipe CPU device.

Seed pages: "Vulkan Backend", "Partitioner API" (VulkanPartitioner), "Quantization" (Vulkan).
"""
from .compile_options import VulkanCompileOptions  # noqa: E402
from .partitioner import VulkanPartitioner  # noqa: E402

__all__ = ["VulkanPartitioner", "VulkanCompileOptions"]
