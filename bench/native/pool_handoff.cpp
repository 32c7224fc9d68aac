// What handing a job to Accel's CPU threads costs (core/thread_pool.hpp), with no BEAM and no NIF:
// a compiled function's run, as a sequence of `ops` jobs of two chunks (the caller runs one, a
// worker the other), each after a few microseconds of serial work, through a pool whose worker
// sleeps between jobs and one whose worker polls first, as the CPU backend's does (kPoolSpin).
// The two pools alternate, `rounds` runs each; prints a markdown table of the min and median run
// per job against the work itself. Usage: pool_handoff [rounds] [ops]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "core/thread_pool.hpp"

namespace {

using Clock = std::chrono::steady_clock;

volatile double g_sink;

// Busy work for `us` microseconds (the clock read as it goes: the same time on any CPU).
void work_for(double us) {
  const auto start = Clock::now();
  double x = 1.0;
  while (std::chrono::duration<double, std::micro>(Clock::now() - start).count() < us) x = std::sqrt(x + 1.0);
  g_sink = x;
}

double run_us(accel::ThreadPool& pool, int ops, double chunk_us, double serial_us) {
  const auto start = Clock::now();
  for (int op = 0; op < ops; ++op) {
    work_for(serial_us);
    pool.parallel_for(2, 1, [&](size_t, size_t) { work_for(chunk_us); });
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / ops;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 41;
  const int ops = argc > 2 ? std::max(1, std::atoi(argv[2])) : 30;
  constexpr double kSerialUs = 3.0;
  const long spin_us = static_cast<long>(accel::cpu::kPoolSpin.count());
  accel::ThreadPool sleeping(2, std::chrono::microseconds(0)), polling(2, accel::cpu::kPoolSpin);
  std::printf("# Handing a job to Accel's CPU threads: sleeping against polling workers\n\n");
  std::printf("Made by `bin/bench` (bench/native/pool_handoff.cpp, no BEAM, no NIF): %d jobs of two chunks in a row,\n",
              ops);
  std::printf(
      "each after %.0f us of serial work, through a pool of 2 threads whose worker sleeps between jobs and one\n",
      kSerialUs);
  std::printf("whose worker polls for %ld us first (the CPU backend's pool); the pools alternate, %d runs each.\n",
              spin_us, rounds);
  std::printf("Per job: the fastest and the median run's time over its job count, against the work itself.\n\n");
  std::printf(
      "| chunk | work per job | sleeping worker: min / median per job | polling worker (%ld us): min / median |\n",
      spin_us);
  std::printf("|---:|---:|---:|---:|\n");
  for (double chunk : {5.0, 20.0, 100.0}) {
    std::vector<double> times[2];
    for (int r = 0; r < rounds; ++r) {
      times[0].push_back(run_us(sleeping, ops, chunk, kSerialUs));
      times[1].push_back(run_us(polling, ops, chunk, kSerialUs));
    }
    for (auto& t : times) std::sort(t.begin(), t.end());
    std::printf("| %.0f us | %.0f us | %.1f / %.1f us | %.1f / %.1f us |\n", chunk, chunk + kSerialUs, times[0][0],
                times[0][times[0].size() / 2], times[1][0], times[1][times[1].size() / 2]);
  }
  return 0;
}
