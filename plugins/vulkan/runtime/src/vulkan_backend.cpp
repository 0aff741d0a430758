// VulkanBackend: the etkit BackendInterface over Graph, and its registration.
#include <cstdint>
#include <cstdio>
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

/// Profiling: the host staging of inputs and outputs, and every dispatch timed by the device's timestamp
/// queries, placed on the host clock by anchoring the first timestamp at the submission time.
void log_events(const Graph& g, etkit::runtime::EventTracer& tracer) {
  const int64_t t0 = static_cast<int64_t>(g.last_start_ns);
  const int64_t submit = t0 + static_cast<int64_t>(g.last_host_in_ns);
  tracer.log_delegate_event("vulkan: stage inputs (host)", t0, submit);
  const auto& timings = g.timings();
  const int64_t first = timings.empty() ? 0 : static_cast<int64_t>(timings.front().start_ns);
  for (const DispatchTiming& t : timings) {
    const int64_t start = submit + static_cast<int64_t>(t.start_ns) - first;
    const int64_t end = submit + static_cast<int64_t>(t.end_ns) - first;
    // A node's dispatch carries the node's debug handle as its integer id (preprocess's debug_handle_map
    // maps it to the Edge node) and the shader label beside it.
    if (t.node_id >= 0) {
      tracer.log_delegate_event(t.node_id, t.label, start, end);
    } else {
      tracer.log_delegate_event(t.label, start, end);
    }
  }
  const int64_t done = submit + static_cast<int64_t>(g.last_device_ns);
  tracer.log_delegate_event("vulkan: read outputs (host)", done, done + static_cast<int64_t>(g.last_host_out_ns));
}

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
    if (reinterpret_cast<uintptr_t>(data) % 16 != 0 && processed->size() != 0) {
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
    if (etkit::runtime::EventTracer* tracer = ctx.event_tracer()) log_events(*g, *tracer);
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

extern "C" long etkit_vulkan_live_pipelines(void) {
  etkit_vulkan::Context* c = etkit_vulkan::Context::get(nullptr);
  return c == nullptr ? -1 : static_cast<long>(c->live_pipelines());
}
