// fuzz_qnn_payload: the QNN delegate's payload reader under libFuzzer (docs/fuzzing.md), up to the point
// where QnnBackend::init hands bytes to ONNX Runtime: parse_payload (flatbuffer verification, version,
// tensors, boundary quantization, the context binary's CRC-32), then the EPContext model those bytes are
// wrapped in. ONNX Runtime itself is left out: a session per input would run QNN's context loader, which
// is not built for damaged input; that is why init checks the CRC-32 first, so a mutated context binary
// never gets that far.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "epcontext_model.h"
#include "etkit/runtime/error.h"
#include "payload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size heap copy, so a read past the end is an AddressSanitizer report.
  std::vector<uint8_t> bytes(data, data + size);
  const etkit_qnn::fb::QnnPayload* payload = nullptr;
  if (etkit_qnn::parse_payload(bytes.empty() ? nullptr : bytes.data(), bytes.size(), &payload) !=
      etkit::runtime::Error::Ok) {
    return 0;
  }
  std::vector<std::vector<int64_t>> shapes;
  std::vector<etkit_qnn::GraphTensor> inputs, outputs;
  for (auto [list, out] : {std::pair{payload->inputs(), &inputs}, std::pair{payload->outputs(), &outputs}}) {
    for (const etkit_qnn::fb::TensorInfo* t : *list) {
      shapes.emplace_back();
      if (t->shape() != nullptr) shapes.back().assign(t->shape()->begin(), t->shape()->end());
      etkit_qnn::QuantizedType type{};
      const bool quantized = t->quantization() != nullptr && etkit_qnn::quantized_type(t->quantization()->dtype(), &type);
      out->push_back({t->name()->c_str(), t->name()->size(), nullptr, shapes.back().size(), quantized ? type.onnx : 1});
    }
  }
  size_t k = 0;
  for (auto* list : {&inputs, &outputs}) {
    for (etkit_qnn::GraphTensor& g : *list) g.shape = shapes[k++].data();
  }
  const std::string model = etkit_qnn::write_epcontext_model(
      payload->graph_name()->c_str(), payload->graph_name()->size(), payload->context_binary()->data(),
      payload->context_binary()->size(), inputs, outputs);
  if (model.size() < payload->context_binary()->size()) std::abort();  // the binary is embedded whole
  etkit::runtime::clear_error_message();
  return 0;
}
