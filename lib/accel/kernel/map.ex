defmodule Accel.Kernel.Map do
  @moduledoc false
  # Accel.map/3: inputs normalised (Accel.Kernel.Inputs: lists decoded once, binaries typed, ranges
  # generated on the device, tensors where they are), the kernel specialised and compiled for the
  # device (cached), one launch through the door (Accel.NIF.tensor_source_kernel), then the
  # elements the kernel flagged recomputed on the BEAM by the original function, in index order
  # (Accel.Kernel.Results).

  import Accel.Kernel.Inputs, only: [inputs!: 3, input!: 3, length!: 1, slice: 3, join: 2, default_as: 1]
  import Accel.Kernel.Results, only: [output: 5, recompute: 8, host_binary: 1]
  alias Accel.Kernel.{Compiler, Native}

  @types Accel.Kernel.Inputs.types()
  @min -0x8000000000000000
  @max 0x7FFFFFFFFFFFFFFF

  def options do
    [
      backend: [
        rule: {:in, [:auto, :cpu, :opencl, :cuda]},
        default: :auto,
        doc:
          "`:auto` (the device predicted fastest for this kernel and input, see `Accel.plan/3`), " <>
            "`:cpu`, `:opencl` or `:cuda`; tensors run where they are"
      ],
      device: [
        rule:
          {:custom, Accel.Devices, :device_option?,
           "an Accel.Device, a non-negative index, :all or a non-empty list of Accel.Device"},
        default: nil,
        doc:
          "an `Accel.Device` from `devices/0`, an index into the backend's devices, or for host " <>
            "inputs `:all` or a list of devices, as for `Accel.logistic_map/2`. " <>
            Accel.Placement.Sharing.sharing_doc()
      ],
      type: [
        rule: {:in, @types},
        default: :s64,
        doc: "the element type of binary inputs: `:s64`, `:f64`, `:f32`, `:s32` or `:u8`"
      ],
      as: [
        rule: {:in, [:list, :binary, :tensor]},
        default: nil,
        doc:
          "`:list`, `:binary` or `:tensor` (default: a tensor for tensor input, a binary for binary " <>
            "input, a list otherwise)"
      ],
      chunk_size: [
        rule: {:integer, 1, nil},
        default: nil,
        doc: "run host inputs in chunks of at most this many elements (results are identical)"
      ]
    ]
  end

  def run(input, %Accel.Kernel{} = kernel, opts) do
    opts = Accel.Options.validate!(opts, options(), "Accel.map/3")
    inputs = inputs!(input, kernel, &input!(&1, &2, opts[:type]))
    place_and_run(inputs, opts, &run_chunk(kernel, &1, &2, &3, &4, &5), &kernel_model(kernel, &1))
  end

  @doc """
  Runs a call of Accel.map/3 over the normalised `inputs` where the options say: on one device; on
  the device the cost model predicts fastest (`backend: :auto`, host inputs); or shared by several
  (`device: :all`, a list). `chunk.(inputs, n, as, place, offset)` makes one launch's result;
  `model.(inputs)` gives `{key, time}` for the placement models (see kernel_model/2).
  """
  def place_and_run(inputs, opts, chunk, model) do
    launch = fn opts -> over_chunks(inputs, opts, chunk) end

    cond do
      Accel.Devices.sharing?(opts[:device]) ->
        shared(inputs, opts, chunk, model)

      # backend: :auto for host inputs: the device the cost model predicts fastest for this work
      opts[:backend] == :auto and opts[:device] == nil and not Enum.any?(inputs, &(&1.kind == :tensor)) ->
        candidates = Accel.Placement.candidates()
        n = length!(inputs)

        case Accel.Placement.small_choice(candidates, n) do
          %Accel.Device{} = device ->
            launch.(Keyword.put(opts, :device, device))

          nil ->
            {key, time} = model.(inputs)

            plan =
              Accel.Placement.remembered({key, n}, fn ->
                Accel.Placement.plan_kernel(key, n, candidates, time)
              end)

            Accel.Placement.follow(plan, fn -> launch.(Keyword.put(opts, :device, plan.device)) end)
        end

      true ->
        launch.(opts)
    end
  end

  # device: :all or a list of devices: the call's elements in pieces over the devices, shares sized
  # by the kernel's models (Accel.Placement.Sharing.split_kernel/4), each piece run as a chunk is.
  defp shared(inputs, opts, chunk, model) do
    if Enum.any?(inputs, &(&1.kind == :tensor)),
      do:
        raise(
          ArgumentError,
          "option :device #{inspect(opts[:device], limit: 3)} applies to host inputs: a kernel over tensors runs where its tensors are"
        )

    if opts[:as] == :tensor,
      do:
        raise(
          ArgumentError,
          "as: :tensor needs one device: option :device is #{inspect(opts[:device], limit: 3)}"
        )

    devices = Accel.Devices.sharing_devices!(opts[:device], opts[:backend])
    # every piece's result in the call's form
    as = opts[:as] || default_as(hd(inputs))

    on = fn piece, device, offset ->
      over_chunks(piece, Keyword.merge(opts, device: device, backend: :auto, as: as), chunk, offset)
    end

    case devices do
      [device] ->
        on.(inputs, device, 0)

      _ ->
        n = length!(inputs)
        {key, time} = model.(inputs)

        case Accel.Placement.Sharing.split_kernel(key, n, devices, time) do
          {[device], _pieces, nil} ->
            on.(inputs, device, 0)

          {devices, pieces, plan} ->
            run_piece = fn {offset, len}, device ->
              on.(Enum.map(inputs, &slice(&1, offset, len)), device, offset)
            end

            plan
            |> Accel.Placement.follow(fn -> Accel.Placement.Sharing.run_pieces(pieces, devices, run_piece) end)
            |> join(as)
        end
    end
  end

  @doc "Accel.plan/3 for a kernel: options as for Accel.map/3, and devices:."
  def plan(input, %Accel.Kernel{} = kernel, opts) do
    {devices, opts} = Keyword.pop(opts, :devices)
    opts = Accel.Options.validate!(opts, options(), "Accel.plan/3")
    inputs = inputs!(input, kernel, &input!(&1, &2, opts[:type]))
    plan_host(inputs, &kernel_model(kernel, &1), Accel.Devices.plan_scope!(devices, opts))
  end

  @doc """
  The plan for normalised host `inputs`: `{:choose, devices}` the device `:auto` would choose
  among them (nil: the candidates), `{:share, devices}` how they would share the call.
  """
  def plan_host(inputs, model, scope) do
    if Enum.any?(inputs, &(&1.kind == :tensor)),
      do: raise(ArgumentError, "work on tensors runs where its tensors are: there is nothing to plan")

    {key, time} = model.(inputs)

    case scope do
      {:choose, devices} ->
        Accel.Placement.plan_kernel(key, length!(inputs), devices || Accel.Placement.candidates(), time)

      {:share, devices} ->
        Accel.Placement.Sharing.plan_split_kernel(key, length!(inputs), devices, time)
    end
  end

  # The key of the kernel's models (kernel, input types, kinds of captures), and how a model times
  # a device: the inputs' first `len` elements run there, the result downloaded.
  defp kernel_model(kernel, inputs) do
    key = {:kernel, kernel.id, Enum.map(inputs, & &1.type), kernel.values |> Enum.map(&cap_kind!(&1, kernel))}

    time =
      prefix_timer(inputs, fn prefix, len, place ->
        {out, _, _} = execute(prefix, len, :binary, place, prepare(prefix, kernel, place))
        host_binary(out)
      end)

    {key, time}
  end

  @doc """
  How a placement model times a device (Accel.Placement.plan_kernel/4): a function of the device and
  `len` that runs `run.(prefix, len, place)` over the inputs' first `len` elements there, result
  downloaded, and returns the seconds taken.
  """
  def prefix_timer(inputs, run) do
    fn device, len ->
      prefix = Enum.map(inputs, &slice(&1, 0, len))
      {us, _} = :timer.tc(fn -> run.(prefix, len, {device.backend, device.id}) end)
      us / 1.0e6
    end
  end

  @doc """
  Runs `launch.(inputs, n, as, place, offset)` over the normalised `inputs` (inputs!/3), on the
  place the inputs and options give, in chunks of `opts[:chunk_size]` elements where given, and
  joins the chunks' results.
  """
  def over_chunks(inputs, opts, launch, base \\ 0) do
    n = length!(inputs)
    as = opts[:as] || default_as(hd(inputs))
    place = place!(inputs, opts)
    chunk = opts[:chunk_size]

    if chunk && Enum.any?(inputs, &(&1.kind == :tensor)),
      do:
        raise(
          ArgumentError,
          "option :chunk_size does not apply to tensor inputs (they are on the device already)"
        )

    if chunk == nil or n <= chunk do
      launch.(inputs, n, as, place, base)
    else
      0..div(n - 1, chunk)
      |> Enum.map(fn c ->
        len = min(chunk, n - c * chunk)
        launch.(Enum.map(inputs, &slice(&1, c * chunk, len)), len, as, place, base + c * chunk)
      end)
      |> join(as)
    end
  end

  # {backend, device index}: the tensors' device, else the options'.
  defp place!(inputs, opts) do
    case Enum.find(inputs, &(&1.kind == :tensor)) do
      %{value: %Accel.Tensor{device: place}} ->
        if opts[:backend] != :auto or opts[:device] != nil,
          do:
            raise(
              ArgumentError,
              "options :backend and :device do not apply to tensor inputs: a kernel runs where its tensors are"
            )

        place

      nil ->
        # backend: :auto with no device never arrives here: Map.run and Source.run resolve it
        case {opts[:backend], opts[:device]} do
          {:auto, %Accel.Device{backend: b, id: id}} ->
            {b, id}

          {b, %Accel.Device{backend: b, id: id}} ->
            {b, id}

          {b, %Accel.Device{} = d} ->
            raise ArgumentError,
                  "option :device is a #{inspect(d.backend)} device, but :backend is #{inspect(b)}"

          {:auto, id} ->
            raise ArgumentError,
                  "option :device as an index needs a :backend, got: backend: :auto, device: #{id}"

          {b, nil} ->
            {b, 0}

          {b, id} ->
            {b, id}
        end
    end
  end

  # ---- one launch ----

  @doc "The kernel specialised for buffer inputs of `types` (Accel.Kernel.source/2)."
  def compiled(%Accel.Kernel{} = kernel, types, opts \\ []) do
    specialise(kernel, Enum.map(types, &{&1, :buffer}), Enum.map(kernel.values, &cap_kind!(&1, kernel)), opts)
  end

  defp run_chunk(kernel, inputs, n, as, place, offset) do
    {compiled, _, _} = prepared = prepare(inputs, kernel, place)
    {out, flagged, sources} = execute(inputs, n, as, place, prepared)

    cond do
      flagged -> recompute(kernel, compiled, inputs, sources, out, as, n, offset)
      # (a streamed call's output is a binary, and never for as: :tensor)
      as == :tensor -> out
      true -> output(host_binary(out), compiled, as, n, [])
    end
  end

  # The prepared kernel over the inputs by the path the call takes: {its output (a binary where
  # streamed, else a tensor), whether an element was flagged, each non-range input as a
  # recomputation reads it (the binary, or its tensor)}.
  defp execute(inputs, n, as, {backend, _} = place, {compiled, _, _} = prepared) do
    if streamed?(inputs, as, backend, compiled) do
      {bin, flagged} = stream(inputs, n, place, prepared)
      {bin, flagged, Enum.map(inputs, & &1.value)}
    else
      launch(inputs, n, place, prepared)
    end
  end

  # Binaries in and a host result, on a device, of a kernel that completes in one launch.
  defp streamed?(inputs, as, backend, compiled),
    do:
      backend != :cpu and as != :tensor and compiled.resume_words == 0 and
        Enum.all?(inputs, &(&1.kind == :binary))

  # Binaries through a device: chunks streamed by the device's thread, one's transfers
  # overlapping another's kernel (Backend::map_source). {the output binary, whether an element
  # was flagged}.
  defp stream(inputs, n, {backend, device}, {compiled, code, slots}) do
    kterm = kernel_term(compiled, code, Enum.map(inputs, & &1.type), nil)
    binaries = Enum.map(inputs, & &1.value)
    Accel.Tensor.allocate(&Accel.NIF.map_source(kterm, binaries, n, slots, backend, device, &1))
  end

  # The kernel specialised to the inputs and captured values, its code for the place (the CPU's
  # shared object, CUDA's cubin; OpenCL builds the text itself) and its scalar slots.
  defp prepare(inputs, kernel, {backend, device}) do
    args = Enum.map(inputs, &arg_spec/1)
    caps = Accel.Kernel.Precompile.caps(kernel, args, Enum.map(kernel.values, &cap_kind!(&1, kernel)))
    compiled = specialise(kernel, args, caps)

    code =
      case backend do
        :cpu -> Native.library(compiled.key, compiled.source, kernel.app)
        :cuda -> Native.cuda_code(compiled.key, compiled.source, device, "accel_user")
        :opencl -> nil
      end

    slots = Compiler.slots(compiled, kernel.values, Enum.map(inputs, &if(&1.kind == :range, do: &1.value)))
    {compiled, code, slots}
  end

  defp kernel_term(compiled, code, types, out_into) do
    {compiled.key, compiled.source, compiled.uses_f64, code, types, compiled.out_type,
     :binary.copy(<<8>>, length(compiled.slots)), "accel_user", true, nil, compiled.resume_words, out_into}
  end

  # One launch: {the output tensor, whether an element was flagged, the inputs' tensors}.
  defp launch(inputs, n, {backend, device}, {compiled, code, slots}) do
    buffers = Enum.reject(inputs, &(&1.kind == :range))
    tensors = Enum.map(buffers, &tensor_of(&1, backend, device))

    kterm =
      kernel_term(compiled, code, Enum.map(tensors, & &1.type), overwritable(buffers, compiled.out_type))

    {term, flagged} =
      Accel.Tensor.allocate(
        &Accel.NIF.tensor_source_kernel(
          kterm,
          Enum.map(tensors, fn t -> t.ref end),
          n,
          slots,
          backend,
          device,
          &1
        )
      )

    {Accel.Tensor.wrap(term, {n}, compiled.out_type), flagged, tensors}
  end

  # The first input uploaded for this call alone whose type is the output's: on a device the
  # output may be written over it (tensor_source_kernel decides; the BEAM keeps the binary, which
  # a recomputation reads).
  defp overwritable(buffers, out_type),
    do: Enum.find_index(buffers, &(&1.kind == :binary and &1.type == out_type))

  @doc "An input's tensor on the place (a binary uploaded there)."
  def tensor_of(%{kind: :tensor, value: t}, _backend, _device), do: t

  def tensor_of(%{kind: :binary, type: type, value: bin}, backend, device),
    do: Accel.Tensor.from_binary(bin, type, backend: backend, device: device)

  defp arg_spec(%{kind: :range, value: %Range{first: f, last: l}}),
    do: {:s64, {:range, Compiler.bucket(max(abs(f), abs(l)))}}

  defp arg_spec(%{type: type}), do: {type, :buffer}

  defp cap_kind!(v, _kernel) when is_integer(v) and v >= @min and v <= @max, do: {:int, Compiler.bucket(v)}
  defp cap_kind!(v, _kernel) when is_float(v), do: :float
  defp cap_kind!(v, _kernel) when is_boolean(v), do: :bool

  defp cap_kind!(%Range{first: f, last: l, step: s}, _kernel)
       when f >= @min and f <= @max and l >= @min and l <= @max and s >= @min and s <= @max,
       do: :range

  defp cap_kind!(v, kernel) do
    i = Enum.find_index(kernel.values, &(&1 === v))

    raise ArgumentError,
          "kernel #{kernel.name}: captured variable #{Enum.at(kernel.captures, i)} is #{inspect(v, limit: 5)}; " <>
            "a kernel captures signed 64-bit integers, floats, booleans and ranges of 64-bit integers"
  end

  # Specialisations are cached for the VM's life, by the kernel and its argument and capture kinds.
  defp specialise(kernel, args, caps, opts \\ []) do
    key = {__MODULE__, kernel.id, args, caps, opts}

    case :persistent_term.get(key, nil) do
      nil ->
        compiled = Compiler.compile(kernel.ir, args, caps, kernel.name, opts)
        :persistent_term.put(key, compiled)
        compiled

      compiled ->
        compiled
    end
  end
end
