if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.BackendTest do
    # Accel.Nx.Backend against Nx.BinaryBackend, the reference: the same Nx call on both, equal for
    # integers, within f32/f64 tolerance for floats; on the CPU backend, OpenCL and CUDA
    # (Accel.Test.Devices.nx/0: each where it is usable).
    use ExUnit.Case, async: true
    import Bitwise

    defp on(device, t), do: Nx.backend_copy(t, {Accel.Nx.Backend, device: device})
    defp host(t), do: Nx.backend_copy(t, Nx.BinaryBackend)

    # Runs `fun` on the inputs on the binary backend and on `device`, and compares.
    defp same(device, inputs, fun) do
      expected = apply(fun, Enum.map(inputs, &host/1))
      actual = apply(fun, Enum.map(inputs, &on(device, &1)))
      assert %Accel.Nx.Backend{} = actual.data
      assert_close(host(actual), expected)
      actual
    end

    defp assert_close(actual, expected) do
      assert actual.shape == expected.shape
      assert actual.type == expected.type

      case expected.type do
        {:f, bits} ->
          tol = if bits == 32, do: 2.0e-6, else: 1.0e-13
          finite = Nx.logical_not(Nx.is_nan(expected))
          assert Nx.to_number(Nx.all(Nx.equal(Nx.is_nan(actual), Nx.is_nan(expected)))) == 1

          diff = Nx.select(finite, Nx.abs(Nx.subtract(actual, expected)), 0)
          bound = Nx.select(finite, Nx.multiply(Nx.add(Nx.abs(expected), 1.0e-30), tol), 1)
          inf_ok = Nx.select(Nx.is_infinity(expected), Nx.equal(actual, expected), 1)
          ok = Nx.logical_and(Nx.logical_or(Nx.less_equal(diff, bound), Nx.is_infinity(expected)), inf_ok)
          assert Nx.to_number(Nx.all(ok)) == 1, "#{inspect(actual)} is not close to #{inspect(expected)}"

        _ ->
          assert Nx.to_binary(actual) == Nx.to_binary(expected)
      end
    end

    # Which of the elementwise and upload NIFs `fun` called, in order.
    @traced [{Accel.NIF, :tensor_binary, 6}, {Accel.NIF, :tensor_compare, 6}, {Accel.NIF, :tensor_upload, 5}]
    defp nif_calls(fun), do: for({name, _args} <- Accel.Test.NifCalls.traced(@traced, fun), do: name)

    for device <- Accel.Test.Devices.nx() do
      describe "on #{device}" do
        @describetag Accel.Test.Devices.tags(device)
        @device device

        test "every unary function of the registry, f32 and f64, as the binary backend computes it" do
          funs =
            [:exp, :expm1, :log, :log1p, :sigmoid, :cos, :sin, :tan, :cosh, :sinh, :tanh] ++
              [:acos, :asin, :atan, :acosh, :asinh, :atanh, :sqrt, :rsqrt, :cbrt, :erf, :erfc] ++
              [:abs, :negate, :sign, :floor, :ceil, :round, :is_nan, :is_infinity, :logical_not]

          # Inside each function's domain: the binary backend raises outside it.
          domain =
            %{acos: {-1, 1}, asin: {-1, 1}, atanh: {-1, 1}, acosh: {1, 50}, log: {0, 50}}
            |> Map.merge(%{sqrt: {0, 50}, rsqrt: {0, 50}, log1p: {-1, 50}})

          for type <- [:f32, :f64], fun <- funs do
            {lo, hi} = Map.get(domain, fun, {-20, 20})
            x = Nx.iota({257}, type: type) |> Nx.add(1) |> Nx.multiply((hi - lo) / 258) |> Nx.add(lo)
            same(@device, [x], &apply(Nx, fun, [&1]))
          end
        end

        test "integers wrap in their type, promote by Nx's rules and keep Nx's division" do
          s32 = Nx.tensor([2_147_483_647, -2_147_483_648, 7, -7], type: :s32)
          u8 = Nx.tensor([250, 3, 0, 255], type: :u8)
          s64 = Nx.tensor([9_223_372_036_854_775_807, -5, 3, 0], type: :s64)

          for {a, b} <- [{s32, s32}, {u8, u8}, {s64, s64}, {s32, u8}, {u8, s64}],
              fun <- [:add, :subtract, :multiply, :min, :max, :bitwise_and, :bitwise_xor, :equal, :less] do
            same(@device, [a, b], &apply(Nx, fun, [&1, &2]))
          end

          # divide is a float division for integers; quotient and remainder truncate.
          same(@device, [s32, Nx.tensor([3, 3, -2, 2], type: :s32)], &Nx.divide/2)
          same(@device, [s32, Nx.tensor([3, 3, -2, 2], type: :s32)], &Nx.quotient/2)
          same(@device, [s32, Nx.tensor([3, 3, -2, 2], type: :s32)], &Nx.remainder/2)
          same(@device, [u8], &Nx.negate/1)
          same(@device, [s32], &Nx.abs/1)
          same(@device, [s32, Nx.tensor([1, 31, 32, 3], type: :s32)], &Nx.left_shift/2)
          same(@device, [s64, Nx.tensor(2.5, type: :f32)], &Nx.multiply/2)
          same(@device, [u8, Nx.tensor(1.5, type: :f64)], &Nx.add/2)
        end

        test "floats: NaN and infinities propagate" do
          x = Nx.tensor([1.0, :nan, :infinity, :neg_infinity, 0.0], type: :f32)
          y = Nx.tensor([0.5, 1.0, :infinity, 2.0, -3.0], type: :f32)

          for fun <- [:add, :subtract, :multiply, :divide, :min, :max, :atan2, :equal, :greater] do
            same(@device, [x, y], &apply(Nx, fun, [&1, &2]))
          end

          same(@device, [x], &Nx.is_nan/1)
          same(@device, [x], &Nx.is_infinity/1)
        end

        # OpenCL C allows f32 division and sqrt 2.5 ulps unless a program asks for them correctly
        # rounded (NVIDIA's driver took that licence: 5 / 3 came out an ulp high); Nx rounds once.
        test "f32 division and sqrt are correctly rounded, bit for bit the binary backend's" do
          n = 100_003
          a = Nx.iota({n}, type: :f32) |> Nx.multiply(0.731) |> Nx.add(1.0)
          b = Nx.iota({n}, type: :f32) |> Nx.remainder(997) |> Nx.add(3.0)
          small = Nx.tensor([5.0, 1.0, 2.0, 7.0, 10.0], type: :f32)
          three = Nx.tensor([3.0, 3.0, 3.0, 3.0, 3.0], type: :f32)

          for {x, y} <- [{a, b}, {small, three}] do
            want = Nx.divide(x, y)
            assert Nx.to_binary(host(Nx.divide(on(@device, x), on(@device, y)))) == Nx.to_binary(want)
            assert Nx.to_binary(host(Nx.sqrt(on(@device, x)))) == Nx.to_binary(Nx.sqrt(x))
          end
        end

        test "broadcasting, select and clip" do
          a = Nx.iota({2, 1, 3}, type: :f32)
          b = Nx.iota({4, 1}, type: :s32)
          same(@device, [a, b], &Nx.add/2)
          same(@device, [a, b], &Nx.greater_equal/2)
          same(@device, [Nx.remainder(Nx.iota({2, 4, 3}, type: :u8), 2), a, b], &Nx.select/3)
          same(@device, [Nx.iota({3, 4}), Nx.tensor(2), Nx.tensor(7)], &Nx.clip/3)
        end

        test "a scalar of the binary backend, on either side: the bits of the same scalar on the device" do
          # (Nx makes `t * 2.0`'s constant on the default backend: such a scalar in the operation's
          # type goes to the kernel as a number; NaN, the infinities and u64 values past s64's
          # range are uploaded as before; each is compared with the device scalar's result, and
          # with the binary backend's)
          float_ops = [:add, :subtract, :multiply, :divide, :pow, :atan2, :min, :max, :remainder]

          int_ops =
            [:add, :subtract, :multiply, :quotient, :remainder, :min, :max, :bitwise_and, :bitwise_or] ++
              [:bitwise_xor, :left_shift, :right_shift]

          compare = [
            :equal,
            :not_equal,
            :less,
            :greater,
            :less_equal,
            :greater_equal,
            :logical_and,
            :logical_xor
          ]

          cases = [
            {:f32, float_ops, [2.0, -0.0, 0.1, -3.5e38, 1.0e-40, :nan, :infinity, :neg_infinity]},
            {:f64, float_ops, [0.1, -7.25, 1.0e300, 5.0e-324, :nan]},
            {:s8, int_ops, [3, -1, 127, -128]},
            {:u8, int_ops, [1, 7, 255]},
            {:s32, int_ops, [5, -2_147_483_648, 2_147_483_647]},
            {:s64, int_ops, [3, -9_223_372_036_854_775_808, 9_223_372_036_854_775_807]},
            {:u64, int_ops, [6, 9_223_372_036_854_775_807, 18_446_744_073_709_551_615]}
          ]

          for {type, ops, scalars} <- cases, value <- scalars, op <- ops ++ compare do
            v = Nx.iota({9}, type: type) |> Nx.add(1)
            v = if type in [:f32, :f64], do: Nx.multiply(v, 0.75), else: v
            scalar = Nx.tensor(value, type: type)
            # (shifts by up to the width only, division by a non-zero integer: Nx raises otherwise)
            scalar = if op in [:left_shift, :right_shift], do: Nx.tensor(3, type: type), else: scalar

            for args <- [[on(@device, v), scalar], [scalar, on(@device, v)]],
                op not in [:left_shift, :right_shift] or hd(args) != scalar do
              actual = apply(Nx, op, args)
              device = apply(Nx, op, Enum.map(args, &on(@device, &1)))
              assert %Accel.Nx.Backend{} = actual.data
              message = "#{op} #{inspect(Enum.map(args, & &1.data.__struct__))} #{type} #{inspect(value)}"
              assert Nx.to_binary(host(actual)) == Nx.to_binary(host(device)), message
              # (and the binary backend's for ordinary values: its Elixir arithmetic raises on
              # x / 0.0 and on a negative float to a fractional power, and its pow gives 0.0 where
              # Elixir's overflows)
              ordinary = is_float(value) and abs(value) > 1.0e-30 and abs(value) < 1.0e30
              ordinary = ordinary and not (op == :pow and value < 0)

              if is_integer(value) or ordinary,
                do: assert_close(host(actual), apply(Nx, op, Enum.map(args, &host/1)))
            end
          end
        end

        test "a scalar of the binary backend goes to the kernel as a number, not uploaded" do
          v = on(@device, Nx.iota({9}, type: :f32))

          assert [:tensor_binary] == nif_calls(fn -> Nx.multiply(v, 2.0) end)
          assert [:tensor_compare] == nif_calls(fn -> Nx.less(0.5, v) end)
          # (NaN is uploaded: it has no number)
          assert :tensor_upload in nif_calls(fn -> Nx.add(v, Nx.tensor(:nan)) end)

          # at 10^7 elements, the bits of the same scalar on the device
          big = on(@device, Nx.iota({10_000_000}, type: :f32) |> Nx.multiply(1.0e-3))
          scalar = Nx.tensor(0.3, type: :f32)

          for op <- [:multiply, :divide, :subtract] do
            assert Nx.to_binary(apply(Nx, op, [scalar, big])) ==
                     Nx.to_binary(apply(Nx, op, [on(@device, scalar), big]))
          end
        end

        test "reductions over axes, with keep_axes, and arg reductions" do
          t = Nx.iota({3, 4, 5}, type: :f32) |> Nx.multiply(0.5) |> Nx.sin()
          i = Nx.iota({3, 4, 5}, type: :s32) |> Nx.remainder(7)

          for axes <- [nil, [0], [1], [2], [0, 1], [1, 2], [0, 2], [0, 1, 2]], keep <- [false, true] do
            opts = [axes: axes, keep_axes: keep]

            for x <- [t, i], fun <- [:sum, :reduce_max, :reduce_min, :all, :any] do
              same(@device, [x], &apply(Nx, fun, [&1, opts]))
            end
          end

          for x <- [t, i], axis <- [nil, 0, 1, 2], fun <- [:argmax, :argmin] do
            same(@device, [x], &apply(Nx, fun, [&1, [axis: axis]]))
          end

          same(@device, [Nx.tensor([200, 100], type: :u8)], &Nx.sum/1)
        end

        test "dot with contracting and batch axes, f32 and f64" do
          for type <- [:f32, :f64] do
            a = Nx.iota({2, 3, 4}, type: type) |> Nx.divide(7)
            b = Nx.iota({4, 3, 2}, type: type) |> Nx.divide(5)
            same(@device, [a, b], &Nx.dot(&1, [2], &2, [0]))
            same(@device, [a, b], &Nx.dot(&1, [1, 2], &2, [1, 0]))
            same(@device, [a, Nx.transpose(b, axes: [2, 1, 0])], &Nx.dot(&1, [2], [0], &2, [2], [0]))
            same(@device, [Nx.iota({5}, type: type), Nx.iota({5}, type: type)], &Nx.dot/2)
          end

          # products of 2^20 multiply-adds and more are shared among the CPU backend's threads: by
          # rows where A is the larger operand, by columns where B is, by batch entries
          for {ashape, bshape} <- [{{2048, 8}, {8, 64}}, {{64, 8}, {8, 2048}}] do
            a = Nx.iota(ashape, type: :f32) |> Nx.remainder(17) |> Nx.add(1) |> Nx.divide(7)
            b = Nx.iota(bshape, type: :f32) |> Nx.remainder(13) |> Nx.add(1) |> Nx.divide(5)
            same(@device, [a, b], &Nx.dot/2)
          end

          # operands stored transposed (x^T dy, dy w^T): read so by the CPU backend's BLAS, small
          # and split
          for {ashape, bshape, ca, cb} <- [
                {{8, 2048}, {8, 64}, [0], [0]},
                {{64, 8}, {2048, 8}, [1], [1]},
                {{8, 64}, {2048, 8}, [0], [1]},
                {{5, 3}, {4, 5}, [0], [1]}
              ] do
            a = Nx.iota(ashape, type: :f32) |> Nx.remainder(17) |> Nx.add(1) |> Nx.divide(7)
            b = Nx.iota(bshape, type: :f32) |> Nx.remainder(13) |> Nx.add(1) |> Nx.divide(5)
            same(@device, [a, b], &Nx.dot(&1, ca, &2, cb))
          end

          batched = Nx.iota({3, 128, 24}, type: :f64) |> Nx.remainder(11) |> Nx.add(1)

          same(
            @device,
            [Nx.transpose(batched, axes: [0, 2, 1]), batched],
            &Nx.dot(&1, [1], [0], &2, [2], [0])
          )

          same(
            @device,
            [batched, Nx.transpose(batched, axes: [0, 2, 1])],
            &Nx.dot(&1, [2], [0], &2, [1], [0])
          )

          # Integer dot falls back to the binary backend: still Nx's wrapping result.
          same(@device, [Nx.iota({3, 3}, type: :s32), Nx.iota({3, 3}, type: :s32)], &Nx.dot/2)
        end

        test "layout operations on every type of 1, 4 or 8 bytes, and by fallback on the others" do
          for type <- [:f32, :f64, :s64, :s32, :u8, :s8, :u32, :u64, :s16, :f16] do
            t = Nx.iota({2, 3, 4}, type: type)
            same(@device, [t], &Nx.transpose(&1, axes: [2, 0, 1]))
            same(@device, [t], &Nx.reverse(&1, axes: [0, 2]))
            same(@device, [t], &Nx.slice(&1, [1, 0, 1], [1, 3, 3], strides: [1, 2, 2]))
            same(@device, [t], &Nx.reshape(&1, {4, 6}))
            same(@device, [t], &Nx.broadcast(Nx.reshape(&1, {2, 1, 3, 4}), {2, 5, 3, 4}))
            same(@device, [t, Nx.tensor([[[9]]], type: type)], &Nx.put_slice(&1, [1, 2, 3], &2))
            same(@device, [t, Nx.tensor(1, type: type)], &Nx.pad(&1, &2, [{1, 0, 1}, {0, 2, 0}, {1, 1, 2}]))
            same(@device, [t, t], &Nx.concatenate([&1, &2], axis: 1))
            same(@device, [t, t], &Nx.stack([&1, &2], axis: 2))
            same(@device, [t], &Nx.as_type(&1, :f64))
            same(@device, [t], &Nx.bitcast(&1, type))
          end

          same(@device, [Nx.iota({4}, type: :f32)], &Nx.bitcast(&1, :s32))
          same(@device, [Nx.iota({2, 3})], &Nx.pad(&1, 0, [{-1, 1, 0}, {1, -1, 1}]))
        end

        test "creation on the device: constant, iota, eye, from_binary" do
          backend = {Accel.Nx.Backend, device: @device}

          for type <- [:f32, :s64, :u8, :s16] do
            assert_close(
              host(Nx.iota({3, 4}, type: type, axis: 1, backend: backend)),
              Nx.iota({3, 4}, type: type, axis: 1)
            )

            assert_close(host(Nx.eye({2, 3, 3}, type: type, backend: backend)), Nx.eye({2, 3, 3}, type: type))

            assert_close(
              host(Nx.broadcast(Nx.tensor(7, type: type, backend: backend), {2, 2})),
              Nx.broadcast(Nx.tensor(7, type: type), {2, 2})
            )
          end

          bin = <<1.5::float-32-native, -2.0::float-32-native>>
          t = Nx.from_binary(bin, :f32, backend: backend)
          assert %Accel.Nx.Backend{tensor: %Accel.Tensor{device: {@device, _}}} = t.data
          assert Nx.to_binary(t) == bin
        end

        test "operations with no kernel fall back to the binary backend, visibly, and stay on the device" do
          parent = self()
          id = "fallback-#{inspect(make_ref())}"
          :telemetry.attach(id, [:accel, :nx, :fallback], &__MODULE__.forward/4, parent)

          try do
            t =
              same(
                @device,
                [Nx.tensor([1.0, 255.0, 65536.0])],
                &Nx.reduce(&1, 0.0, fn x, acc -> Nx.max(x, acc) end)
              )

            assert %Accel.Nx.Backend{tensor: %Accel.Tensor{device: {@device, _}}} = t.data
            assert_received {:fallback, %{count: 1}, %{operation: :reduce, device: {@device, _}}}

            same(@device, [Nx.iota({4}, type: :f32)], &Nx.cumulative_sum/1)
            same(@device, [Nx.iota({3, 3}, type: :f32)], &Nx.window_sum(&1, {2, 2}))
            same(@device, [Nx.iota({5}), Nx.tensor([4, 0, 2])], &Nx.take/2)
            same(@device, [Nx.iota({4}, type: :f32)], &Nx.product/1)

            # Nx.map/3 left with Nx 0.8.
            if function_exported?(Nx, :map, 3),
              do: same(@device, [Nx.iota({3}, type: :f32)], &apply(Nx, :map, [&1, fn x -> Nx.add(x, 1) end]))

            # Operations that run on the device emit nothing.
            same(@device, [Nx.iota({4}, type: :f32)], &Nx.exp/1)
            refute_received {:fallback, _, %{operation: :exp}}
          after
            :telemetry.detach(id)
          end
        end

        test "fallback: :raise refuses to fall back, naming the operation" do
          t = Nx.tensor([1.0, 2.0], backend: {Accel.Nx.Backend, device: @device})

          Nx.with_default_backend({Accel.Nx.Backend, device: @device, fallback: :raise}, fn ->
            assert_raise ArgumentError,
                         ~r/no #{@device}:0 kernel for reduce on these operands \(f32\{2\}, f32\{\}\), and fallback: :raise/,
                         fn -> Nx.reduce(t, 0.0, fn x, acc -> Nx.max(x, acc) end) end
          end)

          # (the application's configuration: test/nx/fallback_config_test.exs, not async)
          assert_raise ArgumentError, ~r/fallback: must be :host or :raise, got: :never/, fn ->
            Nx.default_backend({Accel.Nx.Backend, fallback: :never})
          end
        end

        test "deallocation frees the device memory at once; later use raises" do
          t = Nx.iota({1 <<< 20}, type: :f32, backend: {Accel.Nx.Backend, device: @device})
          assert :ok = Nx.backend_deallocate(t)
          assert :already_deallocated = Nx.backend_deallocate(t)
          assert_raise ArgumentError, ~r/freed/, fn -> Nx.to_binary(t) end
        end

        test "an integer zero divisor raises ArgumentError" do
          a = on(@device, Nx.tensor([1, 2]))
          assert_raise ArgumentError, ~r/zero/, fn -> Nx.quotient(a, on(@device, Nx.tensor([1, 0]))) end
          # a zero of the binary backend, which reaches the kernel as a number, on either side
          assert_raise ArgumentError, ~r/zero/, fn -> Nx.quotient(a, 0) end
          assert_raise ArgumentError, ~r/zero/, fn -> Nx.remainder(a, Nx.tensor(0)) end
          assert_raise ArgumentError, ~r/zero/, fn -> Nx.quotient(7, on(@device, Nx.tensor([1, 0]))) end
          # and a shift by a negative amount, or a negative integer exponent
          assert_raise ArgumentError, ~r/-1/, fn -> Nx.right_shift(a, -1) end
          assert_raise ArgumentError, ~r/negative exponent/, fn -> Nx.pow(a, -1) end
        end
      end
    end

    # (the handler is global and async tests fall back beside this one: only this process's count)
    def forward(_event, measurements, meta, pid),
      do: if(self() == pid, do: send(pid, {:fallback, measurements, meta}))

    test "from_binary on the CPU backend shares a large binary instead of copying it" do
      bin = :binary.copy(<<1.0::float-32-native>>, 1 <<< 20)
      before = Accel.memory(:cpu)
      t = Nx.from_binary(bin, :f32, backend: {Accel.Nx.Backend, device: :cpu})
      assert Accel.memory(:cpu) - before < byte_size(bin)
      assert Nx.to_binary(t) == bin
    end

    @tag :opencl
    test "transfers between devices and backends keep the data" do
      t = Nx.iota({3, 4}, type: :f32, backend: {Accel.Nx.Backend, device: :cpu})
      cl = Nx.backend_transfer(t, {Accel.Nx.Backend, device: :opencl})
      assert %Accel.Nx.Backend{tensor: %Accel.Tensor{device: {:opencl, _}}} = cl.data
      assert_raise ArgumentError, ~r/freed/, fn -> Nx.to_binary(t) end
      back = Nx.backend_copy(cl, Nx.BinaryBackend)
      assert back == Nx.iota({3, 4}, type: :f32, backend: Nx.BinaryBackend)
      copy = Nx.backend_copy(cl, {Accel.Nx.Backend, device: :opencl})
      Nx.backend_deallocate(cl)
      assert Nx.to_binary(copy) == Nx.to_binary(back)
    end

    @tag :opencl
    test "operands on two devices chosen explicitly raise, naming both" do
      a = Nx.iota({3}, backend: {Accel.Nx.Backend, device: :cpu})
      b = Nx.iota({3}, backend: {Accel.Nx.Backend, device: :opencl})

      assert_raise ArgumentError, ~r/two devices, (cpu:0 and opencl:\d|opencl:\d and cpu:0)/, fn ->
        Nx.add(a, b)
      end
    end

    test "device: :auto keeps small tensors on the host" do
      t = Nx.iota({10}, backend: {Accel.Nx.Backend, device: :auto})
      assert %Accel.Nx.Backend{tensor: %Accel.Tensor{device: {:cpu, 0}}, auto: true} = t.data
    end

    test "bad options and inputs get ArgumentError" do
      assert_raise ArgumentError, ~r/device: must be/, fn ->
        Nx.iota({3}, backend: {Accel.Nx.Backend, device: :tpu})
      end

      assert_raise ArgumentError, ~r/unknown option :devise/, fn ->
        Nx.iota({3}, backend: {Accel.Nx.Backend, devise: :cpu})
      end

      a = Nx.iota({3}, backend: {Accel.Nx.Backend, device: :cpu})

      assert_raise ArgumentError, ~r/cannot broadcast/, fn ->
        Nx.add(a, Nx.iota({4}, backend: {Accel.Nx.Backend, device: :cpu}))
      end

      assert_raise ArgumentError, fn -> Nx.sum(a, axes: [3]) end
      assert_raise ArgumentError, ~r/to_pointer/, fn -> Accel.Nx.Backend.to_pointer(a, []) end
    end
  end
end
