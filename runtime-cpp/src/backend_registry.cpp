// The one backend registry of a process (lives in libetkit_runtime.so, or in the static runtime of a
// native runner). Fixed capacity: registration never allocates.
#include <cstdio>
#include <cstring>

#include "etkit/runtime/backend_interface.h"

namespace etkit::runtime {
namespace {

constexpr size_t kMaxBackends = 32;
constexpr size_t kMaxBackendIdLength = 63;

struct Entry {
  char id[kMaxBackendIdLength + 1];
  BackendInterface* backend;
};

Entry g_backends[kMaxBackends];
size_t g_num_backends = 0;
char g_registration_error[512] = {0};

int registration_failure(Error error, const char* fmt, const char* a, unsigned b, unsigned c) {
  std::snprintf(g_registration_error, sizeof(g_registration_error), fmt, a, b, c);
  set_error(error, "%s", g_registration_error);
  return static_cast<int>(error);
}

}  // namespace

BackendInterface* get_backend(const char* backend_id) {
  if (backend_id == nullptr) return nullptr;
  for (size_t i = 0; i < g_num_backends; ++i) {
    if (std::strcmp(g_backends[i].id, backend_id) == 0) return g_backends[i].backend;
  }
  return nullptr;
}

size_t registered_backend_count() { return g_num_backends; }

const char* registered_backend_name(size_t index) {
  return index < g_num_backends ? g_backends[index].id : nullptr;
}

Error set_backend_option(const char* backend_id, const char* key, int64_t value) {
  if (backend_id == nullptr || key == nullptr) {
    return set_error(Error::InvalidArgument, "set_backend_option: backend id and key must not be null");
  }
  if (std::strcmp(backend_id, "*") != 0) {
    BackendInterface* b = get_backend(backend_id);
    if (b == nullptr) {
      return set_error(Error::NotFound, "set_backend_option: backend '%s' is not registered", backend_id);
    }
    Error e = b->set_option(key, value);
    if (e == Error::NotSupported) {
      return set_error(e, "set_backend_option: backend '%s' does not support option '%s'", backend_id, key);
    }
    return e;
  }
  bool accepted = false;
  for (size_t i = 0; i < g_num_backends; ++i) {
    Error e = g_backends[i].backend->set_option(key, value);
    if (e == Error::Ok) {
      accepted = true;
    } else if (e != Error::NotSupported) {
      return e;
    }
  }
  if (!accepted) {
    return set_error(Error::NotSupported, "set_backend_option: no registered backend supports option '%s'", key);
  }
  return Error::Ok;
}

}  // namespace etkit::runtime

using etkit::runtime::Error;

extern "C" int etkit_register_backend(uint32_t abi_version, const char* backend_id,
                                      etkit::runtime::BackendInterface* backend) {
  using namespace etkit::runtime;
  if (abi_version != ETKIT_BACKEND_ABI_VERSION) {
    return registration_failure(Error::NotSupported,
                                "backend '%s' was built for backend ABI version %u but this runtime "
                                "has ABI version %u; rebuild the plugin against this etkit",
                                backend_id != nullptr ? backend_id : "(null)", abi_version,
                                ETKIT_BACKEND_ABI_VERSION);
  }
  if (backend_id == nullptr || backend == nullptr) {
    return registration_failure(Error::InvalidArgument, "etkit_register_backend: %s must not be null",
                                backend_id == nullptr ? "backend_id" : "backend", 0, 0);
  }
  size_t len = std::strlen(backend_id);
  if (len == 0 || len > kMaxBackendIdLength) {
    return registration_failure(Error::InvalidArgument,
                                "etkit_register_backend: backend id '%s' must be 1..%u characters", backend_id,
                                (unsigned)kMaxBackendIdLength, 0);
  }
  BackendInterface* existing = get_backend(backend_id);
  if (existing == backend) return 0;
  if (existing != nullptr) {
    return registration_failure(Error::InvalidArgument,
                                "etkit_register_backend: another backend is already registered as '%s'",
                                backend_id, 0, 0);
  }
  if (g_num_backends == kMaxBackends) {
    return registration_failure(Error::OutOfResources,
                                "etkit_register_backend: cannot register '%s': registry full (%u backends)",
                                backend_id, (unsigned)kMaxBackends, 0);
  }
  std::memcpy(g_backends[g_num_backends].id, backend_id, len + 1);
  g_backends[g_num_backends].backend = backend;
  ++g_num_backends;
  g_registration_error[0] = '\0';
  return 0;
}

extern "C" const char* etkit_backend_registration_error(void) { return etkit::runtime::g_registration_error; }

extern "C" uint32_t etkit_runtime_backend_abi_version(void) { return ETKIT_BACKEND_ABI_VERSION; }
