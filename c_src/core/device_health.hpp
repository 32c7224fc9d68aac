// What a device backend does when a device faults: a kernel that read or wrote out of bounds on a
// GPU (CUDA's sticky errors, OpenCL's CL_OUT_OF_RESOURCES from a failed command), or a context the
// runtime lost. The call that meets the fault fails with Error("device_fault"); then
//   1. the device's context is probed (a tiny command, waited for): where it still works, the error
//      was the call's own and nothing else changes;
//   2. otherwise the context is rebuilt (the backend's reset), and everything made in the old one is
//      lost: its buffers raise Error("device_lost") where a call uses them, and are freed with it;
//   3. where the rebuilt context fails the probe too, the device is fenced: every later call on it
//      fails at once with Error("device_failed"), until the VM restarts. Other devices and backends
//      go on.
// The backend supplies the reset and the probe; DeviceHealth keeps the state and the policy, and a
// test may make a device's next command fail as a fault would (simulate()).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core/error.hpp"

namespace accel {

// One of a device's contexts, shared by the buffers made in it, which see when it is lost.
struct DeviceContextLife {
  std::atomic<bool> lost{false};
  std::atomic<int64_t> bytes{0};  // tensor bytes allocated in this context and not yet released
};

// Throws Error("device_lost") where `life` is a context the device (`backend` device `device`)
// has since replaced: the memory it held went with it.
inline void check_alive(const DeviceContextLife& life, const char* backend, int device) {
  if (life.lost.load(std::memory_order_acquire))
    throw Error("device_lost", std::string("memory this call uses on ") + backend + " device " + std::to_string(device) +
                                   " was lost when the device's context was rebuilt after a fault (a tensor made "
                                   "before the fault: make it again)");
}

class DeviceHealth {
 public:
  // What recover() found.
  enum class Outcome { transient, rebuilt, fenced };
  // What a simulated fault (simulate()) does: fail the next command as a fault would; with
  // `context_lost`, the probe fails until the context is rebuilt; with `permanent`, the rebuilt
  // context fails it too.
  enum class Simulated { none, context_lost, permanent };

  DeviceHealth() : life_(std::make_shared<DeviceContextLife>()) {}

  // The current context's life (new buffers take it).
  std::shared_ptr<DeviceContextLife> life() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return life_;
  }

  // Throws Error("device_failed") where the device is fenced; `name()` names it ("OpenCL device 0
  // (...)"), called only then.
  template <typename Name>
  void check_usable(Name&& name) const {
    if (!fenced()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    throw Error("device_failed", name() + " failed (" + fenced_ +
                                     ") and its context could not be rebuilt: it takes no more calls until the VM "
                                     "restarts; other devices and backends still work");
  }

  bool fenced() const { return fenced_flag_.load(std::memory_order_acquire); }

  // The policy above, after a call met `what` (the failing call and the runtime's error). reset()
  // replaces the backend's context (it must not touch anything made in the old one that the
  // runtime may have freed); probe() runs a tiny command on the current context and returns
  // whether it worked. The caller holds the device exclusively.
  template <typename Reset, typename Probe>
  Outcome recover(const std::string& what, Reset&& reset, Probe&& probe) {
    if (probe_ok(probe)) return Outcome::transient;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      life_->lost.store(true, std::memory_order_release);
      life_ = std::make_shared<DeviceContextLife>();
      ++rebuilds_;
      if (simulated_ == Simulated::context_lost) simulated_ = Simulated::none;
    }
    try {
      reset();
    } catch (const std::exception&) {
      fence(what);
      return Outcome::fenced;
    }
    if (probe_ok(probe)) return Outcome::rebuilt;
    fence(what);
    return Outcome::fenced;
  }

  // The sentence a failed call's message ends with.
  static std::string describe(Outcome outcome) {
    switch (outcome) {
      case Outcome::transient:
        return "the device still works";
      case Outcome::rebuilt:
        return "the device's context was rebuilt: the tensors it held are lost, and later calls run in the new context";
      case Outcome::fenced:
        return "its context could not be rebuilt: the device takes no more calls until the VM restarts";
    }
    return "";
  }

  // For tests: the next command on the device fails as a fault would.
  void simulate(Simulated kind) {
    std::lock_guard<std::mutex> lock(mutex_);
    simulated_ = kind;
    fail_next_.store(kind != Simulated::none, std::memory_order_release);
  }
  // Whether this command is to fail as simulated (once). One atomic read on every command.
  bool take_simulated_failure() {
    return fail_next_.load(std::memory_order_relaxed) && fail_next_.exchange(false, std::memory_order_acq_rel);
  }
  // Contexts rebuilt so far.
  uint64_t rebuilds() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return rebuilds_;
  }

 private:
  template <typename Probe>
  bool probe_ok(Probe&& probe) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (simulated_ != Simulated::none) return false;
    }
    try {
      return probe();
    } catch (const std::exception&) {
      return false;
    }
  }

  void fence(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    fenced_ = what.empty() ? "a fault" : what;
    fenced_flag_.store(true, std::memory_order_release);
  }

  mutable std::mutex mutex_;
  std::shared_ptr<DeviceContextLife> life_;
  std::string fenced_;  // why, where fenced
  std::atomic<bool> fenced_flag_{false};
  Simulated simulated_ = Simulated::none;
  std::atomic<bool> fail_next_{false};
  uint64_t rebuilds_ = 0;
};

}  // namespace accel
