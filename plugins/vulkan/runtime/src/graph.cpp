#include "graph.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <map>

#include "etkit/runtime/evalue.h"
#include "etkit/runtime/event_tracer.h"
#include "etkit/runtime/flatbuffer_alignment.h"
#include "etkit/runtime/named_data_map.h"
#include "etkit/runtime/program.h"  // effective_memory_limit
#include "etkit/runtime/tensor.h"
#include "half.h"
#include "ops.h"

namespace etkit_vulkan {

using etkit::runtime::EValue;
using etkit::runtime::ScalarType;
using etkit::runtime::Tensor;

namespace {

constexpr uint64_t kNamedOffset = UINT64_MAX;  // VkBytes.offset of a constant kept in named data

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

size_t dtype_size(etkit_vulkan::fb::VkDataType t) {
  switch (t) {
    case etkit_vulkan::fb::VkDataType::BOOL:
    case etkit_vulkan::fb::VkDataType::UINT8:
    case etkit_vulkan::fb::VkDataType::INT8: return 1;
    case etkit_vulkan::fb::VkDataType::FLOAT16: return 2;
    case etkit_vulkan::fb::VkDataType::INT32:
    case etkit_vulkan::fb::VkDataType::FLOAT32: return 4;
    case etkit_vulkan::fb::VkDataType::FLOAT64:
    case etkit_vulkan::fb::VkDataType::INT64: return 8;
    default: return 0;
  }
}

const char* dtype_name(etkit_vulkan::fb::VkDataType t) { return etkit_vulkan::fb::EnumNameVkDataType(t); }

bool is_float(etkit_vulkan::fb::VkDataType t) {
  return t == etkit_vulkan::fb::VkDataType::FLOAT32 || t == etkit_vulkan::fb::VkDataType::FLOAT16;
}
bool is_integer(etkit_vulkan::fb::VkDataType t) {
  return t == etkit_vulkan::fb::VkDataType::INT32 || t == etkit_vulkan::fb::VkDataType::INT64;
}

ScalarType scalar_type_of(etkit_vulkan::fb::VkDataType t) {
  switch (t) {
    case etkit_vulkan::fb::VkDataType::FLOAT16: return ScalarType::Half;
    case etkit_vulkan::fb::VkDataType::FLOAT32: return ScalarType::Float;
    case etkit_vulkan::fb::VkDataType::INT32: return ScalarType::Int;
    case etkit_vulkan::fb::VkDataType::INT64: return ScalarType::Long;
    case etkit_vulkan::fb::VkDataType::BOOL: return ScalarType::Bool;
    case etkit_vulkan::fb::VkDataType::UINT8: return ScalarType::Byte;
    case etkit_vulkan::fb::VkDataType::INT8: return ScalarType::Char;
    case etkit_vulkan::fb::VkDataType::FLOAT64: return ScalarType::Double;
    default: return etkit::runtime::kUndefinedScalarType;
  }
}

const char* scalar_name(ScalarType t) {
  switch (t) {
    case ScalarType::Half: return "float16";
    case ScalarType::Float: return "float32";
    case ScalarType::Int: return "int32";
    case ScalarType::Long: return "int64";
    case ScalarType::Bool: return "bool";
    case ScalarType::Byte: return "uint8";
    case ScalarType::Char: return "int8";
    case ScalarType::Double: return "float64";
    default: return "another dtype";
  }
}

/// `s` with bytes outside printable ASCII replaced by '?' (names quoted in errors may come from corrupt files).
std::string printable(std::string s) {
  for (char& c : s) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return s;
}

uint64_t now_ns() { return static_cast<uint64_t>(etkit::runtime::EventTracer::now_ns()); }

}  // namespace

/// A tensor value's dims, checked before anything is sized from them: every dim an int32 (the shaders'
/// index type), and its bytes (at 4 per element, the widest type the delegate computes in), alone and with the
/// other tensors that get device memory, within the runtime's memory limit (etkit::runtime::set_memory_limit).
/// So is each dim on its own: operators size per-row and per-channel buffers (a linear's bias, a norm's
/// weights) from one dim, and a zero elsewhere in the shape does not make those small.
static bool check_tensor_size(size_t index, const std::vector<int64_t>& dims, bool allocated, uint64_t* total,
                       std::string* error) {
  const uint64_t limit = etkit::runtime::effective_memory_limit();
  uint64_t numel = 1;
  for (int64_t d : dims) {
    if (d > INT32_MAX) {
      *error = "tensor value " + std::to_string(index) + " has a dim of " + std::to_string(d) +
               ", more than the delegate's limit of 2^31 - 1";
      return false;
    }
    if (d > 0 && static_cast<uint64_t>(d) > limit / 4) {
      *error = "tensor value " + std::to_string(index) + " has a dim of " + std::to_string(d) +
               ": at 4 bytes per element, one row of it is more than the memory limit of " + std::to_string(limit) +
               " bytes (etkit::runtime::set_memory_limit)";
      return false;
    }
    numel = (d != 0 && numel > limit / static_cast<uint64_t>(d)) ? limit + 1 : numel * static_cast<uint64_t>(d);
  }
  const uint64_t bytes = numel > limit / 4 ? limit + 1 : numel * 4;
  if (allocated) *total += bytes;
  if (bytes > limit || *total > limit) {
    *error = "tensor value " + std::to_string(index) + " needs " +
             (bytes > limit ? "more than " + std::to_string(limit) : std::to_string(bytes)) +
             " bytes, and the graph's tensors " + std::to_string(*total) + " bytes so far: more than the memory limit "
             "of " + std::to_string(limit) + " bytes (etkit::runtime::set_memory_limit)";
    return false;
  }
  return true;
}

std::array<int32_t, 4> whcn_sizes(const std::vector<int64_t>& sizes) {
  std::array<int32_t, 4> r{1, 1, 1, 1};
  const size_t n = sizes.size();
  for (size_t k = 0; k < n && k < 3; ++k) r[k] = static_cast<int32_t>(sizes[n - 1 - k]);
  // Saturating: a tensor with a 0 among its last three dims may have leading dims whose product overflows.
  int64_t folded = 1;
  for (size_t k = 3; k < n; ++k) {
    if (__builtin_mul_overflow(folded, sizes[n - 1 - k], &folded) || folded > INT32_MAX) folded = INT32_MAX;
  }
  r[3] = static_cast<int32_t>(folded);
  return r;
}

namespace {
/// The product of `dims`, 0 when any dim is 0. check_tensor_size bounds the product of a tensor's planned
/// dims when none is 0; a 0 anywhere must short-circuit, or the dims before it could overflow int64.
int64_t dims_product(const std::vector<int64_t>& dims) {
  if (std::find(dims.begin(), dims.end(), int64_t{0}) != dims.end()) return 0;
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}
}  // namespace

int64_t VTensor::numel() const { return dims_product(sizes); }

int64_t VTensor::max_numel() const { return dims_product(max_sizes); }

// ------------------------------------------------------------------------------------------- accessors

VTensor& Graph::tensor_of(int value_id) { return tensors_[static_cast<size_t>(values_[value_id].tensor)]; }

bool Graph::is_tensor(int value_id) const {
  return value_id >= 0 && static_cast<size_t>(value_id) < values_.size() && values_[value_id].kind == Value::Kind::Tensor;
}

bool Graph::is_none(int value_id) const {
  return value_id < 0 || static_cast<size_t>(value_id) >= values_.size() || values_[value_id].kind == Value::Kind::Null;
}

bool Graph::is_constant(int value_id) const {
  return is_tensor(value_id) && tensors_[values_[value_id].tensor].constant_id >= 0;
}

bool Graph::int_arg(int id, int64_t* out, std::string* error) const {
  if (id < 0 || static_cast<size_t>(id) >= values_.size()) {
    *error = "value " + std::to_string(id) + " is out of range";
    return false;
  }
  const Value& v = values_[id];
  switch (v.kind) {
    case Value::Kind::Int:
    case Value::Kind::SymInt: *out = v.i; return true;
    case Value::Kind::Bool: *out = v.b; return true;
    default: *error = "value " + std::to_string(id) + " is not an int"; return false;
  }
}

bool Graph::double_arg(int id, double* out, std::string* error) const {
  if (id < 0 || static_cast<size_t>(id) >= values_.size()) {
    *error = "value " + std::to_string(id) + " is out of range";
    return false;
  }
  const Value& v = values_[id];
  switch (v.kind) {
    case Value::Kind::Double: *out = v.d; return true;
    case Value::Kind::Int:
    case Value::Kind::SymInt: *out = static_cast<double>(v.i); return true;
    case Value::Kind::Bool: *out = v.b ? 1.0 : 0.0; return true;
    default: *error = "value " + std::to_string(id) + " is not a number"; return false;
  }
}

bool Graph::bool_arg(int id, bool* out, std::string* error) const {
  int64_t i = 0;
  if (id >= 0 && static_cast<size_t>(id) < values_.size() && values_[id].kind == Value::Kind::Bool) {
    *out = values_[id].b;
    return true;
  }
  if (!int_arg(id, &i, error)) return false;
  *out = i != 0;
  return true;
}

bool Graph::int_list(int id, std::vector<int64_t>* out, std::string* error) const {
  if (id < 0 || static_cast<size_t>(id) >= values_.size()) {
    *error = "value " + std::to_string(id) + " is out of range";
    return false;
  }
  const Value& v = values_[id];
  if (v.kind == Value::Kind::IntList) {
    *out = v.ints;
    return true;
  }
  if (v.kind == Value::Kind::ValueList) {
    out->clear();
    for (int item : v.items) {
      int64_t x = 0;
      if (!int_arg(item, &x, error)) return false;
      out->push_back(x);
    }
    return true;
  }
  if (v.kind == Value::Kind::Int || v.kind == Value::Kind::SymInt) {
    *out = {v.i};
    return true;
  }
  *error = "value " + std::to_string(id) + " is not an int list";
  return false;
}

bool Graph::constant_bytes(int id, const uint8_t** data, size_t* size, std::string* error) const {
  if (!is_constant(id)) {
    *error = "value " + std::to_string(id) + " must be a constant tensor";
    return false;
  }
  const ConstantBytes& c = constants_[tensors_[values_[id].tensor].constant_id];
  if (c.data == nullptr && c.size > 0) {
    *error = "constant of value " + std::to_string(id) + " was already released";
    return false;
  }
  *data = c.data;
  *size = c.size;
  return true;
}

bool Graph::constant_elements(int id, const uint8_t** data, int64_t* count, size_t* element_size,
                              std::string* error) const {
  size_t size = 0;
  if (!constant_bytes(id, data, &size, error)) return false;
  const VTensor& t = tensors_[values_[id].tensor];
  *count = t.max_numel();
  *element_size = dtype_size(t.serialized_dtype);
  if (*element_size == 0 || size < static_cast<size_t>(*count) * *element_size) {
    *error = "constant of value " + std::to_string(id) + " holds " + std::to_string(size) + " bytes, " +
             std::to_string(*count) + " elements of " + dtype_name(t.serialized_dtype) + " expected";
    return false;
  }
  return true;
}

bool Graph::constant_floats(int id, std::vector<float>* out, std::string* error) const {
  const uint8_t* data = nullptr;
  int64_t n = 0;
  size_t es = 0;
  if (!constant_elements(id, &data, &n, &es, error)) return false;
  const auto dtype = tensors_[values_[id].tensor].serialized_dtype;
  out->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = data + i * es;
    float f = 0;
    switch (dtype) {
      case etkit_vulkan::fb::VkDataType::FLOAT32: std::memcpy(&f, p, 4); break;
      case etkit_vulkan::fb::VkDataType::FLOAT16: { uint16_t h; std::memcpy(&h, p, 2); f = half_to_float(h); break; }
      case etkit_vulkan::fb::VkDataType::FLOAT64: { double d; std::memcpy(&d, p, 8); f = static_cast<float>(d); break; }
      case etkit_vulkan::fb::VkDataType::INT8: f = static_cast<int8_t>(*p); break;
      case etkit_vulkan::fb::VkDataType::UINT8:
      case etkit_vulkan::fb::VkDataType::BOOL: f = *p; break;
      case etkit_vulkan::fb::VkDataType::INT32: { int32_t x; std::memcpy(&x, p, 4); f = static_cast<float>(x); break; }
      case etkit_vulkan::fb::VkDataType::INT64: { int64_t x; std::memcpy(&x, p, 8); f = static_cast<float>(x); break; }
      default: break;
    }
    (*out)[static_cast<size_t>(i)] = f;
  }
  return true;
}

bool Graph::constant_ints(int id, std::vector<int64_t>* out, std::string* error) const {
  const uint8_t* data = nullptr;
  int64_t n = 0;
  size_t es = 0;
  if (!constant_elements(id, &data, &n, &es, error)) return false;
  const auto dtype = tensors_[values_[id].tensor].serialized_dtype;
  if (is_float(dtype)) {
    *error = "constant of value " + std::to_string(id) + " is " + dtype_name(dtype) + ", an integer tensor is expected";
    return false;
  }
  out->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = data + i * es;
    int64_t x = 0;
    switch (es) {
      case 1: x = dtype == etkit_vulkan::fb::VkDataType::INT8 ? static_cast<int8_t>(*p) : *p; break;
      case 4: { int32_t v; std::memcpy(&v, p, 4); x = v; break; }
      case 8: std::memcpy(&x, p, 8); break;
      default: break;
    }
    (*out)[static_cast<size_t>(i)] = x;
  }
  return true;
}

const DeviceBuffer* Graph::add_buffer(std::vector<uint8_t> bytes) {
  auto b = std::make_unique<DeviceBuffer>();
  b->bytes = std::max<VkDeviceSize>(bytes.size(), 16);
  buffers_.push_back(std::move(b));
  pending_uploads_.push_back(std::move(bytes));
  return buffers_.back().get();
}

const DeviceBuffer* Graph::add_float_buffer(const std::vector<float>& values) {
  std::vector<uint8_t> bytes;
  if (float_type_ == FloatType::F16) {
    bytes.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = float_to_half(values[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  } else {
    bytes.resize(values.size() * 4);
    if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());  // an empty vector's data() may be null
  }
  return add_buffer(std::move(bytes));
}

int Graph::add_node(const std::string& op, uint32_t node_id) {
  Node n;
  n.op = op;
  n.node_id = node_id;
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

void Graph::use_tensor(int value_id) {
  if (is_tensor(value_id)) tensor_of(value_id).needs_device = true;
}

bool Graph::add_dispatch(int node, const std::string& shader, const std::vector<int>& tensor_values,
                         const std::vector<const DeviceBuffer*>& buffers, std::array<int32_t, kMaxSpecConstants> spec,
                         int* dispatch_id, std::string* error) {
  if (tensor_values.size() > kMaxTensorSlots || buffers.size() > kMaxExtraBuffers) {
    *error = "internal: shader " + shader + " binds too many resources";
    return false;
  }
  Dispatch d;
  d.float_type = float_type_;
  for (size_t k = 0; k < tensor_values.size(); ++k) {
    const int v = tensor_values[k];
    if (v >= 0) {
      if (!is_tensor(v)) {
        *error = "value " + std::to_string(v) + " bound to " + shader + " is not a tensor";
        return false;
      }
      VTensor& t = tensor_of(v);
      if (t.kind != VTensor::Kind::Float) {
        *error = "value " + std::to_string(v) + " bound to " + shader + " is an integer tensor; a float tensor is required";
        return false;
      }
      t.needs_device = true;
      spec[k] = t.storage == Storage::Texture ? 1 : 0;
      d.tensors.push_back(values_[v].tensor);
    } else {
      spec[k] = 0;
      d.tensors.push_back(-1);
    }
  }
  d.buffers = buffers;
  d.shader = shader;
  d.spec = spec;
  d.bindings = ctx_.binding_layout(static_cast<uint32_t>(tensor_values.size()), static_cast<uint32_t>(buffers.size()),
                                   error);
  if (d.bindings == nullptr) return false;
  d.node = node;
  d.label = shader + (float_type_ == FloatType::F16 ? "_f16" : "_f32");
  if (node >= 0) d.label += "/" + nodes_[node].op + "#" + std::to_string(nodes_[node].node_id);
  dispatches_.push_back(std::move(d));
  *dispatch_id = static_cast<int>(dispatches_.size()) - 1;
  if (node >= 0) nodes_[node].dispatches.push_back(*dispatch_id);
  return true;
}

namespace {
uint32_t pow2_at_least(int64_t n, uint32_t cap) {
  uint32_t p = 1;
  while (p < cap && static_cast<int64_t>(p) < n) p <<= 1;
  return p;
}
}  // namespace

bool Graph::set_grid(int d, int64_t gx, int64_t gy, int64_t gz, std::string* error) {
  Dispatch& dp = dispatches_[static_cast<size_t>(d)];
  for (int64_t g : {gx, gy, gz}) {
    if (g < 0 || g > int64_t{65535} * 64) {
      *error = "a dispatch of " + std::to_string(gx) + " x " + std::to_string(gy) + " x " + std::to_string(gz) +
               " invocations exceeds the workgroup-count limits";
      return false;
    }
  }
  dp.grid[0] = static_cast<uint32_t>(gx);
  dp.grid[1] = static_cast<uint32_t>(gy);
  dp.grid[2] = static_cast<uint32_t>(gz);
  // 64 invocations per workgroup, shaped to the grid so narrow dimensions waste no lanes
  uint32_t local[3];
  local[0] = pow2_at_least(gx, 64);
  local[1] = pow2_at_least(gy, 64 / local[0]);
  local[2] = pow2_at_least(gz, 64 / (local[0] * local[1]));
  if (dp.pipeline != nullptr && std::equal(local, local + 3, dp.pipeline->local)) return true;
  dp.pipeline = ctx_.pipeline(dp.shader, float_type_, dp.bindings, dp.spec.data(), local, &pipelines_held_, error);
  return dp.pipeline != nullptr;
}

bool Graph::set_texel_grid(int d, const std::vector<int64_t>& sizes, std::string* error) {
  const auto w = whcn_sizes(sizes);
  return set_grid(d, (w[0] + 3) / 4, w[1], static_cast<int64_t>(w[2]) * w[3], error);
}

bool Graph::set_sizes(int value_id, const std::vector<int64_t>& sizes, std::string* error) {
  VTensor& t = tensor_of(value_id);
  if (sizes.size() != t.max_sizes.size()) {
    *error = "value " + std::to_string(value_id) + ": computed shape " + shape_str(sizes) + " has rank " +
             std::to_string(sizes.size()) + ", the graph planned " + shape_str(t.max_sizes);
    return false;
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] < 0 || sizes[k] > t.max_sizes[k]) {
      *error = "value " + std::to_string(value_id) + ": computed shape " + shape_str(sizes) +
               " exceeds the planned upper bounds " + shape_str(t.max_sizes);
      return false;
    }
  }
  t.sizes = sizes;
  return true;
}

// ------------------------------------------------------------------------------------------- build

bool Graph::build(const Payload& payload, const etkit::runtime::NamedDataMap* named, std::string* error) {
  if (!parse_values(payload, named, error)) return false;
  if (!build_ops(payload, error)) return false;
  if (!create_staging(error)) return false;
  if (!create_tensor_resources(error)) return false;
  if (!upload(error)) return false;
  if (!write_descriptors(error)) return false;
  if (!configure_all(error)) return false;
  // constants are on the device now: drop the host copies (named data and payload bytes)
  for (ConstantBytes& c : constants_) {
    c.named.Free();
    c.data = nullptr;
  }
  return record(error) && warm_up(error);
}

bool Graph::warm_up(std::string* error) {
  // One run on zeroed inputs, so drivers that compile shaders on first use (lavapipe's JIT) do it at
  // load time rather than in the first execute.
  for (size_t i = 0; i < input_ids_.size(); ++i) {
    const VTensor& t = tensor_of(input_ids_[i]);
    const DeviceBuffer* b = t.kind == VTensor::Kind::Int32 ? &t.dev : dispatches_[stage_in_dispatches_[i]].buffers[0];
    std::memset(b->mapped, 0, b->bytes);
  }
  VkResult r = ctx_.submit_and_wait(cmd_, fence_);
  if (r != VK_SUCCESS) {
    *error = std::string("the first Vulkan submission failed: ") + vk_result_name(r);
    return false;
  }
  return true;
}

bool Graph::parse_values(const Payload& payload, const etkit::runtime::NamedDataMap* named, std::string* error) {
  const etkit_vulkan::fb::VkGraph* g = payload.graph;
  const auto override_storage = g->storage_type_override();
  default_storage_ = override_storage == etkit_vulkan::fb::VkStorageType::TEXTURE_3D ? Storage::Texture : Storage::Buffer;
  uint64_t tensor_bytes = 0;  // device memory the non-constant tensors claim (check_tensor_size)

  // constants
  if (g->constants() != nullptr) {
    for (const etkit_vulkan::fb::VkBytes* b : *g->constants()) {
      ConstantBytes c;
      if (b == nullptr) {
        *error = "a constant entry is missing";
        return false;
      }
      if (b->offset() == kNamedOffset) {
        const char* key = b->named_key() != nullptr ? b->named_key()->c_str() : nullptr;
        const std::string key_text = key != nullptr ? printable(key) : std::string();
        if (key == nullptr || named == nullptr) {
          *error = std::string("constant ") + std::to_string(constants_.size()) +
                   " lives in the program's named data, but " + (key == nullptr ? "has no key" : "the program has no named data");
          return false;
        }
        auto data = named->get_data(key);
        if (!data.ok()) {
          *error = "constant '" + key_text + "' is not in the program's named data";
          return false;
        }
        c.named = std::move(data.get());
        c.data = static_cast<const uint8_t*>(c.named.data());
        c.size = c.named.size();
        if (c.size < b->length()) {
          *error = "named data '" + key_text + "' holds " + std::to_string(c.size) + " bytes, " +
                   std::to_string(b->length()) + " expected";
          return false;
        }
        c.size = b->length();
      } else {
        if (b->offset() > payload.raw_size || b->length() > payload.raw_size - b->offset()) {
          *error = "constant " + std::to_string(constants_.size()) + " at [" + std::to_string(b->offset()) + ", +" +
                   std::to_string(b->length()) + ") is outside the payload's " + std::to_string(payload.raw_size) +
                   " raw bytes";
          return false;
        }
        c.data = payload.raw + b->offset();
        c.size = b->length();
      }
      constants_.push_back(std::move(c));
    }
  }

  if (g->values() == nullptr) {
    *error = "the graph has no values";
    return false;
  }
  bool saw_f16 = false, saw_f32 = false;
  values_.resize(g->values()->size());
  for (size_t i = 0; i < values_.size(); ++i) {
    const etkit_vulkan::fb::VkValue* fv = g->values()->Get(static_cast<flatbuffers::uoffset_t>(i));
    Value& v = values_[i];
    if (fv == nullptr) {
      *error = "value " + std::to_string(i) + " is missing";
      return false;
    }
    // A union whose type is set may still have no table (the verifier accepts that): every value_as_*()
    // below is non-null once this holds.
    if (fv->value_type() != etkit_vulkan::fb::GraphTypes::NONE && fv->value_type() != etkit_vulkan::fb::GraphTypes::Null &&
        fv->value() == nullptr) {
      *error = "value " + std::to_string(i) + " has a type but no table";
      return false;
    }
    switch (fv->value_type()) {
      case etkit_vulkan::fb::GraphTypes::NONE:
      case etkit_vulkan::fb::GraphTypes::Null: v.kind = Value::Kind::Null; break;
      case etkit_vulkan::fb::GraphTypes::Int: v.kind = Value::Kind::Int; v.i = fv->value_as_Int()->int_val(); break;
      case etkit_vulkan::fb::GraphTypes::Double: v.kind = Value::Kind::Double; v.d = fv->value_as_Double()->double_val(); break;
      case etkit_vulkan::fb::GraphTypes::Bool: v.kind = Value::Kind::Bool; v.b = fv->value_as_Bool()->bool_val(); break;
      case etkit_vulkan::fb::GraphTypes::SymInt: v.kind = Value::Kind::SymInt; v.i = fv->value_as_SymInt()->value(); break;
      case etkit_vulkan::fb::GraphTypes::String:
        v.kind = Value::Kind::String;
        if (fv->value_as_String()->string_val() != nullptr) v.s = fv->value_as_String()->string_val()->str();
        break;
      case etkit_vulkan::fb::GraphTypes::IntList:
        v.kind = Value::Kind::IntList;
        if (!etkit::runtime::elements_aligned(fv->value_as_IntList()->items())) {
          *error = "value " + std::to_string(i) + ": its int list is not 8-byte aligned (the payload is corrupted)";
          return false;
        }
        if (auto* items = fv->value_as_IntList()->items()) v.ints.assign(items->begin(), items->end());
        break;
      case etkit_vulkan::fb::GraphTypes::DoubleList:
        v.kind = Value::Kind::DoubleList;
        if (!etkit::runtime::elements_aligned(fv->value_as_DoubleList()->items())) {
          *error = "value " + std::to_string(i) + ": its double list is not 8-byte aligned (the payload is corrupted)";
          return false;
        }
        if (auto* items = fv->value_as_DoubleList()->items()) v.doubles.assign(items->begin(), items->end());
        break;
      case etkit_vulkan::fb::GraphTypes::BoolList:
        v.kind = Value::Kind::BoolList;
        if (auto* items = fv->value_as_BoolList()->items()) {
          for (auto b : *items) v.ints.push_back(b ? 1 : 0);
        }
        break;
      case etkit_vulkan::fb::GraphTypes::ValueList:
        v.kind = Value::Kind::ValueList;
        if (auto* items = fv->value_as_ValueList()->items()) {
          for (int item : *items) {
            if (item < 0 || static_cast<size_t>(item) >= values_.size()) {
              *error = "value list " + std::to_string(i) + " refers to value " + std::to_string(item) + " out of range";
              return false;
            }
            v.items.push_back(item);
          }
        }
        break;
      case etkit_vulkan::fb::GraphTypes::VkTensor: {
        const etkit_vulkan::fb::VkTensor* ft = fv->value_as_VkTensor();
        VTensor t;
        t.serialized_dtype = ft->datatype();
        t.staging_dtype = ft->staging_datatype() == etkit_vulkan::fb::VkDataType::UNSET ? ft->datatype() : ft->staging_datatype();
        t.constant_id = ft->constant_id();
        t.mem_obj = ft->mem_obj_id();
        if (ft->dims() != nullptr) {
          for (uint32_t d : *ft->dims()) t.max_sizes.push_back(d);
        }
        if (!check_tensor_size(i, t.max_sizes, t.constant_id < 0, &tensor_bytes, error)) return false;
        t.sizes = t.max_sizes;
        if (t.constant_id >= 0 && static_cast<size_t>(t.constant_id) >= constants_.size()) {
          *error = "tensor value " + std::to_string(i) + " refers to constant " + std::to_string(t.constant_id) +
                   " of " + std::to_string(constants_.size());
          return false;
        }
        if (is_float(t.serialized_dtype)) {
          t.kind = VTensor::Kind::Float;
          // constants are converted to the graph's float type when uploaded
          if (t.constant_id < 0) (t.serialized_dtype == etkit_vulkan::fb::VkDataType::FLOAT16 ? saw_f16 : saw_f32) = true;
        } else if (is_integer(t.serialized_dtype)) {
          t.kind = VTensor::Kind::Int32;
        } else if (t.constant_id < 0) {
          *error = "tensor value " + std::to_string(i) + " is " + dtype_name(t.serialized_dtype) +
                   "; the Vulkan delegate computes on float16/float32 tensors and int32/int64 indices only";
          return false;
        }
        const auto w = whcn_sizes(t.max_sizes);
        const bool want_texture = ft->storage_type() == etkit_vulkan::fb::VkStorageType::TEXTURE_3D ||
                                  (ft->storage_type() == etkit_vulkan::fb::VkStorageType::DEFAULT_STORAGE &&
                                   default_storage_ == Storage::Texture);
        const uint32_t lim = ctx_.max_image_dimension_3d();
        const bool fits = static_cast<uint32_t>((w[0] + 3) / 4) <= lim && static_cast<uint32_t>(w[1]) <= lim &&
                          static_cast<int64_t>(w[2]) * w[3] <= lim;
        t.storage = (want_texture && fits && t.kind == VTensor::Kind::Float && t.constant_id < 0) ? Storage::Texture
                                                                                                  : Storage::Buffer;
        v.kind = Value::Kind::Tensor;
        v.tensor = static_cast<int>(tensors_.size());
        tensors_.push_back(std::move(t));
        break;
      }
      default:
        *error = "value " + std::to_string(i) + " has an unknown type";
        return false;
    }
  }
  if (saw_f16 && saw_f32) {
    *error = "the graph mixes float16 and float32 tensors; a Vulkan graph computes in one float type";
    return false;
  }
  float_type_ = saw_f16 ? FloatType::F16 : FloatType::F32;
  if (float_type_ == FloatType::F16 && !ctx_.supports_fp16()) {
    *error = "the graph computes in float16, which this device (" + ctx_.description() +
             ") does not support (16-bit storage and float16 shaders are required); re-lower without force_fp16";
    return false;
  }

  auto read_ids = [&](const flatbuffers::Vector<uint32_t>* ids, std::vector<int>* out, const char* what) {
    if (ids == nullptr) return true;
    for (uint32_t id : *ids) {
      if (!is_tensor(static_cast<int>(id))) {
        *error = std::string(what) + " " + std::to_string(id) + " is not a tensor value";
        return false;
      }
      out->push_back(static_cast<int>(id));
    }
    return true;
  };
  if (!read_ids(g->input_ids(), &input_ids_, "input") || !read_ids(g->output_ids(), &output_ids_, "output")) {
    return false;
  }
  for (int id : output_ids_) {
    if (tensor_of(id).kind != VTensor::Kind::Float) {
      *error = "output value " + std::to_string(id) + " is an integer tensor; the Vulkan delegate outputs float tensors";
      return false;
    }
  }
  return true;
}

bool Graph::build_ops(const Payload& payload, std::string* error) {
  const auto* chain = payload.graph->chain();
  if (chain == nullptr) return true;
  for (size_t i = 0; i < chain->size(); ++i) {
    const etkit_vulkan::fb::OperatorCall* call = chain->Get(static_cast<flatbuffers::uoffset_t>(i));
    const std::string name = printable(call != nullptr && call->name() != nullptr ? call->name()->str() : "");
    OpFn fn = find_op(name);
    if (fn == nullptr) {
      *error = "operator " + std::to_string(i) + " '" + name +
               "' is not implemented by this Vulkan delegate (a payload from a newer or different lowering); "
               "re-lower the model with this etkit-vulkan";
      return false;
    }
    std::vector<int> args;
    if (call->args() != nullptr) {
      for (int a : *call->args()) {
        if (a < 0 || static_cast<size_t>(a) >= values_.size()) {
          *error = "operator " + std::to_string(i) + " '" + name + "' refers to value " + std::to_string(a) +
                   " of " + std::to_string(values_.size());
          return false;
        }
        args.push_back(a);
      }
    }
    const int node = add_node(name, call->node_id());
    std::string why;
    if (!fn(*this, node, args, &why)) {
      *error = "operator " + std::to_string(i) + " '" + name + "': " + why;
      return false;
    }
  }
  return true;
}

bool Graph::create_staging(std::string* error) {
  const size_t fsize = float_type_ == FloatType::F16 ? 2 : 4;
  auto staging = [&](const VTensor& t) {
    auto b = std::make_unique<DeviceBuffer>();
    b->bytes = std::max<VkDeviceSize>(static_cast<VkDeviceSize>(t.max_numel()) * fsize, 16);
    b->host_visible = true;
    buffers_.push_back(std::move(b));
    pending_uploads_.emplace_back();
    return buffers_.back().get();
  };
  for (int id : input_ids_) {
    VTensor& t = tensor_of(id);
    t.needs_device = true;
    if (t.kind == VTensor::Kind::Int32) {
      stage_in_dispatches_.push_back(-1);  // written by the host directly
      continue;
    }
    const DeviceBuffer* b = staging(t);
    int d = 0;
    if (!add_dispatch(-1, "nchw_to_tensor", {id}, {b}, {}, &d, error)) return false;
    dispatches_[d].label = "nchw_to_tensor/input";
    stage_in_dispatches_.push_back(d);
  }
  for (int id : output_ids_) {
    const DeviceBuffer* b = staging(tensor_of(id));
    int d = 0;
    if (!add_dispatch(-1, "tensor_to_nchw", {id}, {b}, {}, &d, error)) return false;
    dispatches_[d].label = "tensor_to_nchw/output";
    stage_out_dispatches_.push_back(d);
  }
  return true;
}

namespace {

VkResult make_buffer(Context& ctx, VkDeviceSize bytes, VkBufferUsageFlags usage, bool host_visible, DeviceBuffer* out) {
  VkFns& f = vk();
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = bytes;
  bci.usage = usage;
  VkResult r = f.vkCreateBuffer(ctx.device(), &bci, nullptr, &out->buffer);
  if (r != VK_SUCCESS) return r;
  VkMemoryRequirements reqs{};
  f.vkGetBufferMemoryRequirements(ctx.device(), out->buffer, &reqs);
  if ((r = allocate_memory(ctx, reqs, host_visible, &out->memory)) != VK_SUCCESS) return r;
  if ((r = f.vkBindBufferMemory(ctx.device(), out->buffer, out->memory, 0)) != VK_SUCCESS) return r;
  out->bytes = bytes;
  if (host_visible) return f.vkMapMemory(ctx.device(), out->memory, 0, VK_WHOLE_SIZE, 0, &out->mapped);
  return VK_SUCCESS;
}

}  // namespace

bool Graph::check_device_memory(const std::map<int, std::vector<VTensor*>>& groups, std::string* error) const {
  // What the driver asks for each shared memory object (textures pad W to whole texels of 4 and may be
  // tiled), then the buffers made next: integer tensors, staging and weights, constant tensors, and the
  // temporary staging buffer of the upload. On a CPU device (lavapipe) all of it is host memory.
  uint64_t tensors = 0, buffers = 0, uploads = 0;
  for (const auto& [id, members] : groups) {
    VkDeviceSize size = 0;
    for (const VTensor* t : members) size = std::max(size, t->reqs.size);
    tensors += size;
  }
  const size_t fsize = float_type_ == FloatType::F16 ? 2 : 4;
  for (const VTensor& t : tensors_) {
    if (!t.needs_device) continue;
    if (t.kind == VTensor::Kind::Int32) buffers += std::max<uint64_t>(uint64_t(t.max_numel()) * 4, 16);
    else if (t.constant_id >= 0) uploads += 2 * uint64_t(t.max_numel()) * fsize;  // the buffer and its upload
  }
  for (const auto& b : buffers_) buffers += b->bytes;
  for (const auto& bytes : pending_uploads_) uploads += (bytes.size() + 15) / 16 * 16;
  const uint64_t limit = etkit::runtime::effective_memory_limit();
  const uint64_t total = tensors + buffers + uploads;  // each term is bounded by check_tensor_size's limit
  if (total <= limit) return true;
  *error = "the graph needs " + std::to_string(total) + " bytes of device memory (tensors " + std::to_string(tensors) +
           ", buffers " + std::to_string(buffers) + ", uploads " + std::to_string(uploads) +
           "), more than the memory limit of " + std::to_string(limit) + " bytes (etkit::runtime::set_memory_limit)";
  return false;
}

bool Graph::create_tensor_resources(std::string* error) {
  VkFns& f = vk();
  const VkDevice dev = ctx_.device();
  const size_t fsize = float_type_ == FloatType::F16 ? 2 : 4;
  const VkFormat format = float_type_ == FloatType::F16 ? VK_FORMAT_R16G16B16A16_SFLOAT : VK_FORMAT_R32G32B32A32_SFLOAT;
  VkResult r = VK_SUCCESS;
  // 1. objects and their memory requirements
  for (VTensor& t : tensors_) {
    if (!t.needs_device) continue;
    if (t.storage == Storage::Texture) {
      const auto w = whcn_sizes(t.max_sizes);
      VkImageCreateInfo ici{VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO};
      ici.imageType = VK_IMAGE_TYPE_3D;
      ici.format = format;
      ici.extent = {static_cast<uint32_t>(std::max(1, (w[0] + 3) / 4)), static_cast<uint32_t>(std::max(1, w[1])),
                    static_cast<uint32_t>(std::max<int64_t>(1, static_cast<int64_t>(w[2]) * w[3]))};
      ici.mipLevels = 1;
      ici.arrayLayers = 1;
      ici.samples = VK_SAMPLE_COUNT_1_BIT;
      ici.tiling = VK_IMAGE_TILING_OPTIMAL;
      ici.usage = VK_IMAGE_USAGE_STORAGE_BIT;
      ici.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
      if ((r = f.vkCreateImage(dev, &ici, nullptr, &t.image)) != VK_SUCCESS) break;
      f.vkGetImageMemoryRequirements(dev, t.image, &t.reqs);
    } else {
      const size_t es = t.kind == VTensor::Kind::Int32 ? 4 : fsize;
      const VkDeviceSize bytes = std::max<VkDeviceSize>(static_cast<VkDeviceSize>(t.max_numel()) * es, 16);
      if (bytes > ctx_.max_storage_buffer_range()) {
        *error = "a tensor of shape " + shape_str(t.max_sizes) + " needs " + std::to_string(bytes) +
                 " bytes, more than this device's storage-buffer range (" +
                 std::to_string(ctx_.max_storage_buffer_range()) + ")";
        return false;
      }
      if (t.kind == VTensor::Kind::Int32 || t.constant_id >= 0) continue;  // own host-visible/uploaded buffer below
      VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
      bci.size = bytes;
      bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
      if ((r = f.vkCreateBuffer(dev, &bci, nullptr, &t.dev.buffer)) != VK_SUCCESS) break;
      t.dev.bytes = bytes;
      f.vkGetBufferMemoryRequirements(dev, t.dev.buffer, &t.reqs);
    }
  }
  if (r != VK_SUCCESS) {
    *error = std::string("creating tensors failed: ") + vk_result_name(r);
    return false;
  }
  // 2. memory: one allocation per shared memory object (its tensors' lifetimes are disjoint), else own
  std::map<int, std::vector<VTensor*>> groups;
  for (VTensor& t : tensors_) {
    if (!t.needs_device || (t.image == VK_NULL_HANDLE && t.dev.buffer == VK_NULL_HANDLE)) continue;
    groups[t.mem_obj >= 0 ? t.mem_obj : -1 - static_cast<int>(&t - tensors_.data())].push_back(&t);
  }
  if (!check_device_memory(groups, error)) return false;
  for (auto& [id, members] : groups) {
    VkMemoryRequirements reqs{0, 1, ~0u};
    for (VTensor* t : members) {
      reqs.size = std::max(reqs.size, t->reqs.size);
      reqs.alignment = std::max(reqs.alignment, t->reqs.alignment);
      reqs.memoryTypeBits &= t->reqs.memoryTypeBits;
    }
    VkDeviceMemory mem = VK_NULL_HANDLE;
    if (reqs.memoryTypeBits == 0 || (r = allocate_memory(ctx_, reqs, false, &mem)) != VK_SUCCESS) {
      *error = std::string("allocating ") + std::to_string(reqs.size) + " bytes of tensor memory failed: " +
               (reqs.memoryTypeBits == 0 ? "no common memory type" : vk_result_name(r));
      return false;
    }
    shared_memory_.push_back(mem);
    for (VTensor* t : members) {
      r = t->image != VK_NULL_HANDLE ? f.vkBindImageMemory(dev, t->image, mem, 0)
                                     : f.vkBindBufferMemory(dev, t->dev.buffer, mem, 0);
      if (r != VK_SUCCESS) {
        *error = std::string("binding tensor memory failed: ") + vk_result_name(r);
        return false;
      }
      if (t->image != VK_NULL_HANDLE) {
        VkImageViewCreateInfo vci{VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO};
        vci.image = t->image;
        vci.viewType = VK_IMAGE_VIEW_TYPE_3D;
        vci.format = format;
        vci.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
        if ((r = f.vkCreateImageView(dev, &vci, nullptr, &t->view)) != VK_SUCCESS) {
          *error = std::string("vkCreateImageView failed: ") + vk_result_name(r);
          return false;
        }
      }
    }
  }
  // 3. integer tensors: host-visible buffers the host writes (inputs) or that hold constants
  for (VTensor& t : tensors_) {
    if (!t.needs_device || t.kind != VTensor::Kind::Int32) continue;
    const VkDeviceSize bytes = std::max<VkDeviceSize>(static_cast<VkDeviceSize>(t.max_numel()) * 4, 16);
    if ((r = make_buffer(ctx_, bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, true, &t.dev)) != VK_SUCCESS) {
      *error = std::string("creating an index buffer failed: ") + vk_result_name(r);
      return false;
    }
  }
  // 4. staging and weight buffers (host-visible staging; weights device-local, uploaded in upload())
  for (size_t i = 0; i < buffers_.size(); ++i) {
    DeviceBuffer& b = *buffers_[i];
    const bool staging = b.host_visible;
    r = make_buffer(ctx_, b.bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, staging, &b);
    if (r != VK_SUCCESS) {
      *error = std::string("creating a ") + (staging ? "staging" : "weight") + " buffer of " + std::to_string(b.bytes) +
               " bytes failed: " + vk_result_name(r);
      return false;
    }
  }
  return true;
}

bool Graph::upload(std::string* error) {
  VkFns& f = vk();
  const VkDevice dev = ctx_.device();
  // constant tensors used as tensors (not packed by an operator): float -> graph float type, int -> int32
  for (VTensor& t : tensors_) {
    if (!t.needs_device || t.constant_id < 0) continue;
    const int vid = static_cast<int>(std::find_if(values_.begin(), values_.end(), [&](const Value& v) {
                      return v.kind == Value::Kind::Tensor && &tensors_[v.tensor] == &t;
                    }) - values_.begin());
    if (t.kind == VTensor::Kind::Int32) {
      std::vector<int64_t> ints;
      if (!constant_ints(vid, &ints, error)) return false;
      auto* dst = static_cast<int32_t*>(t.dev.mapped);
      for (size_t i = 0; i < ints.size(); ++i) dst[i] = static_cast<int32_t>(ints[i]);
      continue;
    }
    std::vector<float> floats;
    if (!constant_floats(vid, &floats, error)) return false;
    const DeviceBuffer* b = add_float_buffer(floats);
    VkResult r = make_buffer(ctx_, b->bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                             false, buffers_.back().get());
    if (r != VK_SUCCESS) {
      *error = std::string("creating a constant tensor failed: ") + vk_result_name(r);
      return false;
    }
    t.dev = *b;  // the tensor reads the uploaded buffer (owned by buffers_)
    t.dev.memory = VK_NULL_HANDLE;
  }
  // one submission: image layouts, then copies through a temporary staging buffer
  VkDeviceSize total = 0;
  for (const auto& bytes : pending_uploads_) total += (bytes.size() + 15) / 16 * 16;
  DeviceBuffer staging;
  VkResult r = VK_SUCCESS;
  if (total > 0 && (r = make_buffer(ctx_, total, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, true, &staging)) != VK_SUCCESS) {
    *error = std::string("creating the upload staging buffer failed: ") + vk_result_name(r);
    return false;
  }
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  if ((r = ctx_.allocate_command_buffer(&cb)) != VK_SUCCESS ||
      (r = f.vkCreateFence(dev, &fci, nullptr, &fence_)) != VK_SUCCESS) {
    *error = std::string("creating the command buffer failed: ") + vk_result_name(r);
    return false;
  }
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  f.vkBeginCommandBuffer(cb, &bi);
  for (const VTensor& t : tensors_) {
    if (t.image == VK_NULL_HANDLE) continue;
    VkImageMemoryBarrier b{VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER};
    b.oldLayout = VK_IMAGE_LAYOUT_UNDEFINED;
    b.newLayout = VK_IMAGE_LAYOUT_GENERAL;
    b.srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    b.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    b.image = t.image;
    b.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    f.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 0, nullptr,
                           0, nullptr, 1, &b);
  }
  VkDeviceSize offset = 0;
  for (size_t i = 0; i < pending_uploads_.size(); ++i) {
    const auto& bytes = pending_uploads_[i];
    if (bytes.empty()) continue;
    std::memcpy(static_cast<uint8_t*>(staging.mapped) + offset, bytes.data(), bytes.size());
    VkBufferCopy region{offset, 0, bytes.size()};
    f.vkCmdCopyBuffer(cb, staging.buffer, buffers_[i]->buffer, 1, &region);
    offset += (bytes.size() + 15) / 16 * 16;
  }
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
  f.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
  f.vkEndCommandBuffer(cb);
  r = ctx_.submit_and_wait(cb, fence_);
  f.vkFreeCommandBuffers(dev, ctx_.command_pool(), 1, &cb);
  if (staging.buffer != VK_NULL_HANDLE) {
    f.vkDestroyBuffer(dev, staging.buffer, nullptr);
    f.vkFreeMemory(dev, staging.memory, nullptr);
  }
  pending_uploads_.clear();
  pending_uploads_.shrink_to_fit();
  if (r != VK_SUCCESS) {
    *error = std::string("uploading weights failed: ") + vk_result_name(r);
    return false;
  }
  return true;
}

bool Graph::write_descriptors(std::string* error) {
  VkFns& f = vk();
  const VkDevice dev = ctx_.device();
  uint32_t n_buffers = 0, n_images = 0;
  for (const Dispatch& d : dispatches_) {
    n_buffers += d.bindings->tensor_slots + d.bindings->extra_buffers;
    n_images += d.bindings->tensor_slots;
  }
  VkDescriptorPoolSize sizes[] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max(1u, n_buffers)},
                                  {VK_DESCRIPTOR_TYPE_STORAGE_IMAGE, std::max(1u, n_images)}};
  VkDescriptorPoolCreateInfo pci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pci.maxSets = std::max<uint32_t>(1, static_cast<uint32_t>(dispatches_.size()));
  pci.poolSizeCount = 2;
  pci.pPoolSizes = sizes;
  VkResult r = f.vkCreateDescriptorPool(dev, &pci, nullptr, &pool_);
  if (r != VK_SUCCESS) {
    *error = std::string("vkCreateDescriptorPool failed: ") + vk_result_name(r);
    return false;
  }
  for (Dispatch& d : dispatches_) {
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = pool_;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &d.bindings->set_layout;
    if ((r = f.vkAllocateDescriptorSets(dev, &ai, &d.set)) != VK_SUCCESS) {
      *error = std::string("vkAllocateDescriptorSets failed: ") + vk_result_name(r);
      return false;
    }
    std::vector<VkDescriptorBufferInfo> binfo;
    std::vector<VkDescriptorImageInfo> iinfo;
    binfo.reserve(kMaxTensorSlots + kMaxExtraBuffers);
    iinfo.reserve(kMaxTensorSlots);
    std::vector<VkWriteDescriptorSet> writes;
    auto write = [&](uint32_t binding, VkDescriptorType type) {
      VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      w.dstSet = d.set;
      w.dstBinding = binding;
      w.descriptorCount = 1;
      w.descriptorType = type;
      if (type == VK_DESCRIPTOR_TYPE_STORAGE_IMAGE) w.pImageInfo = &iinfo.back();
      else w.pBufferInfo = &binfo.back();
      writes.push_back(w);
    };
    for (uint32_t k = 0; k < d.bindings->tensor_slots; ++k) {
      const VTensor* t = k < d.tensors.size() && d.tensors[k] >= 0 ? &tensors_[d.tensors[k]] : nullptr;
      const bool tex = t != nullptr && t->storage == Storage::Texture;
      binfo.push_back({t != nullptr && !tex ? t->dev.buffer : ctx_.dummy_buffer(), 0, VK_WHOLE_SIZE});
      write(2 * k, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER);
      iinfo.push_back({VK_NULL_HANDLE, tex ? t->view : ctx_.dummy_image_view(float_type_), VK_IMAGE_LAYOUT_GENERAL});
      write(2 * k + 1, VK_DESCRIPTOR_TYPE_STORAGE_IMAGE);
    }
    for (uint32_t j = 0; j < d.bindings->extra_buffers; ++j) {
      const DeviceBuffer* b = j < d.buffers.size() ? d.buffers[j] : nullptr;
      binfo.push_back({b != nullptr ? b->buffer : ctx_.dummy_buffer(), 0, VK_WHOLE_SIZE});
      write(kFirstBufferBinding + j, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER);
    }
    f.vkUpdateDescriptorSets(dev, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  }
  return true;
}

bool Graph::configure_all(std::string* error) {
  // staging dispatches follow their tensors' current sizes
  auto stage = [&](int d, int value_id) {
    if (d < 0) return true;
    const auto w = whcn_sizes(tensor_of(value_id).sizes);
    Dispatch& dp = dispatches_[d];
    std::memcpy(dp.push.data(), w.data(), 16);
    dp.push_size = 16;
    return set_texel_grid(d, tensor_of(value_id).sizes, error);
  };
  for (size_t i = 0; i < input_ids_.size(); ++i) {
    if (!stage(stage_in_dispatches_[i], input_ids_[i])) return false;
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].configure && !nodes_[n].configure(error)) {
      *error = "operator " + std::to_string(n) + " '" + nodes_[n].op + "': " + *error;
      return false;
    }
  }
  for (size_t i = 0; i < output_ids_.size(); ++i) {
    if (!stage(stage_out_dispatches_[i], output_ids_[i])) return false;
  }
  return true;
}

bool Graph::record(std::string* error) {
  VkFns& f = vk();
  const VkDevice dev = ctx_.device();
  VkResult r = VK_SUCCESS;
  if (cmd_ == VK_NULL_HANDLE) {
    if ((r = ctx_.allocate_command_buffer(&cmd_)) != VK_SUCCESS) {
      *error = std::string("vkAllocateCommandBuffers failed: ") + vk_result_name(r);
      return false;
    }
  } else {
    f.vkResetCommandBuffer(cmd_, 0);
  }
  std::vector<int> order;
  for (int d : stage_in_dispatches_) {
    if (d >= 0) order.push_back(d);
  }
  for (const Node& n : nodes_) order.insert(order.end(), n.dispatches.begin(), n.dispatches.end());
  order.insert(order.end(), stage_out_dispatches_.begin(), stage_out_dispatches_.end());
  const bool timed = ctx_.supports_timestamps();
  if (timed && queries_ == VK_NULL_HANDLE && !order.empty()) {
    VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = static_cast<uint32_t>(2 * dispatches_.size());
    if ((r = f.vkCreateQueryPool(dev, &qi, nullptr, &queries_)) != VK_SUCCESS) {
      *error = std::string("vkCreateQueryPool failed: ") + vk_result_name(r);
      return false;
    }
  }
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  f.vkBeginCommandBuffer(cmd_, &bi);
  if (queries_ != VK_NULL_HANDLE) f.vkCmdResetQueryPool(cmd_, queries_, 0, static_cast<uint32_t>(2 * dispatches_.size()));
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  timings_.clear();
  for (size_t i = 0; i < order.size(); ++i) {
    const Dispatch& d = dispatches_[order[i]];
    if (d.grid[0] == 0 || d.grid[1] == 0 || d.grid[2] == 0) continue;  // an empty tensor: nothing to compute
    const uint32_t q = static_cast<uint32_t>(2 * timings_.size());
    timings_.push_back({d.label.c_str(), d.node >= 0 ? static_cast<int32_t>(nodes_[d.node].node_id) : -1, 0, 0});
    if (queries_ != VK_NULL_HANDLE) f.vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, q);
    f.vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, d.pipeline->pipeline);
    f.vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, d.bindings->layout, 0, 1, &d.set, 0, nullptr);
    if (d.push_size > 0) {
      f.vkCmdPushConstants(cmd_, d.bindings->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushConstantBytes, d.push.data());
    }
    uint32_t groups[3];
    for (int k = 0; k < 3; ++k) groups[k] = (d.grid[k] + d.pipeline->local[k] - 1) / d.pipeline->local[k];
    f.vkCmdDispatch(cmd_, groups[0], groups[1], groups[2]);
    if (queries_ != VK_NULL_HANDLE) f.vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, q + 1);
    f.vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                           &barrier, 0, nullptr, 0, nullptr);
  }
  VkMemoryBarrier to_host{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  to_host.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  f.vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0,
                         nullptr, 0, nullptr);
  if ((r = f.vkEndCommandBuffer(cmd_)) != VK_SUCCESS) {
    *error = std::string("recording the command buffer failed: ") + vk_result_name(r);
    return false;
  }
  return true;
}

// ------------------------------------------------------------------------------------------- execute

bool Graph::resize_inputs(EValue** args, bool* changed, std::string* error) {
  *changed = false;
  for (size_t i = 0; i < input_ids_.size(); ++i) {
    const EValue& ev = *args[i];
    VTensor& t = tensor_of(input_ids_[i]);
    if (!ev.is_tensor()) {
      *error = "input " + std::to_string(i) + " must be a tensor";
      return false;
    }
    const Tensor& x = ev.to_tensor();
    const ScalarType want = scalar_type_of(t.staging_dtype);
    const bool int_ok = t.kind == VTensor::Kind::Int32 &&
                        (x.scalar_type() == ScalarType::Long || x.scalar_type() == ScalarType::Int);
    if (x.scalar_type() != want && !int_ok) {
      *error = "input " + std::to_string(i) + " is " + scalar_name(x.scalar_type()) + ", the delegate expects " +
               scalar_name(want);
      return false;
    }
    if (!x.is_contiguous_dim_order()) {
      *error = "input " + std::to_string(i) + " is not contiguous (dim_order is not 0..n-1)";
      return false;
    }
    std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
    if (sizes.size() != t.max_sizes.size()) {
      *error = "input " + std::to_string(i) + " has shape " + shape_str(sizes) + ", rank " +
               std::to_string(t.max_sizes.size()) + " expected (" + shape_str(t.max_sizes) + ")";
      return false;
    }
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (sizes[k] > t.max_sizes[k]) {
        *error = "input " + std::to_string(i) + " has shape " + shape_str(sizes) +
                 ", larger than the upper bounds the delegate was built for " + shape_str(t.max_sizes);
        return false;
      }
    }
    if (sizes != t.sizes) {
      t.sizes = sizes;
      *changed = true;
    }
  }
  return true;
}

bool Graph::execute(EValue** args, size_t nargs, std::string* error) {
  if (nargs != input_ids_.size() + output_ids_.size()) {
    *error = "delegate called with " + std::to_string(nargs) + " arguments, " +
             std::to_string(input_ids_.size()) + " inputs and " + std::to_string(output_ids_.size()) +
             " outputs expected";
    return false;
  }
  const uint64_t t0 = now_ns();
  bool changed = false;
  if (!resize_inputs(args, &changed, error)) return false;
  if (changed && (!configure_all(error) || !record(error))) return false;
  for (const auto& [vid, rows] : index_checks_) {
    for (size_t i = 0; i < input_ids_.size(); ++i) {
      if (input_ids_[i] != vid) continue;
      const Tensor& x = args[i]->to_tensor();
      for (size_t k = 0; k < x.numel(); ++k) {
        const int64_t v = x.scalar_type() == ScalarType::Long ? x.const_data_ptr<int64_t>()[k] : x.const_data_ptr<int32_t>()[k];
        if (v < 0 || v >= rows) {
          *error = "input " + std::to_string(i) + ": index " + std::to_string(v) + " at position " + std::to_string(k) +
                   " is out of range for an embedding table of " + std::to_string(rows) + " rows";
          return false;
        }
      }
    }
  }
  for (size_t i = 0; i < input_ids_.size(); ++i) {
    const Tensor& x = args[i]->to_tensor();
    VTensor& t = tensor_of(input_ids_[i]);
    const size_t n = x.numel();
    if (t.kind == VTensor::Kind::Int32) {
      auto* dst = static_cast<int32_t*>(t.dev.mapped);
      if (x.scalar_type() == ScalarType::Long) {
        const int64_t* src = x.const_data_ptr<int64_t>();
        for (size_t k = 0; k < n; ++k) dst[k] = static_cast<int32_t>(src[k]);
      } else {
        std::memcpy(dst, x.const_data_ptr(), n * 4);
      }
      continue;
    }
    const DeviceBuffer& s = *dispatches_[stage_in_dispatches_[i]].buffers[0];
    if (float_type_ == FloatType::F16 && x.scalar_type() == ScalarType::Float) {
      const float* src = x.const_data_ptr<float>();
      auto* dst = static_cast<uint16_t*>(s.mapped);
      for (size_t k = 0; k < n; ++k) dst[k] = float_to_half(src[k]);
    } else {
      std::memcpy(s.mapped, x.const_data_ptr(), x.nbytes());
    }
  }
  const uint64_t t1 = now_ns();
  VkResult r = ctx_.submit_and_wait(cmd_, fence_);
  if (r != VK_SUCCESS) {
    *error = std::string("the Vulkan submission failed: ") + vk_result_name(r);
    return false;
  }
  const uint64_t t2 = now_ns();
  if (queries_ != VK_NULL_HANDLE && !timings_.empty()) {
    std::vector<uint64_t> stamps(2 * timings_.size());
    r = vk().vkGetQueryPoolResults(ctx_.device(), queries_, 0, static_cast<uint32_t>(stamps.size()),
                                   stamps.size() * sizeof(uint64_t), stamps.data(), sizeof(uint64_t),
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (r == VK_SUCCESS) {
      const double period = ctx_.timestamp_period_ns();
      for (size_t i = 0; i < timings_.size(); ++i) {
        timings_[i].start_ns = static_cast<uint64_t>(static_cast<double>(stamps[2 * i]) * period);
        timings_[i].end_ns = static_cast<uint64_t>(static_cast<double>(stamps[2 * i + 1]) * period);
      }
    }
  }
  for (size_t i = 0; i < output_ids_.size(); ++i) {
    EValue& ev = *args[input_ids_.size() + i];
    const VTensor& t = tensor_of(output_ids_[i]);
    if (!ev.is_tensor()) {
      *error = "output " + std::to_string(i) + " must be a tensor";
      return false;
    }
    Tensor& out = ev.to_tensor();
    std::vector<etkit::runtime::SizesType> sizes(t.sizes.begin(), t.sizes.end());
    if (out.dim() != sizes.size() || out.resize({sizes.data(), sizes.size()}) != etkit::runtime::Error::Ok) {
      *error = "output " + std::to_string(i) + " cannot hold shape " + shape_str(t.sizes);
      return false;
    }
    const ScalarType want = scalar_type_of(t.staging_dtype);
    if (out.scalar_type() != want) {
      *error = "output " + std::to_string(i) + " is " + scalar_name(out.scalar_type()) + ", the delegate produces " +
               scalar_name(want);
      return false;
    }
    const DeviceBuffer& s = *dispatches_[stage_out_dispatches_[i]].buffers[0];
    const size_t n = out.numel();
    if (float_type_ == FloatType::F16 && want == ScalarType::Float) {
      const auto* src = static_cast<const uint16_t*>(s.mapped);
      float* dst = out.mutable_data_ptr<float>();
      for (size_t k = 0; k < n; ++k) dst[k] = half_to_float(src[k]);
    } else {
      std::memcpy(out.mutable_data_ptr(), s.mapped, out.nbytes());
    }
  }
  const uint64_t t3 = now_ns();
  last_start_ns = t0;
  last_host_in_ns = t1 - t0;
  last_device_ns = t2 - t1;
  last_host_out_ns = t3 - t2;
  return true;
}

// ------------------------------------------------------------------------------------------- teardown

void Graph::release() {
  VkFns& f = vk();
  const VkDevice dev = ctx_.device();
  if (dev == VK_NULL_HANDLE) return;
  if (cmd_ != VK_NULL_HANDLE) f.vkFreeCommandBuffers(dev, ctx_.command_pool(), 1, &cmd_);
  if (fence_ != VK_NULL_HANDLE) f.vkDestroyFence(dev, fence_, nullptr);
  if (queries_ != VK_NULL_HANDLE) f.vkDestroyQueryPool(dev, queries_, nullptr);
  if (pool_ != VK_NULL_HANDLE) f.vkDestroyDescriptorPool(dev, pool_, nullptr);
  for (VTensor& t : tensors_) {
    if (t.view != VK_NULL_HANDLE) f.vkDestroyImageView(dev, t.view, nullptr);
    if (t.image != VK_NULL_HANDLE) f.vkDestroyImage(dev, t.image, nullptr);
    if (t.constant_id >= 0 && t.kind == VTensor::Kind::Float) continue;  // its buffer is in buffers_
    if (t.dev.buffer != VK_NULL_HANDLE) f.vkDestroyBuffer(dev, t.dev.buffer, nullptr);
    if (t.dev.memory != VK_NULL_HANDLE) f.vkFreeMemory(dev, t.dev.memory, nullptr);
  }
  for (auto& b : buffers_) {
    if (b->buffer != VK_NULL_HANDLE) f.vkDestroyBuffer(dev, b->buffer, nullptr);
    if (b->memory != VK_NULL_HANDLE) f.vkFreeMemory(dev, b->memory, nullptr);
  }
  for (VkDeviceMemory m : shared_memory_) f.vkFreeMemory(dev, m, nullptr);
  ctx_.release_pipelines(&pipelines_held_);
  tensors_.clear();
  buffers_.clear();
  shared_memory_.clear();
}

Graph::~Graph() { release(); }

}  // namespace etkit_vulkan
