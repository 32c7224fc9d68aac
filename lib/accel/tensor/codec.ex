defmodule Accel.Tensor.Codec do
  @moduledoc false
  # Host values <-> a tensor's bytes: types and shapes checked, nested lists flattened and
  # encoded (each element checked against its type), bytes decoded into numbers.

  import Bitwise
  alias Accel.Tensor.Types

  @types Types.names()

  def check_type!(type) when type in @types, do: :ok

  def check_type!(type),
    do:
      raise(
        ArgumentError,
        "type must be one of #{Enum.map_join(@types, ", ", &inspect/1)}, got: #{inspect(type)}"
      )

  # Every dimension is a non-negative integer below 2^63, so that every count and stride derived
  # from a shape fits the signed 64-bit arguments of the NIF, also for shapes with a zero in them.
  # (called for every tensor an operation makes: a loop over the tuple, no list built)
  def count!(shape) when is_tuple(shape), do: count(shape, 0, 1)

  def count!(shape), do: raise(ArgumentError, "shape must be a tuple of dimensions, got: #{inspect(shape)}")

  defp count(shape, i, product) when i == tuple_size(shape), do: product

  defp count(shape, i, product) do
    case elem(shape, i) do
      dim when is_integer(dim) and dim >= 0 and dim < 0x8000000000000000 ->
        count(shape, i + 1, product * dim)

      bad ->
        raise ArgumentError,
              "shape #{inspect(shape)} has a dimension that is not a non-negative integer below 2^63: #{inspect(bad)}"
    end
  end

  def byte_width(type), do: Types.bytes(type)

  # Nested list -> {shape, flat elements}; every sublist at a depth must have the same length.
  def flatten!(list) do
    shape = shape_of(list, [], [])
    flat = flatten_checked(list, shape, [])
    {List.to_tuple(shape), flat}
  end

  defp shape_of(list, acc, path) do
    len = proper_length!(list, path)

    case list do
      [first | _] when is_list(first) -> shape_of(first, [len | acc], [0 | path])
      _ -> Enum.reverse([len | acc])
    end
  end

  defp proper_length!(list, path) do
    length(list)
  rescue
    ArgumentError ->
      raise ArgumentError,
            "from_list/2: the list at #{path_text(path)} is improper (its tail is not []): #{inspect(list, limit: 5)}"
  end

  defp flatten_checked(list, [len | rest], path) do
    if not is_list(list) or proper_length!(list, path) != len do
      raise ArgumentError,
            "from_list/2: the list at #{path_text(path)} should have #{len} elements, got: #{inspect(list, limit: 5)}"
    end

    list
    |> Enum.with_index()
    |> Enum.flat_map(fn {item, i} ->
      if rest == [] do
        if not is_number(item),
          do:
            raise(
              ArgumentError,
              "from_list/2: element at #{path_text([i | path])} is not a number: #{inspect(item, limit: 5)}"
            )

        [item]
      else
        flatten_checked(item, rest, [i | path])
      end
    end)
  end

  defp path_text([]), do: "the top level"
  defp path_text(path), do: "index " <> Enum.map_join(Enum.reverse(path), "", &"[#{&1}]")

  # The flat index i as a path into `shape`, for messages.
  defp index_path(i, shape) do
    {path, _} =
      shape
      |> Tuple.to_list()
      |> Enum.reverse()
      |> Enum.reduce({[], i}, fn dim, {acc, rest} ->
        {[rem(rest, Kernel.max(dim, 1)) | acc], div(rest, Kernel.max(dim, 1))}
      end)

    "index " <> Enum.map_join(path, "", &"[#{&1}]")
  end

  def encode!(flat, type, shape) do
    flat
    |> Enum.with_index()
    |> Enum.map(fn {x, i} ->
      encode_one(x, type) ||
        raise ArgumentError,
              "from_list/2: element at #{index_path(i, shape)} (#{inspect(x)}) does not fit type #{inspect(type)}"
    end)
    |> IO.iodata_to_binary()
  end

  # The element's bytes, or nil when it does not fit: a float beyond the type's range would become
  # infinity (Elixir writes it so, silently), an integer beyond it would wrap. bf16 is the f32
  # value's high half, as Nx writes it; complex tensors come from binaries only.
  @doc false
  def encode_one(x, type) when type in [:f16, :f32, :f64] do
    bits = Types.bytes(type) * 8

    case <<x::float-size(bits)-native>> do
      <<_::float-size(bits)-native>> = bytes -> bytes
      _infinite -> nil
    end
  rescue
    ArgumentError -> nil
  end

  def encode_one(x, :bf16) do
    case encode_one(x, :f32) do
      nil -> nil
      f32 -> bf16_of(f32)
    end
  end

  # f8 (E5M2) as Nx writes it: the f16's high byte
  def encode_one(x, :f8) do
    case encode_one(x, :f16) do
      nil -> nil
      <<half::unsigned-16-native>> -> <<bsr(half, 8)>>
    end
  end

  # f8_e4m3fn as Nx.Floating writes a finite value within its range (+-448): the exponent
  # floor(log2), the mantissa rounded half away from zero and capped at 7, below 2^-6 a subnormal
  def encode_one(x, :f8_e4m3fn) when is_number(x) and x >= -448 and x <= 448 do
    <<sign::1, _::63>> = <<x * 1.0::float>>
    a = abs(x * 1.0)

    if a == 0 do
      <<sign::1, 0::7>>
    else
      exp = floor(:math.log2(a))

      if exp + 7 <= 0 do
        <<sign::1, 0::4, min(7, round(a / :math.pow(2, -6) * 8))::3>>
      else
        m = ((a / :math.pow(2, exp) - 1.0) * 8) |> round() |> max(0) |> min(7)
        <<sign::1, exp + 7::4, m::3>>
      end
    end
  end

  def encode_one(x, type) when is_integer(x) do
    bits = Types.bytes(type) * 8
    # sub-byte types (s4 ...) take a byte each, their values in their own width
    value_bits = Types.bits(type)

    case Types.kind(type) do
      :int ->
        if x in -(1 <<< (value_bits - 1))..((1 <<< (value_bits - 1)) - 1), do: <<x::signed-size(bits)-native>>

      :uint ->
        if x in 0..((1 <<< value_bits) - 1), do: <<x::unsigned-size(bits)-native>>

      _ ->
        nil
    end
  end

  def encode_one(_x, _type), do: nil

  # bf16's bytes are the native f32's high half
  if System.endianness() == :little do
    defp bf16_of(<<_::binary-size(2), high::binary-size(2)>>), do: high
    defp f32_of(bf16), do: <<0::16, bf16::binary>>
  else
    defp bf16_of(<<high::binary-size(2), _::binary-size(2)>>), do: high
    defp f32_of(bf16), do: <<bf16::binary, 0::16>>
  end

  # Non-finite floats read as :nan, :infinity and :neg_infinity (as in Nx): Elixir floats cannot hold them.
  @doc false
  def decode(bin, :bf16), do: for(<<c::binary-size(2) <- bin>>, do: float(f32_of(c), 32))
  def decode(bin, :f8), do: for(<<b <- bin>>, do: float(<<bsl(b, 8)::16-native>>, 16))
  def decode(bin, :f8_e4m3fn), do: for(<<b <- bin>>, do: e4m3fn(<<b>>))

  def decode(bin, type) do
    bits = Types.bytes(type) * 8

    case Types.kind(type) do
      :float -> for <<c::binary-size(div(bits, 8)) <- bin>>, do: float(c, bits)
      :int -> for <<x::signed-size(bits)-native <- bin>>, do: x
      :uint -> for <<x::unsigned-size(bits)-native <- bin>>, do: x
      :complex -> raise ArgumentError, "a #{inspect(type)} tensor has no list form; read it with to_binary/1"
    end
  end

  defp e4m3fn(<<_::1, 15::4, 7::3>>), do: :nan
  defp e4m3fn(<<sign::1, 0::4, m::3>>), do: (1.0 - 2 * sign) * (m / 8 * :math.pow(2, -6))
  defp e4m3fn(<<sign::1, e::4, m::3>>), do: (1.0 - 2 * sign) * ((1 + m / 8) * :math.pow(2, e - 7))

  defp float(chunk, bits) do
    case chunk do
      <<x::float-size(bits)-native>> ->
        x

      _ ->
        <<u::unsigned-size(bits)-native>> = chunk
        exp_bits = %{16 => 5, 32 => 8, 64 => 11}[bits]
        mantissa = u &&& (1 <<< (bits - 1 - exp_bits)) - 1

        cond do
          mantissa != 0 -> :nan
          u >>> (bits - 1) == 1 -> :neg_infinity
          true -> :infinity
        end
    end
  end
end
