// Where a kernel's signed 64-bit inputs come from: raw bytes (a binary, possibly unaligned, or a
// decoded list) or an arithmetic range generated on the fly. Never owns memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace accel {

inline int64_t load_i64(const unsigned char* p) {
  int64_t v;
  std::memcpy(&v, p, sizeof v);  // a plain load on x86-64 and AArch64; safe for odd sub-binary offsets
  return v;
}

inline void store_i64(unsigned char* p, int64_t v) { std::memcpy(p, &v, sizeof v); }

struct Int64Source {
  enum class Kind { Bytes, Range };
  Kind kind = Kind::Bytes;
  const unsigned char* bytes = nullptr;  // Kind::Bytes: count * 8 native-endian bytes
  int64_t first = 0;                     // Kind::Range: element i is first + i * step
  int64_t step = 1;
  size_t count = 0;

  static Int64Source of_bytes(const unsigned char* data, size_t count) {
    Int64Source s;
    s.bytes = data;
    s.count = count;
    return s;
  }
  static Int64Source of_range(int64_t first, int64_t step, size_t count) {
    Int64Source s;
    s.kind = Kind::Range;
    s.first = first;
    s.step = step;
    s.count = count;
    return s;
  }

  int64_t at(size_t i) const {
    if (kind == Kind::Bytes) return load_i64(bytes + i * 8);
    // Wrapping unsigned arithmetic: every element of a decoded range lies between its ends, so the
    // true value fits and the wrap is exact.
    return static_cast<int64_t>(static_cast<uint64_t>(first) +
                                static_cast<uint64_t>(i) * static_cast<uint64_t>(step));
  }
};

}  // namespace accel
