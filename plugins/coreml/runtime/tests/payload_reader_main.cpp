// Test driver for payload_reader (built and run by tests/test_payload_reader_cpp.py):
//   payload_reader_main PAYLOAD   prints the files (path, size, FNV-1a of the bytes) and metadata,
//                                 or "ERROR: <message>" and exits 1.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "etkit_coreml/payload_reader.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::ifstream in(argv[1], std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  etkit_coreml::Payload payload;
  std::string error;
  if (!etkit_coreml::read_payload(bytes.data(), bytes.size(), &payload, &error)) {
    std::printf("ERROR: %s\n", error.c_str());
    return 1;
  }
  std::printf("ROOT %s\n", payload.root_name.c_str());
  for (const auto& f : payload.files) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < f.size; ++i) h = (h ^ f.data[i]) * 1099511628211ull;
    std::printf("FILE %s %zu %016llx\n", f.path.c_str(), f.size, static_cast<unsigned long long>(h));
  }
  for (const auto& n : payload.metadata.input_names) std::printf("INPUT %s\n", n.c_str());
  for (const auto& n : payload.metadata.output_names) std::printf("OUTPUT %s\n", n.c_str());
  std::printf("ID %s\nCOMPILED %d\n", payload.metadata.identifier.c_str(), payload.compiled_model ? 1 : 0);
  return 0;
}
