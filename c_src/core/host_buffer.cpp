// HostBuffer (see host_buffer.hpp).
#include "core/host_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace accel {

std::atomic<int64_t> HostBuffer::live_bytes_{0};

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
// Buffers from here up are mappings of Accel's too (in 64 KiB steps below a huge page), so that a
// result of a few hundred KiB reuses pages already touched: its first touch costs more than many
// operations that make one (a 1.5 MB embedding lookup faulted for 0.3 ms and copied for 0.1).
// From glibc's mmap threshold (128 KiB) up, since malloc maps and unmaps each such buffer itself
// in the VM (the BEAM's settings keep its threshold from rising): a 128 x 784 -> 256 -> 10
// training step's four 128 KiB buffers faulted 132 pages a call.
constexpr size_t kMapFrom = size_t{128} << 10;
constexpr size_t kMapStep = size_t{64} << 10;
// At most this many cached mappings (a lookup scans them): the oldest go first.
constexpr size_t kCacheEntries = 2048;

[[noreturn]] void out_of_memory(size_t bytes) {
  throw Error("out_of_memory", "could not allocate " + std::to_string(bytes) + " bytes of host memory");
}

// Released mappings, oldest first, and every mapping that exists (live or cached) by address, with
// whether it is pinned. Never destroyed (a static destructor could run while a dirty scheduler is
// still inside a call at VM exit); the NIF's unload trims it.
struct MappingCache {
  struct Entry {
    void* data;
    size_t mapped;
  };
  enum class Pin { no, pinning, yes, failed };
  struct Mapping {
    size_t mapped;
    Pin pin;
  };
  std::mutex mutex;
  std::vector<Entry> entries;
  size_t bytes = 0;
  std::map<uintptr_t, Mapping> mappings;
  HostBuffer::PinFn pin = nullptr;
  HostBuffer::UnpinFn unpin = nullptr;
  size_t pinned = 0;
};
MappingCache& cache() {
  static MappingCache* c = new MappingCache();
  return *c;
}

// Whether a cached mapping may be split or merged with a neighbour: not while pinned, since the
// runtime unpins what it pinned, whole (under the lock).
bool unpinned(const MappingCache& c, const void* data) {
  const auto found = c.mappings.find(reinterpret_cast<uintptr_t>(data));
  return found != c.mappings.end() && found->second.pin == MappingCache::Pin::no;
}

// A cached mapping of at least `rounded` bytes wasting at most a quarter of it; else the head of
// the smallest larger one that is not pinned, its tail staying cached (pages already touched cost
// nothing, a fresh page microseconds on these VMs); else nullptr.
void* take_cached(size_t rounded, size_t* mapped) {
  MappingCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  size_t larger = c.entries.size();
  for (size_t i = c.entries.size(); i-- > 0;) {
    const auto e = c.entries[i];
    if (e.mapped < rounded) continue;
    if (e.mapped - rounded <= rounded / 4) {
      c.entries.erase(c.entries.begin() + static_cast<std::ptrdiff_t>(i));
      c.bytes -= e.mapped;
      *mapped = e.mapped;
      return e.data;
    }
    if ((larger == c.entries.size() || e.mapped < c.entries[larger].mapped) && unpinned(c, e.data)) larger = i;
  }
  if (larger == c.entries.size()) return nullptr;
  MappingCache::Entry& e = c.entries[larger];
  void* head = e.data;
  c.mappings[reinterpret_cast<uintptr_t>(head)].mapped = rounded;
  e = {static_cast<unsigned char*>(head) + rounded, e.mapped - rounded};
  c.mappings[reinterpret_cast<uintptr_t>(e.data)] = {e.mapped, MappingCache::Pin::no};
  c.bytes -= rounded;
  *mapped = rounded;
  return head;
}

// A released mapping joins the cached ones adjacent to it, neither pinned, into one (the pieces
// take_cached split off come together again), under the lock: *data and *mapped become the whole.
void merge_neighbours(MappingCache& c, void** data, size_t* mapped) {
  if (!unpinned(c, *data)) return;
  for (size_t i = 0; i < c.entries.size();) {
    const auto e = c.entries[i];
    const bool below = static_cast<unsigned char*>(e.data) + e.mapped == *data;
    const bool above = static_cast<unsigned char*>(*data) + *mapped == e.data;
    if (!(below || above) || !unpinned(c, e.data)) {
      ++i;
      continue;
    }
    c.entries.erase(c.entries.begin() + static_cast<std::ptrdiff_t>(i));
    c.bytes -= e.mapped;
    c.mappings.erase(reinterpret_cast<uintptr_t>(below ? *data : e.data));
    if (below) *data = e.data;
    *mapped += e.mapped;
    c.mappings[reinterpret_cast<uintptr_t>(*data)].mapped = *mapped;
    i = 0;  // the whole may have a neighbour of its own now
  }
}

// A mapping leaves the registry (under the lock): returns how to unpin it first, or nullptr.
HostBuffer::UnpinFn forget(MappingCache& c, void* data) {
  const auto found = c.mappings.find(reinterpret_cast<uintptr_t>(data));
  if (found == c.mappings.end()) return nullptr;
  const bool pinned = found->second.pin == MappingCache::Pin::yes;
  if (pinned) c.pinned -= found->second.mapped;
  c.mappings.erase(found);
  return pinned ? c.unpin : nullptr;
}

using Gone = std::vector<std::pair<MappingCache::Entry, HostBuffer::UnpinFn>>;

// Unmaps mappings that have left the registry (outside the lock), unpinning those that were.
void unmap(const Gone& gone) {
  for (const auto& [e, unpin] : gone) {
    if (unpin != nullptr) unpin(e.data);
    munmap(e.data, e.mapped);
  }
}

void put_cached(void* data, size_t mapped) {
  MappingCache& c = cache();
  Gone gone;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (mapped > HostBuffer::kCacheCapacity) {
      gone.push_back({{data, mapped}, forget(c, data)});
    } else {
      while (!c.entries.empty() && (c.bytes + mapped > HostBuffer::kCacheCapacity || c.entries.size() >= kCacheEntries)) {
        const MappingCache::Entry oldest = c.entries.front();
        gone.push_back({oldest, forget(c, oldest.data)});
        c.bytes -= oldest.mapped;
        c.entries.erase(c.entries.begin());
      }
      merge_neighbours(c, &data, &mapped);
      c.entries.push_back({data, mapped});
      c.bytes += mapped;
    }
  }
  unmap(gone);
}

void* map_new(size_t rounded) {
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
  if (rounded >= kHugePage) madvise(p, rounded, MADV_HUGEPAGE);  // advisory: ignored where THP is off
#endif
  MappingCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.mappings[reinterpret_cast<uintptr_t>(p)] = {rounded, MappingCache::Pin::no};
  return p;
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
  Gone gone;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    for (const auto& e : c.entries) gone.push_back({e, forget(c, e.data)});
    c.entries.clear();
    c.bytes = 0;
  }
  unmap(gone);
}

void HostBuffer::set_pinning(PinFn pin, UnpinFn unpin) {
  MappingCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.pin = pin;
  c.unpin = unpin;
}

namespace {
// The mapping of Accel's that holds [p, p + bytes), or the registry's end (under the lock).
std::map<uintptr_t, MappingCache::Mapping>::iterator mapping_of(MappingCache& c, const void* p, size_t bytes) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  auto found = c.mappings.upper_bound(at);
  if (found == c.mappings.begin()) return c.mappings.end();
  --found;
  const size_t mapped = found->second.mapped;
  if (at - found->first > mapped || bytes > mapped - (at - found->first)) return c.mappings.end();
  return found;
}
}  // namespace

bool HostBuffer::owns(const void* p, size_t bytes) {
  MappingCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return mapping_of(c, p, bytes) != c.mappings.end();
}

bool HostBuffer::ensure_pinned(const void* p, size_t bytes) {
  MappingCache& c = cache();
  uintptr_t start;
  size_t mapped;
  PinFn pin;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    const auto found = mapping_of(c, p, bytes);
    if (found == c.mappings.end()) return false;  // not ours
    MappingCache::Mapping& m = found->second;
    if (m.pin != MappingCache::Pin::no || c.pin == nullptr) return m.pin == MappingCache::Pin::yes;
    m.pin = MappingCache::Pin::pinning;  // another caller meanwhile copies the pageable way
    start = found->first;
    mapped = m.mapped;
    pin = c.pin;
  }
  // Outside the lock: pinning takes milliseconds, and releases on the VM's schedulers take the
  // lock. The mapping cannot go meanwhile: the caller's buffer is in it.
  const bool pinned = pin(reinterpret_cast<void*>(start), mapped);
  std::lock_guard<std::mutex> lock(c.mutex);
  const auto found = c.mappings.find(start);  // still there: see above
  found->second.pin = pinned ? MappingCache::Pin::yes : MappingCache::Pin::failed;
  if (pinned) c.pinned += mapped;
  return pinned;
}

int64_t HostBuffer::pinned_bytes() {
  MappingCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return static_cast<int64_t>(c.pinned);
}

HostBuffer::HostBuffer(size_t bytes) : size_(bytes) {
  // With overcommit a mapping larger than the machine succeeds and the OOM killer strikes later:
  // refuse it here, where the caller still gets an error.
  const size_t physical = physical_memory_bytes();
  if (physical != 0 && bytes >= physical) out_of_memory(bytes);
  if (bytes >= kMapFrom) {
    if (bytes > SIZE_MAX - kHugePage) out_of_memory(bytes);
    const size_t step = bytes >= kHugePage ? kHugePage : kMapStep;
    const size_t rounded = (bytes + step - 1) & ~(step - 1);
    void* p = take_cached(rounded, &mapped_);
    if (p == nullptr) {
      p = map_new(rounded);
      if (p == nullptr) out_of_memory(bytes);
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
