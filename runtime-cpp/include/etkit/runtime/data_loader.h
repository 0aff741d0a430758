// DataLoader: where a Program's bytes come from (ExecuTorch's runtime::DataLoader and the loaders of
// extension/data_loader; seed page "Detailed C++ Runtime APIs Tutorial").
//
// Loading happens at Program::load / load_method time only; these may allocate.
#pragma once

#include <cstddef>
#include <cstdint>

#include "etkit/runtime/freeable_buffer.h"
#include "etkit/runtime/result.h"

namespace etkit::runtime {

class DataLoader {
 public:
  virtual ~DataLoader() = default;
  /// `size` bytes starting at `offset`. Errors: InvalidArgument if the range is outside the data
  /// (message names offset, size and the data size); AccessFailed on an I/O failure.
  virtual Result<FreeableBuffer> load(size_t offset, size_t size) const = 0;
  /// Total number of bytes available.
  virtual Result<size_t> size() const = 0;
};

/// Serves bytes from memory the caller keeps alive; load() returns views (no copy, nothing freed).
class BufferDataLoader final : public DataLoader {
 public:
  BufferDataLoader(const void* data, size_t size) : data_(static_cast<const uint8_t*>(data)), size_(size) {}
  Result<FreeableBuffer> load(size_t offset, size_t size) const override;
  Result<size_t> size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

/// Reads a file with pread into a fresh heap buffer per load() (aligned to `alignment`).
class FileDataLoader final : public DataLoader {
 public:
  /// Errors: AccessFailed (message names the path and errno text) if the file cannot be opened.
  static Result<FileDataLoader> from(const char* path, size_t alignment = 16);
  FileDataLoader(FileDataLoader&& other) noexcept;
  FileDataLoader(const FileDataLoader&) = delete;
  ~FileDataLoader() override;
  Result<FreeableBuffer> load(size_t offset, size_t size) const override;
  Result<size_t> size() const override { return file_size_; }

 private:
  FileDataLoader(int fd, size_t file_size, size_t alignment) : fd_(fd), file_size_(file_size), alignment_(alignment) {}
  int fd_ = -1;
  size_t file_size_ = 0;
  size_t alignment_ = 16;
};

/// Maps the whole file read-only once; load() returns views into the mapping (unmapped on destruction).
class MmapDataLoader final : public DataLoader {
 public:
  /// Errors: AccessFailed (message names the path and errno text).
  static Result<MmapDataLoader> from(const char* path);
  MmapDataLoader(MmapDataLoader&& other) noexcept;
  MmapDataLoader(const MmapDataLoader&) = delete;
  ~MmapDataLoader() override;
  Result<FreeableBuffer> load(size_t offset, size_t size) const override;
  Result<size_t> size() const override { return size_; }

 private:
  MmapDataLoader(void* base, size_t size) : base_(base), size_(size) {}
  void* base_ = nullptr;
  size_t size_ = 0;
};

}  // namespace etkit::runtime
