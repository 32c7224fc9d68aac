// The f32 functions on the host (kernels/tensor.h): with GCC and glibc their f64 functions are
// called through names that carry glibc's SIMD variants (libmvec), so that loops over elements
// vectorise. Each f32 result must still be the scalar C library's f64 function rounded once to f32
// (what the CPU backend gave before, and what Nx.BinaryBackend computes): swept here through loops
// the compiler vectorises (at every vector width the machine has, as generated kernels are built),
// over every 251st f32 bit pattern (about 1.7 x 10^7 inputs, every exponent, both signs) and the
// special values. erf_inv's reference is Accel's own f64 erf_inv (Giles' approximation, as Nx's),
// whose log is the scalar C library's. CMake builds this file a second time as the x86-64-v3 host
// kernels are built (suite HostMathV3): with FMA there, tensor.h's f32 exp and tanh are its own
// code rather than libmvec's, and both must give the scalar functions' bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "kernels/tensor.h"

#ifndef ACCEL_HOST_MATH_SUITE
#define ACCEL_HOST_MATH_SUITE HostMath
#endif

namespace {

// ulps apart in f32 (NaN equals NaN; signed zeros must match)
int64_t ulps_apart(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  if (a == b) return std::signbit(a) == std::signbit(b) ? 0 : INT64_MAX;
  auto key = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    const int64_t b = u;
    return b & 0x80000000 ? -(b & 0x7FFFFFFF) : b;
  };
  return std::llabs(key(a) - key(b));
}

#define ACCEL_HOST_MATH_CASES(X) \
  X(exp, std::exp(x))            \
  X(expm1, std::expm1(x))        \
  X(log, std::log(x))            \
  X(log1p, std::log1p(x))        \
  X(tanh, std::tanh(x))          \
  X(sigmoid, 1.0 / (1.0 + std::exp(-x))) \
  X(sin, std::sin(x))            \
  X(cos, std::cos(x))            \
  X(atan, std::atan(x))          \
  X(erf, std::erf(x))            \
  X(cbrt, std::cbrt(x))          \
  X(erf_inv, accel_erf_inv_f64(x))

// out[i] = accel_f32_<fn>(in[i]) as a generated kernel's loop computes it (vectorised)
#define ACCEL_BATCH(fn, _)                                                                                 \
  __attribute__((noinline, target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void batch_##fn( \
      float* __restrict out, const float* __restrict in, size_t n) {                                      \
    for (size_t i = 0; i < n; ++i) out[i] = accel_f32_##fn(in[i]);                                        \
  }
ACCEL_HOST_MATH_CASES(ACCEL_BATCH)

struct Case {
  const char* name;
  void (*batch)(float*, const float*, size_t);
  double (*libm)(double);
};

#define ACCEL_CASE(fn, expr) {#fn, batch_##fn, [](double x) -> double { return expr; }},
const Case cases[] = {ACCEL_HOST_MATH_CASES(ACCEL_CASE)};

// The approximate functions (math: :fast) and the most ulps each may be off the exact result rounded.
#define ACCEL_FAST_MATH_CASES(X)                \
  X(exp_fast, std::exp(x), 1)                   \
  X(sigmoid_fast, 1.0 / (1.0 + std::exp(-x)), 2) \
  X(tanh_fast, std::tanh(x), 1)

#define ACCEL_FAST_BATCH(fn, expr, _) ACCEL_BATCH(fn, expr)
ACCEL_FAST_MATH_CASES(ACCEL_FAST_BATCH)

struct FastCase {
  Case c;
  int64_t ulps;
};

#define ACCEL_FAST_CASE(fn, expr, ulps) {ACCEL_CASE(fn, expr) ulps},
const FastCase fast_cases[] = {ACCEL_FAST_MATH_CASES(ACCEL_FAST_CASE)};

// every 251st f32 bit pattern (about 1.7 x 10^7 inputs, every exponent, both signs) and the special values
std::vector<float> sweep_inputs() {
  std::vector<float> in;
  for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += 251) {
    const uint32_t u = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &u, sizeof f);
    in.push_back(f);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1.0f, -1.0f, 88.72283f,
                  88.72284f, -103.97208f, 20.0f, -20.0f, 1e-30f, 1.4e-45f, 3.4e38f, -3.4e38f, 0.625f, -0.625f,
                  -87.33655f, -88.7f, -104.0f, 89.0f, 9.0f, -9.0f,
                  // around exp's, sigmoid's and tanh's clamps and selects (kernels/tensor.h) and a masked score
                  -200.0f, -200.00002f, -199.99998f, 200.0f, 200.00002f, 199.99998f, 100.0f, 100.00001f, 99.99999f,
                  -100.0f, 10.0f, 10.000001f, 9.999999f, -10.000001f, 0x1p-13f, -0x1p-13f, 0x1.fffffep-14f,
                  0x1.000002p-13f, -708.5f, 709.9f, 710.0f, -1.0e9f, 1.0e9f})
    in.push_back(x);
  return in;
}

}  // namespace

TEST(ACCEL_HOST_MATH_SUITE, F32FunctionsAreTheScalarCLibrarysRoundedOnce) {
  const std::vector<float> in = sweep_inputs();
  std::vector<float> out(in.size());
  for (const Case& c : cases) {
    c.batch(out.data(), in.data(), in.size());
    size_t differ = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const float want = static_cast<float>(c.libm(static_cast<double>(in[i])));
      if (ulps_apart(out[i], want) != 0 && ++differ <= 3)
        ADD_FAILURE() << c.name << "(" << in[i] << ") = " << out[i] << ", the C library's " << want;
    }
    EXPECT_EQ(differ, 0u) << c.name << " over " << in.size() << " inputs";
  }
}

// The approximate functions stay within their ulps of the exact result rounded, give NaN for NaN
// and keep signed zeros and the infinities' limits (ulps_apart: NaN against a number, or zeros of
// opposite signs, are infinitely far apart).
TEST(ACCEL_HOST_MATH_SUITE, FastF32FunctionsAreWithinTheirUlps) {
  const std::vector<float> in = sweep_inputs();
  std::vector<float> out(in.size());
  for (const FastCase& f : fast_cases) {
    f.c.batch(out.data(), in.data(), in.size());
    int64_t worst = 0;
    size_t over = 0, inexact = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const float want = static_cast<float>(f.c.libm(static_cast<double>(in[i])));
      const int64_t apart = ulps_apart(out[i], want);
      worst = std::max(worst, apart);
      inexact += apart != 0;
      if (apart > f.ulps && ++over <= 3)
        ADD_FAILURE() << f.c.name << "(" << in[i] << ") = " << out[i] << ", the exact result rounded " << want;
    }
    EXPECT_EQ(over, 0u) << f.c.name << " over " << in.size() << " inputs";
    std::printf("%s: at most %lld ulps off, %.2f%% of %zu inputs not the exact result rounded\n", f.c.name,
                static_cast<long long>(worst), 100.0 * inexact / in.size(), in.size());
  }
}

// exp, tanh and sigmoid of f32 are Accel's own code on an x86-64 host with FMA (kernels/tensor.h's
// ACCEL_OWN_F32_EXP: the HostMathV3 suite, as the kernels are built), exact only because its
// polynomial is accurate enough for every f32 input: each input where the result is neither a
// constant nor x itself, both signs (|x| in [2^-26, 128) for exp and sigmoid: below, they round to
// 1 and 1/2, above, to 0, 1 or infinity; [2^-14, 16) for tanh: below it is x, above 1), about
// 1.4 x 10^9 inputs, on every core. All 2^32 inputs were swept when the polynomial was chosen.
TEST(ACCEL_HOST_MATH_SUITE, ExpTanhAndSigmoidGiveTheScalarFunctionsBitsOnEveryInputOfTheirRange) {
  if (!ACCEL_OWN_F32_EXP) GTEST_SKIP() << "exp, tanh and sigmoid are the C library's here (libmvec's, swept above)";
  struct Range {
    const Case* c;
    uint32_t lo, hi;  // the magnitudes' bit patterns, [lo, hi)
  };
  const Range ranges[] = {{&cases[0], 0x32800000u, 0x43000000u},
                          {&cases[4], 0x38800000u, 0x41800000u},
                          {&cases[5], 0x32800000u, 0x43000000u}};
  constexpr uint32_t kChunk = 1u << 20;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (const Range& range : ranges) {
    const std::string name = range.c->name;
    ASSERT_TRUE(name == "exp" || name == "tanh" || name == "sigmoid");
    std::vector<std::vector<float>> missed(threads);
    std::vector<size_t> differ(threads, 0);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        std::vector<float> in(kChunk), out(kChunk);
        size_t chunk = 0;
        for (uint32_t sign : {0u, 0x80000000u})
          for (uint64_t start = range.lo; start < range.hi; start += kChunk, ++chunk) {
            if (chunk % threads != t) continue;
            const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, range.hi - start));
            for (size_t i = 0; i < n; ++i) {
              const uint32_t u = sign | static_cast<uint32_t>(start + i);
              std::memcpy(&in[i], &u, sizeof u);
            }
            range.c->batch(out.data(), in.data(), n);
            for (size_t i = 0; i < n; ++i)
              if (ulps_apart(out[i], static_cast<float>(range.c->libm(static_cast<double>(in[i])))) != 0 &&
                  ++differ[t] <= 3)
                missed[t].push_back(in[i]);
          }
      });
    for (std::thread& th : pool) th.join();
    size_t total = 0;
    for (unsigned t = 0; t < threads; ++t) {
      total += differ[t];
      for (float x : missed[t])
        ADD_FAILURE() << range.c->name << "(" << x << ") is not the C library's "
                      << static_cast<float>(range.c->libm(static_cast<double>(x)));
    }
    EXPECT_EQ(total, 0u) << range.c->name;
  }
}
