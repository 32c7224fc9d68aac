// An independent formulation of rem(mu * x * (x + 1), p) in signed 128-bit arithmetic, shared by
// the GoogleTest files, and the inputs they try.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace accel::test {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// rem(a * b, p) == rem(rem(a, p) * rem(b, p), p) for truncated remainders; x * (x + 1) fits in 128 bits.
inline int64_t oracle_step(int64_t x, int64_t mu, int64_t p) {
  using i128 = __int128;
  const i128 xx1 = static_cast<i128>(x) * (static_cast<i128>(x) + 1);
  return static_cast<int64_t>((static_cast<i128>(mu) % p) * (xx1 % p) % p);
}

inline int64_t oracle(int64_t x, int64_t mu, int64_t p, int64_t iterations) {
  for (int64_t i = 0; i < iterations; ++i) x = oracle_step(x, mu, p);
  return x;
}

// Values around p (those that exist in int64: p + 1 does not when p is INT64_MAX), around the
// 2^32 and 2^26 thresholds of the fast paths, and at the ends of int64.
inline std::vector<int64_t> edge_inputs(int64_t p) {
  std::vector<int64_t> v = {0,         1,          -1,           2,            -2,           kMax,
                            kMin,      kMax - 1,   kMin + 1,     p,            -p,           p - 1,
                            1 - p,     4294967295LL, -4294967295LL, 4294967296LL, -4294967296LL, 3037000499LL,
                            67108863LL, -67108863LL, 67108864LL,   -67108864LL};
  int64_t x;
  if (!__builtin_add_overflow(p, 1, &x)) v.push_back(x);
  if (!__builtin_sub_overflow(-p, 1, &x)) v.push_back(x);
  return v;
}

// Full range, 32-bit, small, and near the extremes, in turn.
inline std::vector<int64_t> random_inputs(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng();
    switch (i % 4) {
      case 0: v[i] = static_cast<int64_t>(r); break;
      case 1: v[i] = static_cast<int32_t>(r); break;
      case 2: v[i] = static_cast<int64_t>(r % 20001) - 10000; break;
      default: v[i] = (r & 1) ? kMax - static_cast<int64_t>((r >> 1) % 1000) : kMin + static_cast<int64_t>((r >> 1) % 1000);
    }
  }
  return v;
}

}  // namespace accel::test
