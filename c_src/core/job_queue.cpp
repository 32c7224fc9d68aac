// JobQueue (see job_queue.hpp). Waiters are told outside the lock: their callbacks send messages.
#include "core/job_queue.hpp"

#include <algorithm>
#include <utility>

namespace accel {

JobQueue::JobQueue(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)), thread_([this] { serve(); }) {}

JobQueue::~JobQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

JobQueue::Ticket JobQueue::reserve(std::function<void()> on_free) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (in_use_ < capacity_) {
    ++in_use_;
    return Ticket(this);
  }
  if (on_free) waiters_.push_back(std::move(on_free));
  return Ticket();
}

void JobQueue::submit(Ticket&& ticket, std::unique_ptr<Job> job) {
  ticket.queue_ = nullptr;  // the place now belongs to the job, given back when it has run
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  ready_.notify_one();
}

size_t JobQueue::in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_;
}

void JobQueue::give_back() {
  std::vector<std::function<void()>> waiters;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --in_use_;
    waiters.swap(waiters_);
  }
  for (auto& tell : waiters) tell();
}

namespace {
thread_local JobQueue* t_serving = nullptr;  // the queue whose thread this is
}  // namespace

std::unique_ptr<JobQueue::Job> JobQueue::next(bool wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (wait) ready_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
  if (stop_ || jobs_.empty()) return nullptr;  // queued jobs are destroyed unrun with the queue
  std::unique_ptr<Job> job = std::move(jobs_.front());
  jobs_.pop_front();
  return job;
}

void JobQueue::run(std::unique_ptr<Job> job) {
  job->run();
  job.reset();  // before the place is given back: a job's memory counts against the bound
  give_back();
}

void JobQueue::serve() {
  t_serving = this;
  while (std::unique_ptr<Job> job = next(true)) run(std::move(job));
}

void JobQueue::serve_waiting() {
  JobQueue* q = t_serving;
  if (q == nullptr) return;
  size_t waiting = 0;
  {
    std::lock_guard<std::mutex> lock(q->mutex_);
    waiting = q->jobs_.size();
  }
  // only those queued now: jobs that arrive meanwhile wait for the next step
  for (; waiting > 0; --waiting) {
    std::unique_ptr<Job> job = q->next(false);
    if (!job) return;
    q->run(std::move(job));
  }
}

}  // namespace accel
