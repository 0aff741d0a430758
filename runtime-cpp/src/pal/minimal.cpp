// The PAL for a target without an OS (ETKIT_PAL_DEFAULT=minimal): no system call, no C library beyond
// what the compiler needs. Logging goes nowhere, time stands still, abort spins and there is no heap: a
// port replaces what it has (a UART for the log, a cycle counter for time) with its own et_pal_*()
// definitions, which win over these weak ones at link time.
#include "etkit/runtime/platform.h"

#define ETKIT_PAL_WEAK __attribute__((weak))

extern "C" {

ETKIT_PAL_WEAK void et_pal_init(void) {}

ETKIT_PAL_WEAK void et_pal_abort(void) {
  for (;;) {
  }
}

ETKIT_PAL_WEAK et_timestamp_t et_pal_current_ticks(void) { return 0; }

ETKIT_PAL_WEAK et_tick_ratio_t et_pal_ticks_to_ns_multiplier(void) { return {1, 1}; }

ETKIT_PAL_WEAK void et_pal_emit_log_message(et_timestamp_t, et_pal_log_level_t, const char*, const char*, size_t,
                                            const char*, size_t) {}

ETKIT_PAL_WEAK void* et_pal_allocate(size_t) { return nullptr; }

ETKIT_PAL_WEAK void et_pal_free(void*) {}

}  // extern "C"
