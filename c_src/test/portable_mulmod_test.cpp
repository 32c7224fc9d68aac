// The kernels' portable 128-bit-free multiply-mod (what OpenCL C compiles) against the host's
// 128-bit one: this translation unit forces the fallback.
#define ACCEL_HAS_INT128 0
#include "kernels/logistic_map.h"

#include <gtest/gtest.h>

#include <random>

TEST(PortableMulmod, MatchesInt128) {
  std::mt19937_64 rng(3);
  const uint64_t moduli[] = {1, 2, 3, 6700417, 4294967311ULL, (1ULL << 62) + 57, (1ULL << 63) - 1};
  for (uint64_t p : moduli) {
    accel_lm_params c{};
    c.p = p;
    for (int i = 0; i < 5000; ++i) {
      const uint64_t a = rng() % p, b = rng() % p;
      ASSERT_EQ(accel_lm_mulmod(a, b, c), static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) % p))
          << a << " * " << b << " mod " << p;
    }
    ASSERT_EQ(accel_lm_mulmod(p - 1, p - 1, c), static_cast<uint64_t>((static_cast<unsigned __int128>(p - 1) * (p - 1)) % p));
  }
}
