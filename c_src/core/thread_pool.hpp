// A fixed pool of worker threads, created once and shared by every call. parallel_for splits [0, n)
// into chunks; the calling thread works on its own job too, so a call never waits idle for a worker
// and concurrent callers (several dirty schedulers) all make progress.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace accel {

class ThreadPool {
 public:
  // `threads` counts the caller: a pool of 4 has 3 workers. 0 means one per hardware thread.
  // `spin`: how long a worker that ran a job polls for the next before it sleeps, and a caller
  // polls for the workers on its job to finish before it sleeps (0: both sleep at once). A pool
  // that runs jobs microseconds apart (a compiled function's kernels) spins: a sleeping thread
  // costs a futex wake and a context switch on both sides of every job.
  // Throws accel::Error("thread_pool") when the OS will not start that many threads.
  explicit ThreadPool(unsigned threads = 0, std::chrono::microseconds spin = std::chrono::microseconds(0));
  ~ThreadPool();  // finishes queued chunks' owners first: only destroy when no call is in flight
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned threads() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n), each at most `grain` long, and
  // returns when all have run. The first exception thrown by fn is rethrown here. One chunk runs
  // here as a plain call (no job, no std::function to allocate: most launches of small tensors).
  template <typename Fn>
  void parallel_for(size_t n, size_t grain, Fn&& fn) {
    if (n == 0) return;
    if (n <= grain || n == 1) {
      fn(size_t{0}, n);
      return;
    }
    run_jobs(n, grain, std::function<void(size_t, size_t)>(std::forward<Fn>(fn)));
  }

 private:
  void run_jobs(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);
  struct Job;
  void worker_loop();
  void stop_workers() noexcept;
  static void run_chunks(Job& job);

  template <typename Done>
  bool spin_until(Done done) const;
  void queue_changed() { queued_.store(jobs_.size(), std::memory_order_release); }

  const std::chrono::microseconds spin_;
  std::mutex mutex_;
  std::condition_variable work_ready_;  // workers: a job was queued, or stop
  std::condition_variable job_done_;    // callers: a worker let go of a job
  std::deque<Job*> jobs_;
  std::atomic<size_t> queued_{0};  // jobs_.size(), read by spinning workers without the mutex
  unsigned sleeping_ = 0;          // workers waiting on work_ready_
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
};

// One pool of a thread per hardware thread, made on first use and shared by the host-side work of
// every backend (staged copies, the FFT's rows); null where the OS starts no thread (the caller
// then works alone).
ThreadPool* host_pool();

}  // namespace accel
