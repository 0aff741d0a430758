// libFuzzer target of the Ethos-U delegate's reader of Vela's per-layer estimates (docs/fuzzing.md): each
// input is the named-data blob etkit_ethosu/layer_estimates.py writes ("EUL1", layer count, cycles and a
// NUL-terminated label per layer). A traced delegate reads it at init; fuzz_ethosu loads untraced methods,
// so this target is what reaches the parser. A refusal is a normal outcome; a sanitizer report or a label that
// does not end inside the blob is a finding.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "etkit_ethosu/layer_estimates.h"

namespace {
volatile uint64_t g_sink = 0;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> copy(data, data + size);  // exactly the input's bytes, so a read past them is reported
  std::vector<etkit_ethosu::LayerEstimate> layers;
  std::string why;
  if (!etkit_ethosu::parse_layer_estimates(copy.data(), copy.size(), &layers, &why)) {
    if (why.empty()) __builtin_trap();  // a refusal says why
    return 0;
  }
  const char* begin = reinterpret_cast<const char*>(copy.data());
  for (const etkit_ethosu::LayerEstimate& layer : layers) {
    if (layer.label < begin || layer.label >= begin + copy.size()) __builtin_trap();
    const size_t room = static_cast<size_t>(begin + copy.size() - layer.label);
    if (std::memchr(layer.label, '\0', room) == nullptr) __builtin_trap();  // the label ends inside the blob
    g_sink += layer.cycles + std::strlen(layer.label);
  }
  return 0;
}
