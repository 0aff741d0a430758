// The runtime's worker pool (threadpool.h): parallel_for covers every item exactly once on the runtime's own
// workers and, once a backend lends its threads (set_parallel_for_provider), through the provider; the
// provider is asked only when kernel_threads() > 1 and the loop is longer than its grain, a provider that
// declines leaves the loop to the runtime's pool, and nullptr takes the loops back.
#include <atomic>
#include <cstdio>
#include <vector>

#include "etkit/runtime/threadpool.h"
#include "test_check.h"

namespace rt = etkit::runtime;

namespace {

struct Counts {
  std::vector<std::atomic<int>> hits;
  explicit Counts(size_t n) : hits(n) {}
  bool each_once() const {
    for (const auto& h : hits) {
      if (h.load() != 1) return false;
    }
    return true;
  }
};

void count_items(void* context, size_t begin, size_t end) {
  auto* counts = static_cast<Counts*>(context);
  for (size_t i = begin; i < end; ++i) counts->hits[i].fetch_add(1);
}

struct Lender {
  int calls = 0;
  size_t last_n = 0, last_grain = 0;
  bool accept = true;
};

/// A provider that runs the loop itself in chunks of `grain` (on the calling thread) when it accepts.
bool lend(void* state, size_t n, size_t grain, rt::ParallelFn fn, void* context) {
  auto* lender = static_cast<Lender*>(state);
  ++lender->calls;
  lender->last_n = n;
  lender->last_grain = grain;
  if (!lender->accept) return false;
  for (size_t begin = 0; begin < n; begin += grain) fn(context, begin, begin + grain < n ? begin + grain : n);
  return true;
}

size_t run(size_t n, size_t grain) {
  Counts counts(n);
  rt::parallel_for(n, grain, &count_items, &counts);
  return counts.each_once() ? n : 0;
}

}  // namespace

int main() {
  // the runtime's own pool
  CHECK(rt::set_kernel_threads(1) == rt::Error::Ok);
  CHECK(run(1000, 7) == 1000);
  CHECK(rt::set_kernel_threads(2) == rt::Error::Ok);
  CHECK(run(1000, 7) == 1000);

  // a lent pool takes the loops while more than one thread is asked for
  Lender lender;
  rt::set_parallel_for_provider(&lend, &lender);
  CHECK(run(1000, 7) == 1000);
  CHECK(lender.calls == 1 && lender.last_n == 1000 && lender.last_grain == 7);
  CHECK(run(5, 7) == 5);  // shorter than its grain: runs on the caller
  CHECK(run(100, 0) == 100);  // a grain of 0 is 1
  CHECK(lender.calls == 2 && lender.last_grain == 1);

  // one thread: never lent
  CHECK(rt::set_kernel_threads(1) == rt::Error::Ok);
  CHECK(run(1000, 7) == 1000);
  CHECK(lender.calls == 2);

  // a provider that declines leaves the loop to the runtime's pool
  CHECK(rt::set_kernel_threads(2) == rt::Error::Ok);
  lender.accept = false;
  CHECK(run(1000, 7) == 1000);
  CHECK(lender.calls == 3);

  // nullptr takes the loops back
  rt::set_parallel_for_provider(nullptr, nullptr);
  CHECK(run(1000, 7) == 1000);
  CHECK(lender.calls == 3);

  CHECK(rt::set_kernel_threads(1) == rt::Error::Ok);
  if (failures == 0) std::printf("test_threadpool: ok\n");
  return failures == 0 ? 0 : 1;
}
