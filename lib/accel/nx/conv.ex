if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Conv do
    @moduledoc false
    # Accel.Nx.Backend's conv: im2col and one matrix product per group, through the device's BLAS.
    #
    # The input, padded (and dilated) as the options say, is read once through a strided view of
    # shape {groups, channels per group, kernel positions..., batch, output positions...}: each
    # element is the input element that kernel position meets at that output position, so the
    # view is the patch matrix {groups, channels * kernel size, batch * output size} without a
    # loop over kernel positions. The kernel, {groups, filters per group, channels * kernel size},
    # multiplies it: {filters, batch, output positions}, then one more view gives Nx's layout
    # (and the output permutation). Feature groups split the channels (and the filters); batch
    # groups split the batch (and the filters), each group its own product.

    alias Accel.Nx.{Fallback, Reduce, Storage}
    alias Accel.Tensor, as: AT
    alias Nx.Tensor, as: T

    # complex: where both operands are complex and the CPU backend's shifted products apply, those
    # in complex arithmetic (BLAS's cgemm or zgemm over Nx's (re, im) pairs as they are: no part
    # split off or put back). Elsewhere real convolutions of the parts, in the component type.
    # Where no group or permutation splits the channels, one: the input's parts stacked along the
    # channels, [re, im], by the kernel [[kr, -ki], [ki, kr]] (filters by channels) gives the real
    # parts' filters then the imaginary parts' (one im2col and one product of twice the filters
    # and twice the depth, rather than four); else four (two with a real operand).
    def conv(%T{type: {:c, _} = type} = out, %T{type: type} = t, %T{type: type} = k, opts) do
      if stackable?(opts) do
        run(out, t, k, opts) || stacked(out, t, k, opts)
      else
        conv_parts(out, t, k, opts)
      end
    end

    def conv(%T{type: {:c, _}} = out, %T{} = t, %T{} = k, opts), do: conv_parts(out, t, k, opts)

    def conv(%T{type: type} = out, %T{} = t, %T{} = k, opts) do
      if Storage.float?(type) and Storage.compute?([type, t.type, k.type]) do
        run(out, t, k, opts)
      else
        Fallback.run(:conv, [out, t, k, opts])
      end
    end

    defp stacked(%T{type: type} = out, t, k, opts) do
      o = elem(k.shape, 0)
      real_out = %{out | type: Nx.Type.to_real(type), shape: put_elem(out.shape, 1, 2 * o)}

      Accel.Nx.Complex.of_parts(:conv, out, t, k, [out, t, k, opts], fn {xr, xi}, {kr, ki} ->
        x2 = Nx.concatenate([xr, xi], axis: 1)

        k2 = Nx.concatenate([Nx.concatenate([kr, Nx.negate(ki)], axis: 1), Nx.concatenate([ki, kr], axis: 1)])

        products = conv(real_out, x2, k2, opts).data.tensor
        rest = real_out.shape |> Tuple.to_list() |> Enum.drop(2)

        filters = &AT.slice(products, [0, &1 | Enum.map(rest, fn _ -> 0 end)], [elem(out.shape, 0), o | rest])

        {filters.(0), filters.(o)}
      end)
    end

    defp conv_parts(%T{type: type} = out, t, k, opts) do
      Accel.Nx.Complex.bilinear(:conv, out, t, k, [out, t, k, opts], fn rt, rk ->
        conv(%{out | type: Nx.Type.to_real(type)}, rt, rk, opts).data.tensor
      end)
    end

    defp stackable?(opts) do
      identity? = fn perm -> perm == nil or perm == Enum.to_list(0..(length(perm) - 1)//1) end

      (opts[:feature_group_size] || 1) == 1 and (opts[:batch_group_size] || 1) == 1 and
        Enum.all?([:input_permutation, :kernel_permutation, :output_permutation], &identity?.(opts[&1]))
    end

    # (nil for a complex conv the shifted products do not take: the caller computes it from parts)
    defp run(%T{type: type} = out, t, k, opts) do
      [a, w] = Storage.operands!(:conv, [t, k]) |> Enum.map(&Storage.cast(&1, type))
      a = permute(a, opts[:input_permutation])
      w = permute(w, opts[:kernel_permutation])
      spatial = w.shape |> Tuple.to_list() |> Enum.drop(2)
      rank = tuple_size(a.shape)
      input_dilation = opts[:input_dilation] || List.duplicate(1, rank - 2)
      padding = opts[:padding] || List.duplicate({0, 0}, rank - 2)

      # the output's spatial sizes, from Nx's output shape (in the standard layout)
      out_standard = standard_shape(out.shape, opts[:output_permutation])
      out_spatial = out_standard |> Tuple.to_list() |> Enum.drop(2)
      padded_shape = padded_shape(a.shape, padding, input_dilation)
      shifted? = shifted?(a, padded_shape, w, spatial, out_spatial, opts)

      if shifted? or not match?({:c, _}, type) do
        {padded, crop} = pad(a, type, padding, input_dilation)
        offset = Storage.offset(crop, padded_shape |> Storage.strides() |> Enum.drop(2))

        result =
          if shifted?,
            do: shifted(padded, w, spatial, out_spatial, offset),
            else: patches(padded, w, spatial, out_spatial, offset, opts)

        result = unpermute(result, opts[:output_permutation])
        Storage.wrap(AT.reshape(result, out.shape), out, Storage.auto?([t, k]))
      end
    end

    # {batch, filters, output...}: the patches of the padded input (its elements at `offset` in each
    # plane on) by the kernel's filters, one product per (feature group, batch group)
    defp patches(padded, w, spatial, out_spatial, offset, opts) do
      {n, c} = {elem(padded.shape, 0), elem(padded.shape, 1)}
      {o, type, rank} = {elem(w.shape, 0), padded.type, length(spatial)}
      groups = opts[:feature_group_size] || 1
      batch_groups = opts[:batch_group_size] || 1
      strides = opts[:strides] || List.duplicate(1, rank)
      kernel_dilation = opts[:kernel_dilation] || List.duplicate(1, rank)
      [n_stride, c_stride | s_strides] = Storage.strides(padded.shape)
      per_batch_group = div(n, batch_groups)
      per_group = div(c, groups)

      # {groups, batch groups, channels per group, kernel..., batch per group, output...}
      shape = [groups, batch_groups, per_group] ++ spatial ++ [per_batch_group] ++ out_spatial

      view_strides =
        [per_group * c_stride, per_batch_group * n_stride, c_stride] ++
          Enum.zip_with(s_strides, kernel_dilation, &(&1 * &2)) ++
          [n_stride] ++ Enum.zip_with(s_strides, strides, &(&1 * &2))

      kernel_size = Enum.product(spatial)
      out_size = Enum.product(out_spatial)

      # one product per (feature group, batch group): filters of that group by its patches
      filters = div(o, groups * batch_groups)
      rows = per_group * kernel_size
      cols = per_batch_group * out_size
      nb = groups * batch_groups
      w = AT.reshape(w, {nb, filters, rows})

      # the kernel's filters are grouped feature-group-major, the patches likewise. The view reads
      # the input in runs along its last axis: along the output positions, or (where the kernel is
      # the longer, as in a kernel's gradient, whose "kernel" is the output's gradient) along the
      # kernel positions, the patches transposed, which the CPU backend's BLAS reads as they are.
      products =
        if transposed_patches?(
             padded,
             type,
             spatial,
             out_spatial,
             strides,
             kernel_dilation,
             nb * filters * rows * cols
           ) do
          {lead, [per_group | rest]} = Enum.split(shape, 2)
          {kernel_dims, [per_batch_group | out_dims]} = Enum.split(rest, length(spatial))
          {lead_s, [c_s | rest_s]} = Enum.split(view_strides, 2)
          {kernel_s, [n_s | out_s]} = Enum.split(rest_s, length(spatial))
          t_shape = lead ++ [per_batch_group | out_dims] ++ [per_group | kernel_dims]
          t_strides = lead_s ++ [n_s | out_s] ++ [c_s | kernel_s]

          patches =
            Storage.view(padded, List.to_tuple(t_shape), t_strides, offset) |> AT.reshape({nb, cols, rows})

          AT.new(
            {nb, filters, cols},
            w.type,
            &Accel.NIF.tensor_matmul(w.ref, patches.ref, nb, filters, rows, cols, 2, &1)
          )
        else
          patches = Storage.view(padded, List.to_tuple(shape), view_strides, offset)
          Reduce.batched_matmul(w, AT.reshape(patches, {nb, rows, cols}))
        end

      # {filters (group-major), batch per group, output...} -> Nx's {batch, filters, output...}
      Storage.view(
        products,
        List.to_tuple([per_batch_group, o | out_spatial]),
        [out_size, cols | Storage.strides(List.to_tuple(out_spatial))],
        0
      )
    end

    # A convolution of stride 1 without kernel dilation or groups, on the CPU backend, whose kernel
    # has at most 64 positions and at most as many as the output: each kernel position's filters
    # times the padded input shifted by that position, summed (Accel.NIF.tensor_conv_shifted), so
    # that no patch matrix is written and read again. A product spans the plane's columns from the
    # first output position's to the last's (the padding's between rows computed and left out, at
    # most as many again as the output's), and sums over the channels only: taken where it spans
    # at least twice as many columns as there are channels, as products of fewer columns than
    # depth are slower than the patches' one (A/B, alternating, medians of 7: 32 x 64 x 32 x 32 by
    # 64 x 64 x 3 x 3 1.15x the patches' speed, 32 x 16 x 14 x 14 by 32 2.04x, 8 x 128 x 28 x 28 by
    # 128 1.10x; left to the patches, 8 x 512 x 8 x 8 by 512 0.79x, 1 x 256 x 16 x 16 0.84x).
    # (`a` the input, `padded` the shape its padding will have)
    defp shifted?(a, padded, w, spatial, out_spatial, opts) do
      ones? = fn option -> Enum.all?(opts[option] || [], &(&1 == 1)) end
      out_size = Enum.product(out_spatial)
      span = span(padded, out_spatial)

      elem(a.device, 0) == :cpu and a.type in [:f32, :f64, :c64, :c128] and spatial != [] and
        (opts[:feature_group_size] || 1) == 1 and (opts[:batch_group_size] || 1) == 1 and
        ones?.(:strides) and ones?.(:kernel_dilation) and Enum.product(spatial) <= min(64, out_size) and
        Enum.all?(Tuple.to_list(padded) ++ Tuple.to_list(w.shape), &(&1 > 0)) and
        span <= 2 * out_size and span >= 2 * elem(padded, 1)
    end

    # a shifted product's columns: from the first output position's in the padded plane to the last's
    defp span(padded, out_spatial) do
      strides = padded |> Storage.strides() |> Enum.drop(2)
      Enum.zip_reduce(out_spatial, strides, 1, fn size, stride, acc -> acc + (size - 1) * stride end)
    end

    defp shifted(padded, w, spatial, out_spatial, offset) do
      [n, c | plane] = Tuple.to_list(padded.shape)
      o = elem(w.shape, 0)
      plane_strides = Storage.strides(List.to_tuple(plane))
      # {kernel positions, filters, channels}; each position's offset in a plane, row-major
      kernel = w |> AT.reshape({o, c, Enum.product(spatial)}) |> Storage.permute([2, 0, 1])

      offsets =
        spatial
        |> Enum.zip(plane_strides)
        |> Enum.reduce([offset], fn {size, stride}, acc ->
          for at <- acc, p <- 0..(size - 1), do: at + p * stride
        end)

      AT.new(
        List.to_tuple([n, o | out_spatial]),
        padded.type,
        &Accel.NIF.tensor_conv_shifted(
          padded.ref,
          kernel.ref,
          [n, c, o, Enum.product(plane)],
          offsets,
          out_spatial,
          plane_strides,
          &1
        )
      )
    end

    # Whether to form the patches transposed: on the CPU backend (its BLAS reads them so), where
    # the kernel's last axis is a longer contiguous run of the input than the output's.
    defp transposed_patches?(a, type, spatial, out_spatial, strides, kernel_dilation, work) do
      run = fn size, step -> if step == 1, do: size, else: 1 end
      cpu_float? = elem(a.device, 0) == :cpu and type in [:f32, :f64] and work > 0

      cpu_float? and spatial != [] and
        run.(List.last(spatial), List.last(kernel_dilation)) >
          run.(List.last(out_spatial), List.last(strides))
    end

    # Nx.pad's configuration of the spatial axes: the positive padding and the interior dilation
    # (the negative padding is cropped later, through the offset).
    defp pad_config(padding, input_dilation),
      do: Enum.zip_with(padding, input_dilation, fn {lo, hi}, d -> {max(lo, 0), max(hi, 0), d - 1} end)

    # The shape pad/4 gives, from the same configuration.
    defp padded_shape(shape, padding, input_dilation) do
      [n, c | sizes] = Tuple.to_list(shape)

      padded =
        Enum.zip_with(sizes, pad_config(padding, input_dilation), fn size, {lo, hi, interior} ->
          lo + max(size - 1, 0) * (interior + 1) + min(size, 1) + hi
        end)

      List.to_tuple([n, c | padded])
    end

    # The padded, interior-dilated input (zeros), and where the crop of negative padding starts.
    defp pad(a, type, padding, input_dilation) do
      if Enum.all?(padding, &(&1 == {0, 0})) and Enum.all?(input_dilation, &(&1 == 1)) do
        {a, List.duplicate(0, length(padding))}
      else
        config = [{0, 0, 0}, {0, 0, 0} | pad_config(padding, input_dilation)]

        t = Storage.wrap(a, %T{shape: a.shape, type: type, names: List.duplicate(nil, tuple_size(a.shape))})

        %T{data: %Accel.Nx.Backend{tensor: padded}} =
          Nx.pad(t, Nx.tensor(0, type: type, backend: Nx.BinaryBackend), config)

        {Storage.cast(padded, type), Enum.map(padding, fn {lo, _} -> max(-lo, 0) end)}
      end
    end

    defp permute(a, nil), do: a
    defp permute(a, perm), do: Storage.permute(a, perm)

    # Nx's output permutation names where each standard axis goes: the result's axis i is the
    # standard axis at the position of i in it.
    defp unpermute(a, nil), do: a
    defp unpermute(a, perm), do: permute(a, inverse(perm))

    defp standard_shape(shape, nil), do: shape
    defp standard_shape(shape, perm), do: perm |> Enum.map(&elem(shape, &1)) |> List.to_tuple()

    defp inverse(perm), do: perm |> Enum.with_index() |> Enum.sort() |> Enum.map(&elem(&1, 1))
  end
end
