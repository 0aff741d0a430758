// Everything one XNNPACK delegate call site owns between init() and destroy().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <pthreadpool.h>
#include <xnnpack.h>

#include "etkit/runtime/freeable_buffer.h"
#include "weights_cache.h"

namespace etkit_xnnpack {

/// One value the caller binds at execute(): its external id is also its position in the delegate's
/// args (inputs first, then outputs), as in ExecuTorch's XNNPACK delegate.
struct ExternalBinding {
  uint32_t external_id = XNN_INVALID_VALUE_ID;
  bool is_input = false;
  xnn_datatype datatype = xnn_datatype_invalid;
  uint32_t rank = 0;                         // rank declared in the payload
  size_t bounds[XNN_MAX_TENSOR_DIMS] = {};   // dims declared in the payload: a dynamic input's upper bounds
  size_t dims[XNN_MAX_TENSOR_DIMS] = {};     // XNNPACK-order dims last bound (inputs) or produced (outputs)
  size_t num_dims = 0;
  bool shape_known = false;                  // false until the first execute()
};

class DelegateState {
 public:
  DelegateState() = default;
  DelegateState(const DelegateState&) = delete;
  DelegateState& operator=(const DelegateState&) = delete;
  /// Deletes the runtime first, then the weights cache it used (the shared pool is not owned).
  ~DelegateState();

  xnn_runtime_t runtime = nullptr;
  xnn_weights_cache_t weights_cache = nullptr;  // private cache, when the shared one is switched off
  std::unique_ptr<WeightsCacheSession> shared_weights;  // this delegate's view of the shared cache
  pthreadpool_t threadpool = nullptr;  // shared by all delegates (not owned); null: the calling thread
  /// Memory of the runtime's internal tensors, shared with the other delegates of the same Method
  /// (XNNPACK keeps its own reference; this one keeps the Method's entry alive). Null: private.
  std::shared_ptr<xnn_workspace> workspace;

  std::vector<ExternalBinding> inputs;   // sorted by external id
  std::vector<ExternalBinding> outputs;  // sorted by external id
  std::vector<xnn_external_value> externals;  // inputs then outputs; data pointers refreshed per run
  // The data pointers of the last xnn_setup_runtime_v2 (empty: none yet). A run whose shapes and pointers
  // equal them skips setup: XNNPACK's operators keep their pointers until a reshape (which a shared
  // workspace's growth also re-sets up itself), and an LLM's decode step reuses the same planned memory.
  std::vector<void*> setup_pointers;

  // Storage XNNPACK may keep pointers into. After the runtime is created only the constants a node
  // reads at run time are kept (packed filters and biases are released, see build_delegate):
  etkit::runtime::FreeableBuffer payload;             // the processed bytes (flatbuffer + constants)
  bool fp16_inference = false;  // the runtime was created with XNN_FLAG_FORCE_FP16_INFERENCE
  uint64_t bound_value_bytes = 0;  // bytes of the values without data (inputs, outputs, internal) at the payload's dims
  bool payload_pinned = false;  // a value read at run time lies in `payload`: keep it after init
  std::vector<etkit::runtime::FreeableBuffer> named_data;  // constants fetched from the NamedDataMap
  std::vector<std::vector<uint16_t>> bf16_scales;     // block scales (bf16), owned copies
  std::vector<std::vector<float>> float_scales;       // per-channel scales, owned copies
  std::vector<std::unique_ptr<uint8_t[]>> owned_constants;  // copies of small constants

  // Per-operator profiling (the runtime is created with XNN_FLAG_BASIC_PROFILING): the operators' labels
  // ("Convolution (NHWC, F32) IGEMM #1"), the payload XNode each runs (its delegate debug id; -1 when
  // unknown) and room for their times, all sized at init.
  std::vector<std::string> operator_names;
  std::vector<int32_t> operator_xnodes;
  std::vector<uint64_t> operator_times_us;
  /// Whether the runtime reads the clock per operator now: only while a tracer wants the events
  /// (an LLM's decode step runs ~1500 operators); see execute_delegate.
  bool profiling = true;
};

}  // namespace etkit_xnnpack
