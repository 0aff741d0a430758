// EventTracer: timed events of one Method::execute, for profiling (seed pages "Profiling Models in
// ExecuTorch" and the GPU backend's profiling tutorial: the runtime's operator and delegate events, and
// a delegate's own events such as one per GPU dispatch).
//
// The method owns the tracer when profiling is enabled (Method::enable_profiling); execute() resets it
// and records: the method, every kernel call, every delegate call, and what delegates log through
// BackendExecutionContext::event_tracer(). Storage is fixed when profiling is enabled, so recording
// never allocates; events past the capacity are counted in dropped().
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/span.h"

namespace etkit::runtime {

enum class ProfileEventKind : uint8_t {
  Method = 0,            // the whole execute()
  Operator = 1,          // one kernel call (name: "aten::add.out")
  DelegateCall = 2,      // one delegate call (name: the backend id)
  DelegateInternal = 3,  // logged by a delegate during its call (name: the delegate's label)
};

struct ProfileEvent {
  char name[96];          // truncated to 95 characters
  char backend[32];       // backend id for delegate events, "" otherwise
  int64_t start_ns;       // steady-clock nanoseconds
  int64_t end_ns;
  int32_t instruction;    // index of the instruction in the plan (-1 for the method)
  ProfileEventKind kind;
};

class EventTracer final {
 public:
  EventTracer(ProfileEvent* storage, size_t capacity) : events_(storage), capacity_(capacity) {}

  /// Nanoseconds of the PAL's clock (platform.h: et_pal_current_ticks, steady_clock by default), the time
  /// base of every event.
  static int64_t now_ns();

  /// Records an event; when the storage is full the event is dropped and counted.
  void record(ProfileEventKind kind, const char* name, const char* backend, int64_t start_ns, int64_t end_ns,
              int32_t instruction);
  /// For delegates, inside execute(): an event of the current delegate call (`start_ns`/`end_ns` on the
  /// steady clock; a delegate timing a device converts its clock, e.g. by anchoring the first device
  /// timestamp to the host time at submission).
  void log_delegate_event(const char* name, int64_t start_ns, int64_t end_ns) {
    record(ProfileEventKind::DelegateInternal, name, current_backend_, start_ns, end_ns, current_instruction_);
  }

  Span<const ProfileEvent> events() const { return {events_, size_}; }
  size_t dropped() const { return dropped_; }
  size_t capacity() const { return capacity_; }

  /// For the runtime: forget the previous execute's events; set the delegate call being run.
  void reset() {
    size_ = 0;
    dropped_ = 0;
  }
  void set_current_delegate(const char* backend, int32_t instruction) {
    current_backend_ = backend;
    current_instruction_ = instruction;
  }

 private:
  ProfileEvent* events_;
  size_t capacity_;
  size_t size_ = 0;
  size_t dropped_ = 0;
  const char* current_backend_ = "";
  int32_t current_instruction_ = -1;
};

}  // namespace etkit::runtime
