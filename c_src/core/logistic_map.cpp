// Validation and precomputation for the logistic map (see logistic_map.hpp).
#include "core/logistic_map.hpp"

#include <cstring>
#include <string>

#include "core/error.hpp"

namespace accel {

namespace {
using u128 = unsigned __int128;
constexpr u128 kTwo64 = static_cast<u128>(1) << 64;
}  // namespace

LogisticMapPlan plan_logistic_map(int64_t p, int64_t mu, int64_t iterations) {
  if (p < 1) throw ArgumentError("p must be a positive integer, got: " + std::to_string(p));
  if (iterations < 0)
    throw ArgumentError("iterations must be a non-negative integer, got: " + std::to_string(iterations));

  LogisticMapPlan plan;
  plan.p = p;
  plan.mu = mu;
  plan.iterations = iterations;

  const uint64_t up = static_cast<uint64_t>(p);
  // |mu| as unsigned: 0 - (uint64_t)mu is exact for INT64_MIN too.
  const uint64_t mu_abs = mu < 0 ? uint64_t{0} - static_cast<uint64_t>(mu) : static_cast<uint64_t>(mu);
  const uint64_t mu_mod = mu_abs % up;

  accel_lm_params& c = plan.exact;
  c.p = up;
  c.mu_mod = mu_mod;
  // floor(2^64 / p) makes the Barrett quotient at most one short (p >= 2); for p == 1 the
  // largest 64-bit value gives the same guarantee.
  c.barrett = up == 1 ? ~uint64_t{0} : static_cast<uint64_t>(kTwo64 / up);
  c.mu_neg = mu < 0 && mu_mod != 0;
  c.mu_small = static_cast<u128>(mu_mod) * (up - 1) < kTwo64;
  // |x| < p gives x * (x + 1) <= p * (p - 1).
  const u128 xx1_max = static_cast<u128>(up) * (up - 1);
  c.int_fast = up <= 0xFFFFFFFFull && static_cast<u128>(mu_mod) * xx1_max < kTwo64;

  // 2^52 bound with room for the quotient's product q * p; p >= 16 bounds the rounding error of
  // a * (1 / p) to 1/16, so one conditional add corrects the remainder.
  const u128 f64_limit = static_cast<u128>(1) << 52;
  plan.f64_exact = up >= 16 && up <= 0xFFFFFFFFull && static_cast<u128>(mu_mod) * xx1_max + up < f64_limit;
  plan.f64 = {static_cast<double>(up), 1.0 / static_cast<double>(up), static_cast<double>(mu_mod)};
  return plan;
}

int64_t logistic_map_reference(int64_t x, const LogisticMapPlan& plan) {
  for (int64_t i = 0; i < plan.iterations; ++i) x = accel_lm_step(x, plan.exact);
  return x;
}

uint64_t logistic_map_cost(uint64_t elements, const LogisticMapPlan& plan) {
  constexpr uint64_t kGeneral = 40;  // the first step may always take the 128-bit path
  const uint64_t per_step = plan.f64_exact ? 1 : plan.exact.int_fast ? 3 : kGeneral;
  const uint64_t later = plan.iterations > 1 ? static_cast<uint64_t>(plan.iterations) - 1 : 0;
  const u128 per_element = 1 + (plan.iterations > 0 ? kGeneral : 0) + static_cast<u128>(later) * per_step;
  const u128 cost = static_cast<u128>(elements) * per_element;
  return cost > ~uint64_t{0} ? ~uint64_t{0} : static_cast<uint64_t>(cost);
}

accel_params logistic_map_params(const LogisticMapPlan& plan, bool f64, int64_t iterations) {
  accel_params p{};
  const accel_lm_params& c = plan.exact;
  const uint64_t exact[] = {c.p, c.mu_mod, c.barrett, static_cast<uint64_t>(c.mu_neg), static_cast<uint64_t>(c.mu_small),
                            static_cast<uint64_t>(c.int_fast)};
  static_assert(sizeof exact == sizeof p.size);
  std::memcpy(p.size, exact, sizeof exact);
  p.count[0] = plan.f64_exact && f64 ? 1 : 0;
  const double constants[] = {plan.f64.p, plan.f64.inv_p, plan.f64.mu};
  static_assert(sizeof constants == sizeof p.bits);
  std::memcpy(p.bits, constants, sizeof constants);
  p.count[1] = static_cast<uint64_t>(iterations);
  return p;
}

LogisticMapPlan logistic_map_plan_of(const accel_params& params) {
  LogisticMapPlan plan;
  plan.exact = {params.size[0], params.size[1], params.size[2], static_cast<accel_i64>(params.size[3]),
                static_cast<accel_i64>(params.size[4]), static_cast<accel_i64>(params.size[5])};
  plan.p = static_cast<int64_t>(params.size[0]);
  plan.f64_exact = params.count[0] != 0;
  std::memcpy(&plan.f64, params.bits, sizeof plan.f64);
  plan.iterations = static_cast<int64_t>(params.count[1]);
  return plan;
}

}  // namespace accel
