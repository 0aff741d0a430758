// Registration entry points of the QNN delegate (docs/design/contracts.md section 3).
//
// A native runner that links libetkit_qnn_delegate.a calls etkit_qnn_register_backends() once before
// loading programs; the Python extension etkit_qnn._delegate calls it when imported. Nothing registers
// by itself.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/// Registers the backend "QnnBackend" with the etkit runtime (ETKIT_BACKEND_ABI_VERSION). Returns 0 on
/// success (also when already registered), else the etkit::runtime::Error code; the reason is in
/// etkit_backend_registration_error().
int etkit_qnn_register_backends(void);

/// Where the delegate finds its vendor libraries, loaded with dlopen when the first QNN method is loaded:
/// ONNX Runtime's shared library (libonnxruntime.so.1.x of the onnxruntime wheel), the QNN execution
/// provider (libonnxruntime_providers_qnn.so of onnxruntime-qnn) and, optionally, the QNN HTP backend
/// library to use instead of the one next to the EP ("" or null: the EP's own). Unset arguments fall back
/// to the environment variables ETKIT_QNN_ONNXRUNTIME_LIBRARY, ETKIT_QNN_EP_LIBRARY and
/// ETKIT_QNN_HTP_BACKEND_LIBRARY. Takes effect only before the libraries were loaded; returns 0, or 1 when
/// they already were (the call is then ignored).
int etkit_qnn_set_library_paths(const char* onnxruntime_library, const char* qnn_ep_library,
                                const char* htp_backend_library);

#ifdef __cplusplus
}
#endif
