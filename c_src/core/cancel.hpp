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
  // `owner_alive` is asked on the owner's thread only; `alive_anywhere`, where given, on every
  // other thread (a check that needs no process environment), so that a worker stuck in one long
  // element notices on its own.
  explicit Cancellation(std::function<bool()> owner_alive, std::function<bool()> alive_anywhere = {})
      : owner_alive_(std::move(owner_alive)),
        alive_anywhere_(std::move(alive_anywhere)),
        owner_(std::this_thread::get_id()) {}

  // Cheap on every thread; the owner, and other threads where they can, also re-check liveness.
  bool cancelled() const {
    if (flag_.load(std::memory_order_relaxed)) return true;
    const bool owner = std::this_thread::get_id() == owner_;
    if (owner && owner_alive_ && !owner_alive_()) flag_.store(true, std::memory_order_relaxed);
    if (!owner && alive_anywhere_ && !alive_anywhere_()) flag_.store(true, std::memory_order_relaxed);
    return flag_.load(std::memory_order_relaxed);
  }

  void throw_if_cancelled() const {
    if (cancelled()) throw Error("cancelled", "the calling process exited; the call was abandoned");
  }

  void cancel() { flag_.store(true, std::memory_order_relaxed); }  // for tests and shutdown

 private:
  std::function<bool()> owner_alive_;
  std::function<bool()> alive_anywhere_;
  std::thread::id owner_;
  mutable std::atomic<bool> flag_{false};
};

}  // namespace accel
