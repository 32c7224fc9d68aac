// The logistic-map math: every path (general, one-reduction, f64, CPU spans) against an independent
// signed 128-bit formulation of rem(mu * x * (x + 1), p), on edge cases and random inputs.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "core/error.hpp"
#include "core/logistic_map.hpp"
#include "test/oracle.hpp"

namespace {

using namespace accel::test;

struct Case {
  int64_t p, mu;
  const char* path;  // which fast path the plan should choose
};

const Case kCases[] = {
    {6700417, 22, "f64"},           {6700417, -22, "f64"},         {61, 22, "f64"},
    {2147483647, 3, "int"},         {2147483647, -3, "int"},       {65537, kMax, "f64"},
    {2305843009213693951LL, 22, "general"},  {kMax, kMin, "general"}, {kMax, kMax, "general"},
    {1, 5, "int"},                  {2, -7, "int"},            {4294967295LL, 1, "int"},
    {15, 22, "int"},                {16, 22, "f64"},               {1000003, kMin, "int"},
};

const char* path_of(const accel::LogisticMapPlan& plan) {
  if (plan.f64_exact) return "f64";
  return plan.exact.int_fast ? "int" : "general";
}

TEST(LogisticMap, KnownValuesFromTheIssue) {
  const auto plan = accel::plan_logistic_map(6700417, 22, 10);
  const int64_t expected[] = {5756693, 3714507, 3456095, 6578590, 2830244, 6018359, 3928136, 3291622, 2592373, 2538985};
  for (int64_t x = 1; x <= 10; ++x) EXPECT_EQ(accel::logistic_map_reference(x, plan), expected[x - 1]) << "x = " << x;
  const auto small = accel::plan_logistic_map(61, 22, 10);
  EXPECT_EQ(accel::logistic_map_reference(1, small), 28);
  EXPECT_EQ(accel::logistic_map_reference(2, small), 25);
  EXPECT_EQ(accel::logistic_map_reference(3, small), 37);
}

TEST(LogisticMap, PlanRejectsMeaninglessParameters) {
  EXPECT_THROW(accel::plan_logistic_map(0, 22, 10), accel::ArgumentError);
  EXPECT_THROW(accel::plan_logistic_map(-5, 22, 10), accel::ArgumentError);
  EXPECT_THROW(accel::plan_logistic_map(61, 22, -1), accel::ArgumentError);
  try {
    accel::plan_logistic_map(-5, 22, 10);
  } catch (const accel::ArgumentError& e) {
    EXPECT_STREQ(e.what(), "p must be a positive integer, got: -5");
  }
  EXPECT_NO_THROW(accel::plan_logistic_map(kMax, kMin, 0));
}

TEST(LogisticMap, PlanChoosesTheExpectedPath) {
  for (const Case& c : kCases) EXPECT_STREQ(path_of(accel::plan_logistic_map(c.p, c.mu, 3)), c.path) << "p = " << c.p << ", mu = " << c.mu;
}

TEST(LogisticMap, SingleStepMatchesOracleOnEdgesAndRandomInputs) {
  for (const Case& c : kCases) {
    const auto plan = accel::plan_logistic_map(c.p, c.mu, 1);
    std::vector<int64_t> xs = edge_inputs(c.p);
    const auto rnd = random_inputs(4000, static_cast<uint64_t>(c.p) ^ static_cast<uint64_t>(c.mu));
    xs.insert(xs.end(), rnd.begin(), rnd.end());
    for (int64_t x : xs) ASSERT_EQ(accel_lm_step(x, plan.exact), oracle_step(x, c.mu, c.p)) << "x=" << x << " p=" << c.p << " mu=" << c.mu;
  }
}

TEST(LogisticMap, ReducedStepMatchesOracleOnItsDomain) {
  for (const Case& c : kCases) {
    const auto plan = accel::plan_logistic_map(c.p, c.mu, 1);
    if (!plan.exact.int_fast) continue;
    std::mt19937_64 rng(7);
    std::vector<int64_t> xs = {0, c.p - 1, 1 - c.p, c.p / 2, -(c.p / 2)};
    for (int i = 0; i < 4000; ++i) xs.push_back(static_cast<int64_t>(rng() % (2 * static_cast<uint64_t>(c.p) - 1)) - (c.p - 1));
    for (int64_t x : xs) ASSERT_EQ(accel_lm_step_reduced(x, plan.exact), oracle_step(x, c.mu, c.p)) << "x=" << x << " p=" << c.p;
  }
}

TEST(LogisticMap, BarrettReductionIsExact) {
  std::mt19937_64 rng(11);
  const uint64_t moduli[] = {1, 2, 3, 7, 16, 6700417, 4294967295ULL, 4294967296ULL, (1ULL << 62) + 1, (1ULL << 63) - 1};
  for (uint64_t p : moduli) {
    const auto plan = accel::plan_logistic_map(static_cast<int64_t>(p), 1, 1);
    const uint64_t specials[] = {0, 1, p - 1, p, p + 1, ~0ULL, ~0ULL - 1, 1ULL << 63, 2 * p - 1};
    for (uint64_t a : specials) ASSERT_EQ(accel_lm_reduce(a, plan.exact), a % p) << "a=" << a << " p=" << p;
    for (int i = 0; i < 20000; ++i) {
      const uint64_t a = rng();
      ASSERT_EQ(accel_lm_reduce(a, plan.exact), a % p) << "a=" << a << " p=" << p;
    }
  }
}

TEST(LogisticMap, CpuSpanMatchesOracleOnEveryPath) {
  for (const Case& c : kCases) {
    for (int64_t iterations : {0, 1, 2, 10}) {
      const auto plan = accel::plan_logistic_map(c.p, c.mu, iterations);
      std::vector<int64_t> xs = edge_inputs(c.p);
      const auto rnd = random_inputs(1000, 99);  // crosses the 256-element block boundary
      xs.insert(xs.end(), rnd.begin(), rnd.end());
      std::vector<int64_t> out(xs.size());
      accel::cpu::logistic_map_span(accel::Int64Source::of_bytes(reinterpret_cast<const unsigned char*>(xs.data()), xs.size()),
                                    reinterpret_cast<unsigned char*>(out.data()), 0, xs.size(), plan);
      for (size_t i = 0; i < xs.size(); ++i)
        ASSERT_EQ(out[i], oracle(xs[i], c.mu, c.p, iterations)) << "x=" << xs[i] << " p=" << c.p << " mu=" << c.mu << " it=" << iterations;
    }
  }
}

TEST(LogisticMap, CpuBackendRangesAndInPlaceBuffersAgree) {
  accel::cpu::CpuBackend backend(3);
  EXPECT_EQ(backend.devices().at(0).type, "cpu");
  const auto plan = accel::plan_logistic_map(6700417, 22, 10);
  // A descending range with a large step crossing zero, and more elements than one chunk.
  const int64_t first = 5000000000LL, step = -123457;
  const size_t n = 100000;
  std::vector<int64_t> out(n);
  backend.logistic_map(accel::Int64Source::of_range(first, step, n), reinterpret_cast<unsigned char*>(out.data()), plan, {});
  std::vector<int64_t> in_place(n);
  for (size_t i = 0; i < n; ++i) in_place[i] = first + static_cast<int64_t>(i) * step;
  auto* bytes = reinterpret_cast<unsigned char*>(in_place.data());
  backend.logistic_map(accel::Int64Source::of_bytes(bytes, n), bytes, plan, {});
  EXPECT_THROW(backend.logistic_map(accel::Int64Source::of_bytes(bytes, n), bytes, plan, {1, 0}), accel::ArgumentError);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], oracle(first + static_cast<int64_t>(i) * step, 22, 6700417, 10)) << "i=" << i;
    ASSERT_EQ(in_place[i], out[i]) << "i=" << i;
  }
}

TEST(LogisticMap, RangeAtTheEndsOfInt64DoesNotOverflow) {
  const auto src = accel::Int64Source::of_range(kMax, -1, 3);
  EXPECT_EQ(src.at(0), kMax);
  EXPECT_EQ(src.at(2), kMax - 2);
  const auto up = accel::Int64Source::of_range(kMin, kMax, 3);  // kMin, -1, kMax - 1
  EXPECT_EQ(up.at(1), -1);
  EXPECT_EQ(up.at(2), kMax - 1);
}

TEST(LogisticMap, CostWeighsThePathAndSaturates) {
  const auto f64 = accel::plan_logistic_map(6700417, 22, 10);
  const auto general = accel::plan_logistic_map(kMax, 22, 10);
  EXPECT_EQ(accel::logistic_map_cost(10, f64), 10u * (1 + 40 + 9));
  EXPECT_EQ(accel::logistic_map_cost(10, general), 10u * (1 + 40 + 9 * 40));
  EXPECT_EQ(accel::logistic_map_cost(10, accel::plan_logistic_map(61, 22, 0)), 10u);
  EXPECT_EQ(accel::logistic_map_cost(~0ULL, accel::plan_logistic_map(61, 22, kMax)), ~0ULL);
}

}  // namespace

namespace {

// Blocks whose inputs all satisfy |x| < 2^26 take the f64 first step; one larger input sends its
// block down the integer path. Both must agree with the oracle, at the boundary too.
TEST(LogisticMap, CpuSpanF64FirstStepAtItsBoundary) {
  constexpr int64_t kLimit = (int64_t{1} << 26) - 1;
  std::mt19937_64 rng(5);
  for (int64_t mu : {22, -22, 99}) {
    const auto plan = accel::plan_logistic_map(6700417, mu, 10);
    ASSERT_TRUE(plan.f64_exact);
    std::vector<int64_t> xs;
    for (int i = 0; i < 2048; ++i) xs.push_back(static_cast<int64_t>(rng() % (2 * kLimit + 1)) - kLimit);
    xs[0] = kLimit;
    xs[1] = -kLimit;
    xs[300] = kLimit + 1;  // second block: integer first step
    xs[600] = -kLimit - 1;  // third block
    std::vector<int64_t> out(xs.size());
    accel::cpu::logistic_map_span(accel::Int64Source::of_bytes(reinterpret_cast<const unsigned char*>(xs.data()), xs.size()),
                                  reinterpret_cast<unsigned char*>(out.data()), 0, xs.size(), plan);
    for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(out[i], oracle(xs[i], mu, 6700417, 10)) << "x=" << xs[i] << " mu=" << mu;
  }
}

}  // namespace
