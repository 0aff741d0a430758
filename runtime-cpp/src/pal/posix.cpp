// The default PAL for hosts with a C++ standard library and stderr (ETKIT_PAL_DEFAULT=posix). Every
// function is a weak symbol: an application's own et_pal_*() definition replaces it at link time.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "etkit/runtime/platform.h"

#define ETKIT_PAL_WEAK __attribute__((weak))

extern "C" {

ETKIT_PAL_WEAK void et_pal_init(void) {}

ETKIT_PAL_WEAK void et_pal_abort(void) { std::abort(); }

ETKIT_PAL_WEAK et_timestamp_t et_pal_current_ticks(void) {
  return static_cast<et_timestamp_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

ETKIT_PAL_WEAK et_tick_ratio_t et_pal_ticks_to_ns_multiplier(void) { return {1, 1}; }

/// One line on stderr: "[etkit I 12.345678 method.cpp:42] message", the time in seconds of the steady clock.
ETKIT_PAL_WEAK void et_pal_emit_log_message(et_timestamp_t timestamp, et_pal_log_level_t level,
                                            const char* filename, const char* function, size_t line,
                                            const char* message, size_t length) {
  const char* base = filename;
  for (const char* p = filename; *p != '\0'; ++p) {
    if (*p == '/') base = p + 1;
  }
  std::fprintf(stderr, "[etkit %c %llu.%06llu %s:%zu] %.*s\n", static_cast<char>(level),
               static_cast<unsigned long long>(timestamp / 1000000000ull),
               static_cast<unsigned long long>(timestamp % 1000000000ull / 1000ull), base, line,
               static_cast<int>(length), message);
}

ETKIT_PAL_WEAK void* et_pal_allocate(size_t size) { return std::malloc(size); }

ETKIT_PAL_WEAK void et_pal_free(void* ptr) { std::free(ptr); }

}  // extern "C"
