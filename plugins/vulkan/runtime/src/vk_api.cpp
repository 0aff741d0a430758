#include "vk_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace etkit_vulkan {

VkFns& vk() {
  static VkFns fns;
  return fns;
}

bool load_loader(std::string* reason) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  VkFns& f = vk();
  if (f.vkGetInstanceProcAddr != nullptr) return true;
  // ETKIT_VULKAN_LOADER names the loader to use (and only that one)
  const char* override_path = std::getenv("ETKIT_VULKAN_LOADER");
  const bool overridden = override_path != nullptr && *override_path != '\0';
  const char* candidates[] = {override_path, overridden ? nullptr : "libvulkan.so.1", overridden ? nullptr : "libvulkan.so"};
  void* lib = nullptr;
  std::string tried;
  for (const char* path : candidates) {
    if (path == nullptr || *path == '\0') continue;
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    if (!tried.empty()) tried += ", ";
    tried += path;
  }
  if (lib == nullptr) {
    *reason = "the Vulkan loader was not found (tried " + tried +
              "): install it (Debian: apt-get install libvulkan1 mesa-vulkan-drivers)";
    return false;
  }
  f.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (f.vkGetInstanceProcAddr == nullptr) {
    *reason = "the Vulkan loader has no vkGetInstanceProcAddr";
    return false;
  }
#define ETKIT_VK_LOAD_GLOBAL(name) f.name = reinterpret_cast<PFN_##name>(f.vkGetInstanceProcAddr(nullptr, #name));
  ETKIT_VK_GLOBAL_FNS(ETKIT_VK_LOAD_GLOBAL)
#undef ETKIT_VK_LOAD_GLOBAL
  if (f.vkCreateInstance == nullptr) {
    *reason = "the Vulkan loader does not provide vkCreateInstance";
    return false;
  }
  return true;  // vkEnumerateInstanceVersion is absent on Vulkan 1.0 loaders: callers check
}

bool load_instance_fns(VkInstance instance, std::string* reason) {
  VkFns& f = vk();
#define ETKIT_VK_LOAD_INSTANCE(name)                                                      \
  f.name = reinterpret_cast<PFN_##name>(f.vkGetInstanceProcAddr(instance, #name));        \
  if (f.name == nullptr) {                                                                 \
    *reason = "the Vulkan instance has no " #name " (Vulkan 1.1 is required)";            \
    return false;                                                                          \
  }
  ETKIT_VK_INSTANCE_FNS(ETKIT_VK_LOAD_INSTANCE)
#undef ETKIT_VK_LOAD_INSTANCE
  return true;
}

bool load_device_fns(VkDevice device, std::string* reason) {
  VkFns& f = vk();
#define ETKIT_VK_LOAD_DEVICE(name)                                         \
  f.name = reinterpret_cast<PFN_##name>(f.vkGetDeviceProcAddr(device, #name)); \
  if (f.name == nullptr) {                                                  \
    *reason = "the Vulkan device has no " #name;                          \
    return false;                                                           \
  }
  ETKIT_VK_DEVICE_FNS(ETKIT_VK_LOAD_DEVICE)
#undef ETKIT_VK_LOAD_DEVICE
  return true;
}

const char* vk_result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VK_ERROR_UNKNOWN";
  }
}

}  // namespace etkit_vulkan
