if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Reduce do
    @moduledoc false
    # Accel.Nx.Backend's reductions and dot. Reduced axes that are next to each other are merged
    # (a free reshape) so that each run of them is one pass over memory; a dot becomes one matrix
    # product per batch entry (BLAS for floats, Accel's kernel for integers, wrapping as Nx's),
    # its operands permuted into (batch, rows, k) and (batch, k, columns) by one strided copy each
    # where they are not already.

    alias Accel.Nx.{Fallback, Storage}
    alias Accel.Tensor, as: AT
    alias Nx.Tensor, as: T

    # a complex sum: its {..., 2} reals summed over the same axes
    def sum(%T{type: {:c, _}} = out, t, opts),
      do: Accel.Nx.Complex.sum(out, t, opts, &reduce_axes(&1, :sum, &2))

    def sum(out, t, opts), do: reduce(:sum, out, t, opts)
    def product(%T{type: {:c, _}} = out, t, opts), do: Accel.Nx.Complex.product(out, t, opts)
    def product(out, t, opts), do: reduce(:product, out, t, opts)
    def reduce_max(out, t, opts), do: reduce(:reduce_max, out, t, opts)
    def reduce_min(out, t, opts), do: reduce(:reduce_min, out, t, opts)
    # all/any of a complex tensor: of whether each element is not zero
    def all(out, %T{type: {:c, _}} = t, opts), do: reduce(:all, out, Accel.Nx.Complex.nonzero(t), opts)
    def all(out, t, opts), do: reduce(:all, out, t, opts)
    def any(out, %T{type: {:c, _}} = t, opts), do: reduce(:any, out, Accel.Nx.Complex.nonzero(t), opts)
    def any(out, t, opts), do: reduce(:any, out, t, opts)

    # What each reduction runs in Accel.
    @accel %{sum: :sum, product: :product, reduce_max: :max, reduce_min: :min, all: :min, any: :max}

    defp reduce(name, %T{type: type} = out, %T{shape: shape} = t, opts) do
      axes = opts[:axes] || Enum.to_list(0..(tuple_size(shape) - 1)//1)
      # Only sums and products have a value over an empty axis.
      empty = Enum.any?(axes, &(elem(shape, &1) == 0))

      # Sums and products of integers are s64 or u64 in Accel as in Nx; every other result
      # converts to Nx's type.
      if Storage.compute?([t.type, type]) and not (empty and name not in [:sum, :product]) do
        [a] = Storage.operands!(name, [t])
        a = Storage.cast(a, t.type)
        a = if name in [:all, :any], do: AT.not_equal(a, 0), else: a
        result = a |> reduce_axes(@accel[name], axes) |> AT.reshape(out.shape)
        Storage.wrap(result, out, Storage.auto?([t]))
      else
        Fallback.run(name, [out, t, opts])
      end
    end

    # Runs of neighbouring reduced (or kept) axes become one axis each.
    defp reduce_axes(%AT{shape: shape} = a, op, axes) do
      groups =
        shape
        |> Tuple.to_list()
        |> Enum.with_index()
        |> Enum.chunk_by(fn {_, d} -> d in axes end)
        |> Enum.map(fn [{_, d} | _] = run -> {d in axes, run |> Enum.map(&elem(&1, 0)) |> Enum.product()} end)

      reduced_groups = Enum.count(groups, &elem(&1, 0))

      case groups do
        [{true, n}] ->
          apply(AT, op, [AT.reshape(a, {n}), []])

        _ when op in [:sum, :product] and reduced_groups > 1 ->
          # Reduced axes apart: moved last (one strided copy), then one pass over all of them, so
          # that a float sum or product accumulates in f64 once, as Nx's does (a pass per axis
          # would round to the type between them).
          rank = tuple_size(shape)
          kept = Enum.to_list(0..(rank - 1)//1) -- axes
          moved = Storage.permute(a, kept ++ Enum.sort(axes))
          rows = kept |> Enum.map(&elem(shape, &1)) |> Enum.product()
          apply(AT, op, [AT.reshape(moved, {rows, div(AT.size(a), max(rows, 1))}), [axes: [1]]])

        _ ->
          merged = AT.reshape(a, groups |> Enum.map(&elem(&1, 1)) |> List.to_tuple())
          reduced = for {{true, _}, i} <- Enum.with_index(groups), do: i
          apply(AT, op, [merged, [axes: reduced]])
      end
    end

    def argmax(out, t, opts), do: arg_reduce(:argmax, out, t, opts)
    def argmin(out, t, opts), do: arg_reduce(:argmin, out, t, opts)

    # How Nx ranks NaN in argmin and argmax changed in 0.8: since then any NaN wins, the last one
    # of a row; before, a row's scan kept its first element when that was NaN and otherwise
    # ignored NaN (Nx.BinaryBackend's comparisons are false with NaN). Read from the Nx that runs.
    defp nan_wins? do
      case :persistent_term.get({__MODULE__, :nan_wins}, nil) do
        nil ->
          wins = Version.match?(to_string(Application.spec(:nx, :vsn)), ">= 0.8.0")
          :persistent_term.put({__MODULE__, :nan_wins}, wins)
          wins

        wins ->
          wins
      end
    end

    defp arg_reduce(name, %T{type: type} = out, %T{shape: shape} = t, opts) do
      axis = opts[:axis]
      empty = if axis, do: elem(shape, axis) == 0, else: Nx.size(shape) == 0

      if Storage.compute?([t.type, type]) and not empty do
        [a] = Storage.operands!(name, [t])
        a = Storage.cast(a, t.type)
        tie = opts[:tie_break] || :low
        result = arg_pick(name, a, axis, tie, Storage.float?(t.type))
        Storage.wrap(result |> AT.reshape(out.shape) |> Storage.cast(type), out, Storage.auto?([t]))
      else
        Fallback.run(name, [out, t, opts])
      end
    end

    defp pick(name, a, axis, nan, tie), do: apply(AT, name, [a, [axis: axis, nan: nan, tie_break: tie]])

    defp arg_pick(name, a, axis, tie, floats?) do
      if nan_wins?() or not floats? do
        pick(name, a, axis, :last, tie)
      else
        # the first element NaN: its index, 0 (or with tie_break: :high the last NaN's, as the
        # scan's equality matches NaN with NaN); otherwise the extreme of the numbers
        first_nan = a |> first_along(axis) |> then(&AT.not_equal(&1, &1))
        if_nan = if tie == :high, do: pick(name, a, axis, :last, :high), else: 0
        AT.select(first_nan, if_nan, pick(name, a, axis, :ignored, tie))
      end
    end

    # Each row's first element along `axis` (of the flattened tensor for nil), in the result's shape.
    defp first_along(%AT{} = a, nil), do: Storage.view(a, {}, [], 0)

    defp first_along(%AT{shape: shape} = a, axis) do
      strides = Storage.strides(shape) |> List.delete_at(axis)
      Storage.view(a, Tuple.delete_at(shape, axis), strides, 0)
    end

    # a complex product: real products of the parts (Accel.Nx.Complex)
    def dot(%T{type: {:c, _} = type} = out, a, contract_a, batch_a, b, contract_b, batch_b) do
      args = [out, a, contract_a, batch_a, b, contract_b, batch_b]

      Accel.Nx.Complex.bilinear(:dot, out, a, b, args, fn ra, rb ->
        real = %{out | type: Nx.Type.to_real(type)}
        dot(real, ra, contract_a, batch_a, rb, contract_b, batch_b).data.tensor
      end)
    end

    def dot(%T{type: type} = out, a, contract_a, batch_a, b, contract_b, batch_b) do
      if Storage.compute?([type, a.type, b.type]) do
        [x, y] = Storage.operands!(:dot, [a, b]) |> Enum.map(&Storage.cast(&1, type))
        free_a = axes_except(a.shape, contract_a ++ batch_a)
        free_b = axes_except(b.shape, contract_b ++ batch_b)

        [nb, m, k, n] = [
          size(a.shape, batch_a),
          size(a.shape, free_a),
          size(a.shape, contract_a),
          size(b.shape, free_b)
        ]

        # the CPU backend's BLAS reads an operand stored transposed as it is (a weight's gradient,
        # x^T dy): no copy to put its axes in order
        transposable = elem(x.device, 0) == :cpu and x.type in [:f32, :f64] and nb * m * k * n > 0
        {x, ta} = layout(x, batch_a ++ free_a ++ contract_a, batch_a ++ contract_a ++ free_a, transposable)
        {y, tb} = layout(y, batch_b ++ contract_b ++ free_b, batch_b ++ free_b ++ contract_b, transposable)

        result =
          if ta or tb do
            x = AT.reshape(x, if(ta, do: {nb, k, m}, else: {nb, m, k}))
            y = AT.reshape(y, if(tb, do: {nb, n, k}, else: {nb, k, n}))
            flags = if(ta, do: 1, else: 0) + if(tb, do: 2, else: 0)
            AT.new({nb, m, n}, x.type, &Accel.NIF.tensor_matmul(x.ref, y.ref, nb, m, k, n, flags, &1))
          else
            batched_matmul(AT.reshape(x, {nb, m, k}), AT.reshape(y, {nb, k, n}))
          end

        Storage.wrap(AT.reshape(result, out.shape), out, Storage.auto?([a, b]))
      else
        Fallback.run(:dot, [out, a, contract_a, batch_a, b, contract_b, batch_b])
      end
    end

    # An operand in the axis order `order` (its free and contracted axes in the product's order):
    # itself where it is stored so, or (where the backend can read it so) where it is stored in
    # `transposed` order, as {operand, transposed?}; else a copy in order.
    defp layout(t, order, transposed, transposable) do
      identity = Enum.to_list(0..(tuple_size(t.shape) - 1)//1)

      cond do
        order == identity -> {t, false}
        transposable and transposed == identity -> {t, true}
        true -> {Storage.permute(t, order), false}
      end
    end

    @doc false
    # {nb, m, k} by {nb, k, n} (also Accel.Nx.Conv's, per group).
    def batched_matmul(%AT{shape: {1, m, k}} = x, %AT{shape: {1, k, n}} = y),
      do: AT.matmul(AT.reshape(x, {m, k}), AT.reshape(y, {k, n}))

    # floats: one strided-batched call of the device's BLAS, no copies
    def batched_matmul(%AT{shape: {nb, m, k}, type: type} = x, %AT{shape: {nb, k, n}} = y)
        when type in [:f32, :f64] and nb * m * n > 0 and k > 0 do
      AT.new({nb, m, n}, type, fn ref -> Accel.NIF.tensor_matmul(x.ref, y.ref, nb, m, k, n, 0, ref) end)
    end

    # integers (no BLAS takes them): a product per batch entry
    def batched_matmul(%AT{shape: {nb, m, k}} = x, %AT{shape: {nb, k, n}} = y) do
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
  end
end
