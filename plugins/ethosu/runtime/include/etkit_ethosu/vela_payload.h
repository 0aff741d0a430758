// Reader of the Ethos-U delegate payload (Vela's compiled output as a "vela_bin_stream"). Portable C++17
// with no NPU or driver dependency, so it is built and tested on every host; the delegate
// (src/ethosu_backend.cpp) uses it on the device.
//
// Format (etkit_ethosu/payload.py writes it; docs/design/ethosu-route.md section 2.5 has the details):
// a sequence of blocks, each a 32-byte header followed by its data, zero-padded to a multiple of 16:
//
//   offset  size  field
//        0    16  name, ASCII, NUL-padded (the name ends at the first NUL)
//       16     4  uint32: unpadded data length
//       20     1  uint8: external flag (0 = data inline; non-zero = data in the program's named data)
//       21    11  reserved (written as zeros, not checked)
//
// The blocks come in this order, and nothing may follow the last one:
//   vela_bin_stream  empty header marker
//   cmd_data         the Ethos-U command stream, starting with the driver magic "COP1"
//   weight_data      encoded weights, biases and scales (base address 0)
//   scratch_size     uint32: bytes of scratch (region 1, base address 1) the runtime must provide
//   inputs, outputs  int32 count, then per tensor nine int32: shape[6], elem_size, offset, region
//   tosa_graph       optional, etkit only: the partition's TOSA flatbuffer, kept for debugging
//   vela_end_stream  empty footer marker
// All integers are little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace etkit_ethosu {

/// Vela memory regions, which are also the indices of the base addresses given to the NPU driver.
constexpr int32_t kWeightRegion = 0;
constexpr int32_t kScratchRegion = 1;
constexpr int32_t kFastScratchRegion = 2;

/// Blocks start on, and the command stream and weights must sit on, 16-byte boundaries.
constexpr size_t kPayloadAlignment = 16;

/// Bytes that point into the payload (valid while the payload bytes are).
struct ByteView {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

/// One input or output of the compiled graph: where the NPU reads or writes it.
struct VelaIO {
  int32_t shape[6] = {1, 1, 1, 1, 1, 1};  // left-padded with 1s; every dimension is positive
  int32_t elem_size = 1;                  // bytes per element: 1, 2, 4 or 8
  int32_t offset = 0;                     // byte offset inside `region`, non-negative
  int32_t region = kScratchRegion;        // Vela memory region, non-negative (1 = scratch)
};

/// A parsed payload. The views point into the bytes given to parse_vela_payload().
struct VelaPayloadView {
  ByteView cmd_data;          // the command stream, starting with "COP1"
  ByteView weight_data;       // may be empty
  uint32_t scratch_size = 0;  // bytes of region 1
  std::vector<VelaIO> inputs;
  std::vector<VelaIO> outputs;
  bool has_tosa = false;  // a tosa_graph block was present (it may be empty)
  ByteView tosa;
};

/// Parses the `size` bytes at `data` into `*out` (which must not be null). Returns false and, when
/// `error` is not null, sets `*error` to one sentence saying what is wrong: truncated data, an unknown or
/// out-of-order block, a non-empty header or footer block, bytes after the footer, a command stream
/// without "COP1", an externally placed block, a scratch_size block that is not 4 bytes, or I/O records
/// that are malformed or (in region 1) lie outside the scratch region. Never reads outside
/// [data, data + size), whatever the bytes are, and needs no particular alignment of `data`.
bool parse_vela_payload(const uint8_t* data, size_t size, VelaPayloadView* out, std::string* error);

/// Elements of `io` (the product of its six dimensions). False if that overflows 64 bits (not possible
/// for a record parse_vela_payload() accepted in region 1, whose bytes fit in the scratch region).
bool vela_io_numel(const VelaIO& io, uint64_t* numel);

/// Bytes of `io` (elements times elem_size). False if that overflows 64 bits.
bool vela_io_nbytes(const VelaIO& io, uint64_t* nbytes);

/// Whether a tensor of `numel` elements of `elem_size` bytes each is exactly what `io` describes (same
/// element size and element count, hence the same byte count; no layout change happens in between).
/// When it is not and `why` is not null, writes a NUL-terminated sentence of at most `why_size` bytes
/// into `why`, e.g. "the tensor has 2-byte elements, the command stream expects 1-byte elements".
/// Never allocates, so the delegate can call it while executing.
bool tensor_matches_vela_io(const VelaIO& io, uint64_t numel, size_t elem_size, char* why, size_t why_size);

}  // namespace etkit_ethosu
