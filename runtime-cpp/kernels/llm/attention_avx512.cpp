// The attention math with x86 AVX-512F (CMakeLists.txt compiles this file with -mavx512f -mavx2 -mfma on
// x86; anywhere else it is a stub). See attention.h.
#include "attention.h"

#if defined(__AVX512F__) && defined(__FMA__)
#define ETKIT_ATTENTION_ISA avx512
#include "attention_impl.h"

namespace etkit::portable::llm::avx512 {
bool attend(const AttentionProblem& problem) { return attend_impl(problem); }
}  // namespace etkit::portable::llm::avx512
#else
namespace etkit::portable::llm::avx512 {
bool attend(const AttentionProblem&) { return false; }
}  // namespace etkit::portable::llm::avx512
#endif
