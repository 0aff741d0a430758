// NamedDataMap: key -> bytes lookup over a program's named data (schema Program.named_data; ExecuTorch's
// NamedDataMap). Backends use it to fetch weights that preprocess() stored by key.
#pragma once

#include <cstddef>

#include "etkit/runtime/freeable_buffer.h"
#include "etkit/runtime/result.h"

namespace etkit::runtime {

class NamedDataMap {
 public:
  virtual ~NamedDataMap() = default;
  /// The bytes stored under `key`. Errors: NotFound (message names the key).
  virtual Result<FreeableBuffer> get_data(const char* key) const = 0;
  virtual Result<size_t> get_num_keys() const = 0;
  /// The index-th key. Errors: InvalidArgument if index >= get_num_keys().
  virtual Result<const char*> get_key(size_t index) const = 0;
};

}  // namespace etkit::runtime
