// The attention math with x86 AVX2 and FMA (CMakeLists.txt compiles this file with -mavx2 -mfma on x86;
// anywhere else it is a stub). See attention.h.
#include "attention.h"

#if defined(__AVX2__) && defined(__FMA__)
#define ETKIT_ATTENTION_ISA avx2
#include "attention_impl.h"

namespace etkit::portable::llm::avx2 {
bool attend(const AttentionProblem& problem) { return attend_impl(problem); }
}  // namespace etkit::portable::llm::avx2
#else
namespace etkit::portable::llm::avx2 {
bool attend(const AttentionProblem&) { return false; }
}  // namespace etkit::portable::llm::avx2
#endif
