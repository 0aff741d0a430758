// EventTracer: timed events and logged values of Method::execute calls, for profiling and numeric
// debugging (seed pages "Profiling Models in ExecuTorch", "Prerequisite: ETDump", "Debugging Models in
// ExecuTorch" and the GPU backend's profiling tutorial).
//
// It records: the method, every kernel call, every delegate call, what delegates log through
// BackendExecutionContext::event_tracer(), and, with a debug buffer, the values the debug level asks
// for (tensors are copied into the caller's buffer). Storage for events is fixed when the tracer is
// made, so recording never allocates; events past the capacity are counted in dropped(), tensors that
// do not fit in the debug buffer in dropped_debug_values() (their events say so with offset -1).
//
// Two ways to use it:
//   - Method::enable_profiling(capacity): the method owns a tracer that forgets the previous
//     execute()'s events (Mode::LastExecute).
//   - ETDump (extension/devtools/etdump.h): the caller owns a tracer in Mode::Accumulate, hands it to
//     Program::load_method or Method::set_event_tracer (one tracer may serve several methods, never two
//     executing at once), and writes it as an ETDump file afterwards. Each execute() opens a block
//     "Execute"; loading a method records "Program::load_method" in a block "Default".
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/scalar_type.h"
#include "etkit/runtime/span.h"

namespace etkit::runtime {

class EValue;
class Tensor;

enum class ProfileEventKind : uint8_t {
  Method = 0,            // the whole execute()
  Operator = 1,          // one kernel call (name: "aten::add.out")
  DelegateCall = 2,      // one delegate call (name: the backend id)
  DelegateInternal = 3,  // logged by a delegate during its call (name: the delegate's label)
  Block = 4,             // Mode::Accumulate: the events that follow belong to block `name`; `instruction`
                         // holds the block's bundled input index (-1: none)
  Load = 5,              // Program::load_method (name "Program::load_method")
  Debug = 6,             // a logged value (ProfileEvent::value)
};

/// Which values a tracer with a debug buffer logs (ExecuTorch's EventTracerDebugLogLevel).
enum class DebugLevel : uint8_t {
  None = 0,                 // none
  ProgramOutputs = 1,       // the method's outputs after execute()
  IntermediateOutputs = 2,  // plus each kernel's output and each delegate call's tensor arguments
};

/// Type of a logged value (ETDump's ValueType numbering).
enum class DebugValueType : uint8_t { Null = 0, Int = 1, Bool = 2, Float = 3, Double = 4, Tensor = 5 };

inline constexpr size_t kMaxDebugDims = 16;

/// A value logged into the debug buffer: scalars inline, a tensor's bytes at `offset` in the buffer
/// (-1: the buffer was full). sizes/dim_order describe the tensor as it was laid out.
struct DebugValue {
  int64_t offset;
  int64_t sizes[kMaxDebugDims];
  uint8_t dim_order[kMaxDebugDims];
  double scalar;            // Int/Bool/Double values
  ScalarType scalar_type;
  uint8_t dim;
  DebugValueType type;
  bool is_output;           // a method output (logged after the last instruction)
};

struct ProfileEvent {
  char name[96];          // truncated to 95 characters
  char backend[32];       // backend id for delegate events, "" otherwise
  int64_t start_ns;       // PAL-clock nanoseconds
  int64_t end_ns;
  int32_t instruction;    // index of the instruction in the plan (-1 for the method)
  int32_t delegate_debug_id;  // DelegateInternal: an integer delegate debug id, or -1 (then `name` is it)
  ProfileEventKind kind;
  DebugValue value;       // kind == Debug only
};

class EventTracer final {
 public:
  enum class Mode : uint8_t { LastExecute, Accumulate };

  EventTracer(ProfileEvent* storage, size_t capacity, Mode mode = Mode::LastExecute)
      : events_(storage), capacity_(capacity), mode_(mode) {}

  /// Nanoseconds of the PAL's clock (platform.h: et_pal_current_ticks, steady_clock by default), the time
  /// base of every event.
  static int64_t now_ns();

  /// Records an event; when the storage is full the event is dropped and counted.
  void record(ProfileEventKind kind, const char* name, const char* backend, int64_t start_ns, int64_t end_ns,
              int32_t instruction);
  /// For delegates, inside execute(): an event of the current delegate call (`start_ns`/`end_ns` on the
  /// PAL clock; a delegate timing a device converts its clock, e.g. by anchoring the first device
  /// timestamp to the host time at submission). `name` is the delegate's debug id (ETDump's
  /// delegate_debug_id_str), e.g. the name of the backend's operator.
  void log_delegate_event(const char* name, int64_t start_ns, int64_t end_ns) {
    record(ProfileEventKind::DelegateInternal, name, current_backend_, start_ns, end_ns, current_instruction_);
  }
  /// The same with an integer delegate debug id (ETDump's delegate_debug_id_int), the key of the
  /// delegate's debug handle map (PreprocessResult.debug_handle_map), and optionally a label kept beside
  /// it (delegate_debug_id_str; ExecuTorch's Inspector then names the event by the integer).
  void log_delegate_event(int32_t debug_id, int64_t start_ns, int64_t end_ns) {
    log_delegate_event(debug_id, "", start_ns, end_ns);
  }
  void log_delegate_event(int32_t debug_id, const char* label, int64_t start_ns, int64_t end_ns);

  /// Debug values: tensors are copied into `buffer` (64-byte aligned, never past its end); `level` says
  /// which values are logged. An empty buffer logs tensors' shapes only (offset -1).
  void set_debug_buffer(Span<uint8_t> buffer, DebugLevel level) {
    debug_buffer_ = buffer;
    debug_level_ = level;
    debug_used_ = 0;
  }
  DebugLevel debug_level() const { return debug_level_; }
  /// Logs `value` (Tensor, Int, Double or Bool; other tags are skipped) for `instruction`.
  void log_value(const EValue& value, int32_t instruction, bool is_output);

  Span<const ProfileEvent> events() const { return {events_, size_}; }
  size_t dropped() const { return dropped_; }
  size_t dropped_debug_values() const { return dropped_values_; }
  size_t capacity() const { return capacity_; }
  Mode mode() const { return mode_; }
  Span<const uint8_t> debug_buffer() const { return {debug_buffer_.data(), debug_used_}; }

  /// For the runtime: execute() starts. LastExecute forgets the previous events; Accumulate opens a block.
  void begin_execute() {
    if (mode_ == Mode::LastExecute) {
      size_ = 0;
      dropped_ = 0;
      dropped_values_ = 0;
      debug_used_ = 0;
    } else {
      const int64_t t = now_ns();
      record(ProfileEventKind::Block, "Execute", "", t, t, bundled_input_index_);
    }
  }
  /// The bundled program test case (BundledProgram) whose inputs the following executions run, or -1:
  /// each later "Execute" block carries it (ETDump's RunData.bundled_input_index), so the Inspector pairs
  /// the block with that case's reference outputs. load_bundled_input() sets it.
  void set_bundled_input_index(int32_t index) { bundled_input_index_ = index; }
  int32_t bundled_input_index() const { return bundled_input_index_; }
  /// Forget everything recorded (the storage and the debug buffer are reused).
  void reset() {
    size_ = 0;
    dropped_ = 0;
    dropped_values_ = 0;
    debug_used_ = 0;
  }
  void set_current_delegate(const char* backend, int32_t instruction) {
    current_backend_ = backend;
    current_instruction_ = instruction;
  }

 private:
  ProfileEvent* next_event();
  ProfileEvent* put(ProfileEventKind kind, const char* name, const char* backend, int64_t start_ns,
                    int64_t end_ns, int32_t instruction);
  void fill_tensor(DebugValue& v, const Tensor& t);

  ProfileEvent* events_;
  size_t capacity_;
  Mode mode_;
  size_t size_ = 0;
  size_t dropped_ = 0;
  size_t dropped_values_ = 0;
  Span<uint8_t> debug_buffer_;
  size_t debug_used_ = 0;
  DebugLevel debug_level_ = DebugLevel::None;
  const char* current_backend_ = "";
  int32_t current_instruction_ = -1;
  int32_t bundled_input_index_ = -1;
};

}  // namespace etkit::runtime
