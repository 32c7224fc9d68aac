if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Complex do
    @moduledoc false
    # Accel.Nx.Backend's complex arithmetic (c64, c128), on the device. A complex tensor's buffer
    # read as {..., 2} reals (no copy) is what sums, differences, negations, conjugates,
    # selections, scatters and window and cumulative sums of one type work on, in one pass;
    # products, quotients, abs and the functions of one complex tensor (exp, log, sqrt, the
    # trigonometric and hyperbolic functions and their inverses, ...) of one type are kernels of
    # Accel's (accel_complex, accel_complex_abs, accel_complex_fn in kernels/tensor_kernels.h: the
    # formulas of the Complex library that Nx.BinaryBackend calls, operation for operation, in one
    # pass), which also reads a real operand of the parts' type as x + 0i (a sum, difference,
    # product or quotient with a real tensor, and as_type from one, in one pass). The rest (pow,
    # mixed types whose values the parts do not hold exactly, comparisons) is a composition of the
    # registry's real kernels: the real and imaginary parts (a strided copy each), the library's
    # formulas, element by element, and the parts interleaved back (one concatenate). The
    # arithmetic is in f64, c64's too, as the binary backend computes Elixir floats, each result
    # rounded once to its type; on a device without doubles c64 computes in f32 (and c128, which
    # needs them, falls back).
    #
    # Where the Complex library has special cases for non-finite parts (abs/1's infinity when a
    # part is not finite, exp/1, sqrt/1, sin/1 and cos/1 at infinities, the quotient by a real
    # infinity, atan2/2's angles at infinities, pow/2's NaN), they are applied after the formula
    # (in the compositions each a select), so that every combination of special values gives the
    # binary backend's result. One exception: equal/2 and not_equal/2 compare the parts as IEEE
    # does, a NaN part never equal (the binary backend compares Complex structs, whose NaN atoms
    # are equal), as XLA compares.

    alias Accel.Nx.{Fallback, Storage}
    alias Accel.Tensor, as: AT
    alias Nx.Tensor, as: T

    # Two Complex libraries ship as 0.6.0 (Nx 0.7's and Nx 0.13's dependencies): the later one
    # gives exp(inf + yi) the signs of cos(y) and sin(y) (bit 0 of the kernel's variant), and halves
    # sinh's and cosh's parts as reals (bit 1). Read from the installed library when this module
    # compiles.
    @exp_inf_signs match?(%Complex{re: :neg_infinity}, Complex.exp(Complex.new(:infinity, 3)))
    @halves_parts match?(%Complex{re: :infinity}, Complex.cosh(Complex.new(:infinity, 0.0)))
    @variant if(@exp_inf_signs, do: 1, else: 0) + if(@halves_parts, do: 2, else: 0)

    @unary [
      :negate,
      :exp,
      :log,
      :sqrt,
      :rsqrt,
      :expm1,
      :log1p,
      :sigmoid,
      :sin,
      :cos,
      :tan,
      :sinh,
      :cosh,
      :tanh,
      :asin,
      :acos,
      :atan,
      :asinh,
      :acosh,
      :atanh,
      :cbrt
    ]
    @binary [:add, :subtract, :multiply, :divide, :pow]
    @compare [:equal, :not_equal, :logical_and, :logical_or, :logical_xor]

    @doc "Whether the operation `op` on these Nx types computes here."
    def handles?(op, types) do
      Enum.any?(types, &complex?/1) and op in (@unary ++ @binary ++ @compare ++ [:abs, :sign])
    end

    defp complex?({:c, _}), do: true
    defp complex?(_), do: false

    ## Entry points (Accel.Nx.Backend's callbacks), each falling back where the device cannot

    # negation of the result's type: the {..., 2} reals negated, one pass
    def unary(:negate, %T{type: type} = out, %T{type: type} = t) do
      as_pairs(:negate, out, [t], fn [x], pairs_out -> Storage.wrap(AT.negate(x.data.tensor), pairs_out) end)
    end

    # every other function: one kernel of Accel's (accel_complex_fn: the Complex library's
    # formulas, operation for operation, and its special cases, in f64 where the device has doubles)
    def unary(op, %T{type: type} = out, %T{type: type} = t) when op in @unary do
      run(op, [out, t], [t], type, fn [z], _w ->
        AT.new(z.shape, Storage.storage_type(type), &Accel.NIF.tensor_complex_fn(op, z.ref, @variant, &1))
      end)
    end

    def unary(:abs, %T{} = out, %T{type: {:c, _} = ctype} = t) do
      run(:abs, [out, t], [t], ctype, fn [z], _w -> real_result(magnitude(z, ctype), out) end)
    end

    # z / |z|, each part divided by the magnitude in the parts' type (IEEE's quotients where it is
    # NaN or infinite), 0 where it is 0: XLA's definition, so EXLA's and Torchx's results. (Nx's
    # binary backend gives 1 + 0i for every complex element: Erlang orders its Complex struct
    # above every number, so its `n > 0` holds.)
    def unary(:sign, %T{type: ctype} = out, %T{type: ctype} = t) do
      run(:sign, [out, t], [t], ctype, fn [z], _w ->
        abs = magnitude(z, ctype)
        {re, im} = parts(z, ctype, component(ctype))
        zero = zero(abs)
        on_zero = AT.equal(abs, zero)

        join(
          {AT.select(on_zero, zero, AT.divide(re, abs)), AT.select(on_zero, zero, AT.divide(im, abs))},
          out
        )
      end)
    end

    # |z| in the parts' type: one kernel of Accel's (accel_complex_abs: Complex.abs/1's formula and
    # cases)
    defp magnitude(%AT{} = z, ctype),
      do: AT.new(z.shape, component(ctype), &Accel.NIF.tensor_complex_abs(z.ref, &1))

    # a sum or difference of two operands of the result's type: of their buffers read as {..., 2}
    # reals, one pass (each part's f32 sum is the f64 sum rounded once, as the binary backend's)
    def binary(op, %T{type: type} = out, %T{type: type} = a, %T{type: type} = b)
        when op in [:add, :subtract] do
      as_pairs(op, out, [a, b], fn [x, y], pairs_out ->
        Storage.wrap(apply(AT, op, [x.data.tensor, y.data.tensor]), pairs_out)
      end)
    end

    # a product or quotient of two operands of the result's type: one kernel of Accel's
    # (accel_complex: the same formulas and special case, in f64 where the device has doubles)
    def binary(op, %T{type: type} = out, %T{type: type} = a, %T{type: type} = b)
        when op in [:multiply, :divide],
        do: arithmetic(op, out, a, b)

    # operands of other types (Nx.complex/2 is imag * i + real): where each one's values are exact
    # in the result's type (a float no wider than its parts, an integer of fewer bits than their
    # mantissa), a complex one made that type and a real one its parts' type, then one kernel
    # (accel_complex reads a real operand as x + 0i, as the binary backend and the composition
    # compute it)
    def binary(op, %T{type: {:c, _} = type} = out, %T{type: ta} = a, %T{type: tb} = b)
        when op in [:add, :subtract, :multiply, :divide] and (ta != type or tb != type) do
      if exact_in?(ta, type) and exact_in?(tb, type) do
        arithmetic(op, out, as_operand(a, type), as_operand(b, type))
      else
        composed(op, out, a, b)
      end
    end

    def binary(op, %T{} = out, %T{} = a, %T{} = b) when op in @binary, do: composed(op, out, a, b)

    defp composed(op, %T{type: type} = out, a, b) do
      run(op, [out, a, b], [a, b], type, fn [x, y], w ->
        join(apply_binary(op, parts(x, a.type, w), parts(y, b.type, w), w), out)
      end)
    end

    defp arithmetic(op, %T{type: type} = out, a, b) do
      run(op, [out, a, b], [a, b], type, fn [x, y], _w ->
        AT.new(out.shape, Storage.storage_type(type), fn ref ->
          Accel.NIF.tensor_complex(op, x.ref, y.ref, Tuple.to_list(x.shape), Tuple.to_list(y.shape), ref)
        end)
      end)
    end

    # an operand of complex arithmetic of `type`: complex, of that type; real, of its parts' type
    defp as_operand(%T{type: {:c, _}} = t, type), do: to_type(t, type)
    defp as_operand(%T{} = t, type), do: Nx.as_type(t, Nx.Type.to_real(type))

    defp exact_in?({:c, bits}, {:c, to}), do: bits <= to
    defp exact_in?({kind, bits}, {:c, to}) when kind in [:f, :bf, :f8_e4m3fn], do: bits <= div(to, 2)
    # (f32 holds integers of up to 24 bits exactly, f64 up to 53)
    defp exact_in?({_int, bits}, {:c, 64}), do: bits <= 16
    defp exact_in?({_int, bits}, {:c, 128}), do: bits <= 32

    defp to_type(%T{type: type} = t, type), do: t
    defp to_type(%T{} = t, type), do: as_type(%{t | type: type}, t)

    # Equal when both parts are (IEEE: a NaN part is never equal); a number is true when a part
    # is not zero.
    def compare(op, %T{} = out, %T{} = a, %T{} = b) when op in @compare do
      run(op, [out, a, b], [a, b], Nx.Type.merge(a.type, b.type), fn [x, y], w ->
        {xr, _} = x = parts(x, a.type, w)
        {yr, _} = y = parts(y, b.type, w)

        case op do
          :equal -> AT.logical_and(AT.equal(xr, yr), AT.equal(im_of(x), im_of(y)))
          :not_equal -> AT.logical_or(AT.not_equal(xr, yr), AT.not_equal(im_of(x), im_of(y)))
          logical -> apply(AT, logical, [nonzero_parts(x), nonzero_parts(y)])
        end
      end)
    end

    @doc "A u8 tensor (as an Nx tensor of `t`'s shape): 1 where the complex element is not zero."
    def nonzero(%T{type: ctype} = t) do
      out = %{t | type: {:u, 8}}
      # (falling back: the binary backend's t != 0)
      zero = Nx.tensor(0, type: ctype, backend: Nx.BinaryBackend)
      run(:not_equal, [out, t, zero], [t], ctype, fn [z], w -> nonzero_parts(parts(z, ctype, w)) end)
    end

    defp nonzero_parts({re, _} = z), do: AT.logical_or(AT.not_equal(re, 0), AT.not_equal(im_of(z), 0))

    @doc "real/imag of a complex tensor: its part, one strided copy of the buffer (no arithmetic)."
    def part(which, %T{} = out, %T{type: ctype} = t) do
      run(which, [out, t], [t], ctype, fn [z], _w ->
        pairs = pairs(z, ctype)
        view_part(pairs, z.shape, if(which == :real, do: 0, else: 1))
      end)
    end

    @doc "The complex conjugate; of a real tensor, the complex number x - 0.0i, as Nx writes it."
    def conjugate(%T{type: type} = out, %T{type: type} = t) do
      as_pairs(:conjugate, out, [t], fn [x], pairs_out ->
        %AT{} = pairs = x.data.tensor

        signs =
          AT.from_list([1.0, -1.0],
            type: pairs.type,
            backend: elem(pairs.device, 0),
            device: elem(pairs.device, 1)
          )

        Storage.wrap(AT.multiply(pairs, signs), pairs_out)
      end)
    end

    def conjugate(%T{type: type} = out, %T{} = t) do
      run(:conjugate, [out, t], [t], type, fn [z], w ->
        {re, _} = z = parts(z, t.type, w)
        join({re, AT.negate(im_of(z))}, out)
      end)
    end

    @doc "The angle of each element, atan2(im, re) (of a real one x, atan2(0, x): pi for negative x)."
    def phase(%T{} = out, %T{type: type} = t) do
      run(:phase, [out, t], [t], type, fn [z], w ->
        real_result(c_phase(parts(z, type, w)), out)
      end)
    end

    @doc "is_nan / is_infinity of a complex tensor: of either part; logical_not: both parts zero."
    def predicate(:logical_not, %T{} = out, %T{type: ctype} = t) do
      run(:logical_not, [out, t], [t], ctype, fn [z], w ->
        AT.logical_not(nonzero_parts(parts(z, ctype, w)))
      end)
    end

    def predicate(name, %T{} = out, %T{type: ctype} = t) do
      run(name, [out, t], [t], ctype, fn [z], w ->
        {re, im} = parts(z, ctype, w)
        test = if name == :is_nan, do: &nan?/1, else: &infinite/1
        AT.logical_or(test.(re), test.(im))
      end)
    end

    @doc "as_type to or from a complex type: a real value x is x + 0i; a complex one keeps its real part."
    def as_type(out, t)

    # a real tensor as complex, x + 0i: x in the parts' type (through f64 from a 64-bit integer,
    # rounded once as the binary backend's Elixir float is), then one kernel writing the pairs
    # (accel_complex's conversion)
    def as_type(%T{type: {:c, _} = type} = out, %T{type: {kind, bits} = from} = t) when kind != :c do
      run(:as_type, [out, t], [t], type, fn [x], _w ->
        x = if kind in [:s, :u] and bits == 64, do: Storage.cast(x, {:f, 64}), else: Storage.cast(x, from)
        %AT{ref: ref, shape: shape} = Storage.cast(x, Nx.Type.to_real(type))
        dims = Tuple.to_list(shape)

        AT.new(shape, Storage.storage_type(type), fn out_ref ->
          Accel.NIF.tensor_complex(:convert, ref, ref, dims, dims, out_ref)
        end)
      end)
    end

    def as_type(%T{type: type} = out, %T{type: from} = t) do
      run(:as_type, [out, t], [t], if(complex?(type), do: type, else: from), fn [z], w ->
        {re, _} = z = parts(z, from, w)
        if complex?(type), do: join(z, out), else: real_result(re, out)
      end)
    end

    @doc "select/4 with complex branches: each part selected (a complex predicate: its elements not zero)."
    def select(out, %T{type: {:c, _}} = pred, on_true, on_false),
      do: select(out, nonzero(pred), on_true, on_false)

    # branches of the result's type: their {..., 2} reals selected, the predicate broadcast across
    # the parts, one pass
    def select(%T{type: type} = out, %T{} = pred, %T{type: type} = on_true, %T{type: type} = on_false) do
      as_pairs(:select, out, [pred, on_true, on_false], fn [p, x, y], pairs_out ->
        %AT{shape: shape} = p = Storage.cast(p.data.tensor, pred.type)
        p = AT.reshape(p, Tuple.insert_at(shape, tuple_size(shape), 1))
        Storage.wrap(AT.select(p, x.data.tensor, y.data.tensor), pairs_out)
      end)
    end

    def select(%T{type: type} = out, pred, on_true, on_false) do
      run(:select, [out, pred, on_true, on_false], [pred, on_true, on_false], type, fn [p, x, y], w ->
        p = Storage.cast(p, pred.type)
        {xr, _} = x = parts(x, on_true.type, w)
        {yr, _} = y = parts(y, on_false.type, w)
        join({AT.select(p, xr, yr), AT.select(p, im_of(x), im_of(y))}, out)
      end)
    end

    @doc "sum of a complex tensor: the {..., 2} reals summed over the same axes (f32 accumulating in f64)."
    def sum(%T{type: ctype} = out, %T{} = t, opts, sum_reals) do
      run(:sum, [out, t, opts], [t], ctype, fn [z], _w ->
        axes = opts[:axes] || Enum.to_list(0..(tuple_size(t.shape) - 1)//1)
        %AT{} = summed = sum_reals.(pairs(z, ctype), axes)
        summed = real_result(summed, %{out | type: Nx.Type.to_real(ctype)})
        reinterpret(summed, Storage.storage_type(ctype), out.shape)
      end)
    end

    # A product of at most this many factors is taken left to right, as the binary backend takes
    # it (bit for bit); a longer one pairs its factors in a tree (log2 of them passes, not one per
    # factor), whose roundings differ from the binary backend's in the last bits.
    @in_order 512

    @doc """
    product of a complex tensor over axes: the Complex library's product (each element times the
    product so far, from 1 + 0i, in f64), of the reduced elements in row-major order, each step
    the parts' formula over every kept position at once.
    """
    def product(%T{type: ctype} = out, %T{shape: shape} = t, opts) do
      run(:product, [out, t, opts], [t], ctype, fn [z], w ->
        axes = opts[:axes] || Enum.to_list(0..(tuple_size(shape) - 1)//1)

        {reduced, kept} =
          shape |> Tuple.to_list() |> Enum.with_index() |> Enum.split_with(&(elem(&1, 1) in axes))

        count = reduced |> Enum.map(&elem(&1, 0)) |> Enum.product()
        rest = kept |> Enum.map(&elem(&1, 0)) |> Enum.product()
        pairs = wide_pairs(z, ctype, w)
        strides = Storage.strides(shape)
        order = Enum.map(reduced ++ kept, &elem(&1, 1))
        dims = order |> Enum.map(&elem(shape, &1)) |> List.to_tuple()
        # each part as {count, rest}: the reduced elements in row-major order, then the kept ones
        factors =
          for part <- [0, 1] do
            pairs
            |> Storage.view(dims, Enum.map(order, &(2 * Enum.at(strides, &1))), part)
            |> AT.reshape({count, rest})
          end

        {re, im} = product_of(List.to_tuple(factors), count, rest)
        join({AT.reshape(re, out.shape), AT.reshape(im, out.shape)}, out)
      end)
    end

    defp product_of({re, im}, count, rest) when count <= @in_order do
      row = fn part, k -> Storage.view(part, {rest}, [1], k * rest) end
      in_order(&{row.(re, &1), row.(im, &1)}, count, rest, re)
    end

    # halves multiplied element by element (an odd count keeps its last row for the next pass)
    defp product_of({re, im}, count, rest) do
      half = div(count, 2)
      rows = fn part, from, n -> Storage.view(part, {n, rest}, [rest, 1], from * rest) end

      {pr, pi} =
        c_mul({rows.(re, 0, half), rows.(im, 0, half)}, {rows.(re, half, half), rows.(im, half, half)})

      next =
        if rem(count, 2) == 1,
          do:
            {AT.concatenate([pr, rows.(re, 2 * half, 1)], axis: 0),
             AT.concatenate([pi, rows.(im, 2 * half, 1)], axis: 0)},
          else: {pr, pi}

      product_of(next, half + rem(count, 2), rest)
    end

    # The Complex library's product of `count` factors of `rest` elements each, row k of them
    # `row.(k)`: each times the product so far, from 1 + 0i, as the binary backend takes it.
    defp in_order(row, count, rest, like) do
      ones = {Storage.fill(scalar(like, 1.0), {rest}), nil}

      Enum.reduce(0..(count - 1)//1, ones, fn k, acc -> c_mul(row.(k), acc) end)
      |> then(fn {r, i} -> {r, i || Storage.fill(zero(like), {rest})} end)
    end

    defp wide_pairs(z, ctype, w) do
      pairs = pairs(z, ctype)
      if pairs.type == w, do: pairs, else: AT.as_type(pairs, w)
    end

    @doc """
    cumulative_product of a complex tensor (Nx 0.7 calls the backend for it; Nx 0.8 and later
    run their composition, a block, themselves): Nx's composition, a pairwise scan of products
    (Nx's `associative_scan`), ported step for step so that each element is the same products in
    the same order as there, bit for bit, each step the backend's complex multiply on the device.
    """
    def cumulative_product(out, t, opts) do
      axis = opts[:axis] || 0
      reverse = fn x -> if opts[:reverse], do: Nx.reverse(x, axes: [axis]), else: x end
      %{out | data: (t |> reverse.() |> pairwise_scan(axis) |> reverse.()).data}
    end

    # Nx 0.7's do_associative_scan with multiply: the odd elements are the scan of the pairs'
    # products (recursively), each even one the scan so far times its own element.
    defp pairwise_scan(t, axis) do
      size = Nx.axis_size(t, axis)

      if size < 2 do
        t
      else
        even = Nx.slice_along_axis(t, 0, size - 1, axis: axis, strides: 2)
        odd = Nx.slice_along_axis(t, 1, size - 1, axis: axis, strides: 2)
        pairs = Nx.multiply(odd, even)
        scanned_odd = pairwise_scan(pairs, axis)
        half = div(size, 2)

        cond do
          size == 2 ->
            Nx.concatenate([even, pairs], axis: axis)

          rem(size, 2) == 0 ->
            rest =
              Nx.multiply(
                Nx.slice_along_axis(scanned_odd, 0, half - 1, axis: axis),
                Nx.slice_along_axis(even, 1, half - 1, axis: axis)
              )

            scanned_even = Nx.concatenate([Nx.slice_along_axis(even, 0, 1, axis: axis), rest], axis: axis)
            interleave(scanned_even, scanned_odd, axis)

          true ->
            scanned_even =
              Nx.multiply(scanned_odd, Nx.slice_along_axis(t, 2, size - 2, axis: axis, strides: 2))

            Nx.concatenate(
              [Nx.slice_along_axis(t, 0, 1, axis: axis), interleave(scanned_odd, scanned_even, axis)],
              axis: axis
            )
        end
      end
    end

    # same-shaped a and b's elements alternating along the axis (a's first)
    defp interleave(a, b, axis) do
      stacked = Nx.concatenate([Nx.new_axis(a, axis + 1), Nx.new_axis(b, axis + 1)], axis: axis + 1)
      shape = stacked.shape |> Tuple.delete_at(axis + 1) |> put_elem(axis, :auto)
      Nx.reshape(stacked, shape)
    end

    @doc """
    window_product of a complex tensor: the binary backend's, of the tensor padded with 1 + 0i,
    each window's elements (row-major over the window, dilated) times the product so far; one
    pass per position in the window, over every window at once (a strided view of the padded
    tensor).
    """
    def window_product(%T{type: ctype, shape: out_shape} = out, %T{shape: shape} = t, window, opts) do
      {padding, strides, dilations} = Accel.Nx.Window.geometry_options(opts, tuple_size(shape))

      padded =
        if Enum.all?(padding, &(&1 == {0, 0})),
          do: t,
          else:
            Nx.pad(
              t,
              Nx.tensor(Complex.new(1.0, 0.0), type: ctype, backend: Nx.BinaryBackend),
              Enum.map(padding, fn {lo, hi} -> {lo, hi, 0} end)
            )

      run(:window_product, [out, t, window, opts], [padded], ctype, fn [z], w ->
        pairs = wide_pairs(z, ctype, w)
        element = Storage.strides(padded.shape)
        rest = out_shape |> Tuple.to_list() |> Enum.product()
        view_strides = Enum.zip_with(strides, element, &(2 * &1 * &2))
        # the window's positions in row-major order, each as its offset into the padded tensor
        offsets =
          window
          |> Tuple.to_list()
          |> Enum.zip(Enum.zip(dilations, element))
          |> Enum.reduce([0], fn {size, {dilation, stride}}, acc ->
            for o <- acc, k <- 0..(size - 1)//1, do: o + k * dilation * stride
          end)
          |> List.to_tuple()

        row = fn k, part ->
          pairs
          |> Storage.view(out_shape, view_strides, 2 * elem(offsets, k) + part)
          |> AT.reshape({rest})
        end

        {re, im} = in_order(&{row.(&1, 0), row.(&1, 1)}, tuple_size(offsets), rest, pairs)
        join({AT.reshape(re, out_shape), AT.reshape(im, out_shape)}, out)
      end)
    end

    @doc """
    A bilinear operation (`dot`, `conv`) with a complex operand: (ar + ai i)(br + bi i) as the
    real operations ar br - ai bi and ar bi + ai br, each through `real_op` (BLAS: it gets two Nx
    tensors of the component type and returns the Accel tensor of their real result), in the
    result's component type. Nothing is conjugated, as Nx's dot and conv conjugate nothing.
    """
    def bilinear(name, %T{} = out, a, b, fallback_args, real_op) do
      of_parts(name, out, a, b, fallback_args, fn {xr, xi}, {yr, yi} ->
        re = real_op.(xr, yr)
        re = if xi && yi, do: AT.subtract(re, real_op.(xi, yi)), else: re

        im =
          case Enum.reject([xi && real_op.(xi, yr), yi && real_op.(xr, yi)], &is_nil/1) do
            [] -> nil
            [one] -> one
            [p, q] -> AT.add(p, q)
          end

        {re, im}
      end)
    end

    @doc """
    A complex operation of two operands computed from their parts by `fun`, which gets {re, im} of
    each (Nx tensors of the component type in the operands' shapes; im nil for a real operand)
    and returns the result's {re, im} (Accel tensors of its shape, in the component type; im nil
    for zeros).
    """
    def of_parts(name, %T{type: ctype} = out, a, b, fallback_args, fun) do
      run(name, fallback_args, [a, b], ctype, fn [x, y], _w ->
        comp = component(ctype)
        real = Nx.Type.to_real(ctype)

        nx_parts = fn z, t ->
          {re, im} = parts(z, t.type, comp)
          {Storage.wrap(re, %{t | type: real}), im && Storage.wrap(im, %{t | type: real})}
        end

        join(fun.(nx_parts.(x, a), nx_parts.(y, b)), out)
      end)
    end

    @doc """
    A complex operation that treats both parts alike (moves, adds, negates, selects them), run on
    the buffer read as {..., 2} reals of the component type: `fun` gets the operands so read (Nx
    tensors of shape ++ {2}; real operands as they are) and `out`'s template so read, and returns
    such a result.
    """
    def as_pairs(name, %T{type: ctype} = out, tensors, fun) do
      operands = Storage.operands!(name, tensors)

      in_pairs =
        Enum.zip_with(tensors, operands, fn
          %T{type: {:c, _} = c} = t, a -> Storage.wrap(pairs(a, c), pairs_template(t))
          t, a -> Storage.wrap(a, t, Storage.auto?([t]))
        end)

      %T{data: %Accel.Nx.Backend{tensor: result}} = fun.(in_pairs, pairs_template(out))
      Storage.wrap(reinterpret(result, Storage.storage_type(ctype), out.shape), out, Storage.auto?(tensors))
    end

    defp pairs_template(%T{type: c, shape: shape} = t),
      do: %{
        t
        | type: Nx.Type.to_real(c),
          shape: Tuple.insert_at(shape, tuple_size(shape), 2),
          names: List.duplicate(nil, tuple_size(shape) + 1)
      }

    ## Running one: the operands on one device, the type parts compute in, or the fallback

    # `args`: the callback's arguments (for the fallback), `tensors` the operands among them,
    # `ctype` the complex type whose parts the operation computes on.
    defp run(name, [out | _] = args, tensors, ctype, fun) do
      with true <- Enum.all?([out | tensors], &(complex?(&1.type) or Storage.compute?([&1.type]))),
           [first | _] = operands <- Storage.operands!(name, tensors),
           w when w != nil <- work_type(ctype, first.device) do
        Storage.wrap(fun.(operands, w), out, Storage.auto?(tensors))
      else
        _ -> Fallback.run(name, args)
      end
    end

    # f64 for both complex types where the device has doubles (as Nx's binary backend computes);
    # without them c64 in f32, c128 not at all (nil).
    defp work_type(ctype, device) do
      case {doubles?(device), ctype} do
        {true, _} -> :f64
        {false, {:c, 64}} -> :f32
        {false, _} -> nil
      end
    end

    defp doubles?({backend, index} = device) do
      key = {__MODULE__, :doubles, device}

      case :persistent_term.get(key, nil) do
        nil ->
          has =
            try do
              AT.from_binary(<<0.0::float-64-native>>, :f64, {}, backend: backend, device: index)
              true
            rescue
              ArgumentError -> false
            end

          :persistent_term.put(key, has)
          has

        has ->
          has
      end
    end

    ## Parts

    defp component({:c, 64}), do: :f32
    defp component({:c, 128}), do: :f64

    @doc false
    # The complex tensor's buffer as reals of shape ++ {2} (shared, no copy).
    def pairs(%AT{shape: shape} = z, ctype),
      do: reinterpret(z, component(ctype), Tuple.insert_at(shape, tuple_size(shape), 2))

    @doc false
    # A buffer of (re, im) reals of ctype's component type as the complex tensor of `shape`.
    def from_pairs(%AT{} = pairs, ctype, shape), do: reinterpret(pairs, Storage.storage_type(ctype), shape)

    defp reinterpret(%AT{} = a, type, shape),
      do: AT.wrap(Accel.NIF.tensor_reinterpret(a.ref, type), shape, type)

    defp view_part(%AT{} = pairs, shape, offset),
      do: Storage.view(pairs, shape, Enum.map(Storage.strides(shape), &(&1 * 2)), offset)

    # {re, im} of an operand in the work type; im is nil for a real operand.
    defp parts(%AT{} = z, {:c, _} = ctype, w) do
      pairs = pairs(z, ctype)
      pairs = if pairs.type == w, do: pairs, else: AT.as_type(pairs, w)
      {view_part(pairs, z.shape, 0), view_part(pairs, z.shape, 1)}
    end

    defp parts(%AT{} = x, _type, w), do: {if(x.type == w, do: x, else: AT.as_type(x, w)), nil}

    # A complex tensor of `out` from its parts (broadcast to its shape): one interleaving copy,
    # rounded once to out's component type.
    defp join({re, im}, %T{type: ctype, shape: shape}) do
      rank = tuple_size(shape)
      column = Tuple.insert_at(shape, tuple_size(shape), 1)
      [re, im] = Enum.map([re, im || scalar(re, 0.0)], &(&1 |> spread(shape) |> AT.reshape(column)))
      pairs = AT.concatenate([re, im], axis: rank)
      comp = component(ctype)
      pairs = if pairs.type == comp, do: pairs, else: AT.as_type(pairs, comp)
      reinterpret(pairs, Storage.storage_type(ctype), shape)
    end

    # A real result in the out type (abs, phase, real of as_type).
    defp real_result(%AT{} = x, %T{type: type}) do
      case Storage.storage_type(type) do
        t when t == x.type -> x
        t -> AT.as_type(x, t)
      end
    end

    # A part broadcast to `shape` (aligned at the end, as Nx broadcasts): a strided view.
    defp spread(%AT{shape: shape} = x, shape), do: x

    defp spread(%AT{shape: from} = x, shape) do
      lead = tuple_size(shape) - tuple_size(from)
      in_strides = Storage.strides(from)

      strides =
        for d <- 0..(tuple_size(shape) - 1)//1 do
          i = d - lead
          if i >= 0 and elem(from, i) == elem(shape, d), do: Enum.at(in_strides, i), else: 0
        end

      Storage.view(x, shape, strides, 0)
    end

    # A scalar tensor (shape {}) of x's type on x's device: a number or an infinity, which broadcasts
    # against x in every operation (0 * x would be NaN where x is not finite).
    defp scalar(%AT{type: type, device: {backend, index}}, value) do
      bits =
        case {type, value} do
          {:f64, :infinity} -> <<0x7FF0000000000000::64-native>>
          {:f32, :infinity} -> <<0x7F800000::32-native>>
          {:f64, :neg_infinity} -> <<0xFFF0000000000000::64-native>>
          {:f32, :neg_infinity} -> <<0xFF800000::32-native>>
          {:f64, v} -> <<v::float-64-native>>
          {:f32, v} -> <<v::float-32-native>>
        end

      AT.from_binary(bits, type, {}, backend: backend, device: index)
    end

    defp zero(%AT{} = x), do: scalar(x, 0.0)

    defp infinite(%AT{} = x),
      do: AT.logical_and(AT.equal(x, x), AT.not_equal(AT.subtract(x, x), AT.subtract(x, x)))

    ## The Complex library's formulas, on parts

    defp apply_binary(:add, x, y, _w), do: c_add(x, y)
    defp apply_binary(:subtract, x, y, _w), do: c_sub(x, y)
    defp apply_binary(:multiply, x, y, _w), do: c_mul(x, y)
    defp apply_binary(:divide, x, y, _w), do: c_div(x, y)
    defp apply_binary(:pow, x, y, _w), do: c_pow(x, y)

    # 1 + 0i in z's type (the Complex library's as_complex(1))
    defp one({re, _im}), do: {scalar(re, 1.0), nil}

    defp nan_pair({re, _im}) do
      inf = scalar(re, :infinity)
      nan = AT.subtract(inf, inf)
      {nan, nan}
    end

    defp im_of({re, nil}), do: zero(re)
    defp im_of({_re, im}), do: im

    defp c_add({ar, _} = a, {br, _} = b), do: {AT.add(ar, br), AT.add(im_of(a), im_of(b))}
    defp c_sub({ar, _} = a, {br, _} = b), do: {AT.subtract(ar, br), AT.subtract(im_of(a), im_of(b))}

    # (r1 r2 - i1 i2) + (i1 r2 + r1 i2)i
    defp c_mul({r1, _} = a, {r2, _} = b) do
      {i1, i2} = {im_of(a), im_of(b)}

      {AT.subtract(AT.multiply(r1, r2), AT.multiply(i1, i2)),
       AT.add(AT.multiply(i1, r2), AT.multiply(r1, i2))}
    end

    # ((r1 r2 + i1 i2) + (i1 r2 - r1 i2)i) / (r2^2 + i2^2)
    defp c_div({r1, _} = a, {r2, _} = b) do
      {i1, i2} = {im_of(a), im_of(b)}
      den = AT.add(AT.multiply(r2, r2), AT.multiply(i2, i2))
      re = AT.add(AT.multiply(r1, r2), AT.multiply(i1, i2))
      im = AT.subtract(AT.multiply(i1, r2), AT.multiply(r1, i2))
      # a finite dividend over an infinite real divisor is 0 (the Complex library's case)
      infinite_real = AT.logical_and(infinite(r2), AT.equal(i2, 0))
      finite = AT.logical_and(finite?(r1), finite?(i1))

      where(
        {AT.divide(re, den), AT.divide(im, den)},
        AT.logical_and(infinite_real, finite),
        {zero(r1), zero(r1)}
      )
    end

    # z where `pred` is false, `value` where it is true (the later a case, the higher its precedence)
    defp where({re, im}, pred, {vr, vi}), do: {AT.select(pred, vr, re), AT.select(pred, vi, im)}

    defp nan?(%AT{} = x), do: AT.not_equal(x, x)

    # Complex.atan2/2 of reals: IEEE's, but a finite y over an infinite x is 0 (x = +inf) or pi
    # (x = -inf) whatever y's sign
    defp c_atan2(y, x) do
      at_inf = AT.logical_and(infinite(x), finite?(y))
      AT.select(at_inf, AT.select(AT.greater(x, 0), zero(x), scalar(x, :math.pi())), AT.atan2(y, x))
    end

    # the phase: Nx's atan2(imag, real) (Nx.phase/1 without this callback), of these atan2 rules
    defp c_phase({re, _} = z), do: c_atan2(im_of(z), re)

    # Complex.abs/1: x = |re|, y = |im|; x when y is 0, y when x is 0, else the larger times
    # sqrt(1 + (smaller / larger)^2); NaN when both parts are, infinity when either is not finite.
    defp c_abs({re, im}) do
      x = AT.abs(re)

      if im == nil do
        x
      else
        y = AT.abs(im)
        hi = AT.select(AT.greater(x, y), x, y)
        lo = AT.select(AT.greater(x, y), y, x)
        q = AT.divide(lo, hi)
        scaled = AT.multiply(hi, AT.sqrt(AT.add(AT.multiply(q, q), 1.0)))
        finite = AT.logical_and(finite?(x), finite?(y))

        scaled
        |> then(&AT.select(AT.equal(y, 0), x, &1))
        |> then(&AT.select(AT.equal(x, 0), y, &1))
        |> then(&AT.select(finite, &1, scalar(x, :infinity)))
        |> then(&AT.select(AT.logical_and(nan?(x), nan?(y)), x, &1))
      end
    end

    defp finite?(%AT{} = x), do: AT.equal(AT.subtract(x, x), 0)

    # Complex.pow/2: 0^0 = 1 and 0^y = 0; x^1 = x; x^-1 = 1/x; else with rho = abs(x), theta =
    # phase(x): s = rho^yr exp(-yi theta), r = yr theta + yi log(rho), s cos(r) + s sin(r) i
    defp c_pow({xr, _} = x, {yr, _} = y) do
      {xi, yi} = {im_of(x), im_of(y)}
      rho = c_abs({xr, xi})
      theta = c_phase({xr, xi})
      s = AT.multiply(AT.pow(rho, yr), AT.exp(AT.multiply(AT.negate(yi), theta)))
      r = AT.add(AT.multiply(yr, theta), AT.multiply(yi, AT.log(rho)))
      {gr, gi} = {AT.multiply(s, AT.cos(r)), AT.multiply(s, AT.sin(r))}
      {ir, ii} = c_div(one(x), {xr, xi})

      real_y = AT.equal(yi, 0)
      y_one = AT.logical_and(real_y, AT.equal(yr, 1))
      y_minus = AT.logical_and(real_y, AT.equal(yr, -1))
      x_zero = AT.logical_and(AT.equal(xr, 0), AT.equal(xi, 0))
      y_zero = AT.logical_and(real_y, AT.equal(yr, 0))
      at_zero = AT.select(y_zero, scalar(xr, 1.0), zero(xr))

      pick = fn general, inverse, same, origin ->
        general
        |> then(&AT.select(y_minus, inverse, &1))
        |> then(&AT.select(y_one, same, &1))
        |> then(&AT.select(x_zero, origin, &1))
      end

      inf = scalar(xr, :infinity)
      finite = Enum.reduce([xi, yr, yi], finite?(xr), &AT.logical_and(finite?(&1), &2))

      # the library's cases: a part not finite gives NaN + NaNi, but 0 to the power +inf + 0i is 0
      {pick.(gr, ir, xr, at_zero), pick.(gi, ii, xi, zero(xr))}
      |> where(AT.logical_not(finite), nan_pair({xr, nil}))
      |> where(
        AT.logical_and(x_zero, AT.logical_and(AT.equal(yr, inf), AT.equal(yi, 0))),
        {zero(xr), zero(xr)}
      )
    end
  end
end
