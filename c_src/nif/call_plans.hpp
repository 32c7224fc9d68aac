// Call plans: the NIF calls one call of a compiled Nx function makes, recorded once and replayed
// in one crossing (the native half of Accel.Nx.Compiler.Plan).
//
// While a process records (plan_record_start .. plan_record_finish), every tensor NIF body it runs
// on the CPU, inline or on the dirty scheduler its NIF sent it to (run_inline, recorded_dirty), is
// noted: the function, a copy of its arguments and a copy of its result. Every other NIF call the
// process makes meanwhile (work queued on a device, a read-back to the host, anything not run
// through run_inline) is counted, and spoils the recording; only bookkeeping that neither makes
// nor reads a tensor is not (guarded<F, false>: the VM-wide tensor-pressure check, which a replay
// makes in Elixir after it, from the bytes it reports). A plan therefore holds only calls whose results are functions
// of their tensor arguments and of terms Elixir computed from shapes and types, never from data, so
// running the same functions over the same terms, with the tensors of a new call in the places the
// recorded ones had, gives what the Elixir code would have given. A replay also checks every result
// against the recorded one (each non-tensor part, a kernel's division-by-zero flag, the same) and
// reports a mismatch, for Elixir to run the call its own way, where any differs. The tensors a
// replay makes stay tensors, with no resource or term, until an output or a NIF body that reads
// terms needs one, and are let go where the recording freed them (most never become terms: a
// 1 x 8 -> 4 -> 2 training step's replay took 0.6x the time that made a resource for each).
#pragma once

#include <erl_nif.h>

#include "nif/nif_util.hpp"

namespace accel::nif {

bool open_call_plan_resources(ErlNifEnv* env);

// Runs `run` (a tensor NIF's body) here, noting the call where the calling process records.
ERL_NIF_TERM run_inline(NifFn run, ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]);

// A tensor NIF's body on the dirty CPU scheduler its entry (guarded, counted once) sent it to:
// noted like an inline call (a process waits for its dirty call as for an inline one), so that a
// plan may hold work too large to run inline; a plan whose calls took 0.5 ms or more replays on a
// dirty scheduler in turn. Use in place of guarded<Run> where the entry schedules the body.
template <NifFn Run>
ERL_NIF_TERM recorded_dirty(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) noexcept {
  try {
    return run_inline(Run, env, argc, argv);
  } catch (...) {
    return enif_raise_exception(env, current_exception_term(env));
  }
}

// () -> cell: where a compiled function keeps its plan (none yet).
ERL_NIF_TERM plan_cell(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]);
// (cell) -> recording, or false where the process records already: it records until finish or stop.
ERL_NIF_TERM plan_record_start(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]);
// (recording, params, outputs, signature, meta) -> true | {false, reason}: the plan, kept in the
// cell, where the recorded calls make one; params and outputs are lists of tensor references.
ERL_NIF_TERM plan_record_finish(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]);
// (recording) -> ok: stops recording (after finish, nothing to do).
ERL_NIF_TERM plan_record_stop(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]);
// (cell, params, signature) -> {outputs, bytes since the last collection, meta} | record | none |
// mismatch: the plan run over new parameters where the signature is the recorded one; `record`
// asks the caller to record this call, `none` to run it its own way (no plan, or none to be had).
ERL_NIF_TERM plan_replay(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]);

}  // namespace accel::nif
