// A Vulkan delegate instance: the payload's values and operators turned into device resources and a
// command buffer recorded once (at init, and again only when input shapes change).
//
// Build order (Graph::build): values -> operators (each adds its dispatches and a `configure` step that
// computes output sizes and shader parameters from the current input sizes) -> device resources for
// the tensors and weights the dispatches use (tensors sharing a mem_obj_id share one allocation) ->
// descriptor sets -> configure every operator at the upper-bound sizes -> record.
// execute: inputs are converted into host-visible staging buffers, the command buffer is submitted
// (staging -> tensors, every dispatch, tensors -> staging), outputs are converted back.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "context.h"
#include "etkit/runtime/freeable_buffer.h"
#include "payload.h"

namespace etkit::runtime {
class EValue;
class NamedDataMap;
}  // namespace etkit::runtime

namespace etkit_vulkan {

enum class Storage : uint8_t { Buffer = 0, Texture = 1 };

/// (W, H, C, N) sizes of a shape (see shaders/common.glslh): the last dimension is W, leading
/// dimensions beyond four fold into N.
std::array<int32_t, 4> whcn_sizes(const std::vector<int64_t>& sizes);

struct DeviceBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize bytes = 0;
  void* mapped = nullptr;     // host-visible buffers: their mapping
  bool host_visible = false;  // staging buffers (created host-visible and mapped)
};

struct VTensor {
  /// Float tensors use the graph's float type; Int32 tensors (indices, integer inputs) live in
  /// host-visible buffers.
  enum class Kind : uint8_t { Float, Int32 } kind = Kind::Float;
  etkit_vulkan::fb::VkDataType serialized_dtype = etkit_vulkan::fb::VkDataType::FLOAT32;
  etkit_vulkan::fb::VkDataType staging_dtype = etkit_vulkan::fb::VkDataType::FLOAT32;  // dtype of the host tensor
  std::vector<int64_t> max_sizes;
  std::vector<int64_t> sizes;
  Storage storage = Storage::Buffer;
  int mem_obj = -1;
  int constant_id = -1;
  bool needs_device = false;  // used by a dispatch (or an input/output): gets a buffer or image
  DeviceBuffer dev;  // buffer storage (mapped for Int32 tensors); dev.memory is set when not shared
  VkImage image = VK_NULL_HANDLE;  // texture storage
  VkImageView view = VK_NULL_HANDLE;
  VkDeviceMemory image_memory = VK_NULL_HANDLE;  // own memory of an image not in a shared mem_obj
  VkMemoryRequirements reqs{};
  int64_t numel() const;
  int64_t max_numel() const;
};

struct Value {
  enum class Kind : uint8_t { Null, Int, Double, Bool, Tensor, IntList, DoubleList, BoolList, ValueList, String, SymInt };
  Kind kind = Kind::Null;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  int tensor = -1;
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::vector<int> items;
  std::string s;
};

/// What a dispatch binds: tensor slots (tensor ids, -1 for none) and extra buffers.
struct Dispatch {
  std::string shader;
  std::array<int32_t, kMaxSpecConstants> spec{};
  const BindingLayout* bindings = nullptr;
  const Pipeline* pipeline = nullptr;  // chosen by Graph::set_grid for the grid's shape
  FloatType float_type = FloatType::F32;
  std::vector<int> tensors;              // slot k -> tensor id or -1
  std::vector<const DeviceBuffer*> buffers;  // extra buffer j (null: dummy)
  VkDescriptorSet set = VK_NULL_HANDLE;
  std::array<uint8_t, kPushConstantBytes> push{};
  uint32_t push_size = 0;
  uint32_t grid[3] = {0, 0, 0};  // invocations per dimension (0: nothing to run)
  std::string label;    // "<shader>_<op name>" for profiling
  int node = -1;
};

struct Node {
  std::string op;
  uint32_t node_id = 0;
  std::vector<int> dispatches;
  /// Recomputes output sizes and the dispatches' parameters from the current input sizes.
  std::function<bool(std::string*)> configure;
};

/// Timing of one dispatch from the last execute, on the device's clock.
struct DispatchTiming {
  const char* label;
  int32_t node_id;      // the payload node's debug handle, or -1 for staging dispatches
  uint64_t start_ns;
  uint64_t end_ns;
};

class Graph {
 public:
  explicit Graph(Context& ctx) : ctx_(ctx) {}
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Builds from a parsed payload; constants are read from the raw region or `named` (by key).
  bool build(const Payload& payload, const etkit::runtime::NamedDataMap* named, std::string* error);
  /// Runs on `args` = inputs then outputs (etkit tensors). False with `error` on a wrong input.
  bool execute(etkit::runtime::EValue** args, size_t nargs, std::string* error);

  size_t num_inputs() const { return input_ids_.size(); }
  size_t num_outputs() const { return output_ids_.size(); }
  size_t num_dispatches() const { return dispatches_.size(); }
  const std::vector<DispatchTiming>& timings() const { return timings_; }
  /// The last execute: its start (steady clock, ns) and the nanoseconds spent staging inputs on the host,
  /// in the submission (device work and the wait), and reading outputs on the host.
  uint64_t last_start_ns = 0, last_host_in_ns = 0, last_device_ns = 0, last_host_out_ns = 0;

  // ---- used by the operator implementations (ops/*.cpp) ----
  FloatType float_type() const { return float_type_; }
  Context& context() { return ctx_; }
  const Value& value(int id) const { return values_[static_cast<size_t>(id)]; }
  Value& value(int id) { return values_[static_cast<size_t>(id)]; }
  size_t num_values() const { return values_.size(); }
  VTensor& tensor_of(int value_id);
  bool is_tensor(int value_id) const;
  bool is_none(int value_id) const;
  bool is_constant(int value_id) const;
  /// An int / double / bool argument (Int and SymInt give their current value).
  bool int_arg(int value_id, int64_t* out, std::string* error) const;
  bool double_arg(int value_id, double* out, std::string* error) const;
  bool bool_arg(int value_id, bool* out, std::string* error) const;
  /// An int list (IntList, or ValueList of Int/SymInt values, resolved now).
  bool int_list(int value_id, std::vector<int64_t>* out, std::string* error) const;
  /// A constant tensor's values as float32 / int64 (any serialized dtype).
  bool constant_floats(int value_id, std::vector<float>* out, std::string* error) const;
  bool constant_ints(int value_id, std::vector<int64_t>* out, std::string* error) const;
  /// A constant's elements: bytes, count (at the upper bounds) and size of one, checked against its dtype.
  bool constant_elements(int value_id, const uint8_t** data, int64_t* count, size_t* element_size,
                         std::string* error) const;
  /// A constant's raw bytes and serialized dtype.
  bool constant_bytes(int value_id, const uint8_t** data, size_t* size, std::string* error) const;
  /// A device buffer holding `bytes` (uploaded at the end of build); owned by the graph.
  const DeviceBuffer* add_buffer(std::vector<uint8_t> bytes);
  /// Floats in the graph's float type (float32 or float16 bytes).
  const DeviceBuffer* add_float_buffer(const std::vector<float>& values);
  /// Adds a dispatch of `shader` for node `node`; tensors: slot -> tensor value id (-1 none). The spec
  /// array's first kMaxTensorSlots entries are filled from the tensors' storage.
  bool add_dispatch(int node, const std::string& shader, const std::vector<int>& tensor_values,
                    const std::vector<const DeviceBuffer*>& buffers, std::array<int32_t, kMaxSpecConstants> spec,
                    int* dispatch_id, std::string* error);
  Dispatch& dispatch(int id) { return dispatches_[static_cast<size_t>(id)]; }
  int add_node(const std::string& op, uint32_t node_id);
  Node& node(int id) { return nodes_[static_cast<size_t>(id)]; }
  /// Sets the invocation grid of dispatch `d` and picks its workgroup size (and so its pipeline).
  bool set_grid(int d, int64_t gx, int64_t gy, int64_t gz, std::string* error);
  /// One invocation per texel of a tensor of `sizes`: (ceil(W/4), H, C*N).
  bool set_texel_grid(int d, const std::vector<int64_t>& sizes, std::string* error);
  /// Marks a tensor value as needing a device resource.
  void use_tensor(int value_id);
  /// Checks at execute that input `value_id` (an integer graph input) holds indices in [0, rows).
  void check_indices(int value_id, int64_t rows) { index_checks_.emplace_back(value_id, rows); }
  /// Sets the current sizes of an output tensor, checking them against its upper bounds.
  bool set_sizes(int value_id, const std::vector<int64_t>& sizes, std::string* error);

 private:
  bool parse_values(const Payload& payload, const etkit::runtime::NamedDataMap* named, std::string* error);
  bool build_ops(const Payload& payload, std::string* error);
  bool create_tensor_resources(std::string* error);
  /// Refuses a graph whose device memory (as the driver sizes it, with staging, weights and uploads) exceeds the
  /// runtime's memory limit, before anything is allocated.
  bool check_device_memory(const std::map<int, std::vector<VTensor*>>& groups, std::string* error) const;
  bool create_staging(std::string* error);
  bool upload(std::string* error);
  bool write_descriptors(std::string* error);
  bool configure_all(std::string* error);
  bool record(std::string* error);
  bool warm_up(std::string* error);
  bool resize_inputs(etkit::runtime::EValue** args, bool* changed, std::string* error);
  void release();

  Context& ctx_;
  FloatType float_type_ = FloatType::F32;
  Storage default_storage_ = Storage::Buffer;
  std::vector<Value> values_;
  std::vector<VTensor> tensors_;
  std::vector<int> input_ids_, output_ids_;
  struct ConstantBytes {
    const uint8_t* data = nullptr;
    size_t size = 0;
    etkit::runtime::FreeableBuffer named;  // named data holding the bytes (released after build)
  };
  std::vector<ConstantBytes> constants_;
  /// Integer inputs that index a table: (tensor value id, table rows), checked at execute.
  std::vector<std::pair<int, int64_t>> index_checks_;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers_;
  std::vector<std::vector<uint8_t>> pending_uploads_;  // parallel to buffers_ until upload()
  std::vector<DeviceBuffer> staging_in_, staging_out_;
  std::vector<Dispatch> dispatches_;
  std::vector<const Pipeline*> pipelines_held_;  // given back to the context when the graph is released
  std::vector<Node> nodes_;
  std::vector<VkDeviceMemory> shared_memory_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  int staging_dispatch_first_ = 0;
  std::vector<int> stage_in_dispatches_, stage_out_dispatches_;
  std::vector<DispatchTiming> timings_;
};

}  // namespace etkit_vulkan
