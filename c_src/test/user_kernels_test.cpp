// The helpers generated kernels call (kernels/user.h) against exact integer arithmetic: rem/div of
// integers held in doubles, for every |a| + |b| <= 2^53 the compiler admits them at, including the
// worst case for the reciprocal (dividends near 2^53, small divisors).
#include "kernels/user.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr int64_t k53 = int64_t{1} << 53;

int64_t mag(int64_t v) { return v < 0 ? -v : v; }

// Each helper with `small` 0, and 1 where the compiler would pass it (every quotient below 2^51).
void expect_exact(int64_t a, int64_t b) {
  const double inv = 1.0 / static_cast<double>(b), ad = static_cast<double>(a), bd = static_cast<double>(b);
  const int smalls = mag(a) / mag(b) < (int64_t{1} << 51) - 1 ? 2 : 1;
  for (int small = 0; small < smalls; ++small) {
    ASSERT_EQ(static_cast<int64_t>(accel_rem_f(ad, bd, inv, small)), a % b) << "rem(" << a << ", " << b << ")";
    ASSERT_EQ(static_cast<int64_t>(accel_div_f(ad, bd, inv, small)), a / b) << "div(" << a << ", " << b << ")";
    if (a >= 0) {
      ASSERT_EQ(static_cast<int64_t>(accel_rem_fp(ad, bd, inv, small)), a % b) << "rem_fp(" << a << ", " << b << ")";
    }
  }
}

}  // namespace

TEST(UserKernels, RemDivInDoublesAreExact) {
  std::mt19937_64 rng(11);
  std::vector<int64_t> divisors = {1, 2, 3, 5, 7, 10, 61, 97, 255, 256, 4095, 65537, 6700417, 16777215,
                                   (int64_t{1} << 31) - 1, (int64_t{1} << 40) + 7, (int64_t{1} << 52) - 1,
                                   int64_t{1} << 52};
  for (int bits = 2; bits <= 52; bits += 5)
    for (int k = 0; k < 8; ++k) divisors.push_back(1 + static_cast<int64_t>(rng() % (uint64_t{1} << bits)));

  for (int64_t d0 : divisors) {
    for (int64_t d : {d0, -d0}) {
      const int64_t amax = k53 - mag(d);
      // the edges of the admitted range, around multiples of d, and random dividends
      std::vector<int64_t> as = {0, 1, -1, amax, -amax, amax - 1, -amax + 1, d, -d, d - 1, 1 - d};
      for (int64_t m : std::vector<int64_t>{amax / mag(d), amax / mag(d) - 1, 1, 12345}) {
        if (m > amax / mag(d)) continue;  // m * |d| would pass the admitted bound (or overflow)
        const int64_t base = m * mag(d);
        for (int64_t delta : {-1, 0, 1})
          if (mag(base + delta) <= amax) {
            as.push_back(base + delta);
            as.push_back(-(base + delta));
          }
      }
      for (int k = 0; k < 2000; ++k) {
        const int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(amax + 1));
        as.push_back(k % 2 ? a : -a);
      }
      for (int64_t a : as) expect_exact(a, d);
    }
  }
}

// The helpers correct a remainder once, which is exact only because a * inv is within 1/2 of a / b
// for every divisor (kernels/user.h): tightest for small divisors (|b| = 3 most of all) and
// dividends near 2^53, swept here densely.
TEST(UserKernels, RemDivInDoublesSmallDivisorsNear2To53) {
  for (int64_t d0 = 1; d0 <= 64; ++d0)
    for (int64_t d : {d0, -d0}) {
      const int64_t amax = k53 - d0;
      for (int64_t k = 0; k < 20000; ++k) {
        expect_exact(amax - k, d);
        expect_exact(-(amax - k), d);
      }
    }
}

TEST(UserKernels, WideRemDivAreExact) {
  std::mt19937_64 rng(5);
  constexpr int64_t k62 = int64_t{1} << 62;
  std::vector<int64_t> divisors = {1, 2, 3, 7, 49, 61, 6700417, 16777215, (int64_t{1} << 31) - 1,
                                   (int64_t{1} << 47) + 5, (int64_t{1} << 52) + 1, k53};
  for (int bits = 2; bits <= 53; bits += 3)
    for (int k = 0; k < 6; ++k) divisors.push_back(1 + static_cast<int64_t>(rng() % (uint64_t{1} << bits)));
  for (int64_t d0 : divisors) {
    for (int64_t d : {d0, -d0}) {
      std::vector<int64_t> as = {0, 1, -1, k62, -k62, k62 - 1, d, -d, d - 1, 1 - d, k53, -k53};
      for (int64_t m : std::vector<int64_t>{k62 / mag(d), k62 / mag(d) - 1, 12345}) {
        if (m > k62 / mag(d)) continue;  // m * |d| would pass 2^62 (or overflow)
        for (int64_t delta : {-1, 0, 1}) {
          as.push_back(m * mag(d) + delta);
          as.push_back(-(m * mag(d) + delta));
        }
      }
      for (int k = 0; k < 2000; ++k) {
        const int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(k62 + 1) >> (k % 40));
        as.push_back(k % 2 ? a : -a);
      }
      const double inv = 1.0 / static_cast<double>(d);
      for (int64_t a : as) {
        if (mag(a) > k62) continue;
        ASSERT_EQ(accel_rem_w(a, d, inv), a % d) << "rem(" << a << ", " << d << ")";
        ASSERT_EQ(accel_div_w(a, d, inv), a / d) << "div(" << a << ", " << d << ")";
      }
    }
  }
}

TEST(UserKernels, CheckedOpsFlagExactlyWhenElixirLeaves64Bits) {
  const int64_t lo = INT64_MIN, hi = INT64_MAX;
  struct Case {
    int64_t a, b;
  };
  for (Case c : {Case{hi, 1}, Case{hi, 0}, Case{lo, -1}, Case{lo, 0}, Case{1 << 20, 1 << 20},
                 Case{int64_t{3037000500}, int64_t{3037000500}}, Case{int64_t{3037000499}, int64_t{3037000499}},
                 Case{lo, 1}, Case{-7, 3}}) {
    const __int128 sum = static_cast<__int128>(c.a) + c.b, diff = static_cast<__int128>(c.a) - c.b,
                   prod = static_cast<__int128>(c.a) * c.b;
    int bad = 0;
    const int64_t s = accel_add(c.a, c.b, &bad);
    EXPECT_EQ(bad, sum != static_cast<int64_t>(sum)) << c.a << " + " << c.b;
    if (!bad) {
      EXPECT_EQ(s, sum);
    }
    bad = 0;
    const int64_t d = accel_sub(c.a, c.b, &bad);
    EXPECT_EQ(bad, diff != static_cast<int64_t>(diff)) << c.a << " - " << c.b;
    if (!bad) {
      EXPECT_EQ(d, diff);
    }
    bad = 0;
    const int64_t p = accel_mul(c.a, c.b, &bad);
    EXPECT_EQ(bad, prod != static_cast<int64_t>(prod)) << c.a << " * " << c.b;
    if (!bad) {
      EXPECT_EQ(p, prod);
    }
  }
}

// A select of floats in generated kernels: exactly a's bits where the predicate is nonzero, else
// b's, NaN payloads, signed zeros and subnormals included (a blend of bits, not arithmetic).
template <typename Float, typename Bits>
void expect_blends(const std::vector<Bits>& values, int take, Float (*blend)(int, Float, Float)) {
  for (Bits a : values)
    for (Bits b : values) {
      Float fa, fb;
      std::memcpy(&fa, &a, sizeof a);
      std::memcpy(&fb, &b, sizeof b);
      const Float r = blend(take, fa, fb);
      Bits got;
      std::memcpy(&got, &r, sizeof got);
      ASSERT_EQ(got, take != 0 ? a : b) << std::hex << a << " " << b << " " << take;
    }
}

TEST(UserKernels, BlendGivesEitherOperandsBits) {
  const std::vector<uint32_t> f32 = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x3FC00000u,
                                     0xC0200000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7FA00001u,
                                     0xFFC12345u, 0x4E6E6B28u};
  const std::vector<uint64_t> f64 = {0x0ull, 0x8000000000000000ull, 0x1ull, 0x7FF0000000000000ull,
                                     0xFFF8000000000000ull, 0x7FF4000000000001ull, 0x3FF8000000000000ull,
                                     0xC3E0000000000000ull};
  for (int take : {0, 1, -1, 2, INT32_MIN}) {
    expect_blends<float, uint32_t>(f32, take, accel_f32_blend);
    expect_blends<double, uint64_t>(f64, take, accel_f64_blend);
  }
}
