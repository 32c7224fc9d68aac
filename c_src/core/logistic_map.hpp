// Validated parameters of a logistic-map call and the constants every backend needs, computed once
// per call. Checks on the *meaning* of p, mu and iterations live here, where GoogleTest reaches them.
#pragma once

#include <cstdint>

#include "kernels/launch.h"
#include "kernels/logistic_map.h"

namespace accel {

struct LogisticMapPlan {
  int64_t p = 0;
  int64_t mu = 0;
  int64_t iterations = 0;
  accel_lm_params exact{};  // integer constants shared by every backend's kernel

  // The f64 path (kernels/logistic_map.h) is exact for this call: every intermediate value of a
  // step from |x| < p stays below 2^52 and p >= 16.
  bool f64_exact = false;
  accel_lm_f64 f64{};
};

// Throws accel::ArgumentError unless p >= 1 and iterations >= 0; every mu is accepted.
LogisticMapPlan plan_logistic_map(int64_t p, int64_t mu, int64_t iterations);

// Reference definition, element by element, with no fast path: what the other paths are tested against.
int64_t logistic_map_reference(int64_t x, const LogisticMapPlan& plan);

// Rough cost of a call in units of one f64 element-step (~0.5-1 ns), saturating; the other paths
// weigh more (measured: a 128-bit step costs ~40 units). Used to choose the scheduler.
uint64_t logistic_map_cost(uint64_t elements, const LogisticMapPlan& plan);

// The plan as the launch door's accel_logistic_map kernel reads it (kernels/tensor_kernels.h):
// its constants, the f64 path where `f64` (the device has doubles) and the plan allows it, and
// `iterations` for one launch. The caller sets n and, to generate a range, count[2] and shape[0..1].
accel_params logistic_map_params(const LogisticMapPlan& plan, bool f64, int64_t iterations);
// And back: the plan a launch's params describe (the CPU backend runs the kernel as its own loop).
LogisticMapPlan logistic_map_plan_of(const accel_params& params);

}  // namespace accel
