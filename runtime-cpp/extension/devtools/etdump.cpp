// See include/etkit/extension/devtools/etdump.h; format: schema/etdump.fbs.
#include "etkit/extension/devtools/etdump.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "etdump_generated.h"
#include "etkit/runtime/error.h"
#include "etkit/runtime/flatbuffer_alignment.h"

namespace etkit::etdump {

namespace efb = ::etkit::fb::etdump;
using runtime::DebugValue;
using runtime::DebugValueType;
using runtime::ProfileEventKind;

namespace {

using Builder = flatbuffers::FlatBufferBuilder;

/// A ProfileEvent table. `name` null: an event a delegate logged, named by its delegate debug id(s) (an
/// integer id may carry a label beside it), with the empty metadata vector ExecuTorch writes.
flatbuffers::Offset<efb::Event> profile(Builder& b, const char* name, int32_t chain, int32_t instruction,
                                        const ProfileEvent& e) {
  const bool delegate = name == nullptr;
  const bool has_str = delegate && (e.delegate_debug_id < 0 || e.name[0] != '\0');
  auto n = delegate ? flatbuffers::Offset<flatbuffers::String>() : b.CreateString(name);
  auto id_str = has_str ? b.CreateString(e.name) : flatbuffers::Offset<flatbuffers::String>();
  auto metadata = delegate ? b.CreateVector(static_cast<const uint8_t*>(nullptr), 0)
                           : flatbuffers::Offset<flatbuffers::Vector<uint8_t>>();
  efb::ProfileEventBuilder pb(b);
  if (!delegate) pb.add_name(n);
  pb.add_chain_index(chain);
  pb.add_instruction_id(instruction);
  if (delegate) {
    pb.add_delegate_debug_id_int(e.delegate_debug_id);
    if (has_str) pb.add_delegate_debug_id_str(id_str);
    pb.add_delegate_debug_metadata(metadata);
  }
  pb.add_start_time(static_cast<uint64_t>(e.start_ns));
  pb.add_end_time(static_cast<uint64_t>(e.end_ns));
  auto p = pb.Finish();
  return efb::CreateEvent(b, p);
}

flatbuffers::Offset<efb::Event> debug_event(Builder& b, const ProfileEvent& e) {
  const DebugValue& v = e.value;
  flatbuffers::Offset<efb::Value> value;
  flatbuffers::Offset<efb::Bool> output;
  if (v.is_output) output = efb::CreateBool(b, true);
  switch (v.type) {
    case DebugValueType::Tensor: {
      int64_t sizes[runtime::kMaxDebugDims], strides[runtime::kMaxDebugDims];
      // Strides in elements of the tensor as laid out (its dim_order), the innermost dim 1.
      int64_t stride = 1;
      for (size_t k = v.dim; k-- > 0;) {
        const uint8_t d = v.dim_order[k] < v.dim ? v.dim_order[k] : static_cast<uint8_t>(k);
        strides[d] = stride;
        stride *= v.sizes[d];
      }
      for (size_t d = 0; d < v.dim; ++d) sizes[d] = v.sizes[d];
      auto t = efb::CreateTensor(b, static_cast<etkit::fb::ScalarType>(v.scalar_type), b.CreateVector(sizes, v.dim),
                                 b.CreateVector(strides, v.dim), v.offset);
      value = efb::CreateValue(b, efb::ValueType::Tensor, t, 0, 0, 0, 0, 0, output);
      break;
    }
    case DebugValueType::Int:
      value = efb::CreateValue(b, efb::ValueType::Int, 0, 0, efb::CreateInt(b, static_cast<int64_t>(v.scalar)), 0,
                               0, 0, output);
      break;
    case DebugValueType::Double:
      value = efb::CreateValue(b, efb::ValueType::Double, 0, 0, 0, 0, efb::CreateDouble(b, v.scalar), 0, output);
      break;
    case DebugValueType::Bool:
      value = efb::CreateValue(b, efb::ValueType::Bool, 0, 0, 0, 0, 0, efb::CreateBool(b, v.scalar != 0.0),
                               output);
      break;
    default:
      value = efb::CreateValue(b, efb::ValueType::Null, 0, 0, 0, 0, 0, 0, output);
      break;
  }
  efb::DebugEventBuilder db(b);
  db.add_chain_index(0);
  db.add_instruction_id(e.instruction);
  db.add_debug_entry(value);
  auto d = db.Finish();
  return efb::CreateEvent(b, 0, 0, d);
}

// "aten::add.out" -> "native_call_add.out" (ExecuTorch names the kernel without its namespace).
std::string native_call_name(const char* op) {
  const char* sep = std::strstr(op, "::");
  return std::string("native_call_") + (sep != nullptr ? sep + 2 : op);
}

}  // namespace

Error verify(const uint8_t* data, size_t size) {
  // size prefix, root offset and file identifier: 4 bytes each
  if (data == nullptr || size < 12) {
    return runtime::set_error(Error::InvalidProgram, "ETDump: %zu bytes is too short for a size-prefixed flatbuffer",
                              size);
  }
  uint32_t prefix = 0;
  std::memcpy(&prefix, data, sizeof(prefix));
  if (prefix != size - 4) {
    return runtime::set_error(Error::InvalidProgram,
                              "ETDump: the size prefix says %u bytes follow it, the file has %zu (truncated or "
                              "not an ETDump)", prefix, size - 4);
  }
  if (!efb::SizePrefixedETDumpBufferHasIdentifier(data)) {
    return runtime::set_error(Error::InvalidProgram, "ETDump: file identifier is '%.4s', expected 'ED00'",
                              reinterpret_cast<const char*>(data) + 8);
  }
  flatbuffers::Verifier::Options options;
  options.max_tables = 1u << 26;
  flatbuffers::Verifier verifier(data, size, options);
  if (!efb::VerifySizePrefixedETDumpBuffer(verifier)) {
    return runtime::set_error(Error::InvalidProgram,
                              "ETDump: the flatbuffers verifier rejected the file (an offset or length points "
                              "outside it, or a table is malformed)");
  }
  // The verifier does not check that [long] elements are 8-byte aligned (flatbuffer_alignment.h).
  const efb::ETDump* dump = efb::GetSizePrefixedETDump(data);
  if (dump->run_data() == nullptr) return Error::Ok;
  // An empty vector has no element to read (a 0-dim tensor's sizes), wherever its data would start.
  auto vector_ok = [](const flatbuffers::Vector<int64_t>* v) {
    return v == nullptr || v->size() == 0 || runtime::elements_aligned(v);
  };
  auto tensor_ok = [&](const efb::Tensor* t) {
    return t == nullptr || (vector_ok(t->sizes()) && vector_ok(t->strides()));
  };
  for (flatbuffers::uoffset_t r = 0; r < dump->run_data()->size(); ++r) {
    const efb::RunData* run = dump->run_data()->Get(r);
    if (run == nullptr || run->events() == nullptr) continue;
    for (flatbuffers::uoffset_t i = 0; i < run->events()->size(); ++i) {
      const efb::Event* e = run->events()->Get(i);
      const efb::Value* v = (e != nullptr && e->debug_event() != nullptr) ? e->debug_event()->debug_entry() : nullptr;
      if (v == nullptr) continue;
      bool ok = tensor_ok(v->tensor());
      if (v->tensor_list() != nullptr && v->tensor_list()->tensors() != nullptr) {
        for (const efb::Tensor* t : *v->tensor_list()->tensors()) ok = ok && tensor_ok(t);
      }
      if (!ok) {
        return runtime::set_error(Error::InvalidProgram,
                                  "ETDump: run_data[%u].events[%u]: a tensor's sizes or strides are not 8-byte "
                                  "aligned in the file", r, i);
      }
    }
  }
  return Error::Ok;
}

std::vector<uint8_t> serialize(const EventTracer& tracer) {
  Builder b(4096);
  std::vector<flatbuffers::Offset<efb::RunData>> runs;
  std::vector<flatbuffers::Offset<efb::Event>> events;
  std::string block;
  int32_t bundled_input_index = -1;
  bool open = false;
  auto close = [&]() {
    if (!open) return;
    runs.push_back(efb::CreateRunDataDirect(b, block.c_str(), bundled_input_index, nullptr, &events));
    events.clear();
    open = false;
  };
  for (const ProfileEvent& e : tracer.events()) {
    if (e.kind == ProfileEventKind::Block) {
      close();
      block = e.name;
      bundled_input_index = e.instruction;
      open = true;
      continue;
    }
    if (!open) {  // events recorded before any block (a LastExecute tracer): one block "Execute"
      block = "Execute";
      bundled_input_index = -1;
      open = true;
    }
    switch (e.kind) {
      case ProfileEventKind::Method:
        events.push_back(profile(b, "Method::execute", -1, 0, e));
        break;
      case ProfileEventKind::Load:
        events.push_back(profile(b, e.name, -1, 0, e));
        break;
      case ProfileEventKind::Operator:
        events.push_back(profile(b, native_call_name(e.name).c_str(), 0, e.instruction, e));
        events.push_back(profile(b, "OPERATOR_CALL", 0, e.instruction, e));
        break;
      case ProfileEventKind::DelegateCall:
        events.push_back(profile(b, "DELEGATE_CALL", 0, e.instruction, e));
        break;
      case ProfileEventKind::DelegateInternal:
        events.push_back(profile(b, nullptr, 0, e.instruction, e));
        break;
      case ProfileEventKind::Debug:
        events.push_back(debug_event(b, e));
        break;
      case ProfileEventKind::Block:
        break;
    }
  }
  close();
  if (tracer.dropped() > 0) {
    char name[96];
    std::snprintf(name, sizeof(name), "etkit: %zu events dropped (event storage full)", tracer.dropped());
    runs.push_back(efb::CreateRunDataDirect(b, name, -1, nullptr, &events));
  }
  auto root = efb::CreateETDump(b, 0, b.CreateVector(runs));
  b.FinishSizePrefixed(root, efb::ETDumpIdentifier());
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

ETDumpGen::ETDumpGen(size_t event_capacity)
    : storage_(event_capacity), tracer_(storage_.data(), storage_.size(), EventTracer::Mode::Accumulate) {}

namespace {
Error write_file(const char* path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path, "wb");
  if (f == nullptr) return runtime::set_error(Error::AccessFailed, "cannot open '%s' for writing", path);
  const bool ok = (size == 0 || std::fwrite(data, 1, size, f) == size);
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) return runtime::set_error(Error::AccessFailed, "cannot write %zu bytes to '%s'", size, path);
  return Error::Ok;
}
}  // namespace

Error ETDumpGen::write(const char* etdump_path, const char* debug_buffer_path) const {
  const std::vector<uint8_t> bytes = get_etdump_data();
  Error e = write_file(etdump_path, bytes.data(), bytes.size());
  if (e != Error::Ok || debug_buffer_path == nullptr) return e;
  Span<const uint8_t> debug = tracer_.debug_buffer();
  return write_file(debug_buffer_path, debug.data(), debug.size());
}

}  // namespace etkit::etdump
