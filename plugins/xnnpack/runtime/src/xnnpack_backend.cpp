// XnnpackBackend: the etkit BackendInterface over XNNPACK's subgraph API, and its registration.
#include <atomic>
#include <cstring>

#include <xnnpack.h>

#include "bounded_allocator.h"
#include "delegate_builder.h"
#include "delegate_executor.h"
#include "delegate_state.h"
#include "etkit/runtime/backend_interface.h"
#include "etkit_xnnpack/register.h"
#include "packed_memory.h"
#include "weights_cache.h"

namespace etkit_xnnpack {

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
constexpr const char kBackendId[] = "XnnpackBackend";

class XnnpackBackend final : public etkit::runtime::BackendInterface {
 public:
  /// XNNPACK needs SSE2/NEON-class hardware; xnn_initialize reports whether this machine has it.
  bool is_available() const override { return initialize_xnnpack() == xnn_status_success; }

  /// Compile specs: "fp16_inference" (one byte, non-zero: run in fp16 where the CPU can); others are
  /// ignored (ExecuTorch's XNNPACK payload carries everything else in the graph).
  Result<DelegateHandle*> init(BackendInitContext& ctx, FreeableBuffer* processed,
                               Span<const CompileSpec> compile_specs) const override {
    RuntimeOptions options;
    options.num_threads = num_threads_.load();
    options.shared_weights_cache = shared_weights_cache_.load();
    options.workspace_key = ctx.get_runtime_allocator();
    for (const CompileSpec& spec : compile_specs) {
      if (spec.key != nullptr && std::strcmp(spec.key, "fp16_inference") == 0) {
        const auto* bytes = static_cast<const unsigned char*>(spec.value.buffer);
        options.fp16_inference = spec.value.nbytes > 0 && bytes != nullptr && bytes[0] != 0;
      }
    }
    Result<DelegateState*> state = build_delegate(processed, ctx.get_named_data_map(), options);
    if (!state.ok()) return state.error();
    return static_cast<DelegateHandle*>(state.get());
  }

  Error execute(BackendExecutionContext& ctx, DelegateHandle* handle, Span<EValue*> args) const override {
    if (handle == nullptr) {
      return set_error(Error::DelegateInvalidHandle, "XnnpackBackend: execute() called with a null handle");
    }
    return execute_delegate(*static_cast<DelegateState*>(handle), args, ctx.event_tracer());
  }

  void destroy(DelegateHandle* handle) const override { delete static_cast<DelegateState*>(handle); }

  /// "num_threads" (>= 1): threads of the pthreadpool given to runtimes created by later init() calls;
  /// 1 (the default) runs on the calling thread. Already-loaded methods keep their pool.
  /// "weights_cache" (0 or 1, default 1): later init() calls pack weights through the process-wide
  /// cache (weights_cache.h) or, with 0, each into a private cache as before.
  /// "huge_pages" (0 or 1, default 1): later init() calls place the shared cache's packed weights in
  /// memory advised for transparent huge pages (packed_memory.h) or, with 0, on the heap.
  Error set_option(const char* key, int64_t value) override {
    if (key != nullptr && std::strcmp(key, "huge_pages") == 0) {
      if (value != 0 && value != 1) {
        return set_error(Error::InvalidArgument, "XnnpackBackend: huge_pages must be 0 or 1, got %lld",
                         static_cast<long long>(value));
      }
      set_huge_pages_enabled(value == 1);
      return Error::Ok;
    }
    if (key != nullptr && std::strcmp(key, "weights_cache") == 0) {
      if (value != 0 && value != 1) {
        return set_error(Error::InvalidArgument, "XnnpackBackend: weights_cache must be 0 or 1, got %lld",
                         static_cast<long long>(value));
      }
      shared_weights_cache_.store(value == 1);
      return Error::Ok;
    }
    if (key == nullptr || std::strcmp(key, "num_threads") != 0) return Error::NotSupported;
    if (value < 1 || value > 1024) {
      return set_error(Error::InvalidArgument, "XnnpackBackend: num_threads must be in 1..1024, got %lld",
                       static_cast<long long>(value));
    }
    num_threads_.store(static_cast<size_t>(value));
    return Error::Ok;
  }

 private:
  std::atomic<size_t> num_threads_{1};
  std::atomic<bool> shared_weights_cache_{true};
};

}  // namespace etkit_xnnpack

extern "C" int etkit_xnnpack_register_backends(void) {
  static etkit_xnnpack::XnnpackBackend backend;
  return etkit_register_backend(ETKIT_BACKEND_ABI_VERSION, etkit_xnnpack::kBackendId, &backend);
}

extern "C" void etkit_xnnpack_get_weights_cache_stats(etkit_xnnpack_weights_cache_stats* out) {
  const etkit_xnnpack::WeightsCacheStats s = etkit_xnnpack::weights_cache_stats();
  *out = etkit_xnnpack_weights_cache_stats{s.entries, s.bytes, s.packs, s.reuses, s.deduplicated,
                                             s.huge_page_bytes};
}
