defmodule Accel.Tensor.Reduce do
  @moduledoc false
  # Accel.Tensor's reductions (sum/2, product/2, min/2, max/2, argmin/2, argmax/2): over one axis, several,
  # or all of them, each axis one pass on the device (core/tensor.cpp).

  alias Accel.NIF
  alias Accel.Tensor, as: T
  alias Accel.Tensor.Layout

  @reduce_options [
    axis: [rule: :integer, default: nil, doc: "the axis to reduce (negative counts from the end)"],
    axes: [
      rule: {:custom, __MODULE__, :axes_option?, "a list of axes"},
      default: nil,
      doc: "several axes to reduce (`sum/2`, `product/2`, `min/2`, `max/2`, `mean/2`)"
    ]
  ]

  # argmin/2 and argmax/2 also say which of equal values and where NaN wins
  @arg_options @reduce_options ++
                 [
                   tie_break: [
                     rule: {:in, [:low, :high]},
                     default: :low,
                     doc: "of equal values, the first (`:low`) or the last (`:high`)"
                   ],
                   nan: [
                     rule: {:in, [:first, :last, :ignored]},
                     default: :first,
                     doc:
                       "the first NaN wins over any number (`:first`), the last one does (`:last`), or any number wins over NaN (`:ignored`)"
                   ]
                 ]

  @doc false
  def reduce_options, do: @reduce_options

  def reduce(op, t, _opts) when not is_struct(t, T), do: T.not_a_tensor!("#{op}/2", t)

  def reduce(op, %T{} = t, opts) do
    schema = if op in [:argmin, :argmax], do: @arg_options, else: @reduce_options
    opts = Accel.Options.validate!(opts, schema, "Accel.Tensor.#{op}/2")
    # the NIF's name of an argmin/argmax with its policy
    nif_op = if op in [:argmin, :argmax], do: {op, opts[:nan], opts[:tie_break]}, else: op

    case {opts[:axis], opts[:axes]} do
      {axis, nil} ->
        reduce_axis(op, t, axis, nif_op)

      {nil, _axes} when op in [:argmin, :argmax] ->
        raise ArgumentError, "Accel.Tensor.#{op}/2 takes one axis: (an index along several has no meaning)"

      {nil, axes} ->
        # One axis after another, the last first so that the others keep their numbers.
        axes = axes |> Enum.map(&axis!(&1, t.shape)) |> Enum.uniq() |> Enum.sort(:desc)

        if length(axes) != length(opts[:axes]),
          do: raise(ArgumentError, "axes must be distinct, got: #{inspect(opts[:axes])}")

        first =
          if op in [:sum, :product] and t.type not in [:f32, :f64],
            do: T.as_type(t, sum_type(t.type)),
            else: t

        Enum.reduce(axes, first, fn axis, acc -> swap_unless(acc, t, reduce_axis(op, acc, axis, op)) end)
        |> then(fn result -> if result == t, do: T.as_type(t, t.type), else: result end)

      {_, _} ->
        raise ArgumentError, "Accel.Tensor.#{op}/2 takes axis: or axes:, not both"
    end
  end

  defp reduce_axis(op, %T{shape: shape} = t, axis, nif_op) do
    dims = Tuple.to_list(shape)

    {outer, len, inner, out_shape} =
      case axis do
        nil ->
          {1, T.size(t), 1, {}}

        axis ->
          {before, [len | rest]} = Enum.split(dims, axis!(axis, shape))
          {Enum.product(before), len, Enum.product(rest), List.to_tuple(before ++ rest)}
      end

    type =
      cond do
        op in [:argmin, :argmax] -> :s64
        op in [:sum, :product] -> sum_type(t.type)
        true -> t.type
      end

    cond do
      outer * inner == 0 ->
        Layout.zeros(out_shape, %{t | type: type})

      len == 0 and op == :sum ->
        Layout.zeros(out_shape, %{t | type: type})

      len == 0 and op == :product ->
        Layout.zeros(out_shape, %{t | type: type}) |> T.add(1)

      len == 0 ->
        raise ArgumentError, "#{op}/2 of an empty axis has no value (shape #{inspect(shape)})"

      true ->
        T.new(out_shape, type, fn ref -> NIF.tensor_reduce(nif_op, t.ref, outer, len, inner, ref) end)
    end
  end

  defp axis!(axis, shape) when is_integer(axis) and axis >= -tuple_size(shape) and axis < tuple_size(shape),
    do: if(axis < 0, do: axis + tuple_size(shape), else: axis)

  defp axis!(other, {}),
    do: raise(ArgumentError, "a 0-d tensor (shape {}) has no axes, got axis: #{inspect(other)}")

  defp axis!(other, shape) do
    rank = tuple_size(shape)

    raise ArgumentError,
          "axis must be an integer in -#{rank}..#{rank - 1} for shape #{inspect(shape)}, got: #{inspect(other)}"
  end

  # Frees an intermediate result (never the caller's own tensor) once the next one exists.
  defp swap_unless(old, keep, new) do
    if old != keep, do: T.free(old)
    new
  end

  @doc false
  def axes_option?(axes), do: is_list(axes) and Enum.all?(axes, &is_integer/1)

  # Integer sums as Nx makes them: s64 for signed types, u64 for unsigned ones (both wrap modulo 2^64).
  defp sum_type(type) do
    case Accel.Tensor.Types.kind(type) do
      :float -> type
      :uint -> :u64
      _ -> :s64
    end
  end
end
