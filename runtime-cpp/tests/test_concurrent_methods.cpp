// The runtime's thread-safety rule (docs/runtime.md): a loaded Program may be shared by threads, a Method
// may not; each thread loads and runs its own. 8 threads load their Method of one Program at once and
// execute it 1,000 times on inputs of their own; every output must equal, bit for bit, what a lone Method
// computes for the same inputs. `make test-sanitize` also runs it under ThreadSanitizer, which reports a
// data race in the shared Program, the kernel and backend registries or the error-message buffers.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "etkit/runtime/runtime.h"
#include "test_program_builder.h"

namespace rt = etkit::runtime;

namespace {
constexpr int kThreads = 8;
constexpr int kExecutions = 1000;

struct Inputs {
  float x[6], y[6];
  int32_t sizes[2][2] = {{2, 3}, {2, 3}};
  uint8_t order[2][2] = {{0, 1}, {0, 1}};
  int32_t strides[2][2];
  rt::Tensor tx, ty;
  explicit Inputs(int seed) {
    for (int i = 0; i < 6; ++i) {
      x[i] = 0.25f * float(seed) + 0.5f * float(i);
      y[i] = -1.0f * float(seed) + float(i * i);
    }
    tx = rt::Tensor(rt::ScalarType::Float, 2, sizes[0], x, order[0], strides[0]);
    ty = rt::Tensor(rt::ScalarType::Float, 2, sizes[1], y, order[1], strides[1]);
  }
};

/// Runs `method` once on `in`; copies the output (6 floats) to `out`. Returns false on any error.
bool run_once(rt::Method& method, Inputs& in, float* out) {
  if (method.set_input(rt::EValue(&in.tx), 0) != rt::Error::Ok) return false;
  if (method.set_input(rt::EValue(&in.ty), 1) != rt::Error::Ok) return false;
  if (method.execute() != rt::Error::Ok) return false;
  const rt::Tensor& t = method.get_output(0).to_tensor();
  if (t.numel() != 6) return false;
  std::memcpy(out, t.const_data_ptr<float>(), sizeof(float) * 6);
  return true;
}
}  // namespace

int main() {
  if (etkit_register_portable_kernels() != 0) {
    std::fprintf(stderr, "FAILED: cannot register the portable kernels\n");
    return 1;
  }
  std::vector<uint8_t> bytes = etkit_test::build_sample_program();
  rt::BufferDataLoader loader(bytes.data(), bytes.size());
  auto program = rt::Program::load(&loader);
  if (!program.ok()) {
    std::fprintf(stderr, "FAILED: load: %s\n", rt::last_error_message());
    return 1;
  }

  // What a lone Method gives for each thread's inputs.
  float want[kThreads][6];
  {
    auto alone = program->load_method("forward");
    if (!alone.ok()) {
      std::fprintf(stderr, "FAILED: load_method: %s\n", rt::last_error_message());
      return 1;
    }
    for (int k = 0; k < kThreads; ++k) {
      Inputs in(k);
      if (!run_once(*alone, in, want[k])) {
        std::fprintf(stderr, "FAILED: reference run %d: %s\n", k, rt::last_error_message());
        return 1;
      }
    }
  }

  std::atomic<int> failures{0}, mismatches{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      auto method = program->load_method("forward");
      if (!method.ok()) {
        failures.fetch_add(1);
        return;
      }
      Inputs in(k);
      float got[6];
      for (int j = 0; j < kExecutions; ++j) {
        if (!run_once(*method, in, got)) {
          failures.fetch_add(1);
          return;
        }
        if (std::memcmp(got, want[k], sizeof(got)) != 0) mismatches.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::printf("%d threads x %d executions: %d failures, %d outputs differing from a lone Method's\n", kThreads,
              kExecutions, failures.load(), mismatches.load());
  const bool ok = failures.load() == 0 && mismatches.load() == 0;
  std::printf("%d passed, %d failed\n", ok ? 1 : 0, ok ? 0 : 1);
  return ok ? 0 : 1;
}
