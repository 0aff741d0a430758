// The platform abstraction layer (PAL): the few things the runtime needs from the system it runs on, the
// time, a place for log messages, a way to stop, and heap memory (et_pal_allocate/et_pal_free: ExecuTorch's
// functions, for ports; the runtime's own load-time allocations do not go through them yet).
//
// The functions and types are ExecuTorch's (runtime/platform/platform.h; seed pages "Runtime Platform
// Abstraction Layer (PAL)" and "Runtime Integration"), so a port written for one runtime builds against the
// other. A port replaces them either way ExecuTorch allows:
//   * at link time: define any et_pal_*() function in the application; the runtime's own definitions are
//     weak symbols, so a strong one wins (put the application's objects before the runtime library);
//   * at run time: fill an etkit::runtime::PalImpl with the functions to replace (null fields keep the
//     default) and pass it to etkit::runtime::register_pal(), e.g. from a global constructor.
//
// The defaults (ETKIT_PAL_DEFAULT at configure time): `posix` (std::chrono::steady_clock in nanoseconds,
// log lines on stderr, std::abort, malloc/free) or `minimal` (no system calls at all: no-op log, zero time,
// an endless loop for abort, no heap), the starting point of a port to a target without an OS.
#pragma once

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define ETKIT_PAL_NORETURN __attribute__((noreturn))
#else
#define ETKIT_PAL_NORETURN
#endif

#ifdef __cplusplus
extern "C" {
#endif

/// Ticks of et_pal_current_ticks(); their length is et_pal_ticks_to_ns_multiplier().
typedef uint64_t et_timestamp_t;

/// Nanoseconds per tick, as a fraction: ns = ticks * numerator / denominator.
typedef struct {
  uint64_t numerator;
  uint64_t denominator;
} et_tick_ratio_t;

/// Severity of a log message; the values are ExecuTorch's (the letter printed at the start of a line).
typedef enum {
  kDebug = 'D',
  kInfo = 'I',
  kError = 'E',
  kFatal = 'F',
  kUnknown = '?',
} et_pal_log_level_t;

/// Called once before any other PAL function (etkit::runtime::runtime_init(), or the runtime's first use
/// of the PAL). Sets up whatever the others need (a UART, a timer).
void et_pal_init(void);

/// Stops the program after an unrecoverable error (an EValue read as the wrong type, a Result's value
/// read when it holds an error): a bug in the caller, never a consequence of bad input.
ETKIT_PAL_NORETURN void et_pal_abort(void);

/// A monotonic tick count (the posix default: nanoseconds of std::chrono::steady_clock).
et_timestamp_t et_pal_current_ticks(void);

/// The length of a tick in nanoseconds (posix default: 1/1).
et_tick_ratio_t et_pal_ticks_to_ns_multiplier(void);

/// Writes one log message. `message` is `length` bytes, NUL-terminated, without a trailing newline;
/// `filename` and `function` may be empty. Called from any thread that logs.
void et_pal_emit_log_message(et_timestamp_t timestamp, et_pal_log_level_t level, const char* filename,
                             const char* function, size_t line, const char* message, size_t length);

/// Heap memory for the runtime's convenience paths (posix default: malloc/free); null when there is none.
void* et_pal_allocate(size_t size);
void et_pal_free(void* ptr);

#ifdef __cplusplus
}  // extern "C"

namespace etkit::runtime {

using pal_init_method = void (*)();
using pal_abort_method = void (*)();
using pal_current_ticks_method = et_timestamp_t (*)();
using pal_ticks_to_ns_multiplier_method = et_tick_ratio_t (*)();
using pal_emit_log_message_method = void (*)(et_timestamp_t timestamp, et_pal_log_level_t level,
                                             const char* filename, const char* function, size_t line,
                                             const char* message, size_t length);
using pal_allocate_method = void* (*)(size_t size);
using pal_free_method = void (*)(void* ptr);

/// PAL functions registered at run time (ExecuTorch's PalImpl). A null field keeps the current one
/// (the et_pal_*() function, or what an earlier registration set).
struct PalImpl {
  pal_init_method init = nullptr;
  pal_abort_method abort = nullptr;
  pal_current_ticks_method current_ticks = nullptr;
  pal_ticks_to_ns_multiplier_method ticks_to_ns_multiplier = nullptr;
  pal_emit_log_message_method emit_log_message = nullptr;
  pal_allocate_method allocate = nullptr;
  pal_free_method free = nullptr;
  /// Where the registration was made (for messages); may be null.
  const char* source_filename = nullptr;

  /// A PalImpl that replaces only the log sink.
  static PalImpl create(pal_emit_log_message_method emit_log_message, const char* source_filename) {
    PalImpl impl;
    impl.emit_log_message = emit_log_message;
    impl.source_filename = source_filename;
    return impl;
  }
};

/// Replaces the non-null fields of `impl` for the whole process; true. Safe to call from a global
/// constructor. Registrations are not synchronised with concurrent logging: make them at start-up.
bool register_pal(PalImpl impl);

/// The functions in use (the et_pal_*() defaults where nothing was registered).
const PalImpl* get_pal_impl();

/// Calls et_pal_init() (or the registered init) once; later calls do nothing. The runtime calls it on
/// first use of the PAL, so calling it is only needed to initialise the platform at a chosen moment.
void runtime_init();

/// The PAL through whatever is registered (runtime_init() first).
et_timestamp_t pal_current_ticks();
/// pal_current_ticks() in nanoseconds.
int64_t pal_current_time_ns();
ETKIT_PAL_NORETURN void pal_abort();
void pal_emit_log_message(et_timestamp_t timestamp, et_pal_log_level_t level, const char* filename,
                          const char* function, size_t line, const char* message, size_t length);

}  // namespace etkit::runtime
#endif  // __cplusplus
