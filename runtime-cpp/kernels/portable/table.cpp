// The portable kernel table: every kernel of portable_kernels.inc, by its ExecuTorch name.
#include "kernels.h"

namespace etkit::portable {

#define ETKIT_PORTABLE_KERNEL(name, fn, signature) void fn(KernelRuntimeContext&, Span<EValue*>);
#include "portable_kernels.inc"
#undef ETKIT_PORTABLE_KERNEL

namespace {
const Kernel kKernels[] = {
#define ETKIT_PORTABLE_KERNEL(name, fn, signature) {name, fn},
#include "portable_kernels.inc"
#undef ETKIT_PORTABLE_KERNEL
};
}  // namespace

const Kernel* kernel_table() { return kKernels; }
size_t kernel_table_size() { return sizeof(kKernels) / sizeof(kKernels[0]); }

}  // namespace etkit::portable
