// etkit::extension::Module: load a .pte and run its methods in a few lines, as ExecuTorch's Module
// extension does (seed page "Running an ExecuTorch Model Using the Module Extension in C++").
//
//   etkit_register_portable_kernels();               // explicit registration: no static initialisers
//   etkit_myplugin_register_backends();              // one call per linked backend plugin
//   etkit::extension::Module module("model.pte");
//   float input[1 * 3 * 224 * 224] = {...};
//   auto tensor = etkit::extension::from_blob(input, {1, 3, 224, 224});
//   auto outputs = module.forward(tensor);           // Result<std::vector<EValue>>
//   if (outputs.ok()) { const float* y = outputs->at(0).to_tensor().const_data_ptr<float>(); }
//
// Unlike the core runtime (Program, Method), Module allocates: it owns the data loader, the program
// and one Method per loaded method name. Output tensors point into the method's planned memory and
// stay valid until the next execute of that method.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "etkit/runtime/data_loader.h"
#include "etkit/runtime/error.h"
#include "etkit/runtime/evalue.h"
#include "etkit/runtime/method.h"
#include "etkit/runtime/program.h"
#include "etkit/runtime/result.h"
#include "etkit/runtime/tensor.h"

namespace etkit::extension {

/// A tensor whose sizes, dim order and strides are owned with it (shared ownership); its data is not.
using TensorPtr = std::shared_ptr<runtime::Tensor>;

/// Wraps caller-owned memory as a contiguous tensor of `sizes` (row-major: dim order 0..n-1).
/// `data` must hold prod(sizes) elements of `type` and outlive every use of the tensor.
TensorPtr from_blob(void* data, std::vector<runtime::SizesType> sizes,
                    runtime::ScalarType type = runtime::ScalarType::Float);

class Module {
 public:
  enum class LoadMode {
    File,  ///< read the file into memory
    Mmap,  ///< map the file (default): constants and delegate payloads are paged in on demand
  };

  explicit Module(std::string file_path, LoadMode mode = LoadMode::Mmap);
  /// A program with its .ptd data file (ExecuTorch's Module(file_path, data_map_path, load_mode)): the
  /// weights and named data it keeps outside itself (flat_tensor/flat_tensor_data_map.h).
  Module(std::string file_path, std::string data_map_path, LoadMode mode = LoadMode::Mmap);
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();

  /// Opens and verifies the program (and its data file). Idempotent. Errors: AccessFailed (cannot open),
  /// InvalidProgram (not a valid .pte or .ptd); runtime::last_error_message() says which.
  runtime::Error load();
  bool is_loaded() const { return program_ != nullptr; }

  /// The program's method names (loads the program first). Empty when it cannot be loaded.
  std::vector<std::string> method_names();
  /// Loads `name` (planned memory, kernels, delegate init). Idempotent. Errors: InvalidArgument
  /// (no such method), OperatorMissing (a kernel is not registered), backend errors from init.
  runtime::Error load_method(const std::string& name);
  runtime::Result<runtime::MethodMeta> method_meta(const std::string& name);

  /// Sets `inputs` (one per method input, in order), runs `name` and returns its outputs. The input
  /// tensors' data is read during this call only. Errors: InvalidArgument (wrong input count, shape or
  /// dtype, with a message naming the input), and any load or execute error.
  runtime::Result<std::vector<runtime::EValue>> execute(const std::string& name,
                                                        const std::vector<runtime::EValue>& inputs);
  runtime::Result<std::vector<runtime::EValue>> forward(const std::vector<runtime::EValue>& inputs) {
    return execute("forward", inputs);
  }
  runtime::Result<std::vector<runtime::EValue>> forward(const TensorPtr& input) {
    return execute("forward", {runtime::EValue(input.get())});
  }

 private:
  std::string file_path_;
  LoadMode mode_;
  std::unique_ptr<runtime::DataLoader> loader_;
  std::unique_ptr<runtime::Program> program_;
  std::string data_map_path_;
  std::unique_ptr<runtime::DataLoader> data_loader_;
  std::unique_ptr<runtime::NamedDataMap> data_map_;
  std::map<std::string, std::unique_ptr<runtime::Method>> methods_;
};

}  // namespace etkit::extension
