// HostBuffer (see host_buffer.hpp).
#include "core/host_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace accel {

std::atomic<int64_t> HostBuffer::live_bytes_{0};

namespace {
constexpr size_t kHugePage = size_t{2} << 20;

[[noreturn]] void out_of_memory(size_t bytes) {
  throw Error("out_of_memory", "could not allocate " + std::to_string(bytes) + " bytes of host memory");
}
}  // namespace

HostBuffer::HostBuffer(size_t bytes) : size_(bytes) {
  // With overcommit a mapping larger than the machine succeeds and the OOM killer strikes later:
  // refuse it here, where the caller still gets an error.
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && bytes / static_cast<size_t>(page) >= static_cast<size_t>(pages)) out_of_memory(bytes);
  if (bytes >= kHugePage) {
    if (bytes > SIZE_MAX - kHugePage) out_of_memory(bytes);
    const size_t rounded = (bytes + kHugePage - 1) & ~(kHugePage - 1);
    void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) out_of_memory(bytes);
#ifdef MADV_HUGEPAGE
    madvise(p, rounded, MADV_HUGEPAGE);  // advisory: ignored where THP is off
#endif
    data_ = static_cast<unsigned char*>(p);
    mapped_ = rounded;
  } else {
    data_ = static_cast<unsigned char*>(std::malloc(bytes == 0 ? 1 : bytes));
    if (data_ == nullptr) out_of_memory(bytes);
  }
  live_bytes_.fetch_add(static_cast<int64_t>(size_), std::memory_order_relaxed);
}

HostBuffer::~HostBuffer() { release(); }

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

void HostBuffer::release() noexcept {
  if (data_ == nullptr) return;
  if (mapped_ != 0) {
    munmap(data_, mapped_);
  } else {
    std::free(data_);
  }
  live_bytes_.fetch_sub(static_cast<int64_t>(size_), std::memory_order_relaxed);
  data_ = nullptr;
  size_ = 0;
  mapped_ = 0;
}

}  // namespace accel
