// etkit::extension::llm::TextLLMRunner: generate text with a .pte exported by etkit.llm.export_llm,
// in the shape of ExecuTorch's IRunner / TextLLMRunner (load, is_loaded, generate with a token and a
// stats callback, stop, reset). The C++ counterpart of etkit.llm.TextLLMRunner (Python): same prefill,
// sampling, stop conditions and errors.
//
//   etkit_register_portable_kernels();                  // explicit registration, as for Module
//   <plugin>_register_backends();                       // one call per linked backend plugin
//   auto tokenizer = etkit::extension::llm::load_tokenizer("tokenizer.json");
//   etkit::extension::llm::TextLLMRunner runner("model.pte", std::move(tokenizer.get()));
//   etkit::extension::llm::GenerationConfig config;
//   config.max_new_tokens = 32;
//   runner.generate("Once upon a time", config,
//                   [](const std::string& piece) { std::fputs(piece.c_str(), stdout); },
//                   [](const etkit::extension::llm::Stats& s) { std::fprintf(stderr, "%s\n", s.line().c_str()); });
//
// The program: method forward(tokens int64 [1, S], input_pos int64 [1]) -> logits float32 [1, vocab]
// (or [1, S, vocab]: the last row is used), and constant methods (no inputs, Int/Bool outputs) giving
// the metadata: get_max_seq_len, get_max_context_len, get_vocab_size, get_bos_id, get_eos_ids (one
// output per id), use_kv_cache, use_sdpa_with_kv_cache, enable_dynamic_shape. A missing one takes the
// default in Metadata.
//
// Errors are runtime::Error codes with a message in runtime::last_error_message(). Not thread-safe,
// except stop(), which may be called from another thread (or a callback) during generate().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "etkit/extension/llm/tokenizer.h"
#include "etkit/runtime/error.h"

namespace etkit::extension {
class Module;
}

namespace etkit::extension::llm {

/// Options of one generate() call (ExecuTorch's GenerationConfig names; defaults as etkit.llm's Python
/// GenerationConfig).
struct GenerationConfig {
  /// Tokens to generate at most. Generation also stops at an EOS id (get_eos_ids) and when the KV
  /// cache is full (get_max_context_len). Negative values count as 0.
  int32_t max_new_tokens = 64;
  /// 0 (or less): greedy, the first largest logit. Otherwise logits are divided by it before sampling.
  float temperature = 0.0f;
  /// Nucleus sampling: sample among the most likely tokens whose probabilities sum to top_p (>= 1: all).
  float top_p = 1.0f;
  /// Seed of the sampler (std::mt19937_64; not the same draws as the Python runner's numpy generator).
  uint64_t seed = 0;
  /// generate(): pass the prompt's text to the token callback first. generate_from_tokens(): pass the
  /// prompt's ids to the token callback first.
  bool echo = false;
  /// get_bos_id tokens to put before the prompt at the start of a conversation (position 0; only
  /// when the program has a BOS id). 0: none beyond what the tokenizer itself adds.
  int32_t num_bos = 0;
  /// Keep the last tokens of a prompt too long for the cache instead of refusing it.
  bool truncate_prompt = false;
  /// generate(): wrap the prompt as one user turn of the model's chat template (ChatTurn: the runner's
  /// set_chat_turn(), else chat_turn.json beside the tokenizer file) before encoding it.
  bool apply_chat_template = false;
};

/// Timings of one generate() call, as ExecuTorch's Stats: milliseconds on a steady clock (fractional;
/// only differences are meaningful).
struct Stats {
  double model_load_start_ms = 0;
  double model_load_end_ms = 0;
  /// generate() was called (before encoding the prompt)
  double inference_start_ms = 0;
  /// the prompt has been run through the model (prefill done)
  double prompt_eval_end_ms = 0;
  /// the first new token has been sampled
  double first_token_ms = 0;
  double inference_end_ms = 0;
  int64_t num_prompt_tokens = 0;
  int64_t num_generated_tokens = 0;
  /// "eos", "max_new_tokens", "context full (N tokens, get_max_context_len)" or "stopped"
  std::string stop_reason;

  double load_ms() const { return model_load_end_ms - model_load_start_ms; }
  double time_to_first_token_ms() const;
  double prefill_tokens_per_s() const;
  /// Tokens generated after the first (each one a forward call) per second of decoding.
  double decode_tokens_per_s() const;
  /// One line for a terminal, the same as the Python runner's Stats.line().
  std::string line() const;
};

/// The program's runner metadata (constant methods); defaults when a method is missing.
struct Metadata {
  int64_t max_seq_len = 128;
  int64_t max_context_len = 128;
  int64_t vocab_size = -1;
  int64_t bos_id = -1;
  std::vector<int64_t> eos_ids;
  bool use_kv_cache = true;
  bool use_sdpa_with_kv_cache = false;
  bool enable_dynamic_shape = false;
};

/// ExecuTorch's IRunner interface.
class IRunner {
 public:
  virtual ~IRunner() = default;
  virtual bool is_loaded() const = 0;
  virtual runtime::Error load() = 0;
  virtual runtime::Error generate(const std::string& prompt, const GenerationConfig& config,
                                  std::function<void(const std::string&)> token_callback = {},
                                  std::function<void(const Stats&)> stats_callback = {}) = 0;
  virtual void stop() = 0;
  virtual void reset() {}
};

class TextLLMRunner : public IRunner {
 public:
  /// `tokenizer` may be null: then only generate_from_tokens() works. `data_path`, when not empty, is the
  /// .ptd data file holding the weights (export_llm with LlmConfig(external_constants=True)).
  TextLLMRunner(std::string model_path, std::unique_ptr<Tokenizer> tokenizer, std::string data_path = "");
  /// Loads the tokenizer file in load() (load_tokenizer); an empty path means no tokenizer.
  TextLLMRunner(std::string model_path, std::string tokenizer_path, std::string data_path = "");
  ~TextLLMRunner() override;
  TextLLMRunner(const TextLLMRunner&) = delete;
  TextLLMRunner& operator=(const TextLLMRunner&) = delete;

  bool is_loaded() const override;
  /// Loads the tokenizer (if given by path), the program, its metadata and forward. Idempotent.
  /// Errors: the program's (AccessFailed, InvalidProgram, OperatorMissing, ...), the tokenizer's, and
  /// InvalidArgument when the tokenizer has more tokens than get_vocab_size (different models).
  runtime::Error load() override;

  /// Generates a continuation of `prompt`, passing each new piece of text to `token_callback` (whole
  /// UTF-8 characters only; the EOS token is not passed) and the stats to `stats_callback` at the end.
  /// Continues the conversation at the current position (reset() starts a new one). With
  /// config.apply_chat_template the prompt is first wrapped in the chat turn (and echo passes the wrapped text).
  /// Errors: InvalidState (no tokenizer), load_chat_turn()'s (no chat turn given and none beside the
  /// tokenizer file), InvalidArgument (the prompt is empty, or too long for the
  /// cache without truncate_prompt: the message names its length and get_max_context_len), and any
  /// load or execute error.
  runtime::Error generate(const std::string& prompt, const GenerationConfig& config,
                          std::function<void(const std::string&)> token_callback = {},
                          std::function<void(const Stats&)> stats_callback = {}) override;

  /// Generates from prompt token ids (no tokenizer involved; config.num_bos is not applied), as the
  /// Python runner's generate_tokens. `token_callback` gets every generated id, the EOS id that ended
  /// generation included; `generated`, if given, receives them too. Errors as generate().
  runtime::Error generate_from_tokens(const std::vector<uint64_t>& prompt_tokens, const GenerationConfig& config,
                                      std::function<void(uint64_t)> token_callback = {},
                                      std::function<void(const Stats&)> stats_callback = {},
                                      std::vector<uint64_t>* generated = nullptr);

  /// The chat turn generate() uses with config.apply_chat_template, instead of chat_turn.json.
  void set_chat_turn(ChatTurn turn) { chat_turn_ = std::move(turn); has_chat_turn_ = true; }

  /// Asks a running generate() to stop after the current token (stop reason "stopped").
  void stop() override;
  /// Starts a new conversation: the next generate() writes the KV cache from position 0.
  void reset() override;

  /// Valid after load().
  const Metadata& metadata() const { return metadata_; }
  /// Null when the runner has none.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  /// Tokens in the KV cache (the position the next forward call writes at).
  int64_t position() const { return pos_; }
  /// The stats of the last generate() call.
  const Stats& stats() const { return stats_; }

 private:
  runtime::Error load_metadata();
  /// Runs `n` tokens at the current position; on success `*logits` points at the last row of the
  /// output (valid until the next forward call).
  runtime::Error step(const int64_t* tokens, size_t n, const float** logits);
  runtime::Error prefill(const std::vector<uint64_t>& tokens, const float** logits);
  runtime::Error run(std::vector<uint64_t> tokens, const GenerationConfig& config,
                     const std::function<void(uint64_t)>& on_token, std::vector<uint64_t>* generated);
  void begin_stats(double start_ms);

  std::string data_path_;
  std::string model_path_;
  std::string tokenizer_path_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ChatTurn chat_turn_;
  bool has_chat_turn_ = false;
  std::unique_ptr<Module> module_;
  Metadata metadata_;
  bool loaded_ = false;
  int64_t pos_ = 0;
  std::vector<int64_t> token_buffer_;
  size_t logits_size_ = 0;                     // length of the logits row step() points at
  runtime::Error callback_error_ = runtime::Error::Ok;  // a failure inside generate()'s token handler
  std::atomic<bool> stop_requested_{false};
  Stats stats_;
  double load_start_ms_ = 0, load_end_ms_ = 0;
};

/// Milliseconds on the steady clock the Stats use.
double time_in_ms();

}  // namespace etkit::extension::llm
