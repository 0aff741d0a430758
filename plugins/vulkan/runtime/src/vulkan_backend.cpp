// VulkanBackend: the etkit BackendInterface over Graph, and its registration.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "context.h"
#include "etkit/runtime/backend_interface.h"
#include "etkit_vulkan/register.h"
#include "graph.h"
#include "payload.h"

namespace etkit_vulkan {

using etkit::runtime::BackendExecutionContext;
using etkit::runtime::BackendInitContext;
using etkit::runtime::CompileSpec;
using etkit::runtime::DelegateHandle;
using etkit::runtime::Error;
using etkit::runtime::EValue;
using etkit::runtime::FreeableBuffer;
using etkit::runtime::Result;
using etkit::runtime::set_error;
using etkit::runtime::Span;

/// Backend id stored in the .pte (BackendDelegate.id), as ExecuTorch names it.
constexpr const char kBackendId[] = "VulkanBackend";

class VulkanBackend final : public etkit::runtime::BackendInterface {
 public:
  bool is_available() const override {
    std::string reason;
    return Context::get(&reason) != nullptr;
  }

  Result<DelegateHandle*> init(BackendInitContext& ctx, FreeableBuffer* processed,
                               Span<const CompileSpec> compile_specs) const override {
    (void)compile_specs;  // everything the delegate needs is in the payload
    std::string why;
    Context* vk = Context::get(&why);
    if (vk == nullptr) return set_error(Error::NotSupported, "VulkanBackend: %s", why.c_str());
    // flatbuffers need aligned data: payloads inside a .pte segment are; copy otherwise
    std::vector<uint64_t> aligned;
    const void* data = processed->data();
    if (reinterpret_cast<uintptr_t>(data) % 16 != 0) {
      aligned.resize((processed->size() + 7) / 8);
      std::memcpy(aligned.data(), data, processed->size());
      data = aligned.data();
    }
    Payload payload;
    if (!parse_payload(data, processed->size(), &payload, &why)) {
      return set_error(Error::DelegateInvalidCompatibility, "VulkanBackend: %s", why.c_str());
    }
    auto graph = std::make_unique<Graph>(*vk);
    if (!graph->build(payload, ctx.get_named_data_map(), &why)) {
      return set_error(Error::DelegateInvalidCompatibility, "VulkanBackend: %s", why.c_str());
    }
    processed->Free();  // the weights are on the device now (seed: backends may free precompiled data)
    return static_cast<DelegateHandle*>(graph.release());
  }

  Error execute(BackendExecutionContext& ctx, DelegateHandle* handle, Span<EValue*> args) const override {
    (void)ctx;
    if (handle == nullptr) return set_error(Error::DelegateInvalidHandle, "VulkanBackend: null handle");
    std::string why;
    Graph* g = static_cast<Graph*>(handle);
    if (!g->execute(args.data(), args.size(), &why)) {
      return set_error(Error::InvalidArgument, "VulkanBackend: %s", why.c_str());
    }
    if (std::getenv("ETKIT_VULKAN_DEBUG_TIMING") != nullptr) {
      for (const DispatchTiming& t : g->timings()) {
        std::fprintf(stderr, "%10.3f ms  %s\n", (t.end_ns - t.start_ns) / 1e6, t.label);
      }
      std::fprintf(stderr, "host in %.3f ms, device %.3f ms, host out %.3f ms\n", g->last_host_in_ns / 1e6,
                   g->last_device_ns / 1e6, g->last_host_out_ns / 1e6);
    }
    return Error::Ok;
  }

  void destroy(DelegateHandle* handle) const override { delete static_cast<Graph*>(handle); }
};

}  // namespace etkit_vulkan

extern "C" int etkit_vulkan_register_backends(void) {
  static etkit_vulkan::VulkanBackend backend;
  return etkit_register_backend(ETKIT_BACKEND_ABI_VERSION, etkit_vulkan::kBackendId, &backend);
}

extern "C" int etkit_vulkan_probe(char* reason, unsigned long reason_size) {
  std::string why, device;
  const bool ok = etkit_vulkan::Context::probe(&why, &device);
  if (reason != nullptr && reason_size > 0) std::snprintf(reason, reason_size, "%s", ok ? device.c_str() : why.c_str());
  return ok ? 1 : 0;
}
