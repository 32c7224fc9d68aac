// The CPU logistic-map loop. Elements go through in blocks: the first step (any int64 input) is
// exact integer arithmetic; later steps (|x| < p) take the fastest exact path the plan allows:
//  - f64: every intermediate is an integer below 2^52, so double arithmetic is exact and vectorises
//    (this file is built with -fno-trapping-math so GCC may if-convert the correction);
//  - int_fast: one Barrett reduction per step, blocks interleaved for instruction-level parallelism;
//  - otherwise the general 128-bit step.
#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_backend.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
// One build runs everywhere; AVX2 machines get the 4-lane clone, picked once at load time.
#define ACCEL_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ACCEL_CPU_CLONES
#endif

namespace accel::cpu {

namespace {

constexpr size_t kBlock = 256;

// `steps` steps on x[0, m), each |x| < p; sign is -1.0 when mu < 0.
ACCEL_CPU_CLONES void f64_steps(double* x, size_t m, double p, double inv_p, double mu, double sign,
                                int64_t steps) {
  // Adding then subtracting 1.5 * 2^52 rounds a non-negative value below 2^51 to the nearest
  // integer in the current (round-to-nearest) mode: the quotient is off by at most one.
  const double round_magic = 6755399441055744.0;
  for (int64_t k = 0; k < steps; ++k) {
    for (size_t j = 0; j < m; ++j) {
      const double v = x[j];
      const double a = mu * (v * v + v);  // exact: below 2^52
      const double q = (a * inv_p + round_magic) - round_magic;
      const double r = a - q * p;  // exact, in (-p, p)
      x[j] = sign * (r < 0 ? r + p : r);
    }
  }
}

void rest_steps(int64_t* x, size_t m, const LogisticMapPlan& plan) {
  const int64_t steps = plan.iterations - 1;
  const accel_lm_params c = plan.exact;
  if (plan.f64_exact) {
    alignas(64) double xd[kBlock];
    for (size_t j = 0; j < m; ++j) xd[j] = static_cast<double>(x[j]);
    f64_steps(xd, m, plan.f64_p, plan.f64_inv_p, plan.f64_mu, c.mu_neg ? -1.0 : 1.0, steps);
    for (size_t j = 0; j < m; ++j) x[j] = static_cast<int64_t>(xd[j]);
  } else if (c.int_fast) {
    for (int64_t k = 0; k < steps; ++k)
      for (size_t j = 0; j < m; ++j) x[j] = accel_lm_step_reduced(x[j], c);
  } else {
    for (int64_t k = 0; k < steps; ++k)
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
      for (size_t j = 0; j < m; ++j) x[j] = accel_lm_step(x[j], plan.exact);
      if (plan.iterations > 1) rest_steps(x, m, plan);
    }
    std::memcpy(out + b * 8, x, m * 8);
  }
}

}  // namespace accel::cpu
