// QnnBackend: the etkit delegate that runs a QNN HTP context binary, and its registration.
//
// init:    verify the payload (payload.h), wrap its context binary in a one-node EPContext model
//          (epcontext_model.h) and create an ONNX Runtime session with the QNN execution provider over it
//          (ort_session.h): QNN deserializes the context once (QnnContext_createFromBinary) and keeps it for the
//          handle's lifetime. On x86 the HTP backend (libQnnHtp.so) runs it on its simulator; on a Snapdragon
//          device, on the HTP. The payload bytes are released once the session holds the context.
// execute: check every argument (float32, contiguous, the payload's shape). A float32 tensor of the context is
//          bound to the argument's buffer without copying (bindings are made once per buffer address and reused
//          while the method's memory stays where it is). A quantized tensor of the context (payload version 2:
//          the boundary quantize/dequantize of a QDQ partition) has a staging buffer bound once at init: inputs
//          are quantized into it as PT2E's quantize_per_tensor does (x * (1 / scale), round half to even, plus
//          the zero point, clamped), outputs dequantized from it ((q - zero point) * scale). Doing this on the
//          CPU keeps float32 precision: the HTP converts float32 graph I/O through fp16, which moved 16-bit
//          values by up to ~30 steps. ONNX Runtime and QNN allocate inside Run as they see fit; the delegate
//          itself allocates nothing on the execute path unless an argument moved.
// tracing: a Method loaded with an event tracer gets a session with QNN's detailed profiler, and each execute
//          logs one event per QNN op of the context after the run (qnn_profile.h: QNN reports cycles per op; the
//          events split the accelerator's measured time by them).
// destroy: release the bindings and the session (the context goes with it).
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "epcontext_model.h"
#include "etkit/runtime/backend_interface.h"
#include "etkit/runtime/scalar_type.h"
#include "etkit/runtime/tensor.h"
#include "etkit_qnn/register.h"
#include "ort_session.h"
#include "payload.h"
#include "qnn_profile.h"

namespace etkit_qnn {
namespace {

using etkit::runtime::BackendExecutionContext;
using etkit::runtime::BackendInitContext;
using etkit::runtime::CompileSpec;
using etkit::runtime::DelegateHandle;
using etkit::runtime::Error;
using etkit::runtime::EValue;
using etkit::runtime::FreeableBuffer;
using etkit::runtime::Result;
using etkit::runtime::ScalarType;
using etkit::runtime::set_error;
using etkit::runtime::Span;
using etkit::runtime::Tensor;

constexpr const char kBackendId[] = "QnnBackend";

struct Binding {
  std::string name;
  std::vector<int64_t> shape;
  size_t numel = 1;
  void* data = nullptr;      // the buffer `value` wraps (the argument's, or `staging`)
  OrtValue* value = nullptr;
  bool quantized = false;    // an integer tensor of the context, converted through `staging`
  QuantizedType type{1, 4, 0, 0};
  float scale = 1.0f;
  float inv_scale = 1.0f;    // (float)(1.0 / scale), as PT2E's quantize_per_tensor computes it
  int32_t zero_point = 0;
  std::vector<unsigned char> staging;
};

template <typename T>
void quantize_into(const float* x, size_t n, const Binding& b, T* q) {
  const float lo = static_cast<float>(b.type.qmin), hi = static_cast<float>(b.type.qmax);
  const float zp = static_cast<float>(b.zero_point);
  for (size_t i = 0; i < n; ++i) {
    float v = std::nearbyint(x[i] * b.inv_scale) + zp;  // default rounding mode: half to even, as torch.round
    v = v < lo ? lo : (v > hi ? hi : v);                 // NaN stays NaN here and becomes qmin below
    q[i] = static_cast<T>(v == v ? v : lo);
  }
}

template <typename T>
void dequantize_into(const T* q, size_t n, const Binding& b, float* x) {
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<int32_t>(q[i]) - b.zero_point) * b.scale;
}

void quantize_input(Binding& b, const float* x) {
  unsigned char* q = b.staging.data();
  switch (b.type.onnx) {
    case 2: quantize_into(x, b.numel, b, reinterpret_cast<uint8_t*>(q)); break;
    case 3: quantize_into(x, b.numel, b, reinterpret_cast<int8_t*>(q)); break;
    case 4: quantize_into(x, b.numel, b, reinterpret_cast<uint16_t*>(q)); break;
    default: quantize_into(x, b.numel, b, reinterpret_cast<int16_t*>(q)); break;
  }
}

void dequantize_output(const Binding& b, float* x) {
  switch (b.type.onnx) {
    case 2: dequantize_into(reinterpret_cast<const uint8_t*>(b.staging.data()), b.numel, b, x); break;
    case 3: dequantize_into(reinterpret_cast<const int8_t*>(b.staging.data()), b.numel, b, x); break;
    case 4: dequantize_into(reinterpret_cast<const uint16_t*>(b.staging.data()), b.numel, b, x); break;
    default: dequantize_into(reinterpret_cast<const int16_t*>(b.staging.data()), b.numel, b, x); break;
  }
}

struct Handle {
  const OrtRuntime* rt = nullptr;
  OrtSession* session = nullptr;
  std::string graph_name;
  std::vector<Binding> inputs;
  std::vector<Binding> outputs;
  std::vector<const char*> input_names;
  std::vector<const char*> output_names;
  std::vector<const OrtValue*> input_values;
  std::vector<OrtValue*> output_values;
  // When the Method is loaded with an event tracer: QNN's per-op profile of each run (qnn_profile.h), and
  // buffers reused to read it.
  std::unique_ptr<QnnProfileFile> profile;
  std::string profile_text;
  std::vector<QnnOpProfile> profile_ops;

  ~Handle() {
    for (auto* list : {&inputs, &outputs}) {
      for (Binding& b : *list) {
        if (b.value != nullptr) rt->api->ReleaseValue(b.value);
      }
    }
    if (session != nullptr) rt->api->ReleaseSession(session);
  }
};

void describe(const flatbuffers::Vector<flatbuffers::Offset<fb::TensorInfo>>* tensors, std::vector<Binding>* out,
              std::vector<GraphTensor>* graph) {
  for (uint32_t i = 0; i < tensors->size(); ++i) {
    const fb::TensorInfo* t = tensors->Get(i);
    Binding b;
    b.name.assign(t->name()->c_str(), t->name()->size());
    for (int64_t d : *t->shape()) {
      b.shape.push_back(d);
      b.numel *= static_cast<size_t>(d);
    }
    if (const fb::Quantization* q = t->quantization()) {  // verified by parse_payload
      b.quantized = quantized_type(q->dtype(), &b.type);
      b.scale = q->scale();
      b.inv_scale = static_cast<float>(1.0 / static_cast<double>(q->scale()));
      b.zero_point = q->zero_point();
    }
    out->push_back(std::move(b));
  }
  for (const Binding& b : *out) {
    graph->push_back({b.name.data(), b.name.size(), b.shape.data(), b.shape.size(), b.quantized ? b.type.onnx : 1});
  }
}

/// Allocates the staging buffer of a quantized binding and binds it once.
Error bind_staging(const OrtRuntime& rt, Binding& b, const std::string& graph) {
  if (!b.quantized) return Error::Ok;
  b.staging.assign(b.numel * b.type.size, 0);
  OrtStatus* status = rt.api->CreateTensorWithDataAsOrtValue(
      rt.cpu_memory, b.staging.data(), b.staging.size(), b.shape.data(), b.shape.size(),
      static_cast<ONNXTensorElementDataType>(b.type.onnx), &b.value);
  if (status != nullptr) {
    const std::string message = take_status_message(rt, status);
    return set_error(Error::Internal, "QnnBackend (graph %s): binding %s failed: %s", graph.c_str(), b.name.c_str(),
                     message.c_str());
  }
  b.data = b.staging.data();
  return Error::Ok;
}

/// Checks `value` against `b` and (re)binds its buffer when it moved.
Error bind(const Handle& h, Binding& b, EValue* value, const char* what, size_t index) {
  if (value == nullptr || !value->is_tensor()) {
    return set_error(Error::InvalidArgument, "QnnBackend (graph %s): %s %zu is not a tensor", h.graph_name.c_str(),
                     what, index);
  }
  Tensor& t = value->to_tensor();
  if (t.scalar_type() != ScalarType::Float) {
    return set_error(Error::InvalidArgument, "QnnBackend (graph %s): %s %zu has dtype %d; the context takes float32",
                     h.graph_name.c_str(), what, index, static_cast<int>(t.scalar_type()));
  }
  bool same_shape = t.dim() == b.shape.size();
  for (size_t d = 0; same_shape && d < b.shape.size(); ++d) same_shape = t.size(d) == b.shape[d];
  if (!same_shape || !t.is_contiguous_dim_order()) {
    char got[128] = {0};
    size_t used = 0;
    for (size_t d = 0; d < t.dim() && used + 24 < sizeof(got); ++d) {
      used += static_cast<size_t>(std::snprintf(got + used, sizeof(got) - used, d ? ", %lld" : "%lld",
                                                static_cast<long long>(t.size(d))));
    }
    return set_error(Error::InvalidArgument,
                     "QnnBackend (graph %s): %s %zu has shape [%s]%s; the context was compiled for %zu dims with %zu "
                     "elements (QNN graphs have static shapes: re-lower for this shape)",
                     h.graph_name.c_str(), what, index, got, t.is_contiguous_dim_order() ? "" : " (not contiguous)",
                     b.shape.size(), b.numel);
  }
  if (b.quantized) return Error::Ok;  // bound to its staging buffer at init
  void* data = t.mutable_data_ptr();
  if (data == b.data && b.value != nullptr) return Error::Ok;
  if (b.value != nullptr) {
    h.rt->api->ReleaseValue(b.value);
    b.value = nullptr;
  }
  OrtStatus* status = h.rt->api->CreateTensorWithDataAsOrtValue(
      h.rt->cpu_memory, data, b.numel * sizeof(float), b.shape.data(), b.shape.size(),
      ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &b.value);
  if (status != nullptr) {
    const std::string message = take_status_message(*h.rt, status);
    return set_error(Error::Internal, "QnnBackend (graph %s): binding %s %zu failed: %s", h.graph_name.c_str(), what,
                     index, message.c_str());
  }
  b.data = data;
  return Error::Ok;
}

/// One event per QNN op of the run that just ended, named after its ONNX node (the key of preprocess's
/// debug_handle_map), laid end to end from `start_ns`: each op gets its share of the run's cycles of the
/// accelerator's measured execute time (QNN reports cycles per op, not time). Nothing is logged when
/// QNN wrote no complete run.
void log_op_events(Handle& h, etkit::runtime::EventTracer& tracer, int64_t start_ns) {
  uint64_t accelerator_us = 0;
  if (!h.profile->read_new(&h.profile_text) ||
      !parse_last_qnn_run(h.profile_text, &h.profile_ops, &accelerator_us)) {
    return;
  }
  uint64_t total = 0;
  for (const QnnOpProfile& op : h.profile_ops) total += op.cycles;
  const double ns_per_cycle = total > 0 ? static_cast<double>(accelerator_us) * 1000.0 / static_cast<double>(total) : 0;
  double t = static_cast<double>(start_ns);
  for (const QnnOpProfile& op : h.profile_ops) {
    const double end = t + static_cast<double>(op.cycles) * ns_per_cycle;
    tracer.log_delegate_event(op.name.c_str(), static_cast<int64_t>(t), static_cast<int64_t>(end));
    t = end;
  }
}

class QnnBackend final : public etkit::runtime::BackendInterface {
 public:
  /// Loads ONNX Runtime and the QNN execution provider (first call); false, with the reason in
  /// last_error_message(), when they are missing.
  bool is_available() const override {
    std::string error;
    if (get_ort_runtime(&error) != nullptr) return true;
    set_error(Error::NotFound, "QnnBackend: %s", error.c_str());
    return false;
  }

  /// Compile specs are used ahead of time only (the context binary fixes the target); they are ignored here.
  /// A Method loaded with an event tracer gets QNN's detailed profiler (per-op cycles, see qnn_profile.h).
  Result<DelegateHandle*> init(BackendInitContext& ctx, FreeableBuffer* processed,
                               Span<const CompileSpec> compile_specs) const override {
    (void)compile_specs;
    std::string error;
    const OrtRuntime* rt = get_ort_runtime(&error);
    if (rt == nullptr) return set_error(Error::NotFound, "QnnBackend: %s", error.c_str());
    if (processed == nullptr) return set_error(Error::InvalidArgument, "QnnBackend: no payload");
    const fb::QnnPayload* payload = nullptr;
    Error err = parse_payload(processed->data(), processed->size(), &payload);
    if (err != Error::Ok) return err;

    Handle* h = new (std::nothrow) Handle();
    if (h == nullptr) return set_error(Error::MemoryAllocationFailed, "QnnBackend: out of memory");
    h->rt = rt;
    h->graph_name = payload->graph_name()->str();
    std::vector<GraphTensor> graph_inputs, graph_outputs;
    describe(payload->inputs(), &h->inputs, &graph_inputs);
    describe(payload->outputs(), &h->outputs, &graph_outputs);
    if (ctx.event_tracer() != nullptr) {
      h->profile.reset(new (std::nothrow) QnnProfileFile());
      if (h->profile != nullptr && !h->profile->create()) h->profile.reset();  // run untraced inside the context
    }
    {
      const std::string model =
          write_epcontext_model(payload->graph_name()->c_str(), payload->graph_name()->size(),
                                payload->context_binary()->data(), payload->context_binary()->size(), graph_inputs,
                                graph_outputs);
      h->session = create_qnn_session(*rt, model.data(), model.size(),
                                      h->profile != nullptr ? h->profile->path().c_str() : nullptr, &error);
    }
    if (h->session == nullptr) {
      const std::string name = h->graph_name;
      const int soc = payload->soc_model(), arch = payload->htp_arch();
      const std::string sdk = payload->sdk_version() != nullptr ? payload->sdk_version()->str() : "?";
      delete h;
      return set_error(Error::DelegateInvalidCompatibility,
                       "QnnBackend: loading the QNN context of graph %s (SoC %d, HTP v%d, QNN %s) failed: %s", name.c_str(),
                       soc, arch, sdk.c_str(), error.c_str());
    }
    processed->Free();
    for (auto* list : {&h->inputs, &h->outputs}) {
      for (Binding& b : *list) {
        Error bound = bind_staging(*rt, b, h->graph_name);
        if (bound != Error::Ok) {
          delete h;
          return bound;
        }
      }
    }
    for (Binding& b : h->inputs) h->input_names.push_back(b.name.c_str());
    for (Binding& b : h->outputs) h->output_names.push_back(b.name.c_str());
    h->input_values.assign(h->inputs.size(), nullptr);
    h->output_values.assign(h->outputs.size(), nullptr);
    return static_cast<DelegateHandle*>(h);
  }

  Error execute(BackendExecutionContext& ctx, DelegateHandle* handle, Span<EValue*> args) const override {
    if (handle == nullptr) return set_error(Error::DelegateInvalidHandle, "QnnBackend: execute() with a null handle");
    Handle& h = *static_cast<Handle*>(handle);
    const size_t n_in = h.inputs.size(), n_out = h.outputs.size();
    if (args.size() != n_in + n_out) {
      return set_error(Error::InvalidArgument, "QnnBackend (graph %s): %zu arguments, the context has %zu inputs and %zu outputs",
                       h.graph_name.c_str(), args.size(), n_in, n_out);
    }
    for (size_t i = 0; i < n_in; ++i) {
      Error err = bind(h, h.inputs[i], args[i], "input", i);
      if (err != Error::Ok) return err;
      if (h.inputs[i].quantized) quantize_input(h.inputs[i], args[i]->to_tensor().const_data_ptr<float>());
      h.input_values[i] = h.inputs[i].value;
    }
    for (size_t i = 0; i < n_out; ++i) {
      if (args[n_in + i]->is_tensor() && args[n_in + i]->to_tensor().is_read_only()) {
        return set_error(Error::InvalidProgram, "QnnBackend (graph %s): output %zu is a constant of the program",
                         h.graph_name.c_str(), i);
      }
      Error err = bind(h, h.outputs[i], args[n_in + i], "output", i);
      if (err != Error::Ok) return err;
      h.output_values[i] = h.outputs[i].value;
    }
    const int64_t run_start = ctx.event_tracer() != nullptr ? etkit::runtime::EventTracer::now_ns() : 0;
    OrtStatus* status = h.rt->api->Run(h.session, nullptr, h.input_names.data(), h.input_values.data(), n_in,
                                       h.output_names.data(), n_out, h.output_values.data());
    if (status != nullptr) {
      const std::string message = take_status_message(*h.rt, status);
      return set_error(Error::Internal, "QnnBackend (graph %s): run failed: %s", h.graph_name.c_str(), message.c_str());
    }
    for (size_t i = 0; i < n_out; ++i) {
      if (h.outputs[i].quantized) dequantize_output(h.outputs[i], args[n_in + i]->to_tensor().mutable_data_ptr<float>());
    }
    if (ctx.event_tracer() != nullptr && h.profile != nullptr) log_op_events(h, *ctx.event_tracer(), run_start);
    return Error::Ok;
  }

  void destroy(DelegateHandle* handle) const override { delete static_cast<Handle*>(handle); }
};

}  // namespace
}  // namespace etkit_qnn

extern "C" int etkit_qnn_register_backends(void) {
  static etkit_qnn::QnnBackend backend;
  return etkit_register_backend(ETKIT_BACKEND_ABI_VERSION, etkit_qnn::kBackendId, &backend);
}

extern "C" int etkit_qnn_set_library_paths(const char* onnxruntime_library, const char* qnn_ep_library,
                                           const char* htp_backend_library) {
  return etkit_qnn::set_ort_library_paths(onnxruntime_library, qnn_ep_library, htp_backend_library) ? 0 : 1;
}
