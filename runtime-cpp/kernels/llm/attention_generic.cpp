// The attention math for whatever instruction set the build targets (see attention.h).
#define ETKIT_ATTENTION_ISA generic
#include "attention_impl.h"

namespace etkit::portable::llm::generic {
bool attend(const AttentionProblem& problem) { return attend_impl(problem); }
}  // namespace etkit::portable::llm::generic
