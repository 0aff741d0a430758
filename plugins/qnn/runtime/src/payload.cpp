#include "payload.h"

#include <cmath>
#include <cstring>

#include "flatbuffers/flatbuffers.h"

namespace etkit_qnn {

using etkit::runtime::Error;
using etkit::runtime::set_error;

bool quantized_type(const flatbuffers::String* dtype, QuantizedType* out) {
  if (dtype == nullptr) return false;
  static const struct {
    const char* name;
    QuantizedType type;
  } kTypes[] = {{"uint8", {2, 1, 0, 255}},
                {"int8", {3, 1, -128, 127}},
                {"uint16", {4, 2, 0, 65535}},
                {"int16", {5, 2, -32768, 32767}}};
  for (const auto& t : kTypes) {
    if (dtype->size() == std::strlen(t.name) && std::memcmp(dtype->data(), t.name, dtype->size()) == 0) {
      *out = t.type;
      return true;
    }
  }
  return false;
}

namespace {

Error check_tensors(const flatbuffers::Vector<flatbuffers::Offset<fb::TensorInfo>>* tensors, const char* what) {
  if (tensors == nullptr || tensors->size() == 0) {
    return set_error(Error::DelegateInvalidCompatibility, "QnnBackend: corrupt payload: it lists no %s", what);
  }
  if (tensors->size() > kMaxTensors) {
    return set_error(Error::DelegateInvalidCompatibility, "QnnBackend: corrupt payload: %u %s (at most %zu)",
                     tensors->size(), what, kMaxTensors);
  }
  for (uint32_t i = 0; i < tensors->size(); ++i) {
    const fb::TensorInfo* t = tensors->Get(i);
    const auto* shape = t->shape();
    if (t->name()->size() == 0 || shape == nullptr || shape->size() > kMaxRank) {
      return set_error(Error::DelegateInvalidCompatibility,
                       "QnnBackend: corrupt payload: %s %u has an empty name or a missing or over-long shape", what, i);
    }
    for (uint32_t d = 0; d < shape->size(); ++d) {
      if (shape->Get(d) <= 0 || shape->Get(d) > (int64_t{1} << 40)) {
        return set_error(Error::DelegateInvalidCompatibility,
                         "QnnBackend: corrupt payload: %s %u has dimension %u = %lld", what, i, d,
                         static_cast<long long>(shape->Get(d)));
      }
    }
    if (const fb::Quantization* q = t->quantization()) {
      QuantizedType type;
      if (!quantized_type(q->dtype(), &type)) {
        return set_error(Error::DelegateInvalidCompatibility,
                         "QnnBackend: corrupt payload: %s %u has quantization dtype '%s' (uint8, int8, uint16 or int16)",
                         what, i, q->dtype() != nullptr ? q->dtype()->c_str() : "");
      }
      if (!(q->scale() > 0.0f) || !std::isfinite(q->scale()) || q->zero_point() < type.qmin ||
          q->zero_point() > type.qmax) {
        return set_error(Error::DelegateInvalidCompatibility,
                         "QnnBackend: corrupt payload: %s %u has scale %g and zero point %d", what, i,
                         static_cast<double>(q->scale()), q->zero_point());
      }
    }
  }
  return Error::Ok;
}

}  // namespace

Error parse_payload(const void* data, size_t size, const fb::QnnPayload** out) {
  if (data == nullptr || size < 8) {
    return set_error(Error::DelegateInvalidCompatibility, "QnnBackend: the payload is empty or shorter than 8 bytes (%zu)",
                     size);
  }
  if (!fb::QnnPayloadBufferHasIdentifier(data)) {
    const auto* id = static_cast<const unsigned char*>(data) + 4;
    return set_error(Error::DelegateInvalidCompatibility,
                     "QnnBackend: not a QNN payload: file identifier '%c%c%c%c', expected 'EQNN' (re-lower the model "
                     "with this etkit-qnn)", id[0] >= 32 && id[0] < 127 ? id[0] : '?', id[1] >= 32 && id[1] < 127 ? id[1] : '?',
                     id[2] >= 32 && id[2] < 127 ? id[2] : '?', id[3] >= 32 && id[3] < 127 ? id[3] : '?');
  }
  flatbuffers::Verifier verifier(static_cast<const uint8_t*>(data), size);
  if (!fb::VerifyQnnPayloadBuffer(verifier)) {
    return set_error(Error::DelegateInvalidCompatibility,
                     "QnnBackend: corrupt payload: the flatbuffer (%zu bytes) does not verify (truncated or damaged)", size);
  }
  const fb::QnnPayload* root = fb::GetQnnPayload(data);
  if (root->version() != kPayloadVersion) {
    return set_error(Error::DelegateInvalidCompatibility,
                     "QnnBackend: payload version %u; this delegate reads version %u (re-lower the model with the "
                     "installed etkit-qnn)", root->version(), kPayloadVersion);
  }
  if (root->graph_name()->size() == 0 || root->context_binary()->size() == 0) {
    return set_error(Error::DelegateInvalidCompatibility, "QnnBackend: corrupt payload: empty graph name or context binary");
  }
  Error err = check_tensors(root->inputs(), "inputs");
  if (err == Error::Ok) err = check_tensors(root->outputs(), "outputs");
  if (err != Error::Ok) return err;
  *out = root;
  return Error::Ok;
}

}  // namespace etkit_qnn
