#include "graph_values.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "etkit/runtime/program.h"  // effective_memory_limit
#include "xnn_types.h"

namespace etkit_xnnpack {

using etkit::runtime::Error;
using etkit::runtime::FreeableBuffer;
using etkit::runtime::NamedDataMap;
using etkit::runtime::Result;
using etkit::runtime::set_error;

namespace {

constexpr uint32_t kExternalFlags = XNN_VALUE_FLAG_EXTERNAL_INPUT | XNN_VALUE_FLAG_EXTERNAL_OUTPUT;
constexpr uint64_t kNoOffset = UINT64_MAX;

/// Shared state while defining the values of one payload; fail() prefixes messages with the value.
struct ValueContext {
  xnn_subgraph_t subgraph;
  const PayloadView& payload;
  const NamedDataMap* named_data_map;
  DelegateState& state;
  size_t index = 0;       // position in XNNGraph.xvalues
  uint32_t id_out = 0;
  uint64_t value_bytes = 0;  // sum over the values without data so far (XNNPACK's workspace holds them)

  Error fail(Error code, const char* format, ...) const
#if defined(__GNUC__)
      __attribute__((format(printf, 3, 4)))
#endif
  {
    char detail[768];
    va_list args;
    va_start(args, format);
    std::vsnprintf(detail, sizeof(detail), format, args);
    va_end(args);
    return set_error(code, "XnnpackBackend: value %zu (id_out %u): %s", index, id_out, detail);
  }

  Error check(xnn_status status, const char* function) const {
    if (status == xnn_status_success) return Error::Ok;
    return fail(Error::InvalidProgram, "%s failed with %s", function, xnn_status_name(status));
  }
};

/// `key` for a message: at most 96 characters, bytes outside printable ASCII shown as '?' (a corrupt
/// payload must not put invalid UTF-8 into an error message).
struct PrintableKey {
  char text[100];
  explicit PrintableKey(const flatbuffers::String* key) {
    size_t n = 0;
    for (; key != nullptr && n < key->size() && n < 96; ++n) {
      const unsigned char c = static_cast<unsigned char>(key->c_str()[n]);
      text[n] = (c >= 32 && c < 127) ? static_cast<char>(c) : '?';
    }
    if (key != nullptr && key->size() > 96) text[n++] = '.', text[n++] = '.', text[n++] = '.';
    text[n] = 0;
  }
};

/// Bytes of constant `buffer_idx` (1-based index into XNNGraph.constant_data), at least `min_bytes`
/// long. Named constants are fetched from the NamedDataMap and kept in `state.named_data` until the
/// builder releases those no node reads at run time. `name`, when given, receives the named-data key,
/// or "" for a constant in the payload's own section; `storage`, when given, where the bytes live
/// (ValueInfo::storage).
Result<const uint8_t*> constant_bytes(ValueContext& ctx, uint32_t buffer_idx, size_t min_bytes,
                                      const char* what, std::string* name = nullptr,
                                      int32_t* storage = nullptr) {
  const auto* table = ctx.payload.graph->constant_data();
  if (table == nullptr || buffer_idx >= table->size()) {
    return ctx.fail(Error::InvalidProgram, "%s refers to constant_data[%u] but the graph has %u entries",
                    what, buffer_idx, table == nullptr ? 0u : table->size());
  }
  const fb::ConstantDataOffset* entry = table->Get(buffer_idx);
  const flatbuffers::String* key = entry->named_key();
  if (key != nullptr && key->size() > 0) {
    const PrintableKey shown(key);
    if (ctx.named_data_map == nullptr) {
      return ctx.fail(Error::NotFound,
                      "%s is stored as named data '%s' but the program has no named data; load the "
                      "program together with its .ptd/named data",
                      what, shown.text);
    }
    Result<FreeableBuffer> buffer = ctx.named_data_map->get_data(key->c_str());
    if (!buffer.ok()) {
      return ctx.fail(buffer.error(), "%s: named data '%s' could not be loaded (%s)", what, shown.text,
                      etkit::runtime::error_name(buffer.error()));
    }
    if (buffer->size() < min_bytes) {
      return ctx.fail(Error::InvalidProgram, "%s: named data '%s' holds %zu bytes, need %zu", what,
                      shown.text, buffer->size(), min_bytes);
    }
    const auto* data = static_cast<const uint8_t*>(buffer->data());
    if (storage != nullptr) *storage = static_cast<int32_t>(ctx.state.named_data.size());
    ctx.state.named_data.push_back(std::move(buffer.get()));
    if (name != nullptr) name->assign(key->c_str(), key->size());
    return data;
  }
  if (!ctx.payload.has_header) {
    return ctx.fail(Error::InvalidProgram,
                    "%s uses constant_data[%u] by offset but the payload has no XH00 header, so "
                    "there is no constant-data section",
                    what, buffer_idx);
  }
  const uint64_t offset = entry->offset();
  const uint64_t size = entry->size();
  const uint64_t limit = ctx.payload.constant_data_size;
  if (offset == kNoOffset || offset > limit || size > limit - offset) {
    return ctx.fail(Error::InvalidProgram,
                    "%s: constant_data[%u] (offset %llu, size %llu) lies outside the %llu-byte "
                    "constant-data section",
                    what, buffer_idx, static_cast<unsigned long long>(offset),
                    static_cast<unsigned long long>(size), static_cast<unsigned long long>(limit));
  }
  if (size < min_bytes) {
    return ctx.fail(Error::InvalidProgram, "%s: constant_data[%u] holds %llu bytes, need %zu", what,
                    buffer_idx, static_cast<unsigned long long>(size), min_bytes);
  }
  if (storage != nullptr) *storage = kPayloadStorage;
  return ctx.payload.constant_data + offset;
}

/// Copies `count` scales of type T from `bytes` (any alignment) into storage the state owns (XNNPACK
/// keeps the pointer; the bytes they came from may be released after init) and releases the
/// named-data buffer they were read from.
template <typename T>
const T* own_scales(ValueContext& ctx, const void* bytes, size_t count, int32_t storage,
                    std::vector<std::vector<T>>& owned) {
  owned.emplace_back(count);
  if (count != 0) std::memcpy(owned.back().data(), bytes, count * sizeof(T));
  if (storage >= 0) ctx.state.named_data[static_cast<size_t>(storage)].Free();
  return owned.back().data();
}

uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) return 0x7FC0;  // NaN
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

struct TensorDesc {
  const fb::XNNTensorValue* tensor = nullptr;
  xnn_datatype datatype = xnn_datatype_invalid;
  std::vector<size_t> dims;
  uint64_t numel = 1;
  const uint8_t* data = nullptr;  // static data or null
  int32_t storage = kNoStorage;   // where `data` lives (ValueInfo::storage)
  int32_t owned = -1;             // index of its copy in DelegateState::owned_constants, or -1
};

/// Constants up to this size are copied out of the program. A small constant a node reads at run
/// time (a norm's weight) would otherwise keep the pages around it mapped: with 2 MiB page-cache
/// folios, 60 norm weights of 2 KB spread through an LLM's weights keep all of them resident.
constexpr size_t kCopiedConstantBytes = 64 * 1024;

/// Replaces desc.data by a copy the state owns (XNN_EXTRA_BYTES of zero padding after it, which
/// XNNPACK may read) and releases the bytes it came from.
void copy_constant(ValueContext& ctx, size_t nbytes, TensorDesc& desc) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[nbytes + XNN_EXTRA_BYTES]());
  std::memcpy(copy.get(), desc.data, nbytes);
  if (desc.storage >= 0) ctx.state.named_data[static_cast<size_t>(desc.storage)].Free();
  desc.storage = kNoStorage;
  desc.owned = static_cast<int32_t>(ctx.state.owned_constants.size());
  desc.data = copy.get();
  ctx.state.owned_constants.push_back(std::move(copy));
}

/// "[2, 3, 4]" for a message.
std::string dims_text(const std::vector<size_t>& dims) {
  std::string text = "[";
  for (size_t d = 0; d < dims.size(); ++d) text += (d ? ", " : "") + std::to_string(dims[d]);
  return text + "]";
}

Error describe_tensor(ValueContext& ctx, const fb::XNNTensorValue* tensor, TensorDesc& desc) {
  const uint64_t limit = etkit::runtime::effective_memory_limit();
  desc.tensor = tensor;
  desc.datatype = to_xnn_datatype(tensor->datatype());
  if (desc.datatype == xnn_datatype_invalid) {
    return ctx.fail(Error::InvalidProgram, "datatype %d is not a valid XNNPACK datatype",
                    static_cast<int>(tensor->datatype()));
  }
  if ((tensor->flags() & ~kExternalFlags) != 0) {
    return ctx.fail(Error::InvalidProgram, "flags 0x%x hold bits other than EXTERNAL_INPUT/EXTERNAL_OUTPUT",
                    tensor->flags());
  }
  if (tensor->dims() != nullptr) {
    if (tensor->dims()->size() > XNN_MAX_TENSOR_DIMS) {
      return ctx.fail(Error::InvalidProgram, "rank %u exceeds XNNPACK's limit of %d dims",
                      tensor->dims()->size(), XNN_MAX_TENSOR_DIMS);
    }
    for (uint32_t d : *tensor->dims()) {
      // Each dim alone too: XNNPACK sizes per-channel data (packed int32 or float biases, scales) from one dim,
      // which a zero elsewhere in the shape does not make small.
      if (uint64_t{d} > limit / 4) {
        return ctx.fail(Error::MemoryAllocationFailed,
                        "it has a dim of %u: at 4 bytes per element, one row of it is more than the memory limit of %llu bytes "
                        "(etkit::runtime::set_memory_limit)", d, static_cast<unsigned long long>(limit));
      }
      desc.dims.push_back(d);
      desc.numel *= d;
      if (desc.numel > limit) break;  // checked below; no overflow on the way
    }
  }
  // A value may not make XNNPACK allocate more than the runtime may use (set_memory_limit), alone or with
  // the other values of the graph that have no data of their own (XNNPACK plans memory for all of them).
  const uint64_t nbytes = desc.numel > limit ? limit + 1 : dense_nbytes(desc.datatype, desc.numel);
  if (tensor->constant_buffer_idx() == 0) ctx.value_bytes += nbytes;
  if (nbytes > limit || ctx.value_bytes > limit) {
    const std::string need = nbytes > limit ? "more than " + std::to_string(limit) : std::to_string(nbytes);
    return ctx.fail(Error::MemoryAllocationFailed,
                    "its dims %s need %s bytes (the graph's values without data: %llu bytes so far); the memory "
                    "limit is %llu bytes (etkit::runtime::set_memory_limit)",
                    dims_text(desc.dims).c_str(), need.c_str(), static_cast<unsigned long long>(ctx.value_bytes),
                    static_cast<unsigned long long>(limit));
  }
  if (tensor->constant_buffer_idx() != 0) {
    size_t need = dense_nbytes(desc.datatype, desc.numel);
    std::string name;
    Result<const uint8_t*> data =
        constant_bytes(ctx, tensor->constant_buffer_idx(), need, "tensor data", &name, &desc.storage);
    if (!data.ok()) return data.error();
    desc.data = data.get();
    if (need <= kCopiedConstantBytes) copy_constant(ctx, need, desc);
    if (ctx.state.shared_weights != nullptr) {
      // Named data is named by content; a payload-section constant only by its place in this payload.
      const bool in_payload = name.empty();
      if (in_payload) name = "#" + std::to_string(tensor->constant_buffer_idx());
      const bool is_float = desc.datatype == xnn_datatype_fp32 || desc.datatype == xnn_datatype_fp16;
      ctx.state.shared_weights->name_constant(desc.data, std::move(name), in_payload, is_float);
    }
  }
  return Error::Ok;
}

Error define_per_channel(ValueContext& ctx, const TensorDesc& desc, const fb::PerChannelQuant* q, uint32_t* id) {
  const size_t rank = desc.dims.size();
  if (q->channel_dim() < 0 || static_cast<size_t>(q->channel_dim()) >= rank) {
    return ctx.fail(Error::InvalidProgram, "per-channel channel_dim %d is outside rank %zu", q->channel_dim(), rank);
  }
  const size_t channels = desc.dims[static_cast<size_t>(q->channel_dim())];
  const float* scales = nullptr;
  if (q->scale_buffer_idx() != 0) {
    int32_t storage = kNoStorage;
    Result<const uint8_t*> bytes = constant_bytes(ctx, q->scale_buffer_idx(), channels * sizeof(float),
                                                  "per-channel scales", nullptr, &storage);
    if (!bytes.ok()) return bytes.error();
    scales = own_scales(ctx, bytes.get(), channels, storage, ctx.state.float_scales);
  } else {
    if (q->scale() == nullptr || q->scale()->size() != channels) {
      return ctx.fail(Error::InvalidProgram, "per-channel quantization has %u scales, expected %zu (one per channel)",
                      q->scale() == nullptr ? 0u : q->scale()->size(), channels);
    }
    scales = own_scales(ctx, q->scale()->data(), channels, kNoStorage, ctx.state.float_scales);
  }
  // XNNPACK's signed 4-bit channelwise weights are stored offset by 8 (ExecuTorch's convention).
  const int32_t zero_point = desc.datatype == xnn_datatype_qcint4 ? 8 : 0;
  const fb::XNNTensorValue* t = desc.tensor;
  return ctx.check(xnn_define_channelwise_quantized_tensor_value_v2(
                       ctx.subgraph, desc.datatype, zero_point, scales, rank,
                       static_cast<size_t>(q->channel_dim()), desc.dims.data(), desc.data, t->external_id(),
                       t->flags(), id),
                   "xnn_define_channelwise_quantized_tensor_value_v2");
}

Error define_per_channel_group(ValueContext& ctx, const TensorDesc& desc, const fb::PerChannelGroupQuant* q,
                               uint32_t* id) {
  if (desc.datatype != xnn_datatype_qbint4) {
    return ctx.fail(Error::NotImplemented, "per-channel-group quantization needs datatype qbint4, got %s",
                    xnn_datatype_name(desc.datatype));
  }
  if (desc.dims.size() != 2 || q->group_size() <= 0 || desc.dims[1] % static_cast<size_t>(q->group_size()) != 0) {
    return ctx.fail(Error::InvalidProgram,
                    "per-channel-group quantization needs a 2-D [out, in] tensor with in divisible by "
                    "group_size %d",
                    q->group_size());
  }
  const size_t num_scales = desc.dims[0] * (desc.dims[1] / static_cast<size_t>(q->group_size()));
  const uint16_t* scales = nullptr;
  if (q->scale_buffer_idx() != 0) {  // bf16 scales stored as constant data
    if (q->num_scales() != num_scales) {
      return ctx.fail(Error::InvalidProgram, "num_scales is %u, expected %zu", q->num_scales(), num_scales);
    }
    int32_t storage = kNoStorage;
    Result<const uint8_t*> bytes =
        constant_bytes(ctx, q->scale_buffer_idx(), num_scales * 2, "block scales", nullptr, &storage);
    if (!bytes.ok()) return bytes.error();
    scales = own_scales(ctx, bytes.get(), num_scales, storage, ctx.state.bf16_scales);
  } else {  // fp32 scales inline: XNNPACK wants bf16
    if (q->scale() == nullptr || q->scale()->size() != num_scales) {
      return ctx.fail(Error::InvalidProgram, "block quantization has %u scales, expected %zu",
                      q->scale() == nullptr ? 0u : q->scale()->size(), num_scales);
    }
    std::vector<uint16_t> converted(num_scales);
    for (size_t i = 0; i < num_scales; ++i) converted[i] = float_to_bf16(q->scale()->Get(static_cast<uint32_t>(i)));
    ctx.state.bf16_scales.push_back(std::move(converted));
    scales = ctx.state.bf16_scales.back().data();
  }
  const fb::XNNTensorValue* t = desc.tensor;
  return ctx.check(xnn_define_blockwise_quantized_tensor_value(
                       ctx.subgraph, desc.datatype, /*zero_point=*/8, scales, desc.dims.size(),
                       static_cast<size_t>(q->channel_dim()), static_cast<size_t>(q->group_size()),
                       desc.dims.data(), desc.data, t->external_id(), t->flags(), id),
                   "xnn_define_blockwise_quantized_tensor_value");
}

Error define_quantized(ValueContext& ctx, const TensorDesc& desc, const fb::XNNQuantizedTensorValue* qvalue,
                       uint32_t* id) {
  const fb::XNNTensorValue* t = desc.tensor;
  if (qvalue->quant_params() == nullptr) {  // the union's type may be set without its table
    return ctx.fail(Error::InvalidProgram, "quant_params (type %d) holds no table",
                    static_cast<int>(qvalue->quant_params_type()));
  }
  switch (qvalue->quant_params_type()) {
    case fb::XNNQuantParams::PerTensorQuant: {
      const auto* q = qvalue->quant_params_as_PerTensorQuant();
      return ctx.check(xnn_define_quantized_tensor_value(ctx.subgraph, desc.datatype, q->zero_point(), q->scale(),
                                                         desc.dims.size(), desc.dims.data(), desc.data,
                                                         t->external_id(), t->flags(), id),
                       "xnn_define_quantized_tensor_value");
    }
    case fb::XNNQuantParams::PerChannelQuant:
      return define_per_channel(ctx, desc, qvalue->quant_params_as_PerChannelQuant(), id);
    case fb::XNNQuantParams::PerChannelGroupQuant:
      return define_per_channel_group(ctx, desc, qvalue->quant_params_as_PerChannelGroupQuant(), id);
    case fb::XNNQuantParams::PerTokenDynamicQuant: {
      const auto* q = qvalue->quant_params_as_PerTokenDynamicQuant();
      if (desc.data != nullptr) {
        return ctx.fail(Error::InvalidProgram, "a dynamically quantized value cannot have constant data");
      }
      if (desc.datatype != xnn_datatype_qdint8) {
        // qpint8 (ARM's packed form) sizes itself through a GEMM config that x86 builds of XNNPACK lack:
        // XNNPACK would dereference it (found by fuzz_xnnpack)
        return ctx.fail(Error::InvalidProgram, "a dynamically quantized value must be qdint8, not datatype %d",
                        static_cast<int>(desc.datatype));
      }
      if (q->num_nonbatch_dims() < 0 || static_cast<size_t>(q->num_nonbatch_dims()) > desc.dims.size()) {
        return ctx.fail(Error::InvalidProgram, "num_nonbatch_dims %d is outside rank %zu", q->num_nonbatch_dims(),
                        desc.dims.size());
      }
      return ctx.check(xnn_define_dynamically_quantized_tensor_value(
                           ctx.subgraph, desc.datatype, desc.dims.size(),
                           static_cast<size_t>(q->num_nonbatch_dims()), desc.dims.data(), t->external_id(),
                           t->flags(), id),
                       "xnn_define_dynamically_quantized_tensor_value");
    }
    default:
      return ctx.fail(Error::InvalidProgram, "quantized value without quantization parameters (type %d)",
                      static_cast<int>(qvalue->quant_params_type()));
  }
}

/// ExecuTorch's older dynamic-quantization form: an fp32 external input with dq_datatype=qint8 stands
/// for (fp32 input -> convert -> qdint8 per-row value). The id_out names the qdint8 value.
Error define_legacy_dynamic_input(ValueContext& ctx, const TensorDesc& desc, uint32_t* id) {
  const fb::XNNTensorValue* t = desc.tensor;
  if (to_xnn_datatype(t->dq_datatype()) != xnn_datatype_qint8 || !(t->flags() & XNN_VALUE_FLAG_EXTERNAL_INPUT) ||
      desc.data != nullptr) {
    return ctx.fail(Error::NotImplemented,
                    "dq_datatype %d is only supported as qint8 on an external, non-constant input",
                    static_cast<int>(t->dq_datatype()));
  }
  uint32_t float_id = XNN_INVALID_VALUE_ID;
  ETKIT_CHECK_OK(ctx.check(xnn_define_tensor_value(ctx.subgraph, desc.datatype, desc.dims.size(), desc.dims.data(),
                                                   nullptr, t->external_id(), t->flags(), &float_id),
                           "xnn_define_tensor_value"));
  ETKIT_CHECK_OK(ctx.check(xnn_define_dynamically_quantized_tensor_value(
                               ctx.subgraph, xnn_datatype_qdint8, desc.dims.size(), /*num_nonbatch_dims=*/1,
                               desc.dims.data(), XNN_INVALID_VALUE_ID, /*flags=*/0, id),
                           "xnn_define_dynamically_quantized_tensor_value"));
  return ctx.check(xnn_define_unary(ctx.subgraph, xnn_unary_convert, nullptr, float_id, *id, 0),
                   "xnn_define_unary(convert)");
}

Error record_external(ValueContext& ctx, const TensorDesc& desc) {
  const fb::XNNTensorValue* t = desc.tensor;
  const uint32_t flags = t->flags() & kExternalFlags;
  if (flags == 0) return Error::Ok;
  if (flags == kExternalFlags) {
    return ctx.fail(Error::InvalidProgram, "a value cannot be both an external input and an external output");
  }
  if (t->external_id() >= ctx.payload.graph->num_externs()) {
    return ctx.fail(Error::InvalidProgram, "external_id %u is not below num_externs %u", t->external_id(),
                    ctx.payload.graph->num_externs());
  }
  ExternalBinding binding;
  binding.external_id = t->external_id();
  binding.is_input = (flags & XNN_VALUE_FLAG_EXTERNAL_INPUT) != 0;
  binding.datatype = desc.datatype;
  binding.rank = static_cast<uint32_t>(desc.dims.size());
  for (size_t d = 0; d < desc.dims.size(); ++d) binding.bounds[d] = desc.dims[d];
  (binding.is_input ? ctx.state.inputs : ctx.state.outputs).push_back(binding);
  return Error::Ok;
}

Error define_one_value(ValueContext& ctx, const fb::XValue* value, ValueTable& values) {
  const fb::XNNTensorValue* tensor = nullptr;
  const fb::XNNQuantizedTensorValue* qvalue = nullptr;
  switch (value->xvalue_union_type()) {
    case fb::XValueUnion::XNNTensorValue:
      tensor = value->xvalue_union_as_XNNTensorValue();
      break;
    case fb::XValueUnion::XNNQuantizedTensorValue:
      qvalue = value->xvalue_union_as_XNNQuantizedTensorValue();  // null when the union has a type but no table
      tensor = qvalue != nullptr ? qvalue->tensor_value() : nullptr;
      break;
    default:
      break;
  }
  if (tensor == nullptr) {
    return set_error(Error::InvalidProgram, "XnnpackBackend: value %zu: XValue holds no tensor (union type %d)",
                     ctx.index, static_cast<int>(value->xvalue_union_type()));
  }
  ctx.id_out = tensor->id_out();
  if (values.count(ctx.id_out) != 0) {
    return ctx.fail(Error::InvalidProgram, "id_out %u is defined twice", ctx.id_out);
  }
  TensorDesc desc;
  ETKIT_CHECK_OK(describe_tensor(ctx, tensor, desc));

  uint32_t id = XNN_INVALID_VALUE_ID;
  if (qvalue != nullptr) {
    ETKIT_CHECK_OK(define_quantized(ctx, desc, qvalue, &id));
  } else if (to_xnn_datatype(tensor->dq_datatype()) != xnn_datatype_invalid) {
    ETKIT_CHECK_OK(define_legacy_dynamic_input(ctx, desc, &id));
  } else {
    ETKIT_CHECK_OK(ctx.check(xnn_define_tensor_value(ctx.subgraph, desc.datatype, desc.dims.size(), desc.dims.data(),
                                                     desc.data, tensor->external_id(), tensor->flags(), &id),
                             "xnn_define_tensor_value"));
  }
  ETKIT_CHECK_OK(record_external(ctx, desc));
  ValueInfo& info = values[ctx.id_out];
  info = ValueInfo{id, static_cast<uint32_t>(desc.dims.size()), desc.datatype, desc.data != nullptr,
                   (tensor->flags() & XNN_VALUE_FLAG_EXTERNAL_INPUT) != 0, desc.storage, desc.owned};
  info.is_external_output = (tensor->flags() & XNN_VALUE_FLAG_EXTERNAL_OUTPUT) != 0;
  std::copy(desc.dims.begin(), desc.dims.end(), info.dims);  // rank <= XNN_MAX_TENSOR_DIMS (describe_tensor)
  return Error::Ok;
}

bool by_external_id(const ExternalBinding& a, const ExternalBinding& b) { return a.external_id < b.external_id; }

Error check_external_ids(const DelegateState& state, uint32_t num_externs) {
  std::vector<bool> seen(num_externs, false);
  for (const auto* list : {&state.inputs, &state.outputs}) {
    for (const ExternalBinding& b : *list) {
      if (seen[b.external_id]) {
        return set_error(Error::InvalidProgram, "XnnpackBackend: external_id %u is used by two values",
                         b.external_id);
      }
      seen[b.external_id] = true;
    }
  }
  if (state.outputs.empty()) {
    return set_error(Error::InvalidProgram, "XnnpackBackend: the graph has no external output value");
  }
  return Error::Ok;
}

}  // namespace

Error define_values(xnn_subgraph_t subgraph, const PayloadView& payload, const NamedDataMap* named_data_map,
                    DelegateState& state, ValueTable& values) {
  ValueContext ctx{subgraph, payload, named_data_map, state};
  const auto* xvalues = payload.graph->xvalues();
  values.reserve(xvalues->size());
  for (uint32_t i = 0; i < xvalues->size(); ++i) {
    ctx.index = i;
    ctx.id_out = 0;
    ETKIT_CHECK_OK(define_one_value(ctx, xvalues->Get(i), values));
  }
  state.bound_value_bytes = ctx.value_bytes;
  std::sort(state.inputs.begin(), state.inputs.end(), by_external_id);
  std::sort(state.outputs.begin(), state.outputs.end(), by_external_id);
  return check_external_ids(state, payload.graph->num_externs());
}

}  // namespace etkit_xnnpack
