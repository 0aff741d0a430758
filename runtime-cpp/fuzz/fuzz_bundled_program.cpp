// libFuzzer target of the bundled-program reader (docs/fuzzing.md): each input is a .bpte file.
//
// BundledProgramView::from (full verification of the bundle), then the embedded program through
// Program::load, and for every method test suite: load_method, and per test case load_bundled_input,
// execute and verify_method_outputs, as `etkit_runner --bundled_program` does. Portable kernels and the
// backends of ETKIT_FUZZ_BACKENDS are registered (fuzz/CMakeLists.txt). A refusal or a failed comparison is
// a normal outcome; a sanitizer report, a crash, a hang or a leak is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "etkit/extension/devtools/bundled_program.h"
#include "etkit/runtime/data_loader.h"
#include "etkit/runtime/error.h"
#include "etkit/runtime/program.h"
#include "fuzz_setup.h"

namespace rt = etkit::runtime;
namespace bp = etkit::bundled_program;

namespace {
constexpr size_t kMaxCasesPerSuite = 8;  // enough to reach every path; bounds the time per input
// The same limit as fuzz_program: a program that claims more must be refused (set_memory_limit).
constexpr uint64_t kMemoryLimit = uint64_t{1} << 30;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  etkit::fuzz::set_up_program_target("fuzz_bundled_program", kMemoryLimit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A 16-byte aligned copy of exactly the input's size (inputs are read in place from the bundle).
  std::unique_ptr<uint8_t[]> copy(new uint8_t[size == 0 ? 1 : size]);
  std::copy(data, data + size, copy.get());
  rt::Result<bp::BundledProgramView> bundle = bp::BundledProgramView::from(copy.get(), size);
  if (!bundle.ok()) return 0;
  rt::BufferDataLoader loader(bundle->program().data(), bundle->program().size());
  rt::Result<rt::Program> program = rt::Program::load(&loader);
  if (!program.ok()) return 0;
  for (size_t s = 0; s < bundle->num_method_test_suites(); ++s) {
    const char* name = bundle->method_name(s);
    rt::Result<rt::Method> method = program->load_method(name);
    rt::Result<size_t> cases = bundle->num_test_cases(name);
    if (!method.ok() || !cases.ok()) continue;
    for (size_t c = 0; c < std::min(cases.get(), kMaxCasesPerSuite); ++c) {
      if (bp::load_bundled_input(method.get(), bundle.get(), c, name) != rt::Error::Ok) continue;
      if (method->execute() != rt::Error::Ok) continue;
      bp::VerifyReport report;
      (void)bp::verify_method_outputs(method.get(), bundle.get(), c, 1e-5, 1e-8, &report, name);
    }
  }
  rt::clear_error_message();
  return 0;
}
