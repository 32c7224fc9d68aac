// A backend that is not there: reports why, lists no devices, refuses calls with an ArgumentError.
// Stands in for OpenCL and CUDA in builds without them, and for a plugin that could not be loaded.
#pragma once

#include <memory>
#include <string>

#include "core/backend.hpp"
#include "core/error.hpp"

namespace accel {

class AbsentBackend final : public Backend {
 public:
  AbsentBackend(std::string name, bool compiled, std::string why)
      : name_(std::move(name)), compiled_(compiled), why_(std::move(why)) {}

  BackendStatus status() override { return {name_, compiled_, false, why_}; }
  std::vector<DeviceInfo> devices() override { return {}; }
  bool waits_on_device() const override { return true; }
  void logistic_map(const Int64Source&, unsigned char*, const LogisticMapPlan&, const CallOptions&) override {
    throw ArgumentError("backend :" + name_ + " is " + (compiled_ ? "unavailable: " : "") + why_);
  }

 private:
  std::string name_;
  bool compiled_;
  std::string why_;
};

}  // namespace accel
