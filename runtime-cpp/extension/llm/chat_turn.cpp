// load_chat_turn(): chat_turn.json (etkit.llm's Tokenizer.write_chat_turn) beside a tokenizer file, read
// with the JSON library the tokenizers ship (nlohmann/json). Compiled only with pytorch-tokenizers
// (ETKIT_TOKENIZERS_PREFIX); no_tokenizer.cpp has the refusal.
#include <exception>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "etkit/extension/llm/tokenizer.h"

namespace etkit::extension::llm {

runtime::Result<ChatTurn> load_chat_turn(const std::string& tokenizer_path) {
  const size_t slash = tokenizer_path.find_last_of('/');
  const std::string path =
      (slash == std::string::npos ? std::string() : tokenizer_path.substr(0, slash + 1)) + kChatTurnFile;
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return runtime::set_error(runtime::Error::NotFound,
                              "no chat template: '%s' does not exist (`etkit llm export` writes it "
                              "beside tokenizer.json; for a tokenizer saved otherwise, run "
                              "`python -c \"from etkit.llm import Tokenizer; Tokenizer('%s').write_chat_turn()\"`)",
                              path.c_str(), tokenizer_path.c_str());
  }
  std::stringstream text;
  text << file.rdbuf();
  // Parsed without exceptions: a malformed file gives a discarded value.
  const nlohmann::json data = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!data.is_object() || !data.contains("prefix") || !data.contains("suffix") || !data["prefix"].is_string() ||
      !data["suffix"].is_string() || (data.contains("strip") && !data["strip"].is_boolean())) {
    return runtime::set_error(runtime::Error::InvalidArgument,
                              "'%s' must be a JSON object with string \"prefix\" and \"suffix\" (the text the chat "
                              "template puts around one user prompt) and, when present, boolean \"strip\"",
                              path.c_str());
  }
  ChatTurn turn;
  turn.prefix = data["prefix"].get<std::string>();
  turn.suffix = data["suffix"].get<std::string>();
  turn.strip = data.contains("strip") && data["strip"].get<bool>();
  return turn;
}

}  // namespace etkit::extension::llm
