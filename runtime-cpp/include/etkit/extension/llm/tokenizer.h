// etkit::extension::llm::Tokenizer: what TextLLMRunner needs from a tokenizer (text <-> token ids).
//
// The runner library is built with or without ExecuTorch's tokenizers (pytorch-tokenizers, C++:
// Hugging Face tokenizer.json, SentencePiece, tiktoken; scripts/tokenizers_cpp.sh builds them). Without
// them, load_tokenizer() fails with NotSupported and the runner works on token ids only
// (TextLLMRunner::generate_from_tokens). Any other tokenizer can be plugged in by implementing this
// interface.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "etkit/runtime/error.h"
#include "etkit/runtime/result.h"

namespace etkit::extension::llm {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// The token ids of `text`, without BOS/EOS (the runner adds GenerationConfig::num_bos itself).
  virtual runtime::Result<std::vector<uint64_t>> encode(const std::string& text) const = 0;

  /// The bytes `token` stands for when it follows `prev_token` (UTF-8, but a character may be split
  /// over several tokens: the runner joins the bytes before handing text out).
  virtual runtime::Result<std::string> decode(uint64_t prev_token, uint64_t token) const = 0;

  /// Number of token ids (regular and special).
  virtual int64_t vocab_size() const = 0;

  /// What the tokenizer is, e.g. "Hugging Face tokenizer.json" (for messages).
  virtual std::string kind() const = 0;
};

/// True when this library was built with pytorch-tokenizers (load_tokenizer can succeed).
bool tokenizers_available();

/// Loads a tokenizer file with pytorch-tokenizers: `*.json` as a Hugging Face tokenizer.json, anything
/// else as a SentencePiece model, then as a tiktoken file (the same choice as etkit.llm's Python
/// Tokenizer). Errors (message in runtime::last_error_message()): NotFound (no such file),
/// InvalidArgument (no tokenizer reads it), NotSupported (built without pytorch-tokenizers).
runtime::Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& path);

/// One user turn of an instruct model's chat template, rendered ahead of time: prefix + prompt + suffix is
/// what the Jinja template makes of a single user message with add_generation_prompt. The C++ runner has no
/// Jinja engine; etkit.llm's Tokenizer.write_chat_turn() (which `etkit llm export` calls) renders the
/// template in Python and writes the two strings to chat_turn.json beside tokenizer.json.
struct ChatTurn {
  std::string prefix;
  std::string suffix;
  bool strip = false;  // the template trims the prompt first (Llama 3's `| trim`): ASCII whitespace at both ends

  /// The text one user turn with `prompt` renders to.
  std::string wrap(const std::string& prompt) const {
    if (!strip) return prefix + prompt + suffix;
    const char* ws = " \t\n\r\f\v";
    const size_t first = prompt.find_first_not_of(ws);
    if (first == std::string::npos) return prefix + suffix;
    return prefix + prompt.substr(first, prompt.find_last_not_of(ws) - first + 1) + suffix;
  }
};

/// The file load_chat_turn() reads, in the folder of the tokenizer file.
inline constexpr const char* kChatTurnFile = "chat_turn.json";

/// Reads chat_turn.json ({"prefix": "...", "suffix": "..."[, "strip": true]}, UTF-8) from the folder of
/// `tokenizer_path`. Errors (message in runtime::last_error_message()): NotFound (no such file; the message
/// says how to make one), InvalidArgument (not a JSON object with string "prefix" and "suffix" and, when
/// present, a boolean "strip"), NotSupported (built without
/// pytorch-tokenizers, whose JSON reader it uses).
runtime::Result<ChatTurn> load_chat_turn(const std::string& tokenizer_path);

}  // namespace etkit::extension::llm
