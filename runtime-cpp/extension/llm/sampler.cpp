// Sampler and Utf8Stream (include/etkit/extension/llm/sampler.h).
#include "etkit/extension/llm/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace etkit::extension::llm {

uint64_t Sampler::sample(const float* logits, size_t n) {
  if (n == 0) return 0;
  if (!(temperature_ > 0.0f)) {
    size_t best = 0;
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(logits[i])) return i;  // numpy's argmax: the first NaN wins
      if (logits[i] > logits[best]) best = i;
    }
    return best;
  }
  probs_.resize(n);
  double max = -INFINITY;
  for (size_t i = 0; i < n; ++i) max = std::max(max, static_cast<double>(logits[i]) / temperature_);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    probs_[i] = std::exp(static_cast<double>(logits[i]) / temperature_ - max);
    sum += probs_[i];
  }
  for (double& p : probs_) p /= sum;
  size_t keep = n;
  if (top_p_ < 1.0f) {
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), 0u);
    std::stable_sort(order_.begin(), order_.end(), [&](uint32_t a, uint32_t b) { return probs_[a] > probs_[b]; });
    // The first index whose cumulative probability reaches top_p, included.
    double cumulative = 0;
    keep = 0;
    while (keep < n) {
      cumulative += probs_[order_[keep]];
      ++keep;
      if (cumulative >= top_p_) break;
    }
  }
  double total = 0;
  if (keep < n) {
    for (size_t k = 0; k < keep; ++k) total += probs_[order_[k]];
  } else {
    total = 1.0;
  }
  const double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  double cumulative = 0;
  for (size_t k = 0; k < keep; ++k) {
    const size_t i = keep < n ? order_[k] : k;
    cumulative += probs_[i];
    if (u < cumulative) return i;
  }
  // Rounding left u above the last cumulative sum: the last token with a non-zero probability.
  for (size_t k = keep; k-- > 0;) {
    const size_t i = keep < n ? order_[k] : k;
    if (probs_[i] > 0) return i;
  }
  return keep < n ? order_[0] : 0;
}

std::string utf8_replace_invalid(const std::string& bytes) {
  static const char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(bytes.size());
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b = s[i];
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    // Well-formed sequences (Unicode table 3-7): length and the range of the second byte.
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    }
    if (len == 0) {  // not a lead byte
      out += kReplacement;
      ++i;
      continue;
    }
    // The maximal well-formed prefix is replaced by one U+FFFD when the sequence is cut short.
    size_t good = 1;
    while (good < len && i + good < n) {
      const unsigned char c = s[i + good];
      const bool ok = good == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
      if (!ok) break;
      ++good;
    }
    if (good == len) {
      out.append(bytes, i, len);
    } else {
      out += kReplacement;
    }
    i += good;
  }
  return out;
}

std::string Utf8Stream::push(const std::string& bytes) {
  pending_ += bytes;
  std::string text = utf8_replace_invalid(pending_);
  static const char kReplacement[] = "\xEF\xBF\xBD";
  if (text.size() >= 3 && text.compare(text.size() - 3, 3, kReplacement) == 0) return {};
  pending_.clear();
  return text;
}

std::string Utf8Stream::flush() {
  std::string text = utf8_replace_invalid(pending_);
  pending_.clear();
  return text;
}

}  // namespace etkit::extension::llm
