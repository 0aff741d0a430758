// Reader of the Core ML delegate payload: ExecuTorch's "inmemoryfs" flattened directory holding
// model.mlpackage/ (or model.mlmodelc/) and metadata.json. Portable C++17 (no Apple API), so it is
// built and tested on every platform; the Core ML delegate (coreml_backend.mm) uses it on Apple ones.
//
// Format (etkit_coreml/payload/inmemoryfs.py has the full description; source: ExecuTorch's
// backends/apple/coreml/runtime/inmemoryfs): file contents back to back, then the metadata JSON
// stored byte-reversed at the end of the payload:
//   {"nodes":[{"children":{NAME:INDEX},"dataRegion":{"offset":O,"size":S},"kind":0|1,"name":N},...]}
// nodes in post-order (the root directory last); kind 0 is a file, 1 a directory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace etkit_coreml {

/// One file of the payload; `data` points into the payload bytes (valid while they are).
struct PayloadFile {
  std::string path;  // relative to the root directory, '/'-separated, e.g. "model.mlpackage/Manifest.json"
  const uint8_t* data = nullptr;
  size_t size = 0;
};

/// metadata.json: the Core ML model's feature names in delegate argument order.
struct ModelMetadata {
  std::vector<std::string> input_names;
  std::vector<std::string> output_names;
  std::string identifier;
};

struct Payload {
  std::string root_name;           // "lowered_module" for ExecuTorch's and etkit's payloads
  std::vector<PayloadFile> files;  // every file, in node order
  ModelMetadata metadata;
  bool compiled_model = false;     // model.mlmodelc/ (compiled ahead of time) instead of model.mlpackage/
};

/// Parses `size` bytes at `data`. Returns false and sets `*error` (one sentence naming what is wrong:
/// truncated or non-JSON metadata, a region past the end, a bad child index, no metadata.json or no
/// model directory, ...) for anything that is not a Core ML payload; never reads out of bounds.
bool read_payload(const uint8_t* data, size_t size, Payload* out, std::string* error);

}  // namespace etkit_coreml
