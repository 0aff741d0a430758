// run_model MODEL.pte INPUT.bin: reads the method's one float32 input from a raw file, runs `forward`
// and prints every output value, one per line.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "etkit/extension/module.h"

extern "C" int etkit_register_portable_kernels(void);  // the core's portable kernels
extern "C" int etkit_xnnpack_register_backends(void);  // the XNNPACK delegate (no static initialisers)

int main(int argc, char** argv) {
  if (argc != 3) return std::fprintf(stderr, "usage: run_model MODEL.pte INPUT.bin\n"), 2;
  if (etkit_register_portable_kernels() != 0 || etkit_xnnpack_register_backends() != 0) return 1;

  etkit::extension::Module module(argv[1]);
  auto meta = module.method_meta("forward");
  if (!meta.ok()) return std::fprintf(stderr, "%s\n", etkit::runtime::last_error_message()), 1;
  auto info = meta->input_tensor_meta(0);
  std::ifstream file(argv[2], std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (!info.ok() || bytes.size() != info->nbytes) return std::fprintf(stderr, "input size mismatch\n"), 1;

  auto input = etkit::extension::from_blob(bytes.data(), {info->sizes.begin(), info->sizes.end()});
  auto outputs = module.forward(input);
  if (!outputs.ok()) return std::fprintf(stderr, "%s\n", etkit::runtime::last_error_message()), 1;
  const auto& y = outputs->at(0).to_tensor();
  for (size_t i = 0; i < y.numel(); ++i) std::printf("%.9g\n", y.const_data_ptr<float>()[i]);
  return 0;
}
