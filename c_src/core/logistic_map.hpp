// Validated parameters of a logistic-map call and the constants every backend needs, computed once
// per call. Checks on the *meaning* of p, mu and iterations live here, where GoogleTest reaches them.
#pragma once

#include <cstdint>

#include "kernels/logistic_map.h"

namespace accel {

struct LogisticMapPlan {
  int64_t p = 0;
  int64_t mu = 0;
  int64_t iterations = 0;
  accel_lm_params exact{};  // integer constants shared by every backend's kernel

  // Exact double-precision path (CPU backend): valid once |x| < p when every intermediate value of a
  // step stays below 2^52, so additions and products are exact and the rounded quotient is off by at
  // most one; see backends/cpu/logistic_map_cpu.cpp.
  bool f64_exact = false;
  double f64_p = 0, f64_inv_p = 0, f64_mu = 0;
};

// Throws accel::ArgumentError unless p >= 1 and iterations >= 0; every mu is accepted.
LogisticMapPlan plan_logistic_map(int64_t p, int64_t mu, int64_t iterations);

// Reference definition, element by element, with no fast path: what the other paths are tested against.
int64_t logistic_map_reference(int64_t x, const LogisticMapPlan& plan);

// Rough cost of a call in units of one f64 element-step (~0.5-1 ns), saturating; the other paths
// weigh more (measured: a 128-bit step costs ~40 units). Used to choose the scheduler.
uint64_t logistic_map_cost(uint64_t elements, const LogisticMapPlan& plan);

}  // namespace accel
