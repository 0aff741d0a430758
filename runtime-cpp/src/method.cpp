// Method loading and the instruction loop (seed pages "ExecuTorch Runtime Overview", "Managing Tensor
// Memory in C++"). Everything is allocated in Program::load_method; Method::execute does not allocate.
#include "etkit/runtime/memory_manager.h"
#include "etkit/runtime/method.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#if __has_include(<unistd.h>)
#include <unistd.h>  // sysconf: the machine's RAM, the bound on planned memory
#endif

#include "etkit/runtime/backend_interface.h"
#include "etkit/runtime/kernel.h"
#include "etkit/runtime/threadpool.h"
#include "file_bytes.h"
#include "program_data.h"

namespace etkit::runtime {
namespace {

constexpr size_t kTempArenaBytes = 1 << 20;  // scratch for kernels/delegates, reset per instruction

// Set when the last load_plan on this thread failed because a delegate's backend is not registered or
// not available: the only failures a "#fallback" plan stands in for.
ETKIT_THREAD_LOCAL bool t_backend_missing = false;

/// Heap-backed allocator for load-time state (delegate handles, metadata); frees everything on destruction.
class LoadTimeAllocator final : public MemoryAllocator {
 public:
  ~LoadTimeAllocator() override { reset(); }
  void* allocate(size_t size, size_t alignment = kDefaultAlignment) override {
    if (alignment < sizeof(void*)) alignment = sizeof(void*);
    if ((alignment & (alignment - 1)) != 0) return nullptr;
    void* p = internal::aligned_heap_allocate(alignment, size);
    if (p == nullptr) return nullptr;
    blocks_.push_back(p);
    return p;
  }
  void reset() override {
    for (void* p : blocks_) std::free(p);
    blocks_.clear();
  }

 private:
  std::vector<void*> blocks_;
};

/// A fixed-size array a Method takes once at load from its method allocator (the caller's, or the runtime's
/// own); never grows. Elements are constructed from `value` and destructed with the array; the memory
/// belongs to the allocator.
template <typename T>
class LoadArray {
 public:
  LoadArray() = default;
  LoadArray(const LoadArray&) = delete;
  LoadArray& operator=(const LoadArray&) = delete;
  ~LoadArray() { clear(); }

  /// Errors: MemoryAllocationFailed naming `what` and the count when the allocator is exhausted.
  Error assign(MemoryAllocator& allocator, size_t n, const T& value, const char* what) {
    return assign_with(allocator, n, what, [&](T* slot) { new (slot) T(value); });
  }
  /// The same with default-constructed entries (for move-only T).
  Error assign_default(MemoryAllocator& allocator, size_t n, const char* what) {
    return assign_with(allocator, n, what, [](T* slot) { new (slot) T(); });
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

 private:
  template <typename Construct>
  Error assign_with(MemoryAllocator& allocator, size_t n, const char* what, Construct construct) {
    clear();
    if (n == 0) return Error::Ok;
    const size_t alignment = alignof(T) < 16 ? 16 : alignof(T);
    T* p = n > SIZE_MAX / sizeof(T) ? nullptr : static_cast<T*>(allocator.allocate(n * sizeof(T), alignment));
    if (p == nullptr) {
      return set_error(Error::MemoryAllocationFailed, "cannot allocate %s (%zu entries of %zu bytes) from the method "
                       "allocator", what, n, sizeof(T));
    }
    for (size_t i = 0; i < n; ++i) construct(&p[i]);
    data_ = p;
    size_ = n;
    return Error::Ok;
  }
  void clear() {
    for (size_t i = 0; i < size_; ++i) data_[i].~T();
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  size_t size_ = 0;
};

enum class InstrKind : uint8_t { Kernel, Delegate, Move, JumpFalse, Free };

struct Instr {
  InstrKind kind;
  KernelFunction kernel = nullptr;  // Kernel
  uint32_t op_index = 0;            // Kernel
  uint32_t delegate_index = 0;      // Delegate
  Span<EValue*> args;               // Kernel, Delegate
  uint32_t a = 0, b = 0;            // Move: from, to; JumpFalse: cond, dest; Free: value
};

struct Delegate {
  BackendInterface* backend = nullptr;
  DelegateHandle* handle = nullptr;
  const char* id = "";
};

}  // namespace

class MethodState {
 public:
  const fb::ExecutionPlan* plan = nullptr;
  const ProgramData* program = nullptr;
  const char* name = "";
  std::string fallback_reason;             // set when this is a "#fallback" twin loaded in place of `name`
  std::string fallback_backend_id;         // and the backend the primary plan needed
  LoadTimeAllocator own_alloc;             // metadata, handles (load time only), unless the caller gave one
  MemoryAllocator* method_allocator = nullptr;  // the caller's (MemoryManager::method_allocator), or null
  bool in_caller_memory = false;                // this object itself lives in `method_allocator`
  MemoryAllocator& alloc() { return method_allocator != nullptr ? *method_allocator : own_alloc; }
  LoadArray<uint8_t*> planned_buffers;     // index = memory_id (0 unused); 64-byte aligned, zeroed
  LoadArray<void*> planned_allocations;    // what calloc returned for each (freed with the method)
  std::vector<uint8_t> temp_arena;
  MemoryAllocator own_temp_allocator;
  MemoryAllocator* temp_allocator = &own_temp_allocator;  // or the caller's (MemoryManager::temp_allocator)
  LoadArray<EValue> values;
  LoadArray<bool> tensor_is_planned;       // per value
  LoadArray<Instr> instrs;
  LoadArray<Delegate> delegates;
  LoadArray<const char*> op_names;         // "ns::op.overload" for messages
  LoadArray<uint32_t> inputs, outputs;
  LoadArray<bool> input_set;
  std::vector<ProfileEvent> profile_storage;  // sized by enable_profiling (never on the execute path)
  std::unique_ptr<EventTracer> tracer;         // null when profiling is off
  EventTracer* active_tracer = nullptr;        // `tracer`, a caller's (set_event_tracer), or null

  ~MethodState() {
    for (Delegate& d : delegates) {
      if (d.backend != nullptr && d.handle != nullptr) d.backend->destroy(d.handle);
    }
    for (void* b : planned_allocations) std::free(b);
  }

  FreeableBuffer mutable_segment;          // Program.mutable_data_segments[0], loaded on first use
  MergedDataMap data_map;                  // the program's named data, then the caller's data file (.ptd)
  LoadArray<FreeableBuffer> external_data; // bytes of the EXTERNAL constants, held while the method lives
  size_t num_external_loaded = 0;

  Error parse_values();
  Error copy_initial_state(size_t value_index, uint32_t buffer_index, void* dst, size_t nbytes);
  Error parse_tensor(size_t index, const fb::Tensor* t);
  Result<void*> external_constant(size_t index, const fb::ExtraTensorInfo* extra, const Tensor& tensor);
  Error check_values();
  Error resolve_operators();
  Error init_delegates(const NamedDataMap* named, EventTracer* event_tracer);
  Error parse_instructions();
  Error check_call_overlap(size_t pc, Span<EValue*> args) const;
  Error execute();
};

namespace {
/// The machine's RAM in bytes (sysconf), or 2^40 where the platform cannot say (no OS: ETKIT_BARE_METAL,
/// whose C library may declare sysconf without having it).
uint64_t physical_memory_bytes() {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE) && !defined(ETKIT_BARE_METAL)
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
#endif
  return uint64_t(1) << 40;
}

// Without threads (bare metal) a plain variable: a 64-bit atomic needs libatomic, which a Cortex-M lacks.
#if defined(ETKIT_SINGLE_THREADED) && ETKIT_SINGLE_THREADED
struct PlainU64 {
  uint64_t value;
  void store(uint64_t v, std::memory_order) { value = v; }
  uint64_t load(std::memory_order) const { return value; }
};
PlainU64 g_memory_limit{0};
PlainU64 g_loop_limit{kDefaultLoopLimit};
#else
std::atomic<uint64_t> g_memory_limit{0};
std::atomic<uint64_t> g_loop_limit{kDefaultLoopLimit};
#endif

/// A constant whose bytes live in a data file (.ptd), named by its fully qualified name.
bool is_external(const fb::Tensor* t) {
  return t->extra_tensor_info() != nullptr && t->extra_tensor_info()->location() == fb::TensorDataLocation::EXTERNAL;
}

Error bad_value(size_t i, const char* what) {
  return set_error(Error::InvalidProgram, "value %zu: %s (the program is corrupted)", i, what);
}
}  // namespace

Error MethodState::parse_tensor(size_t i, const fb::Tensor* t) {
  int st = static_cast<int>(t->scalar_type());
  if (!is_valid_scalar_type(st)) {
    return set_error(Error::InvalidProgram, "value %zu: tensor has unknown scalar type %d", i, st);
  }
  size_t dim = t->sizes() == nullptr ? 0 : t->sizes()->size();
  if (dim > kTensorDimensionLimit) {
    return set_error(Error::InvalidProgram, "value %zu: tensor rank %zu exceeds the limit %zu", i, dim,
                     kTensorDimensionLimit);
  }
  size_t dim_order_len = t->dim_order() == nullptr ? 0 : t->dim_order()->size();
  if (dim_order_len != dim) {
    return set_error(Error::InvalidProgram, "value %zu: tensor has %zu sizes but %zu dim_order entries", i, dim,
                     dim_order_len);
  }
  auto* sizes = alloc().allocate_list<SizesType>(dim + 1);
  auto* dim_order = alloc().allocate_list<DimOrderType>(dim + 1);
  auto* strides = alloc().allocate_list<StridesType>(dim + 1);
  auto* tensor = static_cast<Tensor*>(alloc().allocate(sizeof(Tensor), alignof(Tensor)));
  if (!sizes || !dim_order || !strides || !tensor) {
    return set_error(Error::MemoryAllocationFailed,
                     "value %zu: cannot allocate tensor metadata from the method allocator", i);
  }
  bool seen[kTensorDimensionLimit] = {false};
  uint64_t extent = 1;
  for (size_t d = 0; d < dim; ++d) {
    int32_t s = t->sizes()->Get(static_cast<flatbuffers::uoffset_t>(d));
    uint8_t o = t->dim_order()->Get(static_cast<flatbuffers::uoffset_t>(d));
    if (s < 0) return bad_value(i, "negative tensor size");
    // Strides are int32 (as in ExecuTorch): the product of the nonzero sizes (the outermost stride, and the
    // element count when no size is 0) must stay below 2^31; a size-0 dimension empties the tensor, not its
    // strides.
    if (__builtin_mul_overflow(extent, static_cast<uint64_t>(s > 0 ? s : 1), &extent) ||
        extent >= (uint64_t(1) << 31)) {
      return bad_value(i, "tensor has 2^31 or more elements, or strides that reach 2^31");
    }
    if (o >= dim || seen[o]) return bad_value(i, "dim_order is not a permutation of the dimensions");
    seen[o] = true;
    sizes[d] = s;
    dim_order[d] = o;
  }
  auto dynamism = static_cast<TensorShapeDynamism>(t->shape_dynamism());
  if (static_cast<int>(dynamism) > 2) return bad_value(i, "unknown shape dynamism");
  new (tensor) Tensor(static_cast<ScalarType>(st), dim, sizes, nullptr, dim_order, strides, dynamism);
  size_t nbytes = tensor->nbytes();

  void* data = nullptr;
  bool planned = false;
  if (const fb::AllocationDetails* a = t->allocation_info()) {
    if (is_external(t)) {
      const auto* fqn = t->extra_tensor_info()->fully_qualified_name();
      return set_error(Error::NotSupported,
                       "value %zu: tensor '%s' is planned memory whose initial value is kept in a .ptd data file "
                       "(ExecuTorch's external_mutable_weights, for training); this runtime does not load those",
                       i, fqn != nullptr ? fqn->c_str() : "");
    }
    uint32_t mem_id = a->memory_id();
    uint64_t offset = uint64_t(a->memory_offset_low()) | (uint64_t(a->memory_offset_high()) << 32);
    const auto* buffer_sizes = plan->non_const_buffer_sizes();
    if (buffer_sizes == nullptr || mem_id == 0 || mem_id >= buffer_sizes->size()) {
      return set_error(Error::InvalidProgram, "value %zu: tensor is planned in memory buffer %u which does not exist",
                       i, mem_id);
    }
    uint64_t buf_size = static_cast<uint64_t>(buffer_sizes->Get(mem_id));
    if (offset > buf_size || nbytes > buf_size - offset) {
      return set_error(Error::InvalidProgram,
                       "value %zu: tensor of %zu bytes at offset %llu overflows planned buffer %u of %llu bytes", i,
                       nbytes, (unsigned long long)offset, mem_id, (unsigned long long)buf_size);
    }
    data = planned_buffers[mem_id] + offset;
    planned = true;
    if (t->data_buffer_idx() > 0) {
      // A mutable buffer with an initial state (e.g. a cache): copy it from the mutable data segment.
      ETKIT_CHECK_OK(copy_initial_state(i, t->data_buffer_idx(), data, nbytes));
    }
  } else if (is_external(t)) {
    // (ExecuTorch numbers its external constants in data_buffer_idx too; the key is the name)
    ETKIT_TRY(data, external_constant(i, t->extra_tensor_info(), *tensor));
  } else if (t->data_buffer_idx() > 0) {
    auto c = program->constant_data(t->data_buffer_idx(), nbytes);
    if (!c.ok()) return c.error();
    data = const_cast<void*>(c.get());  // read-only below: resize() refuses it as a kernel's output
  }
  // Kernels read the data through typed pointers: an element at an address that is not a multiple of its size
  // is undefined behaviour in C++ (and a fault on some cores). Constant segments and planned buffers are
  // loaded aligned (Program::load, load_plan), so only an offset in the program can misalign it.
  if (data != nullptr && reinterpret_cast<uintptr_t>(data) % tensor->element_size() != 0) {
    return set_error(Error::InvalidProgram,
                     "value %zu: tensor data is not aligned to its %zu-byte elements (its offset in the program is "
                     "not a multiple of the element size; the program is corrupted)",
                     i, tensor->element_size());
  }
  tensor->set_data(data);
  tensor->set_read_only(data != nullptr && !planned);  // a constant (in the file or a .ptd), maybe mapped read-only
  values[i] = EValue(tensor);
  tensor_is_planned[i] = planned;
  return Error::Ok;
}

Result<void*> MethodState::external_constant(size_t i, const fb::ExtraTensorInfo* extra, const Tensor& tensor) {
  const char* fqn = extra->fully_qualified_name() != nullptr ? extra->fully_qualified_name()->c_str() : nullptr;
  if (fqn == nullptr || fqn[0] == '\0') {
    return bad_value(i, "tensor is marked EXTERNAL but has no fully qualified name");
  }
  if (num_external_loaded >= external_data.size()) return bad_value(i, "more external tensors than counted");
  const size_t nbytes = tensor.nbytes();
  Result<TensorLayout> layout = data_map.get_tensor_layout(fqn);
  if (layout.ok()) {
    bool same = layout->scalar_type == tensor.scalar_type() && layout->sizes.size() == tensor.dim() &&
                layout->dim_order.size() == tensor.dim();
    for (size_t d = 0; same && d < tensor.dim(); ++d) {
      same = layout->sizes[d] == tensor.sizes()[d] && layout->dim_order[d] == tensor.dim_order()[d];
    }
    if (!same) {
      return set_error(Error::InvalidProgram,
                       "value %zu: tensor '%s' is a %s tensor of %zu bytes in the program but a %s tensor of %zu bytes "
                       "(%zu dims, or another dim_order) in the .ptd data file: the data file belongs to another program",
                       i, fqn, scalar_type_name(tensor.scalar_type()), nbytes, scalar_type_name(layout->scalar_type), layout->nbytes,
                       layout->sizes.size());
    }
  } else if (layout.error() == Error::NotFound) {
    return set_error(Error::NotFound, "value %zu: %s", i, std::string(last_error_message()).c_str());
  }
  Result<FreeableBuffer> bytes = data_map.get_data(fqn);
  if (!bytes.ok()) {
    if (bytes.error() == Error::NotFound) {
      return set_error(Error::NotFound, "value %zu: %s", i, std::string(last_error_message()).c_str());
    }
    return bytes.error();
  }
  if (bytes->size() < nbytes) {
    return set_error(Error::InvalidProgram,
                     "value %zu: tensor '%s' needs %zu bytes but the data file holds %zu under that key: the data "
                     "file belongs to another program",
                     i, fqn, nbytes, bytes->size());
  }
  void* data = const_cast<void*>(bytes->data());
  external_data[num_external_loaded++] = std::move(bytes.get());
  return data;
}

Error MethodState::copy_initial_state(size_t value_index, uint32_t buffer_index, void* dst, size_t nbytes) {
  const auto* segs = program->program->mutable_data_segments();
  if (segs == nullptr || segs->size() == 0) {
    return Error::Ok;  // older programs keep no initial state: the buffer starts as planned memory
  }
  const fb::SubsegmentOffsets* seg = segs->Get(0);
  if (seg == nullptr || seg->offsets() == nullptr || buffer_index >= seg->offsets()->size()) {
    return set_error(Error::InvalidProgram, "value %zu: mutable data index %u out of range", value_index,
                     buffer_index);
  }
  if (mutable_segment.data() == nullptr) {
    auto loaded = program->load_segment(seg->segment_index());
    if (!loaded.ok()) return loaded.error();
    mutable_segment = std::move(loaded.get());
  }
  uint64_t offset = seg->offsets()->Get(buffer_index);
  if (offset > mutable_segment.size() || nbytes > mutable_segment.size() - offset) {
    return set_error(Error::InvalidProgram,
                     "value %zu: initial state of %zu bytes at offset %llu overflows the %zu-byte mutable segment",
                     value_index, nbytes, (unsigned long long)offset, mutable_segment.size());
  }
  // The planned buffer starts zeroed and nothing has run yet: copy only the chunks of the initial state
  // that hold a non-zero byte, so a state that starts empty (an LLM's KV cache) is not written, and its
  // pages are not resident, until the program uses them.
  const auto* src = static_cast<const uint8_t*>(mutable_segment.data()) + offset;
  auto* out = static_cast<uint8_t*>(dst);
  constexpr size_t kChunk = 4096;
  for (size_t done = 0; done < nbytes; done += kChunk) {
    const size_t n = std::min(kChunk, nbytes - done);
    const uint8_t* chunk = src + done;
    if (std::any_of(chunk, chunk + n, [](uint8_t b) { return b != 0; })) std::memcpy(out + done, chunk, n);
  }
  return Error::Ok;
}

Error MethodState::parse_values() {
  const auto* fvalues = plan->values();
  size_t n = fvalues == nullptr ? 0 : fvalues->size();
  ETKIT_CHECK_OK(values.assign(alloc(), n, EValue(), "values"));
  ETKIT_CHECK_OK(tensor_is_planned.assign(alloc(), n, false, "value flags"));
  size_t num_external = 0;  // constants kept in a data file: their buffers live as long as the method
  for (size_t i = 0; i < n; ++i) {
    const fb::EValue* v = fvalues->Get(static_cast<flatbuffers::uoffset_t>(i));
    const fb::Tensor* t = v != nullptr ? v->val_as_Tensor() : nullptr;
    if (t != nullptr && t->allocation_info() == nullptr && is_external(t)) ++num_external;
  }
  ETKIT_CHECK_OK(external_data.assign_default(alloc(), num_external, "external constant table"));
  for (size_t i = 0; i < n; ++i) {
    const fb::EValue* v = fvalues->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (v == nullptr) return bad_value(i, "missing EValue");
    if (v->val_type() != fb::KernelTypes::NONE && v->val_type() != fb::KernelTypes::Null && v->val() == nullptr) {
      return bad_value(i, "value has a type but no body");
    }
    switch (v->val_type()) {
      case fb::KernelTypes::NONE:
      case fb::KernelTypes::Null:
        values[i] = EValue();
        break;
      case fb::KernelTypes::Int:
        values[i] = EValue(static_cast<int64_t>(v->val_as_Int()->int_val()));
        break;
      case fb::KernelTypes::Bool:
        values[i] = EValue(static_cast<bool>(v->val_as_Bool()->bool_val()));
        break;
      case fb::KernelTypes::Double:
        values[i] = EValue(static_cast<double>(v->val_as_Double()->double_val()));
        break;
      case fb::KernelTypes::String: {
        const auto* s = v->val_as_String()->string_val();
        values[i] = s == nullptr ? EValue::make_string("", 0) : EValue::make_string(s->c_str(), s->size());
        break;
      }
      case fb::KernelTypes::Tensor:
        ETKIT_CHECK_OK(parse_tensor(i, v->val_as_Tensor()));
        break;
      case fb::KernelTypes::DoubleList: {
        const auto* items = v->val_as_DoubleList()->items();
        values[i] = items == nullptr ? EValue::make_double_list(nullptr, 0)
                                     : EValue::make_double_list(items->data(), items->size());
        break;
      }
      case fb::KernelTypes::BoolList: {
        const auto* items = v->val_as_BoolList()->items();
        static_assert(sizeof(bool) == 1, "flatbuffers stores bools as one byte");
        // The list is read as C++ bools in place: any byte but 0 or 1 would be undefined behaviour.
        for (size_t k = 0; items != nullptr && k < items->size(); ++k) {
          if (items->data()[k] > 1) return bad_value(i, "bool list holds a byte other than 0 or 1");
        }
        values[i] = items == nullptr
                        ? EValue::make_bool_list(nullptr, 0)
                        : EValue::make_bool_list(reinterpret_cast<const bool*>(items->data()), items->size());
        break;
      }
      case fb::KernelTypes::IntList: {
        const auto* items = v->val_as_IntList()->items();
        size_t m = items == nullptr ? 0 : items->size();
        BoxedList<int64_t> list;
        auto** wrapped = alloc().allocate_list<EValue*>(m + 1);
        list.unwrapped = alloc().allocate_list<int64_t>(m + 1);
        if (!wrapped || !list.unwrapped) {
          return set_error(Error::MemoryAllocationFailed,
                           "value %zu: cannot allocate an int list from the method allocator", i);
        }
        for (size_t j = 0; j < m; ++j) {
          int64_t idx = items->Get(static_cast<flatbuffers::uoffset_t>(j));
          if (idx < 0 || static_cast<size_t>(idx) >= n) return bad_value(i, "int list refers to a value out of range");
          wrapped[j] = &values[static_cast<size_t>(idx)];
        }
        list.wrapped = wrapped;
        list.size = m;
        values[i] = EValue::make_int_list(list);
        break;
      }
      case fb::KernelTypes::TensorList:
      case fb::KernelTypes::OptionalTensorList: {
        bool optional = v->val_type() == fb::KernelTypes::OptionalTensorList;
        const auto* items = optional ? v->val_as_OptionalTensorList()->items() : v->val_as_TensorList()->items();
        size_t m = items == nullptr ? 0 : items->size();
        BoxedList<Tensor*> list;
        auto** wrapped = alloc().allocate_list<EValue*>(m + 1);
        list.unwrapped = alloc().allocate_list<Tensor*>(m + 1);
        if (!wrapped || !list.unwrapped) {
          return set_error(Error::MemoryAllocationFailed,
                           "value %zu: cannot allocate a tensor list from the method allocator", i);
        }
        for (size_t j = 0; j < m; ++j) {
          int32_t idx = items->Get(static_cast<flatbuffers::uoffset_t>(j));
          if (optional && idx == -1) {
            wrapped[j] = nullptr;
            continue;
          }
          if (idx < 0 || static_cast<size_t>(idx) >= n) return bad_value(i, "tensor list refers to a value out of range");
          wrapped[j] = &values[static_cast<size_t>(idx)];
        }
        list.wrapped = wrapped;
        list.size = m;
        values[i] = optional ? EValue::make_optional_tensor_list(list) : EValue::make_tensor_list(list);
        break;
      }
      default:
        return bad_value(i, "unknown value type");
    }
  }
  return Error::Ok;
}

// Boxed lists may refer to values parsed after them, so their element tags are checked afterwards.
Error MethodState::check_values() {
  const auto* fvalues = plan->values();
  for (size_t i = 0; i < values.size(); ++i) {
    const fb::EValue* v = fvalues->Get(static_cast<flatbuffers::uoffset_t>(i));
    const flatbuffers::Vector<int64_t>* ints = nullptr;
    const flatbuffers::Vector<int32_t>* tensors = nullptr;
    if (v->val_type() == fb::KernelTypes::IntList) ints = v->val_as_IntList()->items();
    if (v->val_type() == fb::KernelTypes::TensorList) tensors = v->val_as_TensorList()->items();
    if (v->val_type() == fb::KernelTypes::OptionalTensorList) tensors = v->val_as_OptionalTensorList()->items();
    if (ints != nullptr) {
      for (int64_t idx : *ints) {
        if (!values[static_cast<size_t>(idx)].is_int()) return bad_value(i, "int list element is not an Int");
      }
    }
    if (tensors != nullptr) {
      const bool optional = v->val_type() == fb::KernelTypes::OptionalTensorList;
      for (int32_t idx : *tensors) {
        if (idx == -1 && optional) continue;
        const EValue& e = values[static_cast<size_t>(idx)];
        // Only an optional list may hold None: kernels take a TensorList's elements as tensors.
        if (!e.is_tensor() && !(optional && e.is_none())) {
          return bad_value(i, optional ? "optional tensor list element is neither a Tensor nor None"
                                       : "tensor list element is not a Tensor");
        }
      }
    }
  }
  auto check_io = [&](const flatbuffers::Vector<int32_t>* list, LoadArray<uint32_t>& out, const char* what) {
    size_t m = list == nullptr ? 0 : list->size();
    ETKIT_CHECK_OK(out.assign(alloc(), m, 0u, what));
    for (size_t j = 0; j < m; ++j) {
      int32_t idx = list->Get(static_cast<flatbuffers::uoffset_t>(j));
      if (idx < 0 || static_cast<size_t>(idx) >= values.size()) {
        return set_error(Error::InvalidProgram, "method %s %zu refers to value %d out of range", what, j, idx);
      }
      out[j] = static_cast<uint32_t>(idx);
    }
    return Error::Ok;
  };
  ETKIT_CHECK_OK(check_io(plan->inputs(), inputs, "input"));
  ETKIT_CHECK_OK(check_io(plan->outputs(), outputs, "output"));
  ETKIT_CHECK_OK(input_set.assign(alloc(), inputs.size(), false, "input flags"));
  // A tensor with no storage (not planned, not constant) must be bound by the caller: only method
  // inputs and outputs may be like that.
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i].is_tensor()) continue;
    const Tensor& t = values[i].to_tensor();
    if (t.const_data_ptr() != nullptr || t.nbytes() == 0) continue;
    bool is_io = false;
    for (uint32_t v : inputs) is_io = is_io || v == i;
    for (uint32_t v : outputs) is_io = is_io || v == i;
    if (!is_io) {
      return set_error(Error::InvalidProgram,
                       "value %zu: tensor has no memory (not planned, not constant, not a method input/output)", i);
    }
  }
  return Error::Ok;
}

Error MethodState::resolve_operators() {
  const auto* ops = plan->operators();
  size_t n = ops == nullptr ? 0 : ops->size();
  ETKIT_CHECK_OK(op_names.assign(alloc(), n, "", "operator names"));
  for (size_t i = 0; i < n; ++i) {
    const fb::Operator* op = ops->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (op == nullptr || op->name() == nullptr) {
      return set_error(Error::InvalidProgram, "operator %zu has no name", i);
    }
    const char* name = op->name()->c_str();
    const char* overload = op->overload() == nullptr ? "" : op->overload()->c_str();
    size_t len = std::strlen(name) + 1 + std::strlen(overload) + 1;
    char* full = static_cast<char*>(alloc().allocate(len, 1));
    if (full == nullptr) {
      return set_error(Error::MemoryAllocationFailed, "cannot allocate an operator name from the method allocator");
    }
    std::snprintf(full, len, overload[0] ? "%s.%s" : "%s", name, overload);
    op_names[i] = full;
  }
  return Error::Ok;
}

Error MethodState::init_delegates(const NamedDataMap* named, EventTracer* event_tracer) {
  const auto* fdelegates = plan->delegates();
  size_t n = fdelegates == nullptr ? 0 : fdelegates->size();
  ETKIT_CHECK_OK(delegates.assign(alloc(), n, Delegate(), "delegates"));
  const fb::Program* p = program->program;
  for (size_t i = 0; i < n; ++i) {
    const fb::BackendDelegate* d = fdelegates->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (d == nullptr || d->id() == nullptr || d->processed() == nullptr) {
      return set_error(Error::InvalidProgram, "delegate %zu has no id or no processed data", i);
    }
    const char* id = d->id()->c_str();
    BackendInterface* backend = get_backend(id);
    if (backend == nullptr) {
      t_backend_missing = true;
      set_error(Error::NotFound,
                "program needs backend '%s' which is not registered in this runtime; install/link its plugin", id);
      set_error_context(id, name, nullptr, -1, static_cast<int64_t>(i));
      return Error::NotFound;
    }
    if (!backend->is_available()) {
      t_backend_missing = true;
      set_error(Error::NotSupported, "backend '%s' is registered but not available on this machine", id);
      set_error_context(id, name, nullptr, -1, static_cast<int64_t>(i));
      return Error::NotSupported;
    }
    FreeableBuffer processed;
    const fb::BackendDelegateDataReference* ref = d->processed();
    if (ref->location() == fb::DataLocation::INLINE) {
      const auto* inline_data = p->backend_delegate_data();
      if (inline_data == nullptr || ref->index() >= inline_data->size()) {
        return set_error(Error::InvalidProgram, "delegate %zu ('%s') refers to inline data %u which does not exist",
                         i, id, ref->index());
      }
      const auto* bytes = inline_data->Get(ref->index())->data();
      processed = bytes == nullptr ? FreeableBuffer() : FreeableBuffer(bytes->data(), bytes->size(), nullptr);
    } else if (ref->location() == fb::DataLocation::SEGMENT) {
      auto seg = program->load_segment(ref->index());
      if (!seg.ok()) return seg.error();
      processed = std::move(seg.get());
    } else {
      return set_error(Error::InvalidProgram, "delegate %zu ('%s') has unknown data location", i, id);
    }
    const auto* specs = d->compile_specs();
    size_t num_specs = specs == nullptr ? 0 : specs->size();
    auto* cspecs = alloc().allocate_list<CompileSpec>(num_specs + 1);
    if (cspecs == nullptr) {
      return set_error(Error::MemoryAllocationFailed, "cannot allocate compile specs from the method allocator");
    }
    for (size_t j = 0; j < num_specs; ++j) {
      const fb::CompileSpec* s = specs->Get(static_cast<flatbuffers::uoffset_t>(j));
      cspecs[j].key = (s != nullptr && s->key() != nullptr) ? s->key()->c_str() : "";
      cspecs[j].value.buffer = (s != nullptr && s->value() != nullptr) ? s->value()->data() : nullptr;
      cspecs[j].value.nbytes = (s != nullptr && s->value() != nullptr) ? s->value()->size() : 0;
    }
    BackendInitContext ctx(&alloc(), named, name, event_tracer);
    clear_error_message();
    Result<DelegateHandle*> handle = backend->init(ctx, &processed, Span<const CompileSpec>(cspecs, num_specs));
    if (!handle.ok()) {
      char inner[768];
      std::snprintf(inner, sizeof(inner), "%s", last_error_message());
      Error failed = set_error(handle.error(), "backend '%s' failed to initialise delegate %zu: %s (%s)", id, i,
                       inner[0] ? inner : "no message", error_name(handle.error()));
      set_error_context(id, name, nullptr, -1, static_cast<int64_t>(i));
      return failed;
    }
    delegates[i].backend = backend;
    delegates[i].handle = handle.get();
    delegates[i].id = id;
  }
  return Error::Ok;
}

Error MethodState::parse_instructions() {
  const auto* chains = plan->chains();
  if (chains == nullptr || chains->size() == 0) {
    return Error::Ok;  // a method with no chain does nothing
  }
  if (chains->size() > 1) {
    return set_error(Error::NotSupported, "method '%s' has %u chains; this runtime runs single-chain methods", name,
                     chains->size());
  }
  const fb::Chain* chain = chains->Get(0);
  const auto* finstrs = chain == nullptr ? nullptr : chain->instructions();
  size_t n = finstrs == nullptr ? 0 : finstrs->size();
  ETKIT_CHECK_OK(instrs.assign(alloc(), n, Instr{}, "instructions"));
  auto value_ok = [&](int64_t idx) { return idx >= 0 && static_cast<size_t>(idx) < values.size(); };
  auto build_args = [&](size_t pc, const flatbuffers::Vector<int32_t>* args, Span<EValue*>& out) -> Error {
    size_t m = args == nullptr ? 0 : args->size();
    auto** arr = alloc().allocate_list<EValue*>(m + 1);
    if (arr == nullptr) {
      return set_error(Error::MemoryAllocationFailed,
                       "cannot allocate instruction arguments from the method allocator");
    }
    for (size_t j = 0; j < m; ++j) {
      int32_t idx = args->Get(static_cast<flatbuffers::uoffset_t>(j));
      if (!value_ok(idx)) {
        return set_error(Error::InvalidProgram, "instruction %zu argument %zu refers to value %d out of range", pc, j,
                         idx);
      }
      arr[j] = &values[static_cast<size_t>(idx)];
    }
    out = Span<EValue*>(arr, m);
    return Error::Ok;
  };
  for (size_t pc = 0; pc < n; ++pc) {
    const fb::Instruction* in = finstrs->Get(static_cast<flatbuffers::uoffset_t>(pc));
    Instr& out = instrs[pc];
    switch (in == nullptr ? fb::InstructionArguments::NONE : in->instr_args_type()) {
      case fb::InstructionArguments::KernelCall: {
        const fb::KernelCall* k = in->instr_args_as_KernelCall();
        if (k == nullptr) return set_error(Error::InvalidProgram, "instruction %zu has no KernelCall body", pc);
        if (k->op_index() < 0 || static_cast<size_t>(k->op_index()) >= op_names.size()) {
          return set_error(Error::InvalidProgram, "instruction %zu calls operator %d out of range", pc, k->op_index());
        }
        out.kind = InstrKind::Kernel;
        out.op_index = static_cast<uint32_t>(k->op_index());
        out.kernel = get_kernel(op_names[out.op_index]);
        if (out.kernel == nullptr) {
          return set_error(Error::OperatorMissing,
                           "program needs kernel '%s' which is not registered in this runtime (no portable kernel "
                           "for it; delegate it to a backend or link a kernel library that provides it)",
                           op_names[out.op_index]);
        }
        ETKIT_CHECK_OK(build_args(pc, k->args(), out.args));
        ETKIT_CHECK_OK(check_call_overlap(pc, out.args));
        break;
      }
      case fb::InstructionArguments::DelegateCall: {
        const fb::DelegateCall* d = in->instr_args_as_DelegateCall();
        if (d == nullptr) return set_error(Error::InvalidProgram, "instruction %zu has no DelegateCall body", pc);
        if (d->delegate_index() < 0 || static_cast<size_t>(d->delegate_index()) >= delegates.size()) {
          return set_error(Error::InvalidProgram, "instruction %zu calls delegate %d out of range", pc,
                           d->delegate_index());
        }
        out.kind = InstrKind::Delegate;
        out.delegate_index = static_cast<uint32_t>(d->delegate_index());
        ETKIT_CHECK_OK(build_args(pc, d->args(), out.args));
        ETKIT_CHECK_OK(check_call_overlap(pc, out.args));
        break;
      }
      case fb::InstructionArguments::MoveCall: {
        const fb::MoveCall* m = in->instr_args_as_MoveCall();
        if (m == nullptr) return set_error(Error::InvalidProgram, "instruction %zu has no MoveCall body", pc);
        if (!value_ok(m->move_from()) || !value_ok(m->move_to())) {
          return set_error(Error::InvalidProgram, "instruction %zu moves between values out of range", pc);
        }
        if (values[static_cast<size_t>(m->move_from())].tag() != values[static_cast<size_t>(m->move_to())].tag()) {
          return set_error(Error::InvalidProgram, "instruction %zu moves a %s into a %s value", pc,
                           tag_name(values[static_cast<size_t>(m->move_from())].tag()),
                           tag_name(values[static_cast<size_t>(m->move_to())].tag()));
        }
        out.kind = InstrKind::Move;
        out.a = static_cast<uint32_t>(m->move_from());
        out.b = static_cast<uint32_t>(m->move_to());
        break;
      }
      case fb::InstructionArguments::JumpFalseCall: {
        const fb::JumpFalseCall* j = in->instr_args_as_JumpFalseCall();
        if (j == nullptr) return set_error(Error::InvalidProgram, "instruction %zu has no JumpFalseCall body", pc);
        if (!value_ok(j->cond_value_index()) || j->destination_instruction() < 0 ||
            static_cast<size_t>(j->destination_instruction()) > n) {
          return set_error(Error::InvalidProgram, "instruction %zu jumps with an out-of-range value or target", pc);
        }
        out.kind = InstrKind::JumpFalse;
        out.a = static_cast<uint32_t>(j->cond_value_index());
        out.b = static_cast<uint32_t>(j->destination_instruction());
        break;
      }
      case fb::InstructionArguments::FreeCall: {
        const fb::FreeCall* f = in->instr_args_as_FreeCall();
        if (f == nullptr) return set_error(Error::InvalidProgram, "instruction %zu has no FreeCall body", pc);
        if (!value_ok(f->value_index())) {
          return set_error(Error::InvalidProgram, "instruction %zu frees value %d out of range", pc, f->value_index());
        }
        out.kind = InstrKind::Free;
        out.a = static_cast<uint32_t>(f->value_index());
        break;
      }
      default:
        return set_error(Error::InvalidProgram, "instruction %zu has an unknown type", pc);
    }
  }
  // A backward jump whose condition no instruction of its loop writes repeats forever once the condition is
  // false: a crafted program would hang execute(). Emitted loops (ExecuTorch's map) recompute their condition
  // in the body; a loop whose condition is written but never turns true is beyond a load-time check.
  for (size_t pc = 0; pc < n; ++pc) {
    const Instr& jump = instrs[pc];
    if (jump.kind != InstrKind::JumpFalse || jump.b > pc) continue;
    bool written = false;
    for (size_t k = jump.b; k <= pc && !written; ++k) {
      const Instr& w = instrs[k];
      if (w.kind == InstrKind::Kernel || w.kind == InstrKind::Delegate) {
        for (EValue* arg : w.args) written = written || arg == &values[jump.a];
      } else if (w.kind == InstrKind::Move) {
        written = w.b == jump.a;
      }
    }
    if (!written) {
      return set_error(Error::InvalidProgram,
                       "instruction %zu jumps back to instruction %u on value %u, which no instruction of that loop "
                       "writes: the loop would never end",
                       pc, jump.b, jump.a);
    }
  }
  return Error::Ok;
}

/// The planned tensors one call reads and writes (tensor-list items included) occupy the same bytes or disjoint
/// bytes. The memory plan is the file's to choose: a partial overlap would make a kernel read what it has just
/// written, or memcpy between overlapping ranges (undefined behaviour). A plan from a memory planner never
/// overlaps tensors live at the same instruction, and an exact alias (an in-place op's self and out) is allowed.
/// Ranges are [data, data + capacity_nbytes), the bytes each tensor may ever use.
Error MethodState::check_call_overlap(size_t pc, Span<EValue*> args) const {
  const auto* buffer_sizes = plan->non_const_buffer_sizes();
  auto planned = [&](const Tensor* t) {
    if (t == nullptr || t->capacity_nbytes() == 0 || t->const_data_ptr() == nullptr) return false;
    const auto* p = static_cast<const uint8_t*>(t->const_data_ptr());
    for (size_t id = 1; id < planned_buffers.size(); ++id) {
      const uint8_t* base = planned_buffers[id];
      if (base != nullptr && p >= base &&
          p < base + static_cast<uint64_t>(buffer_sizes->Get(static_cast<flatbuffers::uoffset_t>(id))))
        return true;
    }
    return false;
  };
  // Every (argument, list item) pair: calls take a handful of tensors, cat and stack a few hundred at most.
  auto tensors_of = [](const EValue* v, auto&& fn) {
    if (v->is_tensor()) {
      fn(&v->to_tensor());
    } else if (v->is_tensor_list() || v->is_optional_tensor_list()) {
      for (Tensor* t : v->is_tensor_list() ? v->to_tensor_list() : v->to_optional_tensor_list()) fn(t);
    }
  };
  for (size_t i = 0; i < args.size(); ++i) {
    Error err = Error::Ok;
    tensors_of(args[i], [&](const Tensor* a) {
      if (err != Error::Ok || !planned(a)) return;
      const auto* a0 = static_cast<const uint8_t*>(a->const_data_ptr());
      const uint8_t* a1 = a0 + a->capacity_nbytes();
      for (size_t j = i; j < args.size() && err == Error::Ok; ++j) {
        tensors_of(args[j], [&](const Tensor* b) {
          if (err != Error::Ok || b == a || !planned(b)) return;
          const auto* b0 = static_cast<const uint8_t*>(b->const_data_ptr());
          const uint8_t* b1 = b0 + b->capacity_nbytes();
          const bool same = a0 == b0 && a1 == b1, disjoint = a1 <= b0 || b1 <= a0;
          if (!same && !disjoint) {
            err = set_error(Error::InvalidProgram,
                            "instruction %zu: arguments %zu and %zu are planned tensors whose memory partly overlaps "
                            "(%zu and %zu bytes, %td bytes apart); the memory plan is corrupted",
                            pc, i, j, a->capacity_nbytes(), b->capacity_nbytes(), b0 - a0);
          }
        });
      }
    });
    if (err != Error::Ok) return err;
  }
  return Error::Ok;
}

namespace {
void log_value_or_list(EventTracer& tr, const EValue& v, int32_t instruction) {
  if (v.is_tensor_list()) {
    for (Tensor* t : v.to_tensor_list()) {
      if (t != nullptr) tr.log_value(EValue(t), instruction, false);
    }
  } else {
    tr.log_value(v, instruction, false);
  }
}
}  // namespace

Error MethodState::execute() {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const EValue& v = values[inputs[i]];
    if (v.is_tensor() && v.to_tensor().const_data_ptr() == nullptr && v.to_tensor().nbytes() > 0) {
      return set_error(Error::InvalidState, "method '%s': input %zu was never set", name, i);
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const EValue& v = values[outputs[i]];
    if (v.is_tensor() && v.to_tensor().const_data_ptr() == nullptr && v.to_tensor().nbytes() > 0) {
      return set_error(Error::InvalidState,
                       "method '%s': output %zu has no memory; call set_output_data_ptr first", name, i);
    }
  }
  EventTracer* tr = active_tracer;
  int64_t method_start = 0;
  bool log_intermediates = false;
  if (tr != nullptr) {
    tr->begin_execute();
    log_intermediates = tr->debug_level() >= DebugLevel::IntermediateOutputs;
    method_start = EventTracer::now_ns();
  }
  size_t pc = 0;
  const size_t n = instrs.size();
  uint64_t backward_jumps = 0;
  const uint64_t loop_limit = g_loop_limit.load(std::memory_order_relaxed);
  while (pc < n) {
    const Instr& in = instrs[pc];
    temp_allocator->reset();
    switch (in.kind) {
      case InstrKind::Kernel: {
        KernelRuntimeContext ctx(temp_allocator);
        clear_error_message();
        const int64_t t0 = tr != nullptr ? EventTracer::now_ns() : 0;
        in.kernel(ctx, in.args);
        if (tr != nullptr) {
          tr->record(ProfileEventKind::Operator, op_names[in.op_index], "", t0, EventTracer::now_ns(),
                     static_cast<int32_t>(pc));
          // The kernel's output is its last argument (out variants), as ExecuTorch logs it.
          if (log_intermediates && in.args.size() > 0 && ctx.failure_state() == Error::Ok) {
            log_value_or_list(*tr, *in.args[in.args.size() - 1], static_cast<int32_t>(pc));
          }
        }
        if (ctx.failure_state() != Error::Ok) {
          char inner[768];
          std::snprintf(inner, sizeof(inner), "%s", last_error_message());
          set_error(ctx.failure_state(), "%s (instruction %zu of method '%s') failed: %s", op_names[in.op_index], pc,
                    name, inner[0] ? inner : error_name(ctx.failure_state()));
          set_error_context(nullptr, name, op_names[in.op_index], static_cast<int64_t>(pc), -1);
          return ctx.failure_state();
        }
        ++pc;
        break;
      }
      case InstrKind::Delegate: {
        const Delegate& d = delegates[in.delegate_index];
        BackendExecutionContext ctx(temp_allocator, name, tr);
        clear_error_message();
        const int64_t t0 = tr != nullptr ? EventTracer::now_ns() : 0;
        if (tr != nullptr) tr->set_current_delegate(d.id, static_cast<int32_t>(pc));
        Error e = d.backend->execute(ctx, d.handle, in.args);
        if (tr != nullptr) {
          tr->record(ProfileEventKind::DelegateCall, "DELEGATE_CALL", d.id, t0, EventTracer::now_ns(),
                     static_cast<int32_t>(pc));
          // A delegate call's arguments (its inputs, then its outputs), as ExecuTorch logs them.
          if (log_intermediates && e == Error::Ok) {
            for (EValue* arg : in.args) log_value_or_list(*tr, *arg, static_cast<int32_t>(pc));
          }
        }
        if (e != Error::Ok) {
          char inner[768];
          std::snprintf(inner, sizeof(inner), "%s", last_error_message());
          set_error(e, "backend '%s' (delegate %u, instruction %zu of method '%s') failed: %s", d.id,
                    in.delegate_index, pc, name, inner[0] ? inner : error_name(e));
          set_error_context(d.id, name, nullptr, static_cast<int64_t>(pc), static_cast<int64_t>(in.delegate_index));
          return e;
        }
        ++pc;
        break;
      }
      case InstrKind::Move:
        values[in.b] = values[in.a];
        ++pc;
        break;
      case InstrKind::JumpFalse: {
        const EValue& c = values[in.a];
        bool cond;
        if (c.is_bool()) {
          cond = c.to_bool();
        } else if (c.is_tensor() && c.to_tensor().scalar_type() == ScalarType::Bool) {
          const Tensor& t = c.to_tensor();
          cond = true;
          for (size_t k = 0; k < t.numel(); ++k) cond = cond && t.const_data_ptr<uint8_t>()[k] != 0;
        } else {
          return set_error(Error::InvalidProgram, "instruction %zu: jump condition is a %s, not a Bool", pc,
                           tag_name(c.tag()));
        }
        if (!cond && in.b <= pc && ++backward_jumps > loop_limit) {
          // A loop whose condition never turns true (a crafted file: load refuses only a condition no
          // instruction of the loop writes) would make execute() hang.
          return set_error(Error::InvalidProgram,
                           "instruction %zu of method '%s' jumped back to instruction %u more than %llu times in one "
                           "execute: a loop whose condition stays false would never end (raise the limit with "
                           "etkit::runtime::set_loop_limit, etkit.runtime.set_loop_limit or etkit_runner "
                           "--loop_limit if the program's loops are that long)",
                           pc, name, in.b, static_cast<unsigned long long>(loop_limit));
        }
        pc = cond ? pc + 1 : in.b;
        break;
      }
      case InstrKind::Free:
        // Planned memory is owned by the method; nothing to release.
        ++pc;
        break;
    }
  }
  if (tr != nullptr) {
    tr->record(ProfileEventKind::Method, name, "", method_start, EventTracer::now_ns(), -1);
    if (tr->debug_level() >= DebugLevel::ProgramOutputs) {
      for (uint32_t o : outputs) tr->log_value(values[o], 0, /*is_output=*/true);
    }
  }
  return Error::Ok;
}

// ---------------------------------------------------------------- Program::load_method

namespace {
bool has_plan(const fb::Program* p, const std::string& name) {
  for (size_t i = 0; i < p->execution_plan()->size(); ++i) {
    const fb::ExecutionPlan* plan = p->execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (plan != nullptr && plan->name() != nullptr && name == plan->name()->c_str()) return true;
  }
  return false;
}
}  // namespace

/// Points `s`'s planned buffers at the caller's (MemoryManager::planned_memory), zeroed as the runtime's own
/// are. Errors: InvalidArgument when a mem_id the program plans has no buffer, a buffer is smaller than its
/// plan, or is not 16-byte aligned (the planner's minimum): the message names the buffer and both sizes.
static Error use_caller_buffers(MethodState& s, const HierarchicalAllocator& planned,
                         const flatbuffers::Vector<int64_t>* buffer_sizes, size_t num_buffers) {
  for (size_t id = 1; id < num_buffers; ++id) {
    const int64_t size = buffer_sizes->Get(static_cast<flatbuffers::uoffset_t>(id));
    if (id - 1 >= planned.size()) {
      return set_error(Error::InvalidArgument,
                       "method '%s' plans %lld bytes in buffer %zu (mem_id %zu); the MemoryManager's planned memory "
                       "has %zu buffer(s): give one per mem_id (MethodMeta::memory_planned_buffer_size)",
                       s.name, (long long)size, id - 1, id, planned.size());
    }
    const Span<uint8_t> buffer = planned.buffer(id - 1);
    if (buffer.size() < static_cast<uint64_t>(size)) {
      return set_error(Error::InvalidArgument,
                       "method '%s': planned buffer %zu (mem_id %zu) is %zu bytes; the program plans %lld bytes in it",
                       s.name, id - 1, id, buffer.size(), (long long)size);
    }
    if (size > 0 && reinterpret_cast<uintptr_t>(buffer.data()) % 16 != 0) {
      return set_error(Error::InvalidArgument,
                       "method '%s': planned buffer %zu (mem_id %zu) at %p is not 16-byte aligned", s.name, id - 1,
                       id, static_cast<const void*>(buffer.data()));
    }
    if (size > 0) std::memset(buffer.data(), 0, static_cast<size_t>(size));
    s.planned_buffers[id] = buffer.data();
  }
  return Error::Ok;
}

bool is_fallback_method_name(const char* name) {
  if (name == nullptr) return false;
  size_t n = std::strlen(name), k = sizeof(kFallbackMethodSuffix) - 1;
  return n > k && std::strcmp(name + n - k, kFallbackMethodSuffix) == 0;
}

Result<Method> Program::load_method(const char* method_name, EventTracer* event_tracer) const {
  return load_method(method_name, nullptr, event_tracer);
}

Result<Method> Program::load_method(const char* method_name, MemoryManager* memory_manager,
                                    EventTracer* event_tracer, const NamedDataMap* named_data_map) const {
  const int64_t t0 = event_tracer != nullptr ? EventTracer::now_ns() : 0;
  Result<Method> method = load_method_or_fallback(method_name, memory_manager, event_tracer, named_data_map);
  if (event_tracer != nullptr && method.ok()) {
    const int64_t t1 = EventTracer::now_ns();
    event_tracer->record(ProfileEventKind::Block, "Default", "", t0, t0, -1);
    event_tracer->record(ProfileEventKind::Load, "Program::load_method", "", t0, t1, 0);
    method->set_event_tracer(event_tracer);
  }
  return method;
}

Result<Method> Program::load_method_or_fallback(const char* method_name, MemoryManager* memory_manager,
                                                EventTracer* event_tracer, const NamedDataMap* external_data) const {
  t_backend_missing = false;
  Result<Method> primary = load_plan(method_name, memory_manager, event_tracer, external_data);
  if (primary.ok() || method_name == nullptr || is_fallback_method_name(method_name)) return primary;
  if (!t_backend_missing) return primary;  // any other failure is reported as is
  std::string twin = std::string(method_name) + kFallbackMethodSuffix;
  if (!has_plan(data_->program, twin)) return primary;
  std::string why = last_error_message();
  const ErrorContext primary_context = last_error_context();  // the backend that is missing
  Result<Method> fallback = load_plan(twin.c_str(), memory_manager, event_tracer, external_data);
  if (!fallback.ok()) {
    set_error(fallback.error(), "%s; its fallback plan '%s' could not load either: %s", why.c_str(), twin.c_str(),
              std::string(last_error_message()).c_str());
    set_error_context(primary_context.backend_id, primary_context.method, nullptr, -1, primary_context.delegate_index);
    return fallback.error();
  }
  fallback->state_->fallback_reason = why;
  fallback->state_->fallback_backend_id = primary_context.backend_id;
  clear_error_message();
  return fallback;
}

Result<Method> Program::load_plan(const char* method_name, MemoryManager* memory_manager,
                                  EventTracer* event_tracer, const NamedDataMap* external_data) const {
  clear_error_message();
  auto meta = method_meta(method_name);
  if (!meta.ok()) return meta.error();
  const fb::Program* p = data_->program;
  const fb::ExecutionPlan* plan = nullptr;
  for (size_t i = 0; i < p->execution_plan()->size(); ++i) {
    const fb::ExecutionPlan* cand = p->execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (cand != nullptr && cand->name() != nullptr && std::strcmp(cand->name()->c_str(), method_name) == 0) {
      plan = cand;
      break;
    }
  }
  MemoryAllocator* method_allocator = memory_manager != nullptr ? memory_manager->method_allocator() : nullptr;
  std::unique_ptr<MethodState, MethodStateDeleter> s;
  if (method_allocator != nullptr) {
    void* where = method_allocator->allocate(sizeof(MethodState), alignof(MethodState));
    if (where == nullptr) {
      return set_error(Error::MemoryAllocationFailed, "method '%s': the method allocator cannot hold the method "
                       "state (%zu bytes)", method_name, sizeof(MethodState));
    }
    s.reset(new (where) MethodState());
    s->in_caller_memory = true;
    s->method_allocator = method_allocator;
  } else {
    s.reset(new (std::nothrow) MethodState());
  }
  if (!s) return set_error(Error::MemoryAllocationFailed, "cannot allocate method state");
  s->plan = plan;
  s->program = data_.get();
  s->name = plan->name()->c_str();
  s->data_map = MergedDataMap(named_data_map(), external_data);

  const auto* buffer_sizes = plan->non_const_buffer_sizes();
  size_t num_buffers = buffer_sizes == nullptr ? 0 : buffer_sizes->size();
  ETKIT_CHECK_OK(s->planned_buffers.assign(s->alloc(), num_buffers, nullptr, "planned buffer table"));
  ETKIT_CHECK_OK(s->planned_allocations.assign(s->alloc(), num_buffers, nullptr, "planned buffer table"));
  uint64_t planned_total = 0;
  size_t largest = 0;
  int64_t largest_size = 0;
  for (size_t i = 1; i < num_buffers; ++i) {
    int64_t size = buffer_sizes->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (size < 0 || static_cast<uint64_t>(size) > (uint64_t(1) << 40)) {
      return set_error(Error::InvalidProgram, "method '%s': planned buffer %zu has invalid size %lld", s->name, i,
                       (long long)size);
    }
    planned_total += static_cast<uint64_t>(size);
    if (largest == 0 || size > largest_size) {
      largest = i;
      largest_size = size;
    }
  }
  // Refused before any allocation: a program (hostile or not) that claims more memory than it may use gets a
  // precise error rather than an allocator that overcommits, aborts or returns null, or the OOM killer.
  HierarchicalAllocator* planned_memory = memory_manager != nullptr ? memory_manager->planned_memory() : nullptr;
  const uint64_t set_limit = memory_limit();
  const uint64_t limit = effective_memory_limit();
  const uint64_t file = static_cast<uint64_t>(data_->file_size);
  if (planned_memory == nullptr && planned_total + file > limit) {
    return set_error(Error::MemoryAllocationFailed,
                     "method '%s' needs %llu bytes: the %llu-byte program file plus %llu bytes of planned buffers "
                     "(the largest, buffer %zu, %lld bytes), more than %s of %llu bytes",
                     s->name, (unsigned long long)(planned_total + file), (unsigned long long)file,
                     (unsigned long long)planned_total, largest, (long long)largest_size,
                     set_limit != 0 ? "the memory limit (set_memory_limit)" : "this machine's RAM",
                     (unsigned long long)limit);
  }
  if (planned_memory != nullptr) {
    ETKIT_CHECK_OK(use_caller_buffers(*s, *planned_memory, buffer_sizes, num_buffers));
  }
  for (size_t i = 1; i < num_buffers && planned_memory == nullptr; ++i) {
    int64_t size = buffer_sizes->Get(static_cast<flatbuffers::uoffset_t>(i));
    // calloc: zeroed memory whose pages (for a large buffer, fresh from the kernel) become resident only
    // when first written; aligned to 64 bytes by hand.
    void* buf = std::calloc(static_cast<size_t>(size) + 128, 1);
    if (buf == nullptr) {
      return set_error(Error::MemoryAllocationFailed, "method '%s': cannot allocate planned buffer %zu of %lld bytes",
                       s->name, i, (long long)size);
    }
    s->planned_allocations[i] = buf;
    s->planned_buffers[i] = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf) + 63) & ~uintptr_t(63));
  }
  if (memory_manager != nullptr && memory_manager->temp_allocator() != nullptr) {
    s->temp_allocator = memory_manager->temp_allocator();
  } else {
    s->temp_arena.resize(kTempArenaBytes);
    s->own_temp_allocator = MemoryAllocator(s->temp_arena.size(), s->temp_arena.data());
  }


  ETKIT_CHECK_OK(s->parse_values());
  s->mutable_segment.Free();  // initial states are copied: with a mapped file its pages leave the RSS
  ETKIT_CHECK_OK(s->check_values());
  ETKIT_CHECK_OK(s->resolve_operators());
  ETKIT_CHECK_OK(s->init_delegates(s->data_map.empty() ? nullptr : &s->data_map, event_tracer));
  ETKIT_CHECK_OK(s->parse_instructions());
  return Method(std::move(s));
}

void set_memory_limit(uint64_t bytes) { g_memory_limit.store(bytes, std::memory_order_relaxed); }
void set_loop_limit(uint64_t iterations) {
  g_loop_limit.store(iterations != 0 ? iterations : kDefaultLoopLimit, std::memory_order_relaxed);
}
uint64_t loop_limit() { return g_loop_limit.load(std::memory_order_relaxed); }
uint64_t memory_limit() { return g_memory_limit.load(std::memory_order_relaxed); }
uint64_t effective_memory_limit() {
  const uint64_t set_limit = memory_limit();
  return set_limit != 0 ? set_limit : physical_memory_bytes();
}

// ---------------------------------------------------------------- Method

void MethodStateDeleter::operator()(MethodState* state) const {
  if (state == nullptr) return;
  if (state->in_caller_memory) {
    state->~MethodState();  // its memory belongs to the caller's method allocator
  } else {
    delete state;
  }
}

Method::Method(std::unique_ptr<MethodState, MethodStateDeleter> state) : state_(std::move(state)) {}
Method::Method(Method&& other) noexcept = default;
Method::~Method() = default;

MethodMeta Method::method_meta() const { return MethodMeta(state_->plan); }
const char* Method::fallback_reason() const { return state_->fallback_reason.c_str(); }
const char* Method::fallback_backend_id() const { return state_->fallback_backend_id.c_str(); }
size_t Method::inputs_size() const { return state_->inputs.size(); }
size_t Method::outputs_size() const { return state_->outputs.size(); }
size_t Method::values_size() const { return state_->values.size(); }
const EValue& Method::get_value(size_t index) const { return state_->values[index]; }
const EValue& Method::get_input(size_t index) const { return state_->values[state_->inputs[index]]; }
const EValue& Method::get_output(size_t index) const { return state_->values[state_->outputs[index]]; }

namespace {
void format_sizes(char* out, size_t cap, Span<const SizesType> sizes) {
  size_t used = 0;
  used += static_cast<size_t>(std::snprintf(out, cap, "["));
  for (size_t i = 0; i < sizes.size() && used < cap; ++i) {
    used += static_cast<size_t>(std::snprintf(out + used, cap - used, i ? ", %d" : "%d", (int)sizes[i]));
  }
  if (used < cap) std::snprintf(out + used, cap - used, "]");
}
}  // namespace

Error Method::set_input(const EValue& value, size_t index) {
  MethodState& s = *state_;
  if (index >= s.inputs.size()) {
    return set_error(Error::InvalidArgument, "method '%s' has %zu inputs; input index %zu is out of range", s.name,
                     s.inputs.size(), index);
  }
  size_t vi = s.inputs[index];
  EValue& target = s.values[vi];
  if (target.is_tensor()) {
    if (!value.is_tensor()) {
      return set_error(Error::InvalidArgument, "method '%s' input %zu expects a Tensor, got %s", s.name, index,
                       tag_name(value.tag()));
    }
    Tensor& dst = target.to_tensor();
    const Tensor& src = value.to_tensor();
    char want[160], got[160];
    format_sizes(want, sizeof(want), dst.sizes());
    format_sizes(got, sizeof(got), src.sizes());
    if (src.scalar_type() != dst.scalar_type()) {
      return set_error(Error::InvalidArgument, "method '%s' input %zu expects dtype %s, got %s", s.name, index,
                       scalar_type_name(dst.scalar_type()), scalar_type_name(src.scalar_type()));
    }
    if (src.dim() != dst.dim()) {
      return set_error(Error::InvalidArgument, "method '%s' input %zu expects rank %zu (shape %s), got rank %zu (%s)",
                       s.name, index, dst.dim(), want, src.dim(), got);
    }
    for (size_t d = 0; d < dst.dim(); ++d) {
      if (src.dim_order()[d] != dst.dim_order()[d]) {
        return set_error(Error::InvalidArgument,
                         "method '%s' input %zu expects another memory layout (dim_order) than the one given", s.name,
                         index);
      }
    }
    if (s.tensor_is_planned[vi]) {
      Error e = dst.resize(src.sizes());
      if (e != Error::Ok) {
        return set_error(Error::InvalidArgument, "method '%s' input %zu expects shape %s, got %s (%s)", s.name, index,
                         want, got, last_error_message());
      }
      if (src.nbytes() > 0) std::memcpy(dst.mutable_data_ptr(), src.const_data_ptr(), src.nbytes());
    } else {
      if (dst.shape_dynamism() == TensorShapeDynamism::STATIC) {
        for (size_t d = 0; d < dst.dim(); ++d) {
          if (src.sizes()[d] != dst.sizes()[d]) {
            return set_error(Error::InvalidArgument, "method '%s' input %zu expects shape %s, got %s", s.name, index,
                             want, got);
          }
        }
      }
      for (size_t d = 0; d < dst.dim(); ++d) dst.mutable_sizes()[d] = src.sizes()[d];
      dst.recompute_strides_and_numel();
      dst.set_capacity_nbytes(dst.nbytes());
      dst.set_data(const_cast<void*>(src.const_data_ptr()));
    }
  } else if (target.is_scalar()) {
    if (value.tag() != target.tag()) {
      return set_error(Error::InvalidArgument, "method '%s' input %zu expects %s, got %s", s.name, index,
                       tag_name(target.tag()), tag_name(value.tag()));
    }
    target = value;
  } else if (value.tag() != target.tag()) {
    return set_error(Error::InvalidArgument, "method '%s' input %zu expects %s, got %s", s.name, index,
                     tag_name(target.tag()), tag_name(value.tag()));
  }
  s.input_set[index] = true;
  return Error::Ok;
}

Error Method::set_output_data_ptr(void* buffer, size_t size, size_t index) {
  MethodState& s = *state_;
  if (index >= s.outputs.size()) {
    return set_error(Error::InvalidArgument, "output index %zu out of range (%zu outputs)", index, s.outputs.size());
  }
  size_t vi = s.outputs[index];
  if (!s.values[vi].is_tensor()) return set_error(Error::InvalidArgument, "output %zu is not a tensor", index);
  if (s.tensor_is_planned[vi]) {
    return set_error(Error::InvalidState, "output %zu lives in planned memory; it cannot be redirected", index);
  }
  Tensor& t = s.values[vi].to_tensor();
  if (size < t.nbytes()) {
    return set_error(Error::InvalidArgument, "output %zu needs %zu bytes, buffer has %zu", index, t.nbytes(), size);
  }
  t.set_data(buffer);
  t.set_capacity_nbytes(size);
  return Error::Ok;
}

Error Method::enable_profiling(size_t capacity) {
  if (capacity == 0) {
    if (state_->active_tracer == state_->tracer.get()) state_->active_tracer = nullptr;
    state_->tracer.reset();
    state_->profile_storage.clear();
    state_->profile_storage.shrink_to_fit();
    return Error::Ok;
  }
  state_->profile_storage.assign(capacity, ProfileEvent{});
  state_->tracer = std::make_unique<EventTracer>(state_->profile_storage.data(), capacity);
  state_->active_tracer = state_->tracer.get();
  return Error::Ok;
}

void Method::set_event_tracer(EventTracer* tracer) {
  if (tracer == nullptr) {
    state_->active_tracer = state_->tracer.get();
    return;
  }
  state_->tracer.reset();
  state_->profile_storage.clear();
  state_->active_tracer = tracer;
}

EventTracer* Method::event_tracer() const { return state_->active_tracer; }

Span<const ProfileEvent> Method::profiling_events() const {
  if (state_->active_tracer == nullptr) return {};
  return state_->active_tracer->events();
}

size_t Method::dropped_profiling_events() const {
  return state_->active_tracer != nullptr ? state_->active_tracer->dropped() : 0;
}

Error Method::execute() {
  clear_error_message();
  return state_->execute();
}

}  // namespace etkit::runtime
