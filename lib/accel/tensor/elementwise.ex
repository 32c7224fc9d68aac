defmodule Accel.Tensor.Elementwise do
  @moduledoc false
  # Accel.Tensor's elementwise operations, whose public functions are generated from the registry
  # (Accel.Tensor.Registry): type promotion by Nx's rules, the broadcast shape, and the NIF calls.
  # Operands converted for promotion are freed as soon as the result exists.

  alias Accel.NIF
  alias Accel.Tensor, as: T
  alias Accel.Tensor.Types

  @doc false
  def unary(op, %T{} = t), do: T.new(t.shape, t.type, fn ref -> NIF.tensor_unary(op, t.ref, ref) end)
  def unary(op, other), do: T.not_a_tensor!("#{op}/1", other)

  @doc false
  # Two tensors of one shape and type (the common case, and every fused program's): nothing to
  # broadcast, promote or convert, so straight to the NIF (which checks their places).
  def binary(family, op, %T{shape: shape, type: type} = a, %T{shape: shape, type: type} = b),
    do: launch(family, op, a, b, shape, type)

  def binary(family, op, a, b) do
    check_operands!({op, 2}, [a, b])
    shape = broadcast!({op, 2}, [a, b])
    type = promote([a, b])
    [x, y] = converted = Enum.map([a, b], &convert(&1, type))

    try do
      launch(family, op, x, y, shape, type)
    after
      free_converted(converted, [a, b])
    end
  end

  defp launch(family, op, x, y, shape, type) do
    out_type = if family == :compare, do: :u8, else: type
    nif = if family == :compare, do: &NIF.tensor_compare/6, else: &NIF.tensor_binary/6
    T.new(shape, out_type, fn ref -> nif.(op, operand(x), operand(y), dims(x), dims(y), ref) end)
  end

  @doc false
  def select(%T{} = pred, a, b) do
    check_operands!("select/3", [a, b])
    # Checked before any temporary exists, so that a refusal leaves none behind.
    shape = broadcast!("select/3", [pred, a, b])
    type = promote([a, b])
    pred8 = if pred.type == :u8, do: pred, else: binary(:compare, :not_equal, pred, 0)
    [x, y] = converted = Enum.map([a, b], &convert(&1, type))
    # Both values numbers: the result still needs a tensor of their type to take it from.
    x = if is_number(x) and is_number(y), do: scalar_tensor(x, type, pred), else: x

    try do
      T.new(shape, type, fn ref ->
        NIF.tensor_select(pred8.ref, operand(x), operand(y), dims(pred8), dims(x), dims(y), ref)
      end)
    after
      free_converted([pred8, x | tl(converted)], [pred, a, b])
    end
  end

  def select(pred, _a, _b), do: T.not_a_tensor!("select/3", pred)

  @doc """
  The type two operands combine in (Nx's rules): the same type stays; integers of one signedness
  widen, a signed and an unsigned one give a signed type wider than the unsigned one's (at most
  s64); an integer and a float give the float type; of two floats the wider (f16 and bf16: f32).
  A number takes the tensor's type, except a float number with an integer tensor, which gives f32.
  """
  def promote(operands) do
    tensor_type =
      operands
      |> Enum.flat_map(fn
        %T{type: t} -> [t]
        _ -> []
      end)
      |> Enum.reduce(nil, &merge/2)

    cond do
      tensor_type != nil and Types.kind(tensor_type) == :float -> tensor_type
      Enum.any?(operands, &is_float/1) -> :f32
      tensor_type == nil -> :s64
      true -> tensor_type
    end
  end

  defp merge(type, nil), do: type
  defp merge(same, same), do: same
  defp merge(a, b), do: merge_kinds({Types.kind(a), bits(a), a}, {Types.kind(b), bits(b), b})

  defp merge_kinds({kind, x, a}, {kind, y, b}) when kind != :float, do: if(x >= y, do: a, else: b)
  defp merge_kinds({:int, x, a}, {:uint, y, _}), do: if(x > y, do: a, else: :"s#{Kernel.min(2 * y, 64)}")
  defp merge_kinds({:uint, _, _} = u, {:int, _, _} = s), do: merge_kinds(s, u)
  defp merge_kinds({:float, x, a}, {:float, y, b}) when x != y, do: if(x > y, do: a, else: b)
  defp merge_kinds({:float, _, _}, {:float, _, _}), do: :f32
  defp merge_kinds({:float, _, a}, _), do: a
  defp merge_kinds(_, {:float, _, b}), do: b

  defp bits(type), do: Types.bytes(type) * 8

  @doc "The shape operands of these shapes broadcast to (Nx and NumPy: aligned at the end, 1 stretches)."
  def broadcast!(fun, operands) do
    # (tensors of one shape, the common case, need no walk)
    case for(%T{shape: s} <- operands, do: s) do
      [shape | rest] -> if Enum.all?(rest, &(&1 == shape)), do: shape, else: broadcast_shapes!(fun, operands)
      [] -> {}
    end
  end

  defp broadcast_shapes!(fun, operands) do
    shapes = for %T{shape: s} <- operands, do: Tuple.to_list(s)
    rank = shapes |> Enum.map(&length/1) |> Enum.max(fn -> 0 end)
    padded = Enum.map(shapes, &(List.duplicate(1, rank - length(&1)) ++ &1))

    padded
    |> Enum.zip_with(fn dims ->
      case Enum.uniq(dims -- Enum.filter(dims, &(&1 == 1))) do
        [] ->
          1

        [d] ->
          d

        _ ->
          raise ArgumentError,
                "Accel.Tensor.#{name(fun)}: shapes #{Enum.map_join(operands_shapes(operands), " and ", &inspect/1)} do not broadcast"
      end
    end)
    |> List.to_tuple()
  end

  defp operands_shapes(operands), do: for(%T{shape: s} <- operands, do: s)

  # the function a message names: "select/3", or {op, arity} (made only for the message)
  defp name({op, arity}), do: "#{op}/#{arity}"
  defp name(fun), do: fun

  defp check_operands!(fun, operands) do
    for x <- operands, not is_struct(x, T) and not is_number(x) do
      raise ArgumentError,
            "Accel.Tensor.#{name(fun)} expects tensors or numbers, got: #{inspect(x, limit: 5)}"
    end

    # Places are checked by the native side, which knows where each tensor really is.
    :ok
  end

  defp convert(%T{type: type} = t, type), do: t
  defp convert(%T{} = t, type), do: T.as_type(t, type)
  defp convert(number, _type), do: number

  defp free_converted(used, given) do
    for {u, g} <- Enum.zip(used, given), is_struct(u, T) and u != g, do: T.free(u)
  end

  defp operand(%T{ref: ref}), do: ref
  defp operand(number), do: number

  defp dims(%T{shape: shape}), do: Tuple.to_list(shape)
  defp dims(_number), do: []

  defp scalar_tensor(x, type, %T{device: {backend, index}}) do
    bytes =
      Accel.Tensor.Codec.encode_one(x, type) ||
        raise(ArgumentError, "select/3: #{inspect(x)} does not fit type #{inspect(type)}")

    T.from_binary(bytes, type, {}, backend: backend, device: index)
  end
end
