// A device that faults (core/device_health.hpp): the policy alone (probe, rebuild, fence), then each
// device backend here with a simulated fault on its next command: the call fails with
// device_fault, buffers of the old context with device_lost, and the rebuilt device takes calls;
// a device that stays broken is fenced (device_failed) while a fresh backend's is not.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/device_health.hpp"
#include "core/error.hpp"
#include "test/every_backend.hpp"

namespace {

using accel::DeviceHealth;
using Outcome = accel::DeviceHealth::Outcome;

// The accel::Error `f` throws: its reason and message.
template <typename F>
std::pair<std::string, std::string> error_of(F&& f) {
  try {
    f();
  } catch (const accel::Error& e) {
    return {e.reason(), e.what()};
  }
  return {"(none)", ""};
}

TEST(DeviceHealth, AnErrorThatLeavesTheContextWorkingChangesNothing) {
  DeviceHealth health;
  const auto life = health.life();
  int resets = 0;
  EXPECT_EQ(health.recover("clFinish failed", [&] { ++resets; }, [] { return true; }), Outcome::transient);
  EXPECT_EQ(resets, 0);
  EXPECT_EQ(health.life(), life);
  EXPECT_FALSE(life->lost);
  EXPECT_NO_THROW(health.check_usable([] { return std::string("device 0"); }));
}

TEST(DeviceHealth, AFailedProbeRebuildsTheContextAndLosesTheOldOnesMemory) {
  DeviceHealth health;
  const auto old = health.life();
  old->bytes += 100;
  int probes = 0, resets = 0;
  const Outcome outcome = health.recover("a kernel failed", [&] { ++resets; }, [&] { return ++probes > 1; });
  EXPECT_EQ(outcome, Outcome::rebuilt);
  EXPECT_EQ(resets, 1);
  EXPECT_EQ(probes, 2);
  EXPECT_TRUE(old->lost);
  EXPECT_NE(health.life(), old);
  EXPECT_EQ(health.life()->bytes, 0);  // the new context counts its own
  EXPECT_EQ(health.rebuilds(), 1u);
  const auto lost = error_of([&] { accel::check_alive(*old, "OpenCL", 0); });
  EXPECT_EQ(lost.first, "device_lost");
  EXPECT_NE(lost.second.find("OpenCL device 0"), std::string::npos) << lost.second;
  EXPECT_NO_THROW(accel::check_alive(*health.life(), "OpenCL", 0));
  EXPECT_NO_THROW(health.check_usable([] { return std::string("device 0"); }));
}

TEST(DeviceHealth, ADeviceThatStaysBrokenIsFencedWithTheFaultNamed) {
  for (bool reset_throws : {false, true}) {
    DeviceHealth health;
    const Outcome outcome = health.recover(
        "cudaStreamSynchronize failed with cudaErrorIllegalAddress",
        [&] {
          if (reset_throws) throw accel::Error("cuda_error", "no context");
        },
        [] { return false; });
    EXPECT_EQ(outcome, Outcome::fenced);
    EXPECT_TRUE(health.fenced());
    const auto failed = error_of([&] { health.check_usable([] { return std::string("CUDA device 0 (H100)"); }); });
    EXPECT_EQ(failed.first, "device_failed");
    EXPECT_NE(failed.second.find("CUDA device 0 (H100) failed (cudaStreamSynchronize failed with cudaErrorIllegalAddress)"),
              std::string::npos)
        << failed.second;
  }
}

TEST(DeviceHealth, AProbeThatThrowsCountsAsFailed) {
  DeviceHealth health;
  EXPECT_EQ(health.recover("x", [] {}, [] () -> bool { throw accel::Error("opencl_error", "lost"); }), Outcome::fenced);
}

TEST(DeviceHealth, SimulatedFaultsFailOneCommandAndTheProbesTheyName) {
  DeviceHealth health;
  EXPECT_FALSE(health.take_simulated_failure());
  health.simulate(DeviceHealth::Simulated::context_lost);
  EXPECT_TRUE(health.take_simulated_failure());
  EXPECT_FALSE(health.take_simulated_failure());  // once
  EXPECT_EQ(health.recover("x", [] {}, [] { return true; }), Outcome::rebuilt);
  health.simulate(DeviceHealth::Simulated::permanent);
  EXPECT_EQ(health.recover("x", [] {}, [] { return true; }), Outcome::fenced);
}

// ---- the device backends, with a simulated fault ----

class FaultTest : public accel::test::EveryBackend {
 protected:
  void SetUp() override {
    if (GetParam() == "cpu") GTEST_SKIP() << "the CPU backend has no device context";
    EveryBackend::SetUp();
  }

  std::shared_ptr<accel::DeviceBuffer> filled(const std::vector<int64_t>& values) {
    auto buffer = backend_->allocate(0, values.size() * 8);
    backend_->upload(*buffer, values.data());
    return buffer;
  }

  std::vector<int64_t> read(const accel::DeviceBuffer& buffer) {
    std::vector<int64_t> out(buffer.bytes() / 8);
    backend_->download(buffer, out.data(), buffer.bytes());
    return out;
  }
};

TEST_P(FaultTest, TheFaultingCallFailsAndTheRebuiltDeviceTakesCalls) {
  const std::vector<int64_t> values{1, 2, 3, 4};
  auto before = filled(values);
  const int64_t bytes_before = backend_->allocated_bytes(0);
  EXPECT_GE(bytes_before, 32);

  backend_->simulate_fault(0, 1);
  const auto fault = error_of([&] { read(*before); });
  EXPECT_EQ(fault.first, "device_fault");
  EXPECT_NE(fault.second.find("simulated fault"), std::string::npos) << fault.second;
  EXPECT_NE(fault.second.find("context was rebuilt"), std::string::npos) << fault.second;

  // the old context's buffer is lost, and no longer counted; new ones work
  EXPECT_EQ(error_of([&] { read(*before); }).first, "device_lost");
  EXPECT_EQ(backend_->allocated_bytes(0), 0);
  auto after = filled(values);
  EXPECT_EQ(read(*after), values);
  before.reset();  // dropping a lost buffer is safe
  EXPECT_EQ(backend_->allocated_bytes(0), 32);

  // streamed calls run in the new context
  const std::vector<int64_t> xs{5, 6, 7};
  std::vector<int64_t> out(xs.size());
  backend_->logistic_map(accel::Int64Source::of_bytes(reinterpret_cast<const unsigned char*>(xs.data()), xs.size()),
                         reinterpret_cast<unsigned char*>(out.data()), accel::plan_logistic_map(6700417, 22, 1), {});
  EXPECT_EQ(out[0], 22 * 5 * 6 % 6700417);
}

TEST_P(FaultTest, AStreamedCallThatMeetsAFaultFailsAndTheNextOneRuns) {
  std::vector<int64_t> xs(100000, 3), out(xs.size());
  const auto source = accel::Int64Source::of_bytes(reinterpret_cast<const unsigned char*>(xs.data()), xs.size());
  const auto plan = accel::plan_logistic_map(6700417, 22, 1);
  backend_->simulate_fault(0, 1);
  EXPECT_EQ(error_of([&] { backend_->logistic_map(source, reinterpret_cast<unsigned char*>(out.data()), plan, {0, 10000}); })
                .first,
            "device_fault");
  backend_->logistic_map(source, reinterpret_cast<unsigned char*>(out.data()), plan, {0, 10000});
  EXPECT_EQ(out.back(), 22 * 3 * 4);
}

TEST_P(FaultTest, ADeviceThatStaysBrokenIsFencedAndAFreshBackendsIsNot) {
  auto buffer = filled({1});
  EXPECT_TRUE(backend_->fenced_devices().empty());
  backend_->simulate_fault(0, 2);
  const auto fault = error_of([&] { read(*buffer); });
  EXPECT_EQ(fault.first, "device_fault");
  EXPECT_NE(fault.second.find("could not be rebuilt"), std::string::npos) << fault.second;
  for (int i = 0; i < 2; ++i) {
    const auto failed = error_of([&] { backend_->allocate(0, 8); });
    EXPECT_EQ(failed.first, "device_failed");
    EXPECT_NE(failed.second.find("until the VM restarts"), std::string::npos) << failed.second;
  }
  buffer.reset();
  EXPECT_EQ(backend_->fenced_devices(), std::vector<int>{0});
  EXPECT_FALSE(backend_->devices().empty());  // still listed

  EveryBackend::SetUp();  // a new backend object: its device state is its own
  EXPECT_EQ(read(*filled({7, 8})), (std::vector<int64_t>{7, 8}));
}

INSTANTIATE_TEST_SUITE_P(DeviceBackends, FaultTest, ::testing::Values("opencl", "cuda"));

}  // namespace
