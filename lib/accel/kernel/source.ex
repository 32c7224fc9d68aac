defmodule Accel.Kernel.Source do
  @moduledoc """
  An expert kernel: OpenCL C or CUDA C++ you write yourself, for what the Elixir subset of
  `Accel.Kernel` cannot say. Made by `Accel.Kernel.opencl/3` or `Accel.Kernel.cuda/3`, run by
  `Accel.map/3` over tensors, binaries and lists, through the same door as every kernel: built once
  per device (OpenCL's program cache; NVRTC's code cached on disk per GPU architecture, as
  generated kernels are).

  The kernel's parameters are, in order: the output buffer, one buffer per input (each of the
  types `inputs:` names), the element count `n` as an unsigned 64-bit integer (`ulong` in OpenCL C,
  `unsigned long long` in CUDA), then the scalars `scalars:` names, by value. It is launched over at
  least `n` work items (OpenCL) or threads (CUDA, in blocks of 256, at most 2^20 blocks: loop with a
  grid stride to cover more), and must skip indices at or beyond `n`.

  Unlike kernels written in Elixir, an expert kernel's results are whatever its code computes:
  Accel checks the types and lengths of what it passes, not the arithmetic, and not the memory
  the kernel touches. **An expert kernel runs unchecked, as a NIF does**: an index past a buffer
  reads or writes memory that is not its own, which on a device that shares the host's memory
  (PoCL, integrated GPUs) corrupts the VM or ends it with a segmentation fault, and on a GPU can
  leave its context unusable. Kernels written in Elixir (`Accel.kernel/1`) cannot do this: their
  indices are generated, and their inputs' lengths checked. OpenCL compilers may
  contract `a * b + c` into a fused multiply-add unless the source says
  `#pragma OPENCL FP_CONTRACT OFF`; NVRTC compiles with `--fmad=false`, as for generated kernels.
  Scalars are passed in their own width, read from little-endian slots (every platform Accel
  builds on).
  """

  @types Accel.Kernel.Inputs.types()

  defstruct [:backend, :source, :name, :arity, :inputs, :output, :scalars, :key]

  @type t :: %__MODULE__{
          backend: :opencl | :cuda,
          source: String.t(),
          name: String.t(),
          arity: pos_integer(),
          inputs: [atom()],
          output: atom(),
          scalars: [atom()],
          key: binary()
        }

  @doc false
  def new(backend, source, name, opts) do
    fun = "Accel.Kernel.#{backend}/3"

    if not is_binary(source),
      do: raise(ArgumentError, "#{fun}: the source must be a string, got: #{inspect(source, limit: 5)}")

    if not (is_binary(name) and name =~ ~r/\A[A-Za-z_][A-Za-z0-9_]*\z/),
      do:
        raise(
          ArgumentError,
          "#{fun}: the kernel's name must be a C identifier, got: #{inspect(name, limit: 5)}"
        )

    if not String.contains?(source, name),
      do: raise(ArgumentError, "#{fun}: the source never mentions the kernel #{name}")

    opts = Accel.Options.validate!(opts, options(), fun)
    inputs = required!(opts, :inputs, fun)
    output = required!(opts, :output, fun)
    scalars = opts[:scalars]

    if inputs == [] or length(inputs) > 32,
      do: raise(ArgumentError, "#{fun}: option :inputs names 1 to 32 input types, got #{length(inputs)}")

    if length(scalars) > 64,
      do:
        raise(ArgumentError, "#{fun}: option :scalars names at most 64 scalar types, got #{length(scalars)}")

    %__MODULE__{
      backend: backend,
      source: source,
      name: name,
      arity: length(inputs),
      inputs: inputs,
      output: output,
      scalars: scalars,
      key:
        :crypto.hash(:sha256, :erlang.term_to_binary({backend, source, name, inputs, output, scalars}))
        |> Base.encode16(case: :lower)
    }
  end

  @doc false
  def options do
    types = "a list of " <> Enum.map_join(@types, ", ", &inspect/1)

    [
      inputs: [
        rule: {:custom, __MODULE__, :types?, types},
        default: nil,
        doc: "the element type of each input buffer, in order (required)"
      ],
      output: [rule: {:in, @types}, default: nil, doc: "the element type of the output buffer (required)"],
      scalars: [
        rule: {:custom, __MODULE__, :types?, types},
        default: [],
        doc: "the type of each scalar parameter after `n`, in order"
      ]
    ]
  end

  @doc false
  def types?(types), do: is_list(types) and Enum.all?(types, &(&1 in @types))

  defp required!(opts, key, fun) do
    opts[key] ||
      raise ArgumentError,
            "#{fun}: option #{inspect(key)} is required: " <>
              String.replace(Keyword.fetch!(options(), key)[:doc], " (required)", "")
  end

  @doc false
  def map_options do
    Keyword.drop(Accel.Kernel.Map.options(), [:type, :device]) ++
      [
        # one device: an expert kernel is not shared between devices
        device: [
          rule: {:custom, Accel.Tensor, :device_option?, "an Accel.Device or a non-negative index"},
          default: nil,
          doc: "an `Accel.Device` of the kernel's backend, or an index into its devices"
        ],
        scalars: [
          rule: {:custom, __MODULE__, :list?, "a list"},
          default: [],
          doc: "the values of an expert kernel's scalars (`Accel.Kernel.opencl/3`), in order"
        ]
      ]
  end

  @doc false
  def list?(value), do: is_list(value)

  @doc false
  # Accel.map/3 with an expert kernel.
  def run(input, %__MODULE__{} = kernel, opts) do
    opts = Accel.Options.validate!(opts, map_options(), "Accel.map/3")
    slots = slots!(kernel, opts[:scalars])
    inputs = Accel.Kernel.Inputs.inputs!(input, kernel, &input!(&1, &2, Enum.at(kernel.inputs, &2)))
    tensors? = Enum.any?(inputs, &(&1.kind == :tensor))
    # :auto means the kernel's own backend; a tensor's device decides where tensors are given.
    opts =
      if opts[:backend] == :auto and opts[:device] == nil and not tensors?,
        do: Keyword.put(opts, :backend, kernel.backend),
        else: opts

    Accel.Kernel.Map.over_chunks(inputs, opts, fn inputs, n, as, place, _offset ->
      launch(kernel, inputs, n, as, place, slots)
    end)
  end

  defp input!(x, j, type) do
    cond do
      input = Accel.Kernel.Inputs.typed_input(x, j, type) ->
        input

      is_list(x) ->
        t = Accel.Tensor.from_list(x, type: type, backend: :cpu)

        if tuple_size(t.shape) != 1,
          do: raise(ArgumentError, "input #{j}: expected a flat list, got one of shape #{inspect(t.shape)}")

        Accel.Kernel.Inputs.binary_input(Accel.Tensor.to_binary(t), type)

      true ->
        raise ArgumentError,
              "input #{j}: an expert kernel takes a list, a binary or an Accel.Tensor, got: #{inspect(x, limit: 5)}"
    end
  end

  defp launch(kernel, inputs, n, as, {backend, device}, slots) do
    if backend != kernel.backend do
      raise ArgumentError,
            "kernel #{kernel.name} is #{language(kernel.backend)}: it runs on #{inspect(kernel.backend)}, " <>
              "not #{inspect(backend)}"
    end

    code =
      if backend == :cuda, do: Accel.Kernel.Native.cuda_code(kernel.key, kernel.source, device, kernel.name)

    tensors = Enum.map(inputs, &Accel.Kernel.Map.tensor_of(&1, backend, device))
    sizes = for type <- kernel.scalars, into: <<>>, do: <<Accel.Kernel.Inputs.width(type)>>
    uses_f64 = :f64 in [kernel.output | kernel.inputs ++ kernel.scalars]

    kterm =
      {kernel.key, kernel.source, uses_f64, code, kernel.inputs, kernel.output, sizes, kernel.name, false}

    refs = Enum.map(tensors, & &1.ref)

    {term, _flagged} =
      Accel.Tensor.allocate(&Accel.NIF.tensor_source_kernel(kterm, refs, n, slots, backend, device, &1))

    out = Accel.Tensor.wrap(term, {n}, kernel.output)

    case as do
      :tensor -> out
      :binary -> Accel.Tensor.to_binary(out)
      :list -> Accel.Tensor.to_list(out)
    end
  end

  # Each scalar in an 8-byte slot, its bytes first (the backends pass its own width by value).
  defp slots!(kernel, values) do
    if length(values) != length(kernel.scalars) do
      raise ArgumentError,
            "kernel #{kernel.name} takes #{length(kernel.scalars)} scalar(s) #{inspect(kernel.scalars)}, " <>
              "got #{length(values)} in option :scalars"
    end

    [kernel.scalars, values]
    |> Enum.zip()
    |> Enum.with_index()
    |> Enum.map(fn {{type, v}, i} ->
      bytes =
        scalar(type, v) ||
          raise ArgumentError, "scalar #{i} is #{inspect(type)}, got: #{inspect(v, limit: 5)}"

      <<bytes::binary, 0::size((8 - byte_size(bytes)) * 8)>>
    end)
    |> IO.iodata_to_binary()
  end

  defp scalar(:s64, v) when is_integer(v) and v >= -0x8000000000000000 and v <= 0x7FFFFFFFFFFFFFFF,
    do: <<v::signed-native-64>>

  defp scalar(:s32, v) when is_integer(v) and v >= -0x80000000 and v <= 0x7FFFFFFF,
    do: <<v::signed-native-32>>

  defp scalar(:u8, v) when is_integer(v) and v >= 0 and v <= 255, do: <<v>>
  defp scalar(:f64, v) when is_number(v), do: <<v * 1.0::float-native-64>>

  # the finite :f32 range: a larger value would silently become infinity
  defp scalar(:f32, v) when is_number(v) and abs(v) <= 3.4028234663852886e38, do: <<v * 1.0::float-native-32>>

  defp scalar(_type, _v), do: nil

  defp language(:opencl), do: "OpenCL C"
  defp language(:cuda), do: "CUDA C++"
end
