// Host memory owned by Accel: large buffers are mapped on 2 MiB boundaries and advised to use
// transparent huge pages, because a first touch of a 4 KiB page costs microseconds on these VMs and
// a 268 MB result would spend as long faulting pages as computing; from 128 KiB up to 2 MiB they are
// mappings in 64 KiB steps (smaller ones come from malloc). Released mappings are kept in a
// small bounded cache and reused by the next buffer of about the same size (pages already touched),
// which is what makes repeated calls and chunked pipelines cheap; a buffer that none fits takes the
// head of a larger one (not pinned), whose tail stays cached, and released pieces adjacent to each
// other merge again. Counts live and cached bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace accel {

// This machine's physical memory in bytes (0 if unknown), read once.
size_t physical_memory_bytes();

class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t bytes);  // throws accel::Error("out_of_memory", ...) on failure
  ~HostBuffer();
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

  static int64_t live_bytes() { return live_bytes_.load(std::memory_order_relaxed); }
  static int64_t cached_bytes();
  static void trim_cache();  // unmaps every cached mapping
  static constexpr size_t kCacheCapacity = size_t{768} << 20;

  // Page-locking for a GPU's copy engine, which moves pinned memory at the bus's speed and pageable
  // memory through a staging copy of the driver's (5x slower on the H100 host). A backend that can
  // pin host memory installs `pin` and `unpin` once; ensure_pinned() then pins the whole mapping of
  // Accel's that holds [p, p + bytes) on its first transfer, and the mapping stays pinned while it
  // lives and while it is cached, so repeated calls pay for pinning once. It is unpinned before it
  // is unmapped. Memory Accel did not map (the VM's binaries, small buffers) is never pinned:
  // ensure_pinned() says false, and the transfer goes through the backend's pinned staging slots
  // (core/staging.hpp) or the pageable way. A mapping whose pinning failed is not tried again.
  using PinFn = bool (*)(void* data, size_t bytes);
  using UnpinFn = void (*)(void* data);
  static void set_pinning(PinFn pin, UnpinFn unpin);
  static bool ensure_pinned(const void* p, size_t bytes);
  // Whether [p, p + bytes) lies in one of Accel's mappings: memory a transfer may pin.
  static bool owns(const void* p, size_t bytes);
  static int64_t pinned_bytes();

 private:
  void release() noexcept;

  unsigned char* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // 0 when data_ came from malloc
  static std::atomic<int64_t> live_bytes_;
};

}  // namespace accel
