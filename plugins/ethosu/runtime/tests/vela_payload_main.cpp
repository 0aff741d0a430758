// Test driver for vela_payload (built and run by tests/test_ethosu_payload_reader_cpp.py).
//
//   vela_payload_main PAYLOAD
//       Prints the parsed payload and exits 0, or prints "ERROR: <message>" and exits 1:
//         CMD <size> <fnv1a64>
//         WEIGHTS <size> <fnv1a64>
//         SCRATCH <bytes>
//         INPUT <i> <d0> <d1> <d2> <d3> <d4> <d5> <elem_size> <offset> <region>   (one line per input)
//         OUTPUT <i> ...                                                         (same, per output)
//         TOSA <size> <fnv1a64>   or   TOSA none
//   vela_payload_main PAYLOAD --match input|output INDEX NUMEL ELEM_SIZE
//       Checks a tensor of NUMEL elements of ELEM_SIZE bytes against that I/O record with
//       tensor_matches_vela_io(): prints "MATCH" and exits 0, or "MISMATCH: <why>" and exits 1.
//
// The file is read into a buffer of exactly its size, so that AddressSanitizer reports any read past it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "etkit_ethosu/vela_payload.h"

namespace {

bool read_file(const char* path, std::vector<uint8_t>* bytes) {
  std::FILE* f = std::fopen(path, "rb");
  if (f == nullptr) return false;
  std::vector<uint8_t> all;
  uint8_t chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0) all.insert(all.end(), chunk, chunk + n);
  const bool ok = std::ferror(f) == 0;
  std::fclose(f);
  *bytes = std::vector<uint8_t>(all.begin(), all.end());  // capacity == size: no slack after the data
  return ok;
}

unsigned long long fnv1a64(const etkit_ethosu::ByteView& view) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < view.size; ++i) h = (h ^ view.data[i]) * 1099511628211ull;
  return static_cast<unsigned long long>(h);
}

void print_io(const char* kind, size_t i, const etkit_ethosu::VelaIO& io) {
  std::printf("%s %zu %d %d %d %d %d %d %d %d %d\n", kind, i, io.shape[0], io.shape[1], io.shape[2], io.shape[3],
              io.shape[4], io.shape[5], io.elem_size, io.offset, io.region);
}

int match(const etkit_ethosu::VelaPayloadView& payload, char** argv) {
  const bool input = std::strcmp(argv[0], "input") == 0;
  if (!input && std::strcmp(argv[0], "output") != 0) return 2;
  const std::vector<etkit_ethosu::VelaIO>& ios = input ? payload.inputs : payload.outputs;
  const unsigned long index = std::strtoul(argv[1], nullptr, 10);
  if (index >= ios.size()) return 2;
  const unsigned long long numel = std::strtoull(argv[2], nullptr, 10);
  const unsigned long elem_size = std::strtoul(argv[3], nullptr, 10);
  char why[256];
  if (!etkit_ethosu::tensor_matches_vela_io(ios[index], numel, elem_size, why, sizeof(why))) {
    std::printf("MISMATCH: %s\n", why);
    return 1;
  }
  std::printf("MATCH\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool matching = argc == 7 && std::strcmp(argv[2], "--match") == 0;
  if (argc != 2 && !matching) return 2;
  std::vector<uint8_t> bytes;
  if (!read_file(argv[1], &bytes)) {
    std::printf("ERROR: cannot read %s\n", argv[1]);
    return 1;
  }
  etkit_ethosu::VelaPayloadView payload;
  std::string error;
  if (!etkit_ethosu::parse_vela_payload(bytes.data(), bytes.size(), &payload, &error)) {
    std::printf("ERROR: %s\n", error.c_str());
    return 1;
  }
  if (matching) return match(payload, argv + 3);
  std::printf("CMD %zu %016llx\n", payload.cmd_data.size, fnv1a64(payload.cmd_data));
  std::printf("WEIGHTS %zu %016llx\n", payload.weight_data.size, fnv1a64(payload.weight_data));
  std::printf("SCRATCH %u\n", payload.scratch_size);
  for (size_t i = 0; i < payload.inputs.size(); ++i) print_io("INPUT", i, payload.inputs[i]);
  for (size_t i = 0; i < payload.outputs.size(); ++i) print_io("OUTPUT", i, payload.outputs[i]);
  if (payload.has_tosa) {
    std::printf("TOSA %zu %016llx\n", payload.tosa.size, fnv1a64(payload.tosa));
  } else {
    std::printf("TOSA none\n");
  }
  return 0;
}
