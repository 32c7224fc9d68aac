if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Backend do
    @moduledoc """
    An `Nx.Backend` whose tensors live on Accel's devices: the CPU backend, any OpenCL device and
    CUDA.

        Nx.default_backend({Accel.Nx.Backend, device: :opencl})
        Nx.iota({1024, 1024}, type: :f32) |> Nx.multiply(2) |> Nx.sum(axes: [1])

        # or per tensor
        t = Nx.tensor([1.0, 2.0], backend: {Accel.Nx.Backend, device: :cpu})
        Nx.backend_transfer(t, {Accel.Nx.Backend, device: :opencl})

    ## Options

      * `:device` - where new tensors go: `:cpu`, `:opencl`, `:cuda` (the backend's first
        device), an `Accel.Device`, `{backend, index}`, or `:auto` (the default): tensors under
        1 MiB on the CPU backend, where a device launch would cost more than the work, larger ones
        on the device `Accel`'s `backend: :auto` picks (a GPU when there is one).
      * `:fallback` - `:host` (the default) runs an operation without a device kernel on
        `Nx.BinaryBackend`; `:raise` raises an `ArgumentError` naming it instead, so that a program
        can prove it stays on the device. Read from the default backend's options, or from
        `config :accel, nx_fallback: :raise` for every backend.

    Operations run on their operands' device. Operands on two devices chosen explicitly raise an
    `ArgumentError` naming both; tensors placed by `:auto` move to the other operand's device, and
    tensors of other backends (`Nx.BinaryBackend` constants) are uploaded.

    ## What runs on the device

    Every Nx type lives on the device, stored as itself: `f32`, `f64`, `s64`, `s32`, `u8`, `u64`
    and `u32` compute in themselves, `s8`, `s16` and `u16` in `s32` and `f16` and `bf16` in `f32`
    (converted on the device, each result converted back: integers wrap in their width, each float
    result rounds once to its type, as Nx rounds it), and so do Nx 0.9+'s sub-byte integers (`s2`,
    `s4`, `u2`, `u4`: in `s32`, a byte per element on the device) and 8-bit floats (`f8`, E5M2,
    and `f8_e4m3fn`: in `f32`, converted as Nx converts them). Through Accel's tensor kernels (one registry,
    `c_src/kernels/ops.h`):

      * elementwise: every unary operation in the registry (`exp`, `log`, `sin` ... `erfc`,
        `sign`, `abs`, `negate`, `floor`, `ceil`, `round`, `bitwise_not`), every binary operation
        and comparison, `logical_not`, `is_nan`, `is_infinity`, `select`, `clip`, with Nx's
        broadcasting and the output type Nx computed;
      * reductions `sum`, `product`, `reduce_max`, `reduce_min`, `all`, `any` over any axes (`keep_axes`
        too), `argmax` and `argmin` (either `tie_break`, NaN ranked as the installed Nx does);
      * `dot` with any contracting and batch axes: floats through BLAS (OpenBLAS, CLBlast,
        cuBLAS), integers through a kernel of Accel's (exact, wrapping as Nx's);
      * creation: `constant`, `iota`, `eye`, `from_binary`;
      * layout, for every type and any rank up to 64: `reshape`, `squeeze`, `transpose`, `broadcast`,
        `reverse`, `slice` (with strides), `put_slice`, `pad` (negative too), `concatenate`,
        `stack`, `to_batched`, `as_type`, `bitcast`;
      * indexing: `gather`, `take`, `take_along_axis` (every type), `indexed_add`, `indexed_put`;
      * windows: `window_sum`, `window_product`, `window_max`, `window_min`,
        `window_scatter_max`, `window_scatter_min`, `cumulative_sum`, `cumulative_product`,
        `cumulative_max`, `cumulative_min`;
      * `conv` (im2col and BLAS), `sort`, `argsort`, `erf_inv`, `population_count`,
        `count_leading_zeros`;
      * the linear algebra with results Nx's compositions would give: `cholesky`, `solve` (so
        `invert`), `triangular_solve`, `determinant` through LAPACK on the host in `f64`, and `qr`
        as Nx's own Householder algorithm in C++ (Q and R in Nx's signs, which Nx's gradients
        read); on Nx 0.13, `eigh`, `svd` and `lu` run as Nx's compositions of these operations;
        on Nx 0.7, `eigh` and `lu` are its binary backend's own algorithms ported to C++;
      * `fft` and `ifft` on the host in `f64` (radix-2, mixed radices, or Bluestein's chirp),
        rows on every core, rounded once; `fft2` and `ifft2` as Nx composes them, of these.

    Complex tensors (`c64`, `c128`) compute on their parts with these kernels (`Accel.Nx.Complex`:
    the Complex library's formulas and special cases, in `f64`): arithmetic, `exp` ... `tanh`,
    `abs`, `phase`, `real`, `imag`, `conjugate`, comparisons, `sum`, `dot`, scatters, layout,
    and `solve` and `triangular_solve` of complex matrices (LAPACK's `zgetrf`/`zgetrs`, triangular
    systems formula for formula as the binary backend solves them).

    Everything else falls back to `Nx.BinaryBackend` (the operands are read to the host and the
    result uploaded to their device): `reduce`, `window_reduce` and `map` (an Elixir function per
    element), on Nx 0.7 complex `eigh`, `lu` and `determinant` (and so `invert`), and the
    complex functions guides/nx.md lists. Each fallback emits the
    telemetry event `[:accel, :nx, :fallback]` with `%{count: 1}` and `%{operation: name,
    device: {backend, index}}` and logs at debug level: attach a handler to count them, or make
    fallbacks raise (below).

    Operands of other backends (the binary backend's constants) are uploaded to the Accel
    operand's device; with none, the result goes where the default backend's options place it.

    ## Semantics

    Nx's, not Elixir's: integers wrap in their type, Nx's type promotion decides every output type,
    NaN and infinities propagate. Where Accel differs from `Nx.BinaryBackend`: an integer zero
    divisor (`quotient`, `remainder`) and a negative integer exponent raise `ArgumentError` (Nx's
    binary backend raises `ArithmeticError`), and a float beyond an integer type's range converts
    to that type's nearest bound (the binary backend wraps). Float results keep the promise in the
    Nx guide: IEEE arithmetic, and `f32` functions computed in `f64` and rounded on devices with
    doubles, as the binary backend computes them; `f32` dots accumulate in `f32` (BLAS).

    `Nx.backend_deallocate/1` frees device memory at once; using the tensor afterwards raises.
    `to_pointer`/`from_pointer` raise: Accel does not share its buffers with other libraries.
    """

    @behaviour Nx.Backend

    # No @impl: the callbacks differ between Nx 0.7 and 0.11 (stack/3, to_pointer/2 and
    # from_pointer/5 arrived, map/4 left), and this module compiles against both.
    import Kernel, except: [inspect: 2]
    import Bitwise

    alias Accel.Nx.{Fallback, LinAlg, Storage}
    alias Accel.Tensor, as: AT
    alias Accel.Tensor.Elementwise
    alias Nx.Tensor, as: T

    @enforce_keys [:tensor]
    defstruct [:tensor, auto: false]

    @type t :: %__MODULE__{tensor: Accel.Tensor.t(), auto: boolean()}

    ## Creation

    def init(opts), do: Storage.init(opts)

    def constant(%T{shape: shape, type: type} = out, number, opts) do
      bytes = Nx.BinaryBackend.constant(%{out | shape: {}}, number, []) |> Nx.BinaryBackend.to_binary(1)

      if Storage.elements?(type) and shape != {} do
        %T{data: %__MODULE__{tensor: scalar, auto: auto}} = Storage.upload(bytes, %{out | shape: {}}, opts)
        Storage.wrap(Storage.fill(scalar, shape), out, auto)
      else
        Storage.upload(for(_ <- 1..Nx.size(shape)//1, into: <<>>, do: bytes), out, opts)
      end
    end

    def from_binary(out, binary, opts), do: Storage.upload(binary, out, opts)

    # complex: the real iota, as complex (x + 0i)
    def iota(%T{type: {:c, _} = type} = out, axis, opts),
      do: Accel.Nx.Complex.as_type(out, iota(%{out | type: Nx.Type.to_real(type)}, axis, opts))

    def iota(%T{shape: shape, type: type} = out, axis, opts) do
      case Storage.compute_type(type) do
        nil ->
          Fallback.run(:iota, [out, axis, opts])

        t ->
          {backend, index, auto} = Storage.place(opts, (Nx.size(shape) * elem(type, 1)) |> div(8))
          place = [type: t] ++ Storage.accel_place({backend, index})

          case axis do
            nil ->
              Storage.wrap(AT.iota(shape, place), out, auto)

            axis ->
              line = AT.iota({elem(shape, axis)}, place)
              Storage.wrap(along(line, shape, axis), out, auto)
          end
      end
    end

    def eye(%T{type: {:c, _} = type} = out, opts),
      do: Accel.Nx.Complex.as_type(out, eye(%{out | type: Nx.Type.to_real(type)}, opts))

    def eye(%T{shape: shape, type: type} = out, opts) do
      case Storage.compute_type(type) do
        nil ->
          Fallback.run(:eye, [out, opts])

        t ->
          rank = tuple_size(shape)
          {backend, index, auto} = Storage.place(opts, Nx.size(shape) * div(elem(type, 1), 8))
          place = Storage.accel_place({backend, index})
          rows = along(AT.iota({elem(shape, rank - 2)}, place), shape, rank - 2)
          cols = along(AT.iota({elem(shape, rank - 1)}, place), shape, rank - 1)
          Storage.wrap(rows |> AT.equal(cols) |> AT.as_type(t), out, auto)
      end
    end

    # A vector laid along `axis` of `shape`, repeated across every other axis.
    defp along(line, shape, axis) do
      strides = for d <- 0..(tuple_size(shape) - 1), do: if(d == axis, do: 1, else: 0)
      Storage.view(line, shape, strides, 0)
    end

    ## Moving data

    def to_binary(%T{type: {_, bits} = type, data: %__MODULE__{tensor: a}}, limit) do
      if Storage.storage_type(type) == :bytes do
        # Stored as bytes: the first `limit` elements' bits.
        wanted = limit * bits
        <<head::bitstring-size(wanted), _::bitstring>> = Storage.download(a, :bytes, div(wanted + 7, 8))
        head
      else
        Storage.download(a, type, limit)
      end
    end

    def backend_copy(%T{data: %__MODULE__{tensor: a}} = t, __MODULE__, opts) do
      case Storage.init(opts)[:device] do
        :auto ->
          Storage.wrap(copy(a), t, t.data.auto)

        {backend, index} ->
          # A transfer to another device is already a tensor of its own.
          moved = AT.transfer(a, {backend, max(index, 0)})
          Storage.wrap(if(moved == a, do: copy(a), else: moved), t)
      end
    end

    def backend_copy(t, backend, opts), do: backend.from_binary(t, to_binary(t, Nx.size(t)), opts)

    def backend_transfer(%T{data: %__MODULE__{tensor: a}} = t, __MODULE__, opts) do
      case Storage.init(opts)[:device] do
        :auto ->
          t

        {backend, index} ->
          moved = AT.transfer(a, {backend, max(index, 0)})
          if moved != a, do: AT.free(a)
          Storage.wrap(moved, t)
      end
    end

    def backend_transfer(t, backend, opts) do
      result = backend_copy(t, backend, opts)
      backend_deallocate(t)
      result
    end

    # A tensor of its own (backend_copy's result must outlive a deallocation of the source).
    defp copy(%AT{} = a), do: Storage.view(a, a.shape, Storage.strides(a.shape), 0)

    def backend_deallocate(%T{data: %__MODULE__{tensor: a}}) do
      case Accel.NIF.tensor_free(a.ref) do
        :ok -> :ok
        :already_freed -> :already_deallocated
      end
    end

    def to_batched(%T{shape: out_shape} = out, %T{type: type} = t, opts) do
      batch = elem(out_shape, 0)
      n = elem(t.shape, 0)

      if Storage.elements?(type) and rem(n, batch) == 0 do
        [a] = Storage.operands!(:to_batched, [t])
        per = div(AT.size(a), max(n, 1)) * batch
        strides = Storage.strides(out_shape)

        Stream.map(
          0..(div(n, batch) - 1)//1,
          &Storage.wrap(Storage.view(a, out_shape, strides, &1 * per), out, t.data.auto)
        )
      else
        Fallback.run(:to_batched, [out, t, opts])
      end
    end

    def inspect(%T{} = tensor, inspect_opts) do
      limit = if inspect_opts.limit == :infinity, do: Nx.size(tensor), else: inspect_opts.limit + 1
      doc = Nx.Backend.inspect(tensor, to_binary(tensor, min(limit, Nx.size(tensor))), inspect_opts)

      if Application.get_env(:accel, :nx_inspect_device, true) do
        {backend, index} = tensor.data.tensor.device
        Inspect.Algebra.concat(["Accel.Nx.Backend<#{backend}:#{index}>", Inspect.Algebra.line(), doc])
      else
        doc
      end
    end

    def to_pointer(_tensor, _opts),
      do: raise(ArgumentError, "Accel.Nx.Backend does not share device pointers (to_pointer/2)")

    def from_pointer(_pointer, _type, _shape, _opts, _fun),
      do: raise(ArgumentError, "Accel.Nx.Backend does not adopt foreign device pointers (from_pointer/5)")

    ## Types and shapes

    defdelegate as_type(out, t), to: Accel.Nx.Layout
    defdelegate bitcast(out, t), to: Accel.Nx.Layout
    defdelegate reshape(out, t), to: Accel.Nx.Layout
    defdelegate squeeze(out, t, axes), to: Accel.Nx.Layout
    defdelegate transpose(out, t, axes), to: Accel.Nx.Layout
    defdelegate broadcast(out, t, shape, axes), to: Accel.Nx.Layout
    defdelegate reverse(out, t, axes), to: Accel.Nx.Layout
    defdelegate slice(out, t, start_indices, lengths, steps), to: Accel.Nx.Layout
    defdelegate put_slice(out, t, start_indices, slice), to: Accel.Nx.Layout
    defdelegate pad(out, t, pad_value, config), to: Accel.Nx.Layout
    defdelegate concatenate(out, tensors, axis), to: Accel.Nx.Layout
    defdelegate stack(out, tensors, axis), to: Accel.Nx.Layout

    ## Fused regions (Accel.Nx.Compiler)

    # Nx's evaluator calls an optional operation with its tensors as arguments: one function per
    # number of inputs a region may have.
    for k <- 1..30 do
      inputs = Macro.generate_arguments(k, __MODULE__)

      @doc false
      def accel_fused(out, unquote_splicing(inputs), opts),
        do: Accel.Nx.Compiler.run(out, [unquote_splicing(inputs)], opts)
    end

    ## Elementwise

    @compare for %{family: :compare, name: n} <- AT.Registry.ops(), do: n
    @binary for %{family: :binary, name: n} <- AT.Registry.ops(), do: n
    @unary for %{family: :unary, name: n} <- AT.Registry.ops(), do: n
    @float_only for %{types: :float, name: n} <- AT.Registry.ops(), do: n
    @int_only for %{types: :int, name: n} <- AT.Registry.ops(), do: n

    for op <- @binary do
      def unquote(op)(out, a, b), do: binary(:binary, unquote(op), out, a, b)
    end

    for op <- @compare do
      def unquote(op)(out, a, b), do: binary(:compare, unquote(op), out, a, b)
    end

    for op <- @unary do
      def unquote(op)(out, t), do: unary(unquote(op), out, t)
    end

    # complex parts and arithmetic: Accel.Nx.Complex, of the real kernels
    for op <- [:real, :imag] do
      def unquote(op)(out, %T{type: {:c, _}} = t), do: Accel.Nx.Complex.part(unquote(op), out, t)
      def unquote(op)(out, t), do: Fallback.run(unquote(op), [out, t])
    end

    defdelegate conjugate(out, t), to: Accel.Nx.Complex
    defdelegate phase(out, t), to: Accel.Nx.Complex

    # Bit counts in the Nx type's width, of the registry's shifts, masks and adds (no kernel of
    # their own): a population count sums bit pairs, nibbles, bytes, then the bytes; leading zeros
    # are the width less the population count of the value with every bit below its highest set.
    def population_count(out, t), do: bits(:population_count, out, t)
    def count_leading_zeros(out, t), do: bits(:count_leading_zeros, out, t)

    defp bits(name, %T{type: {kind, width} = type} = out, %T{} = t) when kind in [:s, :u] do
      if Storage.compute?([type, t.type]) do
        [a] = Storage.operands!(name, [t])
        a = Storage.cast(a, type)
        bits = Accel.Tensor.Types.bytes(a.type) * 8
        # the value's own bits: s8 and s16 compute in s32, sign-extended
        a = if width < bits, do: AT.bitwise_and(a, (1 <<< width) - 1), else: a

        result =
          case name do
            :population_count ->
              popcount(a, bits)

            :count_leading_zeros ->
              smeared =
                Enum.reduce(
                  [1, 2, 4, 8, 16, 32],
                  a,
                  &if(&1 < width, do: AT.bitwise_or(&2, AT.right_shift(&2, &1)), else: &2)
                )

              AT.negate(AT.subtract(popcount(smeared, bits), width))
          end

        Storage.wrap(result, out, Storage.auto?([t]))
      else
        Fallback.run(name, [out, t])
      end
    end

    defp bits(name, out, t), do: Fallback.run(name, [out, t])

    # masks of `bits` bits repeating 01, 0011 and 00001111: their top bit clear, so that an
    # arithmetic shift's copies of the sign bit are masked away
    defp popcount(x, bits) do
      all = (1 <<< bits) - 1
      [m1, m2, m4] = [div(all, 3), div(all, 5), div(all, 17)]
      x = AT.subtract(x, AT.bitwise_and(AT.right_shift(x, 1), m1))
      x = AT.add(AT.bitwise_and(x, m2), AT.bitwise_and(AT.right_shift(x, 2), m2))
      x = AT.bitwise_and(AT.add(x, AT.right_shift(x, 4)), m4)
      x = Enum.reduce([8, 16, 32], x, &if(&1 < bits, do: AT.add(&2, AT.right_shift(&2, &1)), else: &2))
      AT.bitwise_and(x, 0x7F)
    end

    # Arithmetic in the output type Nx computed; comparisons in the operands' merged type.
    defp binary(family, op, %T{type: type} = out, %T{} = a, %T{} = b) do
      in_type = if family == :compare, do: Nx.Type.merge(a.type, b.type), else: type

      cond do
        Accel.Nx.Complex.handles?(op, [type, a.type, b.type]) ->
          if family == :compare,
            do: Accel.Nx.Complex.compare(op, out, a, b),
            else: Accel.Nx.Complex.binary(op, out, a, b)

        Storage.compute?([type, a.type, b.type]) and admits?(op, in_type) ->
          [x, y] = binary_operands(op, a, b, in_type)
          Storage.wrap(Elementwise.binary(family, op, x, y), out, Storage.auto?([a, b]))

        true ->
          Fallback.run(op, [out, a, b])
      end
    end

    # The operands in the type the operation computes in. A scalar of the binary backend in that
    # type (the constant Nx makes of `t * 2.0` without a default backend) goes to the kernel as
    # the number it holds, which is that element exactly, rather than uploaded as a tensor of its
    # own: one NIF call and allocation fewer (an `f32` scalar times 2.0: 2.3 us against 3.2).
    defp binary_operands(op, a, b, in_type) do
      case {scalar_number(a, in_type), scalar_number(b, in_type)} do
        {x, nil} when x != nil -> [x, op |> Storage.operands!([b]) |> hd() |> Storage.cast(in_type)]
        {nil, y} when y != nil -> [op |> Storage.operands!([a]) |> hd() |> Storage.cast(in_type), y]
        _ -> Storage.operands!(op, [a, b]) |> Enum.map(&Storage.cast(&1, in_type))
      end
    end

    # (a type that computes in itself, and a value the kernels' scalar argument holds exactly:
    # a finite float, an integer of 64 bits at most, signed)
    defp scalar_number(%T{shape: {}, type: type, data: %Nx.BinaryBackend{}} = t, type) do
      if Storage.native?(type) do
        case Nx.to_number(t) do
          v when is_float(v) -> v
          v when is_integer(v) and v >= -0x8000000000000000 and v <= 0x7FFFFFFFFFFFFFFF -> v
          _nan_or_infinity_or_wide -> nil
        end
      end
    end

    defp scalar_number(_t, _type), do: nil

    defp unary(op, %T{type: type} = out, %T{} = t) do
      cond do
        Accel.Nx.Complex.handles?(op, [type, t.type]) ->
          Accel.Nx.Complex.unary(op, out, t)

        Storage.compute?([type, t.type]) and admits?(op, type) ->
          [a] = Storage.operands!(op, [t])
          Storage.wrap(Elementwise.unary(op, Storage.cast(a, type)), out, Storage.auto?([t]))

        true ->
          Fallback.run(op, [out, t])
      end
    end

    defp admits?(op, type) when op in @float_only, do: Storage.float?(type)
    defp admits?(op, {kind, _}) when op in @int_only, do: kind in [:s, :u]
    defp admits?(_op, _type), do: true

    def logical_not(out, t), do: predicate(:logical_not, out, t, &AT.logical_not/1)

    def is_nan(out, t), do: predicate(:is_nan, out, t, &AT.not_equal(&1, &1))

    def is_infinity(out, t) do
      predicate(:is_infinity, out, t, fn a ->
        if a.type in [:f32, :f64] do
          inf =
            AT.from_binary(<<0x7FF0000000000000::64-native>>, :f64, {},
              backend: elem(a.device, 0),
              device: elem(a.device, 1)
            )

          AT.equal(AT.abs(a), Storage.cast(inf, if(a.type == :f32, do: {:f, 32}, else: {:f, 64})))
        else
          AT.not_equal(a, a)
        end
      end)
    end

    defp predicate(name, out, t, fun) do
      cond do
        Storage.compute?([t.type]) ->
          [a] = Storage.operands!(name, [t])
          Storage.wrap(fun.(Storage.cast(a, t.type)), out, Storage.auto?([t]))

        match?({:c, _}, t.type) ->
          Accel.Nx.Complex.predicate(name, out, t)

        true ->
          Fallback.run(name, [out, t])
      end
    end

    def select(%T{type: type} = out, pred, on_true, on_false) do
      cond do
        Storage.compute?([type, pred.type, on_true.type, on_false.type]) ->
          [p, x, y] = Storage.operands!(:select, [pred, on_true, on_false])
          result = AT.select(Storage.cast(p, pred.type), Storage.cast(x, type), Storage.cast(y, type))
          Storage.wrap(result, out, Storage.auto?([pred, on_true, on_false]))

        match?({:c, _}, type) ->
          Accel.Nx.Complex.select(out, pred, on_true, on_false)

        true ->
          Fallback.run(:select, [out, pred, on_true, on_false])
      end
    end

    def clip(%T{type: type} = out, t, low, high) do
      if Storage.compute?([type, t.type, low.type, high.type]) do
        [a, lo, hi] = Storage.operands!(:clip, [t, low, high])
        # Nx clips the values, then writes them in the merged type: u64 values above s64's range,
        # clipped by s64 bounds, end at the upper bound (converted first, they would wrap)
        a = if t.type == {:u, 64} and elem(type, 0) == :s, do: AT.min(a, 0x7FFFFFFFFFFFFFFF), else: a
        [a, lo, hi] = Enum.map([a, lo, hi], &Storage.cast(&1, type))
        Storage.wrap(a |> AT.max(lo) |> AT.min(hi), out, Storage.auto?([t]))
      else
        Fallback.run(:clip, [out, t, low, high])
      end
    end

    ## Reductions and dot

    defdelegate sum(out, t, opts), to: Accel.Nx.Reduce
    defdelegate reduce_max(out, t, opts), to: Accel.Nx.Reduce
    defdelegate reduce_min(out, t, opts), to: Accel.Nx.Reduce
    defdelegate all(out, t, opts), to: Accel.Nx.Reduce
    defdelegate any(out, t, opts), to: Accel.Nx.Reduce
    defdelegate argmax(out, t, opts), to: Accel.Nx.Reduce
    defdelegate argmin(out, t, opts), to: Accel.Nx.Reduce
    defdelegate dot(out, a, contract_a, batch_a, b, contract_b, batch_b), to: Accel.Nx.Reduce

    ## Indexing and windows

    defdelegate gather(out, t, indices, opts), to: Accel.Nx.Indexing
    defdelegate take(out, t, indices, axis), to: Accel.Nx.Indexing
    defdelegate take_along_axis(out, t, indices, axis), to: Accel.Nx.Indexing
    defdelegate indexed_add(out, target, indices, updates, opts), to: Accel.Nx.Indexing
    defdelegate indexed_put(out, target, indices, updates, opts), to: Accel.Nx.Indexing
    defdelegate window_sum(out, t, window, opts), to: Accel.Nx.Window
    defdelegate window_product(out, t, window, opts), to: Accel.Nx.Window
    defdelegate window_max(out, t, window, opts), to: Accel.Nx.Window
    defdelegate window_min(out, t, window, opts), to: Accel.Nx.Window
    defdelegate window_scatter_max(out, t, source, init, window, opts), to: Accel.Nx.Window
    defdelegate window_scatter_min(out, t, source, init, window, opts), to: Accel.Nx.Window
    defdelegate product(out, t, opts), to: Accel.Nx.Reduce
    defdelegate cumulative_sum(out, t, opts), to: Accel.Nx.Window
    defdelegate cumulative_product(out, t, opts), to: Accel.Nx.Window
    defdelegate cumulative_max(out, t, opts), to: Accel.Nx.Window
    defdelegate cumulative_min(out, t, opts), to: Accel.Nx.Window
    defdelegate conv(out, t, kernel, opts), to: Accel.Nx.Conv
    defdelegate sort(out, t, opts), to: Accel.Nx.Sort
    defdelegate argsort(out, t, opts), to: Accel.Nx.Sort

    ## Linear algebra (Nx 0.7's callbacks; Nx 0.13 calls blocks): LAPACK on the host where the
    ## result is unique (Accel.Nx.LinAlg), else what Nx runs without the callback: its
    ## composition on this backend, or the binary backend where that composition is not public

    def cholesky(out, t), do: LinAlg.cholesky(out, t, fn -> Nx.LinAlg.Cholesky.cholesky(t) end)
    # Nx 0.7's eigh and lu: its binary backend's algorithms, ported (LinAlg)
    def eigh(out, t, opts), do: LinAlg.eigh(out, t, opts, fn -> Fallback.run(:eigh, [out, t, opts]) end)
    def lu(out, t, opts), do: LinAlg.lu(out, t, opts, fn -> Fallback.run(:lu, [out, t, opts]) end)
    def qr(out, t, opts), do: LinAlg.qr(out, t, opts, fn -> Nx.LinAlg.QR.qr(t, opts) end)

    def solve(out, a, b),
      do: LinAlg.solve(out, a, b, fn -> Fallback.run(:solve, [out, a, b], &apply(Nx.LinAlg, :solve, &1)) end)

    def determinant(out, t) do
      LinAlg.determinant(out, t, fn ->
        Fallback.run(:determinant, [out, t], &apply(Nx.LinAlg, :determinant, &1))
      end)
    end

    def triangular_solve(out, a, b, opts) do
      LinAlg.triangular_solve(out, a, b, opts, fn -> Fallback.run(:triangular_solve, [out, a, b, opts]) end)
    end

    ## Nx.block/4 (Nx 0.13): operations Nx composes from others unless a backend runs them itself

    # logical_not, take, take_along_axis and the cumulative operations are kernels here; every
    # other block runs its default, Nx's composition of operations (top_k of a sort, the linear
    # algebra of its primitives), each of which runs as this backend's operation.
    def block(%{__struct__: Nx.Block.LogicalNot}, out, [t], _fun), do: logical_not(out, t)
    # phase: atan2 with the Complex library's rules at infinities, as the binary backend's atan2
    def block(%{__struct__: Nx.Block.Phase}, out, [t], _fun), do: phase(out, t)
    # take and take_along_axis: the gather kernel's plans for them (Nx composes them of gathers)
    def block(%{__struct__: Nx.Block.Take, axis: axis}, out, [t, indices], _fun),
      do: Accel.Nx.Indexing.take(out, t, indices, axis)

    def block(%{__struct__: Nx.Block.TakeAlongAxis, axis: axis}, out, [t, indices], _fun),
      do: Accel.Nx.Indexing.take_along_axis(out, t, indices, axis)

    # the cumulative operations: a scan kernel; a complex product Nx's composition (a pairwise
    # scan of complex products), whose operations run here
    def block(%{__struct__: Nx.Block.CumulativeProduct} = s, _out, [%T{type: {:c, _}} = t], fun),
      do: fun.(s, t)

    for {block, op} <- [
          CumulativeSum: :cumulative_sum,
          CumulativeProduct: :cumulative_product,
          CumulativeMax: :cumulative_max,
          CumulativeMin: :cumulative_min
        ] do
      def block(
            %{__struct__: unquote(Module.concat(Nx.Block, block)), axis: axis, reverse: reverse},
            out,
            [t],
            _fun
          ),
          do: Accel.Nx.Window.unquote(op)(out, t, axis: axis, reverse: reverse)
    end

    # the linear algebra with unique results: LAPACK; Nx's composition otherwise
    def block(%{__struct__: Nx.Block.LinAlg.Cholesky} = s, out, [t], fun),
      do: LinAlg.cholesky(out, t, fn -> fun.(s, t) end)

    def block(%{__struct__: Nx.Block.LinAlg.QR} = s, out, [t], fun),
      do: LinAlg.qr(out, t, [eps: s.eps], fn -> fun.(s, t) end)

    def block(%{__struct__: Nx.Block.LinAlg.Determinant} = s, out, [t], fun),
      do: LinAlg.determinant(out, t, fn -> fun.(s, t) end)

    def block(%{__struct__: Nx.Block.LinAlg.Solve} = s, out, [a, b], fun),
      do: LinAlg.solve(out, a, b, fn -> fun.(s, a, b) end)

    # a region Accel.Nx.Compiler fused
    def block(%Accel.Nx.Compiler.Fused{accel: spec}, out, inputs, _fun),
      do: Accel.Nx.Compiler.run(out, inputs, accel: spec)

    def block(struct, _out, args, fun), do: apply(fun, [struct | args])

    ## The Fourier transform (the binary backend's where the types are not Accel's)

    def fft(out, t, opts),
      do: Accel.Nx.FFT.transform(out, t, opts, false, fn -> Fallback.run(:fft, [out, t, opts]) end)

    def ifft(out, t, opts),
      do: Accel.Nx.FFT.transform(out, t, opts, true, fn -> Fallback.run(:ifft, [out, t, opts]) end)

    ## Fallbacks: Nx.BinaryBackend computes, the result returns to the operands' device

    fallbacks = [
      window_reduce: 6,
      reduce: 5,
      top_k: 3,
      map: 4,
      all_close: 4
    ]

    # Only those the installed Nx.BinaryBackend has: an optional callback it lacks (take/4 in Nx
    # 0.11) is left to Nx's default implementation, composed of operations that run here.
    Code.ensure_loaded!(Nx.BinaryBackend)

    for {name, arity} <- fallbacks, function_exported?(Nx.BinaryBackend, name, arity) do
      args = Macro.generate_arguments(arity, __MODULE__)
      def unquote(name)(unquote_splicing(args)), do: Fallback.run(unquote(name), unquote(args))
    end
  end
end
