/* Host stand-in for the Ethos-U core driver's ethosu_driver.h: only the three functions the delegate
 * calls, declared as in the driver's public API, so that tests/test_ethosu_payload_reader_cpp.py can build
 * src/ethosu_backend.cpp on a host and run it against a simulated NPU (ethosu_backend_main.cpp defines
 * them). Real builds use the driver's own header (CMake option ETKIT_ETHOSU_CORE_DRIVER_DIR). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ethosu_driver;

/* A free driver instance, or NULL when there is none. */
struct ethosu_driver* ethosu_reserve_driver(void);

/* Gives a reserved instance back. */
void ethosu_release_driver(struct ethosu_driver* drv);

/* Runs the command stream (custom data starting with "COP1") with the given base addresses and sizes;
 * 0 on success, negative on failure. */
int ethosu_invoke_v3(struct ethosu_driver* drv, const void* custom_data_ptr, const int custom_data_size,
                     uint64_t* const base_addr, const size_t* base_addr_size, const int num_base_addr,
                     void* user_arg);

#ifdef __cplusplus
}
#endif
