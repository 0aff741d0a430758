// EthosUBackend: the etkit delegate that runs a Vela command stream on an Arm Ethos-U NPU through the
// public API of Arm's Ethos-U core driver (ethos-u-core-driver, Apache-2.0, header ethosu_driver.h), and
// its registration. Built only for Ethos-U targets, when CMake is given ETKIT_ETHOSU_CORE_DRIVER_DIR
// (runtime/CMakeLists.txt); on a host the plugin reports the backend unavailable instead.
//
// init:    parse the payload (vela_payload.h) and keep views into it: the handle takes over the
//          processed bytes (moves the FreeableBuffer), or, when they are not 16-byte aligned, copies them
//          to aligned memory from the method's runtime allocator and frees the original. Every input and
//          output must be in the scratch region (1).
// execute: check every tensor (dtype among Byte/Char/Short/Int/Bool, element size and element count as
//          the command stream expects, contiguous), take scratch_size bytes of 16-byte aligned scratch
//          from the execution context's temp allocator (or the handle's own buffer, see
//          ETKIT_ETHOSU_SCRATCH_IN_HANDLE), copy each input to scratch + offset, run the command stream
//          with base addresses {weights, scratch, fast scratch}, and copy each output back from
//          scratch + offset. Inputs and outputs may share scratch bytes (Vela reuses I/O buffers), which is
//          why all inputs are copied in before the run and all outputs out after it. No layout change
//          happens: the tensors are in the delegate's layout, as the command stream expects.
//
// tracing: when the Method is loaded with an event tracer, init() looks up Vela's per-layer estimates in the
//          program's named data (layer_estimates.h; absent in programs lowered without them) and execute() logs
//          one event per layer after the run: the NPU run's measured time split by the layers' estimated
//          cycles, labelled "(Vela estimate)", with the layer's index as delegate debug id. The driver times no
//          layer; these are Vela's proportions, not measurements.
//
// Cache maintenance around the run is the core driver's job (it calls the platform's
// ethosu_flush_dcache / ethosu_invalidate_dcache hooks), as is address translation between the CPU's and
// the NPU's view of memory. The compile specs are used at compile time only and are ignored here.
#include <ethosu_driver.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "etkit/runtime/backend_interface.h"
#include "etkit/runtime/scalar_type.h"
#include "etkit/runtime/tensor.h"
#include "etkit_ethosu/layer_estimates.h"
#include "etkit_ethosu/register.h"
#include "etkit_ethosu/vela_payload.h"

/// 1: init() allocates each delegate's scratch from the method's runtime allocator once, and execute()
/// uses it (for scratch larger than the runtime's temp arena, at the cost of one buffer per delegate).
/// 0 (default): execute() takes scratch from the temp allocator, shared with the rest of the method.
#ifndef ETKIT_ETHOSU_SCRATCH_IN_HANDLE
#define ETKIT_ETHOSU_SCRATCH_IN_HANDLE 0
#endif

// Weak defaults of the fast-scratch hooks declared in register.h; the firmware overrides them.
extern "C" {
__attribute__((weak)) uint8_t* etkit_ethosu_fast_scratch = nullptr;
__attribute__((weak)) size_t etkit_ethosu_fast_scratch_size = 0;
}

namespace etkit_ethosu {
namespace {

using etkit::runtime::BackendExecutionContext;
using etkit::runtime::BackendInitContext;
using etkit::runtime::BackendInterface;
using etkit::runtime::CompileSpec;
using etkit::runtime::DelegateHandle;
using etkit::runtime::Error;
using etkit::runtime::EValue;
using etkit::runtime::EventTracer;
using etkit::runtime::FreeableBuffer;
using etkit::runtime::MemoryAllocator;
using etkit::runtime::Result;
using etkit::runtime::ScalarType;
using etkit::runtime::set_error;
using etkit::runtime::Span;
using etkit::runtime::Tensor;

/// Backend id stored in the .pte (BackendDelegate.id), as ExecuTorch names it.
constexpr const char kBackendId[] = "EthosUBackend";

/// Number of base addresses given to the driver: weights (0), scratch (1), fast scratch (2).
constexpr int kNumBaseAddresses = 3;

/// Per-call-site state: the parsed payload and the bytes its views point into.
struct Handle {
  FreeableBuffer processed;          // owns the payload bytes when they are used in place; else empty
  VelaPayloadView payload;           // views into `processed` or into the aligned copy
  uint8_t* own_scratch = nullptr;    // ETKIT_ETHOSU_SCRATCH_IN_HANDLE: from the runtime allocator
  FreeableBuffer estimates;          // traced Methods: Vela's per-layer estimates (named data), when present
  std::vector<LayerEstimate> layers; // views into `estimates`
};

/// For a traced Method: reads the partition's layer estimates from the named data into `handle` (none when
/// the program has none). Errors: DelegateInvalidCompatibility when the stored estimates are malformed.
Error load_layer_estimates(BackendInitContext& ctx, Handle* handle) {
  const etkit::runtime::NamedDataMap* named = ctx.get_named_data_map();
  if (ctx.event_tracer() == nullptr || named == nullptr) return Error::Ok;
  char key[kLayerEstimatesKeySize];
  layer_estimates_key(handle->payload.cmd_data.data, handle->payload.cmd_data.size, key);
  Result<FreeableBuffer> found = named->get_data(key);
  if (!found.ok()) return Error::Ok;  // lowered without estimates: the delegate call is the only event
  handle->estimates = std::move(found.get());
  std::string why;
  if (!parse_layer_estimates(static_cast<const uint8_t*>(handle->estimates.data()), handle->estimates.size(),
                             &handle->layers, &why)) {
    return set_error(Error::DelegateInvalidCompatibility, "EthosUBackend: named data '%s': %s", key, why.c_str());
  }
  return Error::Ok;
}

/// One event per layer of the run that took `start_ns`..`end_ns`, laid end to end, each its share of the
/// estimated cycles (all layers equal when Vela estimated none).
void log_layer_events(const Handle& handle, EventTracer& tracer, int64_t start_ns, int64_t end_ns) {
  uint64_t total = 0;
  for (const LayerEstimate& layer : handle.layers) total += layer.cycles;
  const double span = static_cast<double>(end_ns - start_ns);
  const double n = static_cast<double>(handle.layers.size());
  double t = static_cast<double>(start_ns);
  for (size_t k = 0; k < handle.layers.size(); ++k) {
    const LayerEstimate& layer = handle.layers[k];
    const double share = total > 0 ? static_cast<double>(layer.cycles) / static_cast<double>(total) : 1.0 / n;
    const double end = k + 1 == handle.layers.size() ? static_cast<double>(end_ns) : t + share * span;
    tracer.log_delegate_event(static_cast<int32_t>(k), layer.label, static_cast<int64_t>(t), static_cast<int64_t>(end));
    t = end;
  }
}

/// The element types the delegate exchanges with the NPU (plain integers and bool, as ExecuTorch's
/// Ethos-U runtime); the element size must also equal the I/O record's.
bool npu_scalar_type(ScalarType type) {
  switch (type) {
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Short:
    case ScalarType::Int:
    case ScalarType::Bool:
      return true;
    default:
      return false;
  }
}

/// Whether argument `index` is a tensor the NPU can read (`kind` "input") or write ("output") as `io`.
Error check_tensor(EValue* value, const VelaIO& io, const char* kind, size_t index) {
  if (value == nullptr || !value->is_tensor()) {
    return set_error(Error::InvalidArgument, "EthosUBackend: %s %zu is not a tensor", kind, index);
  }
  const Tensor& t = value->to_tensor();
  if (!npu_scalar_type(t.scalar_type())) {
    return set_error(Error::NotSupported,
                     "EthosUBackend: %s %zu has scalar type %s; the NPU exchanges Byte, Char, Short, Int and Bool "
                     "tensors", kind, index, etkit::runtime::scalar_type_name(t.scalar_type()));
  }
  char why[192];
  if (!tensor_matches_vela_io(io, t.numel(), t.element_size(), why, sizeof(why))) {
    return set_error(Error::InvalidArgument, "EthosUBackend: %s %zu: %s", kind, index, why);
  }
  if (!t.is_contiguous_dim_order()) {
    return set_error(Error::NotSupported,
                     "EthosUBackend: %s %zu is not in contiguous dim order; the delegate copies bytes without "
                     "permuting them", kind, index);
  }
  if (t.const_data_ptr() == nullptr) {
    return set_error(Error::InvalidArgument, "EthosUBackend: %s %zu has no data", kind, index);
  }
  return Error::Ok;
}

/// What init() refuses beyond the parser's rules: I/O outside the scratch region (the delegate has
/// nowhere else to put it) and a command stream too long for the driver's int size.
Error check_device_limits(const VelaPayloadView& payload) {
  if (payload.cmd_data.size > static_cast<size_t>(INT_MAX)) {
    return set_error(Error::DelegateInvalidCompatibility,
                     "EthosUBackend: the command stream is %zu bytes, more than the driver accepts (%d)",
                     payload.cmd_data.size, INT_MAX);
  }
  const std::vector<VelaIO>* lists[2] = {&payload.inputs, &payload.outputs};
  const char* kinds[2] = {"input", "output"};
  for (int k = 0; k < 2; ++k) {
    for (size_t i = 0; i < lists[k]->size(); ++i) {
      const int32_t region = (*lists[k])[i].region;
      if (region != kScratchRegion) {
        return set_error(Error::DelegateInvalidCompatibility,
                         "EthosUBackend: %s %zu is in Vela region %d; this delegate places inputs and outputs in "
                         "the scratch region (1) only", kinds[k], i, region);
      }
    }
  }
  return Error::Ok;
}

/// Parses `size` bytes at `data` into `*payload`, with the parser's message on failure.
Error parse(const uint8_t* data, size_t size, VelaPayloadView* payload) {
  std::string why;
  if (!parse_vela_payload(data, size, payload, &why)) {
    return set_error(Error::DelegateInvalidCompatibility, "EthosUBackend: %s", why.c_str());
  }
  return Error::Ok;
}

class EthosUBackend final : public BackendInterface {
 public:
  /// Always true: this library is only built into firmware that links the core driver and brings up
  /// the NPU. Whether a driver instance is free is known only when execute() reserves one.
  bool is_available() const override { return true; }

  Result<DelegateHandle*> init(BackendInitContext& ctx, FreeableBuffer* processed,
                               Span<const CompileSpec> compile_specs) const override {
    (void)compile_specs;
    if (processed == nullptr) {
      return set_error(Error::DelegateInvalidCompatibility, "EthosUBackend: no payload");
    }
    const auto* data = static_cast<const uint8_t*>(processed->data());
    const size_t size = processed->size();
    VelaPayloadView payload;
    Error e = parse(data, size, &payload);
    if (e != Error::Ok) return e;
    e = check_device_limits(payload);
    if (e != Error::Ok) return e;

    auto* handle = new (std::nothrow) Handle();
    if (handle == nullptr) {
      return set_error(Error::DelegateMemoryAllocationFailed, "EthosUBackend: out of memory for the handle");
    }
    MemoryAllocator* allocator = ctx.get_runtime_allocator();
    if (reinterpret_cast<uintptr_t>(data) % kPayloadAlignment == 0) {
      // Blocks sit on 16-byte boundaries of the payload, so the command stream and the weights are
      // aligned as the NPU needs: use the bytes in place and keep them alive as long as the handle.
      handle->payload = std::move(payload);
      handle->processed = std::move(*processed);
    } else {
      // The NPU needs 16-byte aligned command stream and weights: copy the payload once, to memory
      // that lives as long as the method, and read it again there.
      auto* copy = allocator == nullptr ? nullptr : static_cast<uint8_t*>(allocator->allocate(size, kPayloadAlignment));
      if (copy == nullptr) {
        delete handle;
        return set_error(Error::DelegateMemoryAllocationFailed,
                         "EthosUBackend: the payload is not 16-byte aligned and the runtime allocator cannot provide "
                         "an aligned copy of %zu bytes", size);
      }
      std::memcpy(copy, data, size);
      e = parse(copy, size, &handle->payload);
      if (e != Error::Ok) {  // cannot happen: the same bytes parsed above
        delete handle;
        return e;
      }
      processed->Free();
    }
    e = load_layer_estimates(ctx, handle);
    if (e != Error::Ok) {
      delete handle;
      return e;
    }
#if ETKIT_ETHOSU_SCRATCH_IN_HANDLE
    const uint32_t scratch_size = handle->payload.scratch_size;
    if (scratch_size > 0) {
      handle->own_scratch =
          allocator == nullptr ? nullptr : static_cast<uint8_t*>(allocator->allocate(scratch_size, kPayloadAlignment));
      if (handle->own_scratch == nullptr) {
        delete handle;
        return set_error(Error::DelegateMemoryAllocationFailed,
                         "EthosUBackend: the runtime allocator cannot provide %u bytes of scratch", scratch_size);
      }
    }
#endif
    return static_cast<DelegateHandle*>(handle);
  }

  Error execute(BackendExecutionContext& ctx, DelegateHandle* raw, Span<EValue*> args) const override {
    auto* handle = static_cast<Handle*>(raw);
    if (handle == nullptr) {
      return set_error(Error::DelegateInvalidHandle, "EthosUBackend: execute() called with a null handle");
    }
    const VelaPayloadView& payload = handle->payload;
    const size_t n_in = payload.inputs.size();
    const size_t n_out = payload.outputs.size();
    if (args.size() != n_in + n_out) {
      return set_error(Error::InvalidArgument,
                       "EthosUBackend: %zu arguments, the command stream has %zu inputs and %zu outputs", args.size(),
                       n_in, n_out);
    }
    // Check every argument before touching scratch or the NPU.
    for (size_t i = 0; i < n_in; ++i) ETKIT_CHECK_OK(check_tensor(args[i], payload.inputs[i], "input", i));
    for (size_t j = 0; j < n_out; ++j) ETKIT_CHECK_OK(check_tensor(args[n_in + j], payload.outputs[j], "output", j));

    uint8_t* scratch = handle->own_scratch;
    if (scratch == nullptr && payload.scratch_size > 0) {
      MemoryAllocator* temp = ctx.get_temp_allocator();
      scratch = temp == nullptr ? nullptr
                                : static_cast<uint8_t*>(temp->allocate(payload.scratch_size, kPayloadAlignment));
      if (scratch == nullptr) {
        return set_error(Error::DelegateMemoryAllocationFailed,
                         "EthosUBackend: %s %u bytes of 16-byte aligned scratch; give the method a temp arena large "
                         "enough, or build the delegate with ETKIT_ETHOSU_SCRATCH_IN_HANDLE=1",
                         temp == nullptr ? "the execution context has no temp allocator for the"
                                         : "the execution context's temp allocator cannot provide the",
                         payload.scratch_size);
      }
    }

    // Copy the inputs in. The parser checked that offset + bytes lies inside the scratch region, and
    // check_tensor() that the tensor holds exactly that many bytes.
    for (size_t i = 0; i < n_in; ++i) {
      const Tensor& t = args[i]->to_tensor();
      std::memcpy(scratch + payload.inputs[i].offset, t.const_data_ptr(), t.nbytes());
    }

    ethosu_driver* driver = ethosu_reserve_driver();
    if (driver == nullptr) {
      return set_error(Error::InvalidState, "EthosUBackend: no Ethos-U driver is available (ethosu_reserve_driver)");
    }
    uint64_t base_addrs[kNumBaseAddresses] = {
        static_cast<uint64_t>(reinterpret_cast<uintptr_t>(payload.weight_data.data)),
        static_cast<uint64_t>(reinterpret_cast<uintptr_t>(scratch)),
        static_cast<uint64_t>(reinterpret_cast<uintptr_t>(etkit_ethosu_fast_scratch)),
    };
    size_t base_addrs_size[kNumBaseAddresses] = {payload.weight_data.size, payload.scratch_size,
                                                 etkit_ethosu_fast_scratch_size};
    EventTracer* tracer = handle->layers.empty() ? nullptr : ctx.event_tracer();
    const int64_t run_start = tracer != nullptr ? EventTracer::now_ns() : 0;
    const int status = ethosu_invoke_v3(driver, payload.cmd_data.data, static_cast<int>(payload.cmd_data.size),
                                        base_addrs, base_addrs_size, kNumBaseAddresses, /*user_arg=*/nullptr);
    const int64_t run_end = tracer != nullptr ? EventTracer::now_ns() : 0;
    ethosu_release_driver(driver);
    if (status != 0) {
      return set_error(Error::InvalidState, "EthosUBackend: the NPU run failed (ethosu_invoke_v3 returned %d)",
                       status);
    }
    if (tracer != nullptr) log_layer_events(*handle, *tracer, run_start, run_end);

    // Copy the outputs out.
    for (size_t j = 0; j < n_out; ++j) {
      const Tensor& t = args[n_in + j]->to_tensor();
      std::memcpy(t.mutable_data_ptr(), scratch + payload.outputs[j].offset, t.nbytes());
    }
    return Error::Ok;
  }

  void destroy(DelegateHandle* raw) const override {
    delete static_cast<Handle*>(raw);  // frees the payload bytes it owns; allocator memory goes with the method
  }
};

}  // namespace
}  // namespace etkit_ethosu

extern "C" int etkit_ethosu_register_backends(void) {
  static etkit_ethosu::EthosUBackend backend;
  return etkit_register_backend(ETKIT_BACKEND_ABI_VERSION, etkit_ethosu::kBackendId, &backend);
}
