// Host memory owned by Accel: large buffers are mapped on 2 MiB boundaries and advised to use
// transparent huge pages, because a first touch of a 4 KiB page costs microseconds on these VMs and
// a 268 MB result would spend as long faulting pages as computing. Counts live bytes for Accel.memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace accel {

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

 private:
  void release() noexcept;

  unsigned char* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // 0 when data_ came from malloc
  static std::atomic<int64_t> live_bytes_;
};

}  // namespace accel
