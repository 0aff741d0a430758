// The process-wide Vulkan context: instance, the chosen physical device, one compute queue, memory
// types, a pipeline cache shared by every delegate, and dummy resources for unused shader bindings.
//
// Created on first use and kept for the life of the process (destroying a device while a driver's
// worker threads exit at process teardown is a common source of crashes, so it is never destroyed).
// Any Vulkan 1.1 device with a compute queue will do; a discrete GPU is preferred over an integrated
// one, over a virtual one, over a CPU implementation (lavapipe); ETKIT_VULKAN_DEVICE=<index> overrides.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <mutex>
#include <string>
#include <vector>

#include "vk_api.h"

namespace etkit_vulkan {

/// Tensor slots a shader may declare (bindings 2k: storage buffer, 2k+1: storage image) and plain
/// storage buffers after them (bindings kFirstBufferBinding + j: weights, indices, parameters).
constexpr uint32_t kMaxTensorSlots = 6;
constexpr uint32_t kFirstBufferBinding = 2 * kMaxTensorSlots;
constexpr uint32_t kMaxExtraBuffers = 4;
/// Specialization constants: ids 0..kMaxTensorSlots-1 give each slot's storage (0 buffer, 1 texture);
/// ids kFirstOpConstant.. are the shader's own.
constexpr uint32_t kFirstOpConstant = kMaxTensorSlots;
constexpr uint32_t kMaxSpecConstants = 16;
/// Every pipeline layout has one push-constant range of this many bytes (the guaranteed minimum).
constexpr uint32_t kPushConstantBytes = 128;

/// Descriptor-set and pipeline layout shared by every shader with the same bindings.
struct BindingLayout {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  uint32_t tensor_slots = 0;
  uint32_t extra_buffers = 0;
};

struct Pipeline {
  const BindingLayout* bindings = nullptr;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t local[3] = {64, 1, 1};
  uint32_t users = 0;  // graphs holding it (Context::pipeline, Context::release_pipelines)
};

/// Scalar type of float tensors in a graph: selects the "_f32" or "_f16" shader variants.
enum class FloatType { F32, F16 };

class Context {
 public:
  /// The context, created on first call; null with `reason` set when Vulkan is unusable here.
  static Context* get(std::string* reason);
  /// Whether a context can be created, without keeping the reason ("" when available).
  static bool probe(std::string* reason, std::string* device_description);

  VkDevice device() const { return device_; }
  const VkPhysicalDeviceProperties& properties() const { return props_; }
  const std::string& description() const { return description_; }
  bool supports_fp16() const { return fp16_; }
  /// Shaders run with robustBufferAccess (out-of-range buffer accesses stay inside the buffer).
  bool robust_buffer_access() const { return robust_buffer_access_; }
  bool supports_timestamps() const { return timestamp_bits_ > 0; }
  float timestamp_period_ns() const { return props_.limits.timestampPeriod; }
  uint32_t max_image_dimension_3d() const { return props_.limits.maxImageDimension3D; }
  uint64_t max_storage_buffer_range() const { return props_.limits.maxStorageBufferRange; }

  /// Memory type index for `type_bits` with all `required` flags, or UINT32_MAX.
  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags required) const;

  /// The layouts for `tensor_slots` tensor slots and `extra_buffers` plain buffers (created once).
  const BindingLayout* binding_layout(uint32_t tensor_slots, uint32_t extra_buffers, std::string* error);
  /// The pipeline of shader `<shader>_<f32|f16>` with these specialization constants and workgroup size,
  /// created on first request and shared while graphs use it. `held` lists the pipelines the calling graph
  /// holds: a pipeline not in it gains a user and is appended. Null with `error` set when the shader does
  /// not exist or the driver refuses it.
  const Pipeline* pipeline(const std::string& shader, FloatType ft, const BindingLayout* bindings,
                           const int32_t* spec, const uint32_t (&local)[3], std::vector<const Pipeline*>* held,
                           std::string* error);
  /// Ends a graph's use of the pipelines in `held` (and clears it). A pipeline no graph uses is destroyed;
  /// when none is left, the pipeline cache is emptied too. The driver's compiled code (LLVM-compiled on
  /// lavapipe, often hundreds of KiB per pipeline) so lives only as long as the delegates that need it:
  /// loading and freeing programs one after another, or programs of ever new shapes, cannot grow the
  /// process without bound.
  void release_pipelines(std::vector<const Pipeline*>* held);
  /// Pipelines alive now (held by at least one graph).
  size_t live_pipelines();

  /// Bound to tensor slots and buffers a dispatch leaves unused.
  VkBuffer dummy_buffer() const { return dummy_buffer_; }
  VkImageView dummy_image_view(FloatType ft) const { return ft == FloatType::F16 ? dummy_view16_ : dummy_view32_; }

  VkCommandPool command_pool() const { return command_pool_; }
  /// A primary command buffer from the context's pool (free it with vkFreeCommandBuffers).
  VkResult allocate_command_buffer(VkCommandBuffer* out);
  /// Submits and waits (queue access is serialised). Returns the first failing VkResult.
  VkResult submit_and_wait(VkCommandBuffer cb, VkFence fence);

 private:
  Context() = default;
  bool init(std::string* reason);
  bool create_dummies(std::string* reason);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties mem_props_{};
  std::string description_;
  bool robust_buffer_access_ = false;
  bool fp16_ = false;
  uint32_t queue_family_ = 0;
  uint32_t timestamp_bits_ = 0;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  std::mutex queue_mu_;
  std::mutex pipeline_mu_;
  std::map<std::string, Pipeline> pipelines_;
  std::map<std::pair<uint32_t, uint32_t>, BindingLayout> binding_layouts_;
  std::map<std::string, VkShaderModule> modules_;
  VkBuffer dummy_buffer_ = VK_NULL_HANDLE;
  VkImage dummy_image32_ = VK_NULL_HANDLE, dummy_image16_ = VK_NULL_HANDLE;
  VkImageView dummy_view32_ = VK_NULL_HANDLE, dummy_view16_ = VK_NULL_HANDLE;
  std::vector<VkDeviceMemory> dummy_memory_;
};

/// Allocates memory for `reqs` (device-local when possible, host-visible if `host_visible`).
VkResult allocate_memory(Context& ctx, const VkMemoryRequirements& reqs, bool host_visible, VkDeviceMemory* out);

}  // namespace etkit_vulkan
