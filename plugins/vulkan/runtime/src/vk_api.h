// The Vulkan API, loaded at run time from the system's loader (libvulkan.so.1).
//
// The delegate never links libvulkan: a machine without the loader still imports the plugin and gets a
// precise "unavailable" reason instead of a failed dlopen of the whole module. Functions are resolved
// once, through vkGetInstanceProcAddr / vkGetDeviceProcAddr, into the table below.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace etkit_vulkan {

#define ETKIT_VK_GLOBAL_FNS(X) \
  X(vkCreateInstance)          \
  X(vkEnumerateInstanceVersion)

#define ETKIT_VK_INSTANCE_FNS(X)                 \
  X(vkDestroyInstance)                           \
  X(vkEnumeratePhysicalDevices)                  \
  X(vkGetPhysicalDeviceProperties)               \
  X(vkGetPhysicalDeviceFeatures2)                \
  X(vkGetPhysicalDeviceQueueFamilyProperties)    \
  X(vkGetPhysicalDeviceMemoryProperties)         \
  X(vkGetPhysicalDeviceFormatProperties)         \
  X(vkEnumerateDeviceExtensionProperties)        \
  X(vkCreateDevice)                              \
  X(vkGetDeviceProcAddr)

#define ETKIT_VK_DEVICE_FNS(X)       \
  X(vkDestroyDevice)                 \
  X(vkGetDeviceQueue)                \
  X(vkDeviceWaitIdle)                \
  X(vkQueueSubmit)                   \
  X(vkCreateBuffer)                  \
  X(vkDestroyBuffer)                 \
  X(vkGetBufferMemoryRequirements)   \
  X(vkBindBufferMemory)              \
  X(vkCreateImage)                   \
  X(vkDestroyImage)                  \
  X(vkGetImageMemoryRequirements)    \
  X(vkBindImageMemory)               \
  X(vkCreateImageView)               \
  X(vkDestroyImageView)              \
  X(vkAllocateMemory)                \
  X(vkFreeMemory)                    \
  X(vkMapMemory)                     \
  X(vkUnmapMemory)                   \
  X(vkCreateShaderModule)            \
  X(vkDestroyShaderModule)           \
  X(vkCreateDescriptorSetLayout)     \
  X(vkDestroyDescriptorSetLayout)    \
  X(vkCreatePipelineLayout)          \
  X(vkDestroyPipelineLayout)         \
  X(vkCreatePipelineCache)           \
  X(vkDestroyPipelineCache)          \
  X(vkCreateComputePipelines)        \
  X(vkDestroyPipeline)               \
  X(vkCreateDescriptorPool)          \
  X(vkDestroyDescriptorPool)         \
  X(vkAllocateDescriptorSets)        \
  X(vkUpdateDescriptorSets)          \
  X(vkCreateCommandPool)             \
  X(vkDestroyCommandPool)            \
  X(vkAllocateCommandBuffers)        \
  X(vkFreeCommandBuffers)            \
  X(vkBeginCommandBuffer)            \
  X(vkEndCommandBuffer)              \
  X(vkResetCommandBuffer)            \
  X(vkCmdBindPipeline)               \
  X(vkCmdBindDescriptorSets)         \
  X(vkCmdPushConstants)              \
  X(vkCmdDispatch)                   \
  X(vkCmdPipelineBarrier)            \
  X(vkCmdCopyBuffer)                 \
  X(vkCmdFillBuffer)                 \
  X(vkCmdWriteTimestamp)             \
  X(vkCmdResetQueryPool)             \
  X(vkCreateQueryPool)               \
  X(vkDestroyQueryPool)              \
  X(vkGetQueryPoolResults)           \
  X(vkCreateFence)                   \
  X(vkDestroyFence)                  \
  X(vkResetFences)                   \
  X(vkWaitForFences)

/// Resolved entry points. Filled by load_loader() (global), load_instance_fns() and load_device_fns().
struct VkFns {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#define ETKIT_VK_DECLARE(name) PFN_##name name = nullptr;
  ETKIT_VK_GLOBAL_FNS(ETKIT_VK_DECLARE)
  ETKIT_VK_INSTANCE_FNS(ETKIT_VK_DECLARE)
  ETKIT_VK_DEVICE_FNS(ETKIT_VK_DECLARE)
#undef ETKIT_VK_DECLARE
};

/// The process-wide table.
VkFns& vk();

/// dlopens the Vulkan loader (ETKIT_VULKAN_LOADER, else libvulkan.so.1, else libvulkan.so) and resolves
/// the global functions. Returns false with `reason` set when there is no loader.
bool load_loader(std::string* reason);
/// Resolves instance-level functions for `instance`; false with `reason` naming the first missing one.
bool load_instance_fns(VkInstance instance, std::string* reason);
/// Resolves device-level functions for `device`; false with `reason` naming the first missing one.
bool load_device_fns(VkDevice device, std::string* reason);

/// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.
const char* vk_result_name(VkResult r);

}  // namespace etkit_vulkan
