// elements_aligned(): whether a flatbuffers vector's elements sit at an address aligned for their type.
//
// The flatbuffers verifier checks a vector's 4-byte length prefix for alignment, not its elements: a corrupted
// buffer can place a vector of 8-byte numbers ([long], [ulong], [double]) at an address that is 4 mod 8, and
// reading one through the generated accessors is undefined behaviour. A reader of untrusted bytes (the program
// loader, a delegate's payload reader) checks every such vector once after verification; the buffer itself
// must start at an address aligned to 8 or more (the runtime aligns the program and payload bytes to 16).
#pragma once

#include <cstdint>

namespace etkit::runtime {

/// True for a null vector or one whose data() is aligned for its element type (flatbuffers::Vector<T>).
template <typename Vector>
bool elements_aligned(const Vector* v) {
  return v == nullptr || reinterpret_cast<uintptr_t>(v->data()) % alignof(typename Vector::return_type) == 0;
}

}  // namespace etkit::runtime
