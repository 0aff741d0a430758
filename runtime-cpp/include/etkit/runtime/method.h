// Method: one loaded ExecutionPlan, ready to execute (seed page "ExecuTorch Runtime Overview").
//
// All memory is reserved in Program::load_method. Method::execute runs the instruction list (kernel
// calls, delegate calls, moves, jump_false, free) and never allocates from the heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "etkit/runtime/error.h"
#include "etkit/runtime/evalue.h"
#include "etkit/runtime/event_tracer.h"
#include "etkit/runtime/program.h"
#include "etkit/runtime/result.h"
#include "etkit/runtime/tensor.h"

namespace etkit::runtime {

class MethodState;
/// Destroys a MethodState: deletes it, or, when it lives in a caller's method allocator, only destructs it.
struct MethodStateDeleter {
  void operator()(MethodState* state) const;
};

class Method final {
 public:
  Method(Method&& other) noexcept;
  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;
  Method& operator=(Method&&) = delete;
  ~Method();  // destroys delegate handles

  MethodMeta method_meta() const;
  size_t inputs_size() const;
  size_t outputs_size() const;

  /// Sets input `index`. A tensor must have the planned dtype and rank (and, for a STATIC tensor, the
  /// same sizes); its bytes are copied into planned memory when the input is memory-planned, otherwise
  /// the input is bound to `value`'s data pointer (which must stay valid through execute()).
  /// Scalars (Int/Double/Bool) replace the stored value. Errors: InvalidArgument with a message
  /// naming the input index, expected and given dtype/shape.
  Error set_input(const EValue& value, size_t index);
  const EValue& get_input(size_t index) const;

  /// Points output `index` at caller memory of `size` bytes (only for outputs not memory-planned).
  Error set_output_data_ptr(void* buffer, size_t size, size_t index);
  const EValue& get_output(size_t index) const;

  /// Runs the method. Errors: whatever a kernel or delegate reported (message names op and reason),
  /// InvalidState if an input without planned memory was never set.
  Error execute();

  /// Profiling: with capacity > 0, every execute() records timed events (the method, each kernel call,
  /// each delegate call, and delegates' own events) into storage for `capacity` events allocated now;
  /// capacity 0 turns profiling off. Errors: MemoryAllocationFailed.
  Error enable_profiling(size_t capacity);
  /// Events of the last execute() (empty when profiling is off), and how many did not fit.
  Span<const ProfileEvent> profiling_events() const;
  size_t dropped_profiling_events() const;
  /// Traces execute() into a caller-owned tracer (ETDump: extension/devtools/etdump.h) that must outlive
  /// the Method or be detached with nullptr first; replaces enable_profiling's own tracer. While set,
  /// profiling_events() are that tracer's.
  void set_event_tracer(EventTracer* tracer);
  EventTracer* event_tracer() const;

  /// Empty for a method loaded from its own plan; for a fallback twin (see kFallbackMethodSuffix), why
  /// the primary plan could not load, e.g. "program needs backend 'X' which is not registered ...".
  const char* fallback_reason() const;
  /// For a fallback twin: the backend whose absence made the primary plan fail ("" otherwise).
  const char* fallback_backend_id() const;

  /// Number of values and value i (for tools and tests).
  size_t values_size() const;
  const EValue& get_value(size_t index) const;

 private:
  friend class Program;
  explicit Method(std::unique_ptr<MethodState, MethodStateDeleter> state);
  std::unique_ptr<MethodState, MethodStateDeleter> state_;
};

/// Backward jumps (loop iterations) one Method::execute may take before it fails with InvalidProgram,
/// process-wide: a crafted program can loop on a condition that never turns true, and execute() would
/// hang. Programs loop only where their exporter emitted a loop (ExecuTorch's `map` over a tensor's
/// leading dimension); etkit's emitter emits none.
inline constexpr uint64_t kDefaultLoopLimit = uint64_t{1} << 24;
/// Sets that limit for executes from now on; 0 restores kDefaultLoopLimit. Thread-safe.
void set_loop_limit(uint64_t iterations);
/// The limit in force.
uint64_t loop_limit();

}  // namespace etkit::runtime
