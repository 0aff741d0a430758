// Minimal .npy (NumPy format 1.0/2.0/3.0) reading and writing for etkit_runner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "etkit/runtime/scalar_type.h"

namespace etkit::runner {

struct NpyArray {
  runtime::ScalarType scalar_type = runtime::ScalarType::Float;
  std::vector<int32_t> shape;
  std::vector<uint8_t> data;  // little-endian, row-major
};

/// Reads `path`. On failure returns false and sets `error` (names the file and the problem).
bool read_npy(const std::string& path, NpyArray* out, std::string* error);
/// Writes a row-major array. Returns false with `error` set on failure.
bool write_npy(const std::string& path, runtime::ScalarType type, const std::vector<int32_t>& shape,
               const void* data, size_t nbytes, std::string* error);

}  // namespace etkit::runner
