// A bounded first-in, first-out queue of jobs served by one thread of Accel's own: every call that
// waits on a device goes through the queue of that device, so no thread of the caller's (in the
// NIF: no BEAM scheduler) waits for the device, and calls on one device run in submission order.
// Memory is bounded by reserving a place before the work is even decoded: when the queue is full,
// the caller is told when a place frees instead of waiting for it. Knows nothing of the BEAM.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace accel {

class JobQueue {
 public:
  // A unit of work. run() is called once on the queue's thread and must not throw; a job that is
  // never run (the queue was destroyed first) is only destroyed.
  struct Job {
    virtual ~Job() = default;
    virtual void run() noexcept = 0;
  };

  // A place reserved in the queue, given back on destruction unless submit() used it.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept : queue_(other.queue_) { other.queue_ = nullptr; }
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket() {
      if (queue_ != nullptr) queue_->give_back();
    }
    explicit operator bool() const { return queue_ != nullptr; }

   private:
    friend class JobQueue;
    explicit Ticket(JobQueue* queue) : queue_(queue) {}
    JobQueue* queue_ = nullptr;
  };

  // `capacity`: jobs reserved, queued or running at once (at least 1).
  explicit JobQueue(size_t capacity);
  ~JobQueue();  // runs the job in progress to its end, destroys the queued ones unrun
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  // A place, or an empty ticket when the queue is full: then `on_free`, unless empty, is called
  // once, on the queue's thread, after a place frees (every waiter is told; each tries again).
  Ticket reserve(std::function<void()> on_free = {});
  void submit(Ticket&& ticket, std::unique_ptr<Job> job);

  // Called by a running job on its queue's thread between steps of a long piece of work (a kernel
  // in bounded launches): runs the jobs queued behind it at this moment, so that a long call
  // lets later ones through instead of holding the device until it ends. Elsewhere, a no-op.
  static void serve_waiting();

  size_t capacity() const { return capacity_; }
  size_t in_use() const;  // reserved, queued or running
  bool on_queue_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void give_back();
  void serve();
  std::unique_ptr<Job> next(bool wait);  // the front job, or null (stopping; or none, unless `wait`)
  void run(std::unique_ptr<Job> job);

  const size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::unique_ptr<Job>> jobs_;
  std::vector<std::function<void()>> waiters_;
  size_t in_use_ = 0;
  bool stop_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace accel
