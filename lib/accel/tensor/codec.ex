defmodule Accel.Tensor.Codec do
  @moduledoc false
  # Host values <-> a tensor's bytes: types and shapes checked, nested lists flattened and
  # encoded (each element checked against its type), bytes decoded into numbers.

  import Bitwise

  @types [:f32, :f64, :s64, :s32, :u8]

  def check_type!(type) when type in @types, do: :ok

  def check_type!(type),
    do: raise(ArgumentError, "type must be one of :f32, :f64, :s64, :s32, :u8, got: #{inspect(type)}")

  # Every dimension is a non-negative integer below 2^63, so that every count and stride derived
  # from a shape fits the signed 64-bit arguments of the NIF, also for shapes with a zero in them.
  def count!(shape) when is_tuple(shape) do
    dims = Tuple.to_list(shape)

    case Enum.find(dims, &(not (is_integer(&1) and &1 >= 0 and &1 < 0x8000000000000000))) do
      nil ->
        Enum.reduce(dims, 1, &(&1 * &2))

      bad ->
        raise ArgumentError,
              "shape #{inspect(shape)} has a dimension that is not a non-negative integer below 2^63: #{inspect(bad)}"
    end
  end

  def count!(shape), do: raise(ArgumentError, "shape must be a tuple of dimensions, got: #{inspect(shape)}")

  def byte_width(type) when type in [:f64, :s64], do: 8
  def byte_width(type) when type in [:f32, :s32], do: 4
  def byte_width(:u8), do: 1

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
  # infinity (Elixir writes it so, silently), an integer beyond it would wrap.
  @doc false
  def encode_one(x, type) when type in [:f32, :f64] do
    bits = if type == :f32, do: 32, else: 64

    case <<x::float-size(bits)-native>> do
      <<_::float-size(bits)-native>> = bytes -> bytes
      _infinite -> nil
    end
  rescue
    ArgumentError -> nil
  end

  def encode_one(x, :s64) when is_integer(x) and x in -0x8000000000000000..0x7FFFFFFFFFFFFFFF,
    do: <<x::signed-64-native>>

  def encode_one(x, :s32) when is_integer(x) and x in -0x80000000..0x7FFFFFFF, do: <<x::signed-32-native>>
  def encode_one(x, :u8) when is_integer(x) and x in 0..255, do: <<x::unsigned-8>>
  def encode_one(_x, _type), do: nil

  # Non-finite floats read as :nan, :infinity and :neg_infinity (as in Nx): Elixir floats cannot hold them.
  @doc false
  def decode(bin, :f64), do: for(<<c::binary-size(8) <- bin>>, do: float(c, 64))
  def decode(bin, :f32), do: for(<<c::binary-size(4) <- bin>>, do: float(c, 32))
  def decode(bin, :s64), do: for(<<x::signed-64-native <- bin>>, do: x)
  def decode(bin, :s32), do: for(<<x::signed-32-native <- bin>>, do: x)
  def decode(bin, :u8), do: for(<<x::unsigned-8 <- bin>>, do: x)

  defp float(chunk, bits) do
    case chunk do
      <<x::float-size(bits)-native>> ->
        x

      _ ->
        <<u::unsigned-size(bits)-native>> = chunk
        exp_bits = if bits == 64, do: 11, else: 8
        mantissa = u &&& (1 <<< (bits - 1 - exp_bits)) - 1

        cond do
          mantissa != 0 -> :nan
          u >>> (bits - 1) == 1 -> :neg_infinity
          true -> :infinity
        end
    end
  end
end
