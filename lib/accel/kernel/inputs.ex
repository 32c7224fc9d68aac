defmodule Accel.Kernel.Inputs do
  @moduledoc false
  # The inputs of Accel.map/3, normalised: %{kind: :tensor | :binary | :range, type, n, value}
  # (lists decoded once, binaries typed, ranges kept to be generated on the device), sliced into
  # chunks, and the chunks' results joined.

  @types [:s64, :f64, :f32, :s32, :u8]
  @min -0x8000000000000000
  @max 0x7FFFFFFFFFFFFFFF

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

  def default_as(%{kind: :tensor}), do: :tensor
  def default_as(%{kind: :binary, list: true}), do: :list
  def default_as(%{kind: :binary}), do: :binary
  def default_as(_), do: :list

  # Elements `offset` to `offset + len - 1` of a host input.
  def slice(%{kind: :binary, type: type, value: bin} = x, offset, len),
    do: %{x | n: len, value: binary_part(bin, offset * width(type), len * width(type))}

  def slice(%{kind: :range, value: %Range{first: f, step: s}} = x, offset, len),
    do: %{x | n: len, value: Range.new(f + offset * s, f + (offset + len - 1) * s, s)}

  def join(parts, :list), do: Enum.concat(parts)
  def join(parts, :binary), do: IO.iodata_to_binary(parts)

  def join(parts, :tensor) do
    [%Accel.Tensor{device: {backend, device}, type: type} | _] = parts

    parts
    |> Enum.map(&Accel.Tensor.to_binary/1)
    |> IO.iodata_to_binary()
    |> Accel.Tensor.from_binary(type, backend: backend, device: device)
  end

  @doc "The element types kernels read and write."
  def types, do: @types

  @doc "Bytes per element of `type`."
  def width(:u8), do: 1
  def width(t) when t in [:s32, :f32], do: 4
  def width(_), do: 8
end
