// Registration entry point of the Ethos-U delegate (docs/design/contracts.md section 3), and the
// firmware hooks it reads.
//
// A native runner for an Ethos-U target (Corstone FVP or device) that links etkit_ethosu::delegate and
// the Arm Ethos-U core driver calls etkit_ethosu_register_backends() once before loading programs (its
// generated list of register calls does this). Nothing registers by itself. The firmware initialises
// the NPU itself (ethosu_init() from the core driver) before the first program runs.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Registers the backend "EthosUBackend" with the etkit runtime, passing ETKIT_BACKEND_ABI_VERSION.
/// Returns 0 on success (also when it is already registered), otherwise the non-zero
/// etkit::runtime::Error code from etkit_register_backend(); the reason is then in
/// etkit_backend_registration_error().
int etkit_ethosu_register_backends(void);

/// Fast scratch (Vela region 2, base address 2), for command streams compiled with a memory mode that
/// uses it (Dedicated_Sram). The payload does not say how large it must be: the firmware provides it by
/// defining both symbols (the delegate's weak definitions are null and 0, fine for Shared_Sram and
/// Sram_Only, the defaults of ethos-u55 and ethos-u85).
extern uint8_t* etkit_ethosu_fast_scratch;
extern size_t etkit_ethosu_fast_scratch_size;

#ifdef __cplusplus
}
#endif
