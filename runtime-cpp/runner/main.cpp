// etkit_runner: loads a .pte with the C++ runtime, runs one method and prints its outputs and the
// median latency.
//
//   etkit_runner --model_path m.pte [--data_path m.ptd] [--method forward] [--input a.npy ...] [--threads N]
//                [--iterations K] [--random] [--output_prefix P] [--list_backends] [--profile]
//                [--memory_limit BYTES] [--loop_limit N] [--progress_every SECONDS]
//                [--etdump_path P [--debug_buffer_path B] [--debug_level L] [--debug_buffer_size BYTES]]
//   etkit_runner --model_path m.bpte --bundled_program [--method NAME] [--rtol R] [--atol A]
//
// A bundled program (.bpte, schema/bundled_program.fbs) given as --model_path runs the program inside it
// (ExecuTorch's get_program_data). With --bundled_program the runner instead runs every test case of
// the .bpte (of every method, or of --method when given) once and prints, per case, PASS or FAIL with the
// largest absolute difference from the expected outputs (|expected - actual| <= atol + rtol * |actual|;
// defaults ExecuTorch's: rtol 1e-5, atol 1e-8); the exit status is 1 when any case fails.
//
// --data_path maps a .ptd data file (schema/flat_tensor.fbs, ExecuTorch's FlatTensor) holding the weights and
// named data the program keeps outside itself (ExportedProgram written with external_constants=True).
// --memory_limit refuses a method whose program file plus planned buffers exceed BYTES (default: the
// machine's RAM; etkit::runtime::set_memory_limit).
// --loop_limit fails an execute whose loops jump back more than N times (default 2^24;
// etkit::runtime::set_loop_limit): a crafted program's endless loop ends with an error instead of a hang.
// --progress_every S prints "progress: N executions, R executions/s over the last T s" every S seconds while
// iterating (bench/soak.py reads it for a long run's rate over time).
// --profile prints the timed events of the last iteration (method, kernels, delegate calls and the
// delegates' own events, e.g. one per GPU dispatch) as a table sorted by start time.
// --etdump_path writes an ETDump of loading and every iteration (schema/etdump.fbs, ExecuTorch's format;
// read it with etkit.devtools.Inspector or ExecuTorch's Inspector). --debug_level none (default without a
// debug buffer), program_outputs or intermediate_outputs (default with --debug_buffer_path) says which
// tensors are copied into a debug buffer of --debug_buffer_size bytes (default 64 MiB), written to
// --debug_buffer_path. --etdump_capacity sets the room for events (default 65536).
// Inputs: one .npy per method input (dtype and shape must match the plan), else all-ones tensors
// (or uniform random in [-1, 1) with --random). Outputs: shape, dtype, first values; with
// --output_prefix each output i is written to P<i>.npy. Exit status: 0 ok, 1 load/run failure, 2 usage.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "etkit/extension/devtools/bundled_program.h"
#include "etkit/extension/devtools/etdump.h"
#include "etkit/extension/flat_tensor/flat_tensor_data_map.h"
#include "etkit/runtime/runtime.h"
#include "etkit/runtime/threadpool.h"
#include "npy.h"
#include "registrations.h"

namespace rt = etkit::runtime;
namespace bp = etkit::bundled_program;

namespace {

struct Options {
  std::string model_path;
  std::string data_path;
  std::string method = "forward";
  std::vector<std::string> inputs;
  int threads = 0;
  unsigned long long memory_limit = 0;  // bytes; 0: the machine's RAM
  unsigned long long loop_limit = 0;    // backward jumps per execute; 0: the runtime's default
  int iterations = 10;
  double progress_every_s = 0;  // 0: no progress lines
  bool random = false;
  bool list_backends = false;
  bool profile = false;
  std::string output_prefix;
  bool bundled_program = false;
  bool method_given = false;
  double rtol = 1e-5;
  double atol = 1e-8;
  std::string etdump_path;
  std::string debug_buffer_path;
  std::string debug_level;  // "", none, program_outputs, intermediate_outputs
  unsigned long long debug_buffer_size = 64ull << 20;
  unsigned long long etdump_capacity = 65536;
};

int usage(const char* msg) {
  if (msg) std::fprintf(stderr, "etkit_runner: %s\n", msg);
  std::fprintf(stderr,
               "usage: etkit_runner --model_path M.pte [--data_path D.ptd] [--method NAME] [--input X.npy ...]\n"
               "                    [--threads N]\n"
               "                    [--iterations K] [--random] [--output_prefix P] [--list_backends] [--profile]\n"
               "                    [--memory_limit BYTES] [--loop_limit N] [--progress_every SECONDS]\n"
               "                    [--etdump_path P [--debug_buffer_path B] [--debug_level none|program_outputs|"
               "intermediate_outputs]\n"
               "                     [--debug_buffer_size BYTES] [--etdump_capacity EVENTS]]\n"
               "       etkit_runner --model_path M.bpte --bundled_program [--method NAME] [--rtol R] [--atol A]\n");
  return 2;
}

/// `v` as a whole number > 0 into `out`, or an error naming `flag` and what it counts.
bool positive_count(const char* flag, const char* unit, const char* v, unsigned long long* out) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (end == v || *end != '\0' || n == 0 || v[0] == '-') {
    std::fprintf(stderr, "etkit_runner: %s takes a number of %s > 0, got '%s'\n", flag, unit, v);
    return false;
  }
  *out = n;
  return true;
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "etkit_runner: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    const char* v = nullptr;
    if (a == "--model_path") {
      if (!(v = value("--model_path"))) return false;
      o->model_path = v;
    } else if (a == "--data_path") {
      if (!(v = value("--data_path"))) return false;
      o->data_path = v;
    } else if (a == "--method") {
      if (!(v = value("--method"))) return false;
      o->method = v;
      o->method_given = true;
    } else if (a == "--bundled_program") {
      o->bundled_program = true;
    } else if (a == "--rtol" || a == "--atol") {
      if (!(v = value(a.c_str()))) return false;
      char* end = nullptr;
      double x = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(x >= 0)) {
        std::fprintf(stderr, "etkit_runner: %s takes a number >= 0, got '%s'\n", a.c_str(), v);
        return false;
      }
      (a == "--rtol" ? o->rtol : o->atol) = x;
    } else if (a == "--input") {
      if (!(v = value("--input"))) return false;
      o->inputs.push_back(v);
    } else if (a == "--threads") {
      if (!(v = value("--threads"))) return false;
      o->threads = std::atoi(v);
    } else if (a == "--memory_limit") {
      if (!(v = value("--memory_limit")) || !positive_count("--memory_limit", "bytes", v, &o->memory_limit)) return false;
    } else if (a == "--loop_limit") {
      if (!(v = value("--loop_limit")) || !positive_count("--loop_limit", "backward jumps", v, &o->loop_limit)) {
        return false;
      }
    } else if (a == "--iterations") {
      if (!(v = value("--iterations"))) return false;
      o->iterations = std::max(1, std::atoi(v));
    } else if (a == "--progress_every") {
      if (!(v = value("--progress_every"))) return false;
      char* end = nullptr;
      o->progress_every_s = std::strtod(v, &end);
      if (end == v || *end != 0 || !(o->progress_every_s > 0)) {
        std::fprintf(stderr, "etkit_runner: --progress_every takes a number of seconds > 0, got '%s'\n", v);
        return false;
      }
    } else if (a == "--output_prefix") {
      if (!(v = value("--output_prefix"))) return false;
      o->output_prefix = v;
    } else if (a == "--random") {
      o->random = true;
    } else if (a == "--list_backends") {
      o->list_backends = true;
    } else if (a == "--profile") {
      o->profile = true;
    } else if (a == "--etdump_path") {
      if (!(v = value("--etdump_path"))) return false;
      o->etdump_path = v;
    } else if (a == "--debug_buffer_path") {
      if (!(v = value("--debug_buffer_path"))) return false;
      o->debug_buffer_path = v;
    } else if (a == "--debug_level") {
      if (!(v = value("--debug_level"))) return false;
      o->debug_level = v;
      if (o->debug_level != "none" && o->debug_level != "program_outputs" &&
          o->debug_level != "intermediate_outputs") {
        std::fprintf(stderr, "etkit_runner: --debug_level must be none, program_outputs or intermediate_outputs, "
                             "got '%s'\n", v);
        return false;
      }
    } else if (a == "--debug_buffer_size" || a == "--etdump_capacity") {
      const std::string flag = a;
      if (!(v = value(flag.c_str()))) return false;
      char* end = nullptr;
      unsigned long long n = std::strtoull(v, &end, 10);
      if (end == v || *end != '\0' || v[0] == '-' || (flag == "--etdump_capacity" && n == 0)) {
        std::fprintf(stderr, "etkit_runner: %s needs a positive integer, got '%s'\n", flag.c_str(), v);
        return false;
      }
      (flag == "--debug_buffer_size" ? o->debug_buffer_size : o->etdump_capacity) = n;
    } else {
      std::fprintf(stderr, "etkit_runner: unknown argument '%s'\n", a.c_str());
      return false;
    }
  }
  return true;
}

int fail(const char* what, rt::Error e) {
  std::fprintf(stderr, "etkit_runner: %s: %s: %s\n", what, rt::error_name(e), rt::last_error_message());
  return 1;
}

std::string shape_str(rt::Span<const rt::SizesType> s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

double element_as_double(const rt::Tensor& t, size_t i) {
  const void* p = t.const_data_ptr();
  switch (t.scalar_type()) {
    case rt::ScalarType::Float: return static_cast<const float*>(p)[i];
    case rt::ScalarType::Double: return static_cast<const double*>(p)[i];
    case rt::ScalarType::Long: return double(static_cast<const int64_t*>(p)[i]);
    case rt::ScalarType::Int: return static_cast<const int32_t*>(p)[i];
    case rt::ScalarType::Short: return static_cast<const int16_t*>(p)[i];
    case rt::ScalarType::Char: return static_cast<const int8_t*>(p)[i];
    case rt::ScalarType::Byte: return static_cast<const uint8_t*>(p)[i];
    case rt::ScalarType::Bool: return static_cast<const bool*>(p)[i] ? 1 : 0;
    default: return NAN;
  }
}

/// Storage for one input tensor built by the runner.
struct InputTensor {
  std::vector<rt::SizesType> sizes;
  std::vector<rt::DimOrderType> dim_order;
  std::vector<rt::StridesType> strides;
  std::vector<uint8_t> data;
  rt::Tensor tensor;
  bool is_tensor = false;  // false: a scalar input, which keeps its value from the program
};

void fill_default(InputTensor& in, rt::ScalarType type, bool random, std::mt19937& rng) {
  size_t n = in.data.size() / std::max<size_t>(1, rt::element_size(type));
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (size_t i = 0; i < n; ++i) {
    double v = random ? dist(rng) : 1.0;
    switch (type) {
      case rt::ScalarType::Float: reinterpret_cast<float*>(in.data.data())[i] = float(v); break;
      case rt::ScalarType::Double: reinterpret_cast<double*>(in.data.data())[i] = v; break;
      case rt::ScalarType::Long: reinterpret_cast<int64_t*>(in.data.data())[i] = random ? int64_t(rng() % 4) : 1; break;
      case rt::ScalarType::Int: reinterpret_cast<int32_t*>(in.data.data())[i] = random ? int32_t(rng() % 4) : 1; break;
      case rt::ScalarType::Bool: reinterpret_cast<bool*>(in.data.data())[i] = random ? (rng() & 1) : true; break;
      default: in.data[i * rt::element_size(type)] = 1; break;
    }
  }
}

void print_profile(const rt::Method& method) {
  std::vector<rt::ProfileEvent> events(method.profiling_events().begin(), method.profiling_events().end());
  std::stable_sort(events.begin(), events.end(), [](const rt::ProfileEvent& a, const rt::ProfileEvent& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  static const char* kKinds[] = {"method", "operator", "delegate", "delegate-internal"};
  const int64_t origin = events.empty() ? 0 : events.front().start_ns;
  std::printf("profile of the last iteration (%zu events, %zu dropped):\n", events.size(),
              method.dropped_profiling_events());
  std::printf("%12s %12s  %-18s %-14s %s\n", "start_ms", "duration_ms", "kind", "backend", "name");
  for (const rt::ProfileEvent& e : events) {
    std::printf("%12.3f %12.3f  %-18s %-14s %s\n", (e.start_ns - origin) / 1e6, (e.end_ns - e.start_ns) / 1e6,
                kKinds[static_cast<int>(e.kind) & 3], e.backend, e.name);
  }
}

/// Runs every test case of the bundled program (of `only`, when not empty); prints one line per case.
/// Returns the exit status: 0 when every case passes, 1 otherwise.
int run_bundled(rt::Program& program, const bp::BundledProgramView& bundle, const std::string& only, double rtol,
                double atol, const rt::NamedDataMap* external_data) {
  size_t passed = 0, failed = 0;
  bool found = only.empty();
  for (size_t s = 0; s < bundle.num_method_test_suites(); ++s) {
    const char* name = bundle.method_name(s);
    if (!only.empty() && only != name) continue;
    found = true;
    auto count = bundle.num_test_cases(name);
    if (!count.ok()) return fail("reading the bundled program", count.error());
    auto method = program.load_method(name, nullptr, nullptr, external_data);
    if (!method.ok()) {
      std::string what = "cannot load method '" + std::string(name) + "'";
      return fail(what.c_str(), method.error());
    }
    for (size_t i = 0; i < count.get(); ++i) {
      rt::Error e = bp::load_bundled_input(*method, bundle, i);
      if (e == rt::Error::Ok) e = method->execute();
      bp::VerifyReport report;
      if (e == rt::Error::Ok) e = bp::verify_method_outputs(*method, bundle, i, rtol, atol, &report);
      if (e == rt::Error::Ok) {
        ++passed;
        std::printf("%s test case %zu: PASS (largest absolute difference %.3g, output %zu)\n", name, i,
                    report.max_abs_diff, report.max_abs_diff_output);
      } else {
        ++failed;
        if (report.failed_output != SIZE_MAX) {
          std::printf("%s test case %zu: FAIL (largest absolute difference %.9g, output %zu): %s\n", name, i,
                      report.failed_max_abs_diff, report.failed_output, rt::last_error_message());
        } else {
          std::printf("%s test case %zu: FAIL (%s): %s\n", name, i, rt::error_name(e), rt::last_error_message());
        }
      }
    }
  }
  if (!found) {
    std::fprintf(stderr, "etkit_runner: the bundled program has no test cases for method '%s'\n", only.c_str());
    return 1;
  }
  std::printf("bundled test cases: %zu passed, %zu failed (rtol %g, atol %g)\n", passed, failed, rtol, atol);
  return failed == 0 && passed > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse(argc, argv, &opt)) return usage(nullptr);

  if (etkit::runner::register_kernels() != 0) return fail("registering portable kernels", rt::Error::Internal);
  for (const auto* b = etkit::runner::linked_backends(); b->function_name != nullptr; ++b) {
    if (b->register_fn() != 0) {
      std::fprintf(stderr, "etkit_runner: %s() failed: %s\n", b->function_name, etkit_backend_registration_error());
      return 1;
    }
  }
  if (opt.list_backends) {
    for (size_t i = 0; i < rt::registered_backend_count(); ++i) std::printf("%s\n", rt::registered_backend_name(i));
    if (opt.model_path.empty()) return 0;
  }
  if (opt.model_path.empty()) return usage("--model_path is required");
  if (opt.memory_limit > 0) rt::set_memory_limit(opt.memory_limit);
  if (opt.loop_limit > 0) rt::set_loop_limit(opt.loop_limit);
  if (opt.threads > 0) {
    rt::Error e = rt::set_kernel_threads(static_cast<size_t>(opt.threads));
    if (e != rt::Error::Ok) return fail("setting the kernels' threads", e);
  }
  if (opt.threads > 0 && rt::registered_backend_count() > 0) {
    rt::Error e = rt::set_backend_option("*", "num_threads", opt.threads);
    if (e != rt::Error::Ok && e != rt::Error::NotSupported) return fail("setting num_threads", e);
  }

  auto loader = rt::MmapDataLoader::from(opt.model_path.c_str());
  if (!loader.ok()) return fail("cannot open model", loader.error());
  // A .bpte: check it whole, then load the program inside it (read in place from the mapping).
  rt::FreeableBuffer bundle_bytes;
  std::optional<bp::BundledProgramView> bundle;
  std::unique_ptr<rt::BufferDataLoader> embedded;
  {
    auto size = loader->size();
    if (!size.ok()) return fail("cannot open model", size.error());
    auto head = loader->load(0, std::min<size_t>(size.get(), 8));
    if (!head.ok()) return fail("cannot read model", head.error());
    if (bp::is_bundled_program(head->data(), head->size())) {
      auto all = loader->load(0, size.get());
      if (!all.ok()) return fail("cannot read model", all.error());
      bundle_bytes = std::move(all.get());
      auto checked = bp::BundledProgramView::from(bundle_bytes.data(), bundle_bytes.size());
      if (!checked.ok()) {
        std::string what = "cannot read bundled program '" + opt.model_path + "'";
        return fail(what.c_str(), checked.error());
      }
      bundle.emplace(checked.get());
      embedded = std::make_unique<rt::BufferDataLoader>(bundle->program().data(), bundle->program().size());
    } else if (opt.bundled_program) {
      std::fprintf(stderr, "etkit_runner: --bundled_program: '%s' is not a bundled program (.bpte)\n",
                   opt.model_path.c_str());
      return 1;
    }
  }
  auto program = embedded ? rt::Program::load(embedded.get()) : rt::Program::load(&loader.get());
  if (!program.ok()) {
    std::string what = "cannot load program '" + opt.model_path + "'";
    return fail(what.c_str(), program.error());
  }
  // --data_path: the .ptd, mapped; every method loaded below reads its external constants and named data from it.
  std::optional<rt::MmapDataLoader> data_loader;
  std::optional<etkit::extension::FlatTensorDataMap> data_map;
  if (!opt.data_path.empty()) {
    auto l = rt::MmapDataLoader::from(opt.data_path.c_str());
    if (!l.ok()) return fail("cannot open data file", l.error());
    data_loader.emplace(std::move(l.get()));
    auto m = etkit::extension::FlatTensorDataMap::load(&*data_loader);
    if (!m.ok()) {
      std::string what = "cannot load data file '" + opt.data_path + "'";
      return fail(what.c_str(), m.error());
    }
    data_map.emplace(std::move(m.get()));
  }
  const rt::NamedDataMap* external_data = data_map ? &*data_map : nullptr;
  if (opt.bundled_program) {
    return run_bundled(program.get(), *bundle, opt.method_given ? opt.method : std::string(), opt.rtol, opt.atol,
                       external_data);
  }
  // --etdump_path: one tracer for loading and every iteration, its debug buffer allocated now.
  std::unique_ptr<etkit::etdump::ETDumpGen> etdump;
  std::vector<uint8_t> debug_buffer;
  if (!opt.etdump_path.empty() && opt.profile) {
    return usage("--profile prints the last iteration's events; --etdump_path writes every iteration's: give one");
  }
  if (!opt.etdump_path.empty()) {
    rt::DebugLevel level = opt.debug_buffer_path.empty() ? rt::DebugLevel::None : rt::DebugLevel::IntermediateOutputs;
    if (opt.debug_level == "none") level = rt::DebugLevel::None;
    if (opt.debug_level == "program_outputs") level = rt::DebugLevel::ProgramOutputs;
    if (opt.debug_level == "intermediate_outputs") level = rt::DebugLevel::IntermediateOutputs;
    etdump = std::make_unique<etkit::etdump::ETDumpGen>(static_cast<size_t>(opt.etdump_capacity));
    if (level != rt::DebugLevel::None) debug_buffer.resize(static_cast<size_t>(opt.debug_buffer_size));
    etdump->set_debug_buffer({debug_buffer.data(), debug_buffer.size()}, level);
  } else if (!opt.debug_buffer_path.empty() || !opt.debug_level.empty()) {
    return usage("--debug_buffer_path and --debug_level need --etdump_path");
  }
  auto method = program->load_method(opt.method.c_str(), nullptr, etdump ? etdump->event_tracer() : nullptr,
                                     external_data);
  if (!method.ok()) {
    std::string what = "cannot load method '" + opt.method + "'";
    return fail(what.c_str(), method.error());
  }
  rt::MethodMeta meta = method->method_meta();
  const size_t num_inputs = method->inputs_size();
  if (!opt.inputs.empty() && opt.inputs.size() != num_inputs) {
    std::fprintf(stderr, "etkit_runner: method '%s' takes %zu inputs, %zu --input files given\n", opt.method.c_str(),
                 num_inputs, opt.inputs.size());
    return 2;
  }
  std::vector<InputTensor> inputs(num_inputs);
  std::mt19937 rng(1234);
  for (size_t i = 0; i < num_inputs; ++i) {
    auto tag = meta.input_tag(i);
    if (!tag.ok()) return fail("reading input metadata", tag.error());
    if (tag.get() != rt::Tag::Tensor) continue;  // scalars keep their values from the program
    auto info = meta.input_tensor_meta(i);
    if (!info.ok()) return fail("reading input metadata", info.error());
    InputTensor& in = inputs[i];
    rt::ScalarType type = info->scalar_type;
    if (!opt.inputs.empty()) {
      etkit::runner::NpyArray arr;
      std::string err;
      if (!etkit::runner::read_npy(opt.inputs[i], &arr, &err)) {
        std::fprintf(stderr, "etkit_runner: input %zu: %s\n", i, err.c_str());
        return 1;
      }
      type = arr.scalar_type;
      in.sizes.assign(arr.shape.begin(), arr.shape.end());
      in.data = std::move(arr.data);
    } else {
      in.sizes.assign(info->sizes.begin(), info->sizes.end());
      in.data.resize(info->nbytes);
      fill_default(in, type, opt.random, rng);
    }
    in.dim_order.resize(in.sizes.size());
    in.strides.resize(in.sizes.size());
    for (size_t d = 0; d < in.sizes.size(); ++d) in.dim_order[d] = static_cast<rt::DimOrderType>(d);
    in.is_tensor = true;
    in.tensor = rt::Tensor(type, in.sizes.size(), in.sizes.data(), in.data.data(), in.dim_order.data(),
                           in.strides.data());
  }
  // Inputs are set before every execute: planned memory may reuse an input's buffer for a later value
  // (as ExecuTorch's memory planner does), so a method's inputs do not survive its execution.
  auto set_inputs = [&]() -> rt::Error {
    for (size_t i = 0; i < num_inputs; ++i) {
      if (!inputs[i].is_tensor) continue;
      rt::Error e = method->set_input(rt::EValue(&inputs[i].tensor), i);
      if (e != rt::Error::Ok) return e;
    }
    return rt::Error::Ok;
  };

  if (opt.profile) {
    rt::Error e = method->enable_profiling(4096);
    if (e != rt::Error::Ok) return fail("enabling profiling", e);
  }
  // The latencies of the last (at most) kLatencySamples iterations, in a ring allocated once: a long run's
  // memory stays flat (bench/soak.py measures it).
  constexpr size_t kLatencySamples = 4096;
  std::vector<double> times_ms(std::min(static_cast<size_t>(opt.iterations), kLatencySamples));
  auto last_report = std::chrono::steady_clock::now();
  int reported = 0;
  for (int it = 0; it < opt.iterations + 1; ++it) {  // first run is warm-up
    rt::Error e = set_inputs();
    if (e != rt::Error::Ok) return fail("setting input", e);
    auto t0 = std::chrono::steady_clock::now();
    e = method->execute();
    auto t1 = std::chrono::steady_clock::now();
    if (e != rt::Error::Ok) return fail("execute failed", e);
    if (it > 0) times_ms[static_cast<size_t>(it - 1) % times_ms.size()] = std::chrono::duration<double, std::milli>(t1 - t0).count();
    const double since = std::chrono::duration<double>(t1 - last_report).count();
    if (opt.progress_every_s > 0 && since >= opt.progress_every_s) {
      std::printf("progress: %d executions, %.1f executions/s over the last %.1f s\n", it + 1,
                  (it + 1 - reported) / since, since);
      std::fflush(stdout);
      last_report = t1;
      reported = it + 1;
    }
  }
  if (opt.progress_every_s > 0 && reported < opt.iterations + 1) {  // the tail since the last line
    const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_report).count();
    std::printf("progress: %d executions, %.1f executions/s over the last %.1f s\n", opt.iterations + 1,
                (opt.iterations + 1 - reported) / std::max(since, 1e-9), since);
    std::fflush(stdout);
  }
  std::sort(times_ms.begin(), times_ms.end());
  double median = times_ms[times_ms.size() / 2];

  for (size_t i = 0; i < method->outputs_size(); ++i) {
    const rt::EValue& v = method->get_output(i);
    if (!v.is_tensor()) {
      if (v.is_int()) std::printf("output %zu: int %lld\n", i, (long long)v.to_int());
      else if (v.is_double()) std::printf("output %zu: double %g\n", i, v.to_double());
      else if (v.is_bool()) std::printf("output %zu: bool %d\n", i, int(v.to_bool()));
      else std::printf("output %zu: %s\n", i, rt::tag_name(v.tag()));
      continue;
    }
    const rt::Tensor& t = v.to_tensor();
    std::printf("output %zu: shape %s dtype %s values [", i, shape_str(t.sizes()).c_str(),
                rt::scalar_type_name(t.scalar_type()));
    size_t shown = std::min<size_t>(t.numel(), 8);
    for (size_t k = 0; k < shown; ++k) std::printf("%s%.6g", k ? ", " : "", element_as_double(t, k));
    std::printf("%s]\n", t.numel() > shown ? ", ..." : "");
    if (!opt.output_prefix.empty()) {
      std::string err;
      std::vector<int32_t> shape(t.sizes().begin(), t.sizes().end());
      std::string path = opt.output_prefix + std::to_string(i) + ".npy";
      if (!etkit::runner::write_npy(path, t.scalar_type(), shape, t.const_data_ptr(), t.nbytes(), &err)) {
        std::fprintf(stderr, "etkit_runner: %s\n", err.c_str());
        return 1;
      }
    }
  }
  if (times_ms.size() < static_cast<size_t>(opt.iterations)) {
    std::printf("median latency: %.3f ms over the last %zu of %d iterations\n", median, times_ms.size(),
                opt.iterations);
  } else {
    std::printf("median latency: %.3f ms over %d iterations\n", median, opt.iterations);
  }
  if (opt.profile) print_profile(*method);
  if (etdump) {
    rt::Error e = etdump->write(opt.etdump_path.c_str(),
                                opt.debug_buffer_path.empty() ? nullptr : opt.debug_buffer_path.c_str());
    if (e != rt::Error::Ok) return fail("writing the ETDump", e);
    const rt::EventTracer& tr = *etdump->event_tracer();
    std::printf("etdump: wrote %s (%zu events, %zu dropped; %zu tensors dropped for lack of debug buffer)\n",
                opt.etdump_path.c_str(), tr.events().size(), tr.dropped(), tr.dropped_debug_values());
    if (!opt.debug_buffer_path.empty()) {
      std::printf("debug buffer: wrote %s (%zu bytes)\n", opt.debug_buffer_path.c_str(), tr.debug_buffer().size());
    }
  }
  return 0;
}
