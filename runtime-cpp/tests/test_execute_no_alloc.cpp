// Method::execute must not allocate from the heap (seed page "ExecuTorch Runtime Overview": all
// memory is provided up front). Every operator new/delete and malloc/calloc/realloc in this process
// is counted while `g_counting` is set; executing a portable-only program must count zero, and give
// the right numbers. Under AddressSanitizer (make test-sanitize), which owns malloc, nothing is counted and
// the test checks the numbers only.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <vector>

#include "etkit/extension/devtools/etdump.h"
#include "etkit/extension/flat_tensor/flat_tensor_data_map.h"
#include "etkit/runtime/memory_manager.h"
#include "etkit/runtime/runtime.h"
#include "test_program_builder.h"

#if defined(__SANITIZE_ADDRESS__)
#define ETKIT_COUNT_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ETKIT_COUNT_ALLOCATIONS 0
#endif
#endif
#ifndef ETKIT_COUNT_ALLOCATIONS
#define ETKIT_COUNT_ALLOCATIONS 1
#endif

namespace {
volatile bool g_counting = false;
volatile size_t g_allocations = 0;
}  // namespace

#if ETKIT_COUNT_ALLOCATIONS
extern "C" void* __libc_malloc(size_t);
extern "C" void* __libc_calloc(size_t, size_t);
extern "C" void* __libc_realloc(void*, size_t);
extern "C" void* __libc_memalign(size_t, size_t);
extern "C" void __libc_free(void*);

namespace {
void note() {
  if (g_counting) g_allocations = g_allocations + 1;
}
}  // namespace

extern "C" void* malloc(size_t n) {
  note();
  return __libc_malloc(n);
}
extern "C" void* calloc(size_t a, size_t b) {
  note();
  return __libc_calloc(a, b);
}
extern "C" void* realloc(void* p, size_t n) {
  note();
  return __libc_realloc(p, n);
}
extern "C" void free(void* p) { __libc_free(p); }
extern "C" int posix_memalign(void** out, size_t alignment, size_t n) {
  note();
  *out = __libc_memalign(alignment, n);
  return *out ? 0 : 12;
}
void* operator new(size_t n) {
  note();
  void* p = __libc_malloc(n ? n : 1);
  if (!p) std::abort();
  return p;
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  note();
  return __libc_malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return operator new(n, std::nothrow); }
void operator delete(void* p) noexcept { __libc_free(p); }
void operator delete[](void* p) noexcept { __libc_free(p); }
void operator delete(void* p, size_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t) noexcept { __libc_free(p); }
#endif  // ETKIT_COUNT_ALLOCATIONS

namespace rt = etkit::runtime;

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "FAILED %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond,      \
                   rt::last_error_message());                                         \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

// With a path argument: loads that .pte instead, fills every tensor input with ones and checks that
// executing it allocates nothing (used by tests/runtime on programs made by ExecuTorch). With a second path, a
// .ptd data file: it is mapped, and the method is loaded in caller-owned memory with it; loading then must
// allocate nothing either (the external constants are read in place from the mapping).
static int run_file(const char* path, const char* data_path) {
  auto loader = rt::FileDataLoader::from(path);
  CHECK(loader.ok());
  auto program = rt::Program::load(&loader.get());
  CHECK(program.ok());
  std::vector<rt::MmapDataLoader> data_loader;
  std::vector<etkit::extension::FlatTensorDataMap> data_map;
  std::vector<void*> arenas;
  std::vector<rt::Span<uint8_t>> buffers;
  alignas(64) static uint8_t method_arena[1 << 20], scratch[1 << 16];
  rt::MemoryAllocator method_allocator(sizeof(method_arena), method_arena), temp(sizeof(scratch), scratch);
  std::optional<rt::HierarchicalAllocator> planned;
  std::optional<rt::MemoryManager> memory;
  std::optional<rt::Method> method;
  if (data_path != nullptr) {
    auto dl = rt::MmapDataLoader::from(data_path);
    CHECK(dl.ok());
    data_loader.push_back(std::move(dl.get()));
    auto map = etkit::extension::FlatTensorDataMap::load(&data_loader[0]);
    CHECK(map.ok());
    data_map.push_back(std::move(map.get()));
    auto meta = program->method_meta("forward");
    CHECK(meta.ok());
    for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
      size_t n = static_cast<size_t>(meta->memory_planned_buffer_size(i).get());
      arenas.push_back(std::aligned_alloc(64, (n + 63) / 64 * 64 + 64));
      buffers.push_back({static_cast<uint8_t*>(arenas.back()), n});
    }
    planned.emplace(rt::Span<rt::Span<uint8_t>>{buffers.data(), buffers.size()});
    memory.emplace(&method_allocator, &*planned, &temp);
    g_allocations = 0;
    g_counting = true;
    auto loaded = program->load_method("forward", &*memory, nullptr, &data_map[0]);
    g_counting = false;
    CHECK(loaded.ok());
    method.emplace(std::move(loaded.get()));
    std::printf("%s: heap allocations during load_method with caller memory and a .ptd: %zu\n", path,
                (size_t)g_allocations);
    CHECK(g_allocations == 0);
  } else {
    auto loaded = program->load_method("forward");
    CHECK(loaded.ok());
    method.emplace(std::move(loaded.get()));
  }
  rt::MethodMeta meta = method->method_meta();
  std::vector<std::vector<uint8_t>> data(method->inputs_size());
  std::vector<std::vector<int32_t>> sizes(method->inputs_size());
  std::vector<std::vector<uint8_t>> orders(method->inputs_size());
  std::vector<std::vector<int32_t>> strides(method->inputs_size());
  std::vector<rt::Tensor> tensors(method->inputs_size());
  for (size_t i = 0; i < method->inputs_size(); ++i) {
    auto info = meta.input_tensor_meta(i);
    if (!info.ok()) continue;
    sizes[i].assign(info->sizes.begin(), info->sizes.end());
    orders[i].assign(info->dim_order.begin(), info->dim_order.end());
    strides[i].resize(sizes[i].size());
    data[i].assign(info->nbytes, 0);  // zeros are valid for every dtype (and every index input)
    tensors[i] = rt::Tensor(info->scalar_type, sizes[i].size(), sizes[i].data(), data[i].data(), orders[i].data(),
                            strides[i].data());
    CHECK(method->set_input(rt::EValue(&tensors[i]), i) == rt::Error::Ok);
  }
  g_allocations = 0;
  g_counting = true;
  rt::Error e = rt::Error::Ok;
  for (int i = 0; i < 3 && e == rt::Error::Ok; ++i) e = method->execute();
  g_counting = false;
  CHECK(e == rt::Error::Ok);
  std::printf("%s: heap allocations during 3 x Method::execute: %zu\n", path, (size_t)g_allocations);
  CHECK(g_allocations == 0);
  method.reset();  // the method before the buffers it uses
  for (void* a : arenas) std::free(a);
  return 0;
}

int main(int argc, char** argv) {
  CHECK(etkit_register_portable_kernels() == 0);
  if (argc > 1) return run_file(argv[1], argc > 2 ? argv[2] : nullptr);
  std::vector<uint8_t> bytes = etkit_test::build_sample_program();
  rt::BufferDataLoader loader(bytes.data(), bytes.size());
  auto program = rt::Program::load(&loader);
  CHECK(program.ok());
  auto method = program->load_method("forward");
  CHECK(method.ok());

  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {10, 20, 30, 40, 50, 60};
  int32_t sizes_x[2] = {2, 3}, sizes_y[2] = {2, 3};
  uint8_t order_x[2] = {0, 1}, order_y[2] = {0, 1};
  int32_t strides_x[2], strides_y[2];
  rt::Tensor tx(rt::ScalarType::Float, 2, sizes_x, x, order_x, strides_x);
  rt::Tensor ty(rt::ScalarType::Float, 2, sizes_y, y, order_y, strides_y);
  CHECK(method->set_input(rt::EValue(&tx), 0) == rt::Error::Ok);
  CHECK(method->set_input(rt::EValue(&ty), 1) == rt::Error::Ok);

  g_allocations = 0;
  g_counting = true;
  rt::Error e = rt::Error::Ok;
  for (int i = 0; i < 3 && e == rt::Error::Ok; ++i) e = method->execute();
  g_counting = false;
  CHECK(e == rt::Error::Ok);
  if (ETKIT_COUNT_ALLOCATIONS) {
    std::printf("heap allocations during 3 x Method::execute: %zu\n", (size_t)g_allocations);
  } else {
    std::printf("heap allocations not counted: AddressSanitizer owns malloc\n");
  }
  CHECK(g_allocations == 0);

  const rt::Tensor& out = method->get_output(0).to_tensor();
  CHECK(out.dim() == 2 && out.size(0) == 3 && out.size(1) == 2);
  for (int i = 0; i < 6; ++i) {
    float want = (x[i] + y[i]) * 0.5f;
    CHECK(std::fabs(out.const_data_ptr<float>()[i] - want) < 1e-6f);
  }
  // With an ETDump tracer at the most detailed debug level, execute() still allocates nothing: events go
  // to the tracer's storage, tensors to the caller's debug buffer (include/etkit/runtime/event_tracer.h).
  {
    etkit::etdump::ETDumpGen etdump(256);
    std::vector<uint8_t> debug(4096);
    etdump.set_debug_buffer({debug.data(), debug.size()}, rt::DebugLevel::IntermediateOutputs);
    auto traced = program->load_method("forward", etdump.event_tracer());
    CHECK(traced.ok());
    CHECK(traced->set_input(rt::EValue(&tx), 0) == rt::Error::Ok);
    CHECK(traced->set_input(rt::EValue(&ty), 1) == rt::Error::Ok);
    g_allocations = 0;
    g_counting = true;
    for (int i = 0; i < 3 && e == rt::Error::Ok; ++i) e = traced->execute();
    g_counting = false;
    CHECK(e == rt::Error::Ok);
    if (ETKIT_COUNT_ALLOCATIONS) {
      std::printf("heap allocations during 3 x traced Method::execute: %zu\n", (size_t)g_allocations);
    }
    CHECK(g_allocations == 0);
    const rt::EventTracer& tr = *etdump.event_tracer();
    CHECK(tr.dropped() == 0 && tr.dropped_debug_values() == 0);
    // The last logged value is the method output, a copy of the computed tensor.
    const rt::ProfileEvent& last = tr.events()[tr.events().size() - 1];
    CHECK(last.kind == rt::ProfileEventKind::Debug && last.value.is_output && last.value.offset >= 0);
    const float* logged = reinterpret_cast<const float*>(debug.data() + last.value.offset);
    for (int i = 0; i < 6; ++i) CHECK(std::fabs(logged[i] - (x[i] + y[i]) * 0.5f) < 1e-6f);
    std::vector<uint8_t> file = etdump.get_etdump_data();
    CHECK(etkit::etdump::verify(file.data(), file.size()) == rt::Error::Ok);
    file.resize(file.size() - 3);
    CHECK(etkit::etdump::verify(file.data(), file.size()) == rt::Error::InvalidProgram);
  }
  // Caller-owned memory (memory_manager.h): planned tensors live in the caller's buffers, kernels take scratch
  // from the caller's temp allocator, loading allocates less (no planned buffer, no temp arena of its own) and
  // executing still allocates nothing. A missing, short or misaligned buffer is refused, naming it.
  {
    rt::MethodMeta meta = program->method_meta("forward").get();
    CHECK(meta.num_memory_planned_buffers() == 1);
    const size_t planned_size = static_cast<size_t>(meta.memory_planned_buffer_size(0).get());
    alignas(64) static uint8_t arena[4096];
    alignas(64) static uint8_t scratch[1024];
    CHECK(planned_size > 0 && planned_size <= sizeof(arena));
    rt::Span<uint8_t> buffers[1] = {{arena, planned_size}};
    rt::HierarchicalAllocator planned({buffers, 1});
    rt::MemoryAllocator temp(sizeof(scratch), scratch);
    rt::MemoryManager memory(nullptr, &planned, &temp);

    g_allocations = 0;
    g_counting = true;
    auto own = program->load_method("forward");
    g_counting = false;
    const size_t own_allocations = g_allocations;
    g_allocations = 0;
    g_counting = true;
    auto caller = program->load_method("forward", &memory);
    g_counting = false;
    CHECK(own.ok() && caller.ok());
    if (ETKIT_COUNT_ALLOCATIONS) {
      std::printf("heap allocations during load_method: %zu own memory, %zu caller-owned\n", own_allocations,
                  (size_t)g_allocations);
      CHECK(g_allocations + 2 <= own_allocations);
    }
    // with a method allocator too, everything comes from the caller: no heap allocation at all from load_method
    // on, for this portable-only program (issue 23: "no heap allocation after load_program")
    alignas(64) static uint8_t method_arena[16384];
    rt::MemoryAllocator method_allocator(sizeof(method_arena), method_arena);
    rt::MemoryManager all_memory(&method_allocator, &planned, &temp);
    const size_t without_method_allocator = g_allocations;
    g_allocations = 0;
    g_counting = true;
    auto caller_all = program->load_method("forward", &all_memory);
    g_counting = false;
    CHECK(caller_all.ok() && method_allocator.used() > 0);
    if (ETKIT_COUNT_ALLOCATIONS) {
      std::printf("heap allocations during load_method with a method allocator: %zu (%zu bytes from it)\n",
                  (size_t)g_allocations, method_allocator.used());
      CHECK(g_allocations == 0 && without_method_allocator > 0);  // every byte from the caller's memory
    }
    for (size_t small : {size_t(64), method_allocator.used() - 8}) {  // too small for the state, or by a little
      alignas(64) static uint8_t tiny_arena[16384];
      rt::MemoryAllocator tiny(small, tiny_arena);
      rt::MemoryManager tiny_memory(&tiny, &planned, &temp);
      auto starved = program->load_method("forward", &tiny_memory);
      CHECK(!starved.ok() && starved.error() == rt::Error::MemoryAllocationFailed);
      CHECK(std::strstr(rt::last_error_message(), "method allocator") != nullptr);
    }
    CHECK(caller->set_input(rt::EValue(&tx), 0) == rt::Error::Ok);
    CHECK(caller->set_input(rt::EValue(&ty), 1) == rt::Error::Ok);
    g_allocations = 0;
    g_counting = true;
    for (int i = 0; i < 3 && e == rt::Error::Ok; ++i) e = caller->execute();
    g_counting = false;
    CHECK(e == rt::Error::Ok && g_allocations == 0);
    const rt::Tensor& planned_out = caller->get_output(0).to_tensor();
    const uint8_t* where = static_cast<const uint8_t*>(planned_out.const_data_ptr());
    CHECK(where >= arena && where + planned_out.nbytes() <= arena + planned_size);  // in the caller's arena
    for (int i = 0; i < 6; ++i) CHECK(std::fabs(planned_out.const_data_ptr<float>()[i] - (x[i] + y[i]) * 0.5f) < 1e-6f);

    rt::Span<uint8_t> short_buffers[1] = {{arena, planned_size - 1}};
    rt::HierarchicalAllocator short_planned({short_buffers, 1});
    rt::MemoryManager short_memory(nullptr, &short_planned, &temp);
    auto refused = program->load_method("forward", &short_memory);
    CHECK(!refused.ok() && refused.error() == rt::Error::InvalidArgument);
    CHECK(std::strstr(rt::last_error_message(), "planned buffer 0 (mem_id 1) is") != nullptr);
    rt::HierarchicalAllocator none({buffers, 0});
    rt::MemoryManager no_buffers(nullptr, &none, &temp);
    auto missing = program->load_method("forward", &no_buffers);
    CHECK(!missing.ok() && std::strstr(rt::last_error_message(), "has 0 buffer(s)") != nullptr);
    rt::Span<uint8_t> odd[1] = {{arena + 8, planned_size}};
    rt::HierarchicalAllocator misaligned({odd, 1});
    rt::MemoryManager misaligned_memory(nullptr, &misaligned, &temp);
    auto unaligned = program->load_method("forward", &misaligned_memory);
    CHECK(!unaligned.ok() && std::strstr(rt::last_error_message(), "is not 16-byte aligned") != nullptr);
  }
  // Sanity: the counter does see allocations when they happen.
  g_counting = true;
  void* p = std::malloc(16);
  g_counting = false;
  std::free(p);
  CHECK(g_allocations == (ETKIT_COUNT_ALLOCATIONS ? 1u : 0u));
  std::printf("1 passed, 0 failed\n");
  return 0;
}
