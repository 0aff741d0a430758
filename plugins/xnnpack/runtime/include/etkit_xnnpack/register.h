// Registration entry point of the XNNPACK delegate (docs/design/contracts.md section 3).
//
// A native runner that links libetkit_xnnpack_delegate.a calls etkit_xnnpack_register_backends()
// once before loading programs (its generated list of register calls does this); the Python
// extension module etkit_xnnpack._delegate calls it when imported. Nothing registers by itself.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/// Registers the backend "XnnpackBackend" with the etkit runtime, passing ETKIT_BACKEND_ABI_VERSION.
/// Returns 0 on success (also when it is already registered), otherwise the non-zero
/// etkit::runtime::Error code from etkit_register_backend(); the reason is then in
/// etkit_backend_registration_error().
int etkit_xnnpack_register_backends(void);

#ifdef __cplusplus
}
#endif
