// HostBuffer (see host_buffer.hpp).
#include "core/host_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace accel {

std::atomic<int64_t> HostBuffer::live_bytes_{0};

namespace {
constexpr size_t kHugePage = size_t{2} << 20;

[[noreturn]] void out_of_memory(size_t bytes) {
  throw Error("out_of_memory", "could not allocate " + std::to_string(bytes) + " bytes of host memory");
}

// Released mappings, oldest first. Never destroyed (a static destructor could run while a dirty
// scheduler is still inside a call at VM exit); the NIF's unload trims it.
struct MappingCache {
  struct Entry {
    void* data;
    size_t mapped;
  };
  std::mutex mutex;
  std::vector<Entry> entries;
  size_t bytes = 0;
};
MappingCache& cache() {
  static MappingCache* c = new MappingCache();
  return *c;
}

// A cached mapping of at least `rounded` bytes wasting at most a quarter of it, or nullptr.
void* take_cached(size_t rounded, size_t* mapped) {
  MappingCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (size_t i = c.entries.size(); i-- > 0;) {
    const auto e = c.entries[i];
    if (e.mapped >= rounded && e.mapped - rounded <= rounded / 4) {
      c.entries.erase(c.entries.begin() + static_cast<std::ptrdiff_t>(i));
      c.bytes -= e.mapped;
      *mapped = e.mapped;
      return e.data;
    }
  }
  return nullptr;
}

void put_cached(void* data, size_t mapped) {
  if (mapped > HostBuffer::kCacheCapacity) {
    munmap(data, mapped);
    return;
  }
  MappingCache& c = cache();
  std::vector<MappingCache::Entry> evicted;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    while (c.bytes + mapped > HostBuffer::kCacheCapacity) {
      evicted.push_back(c.entries.front());
      c.bytes -= c.entries.front().mapped;
      c.entries.erase(c.entries.begin());
    }
    c.entries.push_back({data, mapped});
    c.bytes += mapped;
  }
  for (const auto& e : evicted) munmap(e.data, e.mapped);
}
}  // namespace

size_t physical_memory_bytes() {
  static const size_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : size_t{0};
  }();
  return bytes;
}

int64_t HostBuffer::cached_bytes() {
  MappingCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return static_cast<int64_t>(c.bytes);
}

void HostBuffer::trim_cache() {
  MappingCache& c = cache();
  std::vector<MappingCache::Entry> entries;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    entries.swap(c.entries);
    c.bytes = 0;
  }
  for (const auto& e : entries) munmap(e.data, e.mapped);
}

HostBuffer::HostBuffer(size_t bytes) : size_(bytes) {
  // With overcommit a mapping larger than the machine succeeds and the OOM killer strikes later:
  // refuse it here, where the caller still gets an error.
  const size_t physical = physical_memory_bytes();
  if (physical != 0 && bytes >= physical) out_of_memory(bytes);
  if (bytes >= kHugePage) {
    if (bytes > SIZE_MAX - kHugePage) out_of_memory(bytes);
    const size_t rounded = (bytes + kHugePage - 1) & ~(kHugePage - 1);
    void* p = take_cached(rounded, &mapped_);
    if (p == nullptr) {
      p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) out_of_memory(bytes);
#ifdef MADV_HUGEPAGE
      madvise(p, rounded, MADV_HUGEPAGE);  // advisory: ignored where THP is off
#endif
      mapped_ = rounded;
    }
    data_ = static_cast<unsigned char*>(p);
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
    put_cached(data_, mapped_);
  } else {
    std::free(data_);
  }
  live_bytes_.fetch_sub(static_cast<int64_t>(size_), std::memory_order_relaxed);
  data_ = nullptr;
  size_ = 0;
  mapped_ = 0;
}

}  // namespace accel
