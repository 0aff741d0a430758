// ETDump: the events and values an EventTracer recorded, written in ExecuTorch 1.5.1's ETDump format
// (schema/etdump.fbs, file identifier "ED00", size-prefixed; seed page "Prerequisite: ETDump"), so that
// ExecuTorch's Inspector and etkit's (etkit.devtools.Inspector) read it.
//
//   ETDumpGen etdump(/*event_capacity=*/8192);
//   std::vector<uint8_t> debug(1 << 20);
//   etdump.set_debug_buffer({debug.data(), debug.size()}, DebugLevel::IntermediateOutputs);
//   auto method = program->load_method("forward", etdump.event_tracer());   // block "Default"
//   method->execute();                                                       // block "Execute" each call
//   etdump.write("model.etdp", "model.debug.bin");
//
// What is written, per block (RunData "Default" for loading, "Execute" per execute()):
//   - "Program::load_method" and "Method::execute" (chain_index -1, instruction_id 0),
//   - per kernel call "native_call_<op>" and "OPERATOR_CALL" (chain_index 0, instruction_id = the
//     instruction's index in the plan), per delegate call "DELEGATE_CALL",
//   - what delegates logged, with their delegate_debug_id_str (e.g. the name of the backend's operator),
//     delegate_debug_id_int, or both (an integer id and its label),
//   - DebugEvents: intermediate outputs (a kernel's last argument, a delegate call's tensor arguments)
//     and the method outputs (Value.output = true), whose tensor bytes are at Tensor.offset in the
//     debug buffer; offset -1 when the buffer had no room.
// When the tracer dropped events (its storage was full), a last block is named
// "etkit: <N> events dropped (event storage full)".
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "etkit/runtime/error.h"
#include "etkit/runtime/event_tracer.h"
#include "etkit/runtime/span.h"

namespace etkit::etdump {

using runtime::DebugLevel;
using runtime::Error;
using runtime::EventTracer;
using runtime::ProfileEvent;
using runtime::Span;

/// Checks untrusted ETDump bytes before anything reads them: the size prefix against `size`, the file
/// identifier "ED00" and the flatbuffers verifier over every table. Errors: InvalidProgram with
/// last_error_message() naming the failed check.
Error verify(const uint8_t* data, size_t size);

/// The ETDump bytes (size-prefixed flatbuffer) of every event `tracer` holds.
std::vector<uint8_t> serialize(const EventTracer& tracer);

/// An accumulating EventTracer with its own event storage (ExecuTorch's ETDumpGen). Not thread-safe:
/// the methods it traces must not execute at the same time.
class ETDumpGen final {
 public:
  /// Storage for `event_capacity` events (sizeof(ProfileEvent) bytes each) is allocated here.
  explicit ETDumpGen(size_t event_capacity = 8192);
  ETDumpGen(const ETDumpGen&) = delete;
  ETDumpGen& operator=(const ETDumpGen&) = delete;

  EventTracer* event_tracer() { return &tracer_; }
  /// Values are logged at `level` into `buffer` (caller-owned; must outlive the tracing).
  void set_debug_buffer(Span<uint8_t> buffer, DebugLevel level) { tracer_.set_debug_buffer(buffer, level); }
  /// ExecuTorch's ETDumpGen::get_etdump_data: the file's bytes.
  std::vector<uint8_t> get_etdump_data() const { return serialize(tracer_); }
  /// Writes the ETDump to `etdump_path` and, when given, the used part of the debug buffer to
  /// `debug_buffer_path`. Errors: AccessFailed naming the file.
  Error write(const char* etdump_path, const char* debug_buffer_path = nullptr) const;

 private:
  std::vector<ProfileEvent> storage_;
  EventTracer tracer_;
};

}  // namespace etkit::etdump
