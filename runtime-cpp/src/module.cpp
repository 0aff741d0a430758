// etkit::extension::Module (include/etkit/extension/module.h).
#include "etkit/extension/module.h"
#include "etkit/extension/flat_tensor/flat_tensor_data_map.h"

#include <utility>

namespace etkit::extension {

using runtime::Error;
using runtime::EValue;
using runtime::Result;

namespace {

/// A Tensor together with the arrays it points to.
struct OwnedTensor {
  std::vector<runtime::SizesType> sizes;
  std::vector<runtime::DimOrderType> dim_order;
  std::vector<runtime::StridesType> strides;
  runtime::Tensor tensor;
};

template <typename Loader>
Result<std::unique_ptr<runtime::DataLoader>> open_with(const char* path) {
  auto loader = Loader::from(path);
  if (!loader.ok()) return loader.error();
  return std::unique_ptr<runtime::DataLoader>(new Loader(std::move(loader.get())));
}

}  // namespace

TensorPtr from_blob(void* data, std::vector<runtime::SizesType> sizes, runtime::ScalarType type) {
  auto owned = std::make_shared<OwnedTensor>();
  owned->sizes = std::move(sizes);
  const size_t dim = owned->sizes.size();
  owned->dim_order.resize(dim);
  owned->strides.resize(dim);
  for (size_t d = 0; d < dim; ++d) owned->dim_order[d] = static_cast<runtime::DimOrderType>(d);
  owned->tensor = runtime::Tensor(type, dim, owned->sizes.data(), data, owned->dim_order.data(),
                                  owned->strides.data());
  return TensorPtr(owned, &owned->tensor);  // aliasing constructor: shares ownership of `owned`
}

Module::Module(std::string file_path, LoadMode mode) : file_path_(std::move(file_path)), mode_(mode) {}
Module::Module(std::string file_path, std::string data_map_path, LoadMode mode)
    : file_path_(std::move(file_path)), mode_(mode), data_map_path_(std::move(data_map_path)) {}

Module::~Module() {
  methods_.clear();  // methods before the program and data map, each before its loader
  program_.reset();
  loader_.reset();
  data_map_.reset();
  data_loader_.reset();
}

Error Module::load() {
  if (program_) return Error::Ok;
  auto loader = mode_ == LoadMode::Mmap ? open_with<runtime::MmapDataLoader>(file_path_.c_str())
                                        : open_with<runtime::FileDataLoader>(file_path_.c_str());
  if (!loader.ok()) return loader.error();
  auto program = runtime::Program::load(loader.get().get());
  if (!program.ok()) return program.error();
  if (!data_map_path_.empty()) {
    auto data_loader = mode_ == LoadMode::Mmap ? open_with<runtime::MmapDataLoader>(data_map_path_.c_str())
                                               : open_with<runtime::FileDataLoader>(data_map_path_.c_str());
    if (!data_loader.ok()) return data_loader.error();
    auto map = FlatTensorDataMap::load(data_loader.get().get());
    if (!map.ok()) return map.error();
    data_loader_ = std::move(data_loader.get());
    data_map_.reset(new FlatTensorDataMap(std::move(map.get())));
  }
  loader_ = std::move(loader.get());
  program_.reset(new runtime::Program(std::move(program.get())));
  return Error::Ok;
}

std::vector<std::string> Module::method_names() {
  std::vector<std::string> names;
  if (load() != Error::Ok) return names;
  for (size_t i = 0; i < program_->num_methods(); ++i) {
    auto name = program_->get_method_name(i);
    if (name.ok() && !runtime::is_fallback_method_name(name.get())) names.emplace_back(name.get());
  }
  return names;
}

Error Module::load_method(const std::string& name) {
  if (methods_.count(name)) return Error::Ok;
  ETKIT_CHECK_OK(load());
  auto method = program_->load_method(name.c_str(), nullptr, nullptr, data_map_.get());
  if (!method.ok()) return method.error();
  methods_.emplace(name, std::unique_ptr<runtime::Method>(new runtime::Method(std::move(method.get()))));
  return Error::Ok;
}

Result<runtime::MethodMeta> Module::method_meta(const std::string& name) {
  Error e = load();
  if (e != Error::Ok) return e;
  return program_->method_meta(name.c_str());
}

Result<std::vector<EValue>> Module::execute(const std::string& name, const std::vector<EValue>& inputs) {
  Error e = load_method(name);
  if (e != Error::Ok) return e;
  runtime::Method& method = *methods_.at(name);
  if (inputs.size() != method.inputs_size()) {
    return runtime::set_error(Error::InvalidArgument, "method '%s' takes %zu inputs, %zu given", name.c_str(),
                              method.inputs_size(), inputs.size());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    e = method.set_input(inputs[i], i);
    if (e != Error::Ok) return e;
  }
  e = method.execute();
  if (e != Error::Ok) return e;
  std::vector<EValue> outputs;
  outputs.reserve(method.outputs_size());
  for (size_t i = 0; i < method.outputs_size(); ++i) outputs.push_back(method.get_output(i));
  return outputs;
}

}  // namespace etkit::extension
