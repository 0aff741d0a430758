// Registration entry point of the Vulkan delegate (docs/design/contracts.md section 3).
//
// A native runner that links libetkit_vulkan_delegate.a calls etkit_vulkan_register_backends() once
// before loading programs; the Python extension module etkit_vulkan._delegate calls it when imported.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/// Registers the backend "VulkanBackend" with the etkit runtime, passing ETKIT_BACKEND_ABI_VERSION.
/// Returns 0 on success (also when already registered), otherwise the non-zero etkit::runtime::Error
/// code from etkit_register_backend(); the reason is then in etkit_backend_registration_error().
int etkit_vulkan_register_backends(void);

/// Whether a Vulkan device can be used here. Writes a NUL-terminated sentence into `reason` (the device
/// when available, else why not and what to install) and returns 1 or 0.
int etkit_vulkan_probe(char* reason, unsigned long reason_size);

/// Compute pipelines the process holds for loaded Vulkan delegates (-1 when no Vulkan device can be used).
/// A pipeline lives while a delegate uses it: the count returns to what it was once the methods that needed
/// it are freed.
long etkit_vulkan_live_pipelines(void);

#ifdef __cplusplus
}
#endif
