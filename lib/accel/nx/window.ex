if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Window do
    @moduledoc false
    # Accel.Nx.Backend's window reductions (window_sum, window_product, window_max, window_min:
    # pooling), one window kernel: each output element combines the elements of its window,
    # strided, dilated and padded as Nx's options say; their scatters (pooling's gradient); and
    # the cumulative operations, a scan kernel. Elements in the padding are skipped, which is what
    # padding with the operation's identity (Nx's 0, 1, the type's least and greatest value)
    # gives. Sums and products accumulate as Nx.BinaryBackend does: integers wrap in their type,
    # f32 in f64 where the device has doubles.

    alias Accel.Nx.{Fallback, Storage}
    alias Accel.Tensor, as: AT
    alias Nx.Tensor, as: T

    # a complex window sum or cumulative sum: the sum of the buffer read as {..., 2} reals, whose
    # axis of parts is a window of 1
    def window_sum(%T{type: {:c, _} = c} = out, %T{type: c} = t, window, opts) do
      Accel.Nx.Complex.as_pairs(:window_sum, out, [t], fn [p], pairs_out ->
        pairs_opts =
          for {key, one} <- [padding: {0, 0}, strides: 1, window_dilations: 1],
              opts[key] != nil,
              do: {key, opts[key] ++ [one]}

        window(:sum, :window_sum, pairs_out, p, Tuple.insert_at(window, tuple_size(window), 1), pairs_opts)
      end)
    end

    def window_sum(out, t, window, opts), do: window(:sum, :window_sum, out, t, window, opts)

    def window_product(%T{type: {:c, _} = c} = out, %T{type: c} = t, window, opts),
      do: Accel.Nx.Complex.window_product(out, t, window, opts)

    def window_product(out, t, window, opts), do: window(:product, :window_product, out, t, window, opts)
    def window_max(out, t, window, opts), do: window(:max, :window_max, out, t, window, opts)
    def window_min(out, t, window, opts), do: window(:min, :window_min, out, t, window, opts)

    @doc "A window operation's padding, strides and window dilations per axis, Nx's defaults filled in."
    def geometry_options(opts, rank) do
      {opts[:padding] || List.duplicate({0, 0}, rank), opts[:strides] || List.duplicate(1, rank),
       opts[:window_dilations] || List.duplicate(1, rank)}
    end

    defp window(op, name, %T{shape: out_shape} = out, %T{shape: shape} = t, window, opts) do
      rank = tuple_size(shape)
      {padding, strides, dilations} = geometry_options(opts, rank)

      if rank <= 8 and Enum.all?(padding, fn {lo, _hi} -> lo >= 0 end) do
        geometry =
          for d <- 0..(rank - 1)//1 do
            {lo, _hi} = Enum.at(padding, d)

            [
              elem(out_shape, d),
              elem(shape, d),
              elem(window, d),
              Enum.at(strides, d),
              lo,
              Enum.at(dilations, d)
            ]
          end

        run(op, name, out, t, geometry, [window, opts])
      else
        Fallback.run(name, [out, t, window, opts])
      end
    end

    def window_scatter_max(out, t, source, init, window, opts),
      do: scatter(:max, :window_scatter_max, out, t, source, init, window, opts)

    def window_scatter_min(out, t, source, init, window, opts),
      do: scatter(:min, :window_scatter_min, out, t, source, init, window, opts)

    # Each element of t gathers the source values of the windows that select it (up to 8
    # dimensions, as the kernel's records hold; more fall back).
    defp scatter(op, name, %T{type: type} = out, %T{shape: shape} = t, source, init, window, opts) do
      rank = tuple_size(shape)
      {padding, strides, _dilations} = geometry_options(opts, rank)

      if Storage.compute?([type, t.type, source.type, init.type]) and rank in 1..8 and
           Enum.all?(padding, fn {lo, _} -> lo >= 0 end) do
        [a, s] = Storage.operands!(name, [t, source]) |> Enum.map(&Storage.cast(&1, type))

        # the kernel's geometry: seven numbers per dimension (no dilation)
        flat =
          shape
          |> Storage.strides()
          |> Enum.with_index()
          |> Enum.flat_map(fn {st, d} ->
            {lo, _hi} = Enum.at(padding, d)
            [elem(source.shape, d), elem(shape, d), st, elem(window, d), Enum.at(strides, d), lo, 1]
          end)

        bits = scalar_bits(init, a.type)

        result =
          AT.new(shape, a.type, fn ref ->
            Accel.NIF.tensor_window_scatter(op, a.ref, s.ref, bits, flat, ref)
          end)

        Storage.wrap(result, out, Storage.auto?([t, source]))
      else
        Fallback.run(name, [out, t, source, init, window, opts])
      end
    end

    def cumulative_sum(%T{type: {:c, _} = c} = out, %T{type: c} = t, opts) do
      Accel.Nx.Complex.as_pairs(:cumulative_sum, out, [t], fn [p], pairs_out ->
        cumulative(:sum, :cumulative_sum, pairs_out, p, opts)
      end)
    end

    def cumulative_sum(out, t, opts), do: cumulative(:sum, :cumulative_sum, out, t, opts)

    def cumulative_product(%T{type: {:c, _} = c} = out, %T{type: c} = t, opts),
      do: Accel.Nx.Complex.cumulative_product(out, t, opts)

    def cumulative_product(out, t, opts), do: cumulative(:product, :cumulative_product, out, t, opts)
    def cumulative_max(out, t, opts), do: cumulative(:max, :cumulative_max, out, t, opts)
    def cumulative_min(out, t, opts), do: cumulative(:min, :cumulative_min, out, t, opts)

    # A scan along the axis, one work item per line: in Nx's type (integers wrap), sums and
    # products of f32 accumulated in f64 (Nx's own composition rounds each step of a pairwise
    # scan in f32; this is the more exact of the two).
    defp cumulative(op, name, %T{type: type} = out, %T{shape: shape} = t, opts) do
      if Storage.compute?([type, t.type]) and tuple_size(shape) > 0 do
        axis = opts[:axis] || 0
        dims = Tuple.to_list(shape)
        {before, [len | rest]} = Enum.split(dims, axis)
        [a] = Storage.operands!(name, [t])
        a = Storage.cast(a, type)

        result =
          AT.new(shape, a.type, fn ref ->
            Accel.NIF.tensor_scan(
              op,
              a.ref,
              Enum.product(before),
              len,
              Enum.product(rest),
              opts[:reverse] == true,
              ref
            )
          end)

        Storage.wrap(result, out, Storage.auto?([t]))
      else
        # (Nx.BinaryBackend has no scans: Nx composes them, there, of its other operations)
        Fallback.run(name, [out, t, opts], fn [host, opts] ->
          apply(Nx, name, [host, Keyword.take(opts, [:axis, :reverse])])
        end)
      end
    end

    # A scalar tensor's value as the bits of the Accel type `accel` (a compute type).
    defp scalar_bits(%T{} = scalar, accel) do
      [_, kind, size] = Regex.run(~r/^([a-z]+)(\d+)$/, Atom.to_string(accel))
      size = String.to_integer(size)

      bin =
        scalar
        |> Nx.backend_copy(Nx.BinaryBackend)
        |> Nx.as_type({String.to_atom(kind), size})
        |> Nx.to_binary()

      <<bits::unsigned-size(size)-native>> = bin
      bits
    end

    # geometry: per dimension [out, in, window, stride, low padding, dilation] (the kernel's also
    # carries each dimension's input stride); the result, of the out sizes, is then out's shape.
    defp run(op, name, %T{type: type} = out, t, geometry, rest) do
      if Storage.compute?([type, t.type]) do
        [a] = Storage.operands!(name, [t])
        a = Storage.cast(a, type)
        # t is contiguous: its strides over the geometry's input sizes
        strides = geometry |> Enum.map(&Enum.at(&1, 1)) |> List.to_tuple() |> Storage.strides()

        flat =
          geometry
          |> Enum.zip(strides)
          |> Enum.flat_map(fn {[o, i, w, s, lo, dil], st} -> [o, i, st, w, s, lo, dil] end)

        result =
          AT.new(geometry |> Enum.map(&hd/1) |> List.to_tuple(), a.type, fn ref ->
            Accel.NIF.tensor_window(op, a.ref, identity_bits(op, type, a.type), flat, ref)
          end)

        Storage.wrap(AT.reshape(result, out.shape), out, Storage.auto?([t]))
      else
        Fallback.run(name, [out, t | rest])
      end
    end

    # What max and min start from, as the bits of the type they compute in: Nx pads with the
    # type's least (max) or greatest (min) value, infinities for floats.
    defp identity_bits(op, _type, _accel) when op in [:sum, :product], do: 0

    defp identity_bits(op, {kind, bits}, accel) do
      max? = op == :max

      case kind do
        k when k in [:f, :bf, :f8_e4m3fn] ->
          case {accel, max?} do
            {:f32, true} -> 0xFF800000
            {:f32, false} -> 0x7F800000
            {:f64, true} -> 0xFFF0000000000000
            {:f64, false} -> 0x7FF0000000000000
          end

        :s ->
          value = if max?, do: -Bitwise.bsl(1, bits - 1), else: Bitwise.bsl(1, bits - 1) - 1
          Bitwise.band(value, 0xFFFFFFFFFFFFFFFF)

        :u ->
          if max?, do: 0, else: Bitwise.bsl(1, bits) - 1
      end
    end
  end
end
