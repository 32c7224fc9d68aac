defmodule Accel.BlasEnv do
  # Private: sets OPENBLAS_CORETYPE in the OS process's environment before Accel.NIF, and
  # OpenBLAS with it, load (Accel.NIF.load/0 says why). System.put_env/2 cannot: it changes the
  # VM's own copy of the environment, which native libraries do not read. So a NIF library whose
  # load callback calls setenv (c_src/nif/blas_env.cpp) is loaded with the value.
  @moduledoc false

  @doc "Sets OPENBLAS_CORETYPE to `core` (a value already set is kept): :ok or {:error, reason}."
  def put(core) when is_binary(core) do
    :erlang.load_nif(:filename.join(:code.priv_dir(:accel), ~c"accel_blas_env"), String.to_charlist(core))
  end

  @doc "OPENBLAS_CORETYPE as the OS process's environment has it (a charlist), or nil."
  def core, do: :erlang.nif_error(:not_loaded)
end
