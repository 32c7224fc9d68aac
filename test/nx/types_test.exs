if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.TypesTest do
    # Every Nx type computes on the device: the integer types of every width (with Nx's wrapping;
    # on Nx 0.9+ the sub-byte ones too), f16, bf16 and Nx 0.9+'s f8 and f8_e4m3fn (stored as
    # themselves, computed in f32, rounded as Nx rounds), complex types
    # made on the device (their arithmetic: complex_test.exs); each result equal to
    # Nx.BinaryBackend's, and no operation here falls back to it (counted with the fallback
    # telemetry event). On the CPU backend, OpenCL and CUDA (each where it is usable).
    use ExUnit.Case, async: true
    import Accel.Test.Fallbacks, only: [count: 1]
    import Bitwise

    # Nx 0.9+'s sub-byte integers and 8-bit floats (none on Nx 0.7, whose types they are not)
    newer? =
      try do
        Nx.Type.normalize!({:f8_e4m3fn, 8}) && true
      rescue
        _ -> false
      end

    @narrow if newer?, do: [{:s, 2}, {:s, 4}, {:u, 2}, {:u, 4}], else: []
    @eights if newer?, do: [{:f, 8}, {:f8_e4m3fn, 8}], else: []
    @ints [{:s, 8}, {:s, 16}, {:u, 16}, {:u, 32}, {:u, 64}, {:s, 32}, {:u, 8}, {:s, 64}] ++ @narrow
    @halves [{:f, 16}, {:bf, 16}]

    setup :count

    defp on(device, t), do: Nx.backend_copy(t, {Accel.Nx.Backend, device: device})
    defp host(t), do: Nx.backend_copy(t, Nx.BinaryBackend)

    # `fun` on the binary backend and on the device: the same type, shape and bytes (or, for
    # transcendental functions of f16 and bf16, within one unit of the type's last place).
    defp same(device, inputs, fun, tolerance \\ :exact) do
      expected = apply(fun, Enum.map(inputs, &host/1))
      actual = apply(fun, Enum.map(inputs, &on(device, &1)))
      assert %Accel.Nx.Backend{} = actual.data
      actual = host(actual)
      assert {actual.type, actual.shape} == {expected.type, expected.shape}

      case tolerance do
        :exact ->
          # as values: a NaN's sign and payload are not Nx's (every NaN reads as :nan)
          # (the values listed: Nx 0.13 cannot inspect every sub-byte tensor)
          assert Nx.to_flat_list(actual) == Nx.to_flat_list(expected),
                 "#{inspect(actual.type)} #{inspect(Nx.to_flat_list(actual))} differs from " <>
                   "#{inspect(Nx.to_flat_list(expected))}"

        ulp ->
          diff = Nx.abs(Nx.subtract(Nx.as_type(actual, :f64), Nx.as_type(expected, :f64)))
          bound = Nx.multiply(Nx.abs(Nx.as_type(expected, :f64)), ulp) |> Nx.add(1.0e-7)
          ok = Nx.logical_or(Nx.equal(actual, expected), Nx.less_equal(diff, bound))

          assert Nx.to_number(Nx.all(ok)) == 1,
                 "#{inspect(actual)} is not within #{ulp} of #{inspect(expected)}"
      end
    end

    # Operations of a float type's vectors `a` and `b` against the binary backend's: arithmetic,
    # comparisons and rounding exactly, `sqrt` exactly or within opts[:sqrt], opts[:functions] of
    # a / opts[:scale] and the rows' sums and dot within opts[:ulp], the rows' maxima exactly.
    defp float_operations(device, a, b, opts) do
      for fun <- [:add, :subtract, :multiply, :divide, :min, :max, :equal, :less, :greater] do
        same(device, [a, b], &apply(Nx, fun, [&1, &2]))
      end

      for fun <- [:negate, :abs, :sign, :floor, :ceil, :round, :is_nan, :is_infinity] do
        same(device, [a], &apply(Nx, fun, [&1]))
      end

      same(device, [a], &Nx.sqrt(Nx.abs(&1)), Keyword.get(opts, :sqrt, :exact))

      for fun <- opts[:functions] do
        same(device, [Nx.divide(a, opts[:scale])], &apply(Nx, fun, [&1]), opts[:ulp])
      end

      rows = Nx.reshape(Nx.concatenate([a, b]), {2, Nx.size(a)})
      same(device, [rows], &Nx.reduce_max(&1, axes: [1]))
      same(device, [rows], &Nx.sum(&1, axes: [1]), opts[:ulp])
      same(device, [a, b], &Nx.dot(&1, &2), opts[:ulp])
    end

    # The type's extremes and values around them, so that every operation wraps somewhere.
    defp edge_values({:u, bits}),
      do: [0, 1, 2, 3, 7, (1 <<< bits) - 1, (1 <<< bits) - 2, 1 <<< (bits - 1), 100]

    defp edge_values({:s, bits}),
      do: [0, 1, -1, 3, -7, (1 <<< (bits - 1)) - 1, -(1 <<< (bits - 1)), -(1 <<< (bits - 1)) + 1, 100]

    for device <- Accel.Test.Devices.nx() do
      describe "on #{device}" do
        @describetag Accel.Test.Devices.tags(device)
        @device device

        test "integers of every width wrap and divide as Nx's, with no fallback" do
          for type <- @ints do
            values = edge_values(type)
            a = Nx.tensor(values, type: type)
            b = Nx.tensor(Enum.reverse(values), type: type)
            # (a sub-byte type wraps some values to 0)
            nonzero = Nx.tensor(Enum.map(Nx.to_flat_list(a), &if(&1 == 0, do: 1, else: &1)), type: type)

            for fun <-
                  [:add, :subtract, :multiply, :min, :max, :bitwise_and, :bitwise_or, :bitwise_xor] ++
                    [:equal, :not_equal, :less, :greater_equal, :logical_and, :logical_xor] do
              same(@device, [a, b], &apply(Nx, fun, [&1, &2]))
            end

            for fun <- [:quotient, :remainder, :divide],
                do: same(@device, [a, nonzero], &apply(Nx, fun, [&1, &2]))

            for fun <- [:negate, :abs, :sign, :bitwise_not, :logical_not, :is_nan] do
              same(@device, [a], &apply(Nx, fun, [&1]))
            end

            # amounts the type holds, below 9 (the wrapped values')
            limit = min(9, 1 <<< (elem(type, 1) - 1))
            shifts = Nx.tensor(Enum.map(Nx.to_flat_list(a), &rem(Kernel.abs(&1), limit)), type: type)
            same(@device, [a, shifts], &Nx.left_shift/2)
            same(@device, [a, shifts], &Nx.right_shift/2)
            same(@device, [a, Nx.tensor(min(3, limit - 1), type: type)], &Nx.pow/2)

            m = Nx.reshape(Nx.tensor(values ++ values ++ Enum.take(values, 3), type: type), {3, 7})

            for fun <- [:sum, :reduce_max, :reduce_min, :all, :any] do
              same(@device, [m], &apply(Nx, fun, [&1, [axes: [1]]]))
              same(@device, [m], &apply(Nx, fun, [&1]))
            end

            for fun <- [:argmax, :argmin], tie <- [:low, :high] do
              same(@device, [m], &apply(Nx, fun, [&1, [axis: 1, tie_break: tie]]))
              same(@device, [m], &apply(Nx, fun, [&1, [tie_break: tie]]))
            end

            same(@device, [a, b, a], &Nx.select(Nx.greater(&1, &2), &2, &3))
            same(@device, [a], &Nx.clip(&1, 1, 5))
          end

          Accel.Test.Fallbacks.none!()
        end

        test "f16 and bf16 round as Nx rounds each operation's result, with no fallback" do
          for type <- @halves do
            a = Nx.tensor([0.1, -2.5, 3.0e3, 1.0e-3, 7.25, 0.0, -1.0e-5, 60_000.0, 1.5], type: type)
            b = Nx.tensor([3.0, 0.3, -7.1, 1.0e4, 2.0, -0.0, 9.0e-3, 2.0, 1.0], type: type)

            # transcendental functions compute in f32, then round: within one unit of the last place
            ulp = if type == {:f, 16}, do: 1.0e-3, else: 8.0e-3

            float_operations(@device, a, b,
              functions: [:exp, :tanh, :sin, :sigmoid, :erf],
              scale: 1000,
              ulp: ulp
            )
          end

          Accel.Test.Fallbacks.none!()
        end

        if @eights != [] do
          # (f8's subnormals, below 2^-14, are left out: Nx.Floating.load_f8 reads them as normal
          # numbers, 2^-15 * (1 + m / 4), where Accel reads the IEEE value, m / 4 * 2^-14)
          test "f8 and f8_e4m3fn round as Nx rounds each operation's result, with no fallback" do
            for type <- @eights do
              a = Nx.tensor([0.125, -2.5, 3.0, 1.0e-3, 7.0, 0.0, -0.75, 160.0, 1.5, 448.0], type: type)
              b = Nx.tensor([3.0, 0.375, -7.0, 12.0, 2.0, -0.0, 0.5, 2.0, 1.0, 3.0], type: type)

              # (an ulp of E5M2 is up to a quarter of the value: sqrt too may round the other way)
              float_operations(@device, a, b,
                functions: [:exp, :tanh, :sin, :sigmoid],
                scale: 100,
                ulp: 0.26,
                sqrt: 0.26
              )
            end

            Accel.Test.Fallbacks.none!()
          end

          test "sub-byte tensors travel as Nx's bitstrings, at a million elements" do
            for type <- @narrow do
              # an odd count: the bitstring ends inside a byte
              n = 1_000_001
              bits = elem(type, 1)

              t =
                Nx.iota({n}, type: :s64) |> Nx.multiply(7919) |> Nx.remainder(1 <<< bits) |> Nx.as_type(type)

              on_device = on(@device, t)
              assert Nx.to_binary(on_device) == Nx.to_binary(t)
              assert bit_size(Nx.to_binary(on_device)) == n * bits

              assert Nx.to_binary(Nx.slice(on_device, [999_990], [11])) ==
                       Nx.to_binary(Nx.slice(t, [999_990], [11]))

              same(@device, [t], &Nx.sum(&1))
              same(@device, [t], &Nx.add(&1, &1))
            end

            # bitcast between the signed and unsigned type of one width: the same bits
            s4 = Nx.tensor([-8, -1, 0, 7], type: :s4)
            same(@device, [s4], &Nx.bitcast(&1, :u4))
            same(@device, [Nx.tensor([3, 2, 1], type: :u2)], &Nx.bitcast(&1, :s2))
            same(@device, [Nx.tensor([1.5, -448.0], type: :f8_e4m3fn)], &Nx.bitcast(&1, :u8))
            same(@device, [Nx.tensor([1.5, -2.0], type: :f8)], &Nx.bitcast(&1, :s8))
            Accel.Test.Fallbacks.none!()
          end
        end

        test "every real type converts to every other as Nx converts, on the device" do
          types = @ints ++ @halves ++ @eights ++ [{:f, 32}, {:f, 64}]
          ints = Nx.tensor([0, 1, -1, 100, -128, 127, 255, 65_504, -70_000], type: :s64)
          floats = Nx.tensor([0.0, -0.5, 1.75, 100.25, 255.5, -128.9, 65_504.0, 1.0e-3, 3.0e4], type: :f64)

          for from <- types, to <- types do
            # Nx.BinaryBackend wraps a float beyond an integer type's range where Accel saturates
            # (Accel.Nx.Backend's documented difference): the values here stay inside every range
            # they are converted to, or are integers (which both wrap).
            source = if elem(from, 0) in [:s, :u], do: Nx.as_type(ints, from), else: Nx.as_type(floats, from)

            source =
              if Accel.Nx.Storage.float?(from) and elem(to, 0) in [:s, :u],
                do: Nx.abs(Nx.divide(source, if(elem(to, 1) < 8, do: 100_000, else: 1000))),
                else: source

            same(@device, [source], &Nx.as_type(&1, to))
          end

          Accel.Test.Fallbacks.none!()
        end

        test "put_slice, pad and concatenate of operands of two types, each converted first" do
          s8 = Nx.tensor([1, -2], type: :s8)
          s16 = Nx.tensor([300, 4, 5], type: :s16)
          f16 = Nx.tensor([1.5, 2.5], type: :f16)
          same(@device, [s16, s8], &Nx.put_slice(&1, [1], &2))
          same(@device, [s8, s16], &Nx.concatenate([&1, &2]))
          same(@device, [s16], &Nx.pad(&1, Nx.tensor(9, type: :s8), [{1, 1, 0}]))
          same(@device, [f16, s8], &Nx.concatenate([&1, Nx.as_type(&2, :f32)]))
          Accel.Test.Fallbacks.none!()
        end

        test "creation honours the device for every type; bitcast shares the bytes" do
          {backend, _} = device = {@device, 0}
          place = {Accel.Nx.Backend, device: backend}

          made = fn type ->
            [Nx.iota({2, 3}, type: type, backend: place), Nx.eye(3, type: type, backend: place)] ++
              [Nx.broadcast(Nx.tensor(1, type: type, backend: place), {4})]
          end

          for type <- @ints ++ @halves ++ @eights ++ [{:f, 32}, {:f, 64}, {:c, 64}, {:c, 128}],
              t <- made.(type) do
            assert t.data.tensor.device == device, "#{inspect(type)} made on #{inspect(t.data.tensor.device)}"
          end

          bits = Nx.bitcast(Nx.tensor([1.0, -2.0], backend: place), :u32)
          assert bits.data.tensor.device == device
          assert Nx.to_flat_list(bits) == [0x3F800000, 0xC0000000]
          # complex iota and eye: the real ones, made complex on the device
          assert Nx.to_flat_list(Nx.eye(2, type: :c64, backend: place)) ==
                   Enum.map([1, 0, 0, 1], &Complex.new/1)

          assert Nx.to_flat_list(Nx.iota({3}, type: :c128, backend: place)) == Enum.map(0..2, &Complex.new/1)
          Accel.Test.Fallbacks.none!()
        end

        test "operands of another backend are uploaded to the Accel operand's device" do
          accel = Nx.iota({3}, type: :u32, backend: {Accel.Nx.Backend, device: @device})
          binary = Nx.tensor([5, 6, 7], type: :u32, backend: Nx.BinaryBackend)

          for result <- [
                Nx.add(accel, binary),
                Nx.add(binary, accel),
                Nx.concatenate([binary, accel]),
                Nx.stack([accel, binary])
              ] do
            assert %Accel.Nx.Backend{tensor: %{device: {@device, 0}}} = result.data
          end

          assert Nx.to_flat_list(Nx.add(binary, accel)) == [5, 7, 9]
          key = Nx.Random.key(42) |> Nx.backend_transfer({Accel.Nx.Backend, device: @device})
          {u, _} = Nx.Random.uniform(key, shape: {3})

          assert Nx.to_flat_list(u) ==
                   Nx.to_flat_list(elem(Nx.Random.uniform(Nx.Random.key(42), shape: {3}), 0))
        end
      end
    end
  end
end
