// The same logistic-map cases on every compiled backend, against the oracle: byte and range
// sources, in place, forced chunking, device index checks. A backend that is not usable on this
// machine is skipped with its reason.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "core/error.hpp"
#include "test/every_backend.hpp"
#include "test/oracle.hpp"

namespace {

using namespace accel::test;

class BackendTest : public EveryBackend {
 protected:
  std::vector<int64_t> run(const accel::Int64Source& src, const accel::LogisticMapPlan& plan, size_t chunk = 0) {
    std::vector<int64_t> out(src.count);
    backend_->logistic_map(src, reinterpret_cast<unsigned char*>(out.data()), plan, {0, chunk});
    return out;
  }
};

TEST_P(BackendTest, ReportsItsDevices) {
  const auto devices = backend_->devices();
  ASSERT_FALSE(devices.empty());
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].backend, GetParam());
    EXPECT_EQ(devices[i].index, static_cast<int>(i));
    EXPECT_FALSE(devices[i].name.empty());
    EXPECT_GT(devices[i].memory, 0u);
    EXPECT_GT(devices[i].max_alloc, 0u);
    EXPECT_GT(devices[i].compute_units, 0u);
  }
}

TEST_P(BackendTest, MatchesTheOracleOnEveryPath) {
  const int64_t params[][2] = {{6700417, 22}, {6700417, -22}, {2147483647, 3}, {kMax, kMin}, {(1LL << 61) - 1, 22}, {1, 5}};
  for (const auto& pm : params) {
    for (int64_t iterations : {0, 1, 10}) {
      const auto plan = accel::plan_logistic_map(pm[0], pm[1], iterations);
      std::vector<int64_t> xs = edge_inputs(pm[0]);
      const auto rnd = random_inputs(3000, 17);
      xs.insert(xs.end(), rnd.begin(), rnd.end());
      const auto out = run(accel::Int64Source::of_bytes(reinterpret_cast<const unsigned char*>(xs.data()), xs.size()), plan);
      for (size_t i = 0; i < xs.size(); ++i)
        ASSERT_EQ(out[i], oracle(xs[i], pm[1], pm[0], iterations)) << "x=" << xs[i] << " p=" << pm[0] << " mu=" << pm[1];
    }
  }
}

TEST_P(BackendTest, RangesAreGeneratedOnTheBackend) {
  const auto plan = accel::plan_logistic_map(6700417, 22, 10);
  const int64_t first = kMax - 5 * 1000003, step = -1000003;  // descending from near the top of int64
  const size_t n = 70001;
  const auto out = run(accel::Int64Source::of_range(first, step, n), plan);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], oracle(first + static_cast<int64_t>(i) * step, 22, 6700417, 10)) << i;
}

TEST_P(BackendTest, ForcedChunksGiveTheUnchunkedResult) {
  const auto plan = accel::plan_logistic_map(6700417, -22, 5);
  std::vector<int64_t> xs = random_inputs(10007, 3);
  const auto src = accel::Int64Source::of_bytes(reinterpret_cast<const unsigned char*>(xs.data()), xs.size());
  const auto whole = run(src, plan);
  for (size_t chunk : {1, 7, 1000, 10006, 10007, 10008}) EXPECT_EQ(run(src, plan, chunk), whole) << "chunk " << chunk;
  const auto range = accel::Int64Source::of_range(-5000, 3, 4001);
  EXPECT_EQ(run(range, plan, 13), run(range, plan));
}

TEST_P(BackendTest, CallsSplitIntoSeveralLaunchesGiveTheSameResult) {
  // Enough iterations that a device runs each chunk as several bounded launches (chunk_plan.hpp),
  // on the f64 path and on the 128-bit path; the CPU backend is the reference.
  accel::cpu::CpuBackend reference(2);
  for (const auto& [p, elements] : {std::pair<int64_t, size_t>{6700417, 100000}, {(int64_t{1} << 62) + 135, 2000}}) {
    const auto plan = accel::plan_logistic_map(p, 22, 1000);
    const auto range = accel::Int64Source::of_range(1, 1, elements);
    std::vector<int64_t> expected(elements);
    reference.logistic_map(range, reinterpret_cast<unsigned char*>(expected.data()), plan, {});
    EXPECT_EQ(run(range, plan), expected) << "p = " << p;
  }
}

TEST_P(BackendTest, ACancelledCallStopsAndSaysSo) {
  // 2^40 iterations per element would take hours, so only cancellation ends this call. The CPU
  // backend checks between slices of steps; device backends between launches of bounded work (a
  // kernel cannot be interrupted), even within one chunk.
  const auto plan = accel::plan_logistic_map(6700417, 22, int64_t{1} << 40);
  accel::Cancellation cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancel.cancel();
  });
  std::vector<int64_t> out(1000);
  try {
    backend_->logistic_map(accel::Int64Source::of_range(1, 1, out.size()), reinterpret_cast<unsigned char*>(out.data()), plan,
                           {0, 0, &cancel});
    ADD_FAILURE() << "the call was not cancelled";
  } catch (const accel::Error& e) {
    EXPECT_EQ(e.reason(), "cancelled");
  }
  canceller.join();
}

TEST_P(BackendTest, WorksInPlaceAndOnEmptyInput) {
  const auto plan = accel::plan_logistic_map(61, 22, 10);
  std::vector<int64_t> xs = {1, 2, 3};
  auto* bytes = reinterpret_cast<unsigned char*>(xs.data());
  backend_->logistic_map(accel::Int64Source::of_bytes(bytes, 3), bytes, plan, {});
  EXPECT_EQ(xs, (std::vector<int64_t>{28, 25, 37}));
  EXPECT_TRUE(run(accel::Int64Source::of_bytes(nullptr, 0), plan).empty());
}

TEST_P(BackendTest, RejectsDevicesThatDoNotExist) {
  const auto plan = accel::plan_logistic_map(61, 22, 1);
  int64_t x = 1;
  const auto src = accel::Int64Source::of_bytes(reinterpret_cast<const unsigned char*>(&x), 1);
  const int missing = static_cast<int>(backend_->devices().size());
  EXPECT_THROW(backend_->logistic_map(src, reinterpret_cast<unsigned char*>(&x), plan, {missing, 0}), accel::ArgumentError);
  EXPECT_THROW(backend_->logistic_map(src, reinterpret_cast<unsigned char*>(&x), plan, {-1, 0}), accel::ArgumentError);
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, BackendTest, ::testing::Values("cpu", "opencl", "cuda"),
                         [](const auto& info) { return info.param; });

TEST(OpenClBackend, BuildsItsProgramOncePerDevice) {
  auto backend = accel::opencl::make_backend();
  if (!backend->status().available) GTEST_SKIP() << backend->status().detail;
  const uint64_t before = accel::opencl::program_builds();
  int64_t xs[3] = {1, 2, 3};
  auto* bytes = reinterpret_cast<unsigned char*>(xs);
  for (int64_t iterations : {1, 10, 3})  // parameters are kernel arguments, not build options
    backend->logistic_map(accel::Int64Source::of_bytes(bytes, 3), bytes, accel::plan_logistic_map(61, 22, iterations), {});
  EXPECT_EQ(accel::opencl::program_builds() - before, 1u);
}

// Host side of the CUDA backend: with no driver or device (this build machine, CI) it must report
// why, and refuse calls with an ArgumentError, never crash.
TEST(CudaBackend, WithoutADeviceItSaysWhyAndRefusesCalls) {
  auto backend = accel::cuda::make_backend();
  const auto status = backend->status();
  EXPECT_EQ(status.name, "cuda");
  EXPECT_FALSE(status.detail.empty());
#ifdef ACCEL_WITH_CUDA
  EXPECT_TRUE(status.compiled);
#else
  EXPECT_FALSE(status.compiled);
#endif
  if (status.available) GTEST_SKIP() << "a CUDA device is present: " << status.detail;
  EXPECT_TRUE(backend->devices().empty());
  int64_t x = 1;
  auto* bytes = reinterpret_cast<unsigned char*>(&x);
  try {
    backend->logistic_map(accel::Int64Source::of_bytes(bytes, 1), bytes, accel::plan_logistic_map(61, 22, 1), {});
    FAIL() << "a call without a device succeeded";
  } catch (const accel::ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("backend :cuda is"), std::string::npos) << e.what();
  }
}

#ifdef ACCEL_WITH_OPENCL
// The NIF gets the OpenCL backend from the plugin: a missing plugin (or ICD loader) must leave a
// backend that says why, and the real plugin must give the same backend as linking it directly.
TEST(OpenClPlugin, LoadsOrSaysWhyNot) {
  const auto missing = accel::opencl::load_backend("/nonexistent")->status();
  EXPECT_TRUE(missing.compiled);
  EXPECT_FALSE(missing.available);
  EXPECT_NE(missing.detail.find("the OpenCL plugin could not be loaded"), std::string::npos) << missing.detail;

  auto plugin = accel::opencl::load_backend(ACCEL_PLUGIN_DIR);
  const auto status = plugin->status();
  EXPECT_EQ(status.available, accel::opencl::make_backend()->status().available) << status.detail;
  if (!status.available) GTEST_SKIP() << status.detail;
  int64_t xs[3] = {1, 2, 3};
  auto* bytes = reinterpret_cast<unsigned char*>(xs);
  plugin->logistic_map(accel::Int64Source::of_bytes(bytes, 3), bytes, accel::plan_logistic_map(61, 22, 10), {});
  EXPECT_EQ(xs[0], 28);
  EXPECT_EQ(xs[2], 37);
  // An error thrown inside the plugin is caught here by type, as the NIF's boundary catches it.
  EXPECT_THROW(plugin->logistic_map(accel::Int64Source::of_bytes(bytes, 3), bytes, accel::plan_logistic_map(61, 22, 1), {7, 0}),
               accel::ArgumentError);
}
#endif

TEST(OpenClBackend, StatusSaysWhetherItIsCompiledIn) {
  const auto status = accel::opencl::make_backend()->status();
  EXPECT_EQ(status.name, "opencl");
#ifdef ACCEL_WITH_OPENCL
  EXPECT_TRUE(status.compiled);
#else
  EXPECT_FALSE(status.compiled);
  EXPECT_FALSE(status.available);
#endif
  EXPECT_FALSE(status.detail.empty());
}

}  // namespace
