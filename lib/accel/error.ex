defmodule Accel.Error do
  @reasons [
    out_of_memory: "the host or a device could not hold the data or the result (the message says which)",
    device_unavailable: "a device or its driver stopped being usable, or is missing (CUDA without a driver)",
    opencl_error: "an OpenCL call failed for another reason; the message names the call and the error code",
    cuda_error:
      "a CUDA or cuBLAS call failed for another reason; the message names the call and CUDA's error",
    build_failed:
      "an OpenCL program, or a kernel's CPU or CUDA code (`Accel.Kernel`), did not compile; the message carries the log",
    no_compiler:
      "`Accel.Kernel` found no C compiler for a CPU kernel, or no NVRTC for a CUDA one (see \"The kernel cache\")",
    load_failed: "a compiled CPU kernel could not be loaded; the message carries the loader's reason",
    unsafe_cache:
      "the kernel cache (or an application's precompiled kernels) is writable by, or belongs to, another user: Accel loads no code from it (the message names the directory)",
    device_fault:
      "a command failed on a device in a way that may break its context (on a GPU, a kernel's out-of-bounds access: CUDA's sticky errors, OpenCL's `CL_OUT_OF_RESOURCES`): the call failed; the device was probed and its context rebuilt, or, where that failed too, fenced (the message says which)",
    device_lost:
      "memory the call uses (a tensor made before a `:device_fault`) went with the device's old context: make the tensor again",
    device_failed:
      "a device that faulted could not be rebuilt: it takes no more calls until the VM restarts, and `:auto` and `device: :all` leave it out; other devices and backends still work",
    cancelled: "the process that made the call exited, and the call was abandoned between chunks",
    timeout: "a call ran past its `timeout:` option (`Accel.map/3`) and was abandoned",
    thread_pool: "the OS would not start the CPU backend's threads (`config :accel, cpu_threads:`)",
    no_nodes: "`Accel.Cluster`: every node went down before the work was done",
    internal: "a bug in Accel: please report it with the message"
  ]

  @moduledoc """
  Raised for failures the caller did not cause; bad input raises `ArgumentError` instead. `reason`
  says what kind of failure it was, `message` the details:

  #{Enum.map_join(@reasons, "\n", fn {reason, doc} -> "  * `#{inspect(reason)}`: #{doc}" end)}
  """
  defexception [:reason, :message]

  # The type is the list above, so the two cannot disagree.
  @type reason :: unquote(@reasons |> Keyword.keys() |> Enum.reverse() |> Enum.reduce(&{:|, [], [&1, &2]}))
  @type t :: %__MODULE__{reason: reason(), message: String.t()}

  @doc "Every reason Accel raises, in the order documented above."
  @spec reasons() :: [reason()]
  def reasons, do: Keyword.keys(@reasons)
end
