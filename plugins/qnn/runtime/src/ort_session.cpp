// ONNX Runtime loader for the QNN delegate (docs/design/qnn-route.md section 4 for the call sequence).
#include "ort_session.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace etkit_qnn {
namespace {

constexpr const char kEpName[] = "QNNExecutionProvider";

struct State {
  std::mutex mutex;
  bool attempted = false;
  std::string onnxruntime_library;
  std::string qnn_ep_library;
  std::string htp_backend_library;
  std::string error;
  OrtRuntime runtime;
};

State& state() {
  static State* s = new State();  // never destroyed: ONNX Runtime's environment outlives static destructors
  return *s;
}

std::string env_or(const std::string& value, const char* variable) {
  if (!value.empty()) return value;
  const char* from_env = std::getenv(variable);
  return from_env != nullptr ? std::string(from_env) : std::string();
}

bool load(State& s) {
  const std::string ort_path = env_or(s.onnxruntime_library, "ETKIT_QNN_ONNXRUNTIME_LIBRARY");
  const std::string ep_path = env_or(s.qnn_ep_library, "ETKIT_QNN_EP_LIBRARY");
  s.htp_backend_library = env_or(s.htp_backend_library, "ETKIT_QNN_HTP_BACKEND_LIBRARY");
  if (ort_path.empty() || ep_path.empty()) {
    s.error = "the ONNX Runtime and QNN execution provider libraries were not found (install etkit-qnn's runtime "
              "extra: onnxruntime-qnn; native runners set ETKIT_QNN_ONNXRUNTIME_LIBRARY and ETKIT_QNN_EP_LIBRARY)";
    return false;
  }
  void* library = dlopen(ort_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    s.error = "cannot load ONNX Runtime (" + ort_path + "): " + (why != nullptr ? why : "unknown error");
    return false;
  }
  using GetApiBase = const OrtApiBase* (*)();
  auto get_base = reinterpret_cast<GetApiBase>(dlsym(library, "OrtGetApiBase"));
  const OrtApiBase* base = get_base != nullptr ? get_base() : nullptr;
  const OrtApi* api = base != nullptr ? base->GetApi(ORT_API_VERSION) : nullptr;
  if (api == nullptr) {
    s.error = ort_path + " does not provide ONNX Runtime C API version " + std::to_string(ORT_API_VERSION) +
              " (install onnxruntime >= 1.22)";
    return false;
  }
  OrtRuntime& rt = s.runtime;
  rt.api = api;
  const char* level = std::getenv("ETKIT_QNN_LOG_LEVEL");  // 0 verbose .. 4 fatal; default 3 (errors)
  const int severity = level != nullptr ? std::atoi(level) : 3;
  OrtStatus* status = api->CreateEnv(static_cast<OrtLoggingLevel>(severity < 0 || severity > 4 ? 3 : severity),
                                     "etkit-qnn", &rt.env);
  if (status != nullptr) {
    s.error = "ONNX Runtime CreateEnv failed: " + take_status_message(rt, status);
    return false;
  }
  status = api->RegisterExecutionProviderLibrary(rt.env, kEpName, ep_path.c_str());
  if (status != nullptr) {
    const std::string message = take_status_message(rt, status);
    if (message.find("already registered") == std::string::npos) {  // the same env registered it before
      s.error = "registering the QNN execution provider (" + ep_path + ") failed: " + message;
      return false;
    }
  }
  const OrtEpDevice* const* devices = nullptr;
  size_t count = 0;
  status = api->GetEpDevices(rt.env, &devices, &count);
  if (status != nullptr) {
    s.error = "ONNX Runtime GetEpDevices failed: " + take_status_message(rt, status);
    return false;
  }
  for (size_t i = 0; i < count; ++i) {
    const char* name = api->EpDevice_EpName(devices[i]);
    if (name != nullptr && std::strcmp(name, kEpName) == 0) {
      rt.qnn_device = devices[i];
      break;
    }
  }
  if (rt.qnn_device == nullptr) {
    s.error = "the QNN execution provider (" + ep_path + ") offers no device on this machine";
    return false;
  }
  status = api->CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &rt.cpu_memory);
  if (status != nullptr) {
    s.error = "ONNX Runtime CreateCpuMemoryInfo failed: " + take_status_message(rt, status);
    return false;
  }
  return true;
}

}  // namespace

std::string take_status_message(const OrtRuntime& rt, OrtStatus* status) {
  if (status == nullptr) return std::string();
  const char* message = rt.api->GetErrorMessage(status);
  std::string text = message != nullptr ? message : "unknown ONNX Runtime error";
  rt.api->ReleaseStatus(status);
  return text;
}

const OrtRuntime* get_ort_runtime(std::string* error) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.attempted) {
    s.attempted = true;
    if (!load(s) && s.error.empty()) s.error = "loading ONNX Runtime failed";
  }
  if (!s.error.empty()) {
    if (error != nullptr) *error = s.error;
    return nullptr;
  }
  return &s.runtime;
}

bool ort_runtime_attempted() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.attempted;
}

bool set_ort_library_paths(const char* onnxruntime_library, const char* qnn_ep_library,
                           const char* htp_backend_library) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.attempted) return false;
  s.onnxruntime_library = onnxruntime_library != nullptr ? onnxruntime_library : "";
  s.qnn_ep_library = qnn_ep_library != nullptr ? qnn_ep_library : "";
  s.htp_backend_library = htp_backend_library != nullptr ? htp_backend_library : "";
  return true;
}

OrtSession* create_qnn_session(const OrtRuntime& rt, const void* model, size_t model_size, const char* profile_path,
                               std::string* error) {
  const OrtApi* api = rt.api;
  OrtSessionOptions* options = nullptr;
  OrtSession* session = nullptr;
  OrtStatus* status = api->CreateSessionOptions(&options);
  const std::string& backend = state().htp_backend_library;
  // backend_type and backend_path are exclusive: with an HTP library given, pass only its path.
  std::vector<const char*> keys, values;
  keys.push_back(backend.empty() ? "backend_type" : "backend_path");
  values.push_back(backend.empty() ? "htp" : backend.c_str());
  if (profile_path != nullptr) {
    keys.insert(keys.end(), {"profiling_level", "profiling_file_path"});
    values.insert(values.end(), {"detailed", profile_path});
  }
  if (status == nullptr) status = api->AddSessionConfigEntry(options, "session.disable_cpu_ep_fallback", "1");
  if (status == nullptr) status = api->SetIntraOpNumThreads(options, 1);
  if (status == nullptr) {
    status = api->SessionOptionsAppendExecutionProvider_V2(options, rt.env, &rt.qnn_device, 1, keys.data(),
                                                           values.data(), keys.size());
  }
  if (status == nullptr) status = api->CreateSessionFromArray(rt.env, model, model_size, options, &session);
  if (status != nullptr) {
    if (error != nullptr) *error = take_status_message(rt, status);
    session = nullptr;
  }
  if (options != nullptr) api->ReleaseSessionOptions(options);
  return session;
}

}  // namespace etkit_qnn
