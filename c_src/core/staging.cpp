// Staged transfers (see staging.hpp): pieces of one slot each, the host's part copied by a pool of
// threads, the device's part queued, each slot reused once its previous copy is done.
#include "core/staging.hpp"

#include <algorithm>
#include <cstring>

#include "core/thread_pool.hpp"

namespace accel {
namespace {

// A memcpy saturates a server's memory bandwidth at about eight threads; more only contend.
constexpr size_t kCopyThreads = 8;
// Each thread's share of a piece: large enough that waking it pays.
constexpr size_t kCopyGrain = size_t{1} << 20;

}  // namespace

void copy_host(void* dst, const void* src, size_t bytes) {
  ThreadPool* pool = host_pool();
  if (pool == nullptr || bytes < 2 * kCopyGrain) {
    std::memcpy(dst, src, bytes);
    return;
  }
  // at most kCopyThreads pieces, so that at most that many threads copy
  const size_t grain = std::max(kCopyGrain, (bytes + kCopyThreads - 1) / kCopyThreads);
  pool->parallel_for(bytes, grain, [&](size_t begin, size_t end) {
    std::memcpy(static_cast<unsigned char*>(dst) + begin, static_cast<const unsigned char*>(src) + begin, end - begin);
  });
}

void staged_upload(StagingPort& port, DeviceBuffer& dst, const void* src, size_t bytes, size_t queue) {
  std::lock_guard<std::mutex> lock(port.mutex);
  const size_t slots = port.slots(), piece = port.slot_bytes();
  const auto* from = static_cast<const unsigned char*>(src);
  size_t i = 0;
  for (size_t offset = 0; offset < bytes; offset += piece, i = (i + 1) % slots) {
    const size_t len = std::min(piece, bytes - offset);
    port.wait(i);
    copy_host(port.slot[i], from + offset, len);
    port.to_device(i, dst, offset, len, queue);
  }
}

void staged_download(StagingPort& port, const DeviceBuffer& src, void* dst, size_t bytes, size_t queue) {
  std::lock_guard<std::mutex> lock(port.mutex);
  const size_t slots = port.slots(), piece = port.slot_bytes();
  const size_t pieces = (bytes + piece - 1) / piece;
  auto* to = static_cast<unsigned char*>(dst);
  // Every slot's copy is awaited before the slot is used again, by this transfer or the next.
  const auto fetch = [&](size_t p) {
    port.wait(p % slots);
    port.from_device(p % slots, src, p * piece, std::min(piece, bytes - p * piece), queue);
  };
  for (size_t p = 0; p < std::min(slots, pieces); ++p) fetch(p);
  for (size_t p = 0; p < pieces; ++p) {
    port.wait(p % slots);
    copy_host(to + p * piece, port.slot[p % slots], std::min(piece, bytes - p * piece));
    if (p + slots < pieces) fetch(p + slots);
  }
}

}  // namespace accel
