// BufferDataLoader (see data_loader.h): bytes already in memory, the only loader a target without a file
// system has. The file loaders are in file_data_loader.cpp.
#include "etkit/runtime/data_loader.h"

#include "file_bytes.h"

namespace etkit::runtime {
namespace internal {

Error check_loader_range(const char* who, size_t offset, size_t size, size_t total) {
  if (offset > total || size > total - offset) {
    return set_error(Error::InvalidArgument,
                     "%s: requested bytes [%zu, %zu+%zu) lie outside the %zu bytes available "
                     "(file truncated or corrupted?)",
                     who, offset, offset, size, total);
  }
  return Error::Ok;
}

}  // namespace internal

Result<FreeableBuffer> BufferDataLoader::load(size_t offset, size_t size) const {
  ETKIT_CHECK_OK(internal::check_loader_range("BufferDataLoader", offset, size, size_));
  return FreeableBuffer(data_ + offset, size, nullptr);
}

}  // namespace etkit::runtime
