// What the device backends (OpenCL, CUDA) share: devices discovered once on first use, the status
// Accel.backends/0 reports, the device list, lookup by index with the reason when there is none,
// and the logistic map and generated kernels over host memory, streamed through the launch door
// (core/device_stream.hpp). A backend
// supplies its per-device State (holding a DeviceInfo `info`), discovery, how a device is
// described in its status, and the door.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/device_health.hpp"
#include "core/device_stream.hpp"
#include "core/error.hpp"

namespace accel {

template <typename State>
class DeviceBackend : public Backend {
 public:
  BackendStatus status() override {
    discover();
    if (devices_.empty()) return {name(), true, false, unavailable_};
    std::string detail;
    for (const auto& d : devices_) {
      if (!detail.empty()) detail += "; ";
      detail += describe(d->info);
    }
    return {name(), true, true, detail};
  }

  std::vector<DeviceInfo> devices() override {
    discover();
    std::vector<DeviceInfo> out;
    for (const auto& d : devices_) out.push_back(d->info);
    return out;
  }

  bool waits_on_device() const override { return true; }

  void set_staging(StagingMode mode) override { staging_mode_ = mode; }

  // One streamed call at a time per device, as its buffers are sized for: calls queue here, while
  // tensor operations go on between their commands.
  void logistic_map(const Int64Source& in, unsigned char* out, const LogisticMapPlan& plan,
                    const CallOptions& options) final {
    const DeviceInfo& info = device_at(options.device).info;
    std::lock_guard<std::mutex> lock(streaming_[static_cast<size_t>(options.device)]);
    stream_logistic_map(*this, info, in, out, plan, options);
  }

  std::vector<int> fenced_devices() final {
    std::vector<int> out;
    if (!discovered_flag_.load(std::memory_order_acquire)) return out;
    for (const auto& d : devices_)
      if (d->health.fenced()) out.push_back(d->info.index);
    return out;
  }

  void simulate_fault(int device, int kind) final {
    device_at(device).health.simulate(kind == 2 ? DeviceHealth::Simulated::permanent : DeviceHealth::Simulated::context_lost);
  }

  bool map_source(const SourceKernel& kernel, const std::vector<const unsigned char*>& inputs, uint64_t n,
                  const std::vector<uint64_t>& scalars, unsigned char* out, const CallOptions& options) final {
    const DeviceInfo& info = device_at(options.device).info;
    std::lock_guard<std::mutex> lock(streaming_[static_cast<size_t>(options.device)]);
    return stream_source_kernel(*this, info, kernel, inputs, n, scalars, out, options);
  }

 protected:
  virtual std::string name() const = 0;
  virtual std::string describe(const DeviceInfo& info) const = 0;
  // Appends every usable device; returns why there is none (used only when none was found).
  virtual std::string find_devices(std::vector<std::unique_ptr<State>>& out) = 0;

  // Whether a transfer of `bytes` from or into host memory that is (`pinned`) or is not page-locked
  // goes through the device's staging slots (core/staging.hpp).
  bool staged(int device, bool pinned, size_t bytes) { return stage(staging_mode_, device_at(device).info.type, pinned, bytes); }

  State& device_at(int index) {
    discover();
    if (devices_.empty()) throw ArgumentError("backend :" + name() + " is unavailable: " + unavailable_);
    if (index < 0 || static_cast<size_t>(index) >= devices_.size())
      throw ArgumentError("no " + display_name() + " device " + std::to_string(index) + ": there are " +
                          std::to_string(devices_.size()) + " (see Accel.devices/0)");
    return *devices_[static_cast<size_t>(index)];
  }

  void discover() {
    std::call_once(discovered_, [this] {
      unavailable_ = find_devices(devices_);
      for (size_t i = 0; i < devices_.size(); ++i) devices_[i]->info.index = static_cast<int>(i);
      streaming_ = std::make_unique<std::mutex[]>(devices_.size());
      discovered_flag_.store(true, std::memory_order_release);
    });
  }

 private:
  std::string display_name() const { return name() == "opencl" ? "OpenCL" : name() == "cuda" ? "CUDA" : name(); }

  std::once_flag discovered_;
  std::atomic<bool> discovered_flag_{false};  // set once discovery is done
  std::vector<std::unique_ptr<State>> devices_;
  std::unique_ptr<std::mutex[]> streaming_;  // one per device
  std::string unavailable_;
  StagingMode staging_mode_ = StagingMode::automatic;
};

}  // namespace accel
