if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Indexing do
    @moduledoc false
    # Accel.Nx.Backend's operations that read or write elements at indices held in a tensor:
    # gather, take and take_along_axis are one gather kernel (each output element reads the element
    # its index tuple and its own coordinates address), indexed_put and indexed_add one scatter
    # kernel (the updates applied in order, as Nx.BinaryBackend applies them). Elements are moved
    # by their size, so every stored type gathers; scatters compute in the output's type.
    #
    # An index outside its axis raises Nx's ArgumentError (the first such index, in the order the
    # binary backend meets them): the kernel raises a flag, and only then are the indices read to
    # the host to name it.

    alias Accel.Nx.{Fallback, Storage}
    alias Accel.Tensor, as: AT
    alias Nx.Tensor, as: T

    # accel_params holds at most this many indexed axes, and eight result dimensions
    @max_axes 6
    @max_rank 8

    def gather(%T{} = out, %T{shape: shape} = t, %T{shape: ishape} = indices, opts) do
      rank = tuple_size(shape)
      axes = opts[:axes] || Enum.to_list(0..(rank - 1)//1)
      batch = ishape |> Tuple.delete_at(tuple_size(ishape) - 1) |> Tuple.to_list()
      rest = all_axes(rank) -- axes
      strides = Storage.strides(shape)

      plan = %{
        shape: batch ++ Enum.map(rest, &elem(shape, &1)),
        in_strides: zeros(batch) ++ Enum.map(rest, &Enum.at(strides, &1)),
        batch_strides: contiguous(batch) ++ zeros(rest),
        sizes: Enum.map(axes, &elem(shape, &1)),
        strides: Enum.map(axes, &Enum.at(strides, &1))
      }

      # Nx.BinaryBackend names the axis by its place in the index tuple, in the shape with the
      # indexed axes first
      message_shape = Enum.map(axes ++ rest, &elem(shape, &1)) |> List.to_tuple()

      run_gather(
        :gather,
        out,
        t,
        indices,
        plan,
        fn -> tuples_out_of_bounds(indices, plan.sizes, message_shape) end,
        [opts]
      )
    end

    def take(%T{} = out, %T{shape: shape} = t, %T{shape: ishape} = indices, axis) do
      strides = Storage.strides(shape)
      {pre, [_ | post]} = shape |> Tuple.to_list() |> Enum.split(axis)
      {pre_strides, [axis_stride | post_strides]} = Enum.split(strides, axis)
      idims = Tuple.to_list(ishape)

      plan = %{
        shape: pre ++ idims ++ post,
        in_strides: pre_strides ++ zeros(idims) ++ post_strides,
        batch_strides: zeros(pre) ++ contiguous(idims) ++ zeros(post),
        sizes: [elem(shape, axis)],
        strides: [axis_stride]
      }

      run_gather(:take, out, t, indices, plan, fn -> along_out_of_bounds(indices, axis, shape) end, [axis])
    end

    def take_along_axis(%T{} = out, %T{shape: shape} = t, %T{shape: ishape} = indices, axis) do
      strides = Storage.strides(shape)
      idims = Tuple.to_list(ishape)

      plan = %{
        shape: idims,
        in_strides: strides |> List.replace_at(axis, 0),
        batch_strides: contiguous(idims),
        sizes: [elem(shape, axis)],
        strides: [Enum.at(strides, axis)]
      }

      run_gather(
        :take_along_axis,
        out,
        t,
        indices,
        plan,
        fn -> along_out_of_bounds(indices, axis, shape) end,
        [axis]
      )
    end

    defp run_gather(name, out, t, indices, plan, out_of_bounds, rest) do
      if Storage.elements?(t.type) and index_type?(indices.type) and length(plan.sizes) in 1..@max_axes and
           length(plan.shape) <= @max_rank and Enum.all?(plan.sizes, &(&1 > 0)) do
        [a, i] = Storage.operands!(name, [t, indices])
        i = Storage.cast(i, {:s, 64})

        result =
          checked(out_of_bounds, fn ->
            AT.new(List.to_tuple(plan.shape), a.type, fn ref ->
              Accel.NIF.tensor_gather(
                a.ref,
                i.ref,
                plan.shape,
                plan.in_strides,
                plan.batch_strides,
                plan.sizes,
                plan.strides,
                ref
              )
            end)
          end)

        Storage.wrap(AT.reshape(result, out.shape), out, Storage.auto?([t, indices]))
      else
        Fallback.run(name, [out, t, indices | rest])
      end
    end

    def indexed_add(out, target, indices, updates, opts),
      do: scatter(:add, :indexed_add, out, target, indices, updates, opts)

    def indexed_put(out, target, indices, updates, opts),
      do: scatter(:put, :indexed_put, out, target, indices, updates, opts)

    # complex: the scatter of the buffers read as {..., 2} reals (an add adds both parts)
    defp scatter(
           op,
           name,
           %T{type: {:c, _} = type} = out,
           %T{type: type} = target,
           indices,
           %T{type: type} = updates,
           opts
         ) do
      axes = opts[:axes] || all_axes(tuple_size(target.shape))

      Accel.Nx.Complex.as_pairs(name, out, [target, indices, updates], fn [t, i, u], pairs_out ->
        scatter(op, name, pairs_out, t, i, u, Keyword.merge(opts, axes: axes, pairs: true))
      end)
    end

    defp scatter(op, name, %T{type: type} = out, %T{shape: shape} = target, indices, updates, opts) do
      rank = tuple_size(shape)
      axes = opts[:axes] || all_axes(rank)
      depth = elem(indices.shape, tuple_size(indices.shape) - 1)
      rest = all_axes(rank) -- axes
      slice = Enum.map(rest, &elem(shape, &1))
      strides = Storage.strides(shape)
      sizes = Enum.map(axes, &elem(shape, &1))

      if Storage.compute?([type, target.type, updates.type]) and index_type?(indices.type) and
           depth == length(axes) and
           depth in 1..@max_axes and length(slice) <= @max_rank and Enum.all?(sizes, &(&1 > 0)) do
        [t, i, u] = Storage.operands!(name, [target, indices, updates])
        [t, u] = Enum.map([t, u], &Storage.cast(&1, type))
        i = Storage.cast(i, {:s, 64})
        message_shape = Enum.map(axes ++ rest, &elem(shape, &1))
        # (a complex target's, without the axis of its parts)
        message_shape = if opts[:pairs], do: Enum.drop(message_shape, -1), else: message_shape

        result =
          checked(fn -> tuples_out_of_bounds(indices, sizes, List.to_tuple(message_shape)) end, fn ->
            AT.new(shape, t.type, fn ref ->
              Accel.NIF.tensor_scatter(
                op,
                t.ref,
                i.ref,
                u.ref,
                slice,
                Enum.map(rest, &Enum.at(strides, &1)),
                contiguous(slice),
                {div(Nx.size(indices), depth), Enum.product(slice)},
                sizes,
                Enum.map(axes, &Enum.at(strides, &1)),
                ref
              )
            end)
          end)

        Storage.wrap(result, out, Storage.auto?([target, indices, updates]))
      else
        Fallback.run(name, [out, target, indices, updates, opts])
      end
    end

    # The kernel's flag: Nx's message, naming the first index outside its axis.
    defp checked(out_of_bounds, run) do
      run.()
    rescue
      e in ArgumentError ->
        if e.message == "an index is out of bounds", do: out_of_bounds.(), else: reraise(e, __STACKTRACE__)
    end

    defp tuples_out_of_bounds(indices, sizes, shape) do
      indices
      |> host_indices()
      |> Enum.chunk_every(length(sizes))
      |> Enum.find_value(fn tuple ->
        tuple |> Enum.zip(sizes) |> Enum.with_index() |> Enum.find_value(fn {{i, n}, k} -> bad(i, n, k) end)
      end)
      |> raise_out_of_bounds(shape)
    end

    defp along_out_of_bounds(indices, axis, shape) do
      n = elem(shape, axis)
      indices |> host_indices() |> Enum.find_value(&bad(&1, n, axis)) |> raise_out_of_bounds(shape)
    end

    defp bad(i, n, axis), do: if(i < 0 or i >= n, do: {i, axis})

    defp raise_out_of_bounds({index, axis}, shape),
      do: raise(ArgumentError, "index #{index} is out of bounds for axis #{axis} in shape #{inspect(shape)}")

    # (the host copy finds none: the kernel's word stands)
    defp raise_out_of_bounds(nil, _shape), do: raise(ArgumentError, "an index is out of bounds")

    defp host_indices(indices), do: indices |> Nx.backend_copy(Nx.BinaryBackend) |> Nx.to_flat_list()

    # integers Accel converts on the device (not Nx 0.9+'s sub-byte ones, stored as bytes)
    defp index_type?({kind, _} = type), do: kind in [:s, :u] and Storage.compute?([type])
    defp all_axes(rank), do: Enum.to_list(0..(rank - 1)//1)
    defp zeros(list), do: Enum.map(list, fn _ -> 0 end)
    defp contiguous(dims), do: dims |> List.to_tuple() |> Storage.strides()
  end
end
