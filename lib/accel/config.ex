defmodule Accel.Config do
  # One source for every `config :accel` key: its default, its rule (Accel.Options' rules; nil is
  # accepted where the default is nil) and what it does. The moduledoc below is generated from it.
  @keys [
    cpu_threads:
      {0, {:integer, 0, 1024},
       "threads of the CPU backend, 0 for one per hardware thread; read when the NIF loads"},
    device_queue_limit:
      {64, {:integer, 1, 100_000},
       "device calls queued or running at once per device; further callers wait for a place " <>
         "(in `receive`, holding no scheduler); read when the NIF loads"},
    max_bytes:
      {nil, {:integer, 16, nil},
       "the default device-memory budget of a call (see `Accel.logistic_map/2`'s `:max_bytes`)"},
    kernel_cache:
      {nil, {:custom, Accel.Config, :path?, "a directory path (a string)"},
       "where compiled CPU kernels (`Accel.Kernel`) are cached; default: the user cache directory " <>
         "(`:filename.basedir(:user_cache, \"accel\")`), or `ACCEL_KERNEL_CACHE` when set"},
    nx_build:
      {:background, {:in, [:background, :wait]},
       "how `Accel.Nx.Compiler` builds a function's fused kernels on the CPU backend where the " <>
         "disk cache lacks them (its `:build` option's default): `:background` runs the first " <>
         "calls unfused while the C compiler builds them, `:wait` builds them before the first call"},
    staged_transfers:
      {:auto, {:in, [:auto, :always, :never]},
       "how GPUs move large transfers (4 MiB and more) of memory that is not page-locked: `:auto` " <>
         "copies it by several threads through a few pinned buffers of the device's (32 MiB each " <>
         "device) while the GPU's copy engine moves those filled before, at the bus's speed; " <>
         "`:never` leaves it to the driver (one thread, pageable); `:always` stages on every " <>
         "OpenCL and CUDA device, CPU devices too (for tests); read when the NIF loads"},
    tensor_gc_bytes:
      {268_435_456, {:integer, 1, nil},
       "tensor bytes made in the VM between garbage collections of the processes that made them (see `Accel.Tensor`)"}
  ]

  @moduledoc """
  Accel's application settings, each checked when it is read: a bad value raises `ArgumentError`
  naming the key, or, for the settings read when the NIF loads, stops it loading with that message.

  #{Enum.map_join(@keys, "\n", fn {key, {default, check, doc}} -> "  * `:#{key}` - #{doc}. Must be #{Accel.Options.expected(check, default)}; default `#{inspect(default)}`." end)}
  """

  @doc false
  def path?(value), do: is_binary(value) and value != ""

  @doc false
  def default(key), do: elem(Keyword.fetch!(@keys, key), 0)

  @doc "The value of `key`, or `{:error, message}` when it is set to something invalid."
  @spec fetch(atom()) :: {:ok, term()} | {:error, String.t()}
  def fetch(key) do
    {default, check, _doc} = Keyword.fetch!(@keys, key)
    value = Application.get_env(:accel, key, default)

    if (value == nil and default == nil) or Accel.Options.valid?(check, value),
      do: {:ok, value},
      else:
        {:error,
         "config :accel, #{key}: must be #{Accel.Options.expected(check, default)}, got: #{inspect(value, limit: 5)}"}
  end

  @doc "The value of `key`; raises `ArgumentError` naming the key when it is invalid."
  @spec get!(atom()) :: term()
  def get!(key) do
    case fetch(key) do
      {:ok, value} -> value
      {:error, message} -> raise ArgumentError, message
    end
  end
end
