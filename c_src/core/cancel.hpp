// Cooperative cancellation for long calls. A dirty NIF cannot be pre-empted, so a call whose
// caller has died (killed, or timed out by a Task) would run to the end, holding a dirty scheduler
// for as long as its input asks (iterations: 2^62 is a valid option). The thread that owns the call
// polls a liveness check (in the NIF: enif_is_current_process_alive, usable only on that thread);
// every thread working for the call reads the flag it sets, between blocks and steps.
#pragma once

#include <atomic>
#include <functional>
#include <thread>

#include "core/error.hpp"

namespace accel {

class Cancellation {
 public:
  Cancellation() = default;
  explicit Cancellation(std::function<bool()> owner_alive)
      : owner_alive_(std::move(owner_alive)), owner_(std::this_thread::get_id()) {}

  // Cheap on every thread; the owner also re-checks liveness.
  bool cancelled() const {
    if (flag_.load(std::memory_order_relaxed)) return true;
    if (owner_alive_ && std::this_thread::get_id() == owner_ && !owner_alive_()) flag_.store(true, std::memory_order_relaxed);
    return flag_.load(std::memory_order_relaxed);
  }

  void throw_if_cancelled() const {
    if (cancelled()) throw Error("cancelled", "the calling process exited; the call was abandoned");
  }

  void cancel() { flag_.store(true, std::memory_order_relaxed); }  // for tests and shutdown

 private:
  std::function<bool()> owner_alive_;
  std::thread::id owner_;
  mutable std::atomic<bool> flag_{false};
};

}  // namespace accel
