if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Layout do
    @moduledoc false
    # Accel.Nx.Backend's operations on types and shapes: conversions, and the operations that only
    # move elements (reshape, transpose, broadcast, reverse, slice, pad, concatenate), each one
    # strided view or copy on the device (Accel.Nx.Storage), the rest through the fallback.

    alias Accel.Nx.{Fallback, Storage}
    alias Accel.Tensor, as: AT
    alias Nx.Tensor, as: T

    # One conversion on the device between any two real types (wrap/3 has nothing left to convert).
    # To or from a complex type: Accel.Nx.Complex.
    def as_type(%T{type: type} = out, %T{type: from} = t) do
      cond do
        Storage.compute?([type, from]) ->
          [a] = Storage.operands!(:as_type, [t])
          Storage.wrap(AT.as_type(a, Storage.storage_type(type)), out, Storage.auto?([t]))

        match?({:c, _}, type) or match?({:c, _}, from) ->
          Accel.Nx.Complex.as_type(out, t)

        true ->
          Fallback.run(:as_type, [out, t])
      end
    end

    # The same bytes, shared (as reshape/2 shares them): the buffer read as the other type.
    def bitcast(%T{} = out, %T{} = t) do
      [a] = Storage.operands!(:bitcast, [t])

      case {Storage.storage_type(out.type), Storage.storage_type(t.type)} do
        # sub-byte integers of one width (s4 and u4) are a byte each, sign-extended or not: their
        # bits are the value wrapped to the other's range
        {stored, from} when elem(out.type, 1) < 8 and from != :bytes ->
          Storage.wrap(AT.as_type(a, stored), out, Storage.auto?([t]))

        {stored, from} when stored != :bytes and from != :bytes ->
          Storage.wrap(AT.bitcast(a, stored), out, Storage.auto?([t]))

        # a type stored as its bytes (outside the registry): read and written back
        _bytes ->
          Storage.upload_on(Nx.to_binary(t), out, a.device, Storage.auto?([t]))
      end
    end

    def reshape(out, t), do: layout(:reshape, out, t, [], fn a -> AT.reshape(a, out.shape) end)

    def squeeze(out, t, axes), do: layout(:squeeze, out, t, [axes], fn a -> AT.reshape(a, out.shape) end)

    def transpose(out, %T{shape: shape} = t, axes) do
      layout(:transpose, out, t, [axes], fn a ->
        in_strides = Storage.strides(shape)
        Storage.view(a, out.shape, Enum.map(axes, &Enum.at(in_strides, &1)), 0)
      end)
    end

    def broadcast(out, %T{shape: shape} = t, out_shape, axes) do
      layout(:broadcast, out, t, [out_shape, axes], fn a ->
        in_strides = Storage.strides(shape)
        by_axis = Map.new(Enum.with_index(axes), fn {out_axis, i} -> {out_axis, i} end)

        strides =
          for d <- 0..(tuple_size(out_shape) - 1)//1 do
            case by_axis do
              %{^d => i} -> if elem(shape, i) == elem(out_shape, d), do: Enum.at(in_strides, i), else: 0
              _ -> 0
            end
          end

        Storage.view(a, out_shape, strides, 0)
      end)
    end

    def reverse(out, %T{shape: shape} = t, axes) do
      layout(:reverse, out, t, [axes], fn a ->
        {strides, offset} =
          shape
          |> Storage.strides()
          |> Enum.with_index()
          |> Enum.map_reduce(0, fn {s, d}, offset ->
            if d in axes and elem(shape, d) > 0,
              do: {-s, offset + (elem(shape, d) - 1) * s},
              else: {s, offset}
          end)

        Storage.view(a, shape, strides, offset)
      end)
    end

    def slice(out, %T{shape: shape} = t, start_indices, lengths, steps) do
      layout(:slice, out, t, [start_indices, lengths, steps], fn a ->
        in_strides = Storage.strides(shape)
        offset = Storage.offset(clamp(start_indices, shape, lengths), in_strides)
        Storage.view(a, out.shape, Enum.zip_with(in_strides, steps, &(&1 * &2)), offset)
      end)
    end

    def put_slice(%T{type: type} = out, %T{shape: shape} = t, start_indices, %T{} = slice) do
      if movable?(type, [t.type, slice.type]) do
        [a, s] = Storage.operands!(:put_slice, [t, slice])
        in_strides = Storage.strides(shape)
        offset = Storage.offset(clamp(start_indices, shape, Tuple.to_list(slice.shape)), in_strides)

        result =
          Storage.put_view(
            Storage.cast(a, type),
            shape,
            in_strides,
            Storage.cast(s, type),
            in_strides,
            offset
          )

        Storage.wrap(result, out, Storage.auto?([t, slice]))
      else
        Fallback.run(:put_slice, [out, t, start_indices, slice])
      end
    end

    # Nx clamps start indices (numbers or scalar tensors) so that the region fits.
    defp clamp(starts, shape, lengths) do
      [Tuple.to_list(shape), starts, lengths]
      |> Enum.zip_with(fn [dim, start, len] ->
        start = if is_integer(start), do: start, else: Nx.to_number(start)
        start |> max(0) |> min(dim - len)
      end)
    end

    def pad(%T{type: type} = out, %T{shape: shape} = t, %T{} = pad_value, config) do
      if movable?(type, [t.type, pad_value.type]) do
        [a, v] = Storage.operands!(:pad, [t, pad_value])
        {a, config} = unpad(a, shape, config)
        out_strides = Storage.strides(out.shape)
        strides = Enum.zip_with(out_strides, config, fn s, {_, _, interior} -> s * (interior + 1) end)
        offset = Storage.offset(Enum.map(config, &elem(&1, 0)), out_strides)
        # The padding value, a scalar, is the base at stride 0: one pass writes the whole result.
        value = Storage.cast(AT.reshape(v, {}), type)
        zeros = List.duplicate(0, tuple_size(out.shape))
        result = Storage.put_view(value, out.shape, zeros, Storage.cast(a, type), strides, offset)
        Storage.wrap(result, out, Storage.auto?([t]))
      else
        Fallback.run(:pad, [out, t, pad_value, config])
      end
    end

    # Negative padding removes elements from the interior-padded operand's edges: the elements that
    # fall outside are sliced off first (one view), leaving a padding of at most `interior` at that
    # edge. Where none are left on an axis, the result is the padding value alone.
    defp unpad(a, shape, config) do
      if Enum.all?(config, fn {lo, hi, _} -> lo >= 0 and hi >= 0 end) do
        {a, config}
      else
        kept =
          Enum.zip_with(Tuple.to_list(shape), config, fn dim, {lo, hi, interior} ->
            step = interior + 1
            first = if lo < 0, do: div(-lo + step - 1, step), else: 0
            dropped = if hi < 0, do: div(-hi + step - 1, step), else: 0
            {first, dim - first - dropped, {lo + first * step, hi + dropped * step, interior}}
          end)

        lengths = Enum.map(kept, fn {_, n, _} -> max(n, 0) end)
        strides = Storage.strides(shape)

        offset =
          if Enum.any?(lengths, &(&1 == 0)),
            do: 0,
            else: Storage.offset(Enum.map(kept, &elem(&1, 0)), strides)

        config =
          Enum.map(kept, fn {_, n, {lo, hi, interior}} ->
            if n > 0, do: {lo, hi, interior}, else: {0, 0, 0}
          end)

        {Storage.view(a, List.to_tuple(lengths), strides, offset), config}
      end
    end

    def concatenate(%T{type: type} = out, tensors, axis) do
      if movable?(type, Enum.map(tensors, & &1.type)) do
        parts = Storage.operands!(:concatenate, tensors) |> Enum.map(&Storage.cast(&1, type))
        Storage.wrap(AT.concatenate(parts, axis: axis), out, Storage.auto?(tensors))
      else
        Fallback.run(:concatenate, [out, tensors, axis])
      end
    end

    def stack(%T{} = out, tensors, axis) do
      reshaped =
        Enum.map(tensors, fn t ->
          shape = t.shape |> Tuple.insert_at(axis, 1)
          reshape(%{t | shape: shape, names: List.duplicate(nil, tuple_size(shape))}, t)
        end)

      concatenate(out, reshaped, axis)
    end

    # Operands of put_slice, pad and concatenate: converted to the result's type on the device
    # (types Accel computes in), or already of it (every type stored by element: complex ones).
    defp movable?(type, types),
      do: Storage.compute?([type | types]) or (Storage.elements?(type) and Enum.all?(types, &(&1 == type)))

    # An operation that only moves elements: on the device for every type stored by element.
    defp layout(name, %T{} = out, %T{type: type} = t, args, fun) do
      if Storage.elements?(type) and Storage.elements?(out.type) do
        [a] = Storage.operands!(name, [t])
        Storage.wrap(fun.(a), out, Storage.auto?([t]))
      else
        Fallback.run(name, [out, t | args])
      end
    end
  end
end
