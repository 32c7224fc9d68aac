if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.ComplexTest do
    # Complex arithmetic (c64, c128) on the device, of the real kernels (Accel.Nx.Complex): every
    # operation against Nx.BinaryBackend on random values (bit for bit on the CPU backend, where
    # both compute the Complex library's formulas in f64; within a few units of f64's last place
    # on OpenCL, whose f64 functions are the device's own), on every combination of special
    # values, at 10^7 elements against closed forms, and through the programs that use it (an
    # FFT convolution, complex linear algebra); with `fallback: :raise` and the fallback event
    # counted to zero. On the CPU backend, OpenCL and CUDA (each where it is usable).
    use ExUnit.Case, async: true
    import Accel.Test.Fallbacks, only: [count: 1]

    setup :count

    @unary [:negate, :conjugate, :real, :imag, :abs, :phase, :exp, :expm1, :log, :log1p, :sqrt, :rsqrt] ++
             [:sigmoid, :sin, :cos, :tan, :sinh, :cosh, :tanh, :is_nan, :is_infinity] ++
             [:asin, :acos, :atan, :asinh, :acosh, :atanh, :cbrt]
    @binary [:add, :subtract, :multiply, :divide, :pow, :equal, :not_equal]

    defp on(device, t), do: Nx.backend_copy(t, {Accel.Nx.Backend, device: device})
    defp host(t), do: Nx.backend_copy(t, Nx.BinaryBackend)

    # `fun` on the binary backend and, with fallback: :raise, on the device: {expected, actual}
    defp both(device, inputs, fun) do
      expected = Nx.with_default_backend(Nx.BinaryBackend, fn -> apply(fun, Enum.map(inputs, &host/1)) end)

      actual =
        Nx.with_default_backend({Accel.Nx.Backend, device: device, fallback: :raise}, fn ->
          apply(fun, Enum.map(inputs, &on(device, &1)))
        end)

      assert %Accel.Nx.Backend{} = actual.data
      actual = host(actual)
      assert {actual.type, actual.shape} == {expected.type, expected.shape}
      {expected, actual}
    end

    # The same values (NaN equal to NaN) or, with a tolerance, within it relative to each value.
    defp same(device, inputs, fun, tolerance \\ 0) do
      {expected, actual} = both(device, inputs, fun)

      bad =
        Enum.zip(values(actual), values(expected))
        |> Enum.reject(fn {a, e} -> a == e or close?(a, e, tolerance) end)

      assert bad == [],
             "#{inspect(actual)} differs from #{inspect(expected)} (tolerance #{tolerance}): #{inspect(Enum.take(bad, 3))}"
    end

    # each element as {re, im} (NaN and the infinities as atoms, equal to themselves)
    defp values(t) do
      t
      |> Nx.to_flat_list()
      |> Enum.map(fn
        %Complex{re: r, im: i} -> {r, i}
        x -> {x, 0.0}
      end)
    end

    # finite parts, each within `tolerance` of the element's magnitude (a part near zero beside a
    # large other one carries that one's rounding)
    defp close?({ar, ai}, {er, ei}, tolerance) do
      parts = [ar, ai, er, ei]

      tolerance > 0 and Enum.all?(parts, &is_float/1) and
        max(abs(ar - er), abs(ai - ei)) <= tolerance * max(:math.sqrt(er * er + ei * ei), 1.0e-300)
    end

    defp random(shape, type, seed) do
      key = Nx.Random.key(seed)
      {re, key} = Nx.Random.normal(key, shape: shape, type: :f64)
      {im, _} = Nx.Random.normal(key, shape: shape, type: :f64)
      Nx.complex(re, Nx.multiply(im, 3)) |> Nx.as_type(type)
    end

    # every combination of 0, -0, finite, infinite and NaN parts
    @specials [0.0, -0.0, 1.5, -2.0, :infinity, :neg_infinity, :nan]
    defp specials(type), do: Nx.tensor(for(r <- @specials, i <- @specials, do: Complex.new(r, i)), type: type)

    # {re, im} / |z| in the parts' type by IEEE's rules (0 / inf is 0, where the binary backend
    # gives NaN), 0 where |z| is 0: XLA's sign of a complex number
    defp unit(_z, m, _type) when m == 0, do: {0.0, 0.0}
    defp unit({re, im}, m, type), do: {part_over(re, m, type), part_over(im, m, type)}

    defp part_over(p, m, _type) when p == :nan or m == :nan, do: :nan
    defp part_over(p, :infinity, _type) when is_float(p), do: 0.0
    defp part_over(_infinite, :infinity, _type), do: :nan
    defp part_over(p, m, {:c, 128}), do: p / m

    defp part_over(p, m, {:c, 64}) do
      <<rounded::float-32>> = <<p / m::float-32>>
      rounded
    end

    # the binary backend computes in f64: so does the CPU backend, exactly; OpenCL's and CUDA's
    # f64 functions are the device's own, a unit or two of the last place apart, which powers
    # (exp of a product with a log) and differences of products carry further
    defp tolerance(:cpu, _type), do: 0
    defp tolerance(_device, {:c, 64}), do: 0
    defp tolerance(_device, {:c, 128}), do: 1.0e-13

    for device <- Accel.Test.Devices.nx() do
      describe "on #{device}" do
        @describetag Accel.Test.Devices.tags(device)
        @device device

        test "every operation on random values, complex and mixed with reals, broadcast" do
          for type <- [{:c, 64}, {:c, 128}] do
            z = random({5, 7}, type, 1)
            w = random({5, 7}, type, 2)
            real = Nx.Random.normal(Nx.Random.key(3), shape: {7}) |> elem(0)
            tolerance = tolerance(@device, type)

            for op <- @unary, do: same(@device, [z], &apply(Nx, op, [&1]), tolerance)

            for op <- @binary,
                inputs <- [[z, w], [z, real], [real, z], [z, Nx.tensor(Complex.new(0.5, -2))]] do
              same(@device, inputs, &apply(Nx, op, [&1, &2]), tolerance)
            end

            same(@device, [Nx.as_type(z, :c64), Nx.as_type(w, :c128)], &Nx.multiply/2, tolerance)
            same(@device, [z, w], &Nx.select(Nx.greater(Nx.real(&1), 0), &1, &2))
            same(@device, [z, real], &Nx.select(Nx.greater(Nx.imag(&1), 0), &1, &2))
            # a complex predicate: true where the element is not zero, as logical_and reads it (the
            # binary backend's select takes every complex predicate for true)
            pred = Nx.multiply(z, Nx.greater(Nx.real(w), 0))
            {_, chosen} = both(@device, [pred, z, w], &Nx.select/3)
            assert values(chosen) == values(Nx.select(Nx.not_equal(Nx.abs(pred), 0), z, w))
            for to <- [:c64, :c128, :f32, :f64, :s32], do: same(@device, [z], &Nx.as_type(&1, to))
            same(@device, [real], &Nx.as_type(&1, type))
            same(@device, [real], &Nx.conjugate/1)
          end

          Accel.Test.Fallbacks.none!()
        end

        test "reals of every type beside complex operands, and made complex" do
          # made complex first where the parts hold their values exactly (c64: floats of up to 32
          # bits, integers of up to 16), through the composition elsewhere; as_type through f64
          # from 64-bit integers: the binary backend's bits either way
          big = [1, -3, 2 ** 24 + 1, 2 ** 53 + 1, 2 ** 60 + 12_345, -(2 ** 62) - 7, 0]

          reals =
            [Nx.tensor(big, type: :s64), Nx.tensor(Enum.map(big, &rem(&1, 2 ** 31)), type: :s32)] ++
              [
                Nx.tensor([1, -3, 32_767, -32_768, 5, 0, 9], type: :s16),
                Nx.tensor([0, 1, 255, 7, 3, 2, 9], type: :u8)
              ] ++
              [Nx.tensor([1.5, -0.0, 65_504.0, 1.0e-3, 3.0, :infinity, :nan], type: :f16)] ++
              [Nx.tensor([1.5, -0.0, 3.0e38, 1.0e-3, 3.0, :neg_infinity, 2.5], type: :bf16)] ++
              [Nx.tensor([0.1, -0.0, 1.0e100, 1.0e-40, 16_777_217.0, :infinity, -2.5], type: :f64)]

          for type <- [{:c, 64}, {:c, 128}], real <- reals do
            z = random({7}, type, 4)
            tolerance = tolerance(@device, type)
            same(@device, [real], &Nx.as_type(&1, type))

            for op <- [:add, :subtract, :multiply, :divide],
                do: same(@device, [z, real], &apply(Nx, op, [&1, &2]), tolerance)

            same(@device, [real, z], &Nx.multiply/2, tolerance)
          end

          same(@device, [Nx.tensor([0.5, -2.0, 1.0e-3]), Nx.tensor([3.0, -0.0, 7.0])], &Nx.complex/2)
          Accel.Test.Fallbacks.none!()
        end

        test "special values give the Complex library's results, but NaN parts never compare equal" do
          for type <- [{:c, 64}, {:c, 128}] do
            z = specials(type)
            n = Nx.size(z)
            tolerance = tolerance(@device, type)
            for op <- @unary -- [:cbrt], do: same(@device, [z], &apply(Nx, op, [&1]), tolerance)
            # (the library's cbrt raises on a NaN part, dividing its phase, the atom :nan, by 3)
            no_nan = for r <- @specials -- [:nan], i <- @specials -- [:nan], do: Complex.new(r, i)
            same(@device, [Nx.tensor(no_nan, type: type)], &Nx.cbrt/1, tolerance)

            # every pair
            a = z |> Nx.reshape({n, 1}) |> Nx.broadcast({n, n})
            b = z |> Nx.reshape({1, n}) |> Nx.broadcast({n, n})

            for op <- [:add, :subtract, :multiply, :divide, :pow],
                do: same(@device, [a, b], &apply(Nx, op, [&1, &2]), tolerance)

            # beside every real special of the parts' type (read as x + 0i, without making it
            # complex first), either side, and made complex
            reals = Nx.tensor(@specials, type: Nx.Type.to_real(type))
            k = Nx.size(reals)
            column = z |> Nx.reshape({n, 1}) |> Nx.broadcast({n, k})
            row = reals |> Nx.reshape({1, k}) |> Nx.broadcast({n, k})

            for op <- [:add, :subtract, :multiply, :divide],
                inputs <- [[column, row], [Nx.transpose(row), Nx.transpose(column)]],
                do: same(@device, inputs, &apply(Nx, op, [&1, &2]), tolerance)

            same(@device, [reals], &Nx.as_type(&1, type))
            same(@device, [reals, Nx.reverse(reals)], &Nx.complex/2)

            # IEEE: a NaN part makes the numbers unequal (the binary backend compares the Complex
            # structs, whose NaN atoms are equal)
            {_, equal} = both(@device, [a, b], &Nx.equal/2)
            {_, unequal} = both(@device, [a, b], &Nx.not_equal/2)
            host_a = host(a)
            host_b = host(b)
            nan = fn t -> Nx.logical_or(Nx.is_nan(Nx.real(t)), Nx.is_nan(Nx.imag(t))) end

            ieee =
              Nx.logical_and(
                Nx.equal(Nx.real(host_a), Nx.real(host_b)),
                Nx.equal(Nx.imag(host_a), Nx.imag(host_b))
              )

            assert equal == ieee
            assert unequal == Nx.logical_not(ieee)
            assert Nx.to_number(Nx.sum(Nx.logical_and(nan.(host_a), equal))) == 0
          end

          Accel.Test.Fallbacks.none!()
        end

        # XLA's definition (EXLA's and Torchx's results), not the binary backend's, which gives
        # 1 + 0i for every complex element: each part over |z| in the parts' type, 0 at 0
        test "sign is z / |z|: random values, special values, 10^6 points of the unit circle" do
          for type <- [{:c, 64}, {:c, 128}] do
            for z <- [random({5, 7}, type, 6), specials(type)] do
              {_, sign} = both(@device, [z], &Nx.sign/1)
              magnitudes = z |> host() |> Nx.abs() |> Nx.to_flat_list()
              expected = Enum.zip_with(values(z), magnitudes, &unit(&1, &2, type))
              assert values(sign) == expected
            end

            assert values(Nx.sign(on(@device, Nx.tensor([0, Complex.new(0, -3)], type: type)))) ==
                     [{0.0, 0.0}, {0.0, -1.0}]
          end

          n = 1_000_000
          backend = {Accel.Nx.Backend, device: @device, fallback: :raise}
          theta = Nx.iota({n}, type: :f64, backend: backend) |> Nx.multiply(2 * :math.pi() / n)
          radius = Nx.iota({n}, type: :f64, backend: backend) |> Nx.remainder(1000) |> Nx.add(0.5)
          unit = Nx.complex(Nx.cos(theta), Nx.sin(theta))
          sign = Nx.sign(Nx.multiply(unit, radius))
          assert Nx.to_number(Nx.reduce_max(Nx.abs(Nx.subtract(sign, unit)))) < 1.0e-15
          Accel.Test.Fallbacks.none!()
        end

        test "sums, products of matrices, scatters, layout, windows, scans and truth" do
          for type <- [{:c, 64}, {:c, 128}] do
            z = random({4, 6, 5}, type, 4)
            w = random({5, 3}, type, 5)

            for opts <- [[], [axes: [1]], [axes: [0, 2], keep_axes: true]],
                do: same(@device, [z], &Nx.sum(&1, opts), 1.0e-6)

            # products left to right, as the binary backend's (bit for bit on the CPU backend)
            for opts <- [[], [axes: [1]], [axes: [0, 2], keep_axes: true], [axes: [2, 0]]],
                do: same(@device, [z], &Nx.product(&1, opts), tolerance(@device, type))

            # special values in turn, and a long product (pairs in a tree: within a few roundings)
            same(@device, [specials(type)], &Nx.product/1)
            long = Nx.divide(random({2, 1500}, type, 9), 2) |> Nx.exp()

            same(
              @device,
              [long],
              &Nx.product(&1, axes: [1]),
              1.0e-12 + if(type == {:c, 64}, do: 1.0e-5, else: 0)
            )

            # a complex determinant and inverse: on Nx 0.8 and later Nx's composition, whose
            # product of the LU diagonal is this product (Nx 0.7's needs complex lu, which falls back)
            if Version.match?(to_string(Application.spec(:nx, :vsn)), ">= 0.8.0") do
              m = Nx.add(random({2, 4, 4}, type, 10), Nx.multiply(Nx.eye(4), 6))
              same(@device, [m], &Nx.LinAlg.determinant/1, tolerance(@device, type))
              same(@device, [m], &Nx.LinAlg.invert/1, tolerance(@device, type))
            end

            same(@device, [z, w], &Nx.dot/2, 1.0e-5)
            same(@device, [z, Nx.real(w)], &Nx.dot/2, 1.0e-5)
            same(@device, [Nx.real(w), z], &Nx.dot(&1, [0], &2, [2]), 1.0e-5)
            same(@device, [z, z], &Nx.dot(&1, [2], [0], &2, [2], [0]), 1.0e-5)

            # convolutions (Nx conjugates nothing), with feature and batch groups, strides,
            # dilations, negative padding, real operands
            x = random({2, 4, 6, 5}, type, 11)
            conv_tolerance = if type == {:c, 64}, do: 1.0e-5, else: 1.0e-11
            conv = fn opts -> &Nx.conv(&1, &2, opts) end

            same(
              @device,
              [x, random({6, 2, 3, 2}, type, 12)],
              conv.(padding: :same, feature_group_size: 2),
              conv_tolerance
            )

            # both complex at stride 1 (on the CPU backend, shifted complex products: cgemm/zgemm)
            same(@device, [x, random({3, 4, 3, 2}, type, 15)], conv.(padding: :same), conv_tolerance)

            same(
              @device,
              [x, random({3, 4, 2, 3}, type, 16)],
              conv.(padding: [{1, -1}, {2, 0}]),
              conv_tolerance
            )

            k = random({3, 4, 2, 2}, type, 13)
            same(@device, [x, Nx.real(k)], conv.(strides: [2, 1], kernel_dilation: [1, 2]), conv_tolerance)

            same(
              @device,
              [Nx.real(x), k],
              conv.(input_dilation: [2, 1], padding: [{1, 0}, {-1, 2}]),
              conv_tolerance
            )

            same(@device, [x, random({4, 4, 2, 2}, type, 14)], conv.(batch_group_size: 2), conv_tolerance)

            target = random({6, 4}, type, 6)
            indices = Nx.tensor([[1, 2], [5, 0], [3, 3]])
            updates = random({3}, type, 7)
            same(@device, [target, indices, updates], &Nx.indexed_add/3)
            same(@device, [target, indices, updates], &Nx.indexed_put/3)
            # a repeated index: the binary backend sums the updates first, the kernel adds them in
            # turn (one rounding apart)
            repeated = Nx.tensor([[1, 2], [5, 0], [1, 2]])
            same(@device, [target, repeated, updates], &Nx.indexed_add/3, 1.0e-15)
            same(@device, [target, repeated, updates], &Nx.indexed_put/3)
            rows = random({3, 4}, type, 8)
            same(@device, [target, Nx.tensor([[4], [0], [4]]), rows], &Nx.indexed_add(&1, &2, &3, axes: [0]))

            # moved, windowed and scanned as the {..., 2} reals; truth as "a part is not zero"
            zero_in = Nx.put_slice(z, [0, 0, 0], Nx.broadcast(Nx.tensor(0, type: type), {2, 1, 5}))
            same(@device, [z], &Nx.concatenate([&1, Nx.slice_along_axis(&1, 1, 2, axis: 1)], axis: 1))
            same(@device, [z], &Nx.stack([&1, &1], axis: 2))

            same(
              @device,
              [z],
              &Nx.pad(&1, Nx.tensor(Complex.new(1, -1), type: type), [{1, -1, 1}, {0, 0, 0}, {2, 0, 0}])
            )

            same(@device, [z], &Nx.window_sum(&1, {2, 1, 3}, strides: [1, 2, 1], padding: :same), 1.0e-6)
            same(@device, [z], &Nx.cumulative_sum(&1, axis: 1, reverse: true), 1.0e-6)

            # window products as the binary backend's: padding with 1 + 0i, each window's
            # elements in order (bit for bit on the CPU backend), with strides, dilations,
            # negative padding, special values and a window of 1200
            for {window, opts} <- [
                  {{2, 1, 3}, [strides: [1, 2, 1], padding: :same]},
                  {{2, 3, 2}, [padding: [{-1, 1}, {0, 2}, {1, 1}], window_dilations: [1, 2, 3]]},
                  {{4, 6, 5}, []},
                  {{1, 6, 1}, [strides: [1, 1, 2]]}
                ],
                do: same(@device, [z], &Nx.window_product(&1, window, opts), tolerance(@device, type))

            same(@device, [specials(type)], &Nx.window_product(&1, {3}, padding: [{1, 1}]))
            # (on a GPU or PoCL the f64 steps are the device's: c64's last bit may turn)
            long_tolerance = if(type == {:c, 64}, do: 1.0e-6, else: 1.0e-12)
            long_tolerance = if @device == :cpu, do: 0, else: long_tolerance
            same(@device, [long], &Nx.window_product(&1, {1, 1200}, strides: [1, 300]), long_tolerance)

            # a complex cumulative product: Nx's composition, a pairwise scan of products, on the
            # device (Nx 0.8 and later run it themselves; Nx 0.7 calls the backend, whose port of
            # it gives the same products in the same order), at either parity of length, and
            # along a line of 20,001 elements of magnitude near 1 (15 levels of the scan)
            for axis <- [0, 1, 2],
                do:
                  same(
                    @device,
                    [z],
                    &Nx.cumulative_product(&1, axis: axis, reverse: true),
                    tolerance(@device, type)
                  )

            same(
              @device,
              [Nx.slice_along_axis(z, 0, 3, axis: 1)],
              &Nx.cumulative_product(&1, axis: 1),
              tolerance(@device, type)
            )

            circle = Nx.multiply(random({2, 20_001}, type, 11), 0.01) |> Nx.exp()
            same(@device, [circle], &Nx.cumulative_product(&1, axis: 1), long_tolerance)

            # (the binary backend's all/any compare a Complex struct with 0, never equal, so they
            # take 0 + 0i for true; its logical_* and Accel take it for false)
            nonzero = Nx.logical_or(Nx.not_equal(Nx.real(zero_in), 0), Nx.not_equal(Nx.imag(zero_in), 0))

            for op <- [:all, :any], axes <- [[], [axes: [1]]] do
              {_, actual} = both(@device, [zero_in], &apply(Nx, op, [&1, axes]))
              assert actual == apply(Nx, op, [nonzero, axes])
            end

            for op <- [:logical_and, :logical_or, :logical_xor],
                do: same(@device, [zero_in, Nx.reverse(zero_in)], &apply(Nx, op, [&1, &2]))

            # logical_not: both parts zero (on Nx 0.7 the binary backend compares a Complex struct
            # with 0, never equal, as its all/any do; and has no callback: a fallback raised)
            for t <- [zero_in, specials(type)] do
              {_, actual} = both(@device, [t], &Nx.logical_not/1)
              assert actual == Nx.logical_and(Nx.equal(Nx.real(t), 0), Nx.equal(Nx.imag(t), 0))
            end

            # an index outside: Nx's message, naming the complex tensor's shape
            assert_raise ArgumentError, "index 6 is out of bounds for axis 0 in shape {6, 4}", fn ->
              Nx.indexed_add(
                on(@device, target),
                on(@device, Nx.tensor([[6, 0]])),
                on(@device, updates[0..0])
              )
            end
          end

          Accel.Test.Fallbacks.none!()
        end

        # (at the scale users run: sums over 10^7 elements, not a power of two; 13 s on PoCL here,
        # longer beside other suites)
        @tag timeout: 300_000
        test "10^7 elements against closed forms" do
          n = 10_000_000
          backend = {Accel.Nx.Backend, device: @device, fallback: :raise}
          # (the step an f64 tensor: a bare number would be an f32 constant)
          step = Nx.tensor(2 * :math.pi() / n, type: :f64)
          theta = Nx.iota({n}, type: :f64, backend: backend) |> Nx.multiply(step)
          # e^(i theta): on the unit circle, its phase theta (within one turn), its powers rotate
          unit = Nx.exp(Nx.complex(Nx.multiply(theta, 0), theta))
          assert_in_delta Nx.to_number(Nx.reduce_max(Nx.abs(Nx.subtract(Nx.abs(unit), 1)))), 0, 1.0e-12
          # the n-th roots of unity sum to zero (within the f64 rounding of n terms)
          assert Complex.abs(Nx.to_number(Nx.sum(unit))) < n * 1.0e-13
          squared = Nx.multiply(unit, unit)
          doubled = Nx.exp(Nx.complex(Nx.multiply(theta, 0), Nx.multiply(theta, 2)))
          assert Nx.to_number(Nx.reduce_max(Nx.abs(Nx.subtract(squared, doubled)))) < 1.0e-12
          # z conj(z) = |z|^2, real; z / z = 1
          z = Nx.complex(Nx.cos(theta) |> Nx.multiply(3), Nx.sin(Nx.multiply(theta, 7))) |> Nx.as_type(:c64)
          norm = Nx.multiply(z, Nx.conjugate(z))
          assert Nx.to_number(Nx.reduce_max(Nx.abs(Nx.imag(norm)))) == 0

          assert Nx.to_number(Nx.reduce_max(Nx.abs(Nx.subtract(Nx.real(norm), Nx.pow(Nx.abs(z), 2))))) <
                   1.0e-5

          assert Nx.to_number(Nx.reduce_max(Nx.abs(Nx.subtract(Nx.divide(z, z), 1)))) < 1.0e-6
          Accel.Test.Fallbacks.none!()
        end

        # each inverse function a right inverse of its function (principal branches: f(g(z)) = z
        # everywhere), over 10^6 points of a spiral from radius 0.05 to 3 (inside, across and
        # outside the unit circle, where the formulas' branch points lie)
        test "inverse functions and cube roots undo theirs at 10^6 elements" do
          n = 1_000_000
          backend = {Accel.Nx.Backend, device: @device, fallback: :raise}
          t = Nx.iota({n}, type: :f64, backend: backend) |> Nx.divide(n)
          # radius from 0.05 to 3, angle turning 37 times
          z = Nx.complex(Nx.multiply(t, 2.95) |> Nx.add(0.05), Nx.multiply(t, 37 * 2 * :math.pi()))
          i = Nx.tensor(Complex.new(0.0, 1.0), type: :c128)
          z = Nx.multiply(Nx.real(z), Nx.exp(Nx.multiply(Nx.imag(z), i)))
          assert z.type == {:c, 128}

          for {f, g} <- [sin: :asin, cos: :acos, tan: :atan, sinh: :asinh, cosh: :acosh, tanh: :atanh] do
            back = apply(Nx, f, [apply(Nx, g, [z])])
            worst = Nx.to_number(Nx.reduce_max(Nx.divide(Nx.abs(Nx.subtract(back, z)), Nx.abs(z))))
            assert worst < 1.0e-12, "#{f}(#{g}(z)) is #{worst} off z"
          end

          cube = Nx.cbrt(z) |> then(&Nx.multiply(&1, Nx.multiply(&1, &1)))
          assert Nx.to_number(Nx.reduce_max(Nx.divide(Nx.abs(Nx.subtract(cube, z)), Nx.abs(z)))) < 1.0e-13
          Accel.Test.Fallbacks.none!()
        end

        test "programs: a convolution through the FFT, complex Cholesky and QR" do
          backend = {Accel.Nx.Backend, device: @device, fallback: :raise}
          # circular convolution of two signals: ifft(fft(a) fft(b)) against the direct sum
          a = Nx.Random.uniform(Nx.Random.key(9), shape: {64}, type: :f64) |> elem(0)
          b = Nx.Random.uniform(Nx.Random.key(10), shape: {64}, type: :f64) |> elem(0)

          direct =
            for k <- 0..63 do
              Enum.sum(for j <- 0..63, do: Nx.to_number(a[j]) * Nx.to_number(b[rem(k - j + 64, 64)]))
            end

          fast =
            Nx.with_default_backend(backend, fn ->
              Nx.multiply(Nx.fft(on(@device, a)), Nx.fft(on(@device, b))) |> Nx.ifft() |> Nx.real()
            end)

          for {x, y} <- Enum.zip(Nx.to_flat_list(fast), direct), do: assert_in_delta(x, y, 1.0e-9)

          # a Hermitian positive definite matrix
          m = Nx.tensor([[Complex.new(4, 0), Complex.new(1, 1)], [Complex.new(1, -1), Complex.new(3, 0)]])
          same(@device, [m], &Nx.LinAlg.cholesky/1)
          {q, r} = Nx.with_default_backend(backend, fn -> Nx.LinAlg.qr(on(@device, m)) end)
          {eq, er} = Nx.LinAlg.qr(host(m))
          assert Nx.to_number(Nx.reduce_max(Nx.abs(Nx.subtract(host(q), eq)))) < 1.0e-6
          assert Nx.to_number(Nx.reduce_max(Nx.abs(Nx.subtract(host(r), er)))) < 1.0e-6
          Accel.Test.Fallbacks.none!()
        end
      end
    end
  end
end
