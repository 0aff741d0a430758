// Program loading and verification (seed page ".pte file format"; layout facts from ExecuTorch's
// exir/_serialize/_program.py): bytes 0..3 root offset, 4..7 file identifier "ET12", then an optional
// extended header at offset 8: "eh00", uint32 header length, uint64 program size, uint64 segment base
// offset, uint64 segment data size (little endian). Segment offsets in the flatbuffer are relative to
// the segment base offset.
#include "etkit/runtime/program.h"

#include <cstdlib>
#include <cstring>

#include "etkit/runtime/flatbuffer_alignment.h"
#include "etkit/runtime/method.h"
#include "file_bytes.h"
#include "program_data.h"

namespace etkit::runtime {
namespace internal {
namespace {
void free_aligned(void*, void* data, size_t) { std::free(data); }
}  // namespace

void* aligned_heap_allocate(size_t alignment, size_t size) {
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  const size_t rounded = (size == 0 ? 1 : size) + alignment - 1;
  if (rounded < size) return nullptr;  // overflow
  return ::aligned_alloc(alignment, rounded / alignment * alignment);  // C11 (<stdlib.h>): newlib's <cstdlib> lacks std::
}

Error align_buffer(FreeableBuffer* buf, const char* what) {
  if (reinterpret_cast<uintptr_t>(buf->data()) % kFlatbufferAlignment == 0) return Error::Ok;
  const size_t n = buf->size();
  void* copy = aligned_heap_allocate(kFlatbufferAlignment, n);
  if (copy == nullptr) {
    return set_error(Error::MemoryAllocationFailed, "cannot allocate %zu bytes for %s", n, what);
  }
  if (n > 0) std::memcpy(copy, buf->data(), n);
  *buf = FreeableBuffer(copy, n, free_aligned);
  return Error::Ok;
}
}  // namespace internal

namespace {

constexpr size_t kHeadBytes = 64;
constexpr size_t kExtendedHeaderOffset = 8;
constexpr size_t kExtendedHeaderMinLength = 24;  // magic + length + program size + segment base
using internal::align_buffer;
using internal::read_u32;
using internal::read_u64;

struct ExtendedHeader {
  bool present = false;
  uint64_t program_size = 0;
  uint64_t segment_base_offset = 0;
  uint64_t segment_data_size = 0;
};

// Checks every segment, the constant segment and named data against the file.
Error check_segments(const ProgramData& d) {
  const fb::Program* p = d.program;
  const auto* segments = p->segments();
  size_t num_segments = segments == nullptr ? 0 : segments->size();
  for (size_t i = 0; i < num_segments; ++i) {
    const fb::DataSegment* s = segments->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (s == nullptr) return set_error(Error::InvalidProgram, "segment %zu is null", i);
    if (s->size() > 0 && d.segment_base_offset == 0) {
      return set_error(Error::InvalidProgram,
                       "segment %zu holds %llu bytes but the file has no extended header giving the segment base "
                       "offset: the file is truncated or corrupted",
                       i, (unsigned long long)s->size());
    }
    uint64_t start = d.segment_base_offset + s->offset();
    if (s->offset() > d.file_size || start > d.file_size || s->size() > d.file_size - start) {
      return set_error(Error::InvalidProgram,
                       "segment %zu (offset %llu, size %llu after base %zu) extends past the end of the "
                       "%zu-byte file: the file is truncated or corrupted",
                       i, (unsigned long long)s->offset(), (unsigned long long)s->size(), d.segment_base_offset,
                       d.file_size);
    }
  }
  if (const fb::SubsegmentOffsets* cs = p->constant_segment()) {
    if (cs->offsets() != nullptr && cs->offsets()->size() > 0 && cs->segment_index() >= num_segments) {
      return set_error(Error::InvalidProgram, "constant_segment refers to segment %u but the program has %zu",
                       cs->segment_index(), num_segments);
    }
  }
  if (const auto* named = p->named_data()) {
    for (size_t i = 0; i < named->size(); ++i) {
      const fb::NamedData* nd = named->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (nd == nullptr || nd->key() == nullptr || nd->segment_index() >= num_segments) {
        return set_error(Error::InvalidProgram, "named_data entry %zu has no key or a segment index out of range",
                         i);
      }
    }
  }
  if (p->execution_plan() == nullptr) {
    return set_error(Error::InvalidProgram, "program has no execution_plan list");
  }
  return Error::Ok;
}


/// Every vector of 8-byte numbers in program.fbs, checked for element alignment (flatbuffer_alignment.h).
Error check_wide_vectors(const fb::Program* p) {
  auto offsets_ok = [](const fb::SubsegmentOffsets* s) { return s == nullptr || elements_aligned(s->offsets()); };
  if (!offsets_ok(p->constant_segment())) {
    return set_error(Error::InvalidProgram, "constant_segment.offsets is not 8-byte aligned (the file is corrupted)");
  }
  if (const auto* mutables = p->mutable_data_segments()) {
    for (flatbuffers::uoffset_t i = 0; i < mutables->size(); ++i) {
      if (!offsets_ok(mutables->Get(i))) {
        return set_error(Error::InvalidProgram, "mutable_data_segments[%u].offsets is not 8-byte aligned (the file is "
                         "corrupted)", i);
      }
    }
  }
  const auto* plans = p->execution_plan();
  for (flatbuffers::uoffset_t m = 0; plans != nullptr && m < plans->size(); ++m) {
    const fb::ExecutionPlan* plan = plans->Get(m);
    if (plan == nullptr) continue;
    if (!elements_aligned(plan->non_const_buffer_sizes())) {
      return set_error(Error::InvalidProgram, "execution plan %u: non_const_buffer_sizes is not 8-byte aligned (the "
                       "file is corrupted)", m);
    }
    const auto* values = plan->values();
    for (flatbuffers::uoffset_t i = 0; values != nullptr && i < values->size(); ++i) {
      const fb::EValue* v = values->Get(i);
      if (v == nullptr) continue;
      bool ok = true;
      if (v->val_type() == fb::KernelTypes::IntList && v->val_as_IntList() != nullptr) {
        ok = elements_aligned(v->val_as_IntList()->items());
      } else if (v->val_type() == fb::KernelTypes::DoubleList && v->val_as_DoubleList() != nullptr) {
        ok = elements_aligned(v->val_as_DoubleList()->items());
      }
      if (!ok) {
        return set_error(Error::InvalidProgram, "execution plan %u, value %u: its list is not 8-byte aligned (the "
                         "file is corrupted)", m, i);
      }
    }
  }
  return Error::Ok;
}

}  // namespace

// ---------------------------------------------------------------- ProgramData

ProgramData::~ProgramData() {
  constant_segment.Free();
  program_bytes.Free();
}

Result<FreeableBuffer> ProgramData::load_segment(size_t index) const {
  const auto* segments = program->segments();
  if (segments == nullptr || index >= segments->size()) {
    return set_error(Error::InvalidProgram, "segment index %zu out of range (program has %u segments)", index,
                     segments == nullptr ? 0u : segments->size());
  }
  const fb::DataSegment* s = segments->Get(static_cast<flatbuffers::uoffset_t>(index));
  return loader->load(segment_base_offset + s->offset(), s->size());
}

Result<FreeableBuffer> ProgramNamedDataMap::get_data(const char* key) const {
  const auto* named = program_->program->named_data();
  if (named != nullptr && key != nullptr) {
    for (size_t i = 0; i < named->size(); ++i) {
      const fb::NamedData* nd = named->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (std::strcmp(nd->key()->c_str(), key) == 0) return program_->load_segment(nd->segment_index());
    }
  }
  return set_error(Error::NotFound, "named data key '%s' is not in this program", key == nullptr ? "(null)" : key);
}

Result<TensorLayout> ProgramNamedDataMap::get_tensor_layout(const char* key) const {
  const auto* named = program_->program->named_data();
  if (named != nullptr && key != nullptr) {
    for (size_t i = 0; i < named->size(); ++i) {
      if (std::strcmp(named->Get(static_cast<flatbuffers::uoffset_t>(i))->key()->c_str(), key) == 0) {
        return set_error(Error::NotSupported, "named data key '%s' holds bytes without a tensor layout", key);
      }
    }
  }
  return set_error(Error::NotFound, "named data key '%s' is not in this program", key == nullptr ? "(null)" : key);
}

Result<size_t> ProgramNamedDataMap::get_num_keys() const {
  const auto* named = program_->program->named_data();
  return size_t(named == nullptr ? 0 : named->size());
}

Result<const char*> ProgramNamedDataMap::get_key(size_t index) const {
  const auto* named = program_->program->named_data();
  if (named == nullptr || index >= named->size()) {
    return set_error(Error::InvalidArgument, "named data index %zu out of range", index);
  }
  return named->Get(static_cast<flatbuffers::uoffset_t>(index))->key()->c_str();
}

// ---------------------------------------------------------------- Program

Program::Program(std::unique_ptr<ProgramData> data) : data_(std::move(data)) {}
Program::Program(Program&& other) noexcept = default;
Program::~Program() = default;

Result<Program> Program::load(DataLoader* loader, Verification verification) {
  clear_error_message();
  if (loader == nullptr) return set_error(Error::InvalidArgument, "Program::load: loader is null");
  ETKIT_TRY(size_t file_size, loader->size());
  if (file_size < 8) {
    return set_error(Error::InvalidProgram, "file is %zu bytes long, too short to be a .pte program", file_size);
  }
  size_t head_size = file_size < kHeadBytes ? file_size : kHeadBytes;
  ETKIT_TRY(FreeableBuffer head, loader->load(0, head_size));
  const uint8_t* h = static_cast<const uint8_t*>(head.data());
  if (std::memcmp(h + 4, fb::ProgramIdentifier(), 4) != 0) {
    char id[5] = {0};
    for (int i = 0; i < 4; ++i) id[i] = (h[4 + i] >= 32 && h[4 + i] < 127) ? char(h[4 + i]) : '?';
    return set_error(Error::InvalidProgram,
                     "not an ExecuTorch program: file identifier is '%s', expected '%s' (wrong file, or a "
                     "program format version this runtime does not read)",
                     id, fb::ProgramIdentifier());
  }
  ExtendedHeader eh;
  if (head_size >= kExtendedHeaderOffset + kExtendedHeaderMinLength &&
      std::memcmp(h + kExtendedHeaderOffset, "eh00", 4) == 0) {
    const uint8_t* e = h + kExtendedHeaderOffset;
    uint32_t length = read_u32(e + 4);
    if (length < kExtendedHeaderMinLength || kExtendedHeaderOffset + length > head_size) {
      return set_error(Error::InvalidProgram, "extended header length %u is invalid", length);
    }
    eh.present = true;
    eh.program_size = read_u64(e + 8);
    eh.segment_base_offset = read_u64(e + 16);
    eh.segment_data_size = length >= 32 ? read_u64(e + 24) : 0;
  }
  head.Free();

  size_t program_size = file_size;
  size_t segment_base = 0;
  if (eh.present) {
    if (eh.program_size < 8 + kExtendedHeaderMinLength || eh.program_size > file_size) {
      return set_error(Error::InvalidProgram,
                       "extended header says the program is %llu bytes but the file has %zu: the file is "
                       "truncated or corrupted",
                       (unsigned long long)eh.program_size, file_size);
    }
    program_size = static_cast<size_t>(eh.program_size);
    if (eh.segment_base_offset != 0) {
      if (eh.segment_base_offset < eh.program_size || eh.segment_base_offset > file_size) {
        return set_error(Error::InvalidProgram,
                         "extended header segment base offset %llu is outside [%llu, %zu]: the file is "
                         "truncated or corrupted",
                         (unsigned long long)eh.segment_base_offset, (unsigned long long)eh.program_size,
                         file_size);
      }
      if (eh.segment_data_size > file_size - eh.segment_base_offset) {
        return set_error(Error::InvalidProgram,
                         "extended header says segment data is %llu bytes from offset %llu but the file has "
                         "%zu bytes: the file is truncated",
                         (unsigned long long)eh.segment_data_size, (unsigned long long)eh.segment_base_offset,
                         file_size);
      }
      segment_base = static_cast<size_t>(eh.segment_base_offset);
    }
  }

  std::unique_ptr<ProgramData> d(new (std::nothrow) ProgramData());
  if (!d) return set_error(Error::MemoryAllocationFailed, "cannot allocate program state");
  d->loader = loader;
  d->file_size = file_size;
  d->segment_base_offset = segment_base;
  ETKIT_TRY(d->program_bytes, loader->load(0, program_size));
  ETKIT_CHECK_OK(align_buffer(&d->program_bytes, "the program"));
  const uint8_t* bytes = static_cast<const uint8_t*>(d->program_bytes.data());
  uint32_t root_offset = read_u32(bytes);
  if (root_offset < 8 || root_offset > program_size - 4) {
    return set_error(Error::InvalidProgram, "flatbuffer root offset %u is outside the %zu-byte program", root_offset,
                     program_size);
  }
  if (verification == Verification::InternalConsistency) {
    flatbuffers::Verifier::Options opts;
    opts.max_depth = 128;
    opts.max_tables = 100000000;
    flatbuffers::Verifier verifier(bytes, program_size, opts);
    if (!fb::VerifyProgramBuffer(verifier)) {
      return set_error(Error::InvalidProgram,
                       "program flatbuffer failed verification (%zu bytes): the file is truncated or "
                       "corrupted, or was not written by an ExecuTorch-compatible serializer",
                       program_size);
    }
  }
  d->program = fb::GetProgram(bytes);
  if (verification == Verification::InternalConsistency) ETKIT_CHECK_OK(check_wide_vectors(d->program));
  ETKIT_CHECK_OK(check_segments(*d));

  const fb::Program* p = d->program;
  if (const fb::SubsegmentOffsets* cs = p->constant_segment()) {
    if (cs->offsets() != nullptr && cs->offsets()->size() > 0) {
      ETKIT_TRY(d->constant_segment, d->load_segment(cs->segment_index()));
      // (method loading then refuses a constant whose offset misaligns it)
      ETKIT_CHECK_OK(align_buffer(&d->constant_segment, "the constant segment"));
      for (size_t i = 0; i < cs->offsets()->size(); ++i) {
        if (cs->offsets()->Get(static_cast<flatbuffers::uoffset_t>(i)) > d->constant_segment.size()) {
          return set_error(Error::InvalidProgram,
                           "constant %zu starts at offset %llu, past the %zu-byte constant segment", i,
                           (unsigned long long)cs->offsets()->Get(static_cast<flatbuffers::uoffset_t>(i)),
                           d->constant_segment.size());
        }
      }
    }
  }
  return Program(std::move(d));
}

size_t Program::num_methods() const { return data_->program->execution_plan()->size(); }

Result<const char*> Program::get_method_name(size_t index) const {
  const auto* plans = data_->program->execution_plan();
  if (index >= plans->size()) {
    return set_error(Error::InvalidArgument, "method index %zu out of range (program has %u methods)", index,
                     plans->size());
  }
  const fb::ExecutionPlan* plan = plans->Get(static_cast<flatbuffers::uoffset_t>(index));
  if (plan == nullptr || plan->name() == nullptr) {
    return set_error(Error::InvalidProgram, "execution plan %zu has no name", index);
  }
  return plan->name()->c_str();
}

namespace {
const fb::ExecutionPlan* find_plan(const fb::Program* p, const char* name) {
  const auto* plans = p->execution_plan();
  for (size_t i = 0; i < plans->size(); ++i) {
    const fb::ExecutionPlan* plan = plans->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (plan != nullptr && plan->name() != nullptr && std::strcmp(plan->name()->c_str(), name) == 0) return plan;
  }
  return nullptr;
}

Error unknown_method(const fb::Program* p, const char* name) {
  char names[512];
  size_t used = 0;
  names[0] = '\0';
  const auto* plans = p->execution_plan();
  for (size_t i = 0; i < plans->size() && used < sizeof(names) - 1; ++i) {
    const fb::ExecutionPlan* plan = plans->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (plan == nullptr || plan->name() == nullptr) continue;
    int n = std::snprintf(names + used, sizeof(names) - used, "%s'%s'", used ? ", " : "", plan->name()->c_str());
    if (n < 0) break;
    used += static_cast<size_t>(n);
  }
  return set_error(Error::InvalidArgument, "program has no method '%s'; its methods are: %s",
                   name == nullptr ? "(null)" : name, names);
}
}  // namespace

Result<MethodMeta> Program::method_meta(const char* method_name) const {
  const fb::ExecutionPlan* plan = method_name == nullptr ? nullptr : find_plan(data_->program, method_name);
  if (plan == nullptr) return unknown_method(data_->program, method_name);
  return MethodMeta(plan);
}

const NamedDataMap* Program::named_data_map() const {
  const auto* named = data_->program->named_data();
  return (named == nullptr || named->size() == 0) ? nullptr : &data_->named_data_map;
}

const fb::Program* Program::flatbuffer() const { return data_->program; }

Result<const void*> Program::get_constant_data(size_t buffer_index, size_t nbytes) const {
  return data_->constant_data(buffer_index, nbytes);
}

Result<const void*> ProgramData::constant_data(size_t buffer_index, size_t nbytes) const {
  const fb::Program* p = program;
  const ProgramData* data_ = this;
  const fb::SubsegmentOffsets* cs = p->constant_segment();
  if (cs != nullptr && cs->offsets() != nullptr && cs->offsets()->size() > 0) {
    if (buffer_index >= cs->offsets()->size()) {
      return set_error(Error::InvalidProgram, "constant buffer index %zu out of range (%u constants)", buffer_index,
                       cs->offsets()->size());
    }
    uint64_t offset = cs->offsets()->Get(static_cast<flatbuffers::uoffset_t>(buffer_index));
    size_t seg = data_->constant_segment.size();
    if (offset > seg || nbytes > seg - offset) {
      return set_error(Error::InvalidProgram,
                       "constant %zu needs %zu bytes at offset %llu but the constant segment has %zu", buffer_index,
                       nbytes, (unsigned long long)offset, seg);
    }
    return static_cast<const void*>(static_cast<const uint8_t*>(data_->constant_segment.data()) + offset);
  }
  const auto* buffers = p->constant_buffer();
  if (buffers == nullptr || buffer_index >= buffers->size()) {
    return set_error(Error::InvalidProgram, "constant buffer index %zu out of range (%u inline constants)",
                     buffer_index, buffers == nullptr ? 0u : buffers->size());
  }
  const fb::Buffer* b = buffers->Get(static_cast<flatbuffers::uoffset_t>(buffer_index));
  if (b == nullptr || b->storage() == nullptr || b->storage()->size() < nbytes) {
    return set_error(Error::InvalidProgram, "inline constant %zu holds fewer than the %zu bytes its tensor needs",
                     buffer_index, nbytes);
  }
  return static_cast<const void*>(b->storage()->data());
}

Result<FreeableBuffer> Program::load_segment(size_t segment_index) const { return data_->load_segment(segment_index); }

// ---------------------------------------------------------------- MethodMeta

namespace {
size_t plan_list_size(const flatbuffers::Vector<int32_t>* v) { return v == nullptr ? 0 : v->size(); }
}  // namespace

const char* MethodMeta::name() const { return plan_->name() == nullptr ? "" : plan_->name()->c_str(); }
size_t MethodMeta::num_inputs() const { return plan_list_size(plan_->inputs()); }
size_t MethodMeta::num_outputs() const { return plan_list_size(plan_->outputs()); }

Result<Tag> MethodMeta::value_tag(int32_t value_index) const {
  const auto* values = plan_->values();
  if (values == nullptr || value_index < 0 || static_cast<size_t>(value_index) >= values->size()) {
    return set_error(Error::InvalidProgram, "value index %d out of range", value_index);
  }
  const fb::EValue* v = values->Get(static_cast<flatbuffers::uoffset_t>(value_index));
  switch (v == nullptr ? fb::KernelTypes::NONE : v->val_type()) {
    case fb::KernelTypes::Int: return Tag::Int;
    case fb::KernelTypes::Bool: return Tag::Bool;
    case fb::KernelTypes::Double: return Tag::Double;
    case fb::KernelTypes::Tensor: return Tag::Tensor;
    case fb::KernelTypes::String: return Tag::String;
    case fb::KernelTypes::IntList: return Tag::IntList;
    case fb::KernelTypes::DoubleList: return Tag::DoubleList;
    case fb::KernelTypes::BoolList: return Tag::BoolList;
    case fb::KernelTypes::TensorList: return Tag::TensorList;
    case fb::KernelTypes::OptionalTensorList: return Tag::OptionalTensorList;
    default: return Tag::None;
  }
}

Result<TensorInfo> MethodMeta::tensor_meta(int32_t value_index) const {
  ETKIT_TRY(Tag tag, value_tag(value_index));
  if (tag != Tag::Tensor) {
    return set_error(Error::InvalidArgument, "value %d is a %s, not a Tensor", value_index, tag_name(tag));
  }
  const fb::Tensor* t = plan_->values()->Get(static_cast<flatbuffers::uoffset_t>(value_index))->val_as_Tensor();
  if (t == nullptr) return set_error(Error::InvalidProgram, "value %d: tensor has no body", value_index);
  TensorInfo info{};
  info.scalar_type = static_cast<ScalarType>(t->scalar_type());
  if (t->sizes() != nullptr) info.sizes = {t->sizes()->data(), t->sizes()->size()};
  if (t->dim_order() != nullptr) info.dim_order = {t->dim_order()->data(), t->dim_order()->size()};
  info.dynamism = static_cast<TensorShapeDynamism>(t->shape_dynamism());
  info.is_memory_planned = t->allocation_info() != nullptr;
  size_t n = element_size(info.scalar_type);
  for (int32_t s : info.sizes) n *= static_cast<size_t>(s < 0 ? 0 : s);
  info.nbytes = n;
  return info;
}

Result<Tag> MethodMeta::input_tag(size_t index) const {
  if (index >= num_inputs()) return set_error(Error::InvalidArgument, "input index %zu out of range (%zu inputs)", index, num_inputs());
  return value_tag(plan_->inputs()->Get(static_cast<flatbuffers::uoffset_t>(index)));
}
Result<TensorInfo> MethodMeta::input_tensor_meta(size_t index) const {
  if (index >= num_inputs()) return set_error(Error::InvalidArgument, "input index %zu out of range (%zu inputs)", index, num_inputs());
  return tensor_meta(plan_->inputs()->Get(static_cast<flatbuffers::uoffset_t>(index)));
}
Result<Tag> MethodMeta::output_tag(size_t index) const {
  if (index >= num_outputs()) return set_error(Error::InvalidArgument, "output index %zu out of range (%zu outputs)", index, num_outputs());
  return value_tag(plan_->outputs()->Get(static_cast<flatbuffers::uoffset_t>(index)));
}
Result<TensorInfo> MethodMeta::output_tensor_meta(size_t index) const {
  if (index >= num_outputs()) return set_error(Error::InvalidArgument, "output index %zu out of range (%zu outputs)", index, num_outputs());
  return tensor_meta(plan_->outputs()->Get(static_cast<flatbuffers::uoffset_t>(index)));
}

size_t MethodMeta::num_memory_planned_buffers() const {
  const auto* sizes = plan_->non_const_buffer_sizes();
  return (sizes == nullptr || sizes->size() == 0) ? 0 : sizes->size() - 1;
}
Result<int64_t> MethodMeta::memory_planned_buffer_size(size_t index) const {
  if (index >= num_memory_planned_buffers()) {
    return set_error(Error::InvalidArgument, "planned buffer index %zu out of range", index);
  }
  return plan_->non_const_buffer_sizes()->Get(static_cast<flatbuffers::uoffset_t>(index + 1));
}
size_t MethodMeta::num_backends() const { return plan_->delegates() == nullptr ? 0 : plan_->delegates()->size(); }
Result<const char*> MethodMeta::get_backend_name(size_t index) const {
  if (index >= num_backends()) return set_error(Error::InvalidArgument, "backend index %zu out of range", index);
  const fb::BackendDelegate* d = plan_->delegates()->Get(static_cast<flatbuffers::uoffset_t>(index));
  if (d == nullptr || d->id() == nullptr) return set_error(Error::InvalidProgram, "delegate %zu has no id", index);
  return d->id()->c_str();
}

}  // namespace etkit::runtime
