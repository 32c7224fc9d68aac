// Device work off the BEAM's schedulers. A NIF that would wait on a device submits its body to that
// device's JobQueue instead and returns at once; Accel's thread for the device runs it and sends
// the result to the caller, which waits in `receive` (Accel.Job), holding no scheduler.
//
// Protocol with Accel.Job (lib/accel/job.ex): the NIF's last argument is a reference the caller
// made; the NIF returns :accel_queued, then the caller gets {ref, {:ok, result}} or
// {ref, {:raise, exception}}; or it returns :accel_busy when the device's queue is full, and the
// caller gets {ref, :retry} once a place frees, then calls again.
#pragma once

#include <erl_nif.h>

#include "core/cancel.hpp"
#include "core/job_queue.hpp"
#include "nif/nif_util.hpp"

namespace accel::nif {

// A place in `queue` for the calling process, or an empty ticket after arranging for {ref, :retry}
// to be sent to it when a place frees. Reserve before decoding anything large: a full queue then
// costs the caller nothing but the wait.
JobQueue::Ticket reserve_place(ErlNifEnv* env, JobQueue& queue, ERL_NIF_TERM ref);

// Queues `run(job_env, argc, args)` and returns :accel_queued; ref is args[argc - 1]. Every argument
// is copied into the job's own environment first: binaries and resources are shared, not copied,
// so decode a large list before submitting it (see logistic_map in accel_nif.cpp). A job whose
// caller has died by the time it would start is dropped unrun.
ERL_NIF_TERM submit(ErlNifEnv* env, JobQueue::Ticket&& ticket, JobQueue& queue, NifFn run, int argc,
                    const ERL_NIF_TERM args[]);

// Reserves and submits in one step, for work with nothing to decode: :accel_queued or :accel_busy.
ERL_NIF_TERM submit_now(ErlNifEnv* env, JobQueue& queue, NifFn run, int argc, const ERL_NIF_TERM argv[]);

// The cancellation for the call running on this thread: set once its caller has exited. Inside a
// job that is the job's caller; in a NIF called directly, the calling process.
Cancellation caller_cancellation(ErlNifEnv* env);

// The process a call works for (a job's caller, or the calling process): false where there is none.
bool calling_process(ErlNifEnv* env, ErlNifPid* pid);

}  // namespace accel::nif
