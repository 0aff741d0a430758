"""etkit's Vulkan backend (backend id ``VulkanBackend``): GLSL compute shaders run through the Vulkan API
on any Vulkan 1.1 device, including Mesa's lavapipe CPU device.

Seed pages: "Vulkan Backend", "Partitioner API" (VulkanPartitioner), "Quantization" (Vulkan).

Attributes resolve lazily, so that loading the delegate (``etkit_vulkan._delegate``, what
``etkit.runtime.Runtime`` imports) does not import torch.
"""
from __future__ import annotations

import importlib

_LAZY = {
    "VulkanPartitioner": "etkit_vulkan.partition",
    "VulkanCompileOptions": "etkit_vulkan.compile_spec",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'etkit_vulkan' has no attribute {name!r}")
