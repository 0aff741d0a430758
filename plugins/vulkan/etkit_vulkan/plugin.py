"""Entry point of the etkit-vulkan plugin (group ``etkit.backends``; docs/plugins.md).

Light on purpose: no torch import here; classes are named as ``"module:attribute"`` strings.
"""
from __future__ import annotations

import importlib.util

from etkit.plugins import hookimpl
from etkit.plugins.spec import Availability, BackendSpec, distribution_version

#: Backend id stored in the .pte (ExecuTorch's id for its Vulkan backend).
BACKEND_ID = "VulkanBackend"
#: Python extension whose import registers the C++ delegate with etkit's runtime.
RUNTIME_MODULE = "etkit_vulkan._delegate"


def availability() -> Availability:
    """Available when a Vulkan 1.1 device with a compute queue exists (a GPU, or Mesa's lavapipe CPU device).

    The reason names what is missing: the native module, the Vulkan loader, or any ICD/driver.
    """
    if importlib.util.find_spec(RUNTIME_MODULE) is None:
        return Availability(False, f"the native delegate module {RUNTIME_MODULE} is not built; reinstall "
                                   f"etkit-vulkan (pip install --no-build-isolation plugins/vulkan)")
    from . import _delegate
    ok, text = _delegate.probe()
    return Availability(True) if ok else Availability(False, text)


@hookimpl
def etkit_register_backends(register) -> None:
    """Register ``VulkanBackend``: preprocess, partitioner, quantizer, runtime module and native library."""
    register(BackendSpec(
        backend_id=BACKEND_ID,
        backend_details="etkit_vulkan.preprocess:VulkanBackend",
        partitioners={"VulkanPartitioner": "etkit_vulkan.partition:VulkanPartitioner"},
        quantizers={"VulkanQuantizer": "etkit_vulkan.quantizer:VulkanQuantizer"},
        runtime_module=RUNTIME_MODULE,
        cmake_package="etkit_vulkan",
        register_function="etkit_vulkan_register_backends",
        describe_payload="etkit_vulkan.describe:describe_payload",
        plugin_api="2.0",
        version=distribution_version("etkit-vulkan"),
        availability=availability,
        runs_everywhere=False,
    ))
