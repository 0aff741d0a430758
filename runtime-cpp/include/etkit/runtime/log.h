// Logging through the platform layer (platform.h): ETKIT_LOG(Level, "printf format", ...).
//
// Levels are ExecuTorch's (seed page "Runtime Integration", Logging): Debug, Info, Error, Fatal. Two filters:
//   * at build time, ETKIT_ENABLE_LOGGING (0 removes every log statement and its strings) and
//     ETKIT_MIN_LOG_LEVEL (statements below it are compiled out): the CMake options ETKIT_ENABLE_LOGGING
//     and ETKIT_LOG_LEVEL (debug, info, error, fatal; default debug, so that set_log_level() can reach it);
//   * at run time, set_log_level() (default Info): messages below it are dropped before formatting.
// A message is formatted into a fixed stack buffer (kMaxLogMessage bytes; longer ones are truncated), so
// logging never allocates, and goes to et_pal_emit_log_message() or the registered PAL's log sink.
//
// What the runtime logs: every failure recorded with set_error() at Debug ("<ErrorName>: <message>": the
// message also reaches the caller through the returned Error and last_error_message(), so it is not repeated
// at Error level), and Fatal before a PAL abort.
#pragma once

#include <stddef.h>

#include "etkit/runtime/platform.h"

#ifndef ETKIT_ENABLE_LOGGING
#define ETKIT_ENABLE_LOGGING 1
#endif
// 0 Debug, 1 Info, 2 Error, 3 Fatal.
#ifndef ETKIT_MIN_LOG_LEVEL
#define ETKIT_MIN_LOG_LEVEL 0
#endif

namespace etkit::runtime {

enum class LogLevel : int { Debug = 0, Info = 1, Error = 2, Fatal = 3 };

/// Longest message passed to the log sink, in bytes, with its terminating NUL.
constexpr size_t kMaxLogMessage = 512;

/// Messages below `level` are dropped (process-wide; default Info).
void set_log_level(LogLevel level);
LogLevel log_level();
/// True when a message at `level` would be emitted.
bool log_enabled(LogLevel level);
/// The PAL level of `level` (kDebug ... kFatal).
et_pal_log_level_t pal_log_level(LogLevel level);

namespace internal {
/// What ETKIT_LOG expands to: formats and emits when `level` passes set_log_level().
void vlogf(LogLevel level, const char* filename, const char* function, size_t line, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
}  // namespace internal

}  // namespace etkit::runtime

#define ETKIT_LOG_LEVEL_VALUE_Debug 0
#define ETKIT_LOG_LEVEL_VALUE_Info 1
#define ETKIT_LOG_LEVEL_VALUE_Error 2
#define ETKIT_LOG_LEVEL_VALUE_Fatal 3

#if ETKIT_ENABLE_LOGGING
/// ETKIT_LOG(Info, "loaded %s", name): `Level` is Debug, Info, Error or Fatal.
#define ETKIT_LOG(Level, ...)                                                                         \
  do {                                                                                                \
    if (ETKIT_LOG_LEVEL_VALUE_##Level >= ETKIT_MIN_LOG_LEVEL) {                                       \
      ::etkit::runtime::internal::vlogf(::etkit::runtime::LogLevel::Level, __FILE__, __func__, __LINE__, \
                                        __VA_ARGS__);                                                 \
    }                                                                                                 \
  } while (0)
#else
#define ETKIT_LOG(Level, ...) \
  do {                        \
  } while (0)
#endif
