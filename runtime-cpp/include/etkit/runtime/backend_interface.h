// The seam between the runtime and a backend delegate (docs/design/contracts.md section 3; seed page
// "Backend Delegate Implementation and Linking").
//
// A delegate library implements BackendInterface and exports one
//   extern "C" int etkit_<plugin>_register_backends(void)
// that calls etkit_register_backend(ETKIT_BACKEND_ABI_VERSION, "<BackendId>", &instance).
// The backend id is the string stored in the .pte's BackendDelegate.id. Registration never relies on
// static initialisers: a native runner calls the register function from a generated list, the Python
// runtime imports the plugin's extension module whose import calls it.
//
// Lifetime: init() runs at Method load, once per delegate call site in the program; execute() runs on
// every Method::execute and must not allocate from the heap (use the handle's memory from init, or the
// execution context's temp allocator); destroy() runs when the Method is destroyed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/error.h"
#include "etkit/runtime/evalue.h"
#include "etkit/runtime/event_tracer.h"
#include "etkit/runtime/freeable_buffer.h"
#include "etkit/runtime/memory_allocator.h"
#include "etkit/runtime/named_data_map.h"
#include "etkit/runtime/result.h"
#include "etkit/runtime/span.h"

/// Bumped whenever BackendInterface, the context classes, EValue or Tensor change layout. A delegate
/// built against another version is refused at registration.
#define ETKIT_BACKEND_ABI_VERSION 4u

namespace etkit::runtime {

/// Opaque per-call-site state a backend returns from init().
using DelegateHandle = void;

/// Bytes of one compile-spec value (ExecuTorch's SizedBuffer).
struct SizedBuffer {
  const void* buffer;
  size_t nbytes;
};

/// One key/value pair from BackendDelegate.compile_specs in the .pte. Strings live as long as the Program.
struct CompileSpec {
  const char* key;
  SizedBuffer value;
};

/// What init() may use besides its payload.
class BackendInitContext final {
 public:
  BackendInitContext(MemoryAllocator* runtime_allocator, const NamedDataMap* named_data_map,
                     const char* method_name, EventTracer* event_tracer = nullptr)
      : runtime_allocator_(runtime_allocator),
        named_data_map_(named_data_map),
        method_name_(method_name),
        event_tracer_(event_tracer) {}
  /// Allocator whose memory lives as long as the Method (for handles and per-call-site state).
  MemoryAllocator* get_runtime_allocator() { return runtime_allocator_; }
  /// The program's named data (Program.named_data), or null when the program has none.
  const NamedDataMap* get_named_data_map() const { return named_data_map_; }
  const char* get_method_name() const { return method_name_; }
  /// The tracer the Method is loaded with (Program::load_method(name, tracer)), or null: a delegate that
  /// must prepare at init to report inside-delegate events (e.g. turn on its library's profiler) checks
  /// it here; events themselves are logged through BackendExecutionContext::event_tracer().
  EventTracer* event_tracer() { return event_tracer_; }

 private:
  MemoryAllocator* runtime_allocator_;
  const NamedDataMap* named_data_map_;
  const char* method_name_;
  EventTracer* event_tracer_;
};

/// What execute() may use besides its handle and arguments.
class BackendExecutionContext final {
 public:
  BackendExecutionContext(MemoryAllocator* temp_allocator, const char* method_name,
                          EventTracer* event_tracer = nullptr)
      : temp_allocator_(temp_allocator), method_name_(method_name), event_tracer_(event_tracer) {}
  /// Scratch memory valid until execute() returns; may be null.
  MemoryAllocator* get_temp_allocator() { return temp_allocator_; }
  const char* get_method_name() const { return method_name_; }
  /// Non-null when the method is being profiled: log the delegate's own events here
  /// (EventTracer::log_delegate_event); never allocates.
  EventTracer* event_tracer() { return event_tracer_; }

 private:
  MemoryAllocator* temp_allocator_;
  const char* method_name_;
  EventTracer* event_tracer_;
};

class BackendInterface {
 public:
  virtual ~BackendInterface() = default;
  /// False when the backend cannot run on this machine; load_method then fails naming the backend.
  virtual bool is_available() const = 0;
  /// Turns `processed` (the bytes preprocess() produced; the backend may Free() them once copied) into
  /// a handle. Errors: DelegateInvalidCompatibility for a payload this backend cannot read, with a
  /// message set through set_error().
  virtual Result<DelegateHandle*> init(BackendInitContext& ctx, FreeableBuffer* processed,
                                       Span<const CompileSpec> compile_specs) const = 0;
  /// Runs the delegate. `args` are the delegate's inputs then its outputs (contracts.md section 1).
  virtual Error execute(BackendExecutionContext& ctx, DelegateHandle* handle, Span<EValue*> args) const = 0;
  virtual void destroy(DelegateHandle* handle) const { (void)handle; }
  /// Runtime-wide option, e.g. "num_threads". NotSupported when the backend ignores `key`.
  virtual Error set_option(const char* key, int64_t value) {
    (void)key;
    (void)value;
    return Error::NotSupported;
  }
};

/// The backend registered under `backend_id`, or null.
BackendInterface* get_backend(const char* backend_id);
/// Number of registered backends and the i-th id, in registration order.
size_t registered_backend_count();
const char* registered_backend_name(size_t index);
/// Forwards set_option(key, value) to the backend named `backend_id`, or to every registered backend
/// when backend_id is "*" (backends answering NotSupported are skipped). Errors: NotFound for an
/// unknown backend id; NotSupported when no backend accepted the option.
Error set_backend_option(const char* backend_id, const char* key, int64_t value);

}  // namespace etkit::runtime

extern "C" {
/// Registers `backend` under `backend_id` (the id string is copied). Returns 0 on success, otherwise
/// the non-zero etkit::runtime::Error code, with the reason in etkit_backend_registration_error():
/// an abi_version other than ETKIT_BACKEND_ABI_VERSION (message names both versions), a null
/// argument, an over-long id, a full registry, or a different backend already registered under
/// that id. Registering the same object under the same id again is a no-op returning 0.
int etkit_register_backend(uint32_t abi_version, const char* backend_id,
                           etkit::runtime::BackendInterface* backend);
/// Text of the last etkit_register_backend failure ("" if none).
const char* etkit_backend_registration_error(void);
/// The ABI version this runtime was built with.
uint32_t etkit_runtime_backend_abi_version(void);
}
