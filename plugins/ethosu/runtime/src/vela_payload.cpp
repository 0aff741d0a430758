// See vela_payload.h. The rules follow etkit_ethosu/payload.py (unpack), so that both readers accept
// exactly the same payloads; on top of it this reader checks that region-1 I/O fits in the scratch
// region, because the delegate copies tensors to scratch + offset.
//
// Every length read from the payload is compared with what remains before it is used; sums are done
// in 64 bits on operands that cannot overflow them (a 32-bit length plus at most 15 bytes of padding).
#include "etkit_ethosu/vela_payload.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>

namespace etkit_ethosu {
namespace {

constexpr size_t kHeaderSize = 32;    // name[16], uint32 length, uint8 external flag, reserved[11]
constexpr size_t kNameSize = 16;
constexpr size_t kLengthOffset = 16;
constexpr size_t kExternalOffset = 20;
constexpr size_t kIoRecordSize = 9 * 4;  // shape[6], elem_size, offset, region: int32 each

/// The blocks, in their required order; kTosa is optional.
enum Block : int { kHeader, kCmd, kWeights, kScratch, kInputs, kOutputs, kTosa, kFooter, kBlockCount };
constexpr const char* kBlockNames[kBlockCount] = {"vela_bin_stream", "cmd_data", "weight_data", "scratch_size",
                                                  "inputs", "outputs", "tosa_graph", "vela_end_stream"};

uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

int32_t load_i32(const uint8_t* p) {
  const uint32_t bits = load_u32(p);
  int32_t value;
  std::memcpy(&value, &bits, sizeof(value));  // two's complement reinterpretation, no overflow
  return value;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
bool fail(std::string* error, const char* format, ...) {
  if (error != nullptr) {
    char text[512];
    va_list args;
    va_start(args, format);
    std::vsnprintf(text, sizeof(text), format, args);
    va_end(args);
    *error = text;
  }
  return false;
}

/// The name stored in a block header: its bytes up to the first NUL (all 16 when there is none).
size_t name_length(const uint8_t* raw) {
  size_t n = 0;
  while (n < kNameSize && raw[n] != 0) ++n;
  return n;
}

/// The index of the block called `raw[0, n)`, or -1 for a name that is not an Ethos-U block.
int block_index(const uint8_t* raw, size_t n) {
  for (int i = 0; i < kBlockCount; ++i) {
    if (std::strlen(kBlockNames[i]) == n && std::memcmp(kBlockNames[i], raw, n) == 0) return i;
  }
  return -1;
}

/// `raw[0, n)` for an error message: printable ASCII as is, anything else as \xNN.
std::string printable(const uint8_t* raw, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t c = raw[i];
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      s.push_back(static_cast<char>(c));
    } else {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      s += hex;
    }
  }
  return s;
}

std::string shape_text(const VelaIO& io) {
  char text[96];
  std::snprintf(text, sizeof(text), "(%d, %d, %d, %d, %d, %d)", io.shape[0], io.shape[1], io.shape[2], io.shape[3],
                io.shape[4], io.shape[5]);
  return text;
}

/// Reads an `inputs` or `outputs` block (`what` names it) into `*ios`.
bool read_ios(const ByteView& block, const char* what, uint32_t scratch_size, std::vector<VelaIO>* ios,
              std::string* error) {
  if (block.size < 4) {
    return fail(error, "block %s is %zu bytes; it needs at least the 4-byte count", what, block.size);
  }
  const int32_t count = load_i32(block.data);
  // count >= 0 here, so 4 + count * 36 < 2^37: no overflow in 64 bits
  const uint64_t expected = 4 + static_cast<uint64_t>(count < 0 ? 0 : count) * kIoRecordSize;
  if (count < 0 || expected != block.size) {
    return fail(error, "block %s says %d tensors but holds %zu bytes (expected %llu)", what, count, block.size,
                static_cast<unsigned long long>(expected));
  }
  ios->clear();
  ios->reserve(static_cast<size_t>(count));  // bounded by the block's size, checked above
  for (int32_t i = 0; i < count; ++i) {
    const uint8_t* p = block.data + 4 + static_cast<size_t>(i) * kIoRecordSize;
    VelaIO io;
    for (int d = 0; d < 6; ++d) io.shape[d] = load_i32(p + 4 * d);
    io.elem_size = load_i32(p + 24);
    io.offset = load_i32(p + 28);
    io.region = load_i32(p + 32);
    for (int d = 0; d < 6; ++d) {
      if (io.shape[d] <= 0) {
        return fail(error, "%s[%d]: dimension %d of shape %s is not positive", what, i, d, shape_text(io).c_str());
      }
    }
    if (io.elem_size != 1 && io.elem_size != 2 && io.elem_size != 4 && io.elem_size != 8) {
      return fail(error, "%s[%d]: element size %d is not 1, 2, 4 or 8", what, i, io.elem_size);
    }
    if (io.offset < 0) return fail(error, "%s[%d]: offset %d is negative", what, i, io.offset);
    if (io.region < 0) return fail(error, "%s[%d]: region %d is negative", what, i, io.region);
    if (io.region == kScratchRegion) {
      // the delegate copies the tensor to scratch + offset: all of it must lie inside the scratch region
      uint64_t nbytes = 0;
      if (!vela_io_nbytes(io, &nbytes)) {
        return fail(error, "%s[%d]: shape %s of %d-byte elements is more than 2^64 bytes, far beyond the %u-byte "
                    "scratch region", what, i, shape_text(io).c_str(), io.elem_size, scratch_size);
      }
      if (nbytes > scratch_size || static_cast<uint64_t>(io.offset) > scratch_size - nbytes) {
        return fail(error, "%s[%d]: %llu bytes at offset %d do not fit in the %u-byte scratch region (region 1)", what,
                    i, static_cast<unsigned long long>(nbytes), io.offset, scratch_size);
      }
    }
    ios->push_back(io);
  }
  return true;
}

}  // namespace

bool parse_vela_payload(const uint8_t* data, size_t size, VelaPayloadView* out, std::string* error) {
  *out = VelaPayloadView();
  if (data == nullptr && size != 0) return fail(error, "the Ethos-U payload pointer is null");

  // Walk the blocks. Each iteration consumes at least a 32-byte header and moves `expected` forward, so
  // the loop ends after at most kBlockCount blocks.
  ByteView blocks[kBlockCount];
  bool present[kBlockCount] = {};
  size_t at = 0;
  int expected = kHeader;
  for (;;) {
    if (size - at < kHeaderSize) {
      return fail(error, "truncated payload: a block header at byte %zu needs %zu bytes, %zu remain", at,
                  kHeaderSize, size - at);
    }
    const uint8_t* header = data + at;
    const size_t n = name_length(header);
    const int index = block_index(header, n);
    // tosa_graph is optional: the footer may come where it would
    const bool tosa_skipped = expected == kTosa && index == kFooter;
    if (index != expected && !tosa_skipped) {
      if (index < 0) {
        return fail(error, "block '%s' at byte %zu is not an Ethos-U block", printable(header, n).c_str(), at);
      }
      return fail(error, "block '%s' at byte %zu is out of order (expected '%s')", kBlockNames[index], at,
                  kBlockNames[expected]);
    }
    if (header[kExternalOffset] != 0) {
      return fail(error, "block '%s' at byte %zu is placed externally: externally placed blocks (named data) are "
                  "not supported by this reader", kBlockNames[index], at);
    }
    // The 11 reserved bytes are not checked (payload.py and ExecuTorch's reader ignore them too).
    const uint64_t length = load_u32(header + kLengthOffset);
    const uint64_t padded = length + (kPayloadAlignment - length % kPayloadAlignment) % kPayloadAlignment;
    const size_t start = at + kHeaderSize;  // <= size, checked above
    if (padded > size - start) {
      return fail(error, "truncated payload: block '%s' needs %llu bytes, %zu remain", kBlockNames[index],
                  static_cast<unsigned long long>(padded), size - start);
    }
    // The padding bytes are not checked either (payload.py writes zeros and ignores them when reading).
    blocks[index] = ByteView{data + start, static_cast<size_t>(length)};
    present[index] = true;
    at = start + static_cast<size_t>(padded);
    expected = index + 1;
    if (index == kFooter) break;
  }
  if (at != size) return fail(error, "%zu bytes follow the vela_end_stream footer", size - at);
  if (blocks[kHeader].size != 0 || blocks[kFooter].size != 0) {
    return fail(error, "the header and footer blocks must be empty");
  }
  const ByteView& cmd = blocks[kCmd];
  if (cmd.size < 4 || std::memcmp(cmd.data, "COP1", 4) != 0) {
    return fail(error, "the command stream does not start with \"COP1\"");
  }
  if (blocks[kScratch].size != 4) {
    return fail(error, "block scratch_size is %zu bytes, expected 4", blocks[kScratch].size);
  }
  out->cmd_data = cmd;
  out->weight_data = blocks[kWeights];
  out->scratch_size = load_u32(blocks[kScratch].data);
  if (!read_ios(blocks[kInputs], "inputs", out->scratch_size, &out->inputs, error) ||
      !read_ios(blocks[kOutputs], "outputs", out->scratch_size, &out->outputs, error)) {
    *out = VelaPayloadView();
    return false;
  }
  out->has_tosa = present[kTosa];
  out->tosa = blocks[kTosa];
  return true;
}

bool vela_io_numel(const VelaIO& io, uint64_t* numel) {
  uint64_t n = 1;
  for (int32_t d : io.shape) {
    if (d < 0) return false;  // not a record the parser accepts
    const uint64_t dim = static_cast<uint64_t>(d);
    if (dim != 0 && n > std::numeric_limits<uint64_t>::max() / dim) return false;
    n *= dim;
  }
  *numel = n;
  return true;
}

bool vela_io_nbytes(const VelaIO& io, uint64_t* nbytes) {
  uint64_t n = 0;
  if (io.elem_size < 0 || !vela_io_numel(io, &n)) return false;
  const uint64_t elem = static_cast<uint64_t>(io.elem_size);
  if (elem != 0 && n > std::numeric_limits<uint64_t>::max() / elem) return false;
  *nbytes = n * elem;
  return true;
}

bool tensor_matches_vela_io(const VelaIO& io, uint64_t numel, size_t elem_size, char* why, size_t why_size) {
  const bool write = why != nullptr && why_size > 0;
  if (io.elem_size < 0 || elem_size != static_cast<size_t>(io.elem_size)) {
    if (write) {
      std::snprintf(why, why_size, "the tensor has %zu-byte elements, the command stream expects %d-byte elements",
                    elem_size, io.elem_size);
    }
    return false;
  }
  uint64_t expected = 0;
  const bool fits = vela_io_numel(io, &expected);
  if (!fits || numel != expected) {
    if (write) {
      char count[32];
      if (fits) {
        std::snprintf(count, sizeof(count), "%llu", static_cast<unsigned long long>(expected));
      } else {
        std::snprintf(count, sizeof(count), "more than 2^64");
      }
      std::snprintf(why, why_size,
                    "the tensor has %llu elements, the command stream expects %s (shape (%d, %d, %d, %d, %d, %d))",
                    static_cast<unsigned long long>(numel), count, io.shape[0], io.shape[1], io.shape[2],
                    io.shape[3], io.shape[4], io.shape[5]);
    }
    return false;
  }
  return true;
}

}  // namespace etkit_ethosu
