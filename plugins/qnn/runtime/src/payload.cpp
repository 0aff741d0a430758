#include "payload.h"

#include <cmath>
#include <cstring>

#include "etkit/runtime/flatbuffer_alignment.h"
#include "etkit/runtime/program.h"  // effective_memory_limit
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
    if (!etkit::runtime::elements_aligned(shape)) {
      return set_error(Error::DelegateInvalidCompatibility,
                       "QnnBackend: corrupt payload: the shape of %s %u is not 8-byte aligned", what, i);
    }
    // Each tensor is bound as float32 memory of this many elements: bounded by what the runtime may use.
    const uint64_t limit = etkit::runtime::effective_memory_limit() / 4;
    uint64_t numel = 1;
    for (uint32_t d = 0; d < shape->size(); ++d) {
      const int64_t dim = shape->Get(d);
      if (dim <= 0 || static_cast<uint64_t>(dim) > limit / numel) {
        return set_error(Error::DelegateInvalidCompatibility,
                         "QnnBackend: corrupt payload: %s %u has dimension %u = %lld (its float32 tensor must be "
                         "non-empty and within the memory limit of %llu bytes)", what, i, d,
                         static_cast<long long>(dim), static_cast<unsigned long long>(limit * 4));
      }
      numel *= static_cast<uint64_t>(dim);
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

uint32_t crc32(const uint8_t* data, size_t size) {
  // The reflected CRC-32 of zlib, PNG and gzip (polynomial 0xEDB88320), one table lookup per byte.
  static const auto table = [] {
    struct Table {
      uint32_t entry[256];
    } t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t.entry[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = table.entry[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

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
  const uint32_t crc = crc32(root->context_binary()->data(), root->context_binary()->size());
  if (crc != root->context_crc32()) {
    return set_error(Error::DelegateInvalidCompatibility,
                     "QnnBackend: corrupt payload: the context binary's CRC-32 is %08x, the payload records %08x (the "
                     "program file is damaged; export it again)", crc, root->context_crc32());
  }
  Error err = check_tensors(root->inputs(), "inputs");
  if (err == Error::Ok) err = check_tensors(root->outputs(), "outputs");
  if (err != Error::Ok) return err;
  *out = root;
  return Error::Ok;
}

}  // namespace etkit_qnn
