// etkit_llm_runner: generates text with a .pte exported by etkit.llm.export_llm (TextLLMRunner), the
// native counterpart of `etkit llm generate`.
//
//   etkit_llm_runner --model_path m.pte --tokenizer_path tokenizer.json --prompt "Once upon a time"
//                    [--max_new_tokens 64] [--temperature 0] [--top_p 1] [--seed 0] [--num_bos 0]
//                    [--threads 1] [--echo] [--truncate_prompt] [--chat]
//   etkit_llm_runner --model_path m.pte --prompt_tokens 1,2,3 [...]
//
// --data_path m.ptd gives the .ptd data file holding the weights of a program exported with
// `etkit llm export --external-constants` (LlmConfig(external_constants=True)).
// --chat wraps the prompt as one user turn of the model's chat template, read from chat_turn.json beside
// the tokenizer (`etkit llm export` writes it: the Jinja template rendered in Python, as the text before
// and after the prompt), the same text `etkit llm generate --chat` encodes.
// Text mode streams the generated text to stdout. --prompt_tokens gives the prompt as token ids (no
// tokenizer needed) and prints the generated ids, comma-separated (the EOS id that ended generation
// included). A stats line (prompt tokens, generated, load ms, first token ms, prefill and decode tok/s,
// stop reason) goes to stderr. Ctrl-C stops generation after the current token.
// Options take their value as the next argument or after '='. Exit status: 0 ok, 1 load or generation
// failure (the message names the cause), 2 usage.
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "etkit/extension/llm/text_llm_runner.h"
#include "etkit/runtime/threadpool.h"
#include "etkit/runtime/runtime.h"
#include "registrations.h"

namespace rt = etkit::runtime;
namespace llm = etkit::extension::llm;

namespace {

const char kProg[] = "etkit_llm_runner";

struct Options {
  std::string model_path;
  std::string tokenizer_path;
  std::string data_path;
  std::string prompt;
  bool has_prompt = false;
  std::string prompt_tokens;
  bool has_prompt_tokens = false;
  llm::GenerationConfig config;
  int threads = 1;
};

int usage(const char* msg) {
  if (msg) std::fprintf(stderr, "%s: %s\n", kProg, msg);
  std::fprintf(stderr,
               "usage: %s --model_path M.pte (--tokenizer_path T --prompt TEXT | --prompt_tokens 1,2,3)\n"
               "       [--max_new_tokens N] [--temperature T] [--top_p P] [--seed S] [--num_bos N] [--threads N]\n"
               "       [--echo] [--truncate_prompt] [--chat] [--data_path D.ptd]\n"
               "tokenizers: %s\n",
               kProg,
               llm::tokenizers_available() ? "pytorch-tokenizers (tokenizer.json, SentencePiece, tiktoken)"
                                           : "none in this build (--prompt_tokens only)");
  return 2;
}

bool parse_int(const char* name, const std::string& v, long long lo, long long hi, long long* out) {
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi) {
    std::fprintf(stderr, "%s: %s takes an integer in [%lld, %lld], got '%s'\n", kProg, name, lo, hi, v.c_str());
    return false;
  }
  *out = x;
  return true;
}

bool parse_float(const char* name, const std::string& v, float* out) {
  char* end = nullptr;
  float x = std::strtof(v.c_str(), &end);
  if (v.empty() || *end != '\0') {
    std::fprintf(stderr, "%s: %s takes a number, got '%s'\n", kProg, name, v.c_str());
    return false;
  }
  *out = x;
  return true;
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string inline_value;
    bool has_inline = false;
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_inline = true;
    }
    auto value = [&](std::string* out) -> bool {
      if (has_inline) {
        *out = inline_value;
        return true;
      }
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", kProg, a.c_str());
        return false;
      }
      *out = argv[++i];
      return true;
    };
    auto flag = [&]() -> bool {
      if (has_inline) std::fprintf(stderr, "%s: %s takes no value\n", kProg, a.c_str());
      return !has_inline;
    };
    std::string v;
    long long n = 0;
    if (a == "--model_path") {
      if (!value(&o->model_path)) return false;
    } else if (a == "--tokenizer_path") {
      if (!value(&o->tokenizer_path)) return false;
    } else if (a == "--data_path") {
      if (!value(&o->data_path)) return false;
    } else if (a == "--prompt") {
      if (!value(&o->prompt)) return false;
      o->has_prompt = true;
    } else if (a == "--prompt_tokens") {
      if (!value(&o->prompt_tokens)) return false;
      o->has_prompt_tokens = true;
    } else if (a == "--max_new_tokens") {
      if (!value(&v) || !parse_int("--max_new_tokens", v, 0, 1 << 30, &n)) return false;
      o->config.max_new_tokens = static_cast<int32_t>(n);
    } else if (a == "--temperature") {
      if (!value(&v) || !parse_float("--temperature", v, &o->config.temperature)) return false;
    } else if (a == "--top_p") {
      if (!value(&v) || !parse_float("--top_p", v, &o->config.top_p)) return false;
    } else if (a == "--seed") {
      if (!value(&v) || !parse_int("--seed", v, 0, INT64_MAX, &n)) return false;
      o->config.seed = static_cast<uint64_t>(n);
    } else if (a == "--num_bos") {
      if (!value(&v) || !parse_int("--num_bos", v, 0, 1 << 20, &n)) return false;
      o->config.num_bos = static_cast<int32_t>(n);
    } else if (a == "--threads") {
      if (!value(&v) || !parse_int("--threads", v, 0, 1 << 16, &n)) return false;
      o->threads = static_cast<int>(n);
    } else if (a == "--echo") {
      if (!flag()) return false;
      o->config.echo = true;
    } else if (a == "--truncate_prompt") {
      if (!flag()) return false;
      o->config.truncate_prompt = true;
    } else if (a == "--chat") {
      if (!flag()) return false;
      o->config.apply_chat_template = true;
    } else if (a == "--help" || a == "-h") {
      return false;
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s'\n", kProg, argv[i]);
      return false;
    }
  }
  return true;
}

/// "1,2,3" (commas and/or blanks between ids) -> ids.
bool parse_ids(const std::string& s, std::vector<uint64_t>* ids) {
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ',' || s[i] == ' ' || s[i] == '\t')) ++i;
    if (i == s.size()) break;
    size_t j = i;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == i || j - i > 18 || (j < s.size() && s[j] != ',' && s[j] != ' ' && s[j] != '\t')) {
      std::fprintf(stderr, "%s: --prompt_tokens takes token ids separated by commas, e.g. 1,2,3; got '%s'\n", kProg,
                   s.c_str());
      return false;
    }
    ids->push_back(std::strtoull(s.substr(i, j - i).c_str(), nullptr, 10));
    i = j;
  }
  return true;
}

int fail(const char* what, rt::Error e) {
  std::fprintf(stderr, "%s: %s: %s: %s\n", kProg, what, rt::error_name(e), rt::last_error_message());
  return 1;
}

llm::TextLLMRunner* g_runner = nullptr;

extern "C" void on_sigint(int) {
  if (g_runner) g_runner->stop();  // an atomic store: safe in a signal handler
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse(argc, argv, &opt)) return usage(nullptr);
  if (opt.model_path.empty()) return usage("--model_path is required");
  if (opt.has_prompt == opt.has_prompt_tokens) return usage("give either --prompt (with --tokenizer_path) or --prompt_tokens");
  if (opt.has_prompt && opt.tokenizer_path.empty()) return usage("--prompt needs --tokenizer_path");
  if (opt.config.apply_chat_template && !opt.has_prompt) return usage("--chat needs a text --prompt");
  if (opt.has_prompt && !llm::tokenizers_available()) {
    std::fprintf(stderr,
                 "%s: this build has no tokenizer library (pytorch-tokenizers: scripts/tokenizers_cpp.sh did not "
                 "build, or build/native was configured without -DETKIT_TOKENIZERS_PREFIX); give the prompt as token "
                 "ids with --prompt_tokens\n",
                 kProg);
    return 2;
  }
  std::vector<uint64_t> prompt_ids;
  if (opt.has_prompt_tokens && !parse_ids(opt.prompt_tokens, &prompt_ids)) return 2;

  if (etkit::runner::register_kernels() != 0) return fail("registering portable kernels", rt::Error::Internal);
  for (const auto* b = etkit::runner::linked_backends(); b->function_name != nullptr; ++b) {
    if (b->register_fn() != 0) {
      std::fprintf(stderr, "%s: %s() failed: %s\n", kProg, b->function_name, etkit_backend_registration_error());
      return 1;
    }
  }
  if (opt.threads > 0) {
    rt::Error e = rt::set_kernel_threads(static_cast<size_t>(opt.threads));
    if (e != rt::Error::Ok) return fail("setting the kernels' threads", e);
  }
  if (opt.threads > 0 && rt::registered_backend_count() > 0) {
    rt::Error e = rt::set_backend_option("*", "num_threads", opt.threads);
    if (e != rt::Error::Ok && e != rt::Error::NotSupported) return fail("setting num_threads", e);
  }

  llm::TextLLMRunner runner(opt.model_path, opt.tokenizer_path, opt.data_path);
  rt::Error e = runner.load();
  if (e != rt::Error::Ok) return fail("cannot load", e);
  g_runner = &runner;
  std::signal(SIGINT, on_sigint);

  bool printed = false;
  llm::Stats stats;
  auto on_stats = [&](const llm::Stats& s) { stats = s; };
  if (opt.has_prompt) {
    e = runner.generate(
        opt.prompt, opt.config,
        [&](const std::string& piece) {
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
          printed = true;
        },
        on_stats);
  } else {
    if (opt.config.num_bos > 0 && runner.metadata().bos_id >= 0) {
      prompt_ids.insert(prompt_ids.begin(), static_cast<size_t>(opt.config.num_bos),
                        static_cast<uint64_t>(runner.metadata().bos_id));
    }
    e = runner.generate_from_tokens(
        prompt_ids, opt.config,
        [&](uint64_t id) {
          std::printf("%s%llu", printed ? "," : "", static_cast<unsigned long long>(id));
          std::fflush(stdout);
          printed = true;
        },
        on_stats);
  }
  g_runner = nullptr;
  if (printed || e == rt::Error::Ok) std::printf("\n");
  std::fflush(stdout);
  if (e != rt::Error::Ok) return fail("generation failed", e);
  std::fprintf(stderr, "%s\n", stats.line().c_str());
  return 0;
}
