// ThreadPool (see thread_pool.hpp). A job lives on its caller's stack; `users` counts the workers
// holding a pointer to it, and the caller returns only when that count is zero and the job has left
// the queue, so no worker can touch a finished job.
#include "core/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <string>

#include "core/error.hpp"

namespace accel {

struct ThreadPool::Job {
  size_t n;
  size_t grain;
  size_t chunks;
  const std::function<void(size_t, size_t)>* fn;
  std::atomic<size_t> next{0};
  unsigned users = 0;  // guarded by the pool's mutex
  std::mutex error_mutex;
  std::exception_ptr error;
};

ThreadPool::ThreadPool(unsigned threads) {
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
    stop_ = true;
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

void ThreadPool::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    Job* job = jobs_.front();
    if (job->next.load(std::memory_order_relaxed) >= job->chunks) {
      jobs_.pop_front();  // every chunk is claimed: nothing left for workers
      continue;
    }
    ++job->users;
    lock.unlock();
    run_chunks(*job);
    lock.lock();
    if (--job->users == 0) job_done_.notify_all();
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
  if (share) {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(&job);
  }
  if (share) work_ready_.notify_all();
  run_chunks(job);
  if (share) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto it = std::find(jobs_.begin(), jobs_.end(), &job);
    if (it != jobs_.end()) jobs_.erase(it);
    job_done_.wait(lock, [&] { return job.users == 0; });
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
