// The fixture the per-backend GoogleTest suites share: one test per compiled backend ("cpu",
// "opencl", "cuda"), each skipped with the backend's own reason where it is not usable here.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "backends/opencl/opencl_backend.hpp"

namespace accel::test {

class EveryBackend : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& name = GetParam();
    if (name == "cpu") backend_ = std::make_unique<cpu::CpuBackend>(2);
    else if (name == "cuda") backend_ = cuda::make_backend();
    else backend_ = opencl::make_backend();
    const BackendStatus status = backend_->status();
    if (!status.available) GTEST_SKIP() << name << " unavailable: " << status.detail;
  }

  std::unique_ptr<Backend> backend_;
};

}  // namespace accel::test
