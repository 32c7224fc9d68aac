defmodule Accel.Kernel.Map do
  @moduledoc false
  # Accel.map/3: inputs normalised (lists decoded once, binaries typed, ranges generated on the
  # device, tensors where they are), the kernel specialised and compiled for the device (cached),
  # one launch through the door (Accel.NIF.tensor_source_kernel), then the elements the kernel
  # flagged recomputed on the BEAM by the original function, in index order.

  alias Accel.Kernel.{Compiler, Native}

  @types [:s64, :f64, :f32, :s32, :u8]
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
          {:custom, Accel, :device_option?,
           "an Accel.Device, a non-negative index, :all or a non-empty list of Accel.Device"},
        default: nil,
        doc:
          "an `Accel.Device` from `devices/0`, an index into the backend's devices, or for host " <>
            "inputs `:all` or a list of devices, as for `Accel.logistic_map/2`. " <>
            Accel.Placement.sharing_doc()
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
      Accel.sharing?(opts[:device]) ->
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
  # by the kernel's models (Accel.Placement.split_kernel/4), each piece run as a chunk is.
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

    devices = Accel.sharing_devices!(opts[:device], opts[:backend])
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

        case Accel.Placement.split_kernel(key, n, devices, time) do
          {[device], _pieces, nil} ->
            on.(inputs, device, 0)

          {devices, pieces, plan} ->
            run_piece = fn {offset, len}, device ->
              on.(Enum.map(inputs, &slice(&1, offset, len)), device, offset)
            end

            plan
            |> Accel.Placement.follow(fn -> Accel.Placement.run_pieces(pieces, devices, run_piece) end)
            |> join(as)
        end
    end
  end

  @doc "Accel.plan/3 for a kernel: options as for Accel.map/3, and devices:."
  def plan(input, %Accel.Kernel{} = kernel, opts) do
    {devices, opts} = Keyword.pop(opts, :devices)
    opts = Accel.Options.validate!(opts, options(), "Accel.plan/3")
    inputs = inputs!(input, kernel, &input!(&1, &2, opts[:type]))
    plan_host(inputs, &kernel_model(kernel, &1), Accel.plan_scope!(devices, opts))
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
        Accel.Placement.plan_split_kernel(key, length!(inputs), devices, time)
    end
  end

  # The key of the kernel's models (kernel, input types, kinds of captures), and how a model times
  # a device: the inputs' first `len` elements run there, the result downloaded.
  defp kernel_model(kernel, inputs) do
    key = {:kernel, kernel.id, Enum.map(inputs, & &1.type), kernel.values |> Enum.map(&cap_kind!(&1, kernel))}

    time =
      prefix_timer(inputs, fn prefix, len, place ->
        prefix |> launch(kernel, len, place) |> elem(0) |> Accel.Tensor.to_binary()
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

  # ---- inputs: %{kind: :tensor | :binary | :range, type, n, value} ----

  @doc "The inputs of a call (one, or several in a tuple), each made by `input!.(x, j)`."
  def inputs!(input, %{name: name, arity: arity} = work, input!) do
    inputs = if is_tuple(input), do: Tuple.to_list(input), else: [input]

    if length(inputs) != arity do
      raise ArgumentError,
            "#{Map.get(work, :what, "kernel")} #{name} takes #{arity} input(s), got #{length(inputs)}" <>
              if(arity > 1, do: " (give several inputs as a tuple: {xs, ys})", else: "")
    end

    inputs |> Enum.with_index() |> Enum.map(fn {x, j} -> input!.(x, j) end)
  end

  @doc "A binary input of `type` elements (or a tensor's input); anything else is nil."
  def typed_input(%Accel.Tensor{} = t, j, _type), do: input!(t, j, nil)
  def typed_input(bin, j, type) when is_binary(bin), do: input!(bin, j, type)
  def typed_input(_other, _j, _type), do: nil

  @doc "One input of a call, normalised: `%{kind: :tensor | :binary | :range, type, n, value}`."
  def input!(%Accel.Tensor{} = t, _j, _type),
    do: %{kind: :tensor, type: t.type, n: Accel.Tensor.size(t), value: t}

  # A range's elements are :s64 (kernels take them as such, and an operation makes them on the
  # device): one past that range would come back wrapped around, so it is refused.
  def input!(%Range{first: f, last: l, step: s} = r, j, _type)
      when is_integer(f) and is_integer(l) and is_integer(s) and s != 0 do
    n = Range.size(r)
    last = f + (n - 1) * s

    if n > 0 and not (f in @min..@max and last in @min..@max) do
      raise ArgumentError,
            "input #{j}: #{inspect(r)} holds integers outside the signed 64-bit range " <>
              "(#{f} to #{last}): a range's elements are :s64"
    end

    %{kind: :range, type: :s64, n: n, value: r}
  end

  def input!(%Range{} = r, j, _type),
    do: raise(ArgumentError, "input #{j}: a range of integers with a non-zero step, got: #{inspect(r)}")

  def input!(bin, j, type) when is_binary(bin) do
    width = width(type)

    if rem(byte_size(bin), width) != 0 do
      raise ArgumentError,
            "input #{j}: a binary of #{byte_size(bin)} bytes does not hold whole #{inspect(type)} elements " <>
              "(#{width} bytes each; set type:)"
    end

    %{kind: :binary, type: type, n: div(byte_size(bin), width), value: bin}
  end

  def input!([], _j, _type), do: binary_input(<<>>, :s64)

  # A list of integers becomes an :s64 binary, a list of floats an :f64 one: every element must be
  # of the first one's kind (a kernel sees 1 and 1.0 differently, as Elixir does).
  def input!([first | _] = list, j, _type) when is_float(first) do
    case Enum.find_index(list, &(not is_float(&1))) do
      nil ->
        binary_input(for(x <- list, into: <<>>, do: <<x::float-native-64>>), :f64)

      i ->
        raise ArgumentError,
              "input #{j}: element #{i} is #{inspect(Enum.at(list, i))}, but the list starts with a float: a list input holds floats only or integers only"
    end
  end

  def input!(list, j, _type) when is_list(list) do
    binary_input(Accel.NIF.int64_binary(list), :s64)
  rescue
    e in ArgumentError -> reraise ArgumentError, "input #{j}: " <> Exception.message(e), __STACKTRACE__
  end

  def input!(other, j, _type),
    do:
      raise(
        ArgumentError,
        "input #{j}: expected a list, a Range, a binary or an Accel.Tensor, got: #{inspect(other, limit: 5)}"
      )

  @doc "A decoded list's elements, as a binary input whose result is a list by default."
  def binary_input(bin, type),
    do: %{kind: :binary, type: type, n: div(byte_size(bin), width(type)), value: bin, list: true}

  @doc "The inputs' one length (they must agree)."
  def length!([first | rest]) do
    case Enum.find_index(rest, &(&1.n != first.n)) do
      nil ->
        first.n

      j ->
        raise ArgumentError,
              "input #{j + 1} has #{Enum.at(rest, j).n} elements and input 0 has #{first.n}: inputs must have one length"
    end
  end

  defp default_as(%{kind: :tensor}), do: :tensor
  defp default_as(%{kind: :binary, list: true}), do: :list
  defp default_as(%{kind: :binary}), do: :binary
  defp default_as(_), do: :list

  # Elements `offset` to `offset + len - 1` of a host input.
  defp slice(%{kind: :binary, type: type, value: bin} = x, offset, len),
    do: %{x | n: len, value: binary_part(bin, offset * width(type), len * width(type))}

  defp slice(%{kind: :range, value: %Range{first: f, step: s}} = x, offset, len),
    do: %{x | n: len, value: Range.new(f + offset * s, f + (offset + len - 1) * s, s)}

  defp join(parts, :list), do: Enum.concat(parts)
  defp join(parts, :binary), do: IO.iodata_to_binary(parts)

  defp join(parts, :tensor) do
    [%Accel.Tensor{device: {backend, device}, type: type} | _] = parts

    parts
    |> Enum.map(&Accel.Tensor.to_binary/1)
    |> IO.iodata_to_binary()
    |> Accel.Tensor.from_binary(type, backend: backend, device: device)
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
    {out, flagged, compiled, tensors} = launch(inputs, kernel, n, place)

    cond do
      not flagged and as == :tensor -> out
      not flagged -> output(Accel.Tensor.to_binary(out), compiled, as, n, [])
      true -> recompute(kernel, compiled, inputs, tensors, out, as, n, offset)
    end
  end

  # One launch: {the output tensor, whether an element was flagged, the compiled kernel, the
  # inputs' tensors}.
  defp launch(inputs, kernel, n, {backend, device}) do
    args = Enum.map(inputs, &arg_spec/1)
    caps = Accel.Kernel.Precompile.caps(kernel, args, Enum.map(kernel.values, &cap_kind!(&1, kernel)))
    compiled = specialise(kernel, args, caps)

    code =
      case backend do
        :cpu -> Native.library(compiled.key, compiled.source, kernel.app)
        :cuda -> Native.cuda_code(compiled.key, compiled.source, device, "accel_user")
        :opencl -> nil
      end

    tensors = for x <- inputs, x.kind != :range, do: tensor_of(x, backend, device)

    kterm =
      {compiled.key, compiled.source, compiled.uses_f64, code, Enum.map(tensors, & &1.type),
       compiled.out_type, :binary.copy(<<8>>, length(compiled.slots)), "accel_user", true, nil,
       compiled.resume_words}

    slots = Compiler.slots(compiled, kernel.values, Enum.map(inputs, &if(&1.kind == :range, do: &1.value)))

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

    {Accel.Tensor.wrap(term, {n}, compiled.out_type), flagged, compiled, tensors}
  end

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

  # ---- results ----

  # The elements the kernel flagged hold its sentinel: each is recomputed on the BEAM, in order
  # (the first that raises raises, as in Enum.map/2), and patched into the result.
  defp recompute(kernel, compiled, inputs, tensors, out, as, n, offset) do
    bin = Accel.Tensor.to_binary(out)
    hosts = host_inputs(inputs, tensors)

    patches =
      for i <- sentinels(bin, compiled.out_type) do
        value = apply(kernel.fun, Enum.map(hosts, &element(&1, i)))
        {i, value, encode(value, compiled.out_type, as, i + offset, kernel)}
      end

    output(bin, compiled, as, n, patches, out)
  end

  defp host_inputs(inputs, tensors) do
    {hosts, _} =
      Enum.map_reduce(inputs, tensors, fn
        %{kind: :range, value: r}, ts -> {{:range, r}, ts}
        %{type: type}, [t | ts] -> {{type, Accel.Tensor.to_binary(t)}, ts}
      end)

    hosts
  end

  defp element({:range, %Range{first: f, step: s}}, i), do: f + i * s
  defp element({:s64, bin}, i), do: binary_part(bin, i * 8, 8) |> then(fn <<v::signed-native-64>> -> v end)
  defp element({:s32, bin}, i), do: binary_part(bin, i * 4, 4) |> then(fn <<v::signed-native-32>> -> v end)
  defp element({:u8, bin}, i), do: :binary.at(bin, i)
  defp element({:f64, bin}, i), do: binary_part(bin, i * 8, 8) |> then(fn <<v::float-native-64>> -> v end)
  defp element({:f32, bin}, i), do: binary_part(bin, i * 4, 4) |> then(fn <<v::float-native-32>> -> v end)

  defp sentinels(bin, type) do
    {pattern, w} =
      case type do
        :s64 -> {<<@min::signed-native-64>>, 8}
        :u8 -> {<<2>>, 1}
        :f64 -> {<<0x7FF8000000000001::native-64>>, 8}
        :f32 -> {<<0x7FC00000::native-32>>, 4}
      end

    for {pos, _} <- :binary.matches(bin, pattern), rem(pos, w) == 0, do: div(pos, w)
  end

  # The bytes of a recomputed value in the output's type (nil for list output, which takes any).
  defp encode(_value, _type, :list, _i, _kernel), do: nil

  defp encode(v, :s64, _as, _i, _kernel) when is_integer(v) and v >= @min and v <= @max,
    do: <<v::signed-native-64>>

  defp encode(v, :f64, _as, _i, _kernel) when is_float(v), do: <<v::float-native-64>>
  defp encode(true, :u8, _as, _i, _kernel), do: <<1>>
  defp encode(false, :u8, _as, _i, _kernel), do: <<0>>

  defp encode(v, :f32, as, i, kernel) when is_float(v) do
    <<v::float-native-32>>
  rescue
    ArgumentError -> too_large(v, :f32, as, i, kernel)
  end

  defp encode(v, type, as, i, kernel), do: too_large(v, type, as, i, kernel)

  defp too_large(v, type, as, i, kernel) do
    raise ArgumentError,
          "element #{i}: kernel #{kernel.name} gives #{inspect(v, limit: 5)}, which does not fit #{inspect(type)} " <>
            "(the #{as} result's type); ask for a list (as: :list) to get it exactly"
  end

  defp output(bin, compiled, as, n, patches, out \\ nil)

  defp output(bin, compiled, :list, n, patches, _out) do
    list =
      case compiled.out_type do
        :s64 -> Accel.NIF.int64_list(bin)
        :u8 -> for <<b <- bin>>, do: b == 1
        type -> Accel.NIF.tensor_nested_list(bin, type, [n])
      end

    patch_list(list, patches, 0)
  end

  defp output(bin, _compiled, :binary, _n, patches, _out), do: patch_binary(bin, patches)

  defp output(bin, compiled, :tensor, n, patches, %Accel.Tensor{device: {backend, device}}) do
    bin
    |> patch_binary(patches)
    |> Accel.Tensor.from_binary(compiled.out_type, {n}, backend: backend, device: device)
  end

  defp patch_list(list, [], _i), do: list
  defp patch_list([_ | rest], [{i, v, _} | patches], i), do: [v | patch_list(rest, patches, i + 1)]
  defp patch_list([x | rest], patches, i), do: [x | patch_list(rest, patches, i + 1)]

  defp patch_binary(bin, []), do: bin

  defp patch_binary(bin, [{_, _, bytes} | _] = patches) do
    w = byte_size(bytes)

    {parts, pos} =
      Enum.reduce(patches, {[], 0}, fn {i, _, bytes}, {acc, pos} ->
        {[bytes, binary_part(bin, pos, i * w - pos) | acc], i * w + w}
      end)

    IO.iodata_to_binary(Enum.reverse([binary_part(bin, pos, byte_size(bin) - pos) | parts]))
  end

  @doc "The element types kernels read and write."
  def types, do: @types

  @doc "Bytes per element of `type`."
  def width(:u8), do: 1
  def width(t) when t in [:s32, :f32], do: 4
  def width(_), do: 8
end
