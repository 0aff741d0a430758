#include "payload.h"

#include <cstring>

#include "flatbuffers/flatbuffers.h"

namespace etkit_xnnpack {

using etkit::runtime::Error;
using etkit::runtime::Result;
using etkit::runtime::set_error;

namespace {

constexpr size_t kMagicOffset = 4;
constexpr char kHeaderMagic[4] = {'X', 'H', '0', '0'};

uint64_t read_le(const uint8_t* p, size_t nbytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < nbytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

bool is_graph_identifier(const uint8_t* p) {
  return std::memcmp(p, "XN01", 4) == 0 || std::memcmp(p, "XN00", 4) == 0;
}

Error bad_payload(const char* what, unsigned long long value, unsigned long long limit) {
  return set_error(Error::DelegateInvalidCompatibility,
                   "XnnpackBackend: corrupt payload: %s is %llu but must be <= %llu; re-export the "
                   "program with a matching etkit/ExecuTorch version",
                   what, value, limit);
}

}  // namespace

Result<PayloadView> parse_payload(const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (bytes == nullptr || size < kMagicOffset + 4) {
    return set_error(Error::DelegateInvalidCompatibility,
                     "XnnpackBackend: payload of %zu bytes is too small to hold an XNNPACK graph", size);
  }
  PayloadView view;
  const uint8_t* flatbuffer = bytes;
  size_t flatbuffer_size = size;

  if (std::memcmp(bytes + kMagicOffset, kHeaderMagic, 4) == 0) {
    if (size < kXnnHeaderLength) {
      return set_error(Error::DelegateInvalidCompatibility,
                       "XnnpackBackend: corrupt payload: %zu bytes cannot hold the %zu-byte XH00 header",
                       size, kXnnHeaderLength);
    }
    const uint64_t header_length = read_le(bytes + 8, 2);
    const uint64_t fb_offset = read_le(bytes + 10, 4);
    const uint64_t fb_size = read_le(bytes + 14, 4);
    const uint64_t const_offset = read_le(bytes + 18, 4);
    const uint64_t const_size = read_le(bytes + 22, 8);
    if (header_length < kXnnHeaderLength || header_length > size) {
      return set_error(Error::DelegateInvalidCompatibility,
                       "XnnpackBackend: corrupt payload: XH00 header length is %llu, expected %zu..%zu",
                       static_cast<unsigned long long>(header_length), kXnnHeaderLength, size);
    }
    if (fb_offset < header_length || fb_offset > size) return bad_payload("flatbuffer offset", fb_offset, size);
    if (fb_size > size - fb_offset) return bad_payload("flatbuffer offset + size", fb_offset + fb_size, size);
    if (const_offset < fb_offset + fb_size || const_offset > size) {
      return bad_payload("constant-data offset", const_offset, size);
    }
    if (const_size > size - const_offset) {
      return bad_payload("constant-data offset + size", const_offset + const_size, size);
    }
    flatbuffer = bytes + fb_offset;
    flatbuffer_size = static_cast<size_t>(fb_size);
    view.constant_data = bytes + const_offset;
    view.constant_data_size = const_size;
    view.has_header = true;
  }

  if (flatbuffer_size < kMagicOffset + 4 || !is_graph_identifier(flatbuffer + kMagicOffset)) {
    const uint8_t* id = flatbuffer_size >= kMagicOffset + 4 ? flatbuffer + kMagicOffset : nullptr;
    char shown[5] = {'?', '?', '?', '?', 0};
    for (int i = 0; id != nullptr && i < 4; ++i) shown[i] = (id[i] >= 32 && id[i] < 127) ? char(id[i]) : '?';
    return set_error(Error::DelegateInvalidCompatibility,
                     "XnnpackBackend: payload is neither an XH00-headed payload nor an XNNGraph "
                     "flatbuffer (identifier '%s' at bytes 4..8, expected XH00, XN01 or XN00)",
                     shown);
  }
  if (reinterpret_cast<uintptr_t>(flatbuffer) % alignof(uint32_t) != 0) {
    return set_error(Error::DelegateInvalidCompatibility,
                     "XnnpackBackend: the XNNGraph flatbuffer starts at an address that is not 4-byte "
                     "aligned; the program loader must keep delegate segments aligned");
  }
  flatbuffers::Verifier verifier(flatbuffer, flatbuffer_size);
  if (!verifier.VerifyBuffer<etkit_xnnpack::fb::XNNGraph>(nullptr)) {
    return set_error(Error::DelegateInvalidCompatibility,
                     "XnnpackBackend: the XNNGraph flatbuffer (%zu bytes) failed verification: it is "
                     "truncated or corrupt",
                     flatbuffer_size);
  }
  view.graph = etkit_xnnpack::fb::GetXNNGraph(flatbuffer);
  if (view.graph->xvalues() == nullptr || view.graph->xnodes() == nullptr) {
    return set_error(Error::DelegateInvalidCompatibility,
                     "XnnpackBackend: the XNNGraph has no %s list", view.graph->xvalues() ? "xnodes" : "xvalues");
  }
  return view;
}

}  // namespace etkit_xnnpack
