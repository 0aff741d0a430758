// Host harness for the delegate (src/ethosu_backend.cpp), built by tests/test_ethosu_payload_reader_cpp.py with
// the stand-in driver header of tests/fake_driver and linked with the etkit runtime. It defines the three
// driver functions as a simulated NPU, registers the backend, runs init() and execute() on a payload
// and checks what the delegate hands to the driver and copies back.
//
//   ethosu_backend_main PAYLOAD SCENARIO [ESTIMATES KEY]
//
// SCENARIO: run (two executions), misaligned (payload at an odd address), init (one execution; used for
// payloads init() must refuse), bad-dtype (input 0 is Float), bad-elem (input 0 has 2-byte elements where
// the record says 1), bad-numel (input 0 one element short), bad-args (last argument missing), not-tensor
// (input 0 is an int), no-temp (no temp allocator), small-temp (temp allocator one byte short of the
// scratch), busy (no free driver), npu-error (the run fails), traced (two executions with an event tracer;
// ESTIMATES, a layer-estimates file, is the program's named data under KEY: see layer_estimates.h).
//
// Prints "REGISTER <code>", "PAYLOAD in-place|copied", one "INVOKE ..." line per NPU run, with a tracer one
// "EVENT <run> <delegate debug id> <duration ns> <label>" line per delegate event, then "OK <runs>"
// and exits 0; or "INIT ERROR: <message>" / "EXECUTE ERROR: <message>" and exits 1. A delegate that hands
// the driver the wrong bytes or copies back the wrong ones makes it print "FAIL: <what>" and exit 3.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <ethosu_driver.h>

#include "etkit/runtime/backend_interface.h"
#include "etkit/runtime/error.h"
#include "etkit/runtime/event_tracer.h"
#include "etkit/runtime/named_data_map.h"
#include "etkit/runtime/scalar_type.h"
#include "etkit/runtime/tensor.h"
#include "etkit_ethosu/register.h"
#include "etkit_ethosu/vela_payload.h"

namespace rt = etkit::runtime;
using etkit_ethosu::VelaIO;

namespace {

[[noreturn]] void fail(const char* what) {
  std::printf("FAIL: %s\n", what);
  std::fflush(stdout);
  std::exit(3);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// ------------------------------------------------------------------------------------ simulated NPU

struct Npu {
  etkit_ethosu::VelaPayloadView expected;  // the harness's own reading of the payload file
  std::vector<std::vector<uint8_t>> inputs;   // what the delegate must have copied to scratch
  std::vector<std::vector<uint8_t>> outputs;  // what the NPU wrote, filled by ethosu_invoke_v3
  bool busy = false;
  int status = 0;
  bool reserved = false;
  int run = 0;
  int64_t busy_ns = 0;
} g_npu;

alignas(8) unsigned char g_driver_storage[8];  // the address stands for the one driver instance

}  // namespace

extern "C" ethosu_driver* ethosu_reserve_driver(void) {
  if (g_npu.busy) return nullptr;
  if (g_npu.reserved) fail("the driver was reserved twice without a release");
  g_npu.reserved = true;
  return reinterpret_cast<ethosu_driver*>(g_driver_storage);
}

extern "C" void ethosu_release_driver(ethosu_driver* drv) {
  if (drv != reinterpret_cast<ethosu_driver*>(g_driver_storage) || !g_npu.reserved) fail("bad driver release");
  g_npu.reserved = false;
}

extern "C" int ethosu_invoke_v3(ethosu_driver* drv, const void* custom_data_ptr, const int custom_data_size,
                                uint64_t* const base_addr, const size_t* base_addr_size, const int num_base_addr,
                                void* user_arg) {
  const etkit_ethosu::VelaPayloadView& p = g_npu.expected;
  if (drv != reinterpret_cast<ethosu_driver*>(g_driver_storage) || !g_npu.reserved) fail("invoke without a driver");
  if (user_arg != nullptr) fail("user_arg is not null");
  if (!aligned16(custom_data_ptr)) fail("the command stream is not 16-byte aligned");
  if (custom_data_size < 0 || static_cast<size_t>(custom_data_size) != p.cmd_data.size ||
      std::memcmp(custom_data_ptr, p.cmd_data.data, p.cmd_data.size) != 0) {
    fail("the command stream differs from the payload's");
  }
  if (num_base_addr != 3) fail("expected 3 base addresses");
  const auto* weights = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(base_addr[0]));
  auto* scratch = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(base_addr[1]));
  if (!aligned16(weights) || base_addr_size[0] != p.weight_data.size ||
      std::memcmp(weights, p.weight_data.data, p.weight_data.size) != 0) {
    fail("base address 0 is not the payload's weights");
  }
  if (scratch == nullptr || !aligned16(scratch) || base_addr_size[1] != p.scratch_size) {
    fail("base address 1 is not 16-byte aligned scratch of scratch_size bytes");
  }
  if (base_addr[2] != 0 || base_addr_size[2] != 0) fail("fast scratch given although the firmware defines none");
  std::printf("INVOKE cmd=%d weights=%zu scratch=%zu\n", custom_data_size, base_addr_size[0], base_addr_size[1]);
  if (g_npu.busy_ns > 0) {  // a traced run takes measurable time
    const int64_t until = rt::EventTracer::now_ns() + g_npu.busy_ns;
    while (rt::EventTracer::now_ns() < until) {
    }
  }

  // Each input must be at scratch + offset; snapshot input 0 before any output overwrites shared bytes.
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const std::vector<uint8_t>& in = g_npu.inputs[i];
    if (std::memcmp(scratch + p.inputs[i].offset, in.data(), in.size()) != 0) fail("an input is not in scratch");
  }
  const std::vector<uint8_t> source = p.inputs.empty() ? std::vector<uint8_t>{0} : g_npu.inputs[0];
  // "Compute": output j, byte k = input0[k mod size] + 7 (j + 1) + run, written to scratch + offset.
  g_npu.outputs.assign(p.outputs.size(), {});
  for (size_t j = 0; j < p.outputs.size(); ++j) {
    uint64_t nbytes = 0;
    etkit_ethosu::vela_io_nbytes(p.outputs[j], &nbytes);
    std::vector<uint8_t>& out = g_npu.outputs[j];
    out.resize(static_cast<size_t>(nbytes));
    for (size_t k = 0; k < out.size(); ++k) {
      out[k] = static_cast<uint8_t>(source[k % source.size()] + 7 * (j + 1) + g_npu.run);
    }
    std::memcpy(scratch + p.outputs[j].offset, out.data(), out.size());
  }
  return g_npu.status;
}

namespace {

// ------------------------------------------------------------------------------------ tensors

/// A 6-D contiguous tensor shaped like `io` (the last dimension shortened by `shrink`) and its EValue.
struct OwnedTensor {
  rt::SizesType sizes[6];
  rt::DimOrderType dim_order[6] = {0, 1, 2, 3, 4, 5};
  rt::StridesType strides[6];
  std::vector<uint8_t> data;
  rt::Tensor tensor;
  rt::EValue value;

  OwnedTensor(const VelaIO& io, rt::ScalarType type, int shrink) {
    size_t numel = 1;
    for (int d = 0; d < 6; ++d) {
      sizes[d] = io.shape[d] - (d == 5 ? shrink : 0);
      numel *= static_cast<size_t>(sizes[d]);
    }
    data.assign(numel * rt::element_size(type), 0);  // exact size: AddressSanitizer sees any overrun
    tensor = rt::Tensor(type, 6, sizes, data.data(), dim_order, strides);
    value = rt::EValue(&tensor);
  }
};

rt::ScalarType type_for(int32_t elem_size) {
  switch (elem_size) {
    case 1: return rt::ScalarType::Char;
    case 2: return rt::ScalarType::Short;
    case 4: return rt::ScalarType::Int;
    default: return rt::ScalarType::Long;  // 8: no NPU type has this size; the delegate refuses it
  }
}

// ------------------------------------------------------------------------------------ payload memory

struct PayloadMemory {
  void* block = nullptr;
  bool freed = false;
};

void free_payload(void* context, void* data, size_t size) {
  (void)data;
  (void)size;
  auto* memory = static_cast<PayloadMemory*>(context);
  std::free(memory->block);
  memory->block = nullptr;
  memory->freed = true;
}

/// The program's named data: one key (the layer estimates' blob), or none.
class OneKeyMap final : public rt::NamedDataMap {
 public:
  OneKeyMap(std::string key, std::vector<uint8_t> bytes) : key_(std::move(key)), bytes_(std::move(bytes)) {}
  rt::Result<rt::FreeableBuffer> get_data(const char* key) const override {
    if (key_.empty() || key_ != key) return rt::set_error(rt::Error::NotFound, "no named data '%s'", key);
    return rt::FreeableBuffer(bytes_.data(), bytes_.size(), nullptr, nullptr);
  }
  rt::Result<size_t> get_num_keys() const override { return key_.empty() ? 0 : 1; }
  rt::Result<const char*> get_key(size_t index) const override {
    if (index != 0 || key_.empty()) return rt::set_error(rt::Error::InvalidArgument, "no key %zu", index);
    return key_.c_str();
  }

 private:
  std::string key_;
  std::vector<uint8_t> bytes_;
};

bool read_file(const char* path, std::vector<uint8_t>* bytes) {
  std::FILE* f = std::fopen(path, "rb");
  if (f == nullptr) return false;
  uint8_t chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0) bytes->insert(bytes->end(), chunk, chunk + n);
  std::fclose(f);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 5) return 2;
  const std::string scenario = argv[2];
  std::vector<uint8_t> file, estimates;
  if (!read_file(argv[1], &file)) return 2;
  if (argc == 5 && !read_file(argv[3], &estimates)) return 2;
  const OneKeyMap named(argc == 5 ? argv[4] : "", std::move(estimates));
  const bool traced = scenario == "traced";
  std::vector<rt::ProfileEvent> event_storage(256);
  rt::EventTracer tracer(event_storage.data(), event_storage.size(), rt::EventTracer::Mode::Accumulate);
  g_npu.busy_ns = traced ? 2000000 : 0;
  // The harness's own reading; a payload it refuses must be refused by init() too.
  const bool valid = etkit_ethosu::parse_vela_payload(file.data(), file.size(), &g_npu.expected, nullptr);
  const etkit_ethosu::VelaPayloadView& expected = g_npu.expected;
  g_npu.busy = scenario == "busy";
  g_npu.status = scenario == "npu-error" ? -1 : 0;

  std::printf("REGISTER %d\n", etkit_ethosu_register_backends());
  if (etkit_ethosu_register_backends() != 0) fail("registering twice is not a no-op");
  rt::BackendInterface* backend = rt::get_backend("EthosUBackend");
  if (backend == nullptr || !backend->is_available()) fail("EthosUBackend is not registered and available");

  // The payload, at a 16-byte aligned address (exactly its size) or one byte past one.
  const bool misaligned = scenario == "misaligned";
  PayloadMemory memory;
  const size_t rounded = file.empty() ? 16 : (file.size() + 15) / 16 * 16;  // payloads are multiples of 16
  memory.block = std::aligned_alloc(16, rounded + (misaligned ? 16 : 0));
  uint8_t* bytes = static_cast<uint8_t*>(memory.block) + (misaligned ? 1 : 0);
  if (!file.empty()) std::memcpy(bytes, file.data(), file.size());
  rt::FreeableBuffer processed(bytes, file.size(), free_payload, &memory);

  std::vector<uint8_t> runtime_arena(2 * file.size() + 4096);
  rt::MemoryAllocator runtime_allocator(runtime_arena.size(), runtime_arena.data());
  rt::BackendInitContext init_ctx(&runtime_allocator, &named, "forward", traced ? &tracer : nullptr);
  rt::Result<rt::DelegateHandle*> handle = backend->init(init_ctx, &processed, rt::Span<const rt::CompileSpec>());
  if (!handle.ok()) {
    std::printf("INIT ERROR: %s\n", rt::last_error_message());
    return 1;
  }
  if (!valid) fail("init() accepted a payload the reader refuses");
  std::printf("PAYLOAD %s\n", memory.freed ? "copied" : "in-place");
  if (memory.freed != misaligned) fail("the payload bytes were freed (or kept) when they should not be");
  processed.Free();  // what the runtime's FreeableBuffer does when init returns: must not free owned bytes
  if (memory.freed != misaligned) fail("the handle does not own the payload bytes it points into");

  // Arguments: inputs then outputs, each shaped like its record.
  std::vector<std::unique_ptr<OwnedTensor>> tensors;
  for (size_t i = 0; i < expected.inputs.size(); ++i) {
    const VelaIO& io = expected.inputs[i];
    rt::ScalarType type = type_for(io.elem_size);
    if (i == 0 && scenario == "bad-dtype") type = rt::ScalarType::Float;
    if (i == 0 && scenario == "bad-elem") type = rt::ScalarType::Short;
    tensors.push_back(std::make_unique<OwnedTensor>(io, type, i == 0 && scenario == "bad-numel" ? 1 : 0));
  }
  for (const VelaIO& io : expected.outputs) {
    tensors.push_back(std::make_unique<OwnedTensor>(io, type_for(io.elem_size), 0));
  }
  rt::EValue not_a_tensor(static_cast<int64_t>(3));
  std::vector<rt::EValue*> args;
  for (auto& t : tensors) args.push_back(&t->value);
  if (scenario == "not-tensor") args[0] = &not_a_tensor;
  if (scenario == "bad-args") args.pop_back();

  // small-temp: one byte too few for the scratch, however the arena is aligned; otherwise room to align
  const size_t scratch = expected.scratch_size;
  std::vector<uint8_t> temp_arena(scenario == "small-temp" ? (scratch > 0 ? scratch - 1 : 0) : scratch + 64);
  rt::MemoryAllocator temp_allocator(temp_arena.size(), temp_arena.data());
  rt::BackendExecutionContext exec_ctx(scenario == "no-temp" ? nullptr : &temp_allocator, "forward",
                                      traced ? &tracer : nullptr);

  const int runs = scenario == "run" || misaligned || traced ? 2 : 1;
  for (g_npu.run = 0; g_npu.run < runs; ++g_npu.run) {
    g_npu.inputs.clear();
    for (size_t i = 0; i < expected.inputs.size(); ++i) {  // fresh input values for every run
      std::vector<uint8_t>& data = tensors[i]->data;
      for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<uint8_t>(k * 31 + i * 17 + g_npu.run * 5 + 1);
      g_npu.inputs.push_back(data);
    }
    for (size_t j = 0; j < expected.outputs.size(); ++j) {
      std::vector<uint8_t>& data = tensors[expected.inputs.size() + j]->data;
      std::fill(data.begin(), data.end(), 0);
    }
    temp_allocator.reset();
    rt::Error e = backend->execute(exec_ctx, handle.get(), rt::Span<rt::EValue*>(args.data(), args.size()));
    if (e != rt::Error::Ok) {
      std::printf("EXECUTE ERROR: %s\n", rt::last_error_message());
      backend->destroy(handle.get());
      return 1;
    }
    if (g_npu.reserved) fail("the driver was not released");
    for (const rt::ProfileEvent& event : tracer.events()) {
      if (event.kind != rt::ProfileEventKind::DelegateInternal) continue;
      std::printf("EVENT %d %d %lld %s\n", g_npu.run, event.delegate_debug_id,
                  static_cast<long long>(event.end_ns - event.start_ns), event.name);
    }
    tracer.reset();
    for (size_t j = 0; j < expected.outputs.size(); ++j) {
      if (tensors[expected.inputs.size() + j]->data != g_npu.outputs[j]) fail("an output was not copied back");
    }
  }
  backend->destroy(handle.get());
  if (!memory.freed) fail("destroy() did not free the payload bytes");
  std::printf("OK %d\n", runs);
  return 0;
}
