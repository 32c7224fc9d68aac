// ThreadPool (see thread_pool.hpp). A job lives on its caller's stack; `users` counts the workers
// holding a pointer to it, and the caller returns only when that count is zero and the job has left
// the queue, so no worker can touch a finished job.
#include "core/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <string>

#include "core/error.hpp"

namespace accel {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

struct ThreadPool::Job {
  size_t n;
  size_t grain;
  size_t chunks;
  const std::function<void(size_t, size_t)>* fn;
  std::atomic<size_t> next{0};
  // changed under the pool's mutex; read without it by a caller polling for its job to finish (a
  // worker touches the job no more once it has let go of it)
  std::atomic<unsigned> users{0};
  std::mutex error_mutex;
  std::exception_ptr error;
};

// Polls done() until it holds or the pool's spin has passed; whether it holds. Every 64 polls it
// reads the clock and yields the core to any other thread ready to run on it (a BEAM scheduler,
// say): a spinning thread takes only time that nothing else wants.
template <typename Done>
bool ThreadPool::spin_until(Done done) const {
  if (spin_.count() <= 0) return done();
  const auto until = std::chrono::steady_clock::now() + spin_;
  for (unsigned i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % 64 == 0) {
      if (std::chrono::steady_clock::now() >= until) return done();
      std::this_thread::yield();
    }
  }
}

ThreadPool::ThreadPool(unsigned threads, std::chrono::microseconds spin) : spin_(spin) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  try {
    workers_.reserve(threads - 1);
    for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  } catch (const std::exception& e) {
    // The OS refused a thread (or memory for one): stop those already started, since a joinable
    // std::thread destroyed during unwinding would end the process.
    const size_t started = workers_.size();
    stop_workers();
    throw Error("thread_pool", "could not start " + std::to_string(threads) + " CPU threads (" +
                                   std::to_string(started + 1) + " started): " + e.what());
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::run_chunks(Job& job) {
  for (size_t i; (i = job.next.fetch_add(1, std::memory_order_relaxed)) < job.chunks;) {
    const size_t begin = i * job.grain;
    try {
      (*job.fn)(begin, std::min(job.n, begin + job.grain));
    } catch (...) {
      std::lock_guard<std::mutex> lock(job.error_mutex);
      if (!job.error) job.error = std::current_exception();
    }
  }
}

// A worker sleeps only where spinning found no job, and a caller wakes the workers only where one
// sleeps: a worker counts itself in sleeping_ under the mutex before it waits, and a caller reads
// the count under the mutex after queueing its job, so either the worker sees the job or the
// caller sees the worker.
void ThreadPool::worker_loop() {
  for (;;) {
    spin_until([this] { return queued_.load(std::memory_order_acquire) != 0 || stop_.load(); });
    std::unique_lock<std::mutex> lock(mutex_);
    if (!stop_ && jobs_.empty()) {
      ++sleeping_;
      work_ready_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      --sleeping_;
    }
    if (stop_) return;
    Job* job = jobs_.front();
    if (job->next.load(std::memory_order_relaxed) >= job->chunks) {
      jobs_.pop_front();  // every chunk is claimed: nothing left for workers
      queue_changed();
      continue;
    }
    job->users.fetch_add(1, std::memory_order_relaxed);
    lock.unlock();
    run_chunks(*job);
    lock.lock();
    if (job->users.fetch_sub(1, std::memory_order_acq_rel) == 1) job_done_.notify_all();
  }
}

void ThreadPool::run_jobs(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  grain = std::max<size_t>(grain, 1);
  Job job;
  job.n = n;
  job.grain = grain;
  job.chunks = n / grain + (n % grain != 0);
  job.fn = &fn;

  const bool share = !workers_.empty() && job.chunks > 1;
  bool wake = false;
  if (share) {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(&job);
    queue_changed();
    wake = sleeping_ > 0;
  }
  if (wake) work_ready_.notify_all();
  run_chunks(job);
  if (share) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto it = std::find(jobs_.begin(), jobs_.end(), &job);
    if (it != jobs_.end()) {
      jobs_.erase(it);
      queue_changed();
    }
    const auto finished = [&] { return job.users.load(std::memory_order_acquire) == 0; };
    if (!finished()) {
      lock.unlock();
      if (!spin_until(finished)) {
        lock.lock();
        job_done_.wait(lock, finished);
      }
    }
  }
  // users == 0 and every chunk claimed: each claimed chunk has finished.
  if (job.error) std::rethrow_exception(job.error);
}

ThreadPool* host_pool() {
  static const std::unique_ptr<ThreadPool> pool = []() -> std::unique_ptr<ThreadPool> {
    try {
      return std::make_unique<ThreadPool>();
    } catch (...) {  // no threads to be had
      return nullptr;
    }
  }();
  return pool.get();
}

}  // namespace accel
