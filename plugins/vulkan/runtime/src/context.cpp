#include "context.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "shader_table.h"

namespace etkit_vulkan {

namespace {

std::string vk_version(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

int device_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

const char* device_type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

bool image_storage_ok(VkPhysicalDevice pd, VkFormat format) {
  VkFormatProperties fp{};
  vk().vkGetPhysicalDeviceFormatProperties(pd, format, &fp);
  return (fp.optimalTilingFeatures & VK_FORMAT_FEATURE_STORAGE_IMAGE_BIT) != 0;
}

}  // namespace

Context* Context::get(std::string* reason) {
  static std::once_flag once;
  static Context* context = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    auto* c = new Context();
    if (c->init(&failure)) {
      context = c;
    }
    // a failed context keeps its partly created objects: the process has no use for Vulkan anyway
  });
  if (context == nullptr && reason != nullptr) *reason = failure;
  return context;
}

bool Context::probe(std::string* reason, std::string* device_description) {
  std::string why;
  Context* c = get(&why);
  if (c == nullptr) {
    if (reason) *reason = why;
    return false;
  }
  if (device_description) *device_description = c->description();
  return true;
}

bool Context::init(std::string* reason) {
  if (!load_loader(reason)) return false;
  VkFns& f = vk();
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (f.vkEnumerateInstanceVersion != nullptr) f.vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_1) {
    *reason = "the Vulkan loader supports only Vulkan " + vk_version(loader_version) +
              "; Vulkan 1.1 is required (update libvulkan1)";
    return false;
  }
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "etkit";
  app.pEngineName = "etkit-vulkan";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  const char* validation = "VK_LAYER_KHRONOS_validation";
  if (const char* v = std::getenv("ETKIT_VULKAN_VALIDATION"); v != nullptr && v[0] == '1') {
    ici.enabledLayerCount = 1;
    ici.ppEnabledLayerNames = &validation;
  }
  VkResult r = f.vkCreateInstance(&ici, nullptr, &instance_);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
    *reason = "no Vulkan ICD found: install mesa-vulkan-drivers (lavapipe, a CPU device) or a GPU's Vulkan driver";
    return false;
  }
  if (r != VK_SUCCESS) {
    *reason = std::string("vkCreateInstance failed: ") + vk_result_name(r);
    return false;
  }
  if (!load_instance_fns(instance_, reason)) return false;

  uint32_t count = 0;
  f.vkEnumeratePhysicalDevices(instance_, &count, nullptr);
  if (count == 0) {
    *reason = "no Vulkan ICD found: install mesa-vulkan-drivers (lavapipe, a CPU device) or a GPU's Vulkan driver";
    return false;
  }
  std::vector<VkPhysicalDevice> devices(count);
  f.vkEnumeratePhysicalDevices(instance_, &count, devices.data());

  // candidates: Vulkan >= 1.1, a compute queue, storage images of both float formats
  struct Candidate { VkPhysicalDevice pd; VkPhysicalDeviceProperties props; uint32_t family; uint32_t ts_bits; };
  std::vector<Candidate> usable;
  std::string rejected;
  for (VkPhysicalDevice pd : devices) {
    VkPhysicalDeviceProperties props{};
    f.vkGetPhysicalDeviceProperties(pd, &props);
    std::string why;
    uint32_t nq = 0;
    f.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qf(nq);
    f.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf.data());
    uint32_t family = UINT32_MAX;
    for (uint32_t q = 0; q < nq; ++q) {
      if (qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        family = q;
        break;
      }
    }
    if (props.apiVersion < VK_API_VERSION_1_1) why = "supports only Vulkan " + vk_version(props.apiVersion);
    else if (family == UINT32_MAX) why = "has no compute queue";
    else if (!image_storage_ok(pd, VK_FORMAT_R32G32B32A32_SFLOAT)) why = "cannot use RGBA32F storage images";
    if (!why.empty()) {
      rejected += std::string(rejected.empty() ? "" : "; ") + props.deviceName + " " + why;
      continue;
    }
    usable.push_back({pd, props, family, qf[family].timestampValidBits});
  }
  if (usable.empty()) {
    *reason = "no usable Vulkan device (" + rejected + "); a Vulkan 1.1 device with a compute queue is required";
    return false;
  }
  size_t pick = 0;
  if (const char* env = std::getenv("ETKIT_VULKAN_DEVICE"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    long idx = std::strtol(env, &end, 10);
    if (end == env || *end != '\0' || idx < 0 || static_cast<size_t>(idx) >= usable.size()) {
      *reason = std::string("ETKIT_VULKAN_DEVICE=") + env + " is not a usable device index (0.." +
                std::to_string(usable.size() - 1) + ")";
      return false;
    }
    pick = static_cast<size_t>(idx);
  } else {
    for (size_t i = 1; i < usable.size(); ++i) {
      if (device_rank(usable[i].props.deviceType) < device_rank(usable[pick].props.deviceType)) pick = i;
    }
  }
  physical_ = usable[pick].pd;
  props_ = usable[pick].props;
  queue_family_ = usable[pick].family;
  timestamp_bits_ = props_.limits.timestampComputeAndGraphics ? usable[pick].ts_bits : 0;
  f.vkGetPhysicalDeviceMemoryProperties(physical_, &mem_props_);
  description_ = std::string(props_.deviceName) + " (" + device_type_name(props_.deviceType) + ", Vulkan " +
                 vk_version(props_.apiVersion) + ")";

  // fp16 tensors need 16-bit storage buffers, float16 arithmetic types and RGBA16F storage images
  VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features float16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  storage16.pNext = &float16;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &storage16;
  f.vkGetPhysicalDeviceFeatures2(physical_, &features);
  bool has_float16_ext = false;
  {
    uint32_t n = 0;
    f.vkEnumerateDeviceExtensionProperties(physical_, nullptr, &n, nullptr);
    std::vector<VkExtensionProperties> exts(n);
    f.vkEnumerateDeviceExtensionProperties(physical_, nullptr, &n, exts.data());
    for (const auto& e : exts) {
      if (std::strcmp(e.extensionName, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME) == 0) has_float16_ext = true;
    }
  }
  fp16_ = storage16.storageBuffer16BitAccess && float16.shaderFloat16 && has_float16_ext &&
          image_storage_ok(physical_, VK_FORMAT_R16G16B16A16_SFLOAT);
  // A shader's access outside its bound buffer reads zero or a value of the buffer and writes nothing
  // outside it (robustBufferAccess, a Vulkan 1.0 feature), instead of reaching whatever memory follows: the
  // delegate checks the payload's sizes, and this keeps a mistake there from becoming a wild access, which
  // on a CPU device (lavapipe) would land in the process's own heap.
  robust_buffer_access_ = features.features.robustBufferAccess == VK_TRUE;
  if (robust_buffer_access_) description_ += ", robust buffer access";

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkPhysicalDevice16BitStorageFeatures enable16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features enablef16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  const char* ext_names[] = {VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME};
  VkPhysicalDeviceFeatures2 enable{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  enable.features.robustBufferAccess = robust_buffer_access_ ? VK_TRUE : VK_FALSE;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.pNext = &enable;  // the features (pEnabledFeatures stays null, as the pNext form requires)
  if (fp16_) {
    enable16.storageBuffer16BitAccess = VK_TRUE;
    enablef16.shaderFloat16 = VK_TRUE;
    enable16.pNext = &enablef16;
    enable.pNext = &enable16;
    dci.enabledExtensionCount = 1;
    dci.ppEnabledExtensionNames = ext_names;
  }
  r = f.vkCreateDevice(physical_, &dci, nullptr, &device_);
  if (r != VK_SUCCESS) {
    *reason = std::string("vkCreateDevice failed on ") + description_ + ": " + vk_result_name(r);
    return false;
  }
  if (!load_device_fns(device_, reason)) return false;
  f.vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cpi.queueFamilyIndex = queue_family_;
  if ((r = f.vkCreateCommandPool(device_, &cpi, nullptr, &command_pool_)) != VK_SUCCESS) {
    *reason = std::string("vkCreateCommandPool failed: ") + vk_result_name(r);
    return false;
  }
  VkPipelineCacheCreateInfo pci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  if ((r = f.vkCreatePipelineCache(device_, &pci, nullptr, &pipeline_cache_)) != VK_SUCCESS) {
    *reason = std::string("vkCreatePipelineCache failed: ") + vk_result_name(r);
    return false;
  }
  return create_dummies(reason);
}

uint32_t Context::memory_type(uint32_t type_bits, VkMemoryPropertyFlags required) const {
  for (uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i) {
    if ((type_bits & (1u << i)) && (mem_props_.memoryTypes[i].propertyFlags & required) == required) return i;
  }
  return UINT32_MAX;
}

VkResult allocate_memory(Context& ctx, const VkMemoryRequirements& reqs, bool host_visible, VkDeviceMemory* out) {
  uint32_t type = UINT32_MAX;
  if (host_visible) {
    type = ctx.memory_type(reqs.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  } else {
    type = ctx.memory_type(reqs.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (type == UINT32_MAX) type = ctx.memory_type(reqs.memoryTypeBits, 0);
  }
  if (type == UINT32_MAX) return VK_ERROR_FEATURE_NOT_PRESENT;
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = reqs.size;
  mai.memoryTypeIndex = type;
  return vk().vkAllocateMemory(ctx.device(), &mai, nullptr, out);
}

bool Context::create_dummies(std::string* reason) {
  VkFns& f = vk();
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = 64;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkResult r = f.vkCreateBuffer(device_, &bci, nullptr, &dummy_buffer_);
  VkMemoryRequirements reqs{};
  VkDeviceMemory mem = VK_NULL_HANDLE;
  if (r == VK_SUCCESS) {
    f.vkGetBufferMemoryRequirements(device_, dummy_buffer_, &reqs);
    r = allocate_memory(*this, reqs, false, &mem);
  }
  if (r == VK_SUCCESS) r = f.vkBindBufferMemory(device_, dummy_buffer_, mem, 0);
  if (r != VK_SUCCESS) {
    *reason = std::string("creating a dummy buffer failed: ") + vk_result_name(r);
    return false;
  }
  dummy_memory_.push_back(mem);
  struct { VkFormat format; VkImage* image; VkImageView* view; } images[] = {
      {VK_FORMAT_R32G32B32A32_SFLOAT, &dummy_image32_, &dummy_view32_},
      {VK_FORMAT_R16G16B16A16_SFLOAT, &dummy_image16_, &dummy_view16_}};
  std::vector<VkImage> created;
  for (auto& im : images) {
    if (im.format == VK_FORMAT_R16G16B16A16_SFLOAT && !fp16_) continue;
    VkImageCreateInfo ici{VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO};
    ici.imageType = VK_IMAGE_TYPE_3D;
    ici.format = im.format;
    ici.extent = {1, 1, 1};
    ici.mipLevels = 1;
    ici.arrayLayers = 1;
    ici.samples = VK_SAMPLE_COUNT_1_BIT;
    ici.tiling = VK_IMAGE_TILING_OPTIMAL;
    ici.usage = VK_IMAGE_USAGE_STORAGE_BIT;
    ici.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
    r = f.vkCreateImage(device_, &ici, nullptr, im.image);
    if (r == VK_SUCCESS) {
      f.vkGetImageMemoryRequirements(device_, *im.image, &reqs);
      r = allocate_memory(*this, reqs, false, &mem);
    }
    if (r == VK_SUCCESS) r = f.vkBindImageMemory(device_, *im.image, mem, 0);
    if (r == VK_SUCCESS) {
      dummy_memory_.push_back(mem);
      VkImageViewCreateInfo vci{VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO};
      vci.image = *im.image;
      vci.viewType = VK_IMAGE_VIEW_TYPE_3D;
      vci.format = im.format;
      vci.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
      r = f.vkCreateImageView(device_, &vci, nullptr, im.view);
    }
    if (r != VK_SUCCESS) {
      *reason = std::string("creating a dummy image failed: ") + vk_result_name(r);
      return false;
    }
    created.push_back(*im.image);
  }
  // storage images are used in the GENERAL layout: transition the dummies once
  VkCommandBuffer cb = VK_NULL_HANDLE;
  if ((r = allocate_command_buffer(&cb)) != VK_SUCCESS) {
    *reason = std::string("vkAllocateCommandBuffers failed: ") + vk_result_name(r);
    return false;
  }
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  f.vkBeginCommandBuffer(cb, &bi);
  for (VkImage image : created) {
    VkImageMemoryBarrier b{VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER};
    b.oldLayout = VK_IMAGE_LAYOUT_UNDEFINED;
    b.newLayout = VK_IMAGE_LAYOUT_GENERAL;
    b.srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    b.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    b.image = image;
    b.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    f.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 0, nullptr,
                           0, nullptr, 1, &b);
  }
  f.vkEndCommandBuffer(cb);
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence = VK_NULL_HANDLE;
  f.vkCreateFence(device_, &fci, nullptr, &fence);
  r = submit_and_wait(cb, fence);
  f.vkDestroyFence(device_, fence, nullptr);
  f.vkFreeCommandBuffers(device_, command_pool_, 1, &cb);
  if (r != VK_SUCCESS) {
    *reason = std::string("the first queue submission failed: ") + vk_result_name(r);
    return false;
  }
  return true;
}

VkResult Context::allocate_command_buffer(VkCommandBuffer* out) {
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = command_pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  return vk().vkAllocateCommandBuffers(device_, &cai, out);
}

VkResult Context::submit_and_wait(VkCommandBuffer cb, VkFence fence) {
  VkFns& f = vk();
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  VkResult r;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    r = f.vkQueueSubmit(queue_, 1, &si, fence);
  }
  if (r != VK_SUCCESS) return r;
  r = f.vkWaitForFences(device_, 1, &fence, VK_TRUE, UINT64_MAX);
  if (r != VK_SUCCESS) return r;
  return f.vkResetFences(device_, 1, &fence);
}

const BindingLayout* Context::binding_layout(uint32_t tensor_slots, uint32_t extra_buffers, std::string* error) {
  std::lock_guard<std::mutex> lock(pipeline_mu_);
  auto key = std::make_pair(tensor_slots, extra_buffers);
  auto it = binding_layouts_.find(key);
  if (it != binding_layouts_.end()) return &it->second;
  VkFns& f = vk();
  BindingLayout b;
  b.tensor_slots = tensor_slots;
  b.extra_buffers = extra_buffers;
  std::vector<VkDescriptorSetLayoutBinding> bindings;
  for (uint32_t k = 0; k < tensor_slots; ++k) {
    bindings.push_back({2 * k, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
    bindings.push_back({2 * k + 1, VK_DESCRIPTOR_TYPE_STORAGE_IMAGE, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
  }
  for (uint32_t j = 0; j < extra_buffers; ++j) {
    bindings.push_back({kFirstBufferBinding + j, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT,
                        nullptr});
  }
  VkDescriptorSetLayoutCreateInfo dli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dli.bindingCount = static_cast<uint32_t>(bindings.size());
  dli.pBindings = bindings.data();
  VkResult r = f.vkCreateDescriptorSetLayout(device_, &dli, nullptr, &b.set_layout);
  if (r != VK_SUCCESS) {
    *error = std::string("vkCreateDescriptorSetLayout failed: ") + vk_result_name(r);
    return nullptr;
  }
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushConstantBytes};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &b.set_layout;
  pli.pushConstantRangeCount = 1;
  pli.pPushConstantRanges = &range;
  if ((r = f.vkCreatePipelineLayout(device_, &pli, nullptr, &b.layout)) != VK_SUCCESS) {
    *error = std::string("vkCreatePipelineLayout failed: ") + vk_result_name(r);
    return nullptr;
  }
  return &binding_layouts_.emplace(key, b).first->second;
}

const Pipeline* Context::pipeline(const std::string& shader, FloatType ft, const BindingLayout* bindings,
                                  const int32_t* spec, const uint32_t (&local)[3], std::vector<const Pipeline*>* held,
                                  std::string* error) {
  const std::string module_name = shader + (ft == FloatType::F16 ? "_f16" : "_f32");
  std::string key = module_name + "/" + std::to_string(bindings->tensor_slots) + "/" +
                    std::to_string(bindings->extra_buffers) + "/" + std::to_string(local[0]) + "x" +
                    std::to_string(local[1]) + "x" + std::to_string(local[2]);
  for (uint32_t i = 0; i < kMaxSpecConstants; ++i) key += "," + std::to_string(spec[i]);
  std::lock_guard<std::mutex> lock(pipeline_mu_);
  auto hold = [held](Pipeline* p) -> const Pipeline* {
    if (std::find(held->begin(), held->end(), p) == held->end()) {
      ++p->users;
      held->push_back(p);
    }
    return p;
  };
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return hold(&it->second);
  if (ft == FloatType::F16 && !fp16_) {
    *error = "this Vulkan device (" + description_ + ") cannot run float16 shaders";
    return nullptr;
  }
  VkFns& f = vk();
  VkResult r;
  VkShaderModule module = VK_NULL_HANDLE;
  auto mit = modules_.find(module_name);
  if (mit != modules_.end()) {
    module = mit->second;
  } else {
    const ShaderBinary* bin = find_shader(module_name.c_str());
    if (bin == nullptr) {
      *error = "shader '" + module_name + "' is not in the delegate's shader library";
      return nullptr;
    }
    VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smi.codeSize = bin->word_count * 4;
    smi.pCode = bin->words;
    if ((r = f.vkCreateShaderModule(device_, &smi, nullptr, &module)) != VK_SUCCESS) {
      *error = "vkCreateShaderModule(" + module_name + ") failed: " + vk_result_name(r);
      return nullptr;
    }
    modules_[module_name] = module;
  }
  Pipeline p;
  p.bindings = bindings;
  for (int i = 0; i < 3; ++i) p.local[i] = local[i];
  // constant ids 0..15 from `spec`; ids 16, 17, 18 are the workgroup size (local_size_{x,y,z}_id)
  constexpr uint32_t kCount = kMaxSpecConstants + 3;
  VkSpecializationMapEntry entries[kCount];
  int32_t data[kCount];
  for (uint32_t i = 0; i < kCount; ++i) {
    entries[i] = {i, i * 4, 4};
    data[i] = i < kMaxSpecConstants ? spec[i] : static_cast<int32_t>(local[i - kMaxSpecConstants]);
  }
  VkSpecializationInfo si{kCount, entries, sizeof(data), data};
  VkComputePipelineCreateInfo cpi{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cpi.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  cpi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cpi.stage.module = module;
  cpi.stage.pName = "main";
  cpi.stage.pSpecializationInfo = &si;
  cpi.layout = bindings->layout;
  if ((r = f.vkCreateComputePipelines(device_, pipeline_cache_, 1, &cpi, nullptr, &p.pipeline)) != VK_SUCCESS) {
    *error = "vkCreateComputePipelines(" + module_name + ") failed: " + vk_result_name(r);
    return nullptr;
  }
  return hold(&pipelines_.emplace(key, p).first->second);
}

size_t Context::live_pipelines() {
  std::lock_guard<std::mutex> lock(pipeline_mu_);
  return pipelines_.size();
}

void Context::release_pipelines(std::vector<const Pipeline*>* held) {
  VkFns& f = vk();
  std::lock_guard<std::mutex> lock(pipeline_mu_);
  for (const Pipeline* p : *held) {
    auto it = std::find_if(pipelines_.begin(), pipelines_.end(), [p](const auto& kv) { return &kv.second == p; });
    if (it == pipelines_.end() || --it->second.users > 0) continue;
    f.vkDestroyPipeline(device_, it->second.pipeline, nullptr);
    pipelines_.erase(it);
  }
  held->clear();
  if (!pipelines_.empty() || pipeline_cache_ == VK_NULL_HANDLE) return;
  // Nothing uses a pipeline: start an empty cache (without one, pipelines are still created, uncached).
  f.vkDestroyPipelineCache(device_, pipeline_cache_, nullptr);
  pipeline_cache_ = VK_NULL_HANDLE;
  VkPipelineCacheCreateInfo pci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  if (f.vkCreatePipelineCache(device_, &pci, nullptr, &pipeline_cache_) != VK_SUCCESS) pipeline_cache_ = VK_NULL_HANDLE;
}

}  // namespace etkit_vulkan
