// Reader of Vela's per-layer estimates that etkit_ethosu/layer_estimates.py stores in the program's named data,
// for the delegate's per-layer ETDump events. Portable C++17, like vela_payload.h.
//
// Key: "etkit_ethosu.layers.<16 hex digits>", the 64-bit FNV-1a of the partition's command stream.
// Blob (little-endian):
//
//   "EUL1"                     magic
//   uint32 count               layers, in Vela's order
//   count x { uint64 cycles    Vela's estimated cycles of the layer
//             uint16 size      label bytes including the terminating NUL (>= 1)
//             label[size] }    e.g. "Conv2D clamped_12 (Vela estimate)\0"
//
// and nothing after the last layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace etkit_ethosu {

/// One layer: its estimated cycles and its event label (points into the blob).
struct LayerEstimate {
  uint64_t cycles = 0;
  const char* label = nullptr;
};

/// Bytes of a key, NUL included.
constexpr size_t kLayerEstimatesKeySize = sizeof("etkit_ethosu.layers.") + 16;

/// Writes the named-data key of the estimates of the command stream `cmd` (`size` bytes) to `key`.
void layer_estimates_key(const uint8_t* cmd, size_t size, char key[kLayerEstimatesKeySize]);

/// Reads `size` bytes at `data` into `layers` (labels point into `data`). On failure returns false and, when
/// `why` is given, says what is wrong and where.
bool parse_layer_estimates(const uint8_t* data, size_t size, std::vector<LayerEstimate>* layers, std::string* why);

}  // namespace etkit_ethosu
