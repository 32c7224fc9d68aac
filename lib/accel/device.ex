defmodule Accel.Device do
  @moduledoc """
  A device a backend can run on, as listed by `Accel.devices/0`. Pass one as `device:` to select it;
  its `:backend` then selects the backend too.

    * `:backend` - `:cpu`, `:opencl` or `:cuda`
    * `:id` - index within the backend's devices
    * `:platform` - OpenCL platform name (`"host"` for the CPU backend)
    * `:name`, `:type` (`:cpu`, `:gpu`, `:accelerator` or `:other`)
    * `:memory` - bytes of device memory; `:max_alloc` - the largest single buffer, in bytes
      (larger inputs are processed in chunks)
    * `:compute_units` - OpenCL compute units, CUDA multiprocessors, or CPU threads
    * `:capability` - CUDA compute capability, such as `"9.0"`; for the CPU backend, the
      instruction set its kernels run (`"x86-64-v4"`: AVX-512, or `"x86-64-v3"`: AVX2 and FMA,
      where the CPU has them, else `"x86-64"`); `nil` elsewhere
  """
  @enforce_keys [:backend, :id]
  defstruct [:backend, :id, :platform, :name, :type, :memory, :max_alloc, :compute_units, :capability]

  @type t :: %__MODULE__{
          backend: atom(),
          id: non_neg_integer(),
          platform: String.t(),
          name: String.t(),
          type: :cpu | :gpu | :accelerator | :other,
          memory: non_neg_integer(),
          max_alloc: non_neg_integer(),
          compute_units: non_neg_integer(),
          capability: String.t() | nil
        }
end
