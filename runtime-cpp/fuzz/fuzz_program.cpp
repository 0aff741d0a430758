// libFuzzer target of the program loader (docs/fuzzing.md): each input is a whole .pte file.
//
// Program::load with full verification, then for every method: method_meta, load_method, inputs of the
// declared shapes and dtypes (zero-filled; scalars keep their stored value), caller memory for outputs
// the plan leaves unplanned, and one execute. Portable kernels and every backend this build links
// (ETKIT_FUZZ_BACKENDS, runner/registrations_all.cpp.in) are registered. A refusal is a normal outcome;
// a sanitizer report, a crash, a hang or a leak is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "etkit/runtime/data_loader.h"
#include "etkit/runtime/error.h"
#include "etkit/runtime/evalue.h"
#include "etkit/runtime/method.h"
#include "etkit/runtime/program.h"
#include "etkit/runtime/tensor.h"
#include "fuzz_setup.h"

namespace rt = etkit::runtime;

namespace {

constexpr size_t kMaxIoBytes = size_t{64} << 20;  // all inputs and caller-owned outputs of one method
// What a method may claim (the file plus its planned buffers; set_memory_limit): the runtime must refuse
// a program that claims more, under libFuzzer's own limit (-rss_limit_mb / -malloc_limit_mb, 2560 MiB).
constexpr uint64_t kMemoryLimit = uint64_t{1} << 30;

struct OwnedTensor {
  std::vector<rt::SizesType> sizes;
  std::vector<rt::DimOrderType> dim_order;
  std::vector<rt::StridesType> strides;
  std::vector<uint8_t> data;
  rt::Tensor tensor;
};

void run_method(const rt::Program& program, const char* name) {
  rt::Result<rt::MethodMeta> meta = program.method_meta(name);
  if (!meta.ok()) return;
  // Sizes come from the file: refuse to allocate more than the cap before loading anything.
  size_t io_bytes = 0;
  for (size_t i = 0; i < meta->num_inputs(); ++i) {
    rt::Result<rt::TensorInfo> info = meta->input_tensor_meta(i);
    if (info.ok()) io_bytes += info->nbytes;
  }
  for (size_t i = 0; i < meta->num_outputs(); ++i) {
    rt::Result<rt::TensorInfo> info = meta->output_tensor_meta(i);
    if (info.ok() && !info->is_memory_planned) io_bytes += info->nbytes;
  }
  if (io_bytes > kMaxIoBytes) return;

  rt::Result<rt::Method> method = program.load_method(name);
  if (!method.ok()) return;

  std::vector<std::unique_ptr<OwnedTensor>> owned;
  for (size_t i = 0; i < meta->num_inputs(); ++i) {
    rt::Result<rt::TensorInfo> info = meta->input_tensor_meta(i);
    if (!info.ok()) continue;  // a scalar input keeps the value stored in the program
    auto t = std::make_unique<OwnedTensor>();
    t->sizes.assign(info->sizes.begin(), info->sizes.end());
    t->dim_order.resize(t->sizes.size());
    t->strides.resize(t->sizes.size());
    for (size_t d = 0; d < t->sizes.size(); ++d) t->dim_order[d] = static_cast<rt::DimOrderType>(d);
    t->data.assign(info->nbytes == 0 ? 1 : info->nbytes, 0);
    t->tensor = rt::Tensor(info->scalar_type, t->sizes.size(), t->sizes.data(), t->data.data(),
                           t->dim_order.data(), t->strides.data());
    if (method->set_input(rt::EValue(&t->tensor), i) != rt::Error::Ok) return;
    owned.push_back(std::move(t));
  }
  std::vector<std::vector<uint8_t>> outputs;
  for (size_t i = 0; i < meta->num_outputs(); ++i) {
    rt::Result<rt::TensorInfo> info = meta->output_tensor_meta(i);
    if (!info.ok() || info->is_memory_planned) continue;
    outputs.emplace_back(info->nbytes == 0 ? 1 : info->nbytes, 0);
    (void)method->set_output_data_ptr(outputs.back().data(), outputs.back().size(), i);
  }
  (void)method->execute();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  etkit::fuzz::set_up_program_target("fuzz_program", kMemoryLimit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The loader reads the file in place, so the bytes are copied to a block of exactly their size.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[size == 0 ? 1 : size]);
  std::copy(data, data + size, copy.get());
  rt::BufferDataLoader loader(copy.get(), size);
  rt::Result<rt::Program> program = rt::Program::load(&loader, rt::Program::Verification::InternalConsistency);
  if (!program.ok()) return 0;
  for (size_t m = 0; m < program->num_methods(); ++m) {
    rt::Result<const char*> name = program->get_method_name(m);
    if (name.ok()) run_method(program.get(), name.get());
  }
  rt::clear_error_message();
  return 0;
}
