// Transfers between pageable host memory and a GPU through pinned staging memory. A GPU's copy
// engine reads and writes page-locked memory at the bus's speed; pageable memory (a binary the VM
// made; for OpenCL, any host memory) goes through the driver's own staging, one thread copying:
// 25 ms of a 35 ms binary -> binary call on the H100 host, where the pinned copy takes 5. Here the
// host side is copied by several threads into a few pinned slots while the copy engine moves the
// slots filled before: pieces in flight on the device's queue, each slot reused once its last copy
// is done. Not here: the slots themselves (the backend's StagingPort) and when to stage (stage()).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace accel {

// When device backends stage large transfers (config :accel, staged_transfers).
enum class StagingMode { automatic, always, never };

// What a backend supplies for one device: slots of pinned host memory (`slot`, each `slot_bytes`
// long), and asynchronous copies between a slot and a device buffer on one of the device's
// in-order queues.
class StagingPort {
 public:
  virtual ~StagingPort() = default;
  size_t slots() const { return slot.size(); }
  size_t slot_bytes() const { return slot_bytes_; }
  // Enqueues a copy of `bytes` from slot i into dst at `offset` on `queue`; slot i is busy until
  // it is done.
  virtual void to_device(size_t i, DeviceBuffer& dst, size_t offset, size_t bytes, size_t queue) = 0;
  // Enqueues a copy of `bytes` from src at `offset` into slot i on `queue`; likewise.
  virtual void from_device(size_t i, const DeviceBuffer& src, size_t offset, size_t bytes, size_t queue) = 0;
  // Returns once slot i's last copy is done (at once when it has none).
  virtual void wait(size_t i) = 0;

  std::vector<unsigned char*> slot;  // filled by the backend
  std::mutex mutex;                  // one staged transfer at a time uses the slots

 protected:
  explicit StagingPort(size_t slot_bytes) : slot_bytes_(slot_bytes) {}

 private:
  size_t slot_bytes_;
};

// A device's slots, made on first use by make(); where making them fails with a `Failure` (the
// runtime gives no pinned memory), never tried again, and get() says null: the device's transfers
// then go straight. Used under the device's mutex.
class LazyStaging {
 public:
  template <typename Failure, typename Make>
  StagingPort* get(Make&& make) {
    if (port_ == nullptr && !failed_) {
      try {
        port_ = make();
      } catch (const Failure&) {
        failed_ = true;
      }
    }
    return port_.get();
  }
  // The slots made so far, or null.
  StagingPort* current() const { return port_.get(); }
  // Forgets the slots without destroying them (for a device whose context took their memory with
  // it: the caller keeps, or leaks, the port); the next get() makes new ones.
  StagingPort* abandon() {
    failed_ = false;
    return port_.release();
  }

 private:
  std::unique_ptr<StagingPort> port_;
  bool failed_ = false;
};

// A device's slots: enough to keep the copy engine busy while the host fills the next, few enough
// that pinned memory stays small (32 MiB per device).
constexpr size_t kDeviceSlots = 4;
constexpr size_t kDeviceSlotBytes = size_t{8} << 20;

// Transfers below this go straight to the driver: staging pays from a few pieces up.
constexpr size_t kStagingMinBytes = size_t{4} << 20;

// Whether a transfer of `bytes` to or from host memory the copy engine cannot read at bus speed
// (`pinned` false) goes through the slots, on a device of type `type` ("gpu", "cpu", ...): in
// automatic mode, large transfers of unpinned memory on GPUs.
inline bool stage(StagingMode mode, const std::string& type, bool pinned, size_t bytes) {
  if (pinned || bytes < kStagingMinBytes) return false;
  return mode == StagingMode::always || (mode == StagingMode::automatic && type == "gpu");
}

// memcpy by several threads (a pool of its own, sized for memory bandwidth, not the CPU backend's).
void copy_host(void* dst, const void* src, size_t bytes);

// Copies src[0, bytes) into dst at offset 0 through the port's slots. Returns once src has been
// read; the last pieces may still be in flight on `queue`, ordered before what is queued after.
void staged_upload(StagingPort& port, DeviceBuffer& dst, const void* src, size_t bytes, size_t queue);

// Copies src[0, bytes) into dst through the port's slots. Returns once dst holds every byte.
void staged_download(StagingPort& port, const DeviceBuffer& src, void* dst, size_t bytes, size_t queue);

}  // namespace accel
