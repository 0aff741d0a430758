// load_tokenizer() when the library is built without pytorch-tokenizers: token ids only.
#include "etkit/extension/llm/tokenizer.h"

namespace etkit::extension::llm {

bool tokenizers_available() { return false; }

runtime::Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& path) {
  return runtime::set_error(runtime::Error::NotSupported,
                            "cannot load tokenizer '%s': this build has no tokenizer library (pytorch-tokenizers; "
                            "scripts/tokenizers_cpp.sh builds it, then configure with -DETKIT_TOKENIZERS_PREFIX=<its "
                            "prefix>); give prompt token ids instead",
                            path.c_str());
}

runtime::Result<ChatTurn> load_chat_turn(const std::string& tokenizer_path) {
  return runtime::set_error(runtime::Error::NotSupported,
                            "cannot read the chat turn beside '%s': this build has no tokenizer library "
                            "(pytorch-tokenizers), so it takes token ids only",
                            tokenizer_path.c_str());
}

}  // namespace etkit::extension::llm
