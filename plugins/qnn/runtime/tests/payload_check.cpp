// etkit_qnn_payload_check FILE: runs the delegate's payload parser on FILE's bytes and prints
//   ok graph=<name> inputs=<n> outputs=<n> context=<bytes>     (exit 0)
//   error: <the parser's message>                              (exit 2)
// tests/test_qnn_payload_reader.py feeds it valid and corrupt payloads: it must answer, never crash.
#include <cstdio>
#include <vector>

#include "payload.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PAYLOAD_FILE\n", argv[0]);
    return 1;
  }
  std::FILE* f = std::fopen(argv[1], "rb");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot open %s\n", argv[1]);
    return 1;
  }
  std::vector<unsigned char> bytes;
  unsigned char chunk[65536];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  std::fclose(f);
  // A heap copy of exactly the file's size, so reads past the end show up under sanitizers.
  std::vector<unsigned char> exact(bytes.begin(), bytes.end());
  const etkit_qnn::fb::QnnPayload* root = nullptr;
  const auto err = etkit_qnn::parse_payload(exact.empty() ? nullptr : exact.data(), exact.size(), &root);
  if (err != etkit::runtime::Error::Ok) {
    std::printf("error: %s\n", etkit::runtime::last_error_message());
    return 2;
  }
  std::printf("ok graph=%s inputs=%u outputs=%u context=%u\n", root->graph_name()->c_str(), root->inputs()->size(),
              root->outputs()->size(), root->context_binary()->size());
  return 0;
}
