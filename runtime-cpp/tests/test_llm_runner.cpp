// TextLLMRunner, Sampler and Utf8Stream (include/etkit/extension/llm/) without a real model: the
// program is built in memory and written to a temporary file. Its forward is a "counting" language
// model: logits = one-hot(token + 1 mod V) (aten::embedding.out over a constant [V, V] table), so
// greedy decoding after token t yields t+1, t+2, ... The constant methods give the runner's metadata.
// Covers prefill (static: one token per call; dynamic: chunks of get_max_seq_len), the stop conditions
// (max_new_tokens, EOS, context full, stop()), the prompt-too-long refusal and truncation, reset(),
// num_bos, echo, the tokenizer's vocabulary check and UTF-8 streaming of split characters.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "etkit/extension/llm/sampler.h"
#include "etkit/extension/llm/text_llm_runner.h"
#include "etkit/runtime/runtime.h"
#include "test_check.h"
#include "flatbuffers/flatbuffers.h"
#include "program_generated.h"

namespace rt = etkit::runtime;
namespace llm = etkit::extension::llm;
namespace fb = etkit::fb;

namespace {

constexpr int kVocab = 16;
constexpr int kContext = 12;
constexpr int kEos = 14;
constexpr int kBos = 0;

flatbuffers::Offset<fb::EValue> tensor(flatbuffers::FlatBufferBuilder& b, fb::ScalarType type, std::vector<int32_t> sizes,
                                       int64_t offset, bool dynamic) {
  std::vector<uint8_t> order(sizes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = uint8_t(i);
  auto alloc = fb::CreateAllocationDetails(b, 1, static_cast<uint32_t>(offset), 0);
  auto t = fb::CreateTensorDirect(b, type, 0, &sizes, &order, false, 0, alloc, 0,
                                  dynamic ? fb::TensorShapeDynamism::DYNAMIC_BOUND : fb::TensorShapeDynamism::STATIC);
  return fb::CreateEValue(b, fb::KernelTypes::Tensor, t.Union());
}

flatbuffers::Offset<fb::EValue> int_value(flatbuffers::FlatBufferBuilder& b, int64_t v) {
  return fb::CreateEValue(b, fb::KernelTypes::Int, fb::CreateInt(b, v).Union());
}

flatbuffers::Offset<fb::EValue> bool_value(flatbuffers::FlatBufferBuilder& b, bool v) {
  return fb::CreateEValue(b, fb::KernelTypes::Bool, fb::CreateBool(b, v).Union());
}

/// A method with no inputs returning `values` (ExecuTorch's constant methods).
flatbuffers::Offset<fb::ExecutionPlan> constant_method(flatbuffers::FlatBufferBuilder& b, const char* name,
                                                       std::vector<flatbuffers::Offset<fb::EValue>> values) {
  std::vector<int32_t> inputs, outputs;
  for (size_t i = 0; i < values.size(); ++i) outputs.push_back(static_cast<int32_t>(i));
  std::vector<flatbuffers::Offset<fb::Instruction>> instructions;
  std::vector<flatbuffers::Offset<fb::Chain>> chains = {fb::CreateChainDirect(b, &inputs, &outputs, &instructions)};
  std::vector<flatbuffers::Offset<fb::Operator>> ops;
  std::vector<flatbuffers::Offset<fb::BackendDelegate>> delegates;
  std::vector<int64_t> buffer_sizes = {0};
  return fb::CreateExecutionPlanDirect(b, name, 0, &values, &inputs, &outputs, &chains, &ops, &delegates,
                                       &buffer_sizes);
}

/// forward(tokens int64 [1, S], input_pos int64 [1]) -> logits [1, S, V]; S = 1, or 1..max_seq_len when dynamic.
std::vector<uint8_t> build_counting_lm(bool dynamic, int max_seq_len) {
  flatbuffers::FlatBufferBuilder b;
  const int s = dynamic ? max_seq_len : 1;
  std::vector<flatbuffers::Offset<fb::EValue>> values;
  values.push_back(tensor(b, fb::ScalarType::LONG, {1, s}, 0, dynamic));  // 0 tokens
  values.push_back(tensor(b, fb::ScalarType::LONG, {1}, 64, false));      // 1 input_pos (unused)
  {
    std::vector<int32_t> sizes = {kVocab, kVocab};
    std::vector<uint8_t> order = {0, 1};
    auto t = fb::CreateTensorDirect(b, fb::ScalarType::FLOAT, 0, &sizes, &order, false, /*data_buffer_idx=*/1);
    values.push_back(fb::CreateEValue(b, fb::KernelTypes::Tensor, t.Union()));  // 2 table
  }
  values.push_back(int_value(b, -1));                                              // 3 padding_idx
  values.push_back(bool_value(b, false));                                          // 4 scale_grad_by_freq
  values.push_back(bool_value(b, false));                                          // 5 sparse
  values.push_back(tensor(b, fb::ScalarType::FLOAT, {1, s, kVocab}, 128, dynamic));  // 6 logits
  std::vector<int32_t> args = {2, 0, 3, 4, 5, 6, 6};
  std::vector<flatbuffers::Offset<fb::Instruction>> instructions = {fb::CreateInstruction(
      b, fb::InstructionArguments::KernelCall, fb::CreateKernelCallDirect(b, 0, &args).Union())};
  std::vector<int32_t> inputs = {0, 1}, outputs = {6};
  std::vector<flatbuffers::Offset<fb::Chain>> chains = {fb::CreateChainDirect(b, &inputs, &outputs, &instructions)};
  std::vector<flatbuffers::Offset<fb::Operator>> ops = {fb::CreateOperatorDirect(b, "aten::embedding", "out")};
  std::vector<flatbuffers::Offset<fb::BackendDelegate>> delegates;
  std::vector<int64_t> buffer_sizes = {0, 128 + int64_t(s) * kVocab * 4};
  std::vector<flatbuffers::Offset<fb::ExecutionPlan>> plans = {
      fb::CreateExecutionPlanDirect(b, "forward", 0, &values, &inputs, &outputs, &chains, &ops, &delegates,
                                    &buffer_sizes),
      constant_method(b, "get_max_seq_len", {int_value(b, max_seq_len)}),
      constant_method(b, "get_max_context_len", {int_value(b, kContext)}),
      constant_method(b, "get_vocab_size", {int_value(b, kVocab)}),
      constant_method(b, "get_bos_id", {int_value(b, kBos)}),
      constant_method(b, "get_eos_ids", {int_value(b, kEos), int_value(b, 99)}),
      constant_method(b, "use_kv_cache", {bool_value(b, true)}),
      constant_method(b, "enable_dynamic_shape", {bool_value(b, dynamic)}),
  };
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  buffers.push_back(fb::CreateBufferDirect(b, nullptr));
  std::vector<uint8_t> table(kVocab * kVocab * sizeof(float), 0);
  for (int t = 0; t < kVocab; ++t) reinterpret_cast<float*>(table.data())[t * kVocab + (t + 1) % kVocab] = 1.0f;
  buffers.push_back(fb::CreateBufferDirect(b, &table));
  auto program = fb::CreateProgramDirect(b, 0, &plans, &buffers);
  fb::FinishProgramBuffer(b, program);
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

std::string write_temp(const std::vector<uint8_t>& bytes) {
  char path[] = "/tmp/etkit_test_llm_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) std::abort();
  if (write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) std::abort();
  close(fd);
  return path;
}

std::vector<uint64_t> range(uint64_t first, uint64_t n) {
  std::vector<uint64_t> r;
  for (uint64_t i = 0; i < n; ++i) r.push_back((first + i) % kVocab);
  return r;
}

/// Token t <-> letter 'a' + t, except 5 and 6: the two bytes of "é" (U+00E9).
class LetterTokenizer : public llm::Tokenizer {
 public:
  explicit LetterTokenizer(int64_t vocab = kVocab) : vocab_(vocab) {}
  rt::Result<std::vector<uint64_t>> encode(const std::string& text) const override {
    std::vector<uint64_t> ids;
    for (char c : text) ids.push_back(static_cast<uint64_t>(c - 'a'));
    return ids;
  }
  rt::Result<std::string> decode(uint64_t, uint64_t token) const override {
    if (token == 5) return std::string("\xC3");
    if (token == 6) return std::string("\xA9");
    return std::string(1, static_cast<char>('a' + token));
  }
  int64_t vocab_size() const override { return vocab_; }
  std::string kind() const override { return "letter tokenizer"; }

 private:
  int64_t vocab_;
};

void test_sampler() {
  const float logits[] = {0.5f, 2.0f, -1.0f, 2.0f};
  llm::Sampler greedy(0.0f, 1.0f, 0);
  CHECK(greedy.sample(logits, 4) == 1);  // the first of equal maxima
  const float with_nan[] = {0.5f, NAN, 9.0f};
  CHECK(greedy.sample(with_nan, 3) == 1);  // numpy's argmax returns the first NaN

  // top_p small enough keeps only the most likely token.
  llm::Sampler nucleus(1.0f, 0.1f, 1);
  for (int i = 0; i < 100; ++i) CHECK(nucleus.sample(logits, 4) == 1);
  const float two[] = {0.0f, std::log(3.0f)};  // p = [0.25, 0.75]
  llm::Sampler t1(1.0f, 1.0f, 42);
  int ones = 0;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) ones += t1.sample(two, 2) == 1;
  CHECK(std::fabs(ones / double(draws) - 0.75) < 0.02);
  // top_p = 0.75 reaches 0.75 with the first token: only it is kept.
  llm::Sampler top(1.0f, 0.75f, 3);
  for (int i = 0; i < 200; ++i) CHECK(top.sample(two, 2) == 1);
  // Same seed, same draws.
  llm::Sampler a(0.7f, 0.9f, 5), b(0.7f, 0.9f, 5);
  const float many[] = {0.1f, 0.3f, 0.2f, 0.25f, 0.15f, 0.05f};
  for (int i = 0; i < 50; ++i) CHECK(a.sample(many, 6) == b.sample(many, 6));
}

void test_utf8() {
  const std::string r = "\xEF\xBF\xBD";
  // The replacements of Python's bytes.decode("utf-8", errors="replace").
  CHECK(llm::utf8_replace_invalid("abc") == "abc");
  CHECK(llm::utf8_replace_invalid("h\xC3\xA9") == "h\xC3\xA9");
  CHECK(llm::utf8_replace_invalid("\xE2\x82") == r);
  CHECK(llm::utf8_replace_invalid("\xED\xA0\x80") == r + r + r);  // surrogates are not UTF-8
  CHECK(llm::utf8_replace_invalid("\xF0\x9F\x98" "A") == r + "A");
  CHECK(llm::utf8_replace_invalid("\xC0\xAF") == r + r);
  CHECK(llm::utf8_replace_invalid("\xFF" "a\x80") == r + "a" + r);
  CHECK(llm::utf8_replace_invalid("\xF0\x9F\x99\x82") == "\xF0\x9F\x99\x82");

  llm::Utf8Stream s;
  CHECK(s.push("h\xC3") == "");  // held until the character is complete
  CHECK(s.push("\xA9") == "h\xC3\xA9");
  CHECK(s.push("\xF0\x9F") == "");
  CHECK(s.push("\x99") == "");
  CHECK(s.push("\x82!") == "\xF0\x9F\x99\x82!");
  CHECK(s.push("\xE2\x82") == "");
  CHECK(s.flush() == r);
  CHECK(s.flush() == "");
}

void test_runner(bool dynamic) {
  const std::string path = write_temp(build_counting_lm(dynamic, 4));
  llm::GenerationConfig config;
  config.max_new_tokens = 5;
  {
    llm::TextLLMRunner runner(path, std::unique_ptr<llm::Tokenizer>());
    CHECK(!runner.is_loaded());
    CHECK(runner.load() == rt::Error::Ok);
    CHECK(runner.is_loaded());
    const llm::Metadata& m = runner.metadata();
    CHECK(m.max_seq_len == 4 && m.max_context_len == kContext && m.vocab_size == kVocab && m.bos_id == kBos);
    CHECK(m.eos_ids.size() == 2 && m.eos_ids[0] == kEos && m.eos_ids[1] == 99);
    CHECK(m.enable_dynamic_shape == dynamic && m.use_kv_cache);

    // max_new_tokens; the prompt (3 tokens: chunked by 4 when dynamic) then 4 decode steps.
    std::vector<uint64_t> got, streamed;
    llm::Stats stats;
    bool stats_called = false;
    CHECK(runner.generate_from_tokens({1, 2, 3}, config, [&](uint64_t t) { streamed.push_back(t); },
                                      [&](const llm::Stats& s) { stats = s, stats_called = true; },
                                      &got) == rt::Error::Ok);
    CHECK(got == range(4, 5) && streamed == got && stats_called);
    CHECK(stats.num_prompt_tokens == 3 && stats.num_generated_tokens == 5 && stats.stop_reason == "max_new_tokens");
    CHECK(stats.inference_start_ms <= stats.prompt_eval_end_ms && stats.prompt_eval_end_ms <= stats.first_token_ms &&
          stats.first_token_ms <= stats.inference_end_ms && stats.model_load_start_ms <= stats.model_load_end_ms);
    CHECK(stats.line().find("prompt 3 tok, generated 5 tok | load ") == 0);
    CHECK(stats.line().find("| stop: max_new_tokens") != std::string::npos);
    CHECK(runner.position() == 3 + 4);

    // The conversation continues where it stopped; the EOS id ends generation and is passed on.
    got.clear();
    CHECK(runner.generate_from_tokens({10}, config, {}, {}, &got) == rt::Error::Ok);
    CHECK(got == range(11, 4) && runner.stats().stop_reason == "eos" && runner.position() == 7 + 1 + 3);

    // Prompt too long for what is left of the cache (12 - 11 - 1 = 0 tokens), even truncated.
    CHECK(runner.generate_from_tokens({1}, config) == rt::Error::InvalidArgument);
    CHECK(std::strstr(rt::last_error_message(), "the prompt is 1 tokens") != nullptr);
    CHECK(std::strstr(rt::last_error_message(), "(get_max_context_len) is 12 tokens, 11 already used") != nullptr);

    // reset(): from position 0; the cache fills up (prompt 1 token + 11 decode steps).
    runner.reset();
    CHECK(runner.position() == 0);
    got.clear();
    config.max_new_tokens = 50;
    CHECK(runner.generate_from_tokens({0}, config, {}, {}, &got) == rt::Error::Ok);
    CHECK(got == range(1, 12) && runner.position() == kContext);
    CHECK(runner.stats().stop_reason == "context full (12 tokens, get_max_context_len)");

    // Refused: 13 tokens do not fit (11 at most from position 0); truncated: the last 11 are kept.
    runner.reset();
    std::vector<uint64_t> long_prompt = range(0, 13);
    CHECK(runner.generate_from_tokens(long_prompt, config) == rt::Error::InvalidArgument);
    CHECK(std::strstr(rt::last_error_message(), "the prompt is 13 tokens") != nullptr);
    CHECK(std::strstr(rt::last_error_message(), "is 12 tokens") != nullptr);
    config.truncate_prompt = true;
    got.clear();
    CHECK(runner.generate_from_tokens(long_prompt, config, {}, {}, &got) == rt::Error::Ok);
    CHECK(runner.stats().num_prompt_tokens == 11 && got == range(13, 2) && runner.stats().stop_reason == "eos");
    config.truncate_prompt = false;

    // Empty prompt.
    runner.reset();
    CHECK(runner.generate_from_tokens({}, config) == rt::Error::InvalidArgument);
    CHECK(std::strstr(rt::last_error_message(), "empty") != nullptr);

    // stop() from the token callback: generation ends after that token.
    got.clear();
    CHECK(runner.generate_from_tokens(
              {1}, config, [&](uint64_t t) { if (t == 4) runner.stop(); }, {}, &got) == rt::Error::Ok);
    CHECK(got == range(2, 3) && runner.stats().stop_reason == "stopped");

    // Text needs a tokenizer.
    runner.reset();
    CHECK(runner.generate("abc", config) == rt::Error::InvalidState);
  }
  {
    // Text: letters, the split "é" streamed whole, the EOS token not passed on; echo; num_bos.
    llm::TextLLMRunner runner(path, std::unique_ptr<llm::Tokenizer>(new LetterTokenizer()));
    std::vector<std::string> pieces;
    config.max_new_tokens = 20;
    config.echo = true;
    CHECK(runner.generate("d", config, [&](const std::string& p) { pieces.push_back(p); }) == rt::Error::Ok);
    // prompt "d" = 3 -> 4 (e), 5 6 (é), 7..13 (h..n), 14 = EOS
    const std::vector<std::string> want = {"d", "e", "\xC3\xA9", "h", "i", "j", "k", "l", "m", "n"};
    CHECK(pieces == want);
    CHECK(runner.stats().stop_reason == "eos" && runner.stats().num_generated_tokens == 11);
    runner.reset();
    config.echo = false;
    config.num_bos = 2;
    config.max_new_tokens = 1;
    CHECK(runner.generate("b", config) == rt::Error::Ok);
    CHECK(runner.stats().num_prompt_tokens == 3 && runner.position() == 3);
    // Not at the start of a conversation: no BOS.
    CHECK(runner.generate("b", config) == rt::Error::Ok);
    CHECK(runner.stats().num_prompt_tokens == 1);
  }
  {
    // A tokenizer with more tokens than the program's vocabulary belongs to another model.
    llm::TextLLMRunner runner(path, std::unique_ptr<llm::Tokenizer>(new LetterTokenizer(kVocab + 1)));
    CHECK(runner.load() == rt::Error::InvalidArgument);
    CHECK(std::strstr(rt::last_error_message(),
                      "the tokenizer has 17 tokens but the program's vocabulary (get_vocab_size) is 16") != nullptr);
    CHECK(!runner.is_loaded());
  }
  {
    llm::TextLLMRunner runner("/nonexistent/model.pte", std::string());
    CHECK(runner.load() == rt::Error::AccessFailed);
    CHECK(std::strstr(rt::last_error_message(), "/nonexistent/model.pte") != nullptr);
  }
  if (!llm::tokenizers_available()) {
    llm::TextLLMRunner runner(path, std::string("tokenizer.json"));
    CHECK(runner.load() == rt::Error::NotSupported);
  } else {
    llm::TextLLMRunner runner(path, std::string("/nonexistent/tokenizer.json"));
    CHECK(runner.load() == rt::Error::NotFound);
  }
  std::remove(path.c_str());
}

}  // namespace

int main() {
  if (etkit_register_portable_kernels() != 0) return 1;
  test_sampler();
  test_utf8();
  test_runner(/*dynamic=*/false);
  test_runner(/*dynamic=*/true);
  if (failures) {
    std::fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("test_llm_runner: ok\n");
  return 0;
}
