// The PAL as the runtime uses it (platform.h): the et_pal_*() functions, or what register_pal() put in
// their place; and logging (log.h) on top of it.
#include "etkit/runtime/platform.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

#include "etkit/runtime/log.h"

namespace etkit::runtime {
namespace {

// Constant-initialised (function addresses only), so a registration from another translation unit's
// global constructor finds it ready whatever the order of initialisation.
PalImpl g_pal = {&et_pal_init,       &et_pal_abort,    &et_pal_current_ticks, &et_pal_ticks_to_ns_multiplier,
                 &et_pal_emit_log_message, &et_pal_allocate, &et_pal_free,          nullptr};
std::atomic<bool> g_initialized{false};
std::atomic<int> g_log_level{static_cast<int>(LogLevel::Info)};

}  // namespace

bool register_pal(PalImpl impl) {
  if (impl.init != nullptr) g_pal.init = impl.init;
  if (impl.abort != nullptr) g_pal.abort = impl.abort;
  if (impl.current_ticks != nullptr) g_pal.current_ticks = impl.current_ticks;
  if (impl.ticks_to_ns_multiplier != nullptr) g_pal.ticks_to_ns_multiplier = impl.ticks_to_ns_multiplier;
  if (impl.emit_log_message != nullptr) g_pal.emit_log_message = impl.emit_log_message;
  if (impl.allocate != nullptr) g_pal.allocate = impl.allocate;
  if (impl.free != nullptr) g_pal.free = impl.free;
  if (impl.source_filename != nullptr) g_pal.source_filename = impl.source_filename;
  return true;
}

const PalImpl* get_pal_impl() { return &g_pal; }

void runtime_init() {
  // Without threads on a bare-metal target this is a plain flag; with threads, a second caller racing the
  // first may go on before init() returns (the posix init does nothing).
  if (!g_initialized.exchange(true)) g_pal.init();
}

et_timestamp_t pal_current_ticks() {
  runtime_init();
  return g_pal.current_ticks();
}

int64_t pal_current_time_ns() {
  const et_timestamp_t ticks = pal_current_ticks();
  const et_tick_ratio_t r = g_pal.ticks_to_ns_multiplier();
  if (r.denominator == 0) return 0;
  if (r.numerator == r.denominator) return static_cast<int64_t>(ticks);
  // ticks * n / d without a 128-bit product (not every target has one).
  return static_cast<int64_t>((ticks / r.denominator) * r.numerator + (ticks % r.denominator) * r.numerator / r.denominator);
}

void pal_abort() {
  runtime_init();
  g_pal.abort();
  // An abort that returns (a misbehaving port) must not let the caller go on.
  for (;;) {
  }
}

void pal_emit_log_message(et_timestamp_t timestamp, et_pal_log_level_t level, const char* filename,
                          const char* function, size_t line, const char* message, size_t length) {
  runtime_init();
  g_pal.emit_log_message(timestamp, level, filename != nullptr ? filename : "", function != nullptr ? function : "",
                         line, message, length);
}

void set_log_level(LogLevel level) { g_log_level.store(static_cast<int>(level), std::memory_order_relaxed); }

LogLevel log_level() { return static_cast<LogLevel>(g_log_level.load(std::memory_order_relaxed)); }

bool log_enabled(LogLevel level) {
  return ETKIT_ENABLE_LOGGING && static_cast<int>(level) >= ETKIT_MIN_LOG_LEVEL &&
         static_cast<int>(level) >= g_log_level.load(std::memory_order_relaxed);
}

et_pal_log_level_t pal_log_level(LogLevel level) {
  switch (level) {
    case LogLevel::Debug: return kDebug;
    case LogLevel::Info: return kInfo;
    case LogLevel::Error: return kError;
    case LogLevel::Fatal: return kFatal;
  }
  return kUnknown;
}

namespace internal {

void vlogf(LogLevel level, const char* filename, const char* function, size_t line, const char* format, ...) {
  if (!log_enabled(level)) return;
  char message[kMaxLogMessage];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  if (n < 0) return;
  const size_t length = static_cast<size_t>(n) < sizeof(message) ? static_cast<size_t>(n) : sizeof(message) - 1;
  pal_emit_log_message(pal_current_ticks(), pal_log_level(level), filename, function, line, message, length);
}

}  // namespace internal
}  // namespace etkit::runtime
