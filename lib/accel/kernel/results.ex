defmodule Accel.Kernel.Results do
  @moduledoc false
  # A launch's result in the call's form: the elements the kernel flagged (they hold its
  # sentinel) recomputed on the BEAM by the original function, in order, and patched in.

  @min -0x8000000000000000
  @max 0x7FFFFFFFFFFFFFFF

  # The elements the kernel flagged hold its sentinel (in `out`, a tensor or a binary): each is
  # recomputed on the BEAM, in order (the first that raises raises, as in Enum.map/2), and patched
  # into the result. `tensors` holds one entry per input that is not a range.
  def recompute(kernel, compiled, inputs, tensors, out, as, n, offset) do
    bin = host_binary(out)
    hosts = host_inputs(inputs, tensors)

    patches =
      for i <- sentinels(bin, compiled.out_type) do
        value = apply(kernel.fun, Enum.map(hosts, &element(&1, i)))
        {i, value, encode(value, compiled.out_type, as, i + offset, kernel)}
      end

    output(bin, compiled, as, n, patches, out)
  end

  # Each input's elements as the call gave them: a binary input's own bytes (on a device the
  # output may have been written over its upload), a tensor's read back.
  defp host_inputs(inputs, tensors) do
    {hosts, _} =
      Enum.map_reduce(inputs, tensors, fn
        %{kind: :range, value: r}, ts -> {{:range, r}, ts}
        %{kind: :binary, type: type, value: bin}, [_ | ts] -> {{type, bin}, ts}
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

  # A kernel's output as bytes on the host: streamed calls give a binary already, launches a tensor.
  def host_binary(out) when is_binary(out), do: out
  def host_binary(out), do: Accel.Tensor.to_binary(out)

  def output(bin, compiled, as, n, patches, out \\ nil)

  def output(bin, compiled, :list, n, patches, _out) do
    list =
      case compiled.out_type do
        :s64 -> Accel.NIF.int64_list(bin)
        :u8 -> for <<b <- bin>>, do: b == 1
        type -> Accel.NIF.tensor_nested_list(bin, type, [n])
      end

    patch_list(list, patches, 0)
  end

  def output(bin, _compiled, :binary, _n, patches, _out), do: patch_binary(bin, patches)

  def output(bin, compiled, :tensor, n, patches, %Accel.Tensor{device: {backend, device}}) do
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
end
