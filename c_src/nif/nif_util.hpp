// What every NIF function needs: atoms made at load time, Elixir exceptions raised from C++, and the
// one place where C++ exceptions stop (guarded<>): nothing thrown below ever reaches the VM.
#pragma once

#include <erl_nif.h>

#include <atomic>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace accel::nif {

struct Atoms {
  ERL_NIF_TERM ok, true_, false_, nil, list, binary, auto_, cpu, opencl, cuda;
  ERL_NIF_TERM accel_queued, accel_busy, retry, raise;
  ERL_NIF_TERM struct_, exception, message, reason, first, last, step;
  ERL_NIF_TERM range_module, argument_error_module, accel_error_module;
  ERL_NIF_TERM none, record, mismatch;
};
extern Atoms atoms;
void make_atoms(ErlNifEnv* env);

ERL_NIF_TERM make_string(ErlNifEnv* env, std::string_view text);

// Builds %ArgumentError{message: ...} (or %Accel.Error{reason:, message:}) and raises it: Elixir
// sees the struct itself, not an ErlangError wrapping it.
ERL_NIF_TERM raise_argument_error(ErlNifEnv* env, std::string_view message);
ERL_NIF_TERM raise_accel_error(ErlNifEnv* env, std::string_view reason, std::string_view message);

// The Elixir exception struct for the C++ exception being handled: call only inside a catch block.
// std::invalid_argument (accel::ArgumentError) is ArgumentError; accel::Error is Accel.Error with
// its reason; std::bad_alloc is Accel.Error :out_of_memory; anything else Accel.Error :internal.
ERL_NIF_TERM current_exception_term(ErlNifEnv* env) noexcept;

// The term as Elixir-ish text for error messages, cut at `max` characters.
std::string describe_term(ErlNifEnv* env, ERL_NIF_TERM term, size_t max = 80);

using NifFn = ERL_NIF_TERM (*)(ErlNifEnv*, int, const ERL_NIF_TERM[]);

// Call plans (call_plans.hpp): while any process records its calls, each NIF call is counted for
// the process that makes it (a call not recorded spoils its recording).
extern std::atomic<int> g_recording_processes;
void count_call_while_recording(ErlNifEnv* env) noexcept;

// A NIF entry that turns C++ exceptions into Elixir's. `counted` false is for bookkeeping that
// neither makes nor reads a tensor (tensor_take_pressure, which Elixir calls where the bytes made
// VM-wide pass a threshold, whatever other processes made): it cannot spoil a recording.
template <NifFn F, bool counted = true>
ERL_NIF_TERM guarded(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) noexcept {
  if (counted && g_recording_processes.load(std::memory_order_relaxed) != 0) count_call_while_recording(env);
  try {
    return F(env, argc, argv);
  } catch (...) {
    return enif_raise_exception(env, current_exception_term(env));
  }
}

}  // namespace accel::nif
