// The runtime's thread-safety rule (docs/runtime.md): a loaded Program may be shared by threads, a Method
// may not; each thread loads and runs its own. 8 threads load their Method of one Program at once and
// execute it 1,000 times on inputs of their own; every output must equal, bit for bit, what a lone Method
// computes for the same inputs. `make test-sanitize` also runs it under ThreadSanitizer, which reports a
// data race in the shared Program, the kernel and backend registries, a delegate's shared state (a
// weights cache) or the error-message buffers.
//
//   test_concurrent_methods                 a small portable program built in memory (add, mul)
//   test_concurrent_methods PROGRAM.pte     that program's "forward", with the backends linked into this
//                                           build registered (ETKIT_TEST_BACKENDS, tests/CMakeLists.txt)
//
// Inputs follow the method's declared tensor inputs: Float values from the thread's seed, integer inputs
// 0 or 1 (valid as indices), Bool alternating. Every tensor output is compared byte for byte.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "etkit/runtime/runtime.h"
#include "registrations.h"
#include "test_program_builder.h"

namespace rt = etkit::runtime;

namespace {
constexpr int kThreads = 8;
constexpr int kExecutions = 1000;

/// One thread's inputs: storage, sizes, dim order and strides for every tensor input of the method.
class Inputs {
 public:
  bool build(const rt::MethodMeta& meta, int seed) {
    const size_t n = meta.num_inputs();
    tensors_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      auto info = meta.input_tensor_meta(i);
      if (!info.ok()) return false;  // only tensor inputs are supported here
      Slot& s = slots_.emplace_back();
      s.sizes.assign(info->sizes.begin(), info->sizes.end());
      s.dim_order.assign(info->dim_order.begin(), info->dim_order.end());
      s.strides.resize(s.sizes.size());
      s.data.resize(info->nbytes);
      fill(info->scalar_type, s.data, seed + int(i));
      tensors_[i] = rt::Tensor(info->scalar_type, s.sizes.size(), s.sizes.data(), s.data.data(),
                               s.dim_order.data(), s.strides.data());
    }
    return true;
  }
  bool set(rt::Method& method) {
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (method.set_input(rt::EValue(&tensors_[i]), i) != rt::Error::Ok) return false;
    }
    return true;
  }

 private:
  struct Slot {
    std::vector<int32_t> sizes;
    std::vector<uint8_t> dim_order;
    std::vector<int32_t> strides;
    std::vector<uint8_t> data;
  };
  static void fill(rt::ScalarType type, std::vector<uint8_t>& bytes, int seed) {
    if (type == rt::ScalarType::Float) {
      std::vector<float> v(bytes.size() / sizeof(float));
      for (size_t k = 0; k < v.size(); ++k) v[k] = 0.25f * float(seed) + 0.5f * float(k % 17) - 2.0f;
      std::memcpy(bytes.data(), v.data(), v.size() * sizeof(float));
    } else if (type == rt::ScalarType::Long) {
      std::vector<int64_t> v(bytes.size() / sizeof(int64_t));
      for (size_t k = 0; k < v.size(); ++k) v[k] = int64_t((k + size_t(seed)) % 2);
      std::memcpy(bytes.data(), v.data(), v.size() * sizeof(int64_t));
    } else if (type == rt::ScalarType::Int) {
      std::vector<int32_t> v(bytes.size() / sizeof(int32_t));
      for (size_t k = 0; k < v.size(); ++k) v[k] = int32_t((k + size_t(seed)) % 2);
      std::memcpy(bytes.data(), v.data(), v.size() * sizeof(int32_t));
    } else {  // Bool, bytes and the rest: alternating 0/1 bytes
      for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = uint8_t((k + size_t(seed)) % 2);
    }
  }
  std::vector<Slot> slots_;  // stable addresses: tensors_ points into them
  std::vector<rt::Tensor> tensors_;
};

/// Runs `method` once; appends the bytes of every tensor output to `out`. Returns false on any error.
bool run_once(rt::Method& method, Inputs& in, std::vector<uint8_t>& out) {
  if (!in.set(method) || method.execute() != rt::Error::Ok) return false;
  out.clear();
  for (size_t i = 0; i < method.outputs_size(); ++i) {
    const rt::EValue& v = method.get_output(i);
    if (!v.is_tensor()) continue;
    const rt::Tensor& t = v.to_tensor();
    const auto* p = static_cast<const uint8_t*>(t.const_data_ptr());
    out.insert(out.end(), p, p + t.nbytes());
  }
  return !out.empty();
}

int register_everything() {
  if (etkit::runner::register_kernels() != 0) {
    std::fprintf(stderr, "FAILED: cannot register the portable kernels\n");
    return 1;
  }
  for (const auto* b = etkit::runner::linked_backends(); b->function_name != nullptr; ++b) {
    if (b->register_fn() != 0) {
      std::fprintf(stderr, "FAILED: %s: %s\n", b->function_name, rt::last_error_message());
      return 1;
    }
    std::printf("registered %s\n", b->function_name);
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (register_everything() != 0) return 1;
  // The loader must outlive the Program: either the in-memory sample or the file named on the command line.
  std::vector<uint8_t> bytes;
  std::unique_ptr<rt::DataLoader> loader;
  if (argc > 1) {
    auto file = rt::FileDataLoader::from(argv[1]);
    if (!file.ok()) {
      std::fprintf(stderr, "FAILED: open %s: %s\n", argv[1], rt::last_error_message());
      return 1;
    }
    loader = std::make_unique<rt::FileDataLoader>(std::move(*file));
  } else {
    bytes = etkit_test::build_sample_program();
    loader = std::make_unique<rt::BufferDataLoader>(bytes.data(), bytes.size());
  }
  auto program = rt::Program::load(loader.get());
  if (!program.ok()) {
    std::fprintf(stderr, "FAILED: load: %s\n", rt::last_error_message());
    return 1;
  }
  auto meta = program->method_meta("forward");
  if (!meta.ok()) {
    std::fprintf(stderr, "FAILED: method_meta(forward): %s\n", rt::last_error_message());
    return 1;
  }
  std::vector<std::unique_ptr<Inputs>> inputs;
  for (int k = 0; k < kThreads; ++k) {
    inputs.push_back(std::make_unique<Inputs>());
    if (!inputs.back()->build(*meta, k)) {
      std::fprintf(stderr, "FAILED: forward has an input that is not a tensor\n");
      return 1;
    }
  }

  // What a lone Method gives for each thread's inputs.
  std::vector<std::vector<uint8_t>> want(kThreads);
  {
    auto alone = program->load_method("forward");
    if (!alone.ok()) {
      std::fprintf(stderr, "FAILED: load_method: %s\n", rt::last_error_message());
      return 1;
    }
    for (int k = 0; k < kThreads; ++k) {
      if (!run_once(*alone, *inputs[k], want[k])) {
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
        std::fprintf(stderr, "thread %d: load_method: %s\n", k, rt::last_error_message());
        failures.fetch_add(1);
        return;
      }
      std::vector<uint8_t> got;
      for (int j = 0; j < kExecutions; ++j) {
        if (!run_once(*method, *inputs[k], got)) {
          std::fprintf(stderr, "thread %d: execution %d: %s\n", k, j, rt::last_error_message());
          failures.fetch_add(1);
          return;
        }
        if (got != want[k]) mismatches.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::printf("%s (%zu backends, %zu output bytes): %d threads x %d executions: %d failures, %d outputs differing "
              "from a lone Method's\n", argc > 1 ? argv[1] : "in-memory sample program", meta->num_backends(),
              want[0].size(), kThreads, kExecutions, failures.load(), mismatches.load());
  const bool ok = failures.load() == 0 && mismatches.load() == 0;
  std::printf("%d passed, %d failed\n", ok ? 1 : 0, ok ? 0 : 1);
  return ok ? 0 : 1;
}
