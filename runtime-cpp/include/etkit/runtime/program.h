// Program: a loaded, verified .pte (seed pages ".pte file format", "ExecuTorch Runtime Overview").
//
// Program::load reads the optional extended header ("eh00": program size, segment base offset),
// checks the flatbuffer (file identifier "ET12" and, with Verification::InternalConsistency, a full
// flatbuffers Verifier pass plus bounds checks of every segment, constant and delegate reference) and
// keeps the program's bytes alive. A truncated or corrupted file yields an Error with a message in
// last_error_message(); it never crashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "etkit/runtime/data_loader.h"
#include "etkit/runtime/error.h"
#include "etkit/runtime/event_tracer.h"
#include "etkit/runtime/freeable_buffer.h"
#include "etkit/runtime/named_data_map.h"
#include "etkit/runtime/result.h"
#include "etkit/runtime/scalar_type.h"
#include "etkit/runtime/span.h"
#include "etkit/runtime/evalue.h"

namespace etkit::fb {
struct Program;
struct ExecutionPlan;
}  // namespace etkit::fb

namespace etkit::runtime {

class Method;
class MemoryManager;
class ProgramData;

/// Suffix of a method's fallback twin: an execution plan named "<method>#fallback" is the same method
/// lowered without the backends that exist only on some platforms (written by
/// `ExecutorchBackendConfig(delegate_fallback=True)`; docs/fallback.md). ExecuTorch sees it as one more
/// method; etkit's runtime hides it from method lists and loads it when the primary plan cannot load.
inline constexpr const char kFallbackMethodSuffix[] = "#fallback";

/// True if `name` ends with kFallbackMethodSuffix.
bool is_fallback_method_name(const char* name);

/// Shape and dtype of one method input or output tensor, as planned in the .pte.
struct TensorInfo {
  ScalarType scalar_type;
  Span<const int32_t> sizes;        // from the flatbuffer (upper bounds for dynamic shapes)
  Span<const uint8_t> dim_order;
  TensorShapeDynamism dynamism;
  bool is_memory_planned;           // data lives in the method's planned memory
  size_t nbytes;
};

/// Facts about one method, readable without loading it (ExecuTorch's MethodMeta).
class MethodMeta final {
 public:
  explicit MethodMeta(const fb::ExecutionPlan* plan) : plan_(plan) {}
  const char* name() const;
  size_t num_inputs() const;
  /// Tag of input i. Errors: InvalidArgument for an index out of range.
  Result<Tag> input_tag(size_t index) const;
  /// Errors: InvalidArgument (index out of range or the input is not a tensor).
  Result<TensorInfo> input_tensor_meta(size_t index) const;
  size_t num_outputs() const;
  Result<Tag> output_tag(size_t index) const;
  Result<TensorInfo> output_tensor_meta(size_t index) const;
  /// Memory-planned buffers (non_const_buffer_sizes minus the reserved entry 0).
  size_t num_memory_planned_buffers() const;
  Result<int64_t> memory_planned_buffer_size(size_t index) const;
  size_t num_backends() const;
  Result<const char*> get_backend_name(size_t index) const;

 private:
  Result<Tag> value_tag(int32_t value_index) const;
  Result<TensorInfo> tensor_meta(int32_t value_index) const;
  const fb::ExecutionPlan* plan_;
};

class Program final {
 public:
  enum class Verification : uint8_t {
    /// Header, identifier and root offsets only; trusts the rest of the flatbuffer.
    Minimal,
    /// Full flatbuffers verification plus bounds checks of segments and references.
    InternalConsistency,
  };

  /// Loads the program through `loader`, which must outlive the Program (segments are read from it
  /// later). Errors: InvalidProgram (bad identifier, failed verification, segment out of bounds,
  /// truncated file), AccessFailed (loader I/O), each with a message.
  static Result<Program> load(DataLoader* loader, Verification verification = Verification::InternalConsistency);

  Program(Program&& other) noexcept;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  Program& operator=(Program&&) = delete;
  ~Program();

  size_t num_methods() const;
  /// Errors: InvalidArgument for an index out of range.
  Result<const char*> get_method_name(size_t index) const;
  /// Errors: InvalidArgument naming the method and listing the available names.
  Result<MethodMeta> method_meta(const char* method_name) const;

  /// Builds a runnable Method: allocates its values, planned memory (sized from
  /// non_const_buffer_sizes) and delegate handles once, here. The Program must outlive the Method.
  /// Errors: InvalidArgument (unknown method), OperatorMissing (kernel not registered: message names
  /// the op), NotFound (backend not registered: message names it and says to install/link its plugin),
  /// InvalidProgram, MemoryAllocationFailed, or whatever a backend's init() returns.
  /// When a delegate's backend is not registered or not available (and only then) and the program has
  /// a "<method>#fallback" plan, that plan is loaded instead; Method::fallback_reason() then says why.
  /// With an `event_tracer` (ETDump, event_tracer.h), loading is recorded as "Program::load_method" in
  /// a block "Default" and the method's execute() calls are traced into it (Method::set_event_tracer).
  Result<Method> load_method(const char* method_name, EventTracer* event_tracer = nullptr) const;
  /// The same in caller-owned memory (memory_manager.h, ExecuTorch's signature): planned buffers, temp and
  /// method allocators come from `memory_manager` where it gives them (they must outlive the Method), and
  /// the memory limit does not apply to caller-owned buffers. Errors as above, and InvalidArgument when a
  /// planned buffer is missing, smaller than planned or misaligned (the message names it and both sizes).
  /// `memory_manager` may be null (the runtime's own memory).
  ///
  /// `named_data_map` is the data the program keeps outside itself, usually a .ptd file
  /// (extension/flat_tensor/flat_tensor_data_map.h); it must outlive the Method. Constants the .pte marks
  /// EXTERNAL are read from it by fully qualified name, and delegates see it behind the program's own named
  /// data. Errors: NotFound naming the key a constant or delegate needs that neither holds (and saying so when
  /// no data map was given); InvalidProgram when the data file's tensor differs in type, shape or size from
  /// the program's (the message gives both).
  Result<Method> load_method(const char* method_name, MemoryManager* memory_manager,
                             EventTracer* event_tracer = nullptr,
                             const NamedDataMap* named_data_map = nullptr) const;

  /// The program's named data (Program.named_data), or null when there is none.
  const NamedDataMap* named_data_map() const;

  // ---- used by Method; not needed by applications ----
  const fb::Program* flatbuffer() const;
  /// Bytes of constant tensor `buffer_index` (constant segment, or inline constant_buffer in old
  /// files). Errors: InvalidProgram when the index or size is out of bounds.
  Result<const void*> get_constant_data(size_t buffer_index, size_t nbytes) const;
  /// Loads segment `segment_index` (offset relative to the segment base). Errors: InvalidProgram.
  Result<FreeableBuffer> load_segment(size_t segment_index) const;

 private:
  explicit Program(std::unique_ptr<ProgramData> data);
  Result<Method> load_plan(const char* method_name, MemoryManager* memory_manager, EventTracer* event_tracer,
                           const NamedDataMap* external_data) const;
  Result<Method> load_method_or_fallback(const char* method_name, MemoryManager* memory_manager,
                                         EventTracer* event_tracer, const NamedDataMap* external_data) const;
  std::unique_ptr<ProgramData> data_;
};

/// The memory one Method may claim, process-wide, checked by Program::load_method before it allocates
/// anything: the program file's size plus the method's planned buffers (non_const_buffer_sizes) must not
/// exceed `bytes`, or load_method fails with MemoryAllocationFailed and a message naming the largest
/// buffer and the sizes. 0 (the default) means the machine's RAM (sysconf), or 2^40 bytes where the
/// platform cannot say. Applies to methods loaded from now on; thread-safe.
void set_memory_limit(uint64_t bytes);
/// The limit set by set_memory_limit (0: the machine's RAM).
uint64_t memory_limit();
/// The limit in force, in bytes: memory_limit(), or the machine's RAM when none was set. Delegates bound
/// what a payload may make them allocate (declared tensor sizes, workspaces) by it too.
uint64_t effective_memory_limit();

}  // namespace etkit::runtime
