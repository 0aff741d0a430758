// TextLLMRunner (include/etkit/extension/llm/text_llm_runner.h): the C++ counterpart of
// core/etkit/llm/runner.py. Keep the two in step: prefill chunks, sampling, stop conditions, messages.
#include "etkit/extension/llm/text_llm_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <unordered_set>
#include <utility>

#include "etkit/extension/llm/sampler.h"
#include "etkit/extension/module.h"

namespace etkit::extension::llm {

using runtime::Error;
using runtime::EValue;

double time_in_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// ---- Stats ------------------------------------------------------------------------------------------

double Stats::time_to_first_token_ms() const {
  return num_generated_tokens > 0 ? first_token_ms - inference_start_ms : 0.0;
}

double Stats::prefill_tokens_per_s() const {
  const double ms = prompt_eval_end_ms - inference_start_ms;
  return ms > 0 ? num_prompt_tokens / (ms / 1e3) : 0.0;
}

double Stats::decode_tokens_per_s() const {
  const int64_t n = num_generated_tokens - 1;
  const double ms = num_generated_tokens > 0 ? inference_end_ms - first_token_ms : 0.0;
  return n > 0 && ms > 0 ? n / (ms / 1e3) : 0.0;
}

std::string Stats::line() const {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "prompt %lld tok, generated %lld tok | load %.0f ms | first token %.0f ms | prefill %.1f tok/s | "
                "decode %.1f tok/s | stop: %s",
                static_cast<long long>(num_prompt_tokens), static_cast<long long>(num_generated_tokens), load_ms(),
                time_to_first_token_ms(), prefill_tokens_per_s(), decode_tokens_per_s(), stop_reason.c_str());
  return buf;
}

// ---- loading ----------------------------------------------------------------------------------------

namespace {

/// Copies the runtime's message before the next call overwrites it.
std::string last_message() { return runtime::last_error_message(); }

Error as_int(const EValue& v, const char* method, int64_t* out) {
  if (v.is_int()) {
    *out = v.to_int();
  } else if (v.is_bool()) {
    *out = v.to_bool() ? 1 : 0;
  } else if (v.is_double()) {
    *out = static_cast<int64_t>(v.to_double());
  } else {
    return runtime::set_error(Error::InvalidProgram, "constant method %s returns a %s; the runner expects Int or Bool",
                              method, runtime::tag_name(v.tag()));
  }
  return Error::Ok;
}

}  // namespace

TextLLMRunner::TextLLMRunner(std::string model_path, std::unique_ptr<Tokenizer> tokenizer, std::string data_path)
    : data_path_(std::move(data_path)), model_path_(std::move(model_path)), tokenizer_(std::move(tokenizer)) {}

TextLLMRunner::TextLLMRunner(std::string model_path, std::string tokenizer_path, std::string data_path)
    : data_path_(std::move(data_path)), model_path_(std::move(model_path)), tokenizer_path_(std::move(tokenizer_path)) {}

TextLLMRunner::~TextLLMRunner() = default;

bool TextLLMRunner::is_loaded() const { return loaded_; }

Error TextLLMRunner::load() {
  if (loaded_) return Error::Ok;
  load_start_ms_ = time_in_ms();
  if (!tokenizer_ && !tokenizer_path_.empty()) {
    auto tok = load_tokenizer(tokenizer_path_);
    if (!tok.ok()) return tok.error();
    tokenizer_ = std::move(tok.get());
  }
  module_.reset(data_path_.empty() ? new Module(model_path_) : new Module(model_path_, data_path_));
  Error e = module_->load();
  if (e != Error::Ok) {
    std::string why = last_message();
    module_.reset();
    return runtime::set_error(e, "cannot load program '%s': %s", model_path_.c_str(), why.c_str());
  }
  e = load_metadata();
  if (e == Error::Ok) {
    e = module_->load_method("forward");
    if (e != Error::Ok) {
      std::string why = last_message();
      e = runtime::set_error(e, "cannot load method 'forward' of '%s': %s", model_path_.c_str(), why.c_str());
    }
  }
  if (e != Error::Ok) {
    module_.reset();
    return e;
  }
  if (tokenizer_ && metadata_.vocab_size > 0 && tokenizer_->vocab_size() > metadata_.vocab_size) {
    module_.reset();
    return runtime::set_error(Error::InvalidArgument,
                              "the tokenizer has %lld tokens but the program's vocabulary (get_vocab_size) is %lld: "
                              "they belong to different models",
                              static_cast<long long>(tokenizer_->vocab_size()),
                              static_cast<long long>(metadata_.vocab_size));
  }
  load_end_ms_ = time_in_ms();
  loaded_ = true;
  return Error::Ok;
}

Error TextLLMRunner::load_metadata() {
  metadata_ = Metadata();
  const std::vector<std::string> names = module_->method_names();
  auto has = [&](const char* name) { return std::find(names.begin(), names.end(), name) != names.end(); };
  auto run = [&](const char* name, std::vector<EValue>* outputs) -> Error {
    auto out = module_->execute(name, {});
    if (!out.ok()) {
      std::string why = last_message();
      return runtime::set_error(out.error(), "cannot run constant method %s of '%s': %s", name, model_path_.c_str(),
                                why.c_str());
    }
    *outputs = std::move(out.get());
    return Error::Ok;
  };
  struct IntField {
    const char* name;
    int64_t* value;
  };
  int64_t use_kv = 1, sdpa = 0, dynamic = 0;
  const IntField fields[] = {
      {"get_max_seq_len", &metadata_.max_seq_len},     {"get_max_context_len", &metadata_.max_context_len},
      {"get_vocab_size", &metadata_.vocab_size},       {"get_bos_id", &metadata_.bos_id},
      {"use_kv_cache", &use_kv},                       {"use_sdpa_with_kv_cache", &sdpa},
      {"enable_dynamic_shape", &dynamic},
  };
  for (const IntField& f : fields) {
    if (!has(f.name)) continue;
    std::vector<EValue> outputs;
    ETKIT_CHECK_OK(run(f.name, &outputs));
    if (outputs.empty()) {
      return runtime::set_error(Error::InvalidProgram, "constant method %s of '%s' returns nothing", f.name,
                                model_path_.c_str());
    }
    ETKIT_CHECK_OK(as_int(outputs[0], f.name, f.value));
  }
  metadata_.use_kv_cache = use_kv != 0;
  metadata_.use_sdpa_with_kv_cache = sdpa != 0;
  metadata_.enable_dynamic_shape = dynamic != 0;
  if (has("get_eos_ids")) {
    std::vector<EValue> outputs;
    ETKIT_CHECK_OK(run("get_eos_ids", &outputs));
    for (const EValue& v : outputs) {
      int64_t id = 0;
      ETKIT_CHECK_OK(as_int(v, "get_eos_ids", &id));
      metadata_.eos_ids.push_back(id);
    }
  }
  if (metadata_.max_seq_len < 1 || metadata_.max_context_len < 1) {
    return runtime::set_error(Error::InvalidProgram,
                              "'%s' has get_max_seq_len %lld and get_max_context_len %lld; both must be positive",
                              model_path_.c_str(), static_cast<long long>(metadata_.max_seq_len),
                              static_cast<long long>(metadata_.max_context_len));
  }
  return Error::Ok;
}

// ---- generation -------------------------------------------------------------------------------------

void TextLLMRunner::stop() { stop_requested_.store(true); }

void TextLLMRunner::reset() { pos_ = 0; }

Error TextLLMRunner::step(const int64_t* tokens, size_t n, const float** logits) {
  token_buffer_.assign(tokens, tokens + n);
  int64_t pos = pos_;
  TensorPtr t = from_blob(token_buffer_.data(), {1, static_cast<runtime::SizesType>(n)}, runtime::ScalarType::Long);
  TensorPtr p = from_blob(&pos, {1}, runtime::ScalarType::Long);
  auto out = module_->execute("forward", {EValue(t.get()), EValue(p.get())});
  if (!out.ok()) {
    std::string why = last_message();
    return runtime::set_error(out.error(), "forward failed at position %lld (%zu tokens): %s",
                              static_cast<long long>(pos_), n, why.c_str());
  }
  if (out->empty() || !out->at(0).is_tensor()) {
    return runtime::set_error(Error::InvalidProgram, "forward of '%s' does not return a logits tensor",
                              model_path_.c_str());
  }
  const runtime::Tensor& y = out->at(0).to_tensor();
  if (y.scalar_type() != runtime::ScalarType::Float || y.dim() < 1 || y.numel() == 0) {
    return runtime::set_error(Error::InvalidProgram, "forward of '%s' returns %s logits of rank %zu; the runner reads "
                              "float32 [1, vocab] (or [1, S, vocab])",
                              model_path_.c_str(), runtime::scalar_type_name(y.scalar_type()), y.dim());
  }
  const size_t vocab = static_cast<size_t>(y.sizes()[y.dim() - 1]);
  *logits = y.const_data_ptr<float>() + (y.numel() - vocab);
  logits_size_ = vocab;
  pos_ += static_cast<int64_t>(n);
  return Error::Ok;
}

Error TextLLMRunner::prefill(const std::vector<uint64_t>& tokens, const float** logits) {
  const size_t chunk = metadata_.enable_dynamic_shape ? static_cast<size_t>(metadata_.max_seq_len) : 1;
  std::vector<int64_t> ids(tokens.begin(), tokens.end());
  for (size_t i = 0; i < ids.size(); i += chunk) {
    ETKIT_CHECK_OK(step(ids.data() + i, std::min(chunk, ids.size() - i), logits));
  }
  return Error::Ok;
}

Error TextLLMRunner::run(std::vector<uint64_t> tokens, const GenerationConfig& config,
                         const std::function<void(uint64_t)>& on_token, std::vector<uint64_t>* generated) {
  // stats_ was started by the caller (generate() counts the prompt's encoding).
  stop_requested_.store(false);
  if (tokens.empty()) {
    return runtime::set_error(Error::InvalidArgument, "the prompt is empty: it encodes to no tokens");
  }
  const int64_t limit = metadata_.max_context_len;
  const int64_t room = limit - pos_ - 1;
  if (static_cast<int64_t>(tokens.size()) > room) {
    if (!config.truncate_prompt || room <= 0) {
      return runtime::set_error(Error::InvalidArgument,
                                "the prompt is %zu tokens but the program's context (get_max_context_len) is %lld "
                                "tokens, %lld already used; shorten it, set truncate_prompt (--truncate_prompt), or "
                                "export with a larger max_context_len",
                                tokens.size(), static_cast<long long>(limit), static_cast<long long>(pos_));
    }
    tokens.erase(tokens.begin(), tokens.end() - room);
  }
  stats_.num_prompt_tokens = static_cast<int64_t>(tokens.size());
  Sampler sampler(config.temperature, config.top_p, config.seed);
  const float* logits = nullptr;
  ETKIT_CHECK_OK(prefill(tokens, &logits));
  stats_.prompt_eval_end_ms = time_in_ms();

  std::unordered_set<uint64_t> eos;
  for (int64_t id : metadata_.eos_ids) eos.insert(static_cast<uint64_t>(id));
  size_t count = 0;
  const size_t max_new = static_cast<size_t>(std::max<int32_t>(0, config.max_new_tokens));
  stats_.stop_reason = "max_new_tokens";
  while (count < max_new) {
    const uint64_t token = sampler.sample(logits, logits_size_);
    if (count == 0) stats_.first_token_ms = time_in_ms();
    ++count;
    stats_.num_generated_tokens = static_cast<int64_t>(count);
    if (generated) generated->push_back(token);
    if (on_token) on_token(token);
    if (callback_error_ != Error::Ok) return callback_error_;
    if (eos.count(token)) {
      stats_.stop_reason = "eos";
      break;
    }
    if (count >= max_new) break;
    if (stop_requested_.load()) {
      stats_.stop_reason = "stopped";
      break;
    }
    if (pos_ >= limit) {
      char reason[96];
      std::snprintf(reason, sizeof(reason), "context full (%lld tokens, get_max_context_len)",
                    static_cast<long long>(limit));
      stats_.stop_reason = reason;
      break;
    }
    const int64_t id = static_cast<int64_t>(token);
    ETKIT_CHECK_OK(step(&id, 1, &logits));
  }
  return Error::Ok;
}

Error TextLLMRunner::generate_from_tokens(const std::vector<uint64_t>& prompt_tokens, const GenerationConfig& config,
                                          std::function<void(uint64_t)> token_callback,
                                          std::function<void(const Stats&)> stats_callback,
                                          std::vector<uint64_t>* generated) {
  const double start = time_in_ms();
  ETKIT_CHECK_OK(load());
  begin_stats(start);
  if (config.echo && token_callback) {
    for (uint64_t t : prompt_tokens) token_callback(t);
  }
  callback_error_ = Error::Ok;
  Error e = run(prompt_tokens, config, token_callback, generated);
  stats_.inference_end_ms = time_in_ms();
  if (e != Error::Ok) return e;
  if (stats_callback) stats_callback(stats_);
  return Error::Ok;
}

Error TextLLMRunner::generate(const std::string& prompt, const GenerationConfig& config,
                              std::function<void(const std::string&)> token_callback,
                              std::function<void(const Stats&)> stats_callback) {
  const double start = time_in_ms();
  ETKIT_CHECK_OK(load());
  if (!tokenizer_) {
    return runtime::set_error(Error::InvalidState,
                              "this runner has no tokenizer: give one (a tokenizer file) or generate from token ids");
  }
  if (config.apply_chat_template && !has_chat_turn_) {
    if (tokenizer_path_.empty()) {
      return runtime::set_error(Error::InvalidState,
                                "apply_chat_template: this runner has no chat turn; give one with set_chat_turn()");
    }
    auto turn = load_chat_turn(tokenizer_path_);
    if (!turn.ok()) return turn.error();
    set_chat_turn(std::move(turn.get()));
  }
  const std::string text = config.apply_chat_template ? chat_turn_.wrap(prompt) : prompt;
  begin_stats(start);
  auto encoded = tokenizer_->encode(text);
  if (!encoded.ok()) return encoded.error();
  std::vector<uint64_t> tokens = std::move(encoded.get());
  if (metadata_.bos_id >= 0 && pos_ == 0 && config.num_bos > 0) {
    tokens.insert(tokens.begin(), static_cast<size_t>(config.num_bos), static_cast<uint64_t>(metadata_.bos_id));
  }
  if (config.echo && token_callback) token_callback(text);
  std::unordered_set<uint64_t> eos;
  for (int64_t id : metadata_.eos_ids) eos.insert(static_cast<uint64_t>(id));
  Utf8Stream stream;
  uint64_t prev = tokens.empty() ? 0 : tokens.back();  // decode() may look at the token before
  callback_error_ = Error::Ok;
  auto on_token = [&](uint64_t token) {
    if (eos.count(token) || callback_error_ != Error::Ok) return;  // the EOS token is not text
    auto piece = tokenizer_->decode(prev, token);
    prev = token;
    if (!piece.ok()) {
      callback_error_ = piece.error();
      return;
    }
    std::string text = stream.push(piece.get());
    if (!text.empty() && token_callback) token_callback(text);
  };
  Error e = run(std::move(tokens), config, on_token, nullptr);
  std::string rest = stream.flush();
  if (!rest.empty() && token_callback) token_callback(rest);
  stats_.inference_end_ms = time_in_ms();
  if (e != Error::Ok) return e;
  if (stats_callback) stats_callback(stats_);
  return Error::Ok;
}

void TextLLMRunner::begin_stats(double start_ms) {
  stats_ = Stats();
  stats_.model_load_start_ms = load_start_ms_;
  stats_.model_load_end_ms = load_end_ms_;
  stats_.inference_start_ms = start_ms;
}

}  // namespace etkit::extension::llm
