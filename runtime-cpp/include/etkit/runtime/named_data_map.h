// NamedDataMap: key -> bytes lookup (ExecuTorch's NamedDataMap). A program's own named data (schema
// Program.named_data) is one; a .ptd data file (extension/flat_tensor/flat_tensor_data_map.h) is another.
// Backends fetch the weights preprocess() stored by key through it; a Method reads the constants its .pte
// keeps outside (TensorDataLocation::EXTERNAL) through it, by fully qualified name.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/error.h"
#include "etkit/runtime/freeable_buffer.h"
#include "etkit/runtime/result.h"
#include "etkit/runtime/scalar_type.h"
#include "etkit/runtime/span.h"

namespace etkit::runtime {

/// Element type, sizes and dim_order of a blob that is a tensor (a .ptd's TensorLayout).
struct TensorLayout {
  ScalarType scalar_type = ScalarType::Float;
  Span<const int32_t> sizes;
  Span<const uint8_t> dim_order;
  /// Bytes the layout describes: element size times the product of `sizes`.
  size_t nbytes = 0;
};

class NamedDataMap {
 public:
  virtual ~NamedDataMap() = default;
  /// The bytes stored under `key`. Errors: NotFound (message names the key).
  virtual Result<FreeableBuffer> get_data(const char* key) const = 0;
  virtual Result<size_t> get_num_keys() const = 0;
  /// The index-th key. Errors: InvalidArgument if index >= get_num_keys().
  virtual Result<const char*> get_key(size_t index) const = 0;
  /// The tensor layout stored with `key`. Errors: NotFound (no such key), NotSupported (the key holds bytes
  /// without a layout, or this map keeps no layouts: the default). Defined here, so that the class keeps no key
  /// function: code built with RTTI (a plugin's tests) may derive from it although the runtime has none.
  virtual Result<TensorLayout> get_tensor_layout(const char* key) const {
    return set_error(Error::NotSupported, "this data map keeps no tensor layouts (asked for '%s')",
                     key == nullptr ? "(null)" : key);
  }
};

/// Looks a key up in `first`, then in `second` (either may be null): a Method's view of its program's
/// named data and the .ptd file it was loaded with (ExecuTorch's MergedDataMap). NotFound names the key
/// and says whether a data file was given.
class MergedDataMap final : public NamedDataMap {
 public:
  MergedDataMap() = default;
  MergedDataMap(const NamedDataMap* first, const NamedDataMap* second) : first_(first), second_(second) {}
  Result<FreeableBuffer> get_data(const char* key) const override;
  Result<size_t> get_num_keys() const override;
  Result<const char*> get_key(size_t index) const override;
  Result<TensorLayout> get_tensor_layout(const char* key) const override;
  bool empty() const { return first_ == nullptr && second_ == nullptr; }

 private:
  Error not_found(const char* key) const;
  const NamedDataMap* first_ = nullptr;
  const NamedDataMap* second_ = nullptr;
};

}  // namespace etkit::runtime
