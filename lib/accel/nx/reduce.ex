if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Reduce do
    @moduledoc false
    # Accel.Nx.Backend's reductions and dot. Reduced axes that are next to each other are merged
    # (a free reshape) so that each run of them is one pass over memory; a dot becomes one BLAS
    # matrix product per batch entry, its operands permuted into (batch, rows, k) and
    # (batch, k, columns) by one strided copy each where they are not already.

    alias Accel.Nx.{Fallback, Storage}
    alias Accel.Tensor, as: AT
    alias Nx.Tensor, as: T

    def sum(out, t, opts), do: reduce(:sum, out, t, opts)
    def reduce_max(out, t, opts), do: reduce(:reduce_max, out, t, opts)
    def reduce_min(out, t, opts), do: reduce(:reduce_min, out, t, opts)
    def all(out, t, opts), do: reduce(:all, out, t, opts)
    def any(out, t, opts), do: reduce(:any, out, t, opts)

    # What each reduction runs in Accel.
    @accel %{sum: :sum, reduce_max: :max, reduce_min: :min, all: :min, any: :max}

    defp reduce(name, %T{type: type} = out, %T{shape: shape} = t, opts) do
      axes = opts[:axes] || Enum.to_list(0..(tuple_size(shape) - 1)//1)
      # Only sums have a value over an empty axis.
      empty = Enum.any?(axes, &(elem(shape, &1) == 0))

      if Storage.compute?([t.type]) and accel_type(name, t.type) == Storage.storage_type(type) and
           not (empty and name != :sum) do
        [a] = Storage.operands!(name, [t])
        a = if name in [:all, :any], do: AT.not_equal(a, 0), else: a
        result = a |> reduce_axes(@accel[name], axes) |> AT.reshape(out.shape)
        Storage.wrap(result, out, Storage.auto?([t]))
      else
        Fallback.run(name, [out, t, opts])
      end
    end

    # The Accel type a reduction of an Nx type gives: integer sums :s64 (Nx's u64 and s64 both
    # store as :s64), all/any :u8 (their u8 predicate), the rest the input's.
    defp accel_type(:sum, {kind, _}) when kind in [:s, :u], do: :s64
    defp accel_type(name, _type) when name in [:all, :any], do: :u8
    defp accel_type(_name, type), do: Storage.compute_type(type)

    # Runs of neighbouring reduced (or kept) axes become one axis each.
    defp reduce_axes(%AT{shape: shape} = a, op, axes) do
      groups =
        shape
        |> Tuple.to_list()
        |> Enum.with_index()
        |> Enum.chunk_by(fn {_, d} -> d in axes end)
        |> Enum.map(fn [{_, d} | _] = run -> {d in axes, run |> Enum.map(&elem(&1, 0)) |> Enum.product()} end)

      case groups do
        [{true, n}] ->
          apply(AT, op, [AT.reshape(a, {n}), []])

        _ ->
          merged = AT.reshape(a, groups |> Enum.map(&elem(&1, 1)) |> List.to_tuple())
          reduced = for {{true, _}, i} <- Enum.with_index(groups), do: i
          apply(AT, op, [merged, [axes: reduced]])
      end
    end

    def argmax(out, t, opts), do: arg_reduce(:argmax, out, t, opts)
    def argmin(out, t, opts), do: arg_reduce(:argmin, out, t, opts)

    defp arg_reduce(name, %T{type: type} = out, %T{shape: shape} = t, opts) do
      axis = opts[:axis]
      empty = if axis, do: elem(shape, axis) == 0, else: Nx.size(shape) == 0

      if Storage.compute?([t.type, type]) and opts[:tie_break] in [nil, :low] and not empty do
        [a] = Storage.operands!(name, [t])
        result = if axis, do: apply(AT, name, [a, [axis: axis]]), else: apply(AT, name, [a])
        Storage.wrap(result |> AT.reshape(out.shape) |> Storage.cast(type), out, Storage.auto?([t]))
      else
        Fallback.run(name, [out, t, opts])
      end
    end

    def dot(%T{type: type} = out, a, contract_a, batch_a, b, contract_b, batch_b) do
      if elem(type, 0) == :f and Storage.compute?([type, a.type, b.type]) do
        [x, y] = Storage.operands!(:dot, [a, b]) |> Enum.map(&Storage.cast(&1, type))
        free_a = axes_except(a.shape, contract_a ++ batch_a)
        free_b = axes_except(b.shape, contract_b ++ batch_b)
        x = permute(x, batch_a ++ free_a ++ contract_a)
        y = permute(y, batch_b ++ contract_b ++ free_b)

        [nb, m, k, n] = [
          size(a.shape, batch_a),
          size(a.shape, free_a),
          size(a.shape, contract_a),
          size(b.shape, free_b)
        ]

        result = batched_matmul(AT.reshape(x, {nb, m, k}), AT.reshape(y, {nb, k, n}))
        Storage.wrap(AT.reshape(result, out.shape), out, Storage.auto?([a, b]))
      else
        Fallback.run(:dot, [out, a, contract_a, batch_a, b, contract_b, batch_b])
      end
    end

    defp batched_matmul(%AT{shape: {1, m, k}} = x, %AT{shape: {1, k, n}} = y),
      do: AT.matmul(AT.reshape(x, {m, k}), AT.reshape(y, {k, n}))

    defp batched_matmul(%AT{shape: {nb, m, k}} = x, %AT{shape: {nb, k, n}} = y) do
      parts =
        for i <- 0..(nb - 1)//1 do
          xi = Storage.view(x, {m, k}, [k, 1], i * m * k)
          yi = Storage.view(y, {k, n}, [n, 1], i * k * n)
          AT.matmul(xi, yi) |> AT.reshape({1, m, n})
        end

      case parts do
        [] -> AT.reshape(x, {0, m, n})
        parts -> AT.concatenate(parts, axis: 0)
      end
    end

    defp axes_except(shape, axes), do: Enum.to_list(0..(tuple_size(shape) - 1)//1) -- axes
    defp size(shape, axes), do: Enum.reduce(axes, 1, &(elem(shape, &1) * &2))

    # The tensor with its axes in `order`: itself when that is the order they are in.
    defp permute(%AT{shape: shape} = a, order) do
      if order == Enum.sort(order) do
        a
      else
        strides = Storage.strides(shape)
        new_shape = order |> Enum.map(&elem(shape, &1)) |> List.to_tuple()
        Storage.view(a, new_shape, Enum.map(order, &Enum.at(strides, &1)), 0)
      end
    end
  end
end
