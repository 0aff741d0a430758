// etkit_register_portable_kernels(): registers every portable kernel by its ExecuTorch name.
// Called explicitly (no static initialisers): by the Python module at import and by etkit_runner.
#include "etkit/runtime/kernel.h"
#include "kernels.h"

extern "C" int etkit_register_portable_kernels(void) {
  using namespace etkit::runtime;
  return static_cast<int>(register_kernels(Span<const Kernel>(etkit::portable::kernel_table(),
                                                              etkit::portable::kernel_table_size())));
}
