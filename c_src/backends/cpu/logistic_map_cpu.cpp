// The CPU logistic-map loop. Elements go through in blocks of 256, taking the fastest exact path
// the plan allows:
//  - f64 (plan.f64_exact, kernels/logistic_map.h): exact double arithmetic that vectorises. The first
//    step also runs in f64 when a block's inputs all satisfy |x| < 2^26; otherwise it is the exact
//    integer step.
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

// The f64 steps of kernels/logistic_map.h over a block, in loops GCC vectorises: one step for every
// element, then the next (the elements are independent, the steps of one element are not).
template <bool kNeg>
__attribute__((always_inline)) inline void f64_block(double* x, size_t m, accel_lm_f64 f, bool first, int64_t steps) {
  auto sign = [](double r) { return kNeg ? -r : r; };
  if (first) {
    for (size_t j = 0; j < m; ++j) x[j] = sign(accel_lm_first_step_f64(x[j], f));
  }
  for (int64_t k = 0; k < steps; ++k) {
    for (size_t j = 0; j < m; ++j) x[j] = sign(accel_lm_step_f64(x[j], f));
  }
}

using F64BlockFn = void (*)(double*, size_t, accel_lm_f64, bool, int64_t);

void f64_block_generic_pos(double* x, size_t m, accel_lm_f64 f, bool first, int64_t steps) {
  f64_block<false>(x, m, f, first, steps);
}
void f64_block_generic_neg(double* x, size_t m, accel_lm_f64 f, bool first, int64_t steps) {
  f64_block<true>(x, m, f, first, steps);
}

#if ACCEL_X86_DISPATCH
// 4 lanes, vroundpd and FMA contraction: ~2x the baseline build. Picked at run time.
__attribute__((target("avx2,fma"))) void f64_block_avx2_pos(double* x, size_t m, accel_lm_f64 f, bool first,
                                                           int64_t steps) {
  f64_block<false>(x, m, f, first, steps);
}
__attribute__((target("avx2,fma"))) void f64_block_avx2_neg(double* x, size_t m, accel_lm_f64 f, bool first,
                                                           int64_t steps) {
  f64_block<true>(x, m, f, first, steps);
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
  constexpr uint64_t kLimit = ACCEL_LM_F64_FIRST_LIMIT;
  bool ok = true;
  for (size_t j = 0; j < m; ++j) ok &= static_cast<uint64_t>(x[j]) + kLimit <= 2 * kLimit;  // wrap-safe |x| <= limit
  return ok;
}

// Steps are taken in slices of this many so that a cancelled call stops within milliseconds even
// when one block alone has years of work (iterations is any int64).
constexpr int64_t kStepsPerCheck = 4096;

bool stop(const Cancellation* cancel) { return cancel != nullptr && cancel->cancelled(); }

void f64_steps(int64_t* x, size_t m, const LogisticMapPlan& plan, const Cancellation* cancel) {
  const F64BlockFn block = pick_f64_block(plan.exact.mu_neg != 0);
  const bool first_in_f64 = fits_f64_first_step(x, m);
  if (!first_in_f64)
    for (size_t j = 0; j < m; ++j) x[j] = accel_lm_step(x[j], plan.exact);
  alignas(64) double xd[kBlock];
  for (size_t j = 0; j < m; ++j) xd[j] = static_cast<double>(x[j]);
  bool first = first_in_f64;
  for (int64_t left = plan.iterations - 1; (left > 0 || first) && !stop(cancel);) {
    const int64_t steps = std::min(left, kStepsPerCheck);
    block(xd, m, plan.f64, first, steps);
    first = false;
    left -= steps;
  }
  for (size_t j = 0; j < m; ++j) x[j] = static_cast<int64_t>(xd[j]);
}

void integer_steps(int64_t* x, size_t m, const LogisticMapPlan& plan, const Cancellation* cancel) {
  const accel_lm_params c = plan.exact;
  for (size_t j = 0; j < m; ++j) x[j] = accel_lm_step(x[j], c);
  for (int64_t k = 1; k < plan.iterations; ++k) {
    if (k % kStepsPerCheck == 0 && stop(cancel)) return;
    if (c.int_fast) {
      for (size_t j = 0; j < m; ++j) x[j] = accel_lm_step_reduced(x[j], c);
    } else {
      for (size_t j = 0; j < m; ++j) x[j] = accel_lm_step(x[j], c);
    }
  }
}

}  // namespace

void logistic_map_span(const Int64Source& in, unsigned char* out, size_t begin, size_t end,
                       const LogisticMapPlan& plan, const Cancellation* cancel) {
  alignas(64) int64_t x[kBlock];
  for (size_t b = begin; b < end && !stop(cancel); b += kBlock) {
    const size_t m = std::min(kBlock, end - b);
    if (in.kind == Int64Source::Kind::Bytes) {
      std::memcpy(x, in.bytes + b * 8, m * 8);
    } else {
      for (size_t j = 0; j < m; ++j) x[j] = in.at(b + j);
    }
    if (plan.iterations > 0) {
      if (plan.f64_exact) {
        f64_steps(x, m, plan, cancel);
      } else {
        integer_steps(x, m, plan, cancel);
      }
    }
    std::memcpy(out + b * 8, x, m * 8);
  }
}

}  // namespace accel::cpu
