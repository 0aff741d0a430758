// load_tokenizer() over ExecuTorch's tokenizers (pytorch-tokenizers C++, built by
// scripts/tokenizers_cpp.sh). Compiled only when the library is built with them (ETKIT_TOKENIZERS_PREFIX).
#include <sys/stat.h>

#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pytorch/tokenizers/hf_tokenizer.h>
#include <pytorch/tokenizers/regex.h>
#include <pytorch/tokenizers/sentencepiece.h>
#include <pytorch/tokenizers/tiktoken.h>

#include "etkit/extension/llm/tokenizer.h"

namespace tokenizers {
// Defined in the library's regex_lookahead.cpp (PCRE2, then std::regex), not declared in its headers.
Result<std::unique_ptr<IRegex>> create_fallback_regex(const std::string& pattern);
}  // namespace tokenizers

namespace etkit::extension::llm {

using runtime::Error;
using runtime::Result;

namespace {

const char* tokenizers_error_name(tokenizers::Error e) {
  switch (e) {
    case tokenizers::Error::Ok: return "Ok";
    case tokenizers::Error::Internal: return "Internal";
    case tokenizers::Error::Uninitialized: return "Uninitialized";
    case tokenizers::Error::OutOfRange: return "OutOfRange";
    case tokenizers::Error::LoadFailure: return "LoadFailure";
    case tokenizers::Error::EncodeFailure: return "EncodeFailure";
    case tokenizers::Error::Base64DecodeFailure: return "Base64DecodeFailure";
    case tokenizers::Error::ParseFailure: return "ParseFailure";
    case tokenizers::Error::DecodeFailure: return "DecodeFailure";
    case tokenizers::Error::RegexFailure: return "RegexFailure";
  }
  return "unknown error";
}

class PytorchTokenizer final : public Tokenizer {
 public:
  PytorchTokenizer(std::unique_ptr<tokenizers::Tokenizer> tok, std::string kind)
      : tok_(std::move(tok)), kind_(std::move(kind)) {}

  Result<std::vector<uint64_t>> encode(const std::string& text) const override {
    try {
      auto ids = tok_->encode(text, 0, 0);
      if (!ids.ok()) {
        return runtime::set_error(Error::InvalidArgument, "the %s cannot encode the prompt (%s)", kind_.c_str(),
                                  tokenizers_error_name(ids.error()));
      }
      return std::move(ids.get());
    } catch (const std::exception& e) {
      return runtime::set_error(Error::Internal, "the %s failed to encode the prompt: %s", kind_.c_str(), e.what());
    }
  }

  Result<std::string> decode(uint64_t prev_token, uint64_t token) const override {
    try {
      auto piece = tok_->decode(prev_token, token);
      if (!piece.ok()) {
        return runtime::set_error(Error::InvalidArgument, "the %s cannot decode token %llu (%s)", kind_.c_str(),
                                  static_cast<unsigned long long>(token), tokenizers_error_name(piece.error()));
      }
      return std::move(piece.get());
    } catch (const std::exception& e) {
      return runtime::set_error(Error::Internal, "the %s failed to decode token %llu: %s", kind_.c_str(),
                                static_cast<unsigned long long>(token), e.what());
    }
  }

  int64_t vocab_size() const override { return tok_->vocab_size(); }
  std::string kind() const override { return kind_; }

 private:
  std::unique_ptr<tokenizers::Tokenizer> tok_;
  std::string kind_;
};

template <typename T>
std::unique_ptr<tokenizers::Tokenizer> make() {
  return std::unique_ptr<tokenizers::Tokenizer>(new T());
}

}  // namespace

bool tokenizers_available() { return true; }

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& path) {
  // Hugging Face pre-tokenizer patterns use lookaheads that RE2 rejects; the library falls back to
  // PCRE2 once this is registered (done here rather than by its static initialiser, which a static
  // link without --whole-archive would drop).
  static const bool registered = tokenizers::register_override_fallback_regex(tokenizers::create_fallback_regex);
  (void)registered;

  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return runtime::set_error(Error::NotFound, "tokenizer file '%s' does not exist", path.c_str());
  }
  struct Candidate {
    const char* kind;
    std::unique_ptr<tokenizers::Tokenizer> (*create)();
  };
  std::vector<Candidate> candidates;
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (json) {
    candidates.push_back({"Hugging Face tokenizer", &make<tokenizers::HFTokenizer>});
  } else {
    candidates.push_back({"SentencePiece tokenizer", &make<tokenizers::SPTokenizer>});
    candidates.push_back({"tiktoken tokenizer", &make<tokenizers::Tiktoken>});
  }
  std::string errors;
  for (const Candidate& c : candidates) {
    std::unique_ptr<tokenizers::Tokenizer> tok = c.create();
    std::string status;
    try {
      tokenizers::Error e = tok->load(path);
      status = tokenizers_error_name(e);
    } catch (const std::exception& e) {
      status = e.what();
    }
    if (tok->is_loaded()) {
      return std::unique_ptr<Tokenizer>(new PytorchTokenizer(std::move(tok), c.kind));
    }
    errors += std::string(errors.empty() ? "" : "; ") + c.kind + ": " + status;
  }
  return runtime::set_error(Error::InvalidArgument, "no tokenizer could read '%s' (%s)", path.c_str(),
                            errors.c_str());
}

}  // namespace etkit::extension::llm
