// Token sampling and UTF-8 streaming used by TextLLMRunner (public so other runners and the tests can
// use them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace etkit::extension::llm {

/// Picks the next token from `n` logits, as the Python runner's _sample:
///  * temperature <= 0: greedy, the index of the first largest logit (the first NaN if there is one,
///    as numpy's argmax);
///  * otherwise softmax(logits / temperature) in double precision; with top_p < 1 only the most likely
///    tokens whose cumulative probability first reaches top_p are kept (at least one); then one index
///    is drawn with `rng`.
class Sampler {
 public:
  Sampler(float temperature, float top_p, uint64_t seed) : temperature_(temperature), top_p_(top_p), rng_(seed) {}
  uint64_t sample(const float* logits, size_t n);

 private:
  float temperature_;
  float top_p_;
  std::mt19937_64 rng_;
  std::vector<double> probs_;
  std::vector<uint32_t> order_;
};

/// Turns a stream of byte pieces into whole UTF-8 characters, as the Python runner does: pieces are
/// joined and decoded with invalid sequences replaced by U+FFFD; text is handed out only once it does
/// not end in U+FFFD (the rest of a split character may still come).
class Utf8Stream {
 public:
  /// Appends `bytes`; returns the text ready to be handed out ("" while a character is incomplete).
  std::string push(const std::string& bytes);
  /// The text not handed out yet (an incomplete character at the end becomes U+FFFD).
  std::string flush();

 private:
  std::string pending_;  // bytes not handed out yet
};

/// `bytes` decoded as UTF-8 with every invalid or truncated sequence replaced by U+FFFD (the same
/// replacements as Python's bytes.decode("utf-8", errors="replace")).
std::string utf8_replace_invalid(const std::string& bytes);

}  // namespace etkit::extension::llm
