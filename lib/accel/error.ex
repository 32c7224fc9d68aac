defmodule Accel.Error do
  @moduledoc """
  Raised for failures the caller did not cause: the machine ran out of memory (`reason:
  :out_of_memory`), or an internal error (`reason: :internal`, a bug: please report it). Bad input
  raises `ArgumentError` instead.
  """
  defexception [:reason, :message]
end
