// The CPU logistic-map loop. Elements go through in blocks of 256, taking the fastest exact path
// the plan allows:
//  - f64 (plan.f64_exact): every intermediate of a step is an integer below 2^52, so double
//    arithmetic is exact and vectorises. The first step also runs in f64 when a block's inputs all
//    satisfy |x| < 2^26 (then x * (x + 1) < 2^52); otherwise it is the exact integer step.
//  - int_fast: one Barrett reduction per step, elements of a block interleaved for parallelism;
//  - otherwise the general 128-bit step (kernels/logistic_map.h).
// This file is built with -fno-trapping-math so GCC may if-convert (vectorise) the correction.
#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_backend.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#define ACCEL_X86_DISPATCH 1
#else
#define ACCEL_X86_DISPATCH 0
#endif

namespace accel::cpu {

namespace {

constexpr size_t kBlock = 256;
constexpr int64_t kF64FirstStepLimit = (int64_t{1} << 26) - 1;  // |x| <= this: x * (x + 1) < 2^52

struct F64Consts {
  double p, inv_p, mu;
};

// a mod p for an integer-valued 0 <= a < 2^52. The rounded quotient is off by at most one (p >= 16
// bounds the error of a * (1 / p) to 1/16), and q * p < 2^53 is exact, so one conditional add fixes
// the remainder. kRoundInsn: round with an instruction (SSE4.1 and later); otherwise by adding and
// subtracting 1.5 * 2^52, which rounds to nearest in the default rounding mode.
template <bool kRoundInsn>
__attribute__((always_inline)) inline double reduce_f64(double a, const F64Consts& c) {
  double q;
  if constexpr (kRoundInsn) {
    q = __builtin_nearbyint(a * c.inv_p);
  } else {
    constexpr double kRoundMagic = 6755399441055744.0;
    q = (a * c.inv_p + kRoundMagic) - kRoundMagic;
  }
  const double r = a - q * c.p;
  return r < 0 ? r + c.p : r;
}

template <bool kRoundInsn, bool kNeg>
__attribute__((always_inline)) inline void f64_block(double* x, size_t m, const F64Consts& c, bool first,
                                                     int64_t steps) {
  auto sign = [](double r) { return kNeg ? -r : r; };
  if (first) {
    for (size_t j = 0; j < m; ++j) x[j] = sign(reduce_f64<kRoundInsn>(c.mu * reduce_f64<kRoundInsn>(x[j] * x[j] + x[j], c), c));
  }
  for (int64_t k = 0; k < steps; ++k) {
    for (size_t j = 0; j < m; ++j) {
      const double v = x[j];
      x[j] = sign(reduce_f64<kRoundInsn>(c.mu * (v * v + v), c));
    }
  }
}

using F64BlockFn = void (*)(double*, size_t, const F64Consts&, bool, int64_t);

void f64_block_generic_pos(double* x, size_t m, const F64Consts& c, bool first, int64_t steps) {
  f64_block<false, false>(x, m, c, first, steps);
}
void f64_block_generic_neg(double* x, size_t m, const F64Consts& c, bool first, int64_t steps) {
  f64_block<false, true>(x, m, c, first, steps);
}

#if ACCEL_X86_DISPATCH
// 4 lanes, FMA contraction and vroundpd: ~2x the SSE2 baseline. Picked at run time.
__attribute__((target("avx2,fma"))) void f64_block_avx2_pos(double* x, size_t m, const F64Consts& c, bool first,
                                                           int64_t steps) {
  f64_block<true, false>(x, m, c, first, steps);
}
__attribute__((target("avx2,fma"))) void f64_block_avx2_neg(double* x, size_t m, const F64Consts& c, bool first,
                                                           int64_t steps) {
  f64_block<true, true>(x, m, c, first, steps);
}
#endif

F64BlockFn pick_f64_block(bool neg) {
#if ACCEL_X86_DISPATCH
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2) return neg ? f64_block_avx2_neg : f64_block_avx2_pos;
#endif
  return neg ? f64_block_generic_neg : f64_block_generic_pos;
}

bool fits_f64_first_step(const int64_t* x, size_t m) {
  bool ok = true;
  for (size_t j = 0; j < m; ++j)  // |x| <= 2^26 - 1, as a wrap-safe unsigned compare
    ok &= static_cast<uint64_t>(x[j]) + kF64FirstStepLimit <= static_cast<uint64_t>(2 * kF64FirstStepLimit);
  return ok;
}

void f64_steps(int64_t* x, size_t m, const LogisticMapPlan& plan) {
  static_assert(kBlock <= 256, "the scratch array below is sized for one block");
  const F64Consts c{plan.f64_p, plan.f64_inv_p, plan.f64_mu};
  const F64BlockFn block = pick_f64_block(plan.exact.mu_neg != 0);
  const bool first_in_f64 = fits_f64_first_step(x, m);
  if (!first_in_f64)
    for (size_t j = 0; j < m; ++j) x[j] = accel_lm_step(x[j], plan.exact);
  alignas(64) double xd[kBlock];
  for (size_t j = 0; j < m; ++j) xd[j] = static_cast<double>(x[j]);
  block(xd, m, c, first_in_f64, plan.iterations - 1);
  for (size_t j = 0; j < m; ++j) x[j] = static_cast<int64_t>(xd[j]);
}

void integer_steps(int64_t* x, size_t m, const LogisticMapPlan& plan) {
  const accel_lm_params c = plan.exact;
  for (size_t j = 0; j < m; ++j) x[j] = accel_lm_step(x[j], c);
  if (c.int_fast) {
    for (int64_t k = 1; k < plan.iterations; ++k)
      for (size_t j = 0; j < m; ++j) x[j] = accel_lm_step_reduced(x[j], c);
  } else {
    for (int64_t k = 1; k < plan.iterations; ++k)
      for (size_t j = 0; j < m; ++j) x[j] = accel_lm_step(x[j], c);
  }
}

}  // namespace

void logistic_map_span(const Int64Source& in, unsigned char* out, size_t begin, size_t end,
                       const LogisticMapPlan& plan) {
  alignas(64) int64_t x[kBlock];
  for (size_t b = begin; b < end; b += kBlock) {
    const size_t m = std::min(kBlock, end - b);
    if (in.kind == Int64Source::Kind::Bytes) {
      std::memcpy(x, in.bytes + b * 8, m * 8);
    } else {
      for (size_t j = 0; j < m; ++j) x[j] = in.at(b + j);
    }
    if (plan.iterations > 0) {
      if (plan.f64_exact) {
        f64_steps(x, m, plan);
      } else {
        integer_steps(x, m, plan);
      }
    }
    std::memcpy(out + b * 8, x, m * 8);
  }
}

}  // namespace accel::cpu
