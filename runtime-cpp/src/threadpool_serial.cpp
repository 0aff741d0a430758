// The worker pool of a build without threads (ETKIT_THREADS=OFF: bare metal, see threadpool.h): every loop
// runs on the calling thread, and the only thread count is 1.
#include "etkit/runtime/threadpool.h"

namespace etkit::runtime {

Error set_kernel_threads(size_t num_threads) {
  if (num_threads == 1) return Error::Ok;
  return set_error(Error::NotSupported,
                   "set_kernel_threads: %zu threads asked of a runtime built without threads (ETKIT_THREADS=OFF); "
                   "only 1 is possible",
                   num_threads);
}

size_t kernel_threads() { return 1; }

void parallel_for(size_t n, size_t /*grain*/, ParallelFn fn, void* context) {
  if (n > 0) fn(context, 0, n);
}

void set_parallel_for_provider(ParallelForProvider /*provider*/, void* /*state*/) {}

}  // namespace etkit::runtime
