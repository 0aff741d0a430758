// Stand-in Ethos-U core driver for fuzz_ethosu (docs/fuzzing.md): the three driver functions the delegate
// calls, declared in tests/fake_driver/ethosu_driver.h. ethosu_invoke_v3 does what the NPU would do to
// memory: it reads the whole command stream and weights and writes the whole scratch region, so a
// delegate that hands the driver a region smaller than it says is an AddressSanitizer report.
#include <ethosu_driver.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {
alignas(8) unsigned char g_driver[8];
bool g_reserved = false;
}  // namespace

extern "C" ethosu_driver* ethosu_reserve_driver(void) {
  if (g_reserved) return nullptr;
  g_reserved = true;
  return reinterpret_cast<ethosu_driver*>(g_driver);
}

extern "C" void ethosu_release_driver(ethosu_driver* drv) {
  if (drv != reinterpret_cast<ethosu_driver*>(g_driver) || !g_reserved) std::abort();
  g_reserved = false;
}

extern "C" int ethosu_invoke_v3(ethosu_driver* drv, const void* custom_data_ptr, const int custom_data_size,
                                uint64_t* const base_addr, const size_t* base_addr_size, const int num_base_addr,
                                void* user_arg) {
  (void)user_arg;
  if (drv != reinterpret_cast<ethosu_driver*>(g_driver) || !g_reserved || custom_data_size < 0 ||
      num_base_addr < 0) {
    std::abort();
  }
  volatile uint8_t sink = 0;
  const auto* cmd = static_cast<const uint8_t*>(custom_data_ptr);
  for (int i = 0; i < custom_data_size; ++i) sink = sink ^ cmd[i];
  for (int r = 0; r < num_base_addr; ++r) {
    auto* region = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(base_addr[r]));
    if (region == nullptr) {
      if (base_addr_size[r] != 0) std::abort();  // a size without memory
      continue;
    }
    if (r == 0) {  // weights: read only
      for (size_t i = 0; i < base_addr_size[r]; ++i) sink = sink ^ region[i];
    } else {       // scratch: the NPU writes its outputs anywhere in it
      std::memset(region, 0x5a, base_addr_size[r]);
    }
  }
  (void)sink;
  return 0;
}
