// The bare-metal runner: runs the program embedded in model_image.cpp once on its embedded inputs, in
// static memory, and prints the outputs through semihosting (newlib's rdimon: printf reaches the host's
// stdout, e.g. QEMU's). Built by baremetal/CMakeLists.txt for Cortex-M55 (`etkit runner build --target
// cortex-m55`).
//
// It prints, one line each (parsed by etkit/native/baremetal.py):
//   etkit-output <index> <ScalarType value> <sizes, 'x'-joined> <bytes, hex>   a tensor output
//   etkit-output <index> scalar <value>                                        an int, double or bool output
//   etkit-memory planned=<bytes per arena, ','-joined> method=<bytes used> temp=<peak bytes>
//   etkit-heap start_up=<heap allocations up to Program::load, included> after_load_program=<those in
//              load_method, set_input and execute>
//   etkit-status ok | etkit-status error <message>
#include <cstdio>
#include <cstdlib>

#include "etkit/runtime/memory_manager.h"
#include "etkit/runtime/platform.h"
#include "etkit/runtime/runtime.h"
#include "model_image.h"

namespace rt = etkit::runtime;

extern "C" size_t etkit_heap_allocations(void);  // startup.c: malloc calls so far

namespace {

constexpr size_t kMaxInputs = 32;
constexpr size_t kMaxDims = 16;
constexpr size_t kMaxArenas = 8;

/// The temp allocator, keeping the most bytes an instruction used (reset() runs before each one).
class PeakAllocator final : public rt::MemoryAllocator {
 public:
  using rt::MemoryAllocator::MemoryAllocator;
  void* allocate(size_t size, size_t alignment) override {
    void* p = rt::MemoryAllocator::allocate(size, alignment);
    if (used() > peak_) peak_ = used();
    return p;
  }
  size_t peak() const { return peak_; }

 private:
  size_t peak_ = 0;
};

// newlib as Debian builds it prints no C99 length modifiers (%zu prints "zu"): sizes go through %lu.
unsigned long ul(size_t v) { return static_cast<unsigned long>(v); }

int fail(const char* what) {
  std::printf("etkit-status error %s: %s\n", what, rt::last_error_message());
  return 1;
}

void print_tensor(size_t index, const rt::Tensor& t) {
  std::printf("etkit-output %lu %d ", ul(index), static_cast<int>(t.scalar_type()));
  for (size_t d = 0; d < t.dim(); ++d) std::printf(d ? "x%d" : "%d", static_cast<int>(t.sizes()[d]));
  if (t.dim() == 0) std::printf("-");
  std::printf(" ");
  const uint8_t* bytes = t.const_data_ptr<uint8_t>();
  for (size_t i = 0; i < t.nbytes(); ++i) std::printf("%02x", bytes[i]);
  std::printf("\n");
}

}  // namespace

// The PAL port (platform.h): the runtime's log lines go to the host's stderr through semihosting; the
// minimal PAL's other defaults (zero time, no PAL heap) stay.
extern "C" void et_pal_emit_log_message(et_timestamp_t, et_pal_log_level_t level, const char* filename,
                                        const char*, size_t line, const char* message, size_t) {
  std::fprintf(stderr, "%c etkit %s:%lu] %s\n", static_cast<char>(level), filename, ul(line), message);
}

extern "C" void et_pal_abort(void) { std::exit(3); }

int main() {
  rt::runtime_init();
  if (rt::register_kernels(rt::Span<const rt::Kernel>(etkit_model_kernels, etkit_model_kernel_count)) !=
      rt::Error::Ok) {
    return fail("registering the kernels");
  }
  rt::BufferDataLoader loader(etkit_model_pte, etkit_model_pte_size);
  auto program = rt::Program::load(&loader);
  if (!program.ok()) return fail("Program::load");
  const size_t heap_at_load = etkit_heap_allocations();

  auto meta = program->method_meta(etkit_model_method);
  if (!meta.ok()) return fail("method_meta");
  const size_t num_arenas = meta->num_memory_planned_buffers();
  if (num_arenas > kMaxArenas) {
    std::printf("etkit-status error the program plans %lu arenas; this runner holds %lu\n", ul(num_arenas), ul(kMaxArenas));
    return 1;
  }
  static rt::Span<uint8_t> arenas[kMaxArenas];
  size_t offset = 0;
  for (size_t i = 0; i < num_arenas; ++i) {
    const size_t size = static_cast<size_t>(meta->memory_planned_buffer_size(i).get());
    if (size > etkit_planned_pool_size - offset) {
      std::printf("etkit-status error arena %lu needs %lu bytes; %lu of the planned pool are left\n", ul(i), ul(size),
                  ul(etkit_planned_pool_size - offset));
      return 1;
    }
    arenas[i] = {etkit_planned_pool + offset, size};
    offset += (size + 15) / 16 * 16;
  }
  rt::HierarchicalAllocator planned(rt::Span<rt::Span<uint8_t>>(arenas, num_arenas));
  rt::MemoryAllocator method_allocator(etkit_method_pool_size, etkit_method_pool);
  PeakAllocator temp(etkit_temp_pool_size, etkit_temp_pool);
  rt::MemoryManager memory(&method_allocator, &planned, &temp);
  auto method = program->load_method(etkit_model_method, &memory);
  if (!method.ok()) return fail("load_method");

  if (etkit_model_num_inputs != method->inputs_size() || etkit_model_num_inputs > kMaxInputs) {
    std::printf("etkit-status error the image holds %lu inputs; the method takes %lu\n", ul(etkit_model_num_inputs),
                ul(method->inputs_size()));
    return 1;
  }
  static int32_t sizes[kMaxInputs][kMaxDims], strides[kMaxInputs][kMaxDims];
  static uint8_t dim_order[kMaxInputs][kMaxDims];
  static rt::Tensor tensors[kMaxInputs];
  for (size_t i = 0; i < etkit_model_num_inputs; ++i) {
    auto info = meta->input_tensor_meta(i);
    if (!info.ok()) return fail("input_tensor_meta (only tensor inputs are embedded)");
    if (info->sizes.size() > kMaxDims || info->nbytes != etkit_model_inputs[i].nbytes) {
      std::printf("etkit-status error input %lu: %lu bytes embedded, %lu planned\n", ul(i), ul(etkit_model_inputs[i].nbytes),
                  ul(info->nbytes));
      return 1;
    }
    for (size_t d = 0; d < info->sizes.size(); ++d) {
      sizes[i][d] = info->sizes[d];
      dim_order[i][d] = info->dim_order[d];
    }
    tensors[i] = rt::Tensor(info->scalar_type, info->sizes.size(), sizes[i], etkit_model_inputs[i].data,
                            dim_order[i], strides[i]);
    if (method->set_input(rt::EValue(&tensors[i]), i) != rt::Error::Ok) return fail("set_input");
  }
  if (method->execute() != rt::Error::Ok) return fail("execute");
  // load_method, set_input and execute: what must run in the static arenas alone (counted before any printf)
  const size_t heap_after_load = etkit_heap_allocations() - heap_at_load;

  for (size_t i = 0; i < method->outputs_size(); ++i) {
    const rt::EValue& v = method->get_output(i);
    if (v.is_tensor()) {
      print_tensor(i, v.to_tensor());
    } else if (v.is_int()) {
      std::printf("etkit-output %lu scalar %lld\n", ul(i), static_cast<long long>(v.to_int()));
    } else if (v.is_double()) {
      std::printf("etkit-output %lu scalar %.17g\n", ul(i), v.to_double());
    } else if (v.is_bool()) {
      std::printf("etkit-output %lu scalar %d\n", ul(i), v.to_bool() ? 1 : 0);
    } else {
      std::printf("etkit-output %lu none\n", ul(i));
    }
  }
  std::printf("etkit-memory planned=");
  for (size_t i = 0; i < num_arenas; ++i) std::printf(i ? ",%lu" : "%lu", ul(arenas[i].size()));
  std::printf(" method=%lu temp=%lu\n", ul(method_allocator.used()), ul(temp.peak()));
  std::printf("etkit-heap start_up=%lu after_load_program=%lu\n", ul(heap_at_load), ul(heap_after_load));
  std::printf("etkit-status ok\n");
  return 0;
}
