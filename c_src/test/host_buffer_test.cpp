// HostBuffer: accounting of live bytes, moves, the huge-page path and refusals.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

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
    accel::HostBuffer c(size_t{2} << 20);  // a much smaller buffer does not take a large mapping
    EXPECT_NE(c.data(), first);
  }
  for (int i = 0; i < 3; ++i) accel::HostBuffer big(size_t{300} << 20);  // over the cap together
  EXPECT_LE(accel::HostBuffer::cached_bytes(), static_cast<int64_t>(accel::HostBuffer::kCacheCapacity));
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
