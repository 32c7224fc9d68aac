defmodule Accel do
  @moduledoc """
  Data-parallel kernels for the BEAM, run by a C++17 NIF that never blocks a normal scheduler.

  Inputs cross the NIF in the cheapest form the caller has:

    * a binary of native-endian signed 64-bit integers is read in place (zero copy), and large
      results come back as binaries that Accel owns, so nothing is copied on the way out either;
    * a `Range` is generated natively, never materialised as a list;
    * a list of integers is the convenience path: it is converted element by element.

  Small calls run on the calling scheduler; larger ones move to a dirty CPU scheduler (see
  guides/reliability.md). Bad input raises `ArgumentError` naming the offending option or element;
  failures of the machine raise `Accel.Error`.
  """

  @backends [:auto, :cpu, :opencl, :cuda]
  # the backends that have devices of their own (:auto picks one of theirs)
  @device_backends @backends -- [:auto]

  @logistic_options [
    p: [rule: {:integer, 1, 0x7FFFFFFFFFFFFFFF}, default: 6_700_417, doc: "the modulus"],
    mu: [rule: :integer, default: 22, doc: "the multiplier"],
    iterations: [rule: {:integer, 0, 0x7FFFFFFFFFFFFFFF}, default: 10, doc: "how many times to apply the map"],
    backend: [
      rule: {:in, @backends},
      default: :auto,
      doc:
        "`:auto`, `:cpu`, `:opencl` or `:cuda`; see `backends/0`. `:auto` is the device with the " <>
          "least predicted time for this call, measured on this machine (`plan/3` says which, and why)"
    ],
    device: [
      rule:
        {:custom, Accel.Devices, :device_option?,
         "an Accel.Device, a non-negative index, :all or a non-empty list of Accel.Device"},
      default: nil,
      doc:
        "an `Accel.Device` from `devices/0` (selects its backend too), an index into the chosen " <>
          "backend's devices, `:all` (every usable device, less OpenCL devices on the host's CPU when " <>
          "the CPU backend takes part, which share its cores, and less NVIDIA's OpenCL view of a GPU " <>
          "that CUDA drives), or a list of devices. " <>
          Accel.Placement.Sharing.sharing_doc() <>
          " A device that does not exist raises `ArgumentError`"
    ],
    chunk_size: [
      rule: {:integer, 1, nil},
      default: nil,
      doc:
        "process at most this many elements at a time on a device (default: as many as its largest " <>
          "buffer holds); results are identical whatever the chunking"
    ],
    max_bytes: [
      rule: {:integer, 16, nil},
      default: nil,
      doc:
        "a device-memory budget for the call, at least 16 (default: `config :accel, max_bytes: n`, or " <>
          "none): inputs are chunked so that the two device buffers of a double-buffered call fit in it"
    ],
    as: [rule: {:in, [:list, :binary]}, default: nil, doc: "`:list` or `:binary`"]
  ]

  @typedoc "A list of integers, a `Range`, or a binary of native-endian signed 64-bit integers."
  @type int64_input :: [integer()] | Range.t() | binary()

  @doc """
  Applies `x -> rem(mu * x * (x + 1), p)` `iterations` times to every element.

  Results are exact, equal to this pure-Elixir definition, for every signed 64-bit input, every
  signed 64-bit `mu`, `1 <= p <= 2^63 - 1` and `0 <= iterations < 2^63`: products are reduced
  modulo `p` before they could overflow, never truncated.

  Returns a list for list and range input and a binary for binary input, unless `:as` says otherwise.
  An `:s64` `Accel.Tensor` gives a new tensor on the same device, with no host round trip (only
  `:p`, `:mu` and `:iterations` apply).

  ## Options

  #{Accel.Options.docs(@logistic_options)}

  Each option may be given once; unknown options raise `ArgumentError`.

  ## Examples

      iex> Accel.logistic_map(1..10)
      [5756693, 3714507, 3456095, 6578590, 2830244, 6018359, 3928136, 3291622, 2592373, 2538985]

      iex> Accel.logistic_map([1, 2, 3], p: 61, mu: 22)
      [28, 25, 37]

      iex> Accel.logistic_map(<<1::signed-native-64, -2::signed-native-64>>, p: 61, iterations: 1)
      <<44::signed-native-64, 44::signed-native-64>>

      iex> Accel.logistic_map(1..3, p: 61, as: :binary) |> byte_size()
      24
  """
  @spec logistic_map(int64_input() | Accel.Tensor.t(), keyword()) :: [integer()] | binary() | Accel.Tensor.t()
  def logistic_map(input, opts \\ [])

  def logistic_map(%Accel.Tensor{} = t, opts) do
    opts = Accel.Options.validate!(opts, @logistic_options, "Accel.logistic_map/2")

    for key <- [:backend, :device, :chunk_size, :max_bytes, :as],
        opts[key] != @logistic_options[key][:default] do
      raise ArgumentError,
            "option #{inspect(key)} does not apply to a tensor: it runs where the tensor is " <>
              "(move it with Accel.Tensor.transfer/2) and returns a tensor"
    end

    Accel.Tensor.logistic_map(t, opts[:p], opts[:mu], opts[:iterations])
  end

  def logistic_map(input, opts) do
    opts = Accel.Options.validate!(opts, @logistic_options, "Accel.logistic_map/2")
    check_input!(input)
    as = opts[:as] || if(is_binary(input), do: :binary, else: :list)
    Accel.LogisticMap.run(input, opts, as)
  end

  @doc """
  Where `backend: :auto` would run `Accel.logistic_map(input, opts)` (`what` is `:logistic_map`)
  or `Accel.map(input, kernel, opts)` (`what` is the kernel, or an operation's name), and the
  predictions behind the choice (see `Accel.Placement`): measured on first use, kept per machine,
  nothing logged. Options as for that call, and `devices:`, a list of `Accel.Device` to choose
  among (`backend: :cpu` and the like name where a call runs: there is nothing to plan). With
  `device: :all` or a list of devices, the plan is the sharing decision that call makes: whether
  the devices share it (`:device` is then the list), each one's share (`:shares`), or why the best
  of them runs it alone.

      iex> plan = Accel.plan(1..10, :logistic_map)
      iex> plan.device.backend
      :cpu
      iex> plan.reason
      "10 elements are below 4096: the CPU backend, since no device trip pays for so few"
  """
  @spec plan(term(), :logistic_map | Accel.Kernel.t() | atom(), keyword()) :: Accel.Placement.t()
  def plan(input, what, opts \\ [])

  def plan(input, :logistic_map, opts) do
    {devices, opts} = plan_devices!(opts)
    opts = Accel.Options.validate!(opts, @logistic_options, "Accel.plan/3")
    check_input!(input)
    # a malformed input raises here what the call would raise, naming the element
    if Accel.Placement.count(input) == nil,
      do:
        if(is_list(input),
          do: Accel.NIF.int64_binary(input),
          else: Accel.NIF.int64_output_count(input, :binary)
        )

    # the call's output form, fixed before a shared call decodes a list
    shape = [iterations: opts[:iterations], as: opts[:as] || if(is_binary(input), do: :binary, else: :list)]

    case Accel.Devices.plan_scope!(devices, opts) do
      # as the call does, too small to share: the candidates' plan is the CPU backend's, unmeasured
      {:share, devices} ->
        if Accel.LogisticMap.small_for_all?(input, opts),
          do: Accel.Placement.plan(input, shape),
          else: Accel.Placement.Sharing.plan_split(host_binary(input), devices, shape)

      {:choose, devices} ->
        Accel.Placement.plan(input, [devices: devices] ++ shape)
    end
  end

  def plan(input, %Accel.Kernel{} = kernel, opts) do
    {devices, rest} = plan_devices!(opts)
    Accel.Kernel.Map.plan(input, kernel, [devices: devices] ++ rest)
  end

  def plan(input, what, opts) do
    operation!(what, "plan/3 plans :logistic_map calls and Accel.map/3 with a kernel or an operation's name")
    {devices, rest} = plan_devices!(opts)
    Accel.Tensor.Offload.plan(input, what, [devices: devices] ++ rest)
  end

  defp plan_devices!(opts) do
    {devices, rest} = opts |> Accel.Options.keyword!("Accel.plan/3") |> Keyword.pop(:devices)

    if devices != nil and not Accel.Devices.device_list?(devices) do
      raise ArgumentError,
            "option :devices must be a non-empty list of Accel.Device, got: #{inspect(devices, limit: 5)}"
    end

    {devices, rest}
  end

  # A shared call decodes a list once, before it is split (Accel.LogisticMap).
  defp host_binary(input) when is_list(input), do: Accel.NIF.int64_binary(input)
  defp host_binary(input), do: input

  @doc """
  Makes a kernel from an anonymous function, at compile time: see `Accel.Kernel` for the
  language and the semantics. Variables the function uses from the enclosing scope become the
  kernel's parameters, read each time the expression runs. `Accel.kernel(&Mod.fun/arity)` takes a
  `defkernel`.

      iex> require Accel
      iex> p = 61
      iex> k = Accel.kernel(fn x -> rem(22 * x * (x + 1), p) end)
      iex> Accel.map([1, 2, 3], k, backend: :cpu)
      [44, 10, 20]

  ## Options

    * `:precompile` - input signatures whose CPU code is compiled now, with your project, into its
      `priv/accel_kernels` (so that a release runs them with no compiler): each a list of input
      types (`[:s64]`, `[:f64, :f64]`), or `{types, captures}` where `captures` gives a captured
      variable's kind when it is not an integer (`{[:f64], scale: :float}`; kinds `:integer`,
      `:float`, `:boolean`, `:range`). Binary, list and tensor inputs of those types run the
      precompiled code, whose captured integers may be any 64-bit value (a kernel compiled when it
      runs is specialised to their magnitude instead); ranges and other types compile when they
      run, as without the option. See "Precompiled kernels" in `Accel.Kernel`.
  """
  defmacro kernel(fun, opts \\ []), do: Accel.Kernel.__build__(fun, __CALLER__, opts)

  @doc """
  Applies `kernel` (from `kernel/1`) to every element, exactly as `Enum.map(input, fun)` would
  (see `Accel.Kernel`): a list for list and range input, a binary for binary input, a tensor
  (on the same device, no host trip) for tensor input, unless `:as` says otherwise. Several inputs
  of one length go in a tuple, `{xs, ys}`, for a kernel of as many arguments.

  Binary inputs hold `:s64` elements unless `type:` says otherwise; lists hold integers or floats.
  Results that do not fit the output's type (a bignum for `:s64`) raise `ArgumentError` naming the
  element, except in lists, which take them.

  `kernel` may also be the name of an elementwise operation of `Accel.Tensor` (`:add`, `:tanh`,
  ...: one per line of its registry). The call then has that function's semantics (types promote as
  in Nx, integers wrap, comparisons give 0 or 1), a number among the inputs is a scalar operand,
  and the inputs become tensors on the device that runs it (a range generated there); placement,
  sharing and chunks are as for a kernel, with models of the operation's own.

  An expert kernel (`Accel.Kernel.opencl/3`, `Accel.Kernel.cuda/3`) takes the same inputs but
  ranges, of the types it declares (so `type:` does not apply), runs on its own backend, and takes
  its scalars' values in `scalars: [...]`.

  ## Options

  #{Accel.Options.docs(Accel.Kernel.Map.options())}
    * `:timeout` - milliseconds, or `:infinity` (the default): a call that runs longer is abandoned
      (its work stops as a killed caller's does) and raises `Accel.Error` `:timeout`. The call then
      runs in a process of its own, and a list result is copied from it.

  ## Examples

      iex> require Accel
      iex> saxpy = Accel.kernel(fn x, y -> 2.5 * x + y end)
      iex> Accel.map({[1.0, 2.0], [0.5, 0.25]}, saxpy, backend: :cpu)
      [3.0, 5.25]

      iex> require Accel
      iex> Accel.map(1..3, Accel.kernel(fn x -> x * 0x4000000000000000 end), backend: :cpu)
      [4611686018427387904, 9223372036854775808, 13835058055282163712]

      iex> Accel.map({1..3, 0x4000000000000000}, :multiply, backend: :cpu)
      [4611686018427387904, -9223372036854775808, -4611686018427387904]

      iex> Accel.map({<<1.5::float-32-native, 2.0::float-32-native>>, 2}, :pow, type: :f32, as: :list)
      [2.25, 4.0]
  """
  @spec map(term(), Accel.Kernel.t() | Accel.Kernel.Source.t() | atom(), keyword()) ::
          list() | binary() | Accel.Tensor.t()
  def map(input, kernel, opts \\ []) do
    {timeout, opts} = opts |> Accel.Options.keyword!("Accel.map/3") |> Keyword.pop(:timeout, :infinity)

    if not Accel.Options.valid?({:timeout, 1}, timeout),
      do:
        raise(
          ArgumentError,
          "option :timeout must be #{Accel.Options.expected({:timeout, 1})}, got: #{inspect(timeout)}"
        )

    within(timeout, fn -> run_map(input, kernel, opts) end)
  end

  defp run_map(input, %Accel.Kernel{} = kernel, opts), do: Accel.Kernel.Map.run(input, kernel, opts)
  defp run_map(input, %Accel.Kernel.Source{} = kernel, opts), do: Accel.Kernel.Source.run(input, kernel, opts)

  defp run_map(input, op, opts) do
    operation!(
      op,
      "map/3 expects a kernel from Accel.kernel/1, Accel.Kernel.opencl/3 or Accel.Kernel.cuda/3, " <>
        "or the name of an elementwise operation of Accel.Tensor"
    )

    Accel.Tensor.Offload.run(input, op, opts)
  end

  # `fun` in a process of its own, abandoned (killed: its device work stops as a dead caller's does)
  # when it runs past `timeout` milliseconds; its exceptions are raised here.
  defp within(:infinity, fun), do: fun.()

  defp within(timeout, fun) do
    parent = self()

    # linked: a caller that exits takes the call with it
    pid =
      spawn_link(fn ->
        result =
          try do
            {:ok, fun.()}
          rescue
            e -> {:raise, e, __STACKTRACE__}
          end

        send(parent, {self(), result})
      end)

    receive do
      {^pid, {:ok, result}} ->
        result

      {^pid, {:raise, e, stacktrace}} ->
        reraise e, stacktrace
    after
      timeout ->
        Process.unlink(pid)
        Process.exit(pid, :kill)
        # a result sent just before the kill
        receive do
          {^pid, _} -> :ok
        after
          0 -> :ok
        end

        raise Accel.Error,
          reason: :timeout,
          message: "Accel.map/3 ran past its timeout of #{timeout} ms and was abandoned"
    end
  end

  # `op` names an operation of Accel.Tensor's registry, else ArgumentError: `expects`, the names.
  defp operation!(op, expects) do
    if Accel.Tensor.Offload.op(op) == nil do
      names = Enum.map_join(Accel.Tensor.Registry.ops(), ", ", &inspect(&1.name))
      raise ArgumentError, "#{expects} (#{names}), got: #{inspect(op, limit: 5)}"
    end
  end

  @doc """
  The backends compiled into this build and whether each is usable here, with the reason when not.

      iex> [%{name: :cpu, compiled: true, available: true} | _] = Accel.backends()
  """
  @spec backends() :: [%{name: atom(), compiled: boolean(), available: boolean(), detail: String.t()}]
  def backends do
    for {name, compiled, available, detail} <- Accel.NIF.backends() do
      %{name: name, compiled: compiled, available: available, detail: detail}
    end
  end

  @doc """
  Starts `fun` (typically an Accel call) in a task and returns at once, so the calling process can
  overlap its own work, or the submission of the next chunk, with the device work. A device call
  waits in `receive` for Accel's thread to finish it, so the waiting task holds no scheduler at all.

      task = Accel.async(fn -> Accel.logistic_map(chunk_1, as: :binary) end)
      next = prepare(chunk_2)                    # runs while chunk 1 computes
      result_1 = Accel.await(task)
  """
  @spec async((() -> result)) :: Task.t() when result: term()
  def async(fun) when is_function(fun, 0) do
    task = Task.async(fun)
    # The tasks this process may still await: await/2 takes each out once (see there).
    Process.put({__MODULE__, :awaitable, task.ref}, true)
    task
  end

  def async(other),
    do: raise(ArgumentError, "async/1 expects a function of no arguments, got: #{inspect(other, limit: 5)}")

  @doc """
  Waits for a task started by `async/1` in this process (default: as long as it takes) and returns
  its result. A task can be awaited once: awaiting it again, or awaiting a task that another
  process started, raises `ArgumentError` rather than waiting forever for a reply that already came.
  """
  @spec await(Task.t(), timeout()) :: term()
  def await(task, timeout \\ :infinity)

  def await(%Task{ref: ref} = task, timeout)
      when timeout == :infinity or (is_integer(timeout) and timeout >= 0) do
    unless Process.delete({__MODULE__, :awaitable, ref}) do
      raise ArgumentError,
            "await/2: this task was already awaited, or was not started by Accel.async/1 in this process"
    end

    Task.await(task, timeout)
  end

  def await(%Task{}, timeout),
    do:
      raise(
        ArgumentError,
        "await/2 expects a timeout in milliseconds or :infinity, got: #{inspect(timeout, limit: 5)}"
      )

  def await(other, _timeout),
    do: raise(ArgumentError, "await/2 expects a task from Accel.async/1, got: #{inspect(other, limit: 5)}")

  @doc """
  Every device of every usable backend: CUDA devices first, then OpenCL devices (in platform order),
  then the host CPU.

      iex> %Accel.Device{backend: :cpu, id: 0, type: :cpu} = List.last(Accel.devices())
  """
  @spec devices() :: [Accel.Device.t()]
  def devices, do: Enum.map(Accel.NIF.devices(), &device/1)

  @doc """
  One backend's devices (`:cpu`, `:opencl` or `:cuda`), in `devices/0`'s order. Only that backend
  is started: `devices(:cpu)` does not wait for the OpenCL or CUDA runtimes to find theirs.

      iex> [%Accel.Device{backend: :cpu, id: 0}] = Accel.devices(:cpu)
  """
  @spec devices(:cpu | :opencl | :cuda) :: [Accel.Device.t()]
  def devices(backend) when backend in @device_backends,
    do: Enum.map(Accel.NIF.devices(backend), &device/1)

  def devices(backend),
    do: raise(ArgumentError, "Accel.devices/1 expects :cpu, :opencl or :cuda, got: #{inspect(backend)}")

  defp device({backend, id, platform, name, type, memory, max_alloc, units, capability}) do
    %Accel.Device{
      backend: backend,
      id: id,
      platform: platform,
      name: name,
      type: type,
      memory: memory,
      max_alloc: max_alloc,
      compute_units: units,
      capability: capability
    }
  end

  @doc """
  The device `backend: :auto` runs on: the first CUDA device, else the first OpenCL GPU, else the
  CPU backend's device (on a CPU, Accel's native backend is several times faster than an OpenCL CPU
  device; see guides/benchmarks.md).
  """
  @spec default_device() :: Accel.Device.t()
  def default_device do
    {backend, id} = Accel.NIF.auto_device()
    Enum.find(devices(), &(&1.backend == backend and &1.id == id))
  end

  @doc """
  Bytes of memory Accel has allocated and not yet released on a device: an `Accel.Device`, or a
  backend name for all of its devices. On `:cpu` this is host memory behind tensors, large
  results and scratch buffers (memory behind a result binary is released when the binary is
  garbage-collected); on `:opencl` and `:cuda` it is the device memory behind tensors.

  Released host buffers of 128 KiB and more are kept, up to 768 MiB in all, for the next call of about
  the same size (their pages are already mapped, which saves a large call up to half its time); a
  smaller buffer takes part of a larger one where none is about its size. They are not counted
  here; `trim_memory/0` returns them to the operating system.
  """
  @spec memory(Accel.Device.t() | :cpu | :opencl | :cuda) :: non_neg_integer()
  def memory(:cpu), do: elem(Accel.NIF.host_memory(), 0)
  def memory(%Accel.Device{backend: :cpu, id: 0}), do: memory(:cpu)
  def memory(%Accel.Device{backend: backend, id: id}), do: Accel.NIF.tensor_memory(backend, id)

  def memory(backend) when backend in [:opencl, :cuda] do
    devices() |> Enum.filter(&(&1.backend == backend)) |> Enum.map(&memory/1) |> Enum.sum()
  end

  def memory(other),
    do:
      raise(
        ArgumentError,
        "memory/1 expects an Accel.Device or a backend name such as :cpu, got: #{inspect(other)}"
      )

  @doc """
  Returns the buffers Accel keeps for reuse (see `memory/1`) to the operating system. Returns the
  number of bytes released.
  """
  @spec trim_memory() :: non_neg_integer()
  def trim_memory do
    {_live, cached} = Accel.NIF.host_memory()
    :ok = Accel.NIF.trim_host_cache()
    cached
  end

  defp check_input!(input) when is_list(input) or is_binary(input), do: :ok
  defp check_input!(%Range{}), do: :ok

  defp check_input!(input) when is_bitstring(input) do
    raise ArgumentError,
          "binary input must hold whole signed 64-bit integers: got a bitstring of #{bit_size(input)} bits"
  end

  defp check_input!(input) do
    raise ArgumentError,
          "expected a list of integers, a Range or a binary of signed 64-bit integers, got: #{inspect(input, limit: 5)}"
  end
end
