// Device jobs (see device_jobs.hpp) and Runtime::queue.
#include "nif/device_jobs.hpp"

#include <memory>
#include <string>
#include <vector>

#include "nif/runtime.hpp"

namespace accel::nif {
namespace {

// The caller of the job this thread is running, if any (a queue's thread runs one job at a time).
thread_local const ErlNifPid* t_job_caller = nullptr;

// A message and the process it is for, in an environment of its own so that it can be sent from
// any thread, at any later time.
class Letter {
 public:
  Letter(ErlNifEnv* caller_env, ERL_NIF_TERM ref) : env_(enif_alloc_env()) {
    if (env_ == nullptr) throw std::bad_alloc();
    enif_self(caller_env, &to_);
    ref_ = enif_make_copy(env_, ref);
  }
  ~Letter() { enif_free_env(env_); }
  Letter(const Letter&) = delete;
  Letter& operator=(const Letter&) = delete;

  ErlNifEnv* env() const { return env_; }
  const ErlNifPid& to() const { return to_; }
  bool reader_alive() const { return enif_is_process_alive(nullptr, const_cast<ErlNifPid*>(&to_)) != 0; }
  // Sends {ref, body}; body must live in env(). Called from a thread the BEAM did not create.
  void send(ERL_NIF_TERM body) { enif_send(nullptr, &to_, env_, enif_make_tuple2(env_, ref_, body)); }

 private:
  ErlNifEnv* env_;
  ErlNifPid to_;
  ERL_NIF_TERM ref_;
};

class NifJob final : public JobQueue::Job {
 public:
  NifJob(ErlNifEnv* caller_env, NifFn run, int argc, const ERL_NIF_TERM args[])
      : letter_(caller_env, args[argc - 1]), run_(run) {
    args_.reserve(static_cast<size_t>(argc));
    for (int i = 0; i < argc; ++i) args_.push_back(enif_make_copy(letter_.env(), args[i]));
  }

  void run() noexcept override {
    if (!letter_.reader_alive()) return;  // killed or timed out while queued: nobody waits
    ErlNifEnv* env = letter_.env();
    ERL_NIF_TERM reply;
    const ErlNifPid* outer = t_job_caller;  // a job that lets queued ones run in its pauses (JobQueue::serve_waiting)
    t_job_caller = &letter_.to();
    try {
      reply = enif_make_tuple2(env, atoms.ok, run_(env, static_cast<int>(args_.size()), args_.data()));
    } catch (...) {
      reply = enif_make_tuple2(env, atoms.raise, current_exception_term(env));
    }
    t_job_caller = outer;
    letter_.send(reply);
  }

 private:
  Letter letter_;
  NifFn run_;
  std::vector<ERL_NIF_TERM> args_;
};

}  // namespace

JobQueue::Ticket reserve_place(ErlNifEnv* env, JobQueue& queue, ERL_NIF_TERM ref) {
  // Most calls find a place: the letter (an environment of its own) is made only for a full queue.
  // The second try registers it atomically, so a place freed in between is not missed.
  if (JobQueue::Ticket ticket = queue.reserve()) return ticket;
  auto letter = std::make_shared<Letter>(env, ref);
  return queue.reserve([letter] { letter->send(atoms.retry); });
}

ERL_NIF_TERM submit(ErlNifEnv* env, JobQueue::Ticket&& ticket, JobQueue& queue, NifFn run, int argc,
                    const ERL_NIF_TERM args[]) {
  queue.submit(std::move(ticket), std::make_unique<NifJob>(env, run, argc, args));
  return atoms.accel_queued;
}

ERL_NIF_TERM submit_now(ErlNifEnv* env, JobQueue& queue, NifFn run, int argc, const ERL_NIF_TERM argv[]) {
  JobQueue::Ticket ticket = reserve_place(env, queue, argv[argc - 1]);
  if (!ticket) return atoms.accel_busy;
  return submit(env, std::move(ticket), queue, run, argc, argv);
}

bool calling_process(ErlNifEnv* env, ErlNifPid* pid) {
  if (t_job_caller != nullptr) {
    *pid = *t_job_caller;
    return true;
  }
  return enif_self(env, pid) != nullptr;
}

Cancellation caller_cancellation(ErlNifEnv* env) {
  if (t_job_caller != nullptr) {
    ErlNifPid caller = *t_job_caller;
    return Cancellation([caller]() mutable { return enif_is_process_alive(nullptr, &caller) != 0; });
  }
  // The calling process's own check on its thread; the pool's threads ask by its pid (with no
  // environment, as threads the VM did not create must).
  ErlNifPid self;
  if (enif_self(env, &self) == nullptr) return Cancellation([env] { return enif_is_current_process_alive(env) != 0; });
  return Cancellation([env] { return enif_is_current_process_alive(env) != 0; },
                      [self]() mutable { return enif_is_process_alive(nullptr, &self) != 0; });
}

void Runtime::check_device(Backend& backend, int64_t device) {
  const size_t count = backend.devices().size();
  if (device >= 0 && static_cast<uint64_t>(device) < count) return;
  const BackendStatus status = backend.status();
  if (count == 0) throw ArgumentError("backend :" + status.name + " is unavailable: " + status.detail);
  throw ArgumentError("no :" + status.name + " device " + std::to_string(device) + ": the backend has " +
                      std::to_string(count) + " (see Accel.devices/0)");
}

JobQueue& Runtime::queue(Backend& backend, int device) {
  std::lock_guard<std::mutex> lock(queues_mutex_);
  auto found = queues_.find({&backend, device});
  if (found != queues_.end()) return *found->second;
  check_device(backend, device);
  auto& slot = queues_[{&backend, device}];
  slot = std::make_unique<JobQueue>(queue_limit);
  return *slot;
}

std::vector<Runtime::QueueState> Runtime::queue_states() {
  std::lock_guard<std::mutex> lock(queues_mutex_);
  std::vector<QueueState> out;
  for (const auto& [key, queue] : queues_) out.push_back({key.first, key.second, queue->in_use(), queue->capacity()});
  return out;
}

}  // namespace accel::nif
