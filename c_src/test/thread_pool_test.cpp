// ThreadPool: every index exactly once, concurrent callers, exceptions, a pool of one, one chunk,
// a worker for each job whether it slept or spun; pools that sleep at once and pools that spin.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "core/thread_pool.hpp"

namespace {

using std::chrono::microseconds;

// Pools whose threads sleep at once, and pools whose threads spin first (the CPU backend's).
const microseconds kSpins[] = {microseconds(0), accel::cpu::kPoolSpin};

void expect_each_index_once(accel::ThreadPool& pool, size_t n, size_t grain) {
  std::vector<std::atomic<int>> hits(n);
  pool.parallel_for(n, grain, [&](size_t b, size_t e) {
    ASSERT_LE(e - b, grain == 0 ? 1 : grain);
    for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
  });
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i << " n=" << n << " grain=" << grain;
}

TEST(ThreadPool, CoversEachIndexExactlyOnce) {
  for (microseconds spin : kSpins) {
    accel::ThreadPool pool(4, spin);
    EXPECT_EQ(pool.threads(), 4u);
    for (size_t n : {0, 1, 2, 7, 1000, 65537})
      for (size_t grain : {0, 1, 3, 64, 100000}) expect_each_index_once(pool, n, grain);
  }
}

// A job of two chunks that each wait (up to 10 s) for the other to start: it finishes at once only
// where a worker took one chunk while the caller ran the other. A worker that missed the job
// (asleep and not woken, or spinning and not seeing it) fails this rather than hanging it.
bool two_chunks_meet(accel::ThreadPool& pool) {
  std::atomic<int> arrived{0};
  std::atomic<bool> met{true};
  pool.parallel_for(2, 1, [&](size_t, size_t) {
    arrived.fetch_add(1);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (arrived.load() < 2) {
      if (std::chrono::steady_clock::now() > until) {
        met.store(false);
        return;
      }
      std::this_thread::yield();
    }
  });
  return met.load();
}

TEST(ThreadPool, AWorkerTakesEachJobWhetherItSleptOrSpun) {
  // back to back (the worker spinning, or just woken), after idle gaps either side of the spin's
  // end, and long enough for the worker to sleep
  const microseconds spin_end = accel::cpu::kPoolSpin;
  const microseconds gaps[] = {
      microseconds(0), microseconds(50),  spin_end - microseconds(10), spin_end + microseconds(10),
      2 * spin_end,    microseconds(3000)};
  for (microseconds spin : kSpins) {
    accel::ThreadPool pool(2, spin);
    for (int round = 0; round < 40; ++round)
      for (microseconds gap : gaps) {
        std::this_thread::sleep_for(gap);
        ASSERT_TRUE(two_chunks_meet(pool)) << "spin " << spin.count() << " us, gap " << gap.count() << " us";
      }
  }
}

TEST(ThreadPool, SingleThreadPoolRunsOnTheCaller) {
  accel::ThreadPool pool(1);
  EXPECT_EQ(pool.threads(), 1u);
  const auto caller = std::this_thread::get_id();
  pool.parallel_for(100, 7, [&](size_t, size_t) { EXPECT_EQ(std::this_thread::get_id(), caller); });
  expect_each_index_once(pool, 1000, 13);
}

TEST(ThreadPool, ConcurrentCallersAllFinish) {
  for (microseconds spin : kSpins) {
    accel::ThreadPool pool(3, spin);
    std::vector<std::thread> callers;
    std::atomic<int> failures{0};
    for (int t = 0; t < 8; ++t)
      callers.emplace_back([&, t] {
        for (int round = 0; round < 50; ++round) {
          const size_t n = 1000 + static_cast<size_t>(t * 37 + round);
          std::vector<std::atomic<int>> hits(n);
          pool.parallel_for(n, 17, [&](size_t b, size_t e) {
            for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
          });
          for (auto& h : hits)
            if (h.load() != 1) failures.fetch_add(1);
        }
      });
    for (auto& c : callers) c.join();
    EXPECT_EQ(failures.load(), 0);
  }
}

TEST(ThreadPool, FirstExceptionIsRethrownAfterAllChunksStop) {
  for (microseconds spin : kSpins) {
    accel::ThreadPool pool(4, spin);
    std::atomic<int> ran{0};
    EXPECT_THROW(pool.parallel_for(1000, 10,
                                   [&](size_t b, size_t) {
                                     ran.fetch_add(1);
                                     if (b == 500) throw std::runtime_error("chunk 50 failed");
                                   }),
                 std::runtime_error);
    EXPECT_EQ(ran.load(), 100);  // the other chunks still ran: no chunk is left half-owned
    expect_each_index_once(pool, 100, 1);  // and the pool is still usable
  }
}

TEST(ThreadPool, OneChunkRunsOnTheCallerAndItsExceptionReachesIt) {
  accel::ThreadPool pool(4);
  const auto caller = std::this_thread::get_id();
  int calls = 0;
  pool.parallel_for(10, 10, [&](size_t b, size_t e) {
    ++calls;
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(b, 0u);
    EXPECT_EQ(e, 10u);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_THROW(pool.parallel_for(3, 64, [](size_t, size_t) { throw std::runtime_error("the only chunk failed"); }),
               std::runtime_error);
  expect_each_index_once(pool, 1000, 10);  // the pool is still usable
}

}  // namespace
