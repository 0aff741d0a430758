#include "qnn_profile.h"

#include <cstdlib>
#include <cstring>

#include <unistd.h>

namespace etkit_qnn {
namespace {

/// The seven CSV fields of `line` (the identifier keeps any commas of its own).
bool split_fields(const char* line, size_t n, std::string fields[7]) {
  size_t field = 0, start = 0;
  for (size_t i = 0; i < n && field < 6; ++i) {
    if (line[i] != ',') continue;
    fields[field++].assign(line + start, i - start);
    start = i + 1;
  }
  if (field != 6) return false;
  fields[6].assign(line + start, n - start);
  return true;
}

bool parse_u64(const std::string& s, uint64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (end == nullptr || *end != '\0') return false;
  *out = static_cast<uint64_t>(v);
  return true;
}

/// "Relu__3_token_2:OpId_26 (cycles)" -> "Relu__3"; "Input OpId_2 (cycles)" -> "Input".
std::string op_name(const std::string& identifier) {
  std::string name = identifier;
  size_t cut = name.find(":OpId_");
  if (cut == std::string::npos) cut = name.find(" OpId_");
  if (cut == std::string::npos) cut = name.rfind(" (cycles)");
  if (cut != std::string::npos) name.resize(cut);
  const size_t token = name.rfind("_token_");
  if (token != std::string::npos && token + 7 < name.size() &&
      name.find_first_not_of("0123456789", token + 7) == std::string::npos) {
    name.resize(token);
  }
  return name;
}

}  // namespace

bool parse_last_qnn_run(const std::string& text, std::vector<QnnOpProfile>* ops, uint64_t* accelerator_us) {
  std::vector<QnnOpProfile> pending;
  uint64_t pending_us = 0;
  bool found = false;
  std::string fields[7];
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    size_t n = end - at;
    if (n > 0 && text[at + n - 1] == '\r') --n;
    if (split_fields(text.data() + at, n, fields)) {
      uint64_t value = 0;
      const bool numeric = parse_u64(fields[2], &value);
      if (numeric && fields[1] == "NODE" && fields[3] == "CYCLES") {
        pending.push_back({op_name(fields[6]), value});
      } else if (numeric && fields[3] == "US" && fields[6] == "Accelerator (execute) time") {
        pending_us = value;
      } else if (fields[1] == "EXECUTE") {
        ops->swap(pending);
        *accelerator_us = pending_us;
        pending.clear();
        pending_us = 0;
        found = true;
      }
    }
    at = end + 1;
  }
  return found;
}

QnnProfileFile::~QnnProfileFile() {
  if (path_.empty()) return;
  std::remove(path_.c_str());
  std::remove((path_ + "_qnn.log").c_str());  // QNN's binary log of the same profile, written beside it
}

bool QnnProfileFile::create() {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/etkit-qnn-profile-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  const int fd = mkstemp(buf.data());
  if (fd < 0) return false;
  close(fd);
  path_ = buf.data();
  offset_ = 0;
  return true;
}

bool QnnProfileFile::read_new(std::string* text) {
  text->clear();
  std::FILE* f = path_.empty() ? nullptr : std::fopen(path_.c_str(), "rb");
  if (f == nullptr) return false;
  if (std::fseek(f, offset_, SEEK_SET) == 0) {
    char chunk[4096];
    size_t n;
    while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0) text->append(chunk, n);
  }
  std::fclose(f);
  const size_t last = text->rfind('\n');
  if (last == std::string::npos) {
    text->clear();
    return false;
  }
  text->resize(last + 1);  // an incomplete last line waits for the next read
  offset_ += static_cast<long>(text->size());
  return true;
}

}  // namespace etkit_qnn
