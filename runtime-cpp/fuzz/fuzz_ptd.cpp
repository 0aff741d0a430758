// libFuzzer target of the .ptd data-file reader (docs/fuzzing.md): each input is a .ptd file.
//
// FlatTensorDataMap::load (header, flatbuffers verifier, version, segments, keys, tensor layouts), then, for a
// file it accepts, every key's layout and bytes read as a Method and a delegate read them. A refusal is a
// normal outcome; a sanitizer report, a crash, a hang or a leak is a finding.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "etkit/extension/flat_tensor/flat_tensor_data_map.h"
#include "etkit/runtime/data_loader.h"

namespace {
volatile uint64_t g_sink = 0;  // keeps the reads from being optimised away
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An aligned copy of exactly the input's size, as a mapped file would be.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[size == 0 ? 1 : size]);
  if (size > 0) std::memcpy(copy.get(), data, size);
  etkit::runtime::BufferDataLoader loader(copy.get(), size);
  auto map = etkit::extension::FlatTensorDataMap::load(&loader);
  if (!map.ok()) return 0;
  auto n = map->get_num_keys();
  for (size_t i = 0; n.ok() && i < n.get(); ++i) {
    auto key = map->get_key(i);
    if (!key.ok()) continue;
    g_sink += std::strlen(key.get());
    auto layout = map->get_tensor_layout(key.get());
    if (layout.ok()) {
      for (size_t d = 0; d < layout->sizes.size(); ++d) g_sink += static_cast<uint64_t>(layout->sizes[d]);
      g_sink += layout->nbytes;
    }
    auto bytes = map->get_data(key.get());
    if (bytes.ok() && bytes->size() > 0) {
      const auto* b = static_cast<const uint8_t*>(bytes->data());
      g_sink += b[0] + b[bytes->size() - 1];
      if (layout.ok() && layout->nbytes > bytes->size()) __builtin_trap();  // load() promised the layout fits
    }
  }
  return 0;
}
