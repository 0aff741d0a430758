// FileDataLoader and MmapDataLoader (see data_loader.h): POSIX files (open/pread, mmap). Not built for a
// target without a file system (ETKIT_FILESYSTEM=OFF), which loads from memory with BufferDataLoader.
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "etkit/runtime/data_loader.h"
#include "file_bytes.h"

namespace etkit::runtime {
namespace {

using internal::check_loader_range;

void free_heap(void* /*context*/, void* data, size_t /*size*/) { std::free(data); }

/// Opens `path` for reading: its descriptor in *fd (the caller closes it) and its size in *size.
Error open_for_reading(const char* path, int* fd, size_t* size) {
  *fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (*fd < 0) {
    return set_error(Error::AccessFailed, "cannot open '%s': %s", path, std::strerror(errno));
  }
  struct stat st;
  if (::fstat(*fd, &st) != 0) {
    int e = errno;
    ::close(*fd);
    *fd = -1;
    return set_error(Error::AccessFailed, "cannot stat '%s': %s", path, std::strerror(e));
  }
  *size = static_cast<size_t>(st.st_size);
  return Error::Ok;
}

}  // namespace

Result<FileDataLoader> FileDataLoader::from(const char* path, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return set_error(Error::InvalidArgument, "FileDataLoader: alignment %zu is not a power of two", alignment);
  }
  int fd = -1;
  size_t size = 0;
  ETKIT_CHECK_OK(open_for_reading(path, &fd, &size));
  return FileDataLoader(fd, size, alignment < sizeof(void*) ? sizeof(void*) : alignment);
}

FileDataLoader::FileDataLoader(FileDataLoader&& other) noexcept
    : fd_(other.fd_), file_size_(other.file_size_), alignment_(other.alignment_) {
  other.fd_ = -1;
}

FileDataLoader::~FileDataLoader() {
  if (fd_ >= 0) ::close(fd_);
}

Result<FreeableBuffer> FileDataLoader::load(size_t offset, size_t size) const {
  ETKIT_CHECK_OK(check_loader_range("FileDataLoader", offset, size, file_size_));
  if (size == 0) return FreeableBuffer(nullptr, 0, nullptr);
  void* buf = internal::aligned_heap_allocate(alignment_, size);
  if (buf == nullptr) {
    return set_error(Error::MemoryAllocationFailed, "FileDataLoader: cannot allocate %zu bytes", size);
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd_, static_cast<uint8_t*>(buf) + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      std::free(buf);
      return set_error(Error::AccessFailed, "FileDataLoader: read of %zu bytes at offset %zu failed: %s", size,
                       offset, n == 0 ? "unexpected end of file" : std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  return FreeableBuffer(buf, size, free_heap);
}

Result<MmapDataLoader> MmapDataLoader::from(const char* path) {
  int fd = -1;
  size_t size = 0;
  ETKIT_CHECK_OK(open_for_reading(path, &fd, &size));
  void* base = nullptr;
  if (size > 0) {
    base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return set_error(Error::AccessFailed, "cannot mmap '%s': %s", path, std::strerror(e));
    }
  }
  ::close(fd);
  return MmapDataLoader(base, size);
}

MmapDataLoader::MmapDataLoader(MmapDataLoader&& other) noexcept : base_(other.base_), size_(other.size_) {
  other.base_ = nullptr;
  other.size_ = 0;
}

MmapDataLoader::~MmapDataLoader() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

namespace {

// Freeing a piece of the mapping (a delegate payload, once the backend has built what it needs from it)
// drops its pages from memory: they are clean pages of a read-only private file mapping, so a later read
// faults them in again from the file. The mapping itself stays until the loader goes away.
void advise_dont_need(void*, void* data, size_t size) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace

Result<FreeableBuffer> MmapDataLoader::load(size_t offset, size_t size) const {
  ETKIT_CHECK_OK(check_loader_range("MmapDataLoader", offset, size, size_));
  return FreeableBuffer(static_cast<const uint8_t*>(base_) + offset, size, size > 0 ? &advise_dont_need : nullptr);
}

}  // namespace etkit::runtime
