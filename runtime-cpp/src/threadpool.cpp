// The runtime's worker pool (threadpool.h): POSIX threads that sleep on a condition variable between
// jobs. A job is published under the mutex with a new generation number; each thread (workers and the
// caller) takes chunks from an atomic counter until the loop is exhausted; the caller then waits until
// every worker that joined has left the job, so the job (on the caller's stack) outlives its last use.
#include "etkit/runtime/threadpool.h"

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace etkit::runtime {
namespace {

struct Job {
  ParallelFn fn = nullptr;
  void* context = nullptr;
  size_t n = 0;
  size_t chunk = 1;
  std::atomic<size_t> next{0};
};

class Pool {
 public:
  ~Pool() { resize(1); }

  Error resize(size_t num_threads) {
    std::lock_guard<std::mutex> caller(callers_);  // no job runs while the workers change
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (pthread_t t : workers_) pthread_join(t, nullptr);
    workers_.clear();
    stopping_ = false;
    threads_ = 1;
    // A worker may start after the first job is published: it must count that job as new, so it
    // starts from the generation current now (no job can be published while callers_ is held).
    base_generation_ = generation_;
    for (size_t i = 1; i < num_threads; ++i) {
      pthread_t t;
      if (pthread_create(&t, nullptr, &Pool::run_worker, this) != 0) {
        return set_error(Error::Internal, "set_kernel_threads(%zu): the system refused thread %zu", num_threads, i);
      }
      workers_.push_back(t);
      threads_ = workers_.size() + 1;
    }
    return Error::Ok;
  }

  size_t threads() const { return threads_; }

  void parallel_for(size_t n, size_t grain, ParallelFn fn, void* context) {
    if (grain == 0) grain = 1;
    std::unique_lock<std::mutex> caller(callers_, std::try_to_lock);
    if (threads_ <= 1 || n <= grain || !caller.owns_lock()) {
      if (n > 0) fn(context, 0, n);
      return;
    }
    Job job;
    job.fn = fn;
    job.context = context;
    job.n = n;
    // about four chunks per thread balances uneven items without many atomics
    const size_t target = (n + threads_ * 4 - 1) / (threads_ * 4);
    job.chunk = target > grain ? target : grain;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      active_ = workers_.size();
      ++generation_;
    }
    wake_.notify_all();
    work(job);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return active_ == 0; });
    job_ = nullptr;
  }

 private:
  static void work(Job& job) {
    for (;;) {
      const size_t begin = job.next.fetch_add(job.chunk);
      if (begin >= job.n) return;
      const size_t end = job.n - begin < job.chunk ? job.n : begin + job.chunk;
      job.fn(job.context, begin, end);
    }
  }

  static void* run_worker(void* self) {
    static_cast<Pool*>(self)->worker_loop();
    return nullptr;
  }

  void worker_loop() {
    uint64_t seen = base_generation_;  // written before pthread_create, which orders it before this read
    for (;;) {
      Job* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stopping_) return;
        job = job_;
      }
      if (job != nullptr) work(*job);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (job != nullptr && --active_ == 0) done_.notify_one();
      }
    }
  }

  std::mutex callers_;  // one job at a time
  std::mutex mutex_;    // guards job_, active_, generation_, stopping_
  std::condition_variable wake_, done_;
  std::vector<pthread_t> workers_;
  Job* job_ = nullptr;
  size_t active_ = 0;
  uint64_t generation_ = 0;
  uint64_t base_generation_ = 0;  // generation_ when the current workers were created
  bool stopping_ = false;
  size_t threads_ = 1;
};

Pool& pool() {
  static Pool instance;
  return instance;
}

}  // namespace

Error set_kernel_threads(size_t num_threads) {
  if (num_threads == 0 || num_threads > 256) {
    return set_error(Error::InvalidArgument, "set_kernel_threads: %zu threads; give 1 to 256", num_threads);
  }
  if (num_threads == pool().threads()) return Error::Ok;
  return pool().resize(num_threads);
}

size_t kernel_threads() { return pool().threads(); }

namespace {

struct LentPool {
  ParallelForProvider provider = nullptr;
  void* state = nullptr;
};

std::mutex& lent_mutex() {
  static std::mutex mutex;
  return mutex;
}

LentPool& lent_pool() {
  static LentPool lent;
  return lent;
}

}  // namespace

void set_parallel_for_provider(ParallelForProvider provider, void* state) {
  std::lock_guard<std::mutex> lock(lent_mutex());
  lent_pool() = LentPool{provider, state};
}

void parallel_for(size_t n, size_t grain, ParallelFn fn, void* context) {
  if (pool().threads() > 1 && n > (grain == 0 ? 1 : grain)) {
    LentPool lent;
    {
      std::lock_guard<std::mutex> lock(lent_mutex());
      lent = lent_pool();
    }
    if (lent.provider != nullptr && lent.provider(lent.state, n, grain == 0 ? 1 : grain, fn, context)) return;
  }
  pool().parallel_for(n, grain, fn, context);
}

}  // namespace etkit::runtime
