// The runtime's own worker threads, for kernels that split their work (ExecuTorch's extension/threadpool
// shape: one process-wide pool, sized once, that a kernel hands a loop to), e.g. llama::custom_sdpa.
// A backend whose library keeps its own threads can lend them (set_parallel_for_provider): the kernels'
// loops then run on the delegate's threads, so one set of threads serves the whole Method instead of two
// pools taking turns on the same cores (a library's workers spin for a while after each op).
//
// parallel_for never allocates: the job lives on the caller's stack and the workers exist before the
// first execute(). Calls from two threads at once do not share the pool: the second caller runs its loop
// alone, so a Method executed concurrently on several threads stays correct (just not faster).
#pragma once

#include <cstddef>

#include "etkit/runtime/error.h"

// ETKIT_SINGLE_THREADED=1 (CMake: ETKIT_THREADS=OFF, e.g. a bare-metal build): no worker threads and no
// thread-local storage; set_kernel_threads accepts only 1 and parallel_for runs on the caller.
#if defined(ETKIT_SINGLE_THREADED) && ETKIT_SINGLE_THREADED
#define ETKIT_THREAD_LOCAL
#else
#define ETKIT_THREAD_LOCAL thread_local
#endif

namespace etkit::runtime {

/// A piece of a loop: fn(context, begin, end) handles items [begin, end).
using ParallelFn = void (*)(void* context, size_t begin, size_t end);

/// Threads the runtime's kernels use, the calling thread included (1: no worker threads; the default).
/// Call it outside execute(): workers are started or stopped here. Errors: InvalidArgument for 0 or more
/// than 256, Internal when the system refuses a thread (the pool keeps the threads it got).
Error set_kernel_threads(size_t num_threads);
size_t kernel_threads();

/// Runs fn over items [0, n) in chunks of at least `grain` items, on the calling thread and the pool's
/// workers, and returns when every item is done. With one thread, n <= grain, or the pool busy with
/// another caller, fn(context, 0, n) runs on the calling thread.
void parallel_for(size_t n, size_t grain, ParallelFn fn, void* context);

/// Runs fn over [0, n) in chunks of at least `grain` items on another pool's threads and the caller, and
/// returns true when every item is done; false leaves the loop to the runtime's own pool.
using ParallelForProvider = bool (*)(void* state, size_t n, size_t grain, ParallelFn fn, void* context);

/// Hands parallel_for's loops, while kernel_threads() > 1, to `provider` (called with `state`); nullptr gives
/// them back to the runtime's pool. Process-wide; the last call wins. A backend calls it when it creates
/// the threads its delegates run on; `state` must stay valid for the rest of the process.
void set_parallel_for_provider(ParallelForProvider provider, void* state);

}  // namespace etkit::runtime
