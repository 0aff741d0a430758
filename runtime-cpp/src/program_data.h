// Internal: what a loaded Program owns (shared by program.cpp and method.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "etkit/runtime/data_loader.h"
#include "etkit/runtime/freeable_buffer.h"
#include "etkit/runtime/named_data_map.h"
#include "program_generated.h"

namespace etkit::runtime {

class ProgramData;

/// NamedDataMap over Program.named_data: each key names a segment.
class ProgramNamedDataMap final : public NamedDataMap {
 public:
  explicit ProgramNamedDataMap(const ProgramData* program) : program_(program) {}
  Result<FreeableBuffer> get_data(const char* key) const override;
  Result<size_t> get_num_keys() const override;
  Result<const char*> get_key(size_t index) const override;
  /// NotFound when the program has no such key, NotSupported when it has (a program keeps no layouts).
  Result<TensorLayout> get_tensor_layout(const char* key) const override;

 private:
  const ProgramData* program_;
};

class ProgramData final {
 public:
  const DataLoader* loader = nullptr;
  FreeableBuffer program_bytes;      // the flatbuffer (+ extended header), as loaded
  void* aligned_copy = nullptr;      // set when program_bytes were copied to fix alignment
  const fb::Program* program = nullptr;
  size_t file_size = 0;
  size_t segment_base_offset = 0;    // 0 when the file has no segments
  FreeableBuffer constant_segment;   // whole constant segment, when the program has one
  ProgramNamedDataMap named_data_map{this};

  ~ProgramData();
  Result<FreeableBuffer> load_segment(size_t index) const;
  /// See Program::get_constant_data.
  Result<const void*> constant_data(size_t buffer_index, size_t nbytes) const;
};

}  // namespace etkit::runtime
