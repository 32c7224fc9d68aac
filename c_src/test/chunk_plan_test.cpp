// Chunk planning for device backends: sizes 1, chunk - 1, chunk, chunk + 1, limits and slots.
#include <gtest/gtest.h>

#include "core/chunk_plan.hpp"
#include "core/error.hpp"

TEST(ChunkPlan, ChunkSizeHonoursDeviceLimitAndRequest) {
  EXPECT_EQ(accel::chunk_elements(1000, 4096, 0), 1000u);  // fits at once
  EXPECT_EQ(accel::chunk_elements(10000, 4096, 0), 4096u);  // device limit
  EXPECT_EQ(accel::chunk_elements(10000, 4096, 100), 100u);  // caller asked for less
  EXPECT_EQ(accel::chunk_elements(10000, 4096, 9000), 4096u);  // never above the device limit
  EXPECT_EQ(accel::chunk_elements(0, 4096, 0), 1u);
  EXPECT_EQ(accel::chunk_elements(10, 0, 0), 1u);  // a device reporting 0 still makes progress
}

TEST(ChunkPlan, CoversEveryElementOnceInOrder) {
  for (size_t chunk : {1, 7, 8, 9}) {
    for (size_t total : {size_t{0}, size_t{1}, chunk - 1, chunk, chunk + 1, 10 * chunk + 3}) {
      const auto plan = accel::plan_chunks(total, chunk, 2);
      size_t next = 0;
      for (size_t i = 0; i < plan.size(); ++i) {
        EXPECT_EQ(plan[i].offset, next);
        EXPECT_GE(plan[i].count, 1u);
        EXPECT_LE(plan[i].count, chunk);
        EXPECT_EQ(plan[i].slot, i % 2);
        next += plan[i].count;
      }
      EXPECT_EQ(next, total) << "chunk " << chunk << " total " << total;
    }
  }
}

TEST(IterationsPerLaunch, BoundsTheWorkOfOneLaunch) {
  // 1000 elements at 1 unit per step: a budget of 10^6 units allows 1000 iterations per launch.
  EXPECT_EQ(accel::iterations_per_launch(1000 * 5000, 5000, 1000000), 1000);
  EXPECT_EQ(accel::iterations_per_launch(1000 * 10, 10, 1000000), 10);   // all in one launch
  EXPECT_EQ(accel::iterations_per_launch(0, 0, 1000000), 0);             // none: one launch still runs
  EXPECT_EQ(accel::iterations_per_launch(~uint64_t{0}, int64_t{1} << 40, 1), 1);  // never 0
  EXPECT_EQ(accel::launch_budget(0), accel::launch_budget(1));
  EXPECT_EQ(accel::launch_budget(132), uint64_t{132} << 24);
}

TEST(StreamChunk, FourChunksOrMoreEachWithinTwoLaunchesNeverBelowTheFloor) {
  constexpr size_t floor = size_t{1} << 16;
  EXPECT_EQ(accel::stream_chunk(size_t{1} << 22, 50, 50000000, floor), size_t{1} << 20);  // four chunks
  EXPECT_EQ(accel::stream_chunk(size_t{1} << 30, 50, 50000000, floor), 2000000u);          // 2 budgets' worth
  EXPECT_EQ(accel::stream_chunk(1000001, 1, uint64_t{1} << 40, floor), 250001u);           // rounded up
  EXPECT_EQ(accel::stream_chunk(size_t{1} << 30, 1000000, 1000, floor), floor);
  EXPECT_EQ(accel::stream_chunk(size_t{1} << 16, 1, 1000000, size_t{1} << 14), size_t{1} << 14);
  EXPECT_EQ(accel::stream_chunk(1000, 1, 1000, floor), floor);                              // small: one chunk
  EXPECT_EQ(accel::stream_chunk(size_t{1} << 30, 0, 1000, floor), floor);                   // no cost: no division by 0
  EXPECT_EQ(accel::stream_chunk(SIZE_MAX, ~uint64_t{0}, ~uint64_t{0}, floor), floor);
  EXPECT_EQ(accel::stream_chunk(100, 1, 1000, 0), 25u);                                    // a floor of 0 is 1
}

TEST(RunLaunches, CoversTheIterationsInBoundedLaunchesWaitingBetween) {
  std::vector<int64_t> counts;
  std::vector<bool> firsts;
  int waits = 0;
  auto launch = [&](int64_t now, bool first) {
    counts.push_back(now);
    firsts.push_back(first);
  };
  accel::run_launches(10, 4, true, nullptr, launch, [&] { ++waits; });
  EXPECT_EQ(counts, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(firsts, (std::vector<bool>{true, false, false}));
  EXPECT_EQ(waits, 2);  // between launches, not after the last

  counts.clear();
  accel::run_launches(0, 4, true, nullptr, launch, [&] { ++waits; });
  EXPECT_EQ(counts, (std::vector<int64_t>{0}));  // a range must still be generated
  counts.clear();
  accel::run_launches(0, 4, false, nullptr, launch, [&] { ++waits; });
  EXPECT_TRUE(counts.empty());

  accel::Cancellation cancel;
  cancel.cancel();
  counts.clear();
  EXPECT_THROW(accel::run_launches(10, 4, true, &cancel, launch, [] {}), accel::Error);
  EXPECT_EQ(counts, (std::vector<int64_t>{4}));  // stopped at the first boundary
}
