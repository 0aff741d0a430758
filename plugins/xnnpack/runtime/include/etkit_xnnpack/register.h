// Registration entry point of the XNNPACK delegate (docs/design/contracts.md section 3).
//
// A native runner that links libetkit_xnnpack_delegate.a calls etkit_xnnpack_register_backends()
// once before loading programs (its generated list of register calls does this); the Python
// extension module etkit_xnnpack._delegate calls it when imported. Nothing registers by itself.
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The process-wide cache of packed XNNPACK weights, shared by all XnnpackBackend delegates
/// (runtime/src/weights_cache.h). Counts since the process started, except entries/bytes (alive now).
typedef struct etkit_xnnpack_weights_cache_stats {
  size_t entries;       /* packed weight blocks alive */
  size_t bytes;         /* their total size, bytes */
  size_t packs;         /* blocks packed by XNNPACK and kept */
  size_t reuses;        /* look-ups answered without packing */
  size_t deduplicated;  /* packed blocks dropped as identical to a cached one */
  size_t huge_page_bytes; /* of bytes, those in memory advised for transparent huge pages */
} etkit_xnnpack_weights_cache_stats;

/// Fills `*out` (must not be null).
void etkit_xnnpack_get_weights_cache_stats(etkit_xnnpack_weights_cache_stats* out);

/// Registers the backend "XnnpackBackend" with the etkit runtime, passing ETKIT_BACKEND_ABI_VERSION.
/// Returns 0 on success (also when it is already registered), otherwise the non-zero
/// etkit::runtime::Error code from etkit_register_backend(); the reason is then in
/// etkit_backend_registration_error().
int etkit_xnnpack_register_backends(void);

#ifdef __cplusplus
}
#endif
