// HostBuffer: accounting of live bytes, moves, the huge-page path and refusals.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/host_buffer.hpp"

TEST(HostBuffer, CountsLiveBytesAndReleasesThem) {
  const int64_t before = accel::HostBuffer::live_bytes();
  {
    accel::HostBuffer small(1000);
    accel::HostBuffer large(size_t{8} << 20);  // mapped path
    std::memset(large.data(), 0xAB, large.size());
    std::memset(small.data(), 0xCD, small.size());
    EXPECT_EQ(accel::HostBuffer::live_bytes() - before, 1000 + (8 << 20));
    accel::HostBuffer moved(std::move(large));
    EXPECT_EQ(large.data(), nullptr);
    EXPECT_EQ(moved.size(), size_t{8} << 20);
    EXPECT_EQ(moved.data()[12345], 0xAB);
    EXPECT_EQ(accel::HostBuffer::live_bytes() - before, 1000 + (8 << 20));
    small = std::move(moved);
    EXPECT_EQ(accel::HostBuffer::live_bytes() - before, 8 << 20);
  }
  EXPECT_EQ(accel::HostBuffer::live_bytes(), before);
}

TEST(HostBuffer, ReleasedMappingsAreReusedAndBounded) {
  accel::HostBuffer::trim_cache();
  unsigned char* first;
  {
    accel::HostBuffer a(size_t{6} << 20);
    first = a.data();
  }
  EXPECT_EQ(accel::HostBuffer::cached_bytes(), 6 << 20);
  {
    accel::HostBuffer b((size_t{6} << 20) - 100);  // same rounded size: the same mapping comes back
    EXPECT_EQ(b.data(), first);
    EXPECT_EQ(accel::HostBuffer::cached_bytes(), 0);
    accel::HostBuffer c(size_t{2} << 20);  // nothing cached: a mapping of its own
    EXPECT_NE(c.data(), first);
  }
  for (int i = 0; i < 3; ++i) accel::HostBuffer big(size_t{300} << 20);  // over the cap together
  EXPECT_LE(accel::HostBuffer::cached_bytes(), static_cast<int64_t>(accel::HostBuffer::kCacheCapacity));
  accel::HostBuffer::trim_cache();
  EXPECT_EQ(accel::HostBuffer::cached_bytes(), 0);
}

TEST(HostBuffer, ASmallerBufferTakesTheHeadOfALargerMappingAndTheyMergeWhenReleased) {
  accel::HostBuffer::trim_cache();
  unsigned char* first;
  {
    accel::HostBuffer a(size_t{64} << 20);
    first = a.data();
    std::memset(a.data(), 0x5A, a.size());
  }
  {
    accel::HostBuffer small(size_t{2} << 20);  // no mapping of about its size: the 64 MiB one's head
    EXPECT_EQ(small.data(), first);
    EXPECT_EQ(accel::HostBuffer::cached_bytes(), 62 << 20);
    EXPECT_TRUE(accel::HostBuffer::owns(small.data(), small.size()));
    EXPECT_FALSE(accel::HostBuffer::owns(small.data(), small.size() + 1));  // the tail is not its own
    accel::HostBuffer next(size_t{16} << 20);  // then the rest's head, pages already written
    EXPECT_EQ(next.data(), first + (size_t{2} << 20));
    EXPECT_EQ(next.data()[12345], 0x5A);
    EXPECT_EQ(accel::HostBuffer::cached_bytes(), 46 << 20);
    accel::HostBuffer rest(size_t{46} << 20);  // the tail, whole
    EXPECT_EQ(rest.data(), first + (size_t{18} << 20));
    EXPECT_EQ(accel::HostBuffer::cached_bytes(), 0);
    std::memset(rest.data(), 1, rest.size());
  }
  // released in any order, the pieces are one mapping again: a 64 MiB buffer gets all of it
  EXPECT_EQ(accel::HostBuffer::cached_bytes(), 64 << 20);
  {
    accel::HostBuffer whole(size_t{64} << 20);
    EXPECT_EQ(whole.data(), first);
    EXPECT_EQ(accel::HostBuffer::cached_bytes(), 0);
    EXPECT_TRUE(accel::HostBuffer::owns(whole.data(), whole.size()));
  }
  // a buffer that a mapping fits with less than a quarter to spare takes it whole, unsplit
  {
    accel::HostBuffer fits(size_t{56} << 20);
    EXPECT_EQ(fits.data(), first);
    EXPECT_EQ(accel::HostBuffer::cached_bytes(), 0);
    EXPECT_TRUE(accel::HostBuffer::owns(fits.data(), size_t{64} << 20));
  }
  // a larger one than any cached maps its own
  {
    accel::HostBuffer larger(size_t{80} << 20);
    EXPECT_NE(larger.data(), first);
    EXPECT_EQ(accel::HostBuffer::cached_bytes(), 64 << 20);
  }
  accel::HostBuffer::trim_cache();
  EXPECT_EQ(accel::HostBuffer::cached_bytes(), 0);
}

TEST(HostBuffer, LargeBuffersAreHugePageAligned) {
  accel::HostBuffer large(size_t{4} << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large.data()) % 4096, 0u);
}

TEST(HostBuffer, ImpossibleSizesAreAnErrorNotACrash) {
  const int64_t before = accel::HostBuffer::live_bytes();
  try {
    accel::HostBuffer absurd(std::numeric_limits<size_t>::max() - 100);
    FAIL() << "allocated an absurd buffer";
  } catch (const accel::Error& e) {
    EXPECT_EQ(e.reason(), "out_of_memory");
  }
  EXPECT_THROW(accel::HostBuffer(size_t{1} << 50), accel::Error);  // more than this machine has
  EXPECT_EQ(accel::HostBuffer::live_bytes(), before);
}

namespace {
// A stand-in for a GPU runtime's page-locking: records what is pinned, refuses what `refuse` says.
struct FakePinning {
  static inline std::vector<std::pair<void*, size_t>> pinned;
  static inline std::vector<void*> unpinned;
  static inline void* refuse = nullptr;
  static bool pin(void* data, size_t bytes) {
    if (data == refuse) return false;
    pinned.push_back({data, bytes});
    return true;
  }
  static void unpin(void* data) { unpinned.push_back(data); }
};
}  // namespace

TEST(HostBuffer, MappingsArePinnedOnceOnTheirFirstTransferAndUnpinnedBeforeTheyAreUnmapped) {
  accel::HostBuffer::trim_cache();
  FakePinning::pinned.clear();
  FakePinning::unpinned.clear();
  accel::HostBuffer::set_pinning(&FakePinning::pin, &FakePinning::unpin);
  unsigned char* first;
  {
    accel::HostBuffer a(size_t{6} << 20);
    first = a.data();
    EXPECT_TRUE(accel::HostBuffer::owns(a.data() + 4096, 1 << 20));
    EXPECT_FALSE(accel::HostBuffer::owns(a.data() + 4096, size_t{6} << 20));
    // a range inside the mapping pins the whole of it, once
    EXPECT_TRUE(accel::HostBuffer::ensure_pinned(a.data() + 4096, 1 << 20));
    EXPECT_TRUE(accel::HostBuffer::ensure_pinned(a.data(), a.size()));
    ASSERT_EQ(FakePinning::pinned.size(), 1u);
    EXPECT_EQ(FakePinning::pinned[0], std::make_pair(static_cast<void*>(first), size_t{6} << 20));
    EXPECT_EQ(accel::HostBuffer::pinned_bytes(), 6 << 20);
    // past the mapping's end, memory Accel did not map, a small (malloc'd) buffer: never pinned
    EXPECT_FALSE(accel::HostBuffer::ensure_pinned(a.data() + 4096, size_t{6} << 20));
    int on_stack = 0;
    EXPECT_FALSE(accel::HostBuffer::ensure_pinned(&on_stack, sizeof on_stack));
    EXPECT_FALSE(accel::HostBuffer::owns(&on_stack, sizeof on_stack));
    accel::HostBuffer small(1000);
    EXPECT_FALSE(accel::HostBuffer::ensure_pinned(small.data(), small.size()));
    EXPECT_EQ(FakePinning::pinned.size(), 1u);
  }
  // cached, it stays pinned, and comes back pinned
  EXPECT_TRUE(FakePinning::unpinned.empty());
  {
    accel::HostBuffer b(size_t{6} << 20);
    ASSERT_EQ(b.data(), first);
    EXPECT_TRUE(accel::HostBuffer::ensure_pinned(b.data(), b.size()));
    EXPECT_EQ(FakePinning::pinned.size(), 1u);
    // a mapping whose pinning failed is not tried again
    accel::HostBuffer c(size_t{4} << 20);
    FakePinning::refuse = c.data();
    EXPECT_FALSE(accel::HostBuffer::ensure_pinned(c.data(), c.size()));
    FakePinning::refuse = nullptr;
    EXPECT_FALSE(accel::HostBuffer::ensure_pinned(c.data(), c.size()));
    EXPECT_EQ(FakePinning::pinned.size(), 1u);
  }
  // unmapped: unpinned first, and only what was pinned
  accel::HostBuffer::trim_cache();
  EXPECT_EQ(FakePinning::unpinned, std::vector<void*>{first});
  EXPECT_EQ(accel::HostBuffer::pinned_bytes(), 0);
  // evicted from a full cache: unpinned too
  {
    accel::HostBuffer big(size_t{500} << 20);
    EXPECT_TRUE(accel::HostBuffer::ensure_pinned(big.data(), 8));
    first = big.data();
  }
  {
    accel::HostBuffer other(size_t{100} << 20);  // a pinned mapping is never split
    EXPECT_NE(other.data(), first);
  }
  accel::HostBuffer::trim_cache();
  {
    accel::HostBuffer big(size_t{500} << 20);
    EXPECT_TRUE(accel::HostBuffer::ensure_pinned(big.data(), 8));
    first = big.data();
  }
  { accel::HostBuffer other(size_t{300} << 20); }  // its release evicts the pinned 500 MiB
  EXPECT_EQ(FakePinning::unpinned.back(), first);
  accel::HostBuffer::set_pinning(nullptr, nullptr);
  accel::HostBuffer::trim_cache();
  EXPECT_EQ(accel::HostBuffer::pinned_bytes(), 0);
}
