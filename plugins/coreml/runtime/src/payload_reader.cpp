// See payload_reader.h. A small JSON reader for the two documents a payload holds (the inmemoryfs
// node table and metadata.json): objects, arrays, strings with escapes, integers, true/false/null.
#include "etkit_coreml/payload_reader.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace etkit_coreml {
namespace {

constexpr size_t kMaxMetadataBytes = 10u << 20;  // ExecuTorch's reader gives up beyond this
constexpr int kMaxDepth = 64;

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  long long number = 0;
  bool integral = true;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;  // in document order; keys are unique

  const Json* get(const char* key) const {
    for (const auto& m : members) {
      if (m.first == key) return &m.second;
    }
    return nullptr;
  }
};

class Parser {
 public:
  Parser(const char* begin, const char* end) : p_(begin), end_(end) {}

  bool parse(Json* out, std::string* error) {
    if (!value(out, 0)) {
      *error = "metadata is not valid JSON: " + error_;
      return false;
    }
    skip_space();
    if (p_ != end_) {
      *error = "metadata has trailing bytes after the JSON document";
      return false;
    }
    return true;
  }

 private:
  bool fail(const char* why) {
    if (error_.empty()) error_ = why;
    return false;
  }
  void skip_space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool literal(const char* word) {
    size_t n = std::strlen(word);
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0) return fail("unknown literal");
    p_ += n;
    return true;
  }
  static void append_utf8(std::string* s, unsigned cp) {
    if (cp < 0x80) {
      s->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  bool hex4(unsigned* cp) {
    if (end_ - p_ < 4) return fail("truncated \\u escape");
    *cp = 0;
    for (int i = 0; i < 4; ++i, ++p_) {
      char c = *p_;
      unsigned d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                   : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : 16u;
      if (d > 15) return fail("bad \\u escape");
      *cp = *cp * 16 + d;
    }
    return true;
  }
  bool string(std::string* s) {
    if (p_ >= end_ || *p_ != '"') return fail("expected a string");
    ++p_;
    while (p_ < end_ && *p_ != '"') {
      char c = *p_++;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        s->push_back(c);
        continue;
      }
      if (p_ >= end_) return fail("truncated escape");
      char e = *p_++;
      switch (e) {
        case '"': case '\\': case '/': s->push_back(e); break;
        case 'b': s->push_back('\b'); break;
        case 'f': s->push_back('\f'); break;
        case 'n': s->push_back('\n'); break;
        case 'r': s->push_back('\r'); break;
        case 't': s->push_back('\t'); break;
        case 'u': {
          unsigned cp = 0;
          if (!hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {  // surrogate pair
            unsigned low = 0;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return fail("unpaired surrogate");
            p_ += 2;
            if (!hex4(&low) || low < 0xDC00 || low > 0xDFFF) return fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(s, cp);
          break;
        }
        default: return fail("unknown escape");
      }
    }
    if (p_ >= end_) return fail("unterminated string");
    ++p_;
    return true;
  }
  bool number(Json* out) {
    const char* start = p_;
    bool negative = p_ < end_ && *p_ == '-';
    if (negative) ++p_;
    long long v = 0;
    bool digits = false;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
      if (v > (0x7fffffffffffffffLL - 9) / 10) return fail("number too large");
      v = v * 10 + (*p_++ - '0');
      digits = true;
    }
    if (!digits) return fail("expected a value");
    if (p_ < end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) {
      out->integral = false;  // fractions are parsed over but never used by the payload format
      ++p_;
      while (p_ < end_ && ((*p_ >= '0' && *p_ <= '9') || *p_ == '+' || *p_ == '-' || *p_ == 'e' || *p_ == 'E')) ++p_;
    }
    (void)start;
    out->kind = Json::Number;
    out->number = negative ? -v : v;
    return true;
  }
  bool value(Json* out, int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    skip_space();
    if (p_ >= end_) return fail("unexpected end");
    char c = *p_;
    if (c == '{') {
      ++p_;
      out->kind = Json::Object;
      skip_space();
      if (p_ < end_ && *p_ == '}') return ++p_, true;
      while (true) {
        skip_space();
        std::string key;
        if (!string(&key)) return false;
        skip_space();
        if (p_ >= end_ || *p_ != ':') return fail("expected ':'");
        ++p_;
        Json member;
        if (!value(&member, depth + 1)) return false;
        for (const auto& m : out->members) {
          if (m.first == key) return fail("duplicate key");
        }
        out->members.emplace_back(std::move(key), std::move(member));
        skip_space();
        if (p_ < end_ && *p_ == ',') { ++p_; continue; }
        if (p_ < end_ && *p_ == '}') return ++p_, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      ++p_;
      out->kind = Json::Array;
      skip_space();
      if (p_ < end_ && *p_ == ']') return ++p_, true;
      while (true) {
        out->items.emplace_back();
        if (!value(&out->items.back(), depth + 1)) return false;
        skip_space();
        if (p_ < end_ && *p_ == ',') { ++p_; continue; }
        if (p_ < end_ && *p_ == ']') return ++p_, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      out->kind = Json::String;
      return string(&out->text);
    }
    if (c == 't') { out->kind = Json::Bool; out->boolean = true; return literal("true"); }
    if (c == 'f') { out->kind = Json::Bool; return literal("false"); }
    if (c == 'n') { out->kind = Json::Null; return literal("null"); }
    return number(out);
  }

  const char* p_;
  const char* end_;
  std::string error_;
};

bool integer(const Json* v, long long* out) {
  if (v == nullptr || v->kind != Json::Number || !v->integral || v->number < 0) return false;
  *out = v->number;
  return true;
}

bool strings(const Json* v, std::vector<std::string>* out) {
  if (v == nullptr || v->kind != Json::Array) return false;
  for (const Json& item : v->items) {
    if (item.kind != Json::String) return false;
    out->push_back(item.text);
  }
  return true;
}

/// True if `s` is well-formed UTF-8 (file names and feature names become NSStrings on Apple platforms).
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t extra = 0;
    if (c < 0x80) extra = 0;
    else if (c >= 0xC2 && c <= 0xDF) extra = 1;
    else if (c >= 0xE0 && c <= 0xEF) extra = 2;
    else if (c >= 0xF0 && c <= 0xF4) extra = 3;
    else return false;
    if (s.size() - i <= extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += extra + 1;
  }
  return true;
}

bool set(std::string* error, const std::string& why) {
  *error = why;
  return false;
}

}  // namespace

bool read_payload(const uint8_t* data, size_t size, Payload* out, std::string* error) {
  if (out == nullptr || error == nullptr) return false;
  *out = Payload();
  if (data == nullptr || size == 0) return set(error, "the Core ML payload is empty");
  // The metadata is stored reversed at the end, after optional trailing zero/whitespace bytes.
  size_t last = size;
  auto skipped = [](uint8_t c) { return c == 0 || c == ' ' || (c >= '\t' && c <= '\r'); };
  while (last > 0 && skipped(data[last - 1])) --last;
  if (last == 0 || data[last - 1] != '{') {
    return set(error, "not a Core ML payload: it does not end with inmemoryfs metadata (a reversed JSON object)");
  }
  // Find the matching '}' scanning backwards (reversed text), honouring strings.
  std::string reversed;
  int depth = 0;
  bool in_string = false, escaped = false;
  size_t i = last;
  while (i > 0) {
    char c = static_cast<char>(data[--i]);
    reversed.push_back(c);
    if (reversed.size() > kMaxMetadataBytes) return set(error, "Core ML payload metadata exceeds 10 MiB");
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth == 0) break;
    }
  }
  if (depth != 0) return set(error, "Core ML payload metadata is truncated (unbalanced braces)");
  const size_t metadata_start = i;
  Json root;
  if (!Parser(reversed.data(), reversed.data() + reversed.size()).parse(&root, error)) return false;
  const Json* nodes = root.get("nodes");
  if (root.kind != Json::Object || nodes == nullptr || nodes->kind != Json::Array || nodes->items.empty()) {
    return set(error, "Core ML payload metadata has no \"nodes\" list");
  }
  const size_t n = nodes->items.size();
  std::vector<int> parent(n, -1);
  std::vector<std::string> paths(n);
  // Post-order: the root is last; walk from it, giving every node its path (children have smaller indices).
  for (size_t k = n; k-- > 0;) {
    const Json& node = nodes->items[k];
    const Json* name = node.get("name");
    long long kind = -1;
    if (node.kind != Json::Object || name == nullptr || name->kind != Json::String || !integer(node.get("kind"), &kind)) {
      return set(error, "Core ML payload node " + std::to_string(k) + " lacks a name or kind");
    }
    if (k + 1 != n && parent[k] < 0) {
      return set(error, "Core ML payload node " + std::to_string(k) + " ('" + name->text + "') is not in the tree");
    }
    if (name->text.empty() || name->text == "." || name->text == ".." || name->text.find('/') != std::string::npos ||
        name->text.find('\0') != std::string::npos || !valid_utf8(name->text)) {
      if (k + 1 != n) return set(error, "Core ML payload node " + std::to_string(k) + " has an invalid name");
    }
    if (k + 1 == n) {
      if (kind != 1) return set(error, "Core ML payload root is not a directory");
      out->root_name = name->text;
    }
    if (kind == 1) {
      const Json* children = node.get("children");
      if (children == nullptr || children->kind != Json::Object) {
        return set(error, "Core ML payload directory '" + name->text + "' has no children table");
      }
      for (const auto& entry : children->members) {
        long long child = -1;
        if (!integer(&entry.second, &child) || static_cast<size_t>(child) >= k || parent[child] >= 0) {
          return set(error, "Core ML payload directory '" + name->text + "' has a bad child index for '" + entry.first + "'");
        }
        const Json* child_name = nodes->items[child].get("name");
        if (child_name == nullptr || child_name->kind != Json::String || child_name->text != entry.first) {
          return set(error, "Core ML payload entry '" + entry.first + "' does not match its node's name");
        }
        parent[child] = static_cast<int>(k);
        paths[child] = (k + 1 == n ? std::string() : paths[k] + "/") + entry.first;
      }
    } else if (kind == 0) {
      const Json* region = node.get("dataRegion");
      long long offset = -1, length = -1;
      if (region == nullptr || !integer(region->get("offset"), &offset) || !integer(region->get("size"), &length) ||
          static_cast<unsigned long long>(offset) > metadata_start ||
          static_cast<unsigned long long>(length) > metadata_start - static_cast<size_t>(offset)) {
        return set(error, "Core ML payload file '" + paths[k] + "' has a data region outside the payload");
      }
      out->files.push_back(PayloadFile{paths[k], data + offset, static_cast<size_t>(length)});
    } else {
      return set(error, "Core ML payload node " + std::to_string(k) + " has unknown kind " + std::to_string(kind));
    }
  }
  std::reverse(out->files.begin(), out->files.end());
  // metadata.json
  const PayloadFile* meta = nullptr;
  bool has_package = false;
  for (const PayloadFile& f : out->files) {
    if (f.path == "metadata.json") meta = &f;
    if (f.path.rfind("model.mlpackage/", 0) == 0) has_package = true;
    if (f.path.rfind("model.mlmodelc/", 0) == 0) out->compiled_model = true;
  }
  if (meta == nullptr) return set(error, "Core ML payload has no metadata.json");
  if (!has_package && !out->compiled_model) return set(error, "Core ML payload has neither model.mlpackage/ nor model.mlmodelc/");
  Json m;
  const char* text = reinterpret_cast<const char*>(meta->data);
  std::string meta_error;
  if (!Parser(text, text + meta->size).parse(&m, &meta_error)) return set(error, "metadata.json: " + meta_error);
  const Json* identifier = m.get("identifier");
  if (m.kind != Json::Object || !strings(m.get("inputNames"), &out->metadata.input_names) ||
      !strings(m.get("outputNames"), &out->metadata.output_names) || identifier == nullptr ||
      identifier->kind != Json::String) {
    return set(error, "metadata.json lacks inputNames, outputNames or identifier");
  }
  out->metadata.identifier = identifier->text;
  if (out->metadata.output_names.empty()) return set(error, "metadata.json lists no outputs");
  // the identifier names a directory on the device: letters, digits, '_' and '-' only
  if (identifier->text.empty() || identifier->text.size() > 128 ||
      identifier->text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
          std::string::npos) {
    return set(error, "metadata.json has an identifier that is not [A-Za-z0-9_-]{1,128}");
  }
  for (const auto* list : {&out->metadata.input_names, &out->metadata.output_names}) {
    for (const std::string& n : *list) {
      if (!valid_utf8(n)) return set(error, "metadata.json has a feature name that is not UTF-8");
    }
  }
  return true;
}

}  // namespace etkit_coreml
