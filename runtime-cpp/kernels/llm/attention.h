// The attention math behind llama::custom_sdpa.out (sdpa.cpp checks the arguments, then calls attend()).
//
// attention_impl.h holds the math once; it is compiled once per instruction set, each copy in its own
// namespace: attention_generic.cpp (whatever the build targets), attention_avx2.cpp (x86 AVX2 + FMA) and
// attention_avx512.cpp (x86 AVX-512F), the last two with their own compiler flags (CMakeLists.txt).
// attend() runs the widest copy the CPU supports, chosen once. A copy built without its flags (another
// architecture, another compiler) is a stub that returns false, and the next narrower copy runs.
#pragma once

#include <cstdint>

namespace etkit::portable::llm {

/// float16 heads larger than this do not fit the kernel's stack buffers (the caller refuses them).
constexpr int64_t kMaxHalfDim = 512;

/// One custom_sdpa call: query [batch, seq, heads, head_dim], key/value caches
/// [batch, max_seq, kv_heads, head_dim], out like query; all contiguous, float32 or (half) float16 bits.
/// Query row i reads cache rows [0, start_pos + i] (is_causal) or [0, start_pos + seq).
struct AttentionProblem {
  const void* query;
  const void* key;
  const void* value;
  void* out;
  bool half;
  int64_t batch, seq, heads, kv_heads, head_dim, max_seq, start_pos;
  bool is_causal;
  float scale;
};

namespace generic {
bool attend(const AttentionProblem& problem);  // always runs
}
namespace avx2 {
bool attend(const AttentionProblem& problem);  // false when built without AVX2/FMA
}
namespace avx512 {
bool attend(const AttentionProblem& problem);  // false when built without AVX-512F
}

/// Runs the problem with the widest copy this CPU supports (or ETKIT_CPU_CAPABILITY allows).
void attend(const AttentionProblem& problem);

/// The copy attend() runs: "generic", "avx2" or "avx512" (chosen once per process: the widest the CPU
/// supports, lowered to ETKIT_CPU_CAPABILITY=generic|avx2|avx512 when that variable is set).
const char* attention_capability();

}  // namespace etkit::portable::llm
