// ONNX Runtime, loaded at run time, as the QNN delegate uses it: one process-wide environment with the QNN
// execution provider registered (plugin-EP API, ONNX Runtime >= 1.22), and sessions over EPContext models.
// Only the public C API (onnxruntime_c_api.h) is used; the library is dlopen'ed, never linked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <onnxruntime_c_api.h>

namespace etkit_qnn {

/// The loaded runtime: API table, environment and the QNN EP device. Lives until the process ends.
struct OrtRuntime {
  const OrtApi* api = nullptr;
  OrtEnv* env = nullptr;
  const OrtEpDevice* qnn_device = nullptr;
  OrtMemoryInfo* cpu_memory = nullptr;
};

/// Loads the libraries (first call) and returns the runtime, or null with `*error` set to a sentence saying
/// what is missing and what to do. Thread-safe.
const OrtRuntime* get_ort_runtime(std::string* error);

/// True once get_ort_runtime() succeeded or failed (the library paths are then fixed).
bool ort_runtime_attempted();

/// Sets the library paths used by the first get_ort_runtime(); false if it already ran.
bool set_ort_library_paths(const char* onnxruntime_library, const char* qnn_ep_library,
                           const char* htp_backend_library);

/// Creates a session over an ONNX model in memory with the QNN EP (backend htp, CPU fallback disabled).
/// With `profile_path`, QNN's detailed profiler appends each run's per-op cycles there (qnn_profile.h).
/// Returns null with `*error` set on failure.
OrtSession* create_qnn_session(const OrtRuntime& rt, const void* model, size_t model_size, const char* profile_path,
                               std::string* error);

/// The message of `status` (and releases it); "" for null.
std::string take_status_message(const OrtRuntime& rt, OrtStatus* status);

}  // namespace etkit_qnn
