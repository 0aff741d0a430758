// The Core ML delegate: runs a CoreMLBackend payload with Apple's Core ML framework. Built only on Apple
// platforms (runtime/CMakeLists.txt); on Linux the plugin reports the backend unavailable instead.
//
// init:    parse the payload (payload_reader.h), write its files under
//          $TMPDIR/etkit_coreml/<identifier>/, compile model.mlpackage with +[MLModel compileModelAtURL:]
//          into compiled.mlmodelc there (reused by every later init of the same model), or use the
//          model.mlmodelc compiled ahead of time; load it with the compute units of the
//          "compute_units" compile spec, and free the payload.
// execute: wrap the input tensors as MLMultiArrays (no copy), predict, copy each output MLMultiArray
//          (any strides; fp16 outputs widened when the tensor is fp32) into the output tensor, resizing
//          dynamic outputs.
// The argument order (inputs, then outputs) and the feature names come from metadata.json, as in
// ExecuTorch's Core ML runtime. Seed page: "Core ML Backend" (Runtime integration).
#import <CoreML/CoreML.h>
#import <Foundation/Foundation.h>

#include <cstring>
#include <string>
#include <vector>

#include "etkit/runtime/backend_interface.h"
#include "etkit/runtime/tensor.h"
#include "etkit_coreml/payload_reader.h"

namespace etkit_coreml {
namespace {

using etkit::runtime::BackendExecutionContext;
using etkit::runtime::BackendInitContext;
using etkit::runtime::BackendInterface;
using etkit::runtime::CompileSpec;
using etkit::runtime::DelegateHandle;
using etkit::runtime::EValue;
using etkit::runtime::Error;
using etkit::runtime::FreeableBuffer;
using etkit::runtime::Result;
using etkit::runtime::ScalarType;
using etkit::runtime::SizesType;
using etkit::runtime::Span;
using etkit::runtime::Tensor;
using etkit::runtime::set_error;

constexpr const char* kBackendId = "CoreMLBackend";

struct Handle {
  MLModel* model = nil;  // strong under ARC (-fobjc-arc): released when the handle is deleted
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
};

MLComputeUnits compute_units(Span<const CompileSpec> specs) {
  for (size_t i = 0; i < specs.size(); ++i) {
    const CompileSpec& s = specs.data()[i];
    if (s.key == nullptr || std::strcmp(s.key, "compute_units") != 0) continue;
    std::string v(static_cast<const char*>(s.value.buffer), s.value.nbytes);
    if (v == "cpu_only") return MLComputeUnitsCPUOnly;
    if (v == "cpu_and_gpu") return MLComputeUnitsCPUAndGPU;
    if (v == "cpu_and_ne") {
      if (@available(macOS 13.0, iOS 16.0, *)) return MLComputeUnitsCPUAndNeuralEngine;
    }
  }
  return MLComputeUnitsAll;
}

std::string describe(NSError* error) {
  return error == nil ? std::string("unknown error") : std::string(error.localizedDescription.UTF8String);
}

bool write_files(const Payload& payload, NSString* root, std::string* why) {
  NSFileManager* fm = [NSFileManager defaultManager];
  for (const PayloadFile& f : payload.files) {
    NSString* path = [root stringByAppendingPathComponent:[NSString stringWithUTF8String:f.path.c_str()]];
    NSError* error = nil;
    if (![fm createDirectoryAtPath:[path stringByDeletingLastPathComponent] withIntermediateDirectories:YES
                        attributes:nil error:&error]) {
      *why = "cannot create " + std::string(path.UTF8String) + ": " + describe(error);
      return false;
    }
    NSData* data = [NSData dataWithBytes:f.data length:f.size];
    if (![data writeToFile:path options:NSDataWritingAtomic error:&error]) {
      *why = "cannot write " + std::string(path.UTF8String) + ": " + describe(error);
      return false;
    }
  }
  return true;
}

bool multiarray_type(ScalarType t, MLMultiArrayDataType* out) {
  switch (t) {
    case ScalarType::Float: *out = MLMultiArrayDataTypeFloat32; return true;
    case ScalarType::Double: *out = MLMultiArrayDataTypeDouble; return true;
    case ScalarType::Int: *out = MLMultiArrayDataTypeInt32; return true;
    case ScalarType::Half:
      if (@available(macOS 12.0, iOS 15.0, *)) { *out = MLMultiArrayDataTypeFloat16; return true; }
      return false;
    default: return false;
  }
}

/// Copies `array` (any strides, any of Core ML's element types) into `out` (contiguous, its own dtype).
Error copy_out(MLMultiArray* array, Tensor& out, const std::string& name) {
  const size_t rank = array.shape.count;
  if (rank != out.dim()) {
    return set_error(Error::InvalidState, "Core ML output '%s' has rank %zu, the program expects %zu", name.c_str(), rank,
                     out.dim());
  }
  std::vector<SizesType> sizes(rank);
  for (size_t d = 0; d < rank; ++d) sizes[d] = static_cast<SizesType>(array.shape[d].longLongValue);
  Error e = out.resize(Span<const SizesType>(sizes.data(), sizes.size()));
  if (e != Error::Ok) {
    return set_error(e, "Core ML output '%s' does not fit the program's output tensor", name.c_str());
  }
  std::vector<long long> strides(rank);
  for (size_t d = 0; d < rank; ++d) strides[d] = array.strides[d].longLongValue;
  const size_t n = out.numel();
  const MLMultiArrayDataType src_type = array.dataType;
  __block Error result = Error::Ok;
  void (^copy)(const void*, NSInteger) = ^(const void* bytes, NSInteger) {
    std::vector<size_t> index(rank, 0);
    for (size_t i = 0; i < n; ++i) {
      long long offset = 0;
      for (size_t d = 0; d < rank; ++d) offset += static_cast<long long>(index[d]) * strides[d];
      double v = 0;
      switch (src_type) {
        case MLMultiArrayDataTypeFloat32: v = static_cast<const float*>(bytes)[offset]; break;
        case MLMultiArrayDataTypeDouble: v = static_cast<const double*>(bytes)[offset]; break;
        case MLMultiArrayDataTypeInt32: v = static_cast<const int32_t*>(bytes)[offset]; break;
        default:
          if (@available(macOS 12.0, iOS 15.0, *)) {
            if (src_type == MLMultiArrayDataTypeFloat16) {
              v = static_cast<double>(static_cast<const _Float16*>(bytes)[offset]);
              break;
            }
          }
          result = Error::NotSupported;
          return;
      }
      switch (out.scalar_type()) {
        case ScalarType::Float: out.mutable_data_ptr<float>()[i] = static_cast<float>(v); break;
        case ScalarType::Double: out.mutable_data_ptr<double>()[i] = v; break;
        case ScalarType::Half: out.mutable_data_ptr<_Float16>()[i] = static_cast<_Float16>(v); break;
        case ScalarType::Int: out.mutable_data_ptr<int32_t>()[i] = static_cast<int32_t>(v); break;
        case ScalarType::Long: out.mutable_data_ptr<int64_t>()[i] = static_cast<int64_t>(v); break;
        case ScalarType::Bool: out.mutable_data_ptr<bool>()[i] = v != 0; break;
        default: result = Error::NotSupported; return;
      }
      for (size_t d = rank; d-- > 0;) {  // next index, last dim fastest
        if (++index[d] < static_cast<size_t>(sizes[d])) break;
        index[d] = 0;
      }
    }
  };
  if (@available(macOS 12.3, iOS 15.4, tvOS 15.4, *)) {
    [array getBytesWithHandler:copy];
  } else {
    copy(array.dataPointer, 0);
  }
  if (result != Error::Ok) {
    return set_error(result, "Core ML output '%s': element type %ld cannot be copied to scalar type %d", name.c_str(),
                     static_cast<long>(src_type), static_cast<int>(out.scalar_type()));
  }
  return Error::Ok;
}

class CoreMLBackend final : public BackendInterface {
 public:
  bool is_available() const override {
    if (@available(macOS 13.0, iOS 16.0, tvOS 16.0, *)) return true;
    return false;
  }

  Result<DelegateHandle*> init(BackendInitContext& ctx, FreeableBuffer* processed,
                               Span<const CompileSpec> compile_specs) const override {
    (void)ctx;
    @autoreleasepool {
      Payload payload;
      std::string why;
      if (!read_payload(static_cast<const uint8_t*>(processed->data()), processed->size(), &payload, &why)) {
        return set_error(Error::DelegateInvalidCompatibility, "CoreMLBackend: %s", why.c_str());
      }
      // The identifier is checked to be [A-Za-z0-9_-]+ by read_payload; etkit derives it from the model's
      // contents, so a directory of that name holds this very model: compiled once, reused by later inits.
      NSString* root = [NSTemporaryDirectory() stringByAppendingPathComponent:
          [NSString stringWithFormat:@"etkit_coreml/%s", payload.metadata.identifier.c_str()]];
      NSString* cached = [root stringByAppendingPathComponent:@"compiled.mlmodelc"];
      const bool have_cached = [[NSFileManager defaultManager] fileExistsAtPath:cached];
      if (!have_cached && !write_files(payload, root, &why)) {
        return set_error(Error::DelegateMemoryAllocationFailed, "CoreMLBackend: %s", why.c_str());
      }
      auto* handle = new (std::nothrow) Handle();
      if (handle == nullptr) return set_error(Error::DelegateMemoryAllocationFailed, "CoreMLBackend: out of memory");
      handle->inputs = payload.metadata.input_names;
      handle->outputs = payload.metadata.output_names;
      processed->Free();  // the files on disk are all Core ML needs from now on

      NSError* error = nil;
      NSURL* url = nil;
      if (have_cached) {
        url = [NSURL fileURLWithPath:cached];
      } else if (payload.compiled_model) {
        url = [NSURL fileURLWithPath:[root stringByAppendingPathComponent:@"model.mlmodelc"]];
      } else {
        NSURL* package = [NSURL fileURLWithPath:[root stringByAppendingPathComponent:@"model.mlpackage"]];
        NSURL* compiled = [MLModel compileModelAtURL:package error:&error];
        if (compiled == nil) {
          delete handle;
          return set_error(Error::DelegateInvalidCompatibility, "CoreMLBackend: Core ML cannot compile the model: %s",
                           describe(error).c_str());
        }
        url = [NSURL fileURLWithPath:cached];
        if (![[NSFileManager defaultManager] moveItemAtURL:compiled toURL:url error:nil]) url = compiled;
        [[NSFileManager defaultManager] removeItemAtPath:[root stringByAppendingPathComponent:@"model.mlpackage"]
                                                   error:nil];
      }
      MLModelConfiguration* config = [[MLModelConfiguration alloc] init];
      config.computeUnits = compute_units(compile_specs);
      MLModel* model = [MLModel modelWithContentsOfURL:url configuration:config error:&error];
      if (model == nil) {
        delete handle;
        return set_error(Error::DelegateInvalidCompatibility, "CoreMLBackend: Core ML cannot load the model: %s",
                         describe(error).c_str());
      }
      handle->model = model;
      return static_cast<DelegateHandle*>(handle);
    }
  }

  Error execute(BackendExecutionContext& ctx, DelegateHandle* raw, Span<EValue*> args) const override {
    (void)ctx;
    auto* handle = static_cast<Handle*>(raw);
    if (handle == nullptr || handle->model == nil) {
      return set_error(Error::DelegateInvalidHandle, "CoreMLBackend: execute on a handle that failed to init");
    }
    const size_t n_in = handle->inputs.size(), n_out = handle->outputs.size();
    if (args.size() != n_in + n_out) {
      return set_error(Error::InvalidArgument, "CoreMLBackend: %zu arguments, the model has %zu inputs and %zu outputs",
                       args.size(), n_in, n_out);
    }
    @autoreleasepool {
      NSMutableDictionary<NSString*, MLFeatureValue*>* features = [NSMutableDictionary dictionary];
      for (size_t i = 0; i < n_in; ++i) {
        EValue* v = args.data()[i];
        if (v == nullptr || !v->is_tensor()) {
          return set_error(Error::InvalidArgument, "CoreMLBackend: input %zu is not a tensor", i);
        }
        Tensor& t = v->to_tensor();
        NSMutableArray<NSNumber*>* shape = [NSMutableArray array];
        for (size_t d = 0; d < t.dim(); ++d) [shape addObject:@(t.size(d))];
        NSError* error = nil;
        if (t.scalar_type() == ScalarType::Long || t.scalar_type() == ScalarType::Bool) {
          // coremltools gives int64 and bool inputs the int32 type: copy, narrowing
          MLMultiArray* narrowed = [[MLMultiArray alloc] initWithShape:shape dataType:MLMultiArrayDataTypeInt32
                                                                 error:&error];
          if (narrowed == nil) {
            return set_error(Error::DelegateMemoryAllocationFailed, "CoreMLBackend: input %zu: %s", i,
                             describe(error).c_str());
          }
          auto* dst = static_cast<int32_t*>(narrowed.dataPointer);
          for (size_t k = 0; k < t.numel(); ++k) {
            dst[k] = t.scalar_type() == ScalarType::Long ? static_cast<int32_t>(t.const_data_ptr<int64_t>()[k])
                                                          : static_cast<int32_t>(t.const_data_ptr<bool>()[k]);
          }
          features[[NSString stringWithUTF8String:handle->inputs[i].c_str()]] =
              [MLFeatureValue featureValueWithMultiArray:narrowed];
          continue;
        }
        MLMultiArrayDataType type;
        if (!multiarray_type(t.scalar_type(), &type)) {
          return set_error(Error::NotSupported, "CoreMLBackend: input %zu has scalar type %d, which Core ML cannot take",
                           i, static_cast<int>(t.scalar_type()));
        }
        NSMutableArray<NSNumber*>* strides = [NSMutableArray array];
        for (size_t d = 0; d < t.dim(); ++d) [strides addObject:@(t.stride(d))];
        MLMultiArray* array = [[MLMultiArray alloc] initWithDataPointer:t.mutable_data_ptr() shape:shape dataType:type
                                                               strides:strides deallocator:nil error:&error];
        if (array == nil) {
          return set_error(Error::InvalidArgument, "CoreMLBackend: input %zu: %s", i, describe(error).c_str());
        }
        features[[NSString stringWithUTF8String:handle->inputs[i].c_str()]] =
            [MLFeatureValue featureValueWithMultiArray:array];
      }
      NSError* error = nil;
      MLDictionaryFeatureProvider* provider = [[MLDictionaryFeatureProvider alloc] initWithDictionary:features
                                                                                                error:&error];
      id<MLFeatureProvider> result = provider == nil ? nil : [handle->model predictionFromFeatures:provider error:&error];
      if (result == nil) {
        return set_error(Error::InvalidState, "CoreMLBackend: prediction failed: %s", describe(error).c_str());
      }
      for (size_t j = 0; j < n_out; ++j) {
        EValue* v = args.data()[n_in + j];
        const std::string& name = handle->outputs[j];
        MLMultiArray* array = [result featureValueForName:[NSString stringWithUTF8String:name.c_str()]].multiArrayValue;
        if (v == nullptr || !v->is_tensor() || array == nil) {
          return set_error(Error::InvalidState, "CoreMLBackend: output '%s' is missing or not a tensor", name.c_str());
        }
        Error e = copy_out(array, v->to_tensor(), name);
        if (e != Error::Ok) return e;
      }
    }
    return Error::Ok;
  }

  void destroy(DelegateHandle* raw) const override {
    auto* handle = static_cast<Handle*>(raw);
    delete handle;  // ARC releases the model
  }
};

}  // namespace
}  // namespace etkit_coreml

extern "C" int etkit_coreml_register_backends(void) {
  static etkit_coreml::CoreMLBackend backend;
  return etkit_register_backend(ETKIT_BACKEND_ABI_VERSION, etkit_coreml::kBackendId, &backend);
}
