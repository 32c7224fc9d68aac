// accel_blas_env: a NIF library for Accel.BlasEnv whose load callback sets OPENBLAS_CORETYPE in
// the OS process's environment, where os:putenv/2 cannot (it changes only the VM's own copy,
// which native libraries do not read). Loaded before Accel's NIF, and OpenBLAS with it: OpenBLAS
// reads the variable once, as it loads (see lib/accel/nif.ex). A value already set is kept.
#include <erl_nif.h>

#include <cstdlib>

namespace {

int load(ErlNifEnv* env, void**, ERL_NIF_TERM info) {
  char core[64];
  if (enif_get_string(env, info, core, sizeof core, ERL_NIF_LATIN1) <= 0) return 1;
  return setenv("OPENBLAS_CORETYPE", core, 0) == 0 ? 0 : 1;
}

// OPENBLAS_CORETYPE as the process's environment has it, or nil
ERL_NIF_TERM core(ErlNifEnv* env, int, const ERL_NIF_TERM*) {
  const char* value = std::getenv("OPENBLAS_CORETYPE");
  return value == nullptr ? enif_make_atom(env, "nil") : enif_make_string(env, value, ERL_NIF_LATIN1);
}

ErlNifFunc funcs[] = {{"core", 0, core, 0}};

}  // namespace

ERL_NIF_INIT(Elixir.Accel.BlasEnv, funcs, load, nullptr, nullptr, nullptr)
