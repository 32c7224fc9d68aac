// Host memory owned by Accel: large buffers are mapped on 2 MiB boundaries and advised to use
// transparent huge pages, because a first touch of a 4 KiB page costs microseconds on these VMs and
// a 268 MB result would spend as long faulting pages as computing. Released mappings are kept in a
// small bounded cache and reused by the next buffer of about the same size (pages already touched),
// which is what makes repeated calls and chunked pipelines cheap. Counts live and cached bytes.
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

 private:
  void release() noexcept;

  unsigned char* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // 0 when data_ came from malloc
  static std::atomic<int64_t> live_bytes_;
};

}  // namespace accel
