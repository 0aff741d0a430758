// FlatTensorDataMap (flat_tensor_data_map.h): the .ptd loader. Layout facts from ExecuTorch 1.5.1's
// extension/flat_tensor/serialize/serialize.py and flat_tensor.fbs: bytes 0..3 root offset, 4..7 "FT01",
// the "FH01" header at 8, the flatbuffer over [0, flatbuffer_offset + flatbuffer_size), segments at
// segment_base_offset + DataSegment.offset.
#include "etkit/extension/flat_tensor/flat_tensor_data_map.h"

#include <cstring>

#include "../../src/file_bytes.h"
#include "etkit/runtime/error.h"
#include "etkit/runtime/flatbuffer_alignment.h"
#include "etkit/runtime/tensor.h"
#include "flat_tensor_generated.h"

namespace etkit::extension {

using runtime::Error;
using runtime::FreeableBuffer;
using runtime::Result;
using runtime::set_error;
using runtime::TensorLayout;
namespace ft = etkit::fb::flat_tensor;

struct FlatTensorDataMap::State {
  runtime::DataLoader* loader = nullptr;
  FlatTensorHeader header;
  FreeableBuffer flatbuffer;
  const ft::FlatTensor* root = nullptr;

  const ft::NamedData* find(const char* key) const {
    const auto* named = root->named_data();
    if (named == nullptr || key == nullptr) return nullptr;
    for (flatbuffers::uoffset_t i = 0; i < named->size(); ++i) {
      const ft::NamedData* nd = named->Get(i);
      if (std::strcmp(nd->key()->c_str(), key) == 0) return nd;
    }
    return nullptr;
  }
};

namespace {

Error invalid(const char* format, const char* detail) {
  return set_error(Error::InvalidProgram, format, detail);
}

/// Bytes of a tensor layout, or an error naming `key`.
Result<size_t> layout_nbytes(const ft::TensorLayout* layout, const char* key) {
  int st = static_cast<int>(layout->scalar_type());
  if (!runtime::is_valid_scalar_type(st)) {
    return set_error(Error::InvalidProgram, ".ptd key '%s': unknown scalar type %d (the file is corrupted)", key, st);
  }
  const size_t rank = layout->sizes() == nullptr ? 0 : layout->sizes()->size();
  const size_t order = layout->dim_order() == nullptr ? 0 : layout->dim_order()->size();
  if (rank > runtime::kTensorDimensionLimit || order != rank) {
    return set_error(Error::InvalidProgram,
                     ".ptd key '%s': tensor layout has %zu sizes and %zu dim_order entries (the rank limit is %zu; "
                     "the file is corrupted)",
                     key, rank, order, runtime::kTensorDimensionLimit);
  }
  bool seen[runtime::kTensorDimensionLimit] = {false};
  uint64_t nbytes = runtime::element_size(static_cast<runtime::ScalarType>(st));
  for (flatbuffers::uoffset_t d = 0; d < rank; ++d) {
    int32_t size = layout->sizes()->Get(d);
    uint8_t o = layout->dim_order()->Get(d);
    if (size < 0 || o >= rank || seen[o]) {
      return set_error(Error::InvalidProgram,
                       ".ptd key '%s': tensor layout has a negative size or a dim_order that is not a permutation "
                       "(the file is corrupted)",
                       key);
    }
    seen[o] = true;
    if (__builtin_mul_overflow(nbytes, static_cast<uint64_t>(size), &nbytes) || nbytes > (uint64_t(1) << 48)) {
      return set_error(Error::InvalidProgram, ".ptd key '%s': tensor layout sizes overflow", key);
    }
  }
  return static_cast<size_t>(nbytes);
}

Error check_index(const ft::FlatTensor* root, const FlatTensorHeader& h) {
  if (root->version() > kFlatTensorVersion) {
    return set_error(Error::InvalidProgram,
                     ".ptd is FlatTensor version %u; this runtime reads version %u (rebuild the runtime, or export "
                     "the data file again with this etkit)",
                     root->version(), kFlatTensorVersion);
  }
  const auto* segments = root->segments();
  const size_t num_segments = segments == nullptr ? 0 : segments->size();
  for (flatbuffers::uoffset_t i = 0; i < num_segments; ++i) {
    const ft::DataSegment* s = segments->Get(i);
    if (s->offset() > h.segment_data_size || s->size() > h.segment_data_size - s->offset()) {
      return set_error(Error::InvalidProgram,
                       ".ptd segment %u (%llu bytes at offset %llu) is outside the %llu bytes of segment data: the "
                       "file is truncated or corrupted",
                       i, (unsigned long long)s->size(), (unsigned long long)s->offset(),
                       (unsigned long long)h.segment_data_size);
    }
  }
  const auto* named = root->named_data();
  const size_t num_named = named == nullptr ? 0 : named->size();
  for (flatbuffers::uoffset_t i = 0; i < num_named; ++i) {
    const ft::NamedData* nd = named->Get(i);
    if (nd->key() == nullptr) {
      return set_error(Error::InvalidProgram, ".ptd named_data[%u] has no key (the file is corrupted)", i);
    }
    const char* key = nd->key()->c_str();
    if (nd->segment_index() >= num_segments) {
      return set_error(Error::InvalidProgram, ".ptd key '%s': segment index %u out of range (%zu segments)", key,
                       nd->segment_index(), num_segments);
    }
    if (const ft::TensorLayout* layout = nd->tensor_layout()) {
      ETKIT_TRY(size_t nbytes, layout_nbytes(layout, key));
      const uint64_t available = segments->Get(nd->segment_index())->size();
      if (nbytes > available) {
        return set_error(Error::InvalidProgram,
                         ".ptd key '%s': its tensor layout needs %zu bytes but its segment holds %llu (the file is "
                         "corrupted)",
                         key, nbytes, (unsigned long long)available);
      }
    }
  }
  return Error::Ok;
}

}  // namespace

Result<FlatTensorDataMap> FlatTensorDataMap::load(runtime::DataLoader* loader) {
  using runtime::internal::read_u32;
  using runtime::internal::read_u64;
  if (loader == nullptr) return set_error(Error::InvalidArgument, "FlatTensorDataMap::load: loader is null");
  ETKIT_TRY(size_t file_size, loader->size());
  constexpr size_t kHead = FlatTensorHeader::kOffset + FlatTensorHeader::kLength;
  if (file_size < kHead) {
    return set_error(Error::InvalidProgram, "data file is %zu bytes long, too short to be a .ptd (at least %zu)",
                     file_size, kHead);
  }
  FlatTensorHeader h;
  {
    ETKIT_TRY(FreeableBuffer head, loader->load(0, kHead));
    const uint8_t* b = static_cast<const uint8_t*>(head.data());
    if (std::memcmp(b + 4, ft::FlatTensorIdentifier(), 4) != 0) {
      char id[5] = {0};
      for (int i = 0; i < 4; ++i) id[i] = (b[4 + i] >= 32 && b[4 + i] < 127) ? char(b[4 + i]) : '?';
      if (std::memcmp(id, "ET", 2) == 0) {
        return invalid("not a .ptd data file: its file identifier is '%s', a .pte program's (pass the program as "
                       "the program and its .ptd as the data file)", id);
      }
      return set_error(Error::InvalidProgram,
                       "not a .ptd data file: file identifier is '%s', expected '%s' (wrong file, or a FlatTensor "
                       "version this runtime does not read)",
                       id, ft::FlatTensorIdentifier());
    }
    const uint8_t* e = b + FlatTensorHeader::kOffset;
    if (std::memcmp(e, "FH01", 4) != 0 || read_u32(e + 4) < FlatTensorHeader::kLength) {
      return set_error(Error::InvalidProgram,
                       ".ptd header at byte 8 is not an 'FH01' header of at least %zu bytes: the file is corrupted "
                       "or of another version", FlatTensorHeader::kLength);
    }
    h.flatbuffer_offset = read_u64(e + 8);
    h.flatbuffer_size = read_u64(e + 16);
    h.segment_base_offset = read_u64(e + 24);
    h.segment_data_size = read_u64(e + 32);
  }
  const uint64_t fb_end = h.flatbuffer_offset + h.flatbuffer_size;
  if (fb_end < h.flatbuffer_offset || fb_end < kHead || fb_end > file_size) {
    return set_error(Error::InvalidProgram,
                     ".ptd header says the index spans %llu + %llu bytes but the file has %zu: the file is truncated "
                     "or corrupted",
                     (unsigned long long)h.flatbuffer_offset, (unsigned long long)h.flatbuffer_size, file_size);
  }
  if (h.segment_base_offset < fb_end || h.segment_base_offset > file_size ||
      h.segment_data_size > file_size - h.segment_base_offset) {
    return set_error(Error::InvalidProgram,
                     ".ptd header says its data are %llu bytes from offset %llu but the file has %zu bytes (the index "
                     "ends at %llu): the file is truncated or corrupted",
                     (unsigned long long)h.segment_data_size, (unsigned long long)h.segment_base_offset, file_size,
                     (unsigned long long)fb_end);
  }
  std::unique_ptr<State> s(new (std::nothrow) State());
  if (!s) return set_error(Error::MemoryAllocationFailed, "cannot allocate the .ptd data map");
  s->loader = loader;
  s->header = h;
  ETKIT_TRY(s->flatbuffer, loader->load(0, static_cast<size_t>(fb_end)));
  ETKIT_CHECK_OK(runtime::internal::align_buffer(&s->flatbuffer, "the .ptd index"));
  const uint8_t* bytes = static_cast<const uint8_t*>(s->flatbuffer.data());
  flatbuffers::Verifier::Options opts;
  opts.max_depth = 64;
  opts.max_tables = 10000000;
  flatbuffers::Verifier verifier(bytes, s->flatbuffer.size(), opts);
  if (!ft::VerifyFlatTensorBuffer(verifier)) {
    return set_error(Error::InvalidProgram,
                     ".ptd index (FlatTensor flatbuffer, %zu bytes) failed verification: the file is truncated or "
                     "corrupted", s->flatbuffer.size());
  }
  s->root = ft::GetFlatTensor(bytes);
  ETKIT_CHECK_OK(check_index(s->root, h));
  return FlatTensorDataMap(std::move(s));
}

FlatTensorDataMap::FlatTensorDataMap(std::unique_ptr<State> state) : state_(std::move(state)) {}
FlatTensorDataMap::FlatTensorDataMap(FlatTensorDataMap&& other) noexcept = default;
FlatTensorDataMap::~FlatTensorDataMap() = default;

const FlatTensorHeader& FlatTensorDataMap::header() const { return state_->header; }

Result<FreeableBuffer> FlatTensorDataMap::get_data(const char* key) const {
  const ft::NamedData* nd = state_->find(key);
  if (nd == nullptr) {
    return set_error(Error::NotFound, "key '%s' is not in the .ptd data file", key == nullptr ? "(null)" : key);
  }
  const ft::DataSegment* seg = state_->root->segments()->Get(nd->segment_index());
  return state_->loader->load(static_cast<size_t>(state_->header.segment_base_offset + seg->offset()),
                              static_cast<size_t>(seg->size()));
}

Result<size_t> FlatTensorDataMap::get_num_keys() const {
  const auto* named = state_->root->named_data();
  return size_t(named == nullptr ? 0 : named->size());
}

Result<const char*> FlatTensorDataMap::get_key(size_t index) const {
  const auto* named = state_->root->named_data();
  if (named == nullptr || index >= named->size()) {
    return set_error(Error::InvalidArgument, ".ptd named data index %zu out of range", index);
  }
  return named->Get(static_cast<flatbuffers::uoffset_t>(index))->key()->c_str();
}

Result<TensorLayout> FlatTensorDataMap::get_tensor_layout(const char* key) const {
  const ft::NamedData* nd = state_->find(key);
  if (nd == nullptr) {
    return set_error(Error::NotFound, "key '%s' is not in the .ptd data file", key == nullptr ? "(null)" : key);
  }
  if (nd->tensor_layout() == nullptr) {
    return set_error(Error::NotSupported, "key '%s' holds bytes, not a tensor, in the .ptd data file", key);
  }
  const ft::TensorLayout* l = nd->tensor_layout();
  TensorLayout layout;
  layout.scalar_type = static_cast<runtime::ScalarType>(l->scalar_type());
  if (l->sizes() != nullptr) layout.sizes = {l->sizes()->data(), l->sizes()->size()};
  if (l->dim_order() != nullptr) layout.dim_order = {l->dim_order()->data(), l->dim_order()->size()};
  ETKIT_TRY(layout.nbytes, layout_nbytes(l, key));  // checked at load; cannot fail here
  return layout;
}

}  // namespace etkit::extension
