// FlatTensorDataMap: a .ptd data file (schema/flat_tensor.fbs, ExecuTorch 1.5.1's FlatTensor format, file
// identifier "FT01"; seed page "Separating the program and data") as a NamedDataMap: weights a .pte keeps
// outside (TensorDataLocation::EXTERNAL, looked up by fully qualified name) and backends' named data.
//
//   auto pte = MmapDataLoader::from("model.pte");
//   auto ptd = MmapDataLoader::from("model.ptd");
//   auto program = Program::load(&pte.get());
//   auto data = FlatTensorDataMap::load(&ptd.get());                 // checks the whole index
//   auto method = program->load_method("forward", nullptr, nullptr, &data.get());
//
// (each Result checked with ok() first; runner/main.cpp's --data_path is a complete example). With a
// mapping loader (MmapDataLoader) get_data() returns views into the mapping: nothing is copied, and
// a delegate reads (or packs) its weights straight from the file's pages.
//
// A .ptd is untrusted input. load() checks the header, runs the flatbuffers verifier and then checks what
// the verifier cannot: the version, every segment against the file, every key's segment index, scalar type,
// sizes and dim_order, and that a tensor's layout fits its segment. Every failure is an Error with
// last_error_message() naming the part; nothing here aborts or reads outside the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "etkit/runtime/data_loader.h"
#include "etkit/runtime/named_data_map.h"
#include "etkit/runtime/result.h"

namespace etkit::extension {

/// The header after the flatbuffer's root offset and file identifier (bytes 8..48; ExecuTorch's
/// FlatTensorHeader, magic "FH01").
struct FlatTensorHeader {
  static constexpr size_t kOffset = 8;
  static constexpr size_t kLength = 40;
  uint64_t flatbuffer_offset = 0;
  uint64_t flatbuffer_size = 0;
  uint64_t segment_base_offset = 0;
  uint64_t segment_data_size = 0;
};

/// The FlatTensor format version this runtime reads (FlatTensor.version).
inline constexpr uint32_t kFlatTensorVersion = 0;

class FlatTensorDataMap final : public runtime::NamedDataMap {
 public:
  /// Reads and checks the file's index through `loader`, which must outlive the map (data are loaded on
  /// get_data). Errors: InvalidProgram (not a .ptd, another version, truncated or corrupted: the message
  /// names the part), AccessFailed (loader I/O), MemoryAllocationFailed.
  static runtime::Result<FlatTensorDataMap> load(runtime::DataLoader* loader);

  FlatTensorDataMap(FlatTensorDataMap&& other) noexcept;
  FlatTensorDataMap(const FlatTensorDataMap&) = delete;
  FlatTensorDataMap& operator=(const FlatTensorDataMap&) = delete;
  FlatTensorDataMap& operator=(FlatTensorDataMap&&) = delete;
  ~FlatTensorDataMap() override;

  /// The bytes stored under `key` (a view when the loader maps the file). Errors: NotFound naming the key.
  runtime::Result<runtime::FreeableBuffer> get_data(const char* key) const override;
  runtime::Result<size_t> get_num_keys() const override;
  runtime::Result<const char*> get_key(size_t index) const override;
  /// Errors: NotFound (no such key), NotSupported (its bytes are not a tensor: no layout).
  runtime::Result<runtime::TensorLayout> get_tensor_layout(const char* key) const override;
  const FlatTensorHeader& header() const;

 private:
  struct State;
  explicit FlatTensorDataMap(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace etkit::extension
