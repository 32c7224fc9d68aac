if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.DeviceOpsTest do
    # The operations models use beyond elementwise work, on the device: indexing (gather, take,
    # take_along_axis, indexed_add, indexed_put), windows (window_* and their scatters, product),
    # scans (cumulative_*), conv, sort and argsort, erf_inv, bit counts. Each against Nx.BinaryBackend on shapes and options that
    # exercise its plan, at the edges (indices out of range, NaN in sorts, windows larger than
    # their input), and at 10^6 elements against closed forms where the binary backend
    # would take minutes; with `fallback: :raise`, so that nothing here leaves the device, and the
    # fallback telemetry event counted to zero. On the CPU backend, OpenCL and CUDA (each where
    # it is usable).
    use ExUnit.Case, async: true
    import Accel.Test.Fallbacks, only: [count: 1]

    setup :count

    defp on(device, t), do: Nx.backend_copy(t, {Accel.Nx.Backend, device: device})
    defp host(t), do: Nx.backend_copy(t, Nx.BinaryBackend)

    # `fun` on the binary backend and, with fallback: :raise, on the device: the same type, shape
    # and values (floats within `tolerance`, relative, where the device's BLAS sums in another order).
    defp same(device, inputs, fun, tolerance \\ 0) do
      expected = Nx.with_default_backend(Nx.BinaryBackend, fn -> apply(fun, Enum.map(inputs, &host/1)) end)

      actual =
        Nx.with_default_backend({Accel.Nx.Backend, device: device, fallback: :raise}, fn ->
          apply(fun, Enum.map(inputs, &on(device, &1)))
        end)

      assert %Accel.Nx.Backend{} = actual.data
      assert_same(host(actual), expected, tolerance)
    end

    defp assert_same(actual, expected, tolerance) do
      assert {actual.type, actual.shape} == {expected.type, expected.shape}

      if tolerance == 0 do
        assert Nx.to_flat_list(actual) == Nx.to_flat_list(expected),
               "#{inspect(actual)} differs from #{inspect(expected)}"
      else
        diff = Nx.subtract(actual, expected) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
        scale = expected |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number() |> max(1.0)
        assert diff <= tolerance * scale, "differs by #{diff} (scale #{scale})"
      end
    end

    # deterministic values with repeats, and for floats a few NaN and infinities when asked
    defp values(shape, type, specials \\ false) do
      n = Tuple.product(shape)
      data = for i <- 0..(n - 1)//1, do: rem(i * 7919 + 13, 97) - 40
      t = Nx.tensor(data, type: :s64, backend: Nx.BinaryBackend) |> Nx.reshape(shape)

      t = if elem(type, 0) == :u, do: Nx.abs(t), else: t
      t = Nx.as_type(t, type)

      if specials and elem(type, 0) == :f and n > 12 do
        i = Nx.iota(shape, backend: Nx.BinaryBackend)
        nan = Nx.Constants.nan(type, backend: Nx.BinaryBackend)
        inf = Nx.Constants.infinity(type, backend: Nx.BinaryBackend)
        t = Nx.select(Nx.equal(Nx.remainder(i, 11), 3), nan, t)
        t = Nx.select(Nx.equal(Nx.remainder(i, 13), 5), inf, t)
        Nx.select(Nx.equal(Nx.remainder(i, 17), 7), Nx.negate(inf), t) |> host()
      else
        t
      end
    end

    defp floats(shape),
      do: Nx.iota(shape, type: :f32, backend: Nx.BinaryBackend) |> Nx.multiply(0.37) |> Nx.sin()

    for device <- Accel.Test.Devices.nx() do
      describe "on #{device}" do
        @describetag Accel.Test.Devices.tags(device)
        @device device

        test "fft and ifft: every length (radix-2, odd, Bluestein's), padded or cut, any axis, as Nx computes them" do
          x = floats({3, 12})

          # powers of two come out bit for bit Nx's (the same butterflies in f64, rounded once);
          # other lengths within rounding (Nx sums odd lengths' DFTs directly)
          for opts <- [[length: 16], [axis: 0, length: 4]] do
            same(@device, [x], &Nx.fft(&1, opts))
            same(@device, [x], &Nx.ifft(&1, opts))
          end

          for opts <- [[], [length: 5], [length: 7], [axis: 0]] do
            same(@device, [x], &Nx.fft(&1, opts), 1.0e-6)
            same(@device, [x], &Nx.ifft(&1, opts), 1.0e-6)
          end

          same(@device, [Nx.as_type(x, :f64)], &Nx.fft(&1, length: 9), 1.0e-14)
          same(@device, [Nx.iota({2, 5})], &Nx.fft/1, 1.0e-6)
          same(@device, [Nx.complex(x, Nx.cos(x))], &Nx.ifft(&1, length: 8))
          # Bluestein's chirp on both sides (Nx's from 1024 on): equal to rounding
          same(@device, [floats({2, 1100})], &Nx.fft/1, 1.0e-6)
          same(@device, [floats({1, 1030})], &Nx.ifft(&1, length: 1031), 1.0e-6)
          # rows enough to be shared among the host's threads: each row's bits as alone
          same(@device, [floats({16, 2048})], &Nx.fft/1)
          same(@device, [floats({24, 1100})], &Nx.ifft/1, 1.0e-6)
          same(@device, [floats({40, 720})], &Nx.fft/1, 1.0e-6)
        end

        test "fft2 and ifft2: Nx's two transforms, both on the device" do
          same(@device, [floats({4, 8, 16})], &Nx.fft2/1)
          same(@device, [floats({4, 8, 16})], &Nx.ifft2/1)
          # Nx.BinaryBackend (0.7.2 and 0.13.1) pads a leading axis of a 3-D tensor wrongly in
          # fft(axis: 0, length: 8): its result is no DFT of the padded columns. Accel's is (a
          # column against the direct sum), and fft2 over that axis is compared with the binary
          # backend's transforms of the axis moved last.
          x = floats({6, 5, 8})
          column = on(@device, x) |> Nx.fft(axis: 0, length: 8) |> host()

          for k <- 0..7 do
            {re, im} =
              Enum.reduce(0..5, {0.0, 0.0}, fn j, {re, im} ->
                v = Nx.to_number(x[[j, 1, 2]])
                a = -2 * :math.pi() * j * k / 8
                {re + v * :math.cos(a), im + v * :math.sin(a)}
              end)

            assert_in_delta Nx.to_number(Nx.real(column[[k, 1, 2]])), re, 1.0e-6
            assert_in_delta Nx.to_number(Nx.imag(column[[k, 1, 2]])), im, 1.0e-6
          end

          actual =
            Nx.with_default_backend({Accel.Nx.Backend, device: @device, fallback: :raise}, fn ->
              Nx.fft2(on(@device, x), axes: [0, 2], lengths: [8, 3])
            end)

          assert %Accel.Nx.Backend{} = actual.data

          expected =
            x
            |> Nx.fft(length: 3)
            |> Nx.transpose(axes: [1, 2, 0])
            |> Nx.fft(length: 8)
            |> Nx.transpose(axes: [2, 0, 1])

          assert_same(host(actual), expected, 1.0e-6)
          same(@device, [Nx.complex(floats({3, 6}), floats({3, 6}))], &Nx.ifft2(&1, lengths: [4, 9]), 1.0e-6)
        end

        test "fft at the sizes signals take: 2^20 and 3 x 10^5 points against closed forms" do
          backend = {Accel.Nx.Backend, device: @device, fallback: :raise}
          n = 1_048_576
          # a cosine of 5 periods: n / 2 at frequencies 5 and n - 5, zero elsewhere
          j = Nx.iota({n}, type: :f64, backend: backend)
          # (the frequency an f64 tensor: a bare number would be an f32 constant, a little off 5)
          frequency = Nx.tensor(2 * :math.pi() * 5 / n, type: :f64)
          spectrum = j |> Nx.multiply(frequency) |> Nx.cos() |> Nx.fft() |> Nx.abs() |> host()
          assert_in_delta Nx.to_number(spectrum[5]), n / 2, 1.0e-6 * n
          assert_in_delta Nx.to_number(spectrum[n - 5]), n / 2, 1.0e-6 * n
          zero = Nx.tensor([0.0], type: :f64)
          rest = spectrum |> Nx.put_slice([5], zero) |> Nx.put_slice([n - 5], zero)
          assert Nx.to_number(Nx.reduce_max(rest)) < 1.0e-6
          # ifft(fft(x)) = x through Bluestein's chirp (300,000 is not a power of two)
          x = Nx.iota({300_000}, type: :f64, backend: backend) |> Nx.multiply(0.001) |> Nx.sin()
          back = x |> Nx.fft() |> Nx.ifft() |> Nx.real() |> host()
          assert Nx.to_number(Nx.reduce_max(Nx.abs(Nx.subtract(back, host(x))))) < 1.0e-9
        end

        test "pad with negative padding: what Nx removes from the interior-padded edges" do
          t = values({4, 5, 3}, {:f, 32})

          configs = [
            [{-1, 1, 0}, {1, -1, 1}, {0, 0, 0}],
            [{-3, -2, 2}, {-1, 0, 0}, {2, -4, 3}],
            # edges that cut into the interior padding, and a whole axis cut away but for padding
            [{-2, -2, 1}, {-7, 2, 2}, {-1, -1, 0}],
            [{0, 0, 0}, {-13, 1, 2}, {1, 1, 0}]
          ]

          for config <- configs, type <- [{:f, 32}, {:s, 64}, {:u, 8}] do
            same(@device, [Nx.as_type(t, type), Nx.tensor(7, type: type)], &Nx.pad(&1, &2, config))
          end
        end

        test "gather, take and take_along_axis read what Nx reads, for every element size" do
          for type <- [{:f, 32}, {:s, 64}, {:u, 8}, {:f, 16}, {:s, 16}, {:c, 64}] do
            t = values({4, 5, 6}, if(type == {:c, 64}, do: {:f, 32}, else: type)) |> Nx.as_type(type)
            same(@device, [t, Nx.tensor([[1, 2], [3, 0], [0, 4]])], &Nx.gather(&1, &2, axes: [0, 2]))
            same(@device, [t, Nx.tensor([[[1, 2, 3]], [[3, 0, 5]]])], &Nx.gather/2)
            same(@device, [t, Nx.tensor([[4, 0], [2, 2]], type: :u8)], &Nx.take(&1, &2, axis: 1))
            same(@device, [t, Nx.tensor(3)], &Nx.take(&1, &2, axis: 2))
            idx = Nx.remainder(Nx.iota({4, 5, 9}), 6)
            same(@device, [t, idx], &Nx.take_along_axis(&1, &2, axis: 2))
          end

          Accel.Test.Fallbacks.none!()
        end

        test "an index outside its axis raises Nx's error, naming the first one" do
          t = on(@device, values({4, 5}, {:f, 32}))
          Nx.default_backend({Accel.Nx.Backend, device: @device, fallback: :raise})

          assert_raise ArgumentError, "index 7 is out of bounds for axis 1 in shape {4, 5}", fn ->
            Nx.take(t, Nx.tensor([0, 7, 9]), axis: 1)
          end

          assert_raise ArgumentError, "index -1 is out of bounds for axis 0 in shape {4, 5}", fn ->
            Nx.take_along_axis(t, Nx.tensor([[0, 1, 2, 3, 0], [1, 2, -1, 0, 9]]), axis: 0)
          end

          assert_raise ArgumentError, ~r/index 4 is out of bounds for axis 0/, fn ->
            Nx.gather(t, Nx.tensor([[1, 1], [4, 0]]))
          end

          assert_raise ArgumentError, ~r/index 5 is out of bounds for axis 1/, fn ->
            Nx.indexed_add(t, Nx.tensor([[1, 1], [0, 5]]), Nx.tensor([1.0, 2.0]))
          end

          Accel.Test.Fallbacks.none!()
        end

        test "indexed_add and indexed_put apply updates in order, duplicates included" do
          for type <- [{:f, 32}, {:s, 32}, {:u, 8}, {:f, 64}, {:s, 8}] do
            t = values({4, 5, 6}, type)
            idx = Nx.tensor([[0, 1, 2], [3, 4, 5], [0, 1, 2], [2, 2, 2]])
            upd = values({4}, type)
            same(@device, [t, idx, upd], &Nx.indexed_add/3)
            same(@device, [t, idx, upd], &Nx.indexed_put/3)
            rows = Nx.tensor([[1], [3], [1]])
            slices = values({3, 5, 6}, type)
            same(@device, [t, rows, slices], &Nx.indexed_add(&1, &2, &3, axes: [0]))
            same(@device, [t, rows, slices], &Nx.indexed_put(&1, &2, &3, axes: [0]))
          end

          # the result type is the merge of the target's and the updates'
          same(@device, [values({3, 3}, {:s, 32}), Nx.tensor([[0, 0]]), Nx.tensor([0.5])], &Nx.indexed_add/3)
          Accel.Test.Fallbacks.none!()
        end

        test "window reductions and product, with strides, padding and dilations" do
          for type <- [{:f, 32}, {:s, 64}, {:u, 8}, {:f, 16}] do
            x = values({2, 3, 8, 7}, type)
            same(@device, [x], &Nx.window_max(&1, {1, 1, 2, 2}, strides: [1, 1, 2, 2]))
            same(@device, [x], &Nx.window_sum(&1, {1, 1, 3, 3}, padding: :same))

            same(
              @device,
              [x],
              &Nx.window_min(&1, {1, 2, 2, 3},
                padding: [{0, 0}, {1, 0}, {0, 2}, {1, 1}],
                window_dilations: [1, 2, 2, 1]
              )
            )

            same(@device, [x], &Nx.window_product(&1, {2, 1, 1, 2}, strides: [1, 1, 3, 2]))
            same(@device, [x], &Nx.product(&1, axes: [1, 3]))
            same(@device, [x], &Nx.product(&1, axes: [0], keep_axes: true))
          end

          # NaN and infinities through max and min; a window larger than its input (all padding
          # at the edges); a scalar's product
          x = values({30}, {:f, 32}, true)
          same(@device, [x], &Nx.window_max(&1, {4}, strides: [3]))
          same(@device, [x], &Nx.window_min(&1, {40}, padding: [{39, 39}]))
          same(@device, [Nx.tensor(5)], &Nx.product/1)
          Accel.Test.Fallbacks.none!()
        end

        # Rows of 8 outputs and more: the CPU backend's vectorised loop over the windows inside the
        # input (a step of 1, 2 or another between outputs), the rest by the kernel's own loop.
        test "windows at pooling's sizes: steps of 1, 2 and 3, padding, dilations, ties and NaN" do
          for type <- [{:f, 32}, {:f, 64}, {:s, 32}, {:u, 8}] do
            x = values({2, 3, 34, 40}, type, true)
            same(@device, [x], &Nx.window_max(&1, {1, 1, 2, 2}, strides: [1, 1, 2, 2]))
            same(@device, [x], &Nx.window_min(&1, {1, 1, 3, 3}, strides: [1, 1, 2, 2], padding: :same))
            same(@device, [x], &Nx.window_sum(&1, {1, 1, 3, 3}, padding: :same))

            same(
              @device,
              [x],
              &Nx.window_max(&1, {1, 2, 2, 2},
                strides: [1, 1, 1, 3],
                window_dilations: [1, 1, 2, 2],
                padding: :same
              )
            )
          end

          x = values({2, 3, 34, 40}, {:f, 64})
          same(@device, [Nx.divide(x, 40)], &Nx.window_product(&1, {1, 1, 2, 2}, strides: [1, 1, 1, 2]))

          # many ties (the last greatest or least is chosen), windows apart (one pass), overlapping
          # and with a nonzero init (the two-pass scatter), padding
          ties = values({2, 3, 34, 40}, {:f, 32}) |> Nx.divide(10) |> Nx.round()

          same(
            @device,
            [ties, floats({2, 3, 17, 20})],
            &Nx.window_scatter_max(&1, &2, 0.0, {1, 1, 2, 2}, strides: [1, 1, 2, 2])
          )

          same(
            @device,
            [ties, floats({2, 3, 17, 20})],
            &Nx.window_scatter_min(&1, &2, 0.0, {1, 1, 2, 2}, strides: [1, 1, 2, 2], padding: :same)
          )

          same(
            @device,
            [ties, floats({2, 3, 11, 13})],
            &Nx.window_scatter_max(&1, &2, 0.0, {1, 1, 2, 2}, strides: [1, 1, 3, 3])
          )

          same(
            @device,
            [ties, floats({2, 3, 32, 38})],
            &Nx.window_scatter_max(&1, &2, 0.5, {1, 1, 3, 3}, strides: [1, 1, 1, 1])
          )

          same(
            @device,
            [values({2, 3, 34, 40}, {:s, 32}), values({2, 3, 17, 20}, {:s, 32})],
            &Nx.window_scatter_max(&1, &2, 0, {1, 1, 2, 2}, strides: [1, 1, 2, 2])
          )

          Accel.Test.Fallbacks.none!()
        end

        test "window_scatter_max and window_scatter_min (pooling's gradient)" do
          x = values({2, 2, 8, 6}, {:f, 32})

          same(
            @device,
            [x, floats({2, 2, 4, 3})],
            &Nx.window_scatter_max(&1, &2, 0.0, {1, 1, 2, 2}, strides: [1, 1, 2, 2])
          )

          same(
            @device,
            [x, floats({2, 2, 7, 4})],
            &Nx.window_scatter_min(&1, &2, 0.5, {1, 1, 2, 3}, strides: [1, 1, 1, 1])
          )

          same(
            @device,
            [x, floats({2, 2, 4, 3})],
            &Nx.window_scatter_max(&1, &2, 0.0, {1, 1, 2, 2}, strides: [1, 1, 2, 2], padding: :same)
          )

          # windows apart (strides above their sizes: elements in none), a partial last window
          # left out, one dimension with padding on both sides
          same(
            @device,
            [values({2, 3, 9, 7}, {:f, 32}), floats({2, 3, 3, 2})],
            &Nx.window_scatter_max(&1, &2, 0.0, {1, 1, 2, 3}, strides: [1, 1, 3, 3])
          )

          # Low padding: Nx 0.7's binary backend places each source one element off (it does not
          # take the low padding away; Nx 0.13's does, as XLA): the reference is the scatter over
          # the input padded by hand with the init value (never the minimum here), cut back.
          x = values({10}, {:f, 32})
          src = floats({4})
          padded = Nx.pad(x, 1.5, [{1, 1, 0}])

          expected = padded |> Nx.window_scatter_min(src, 1.5, {2}, strides: [3]) |> Nx.slice([1], [10])

          on_device =
            Nx.window_scatter_min(on(@device, x), on(@device, src), 1.5, {2}, strides: [3], padding: [{1, 1}])

          assert_same(host(on_device), expected, 0)

          Accel.Test.Fallbacks.none!()
        end

        test "conv with strides, padding, dilations, groups and permutations" do
          cases = [
            {{2, 3, 7, 6}, {4, 3, 3, 2}, []},
            {{2, 3, 7, 6}, {4, 3, 3, 2}, [strides: [2, 1], padding: :same]},
            {{2, 3, 7, 6}, {4, 3, 3, 2}, [padding: [{2, -1}, {0, 3}], kernel_dilation: [2, 1]]},
            {{2, 3, 7, 6}, {4, 3, 3, 2}, [input_dilation: [2, 1], padding: [{1, 1}, {0, 1}]]},
            {{2, 4, 7, 6}, {6, 2, 3, 2}, [feature_group_size: 2]},
            {{4, 3, 7, 6}, {6, 3, 3, 2}, [batch_group_size: 2]},
            {{2, 7, 6, 3}, {3, 2, 3, 4},
             [
               input_permutation: [0, 3, 1, 2],
               kernel_permutation: [3, 2, 0, 1],
               output_permutation: [0, 3, 1, 2]
             ]},
            {{1, 2, 9}, {3, 2, 4}, [strides: [3]]},
            {{2, 2, 4, 4, 3}, {3, 2, 2, 2, 2}, [padding: :same]},
            # stride 1 (the CPU backend's shifted products): cropped, 1 x 1, and one image large enough
            # to split its columns among threads
            {{2, 3, 7, 6}, {4, 3, 3, 2}, [padding: [{-1, 2}, {1, -1}]]},
            {{2, 3, 11}, {4, 3, 1}, []},
            {{1, 8, 20, 20}, {48, 8, 3, 3}, [padding: :same]},
            # kernels longer than the output (a kernel's gradient): the CPU backend's patches
            # transposed
            {{2, 4, 12, 12}, {3, 4, 10, 10}, []},
            {{2, 4, 12, 12}, {4, 2, 9, 10}, [feature_group_size: 2, padding: [{1, 0}, {0, 1}]]},
            {{4, 3, 12, 12}, {6, 3, 10, 11}, [batch_group_size: 2, strides: [1, 2]]}
          ]

          for {ts, ks, opts} <- cases do
            same(@device, [floats(ts), Nx.cos(floats(ks))], &Nx.conv(&1, &2, opts), 1.0e-5)
          end

          same(@device, [floats({1, 2, 5, 5}) |> Nx.as_type(:f64), floats({2, 2, 3, 3})], &Nx.conv/2, 1.0e-12)
          same(@device, [floats({1, 2, 9, 9}) |> Nx.as_type(:f64), floats({2, 2, 7, 8})], &Nx.conv/2, 1.0e-12)
          Accel.Test.Fallbacks.none!()
        end

        test "sort and argsort: stable, NaN as Nx orders it, along any axis" do
          for {shape, type, opts} <- [
                {{100}, {:s, 64}, []},
                {{7, 300}, {:f, 32}, [axis: 1]},
                {{300, 7}, {:f, 32}, [axis: 0, direction: :desc]},
                {{3, 5, 64}, {:u, 8}, [axis: 2]},
                {{33}, {:f, 64}, [direction: :desc]},
                {{4097}, {:u, 32}, []},
                {{1}, {:s, 32}, []}
              ] do
            t = values(shape, type, true)
            same(@device, [t], &Nx.sort(&1, opts))
            same(@device, [t], &Nx.argsort(&1, opts))
            same(@device, [t], &Nx.argsort(&1, [stable: true] ++ opts))
          end

          same(@device, [values({40}, {:f, 32})], &elem(Nx.top_k(&1, k: 5), 0))
          same(@device, [values({40}, {:f, 32})], &elem(Nx.top_k(&1, k: 5), 1))
          Accel.Test.Fallbacks.none!()
        end

        test "cumulative sums, products, maxima and minima along any axis, either way" do
          for type <- [{:f, 32}, {:s, 64}, {:u, 8}, {:s, 16}, {:f, 64}],
              axis <- [0, 1, 2],
              reverse <- [false, true] do
            x = values({3, 4, 5}, type)
            opts = [axis: axis, reverse: reverse]

            for fun <- [:cumulative_sum, :cumulative_max, :cumulative_min],
                do: same(@device, [x], &apply(Nx, fun, [&1, opts]))

            # small factors, so that products stay exact in f32
            same(@device, [Nx.remainder(x, 3)], &Nx.cumulative_product(&1, opts))
          end

          # NaN stays from where it appears
          same(@device, [values({40}, {:f, 32}, true)], &Nx.cumulative_max/1)
          same(@device, [values({40}, {:f, 32}, true)], &Nx.cumulative_min(&1, reverse: true))
          Accel.Test.Fallbacks.none!()
        end

        test "integer dot, exact and wrapping in its type, with batch axes" do
          for type <- [{:s, 64}, {:s, 32}, {:u, 8}, {:s, 16}, {:u, 64}] do
            a = values({3, 4, 5}, type)
            b = values({3, 5, 2}, type)
            same(@device, [a, b], &Nx.dot(&1, [2], [0], &2, [1], [0]))
            same(@device, [a, values({5}, type)], &Nx.dot/2)
          end

          Accel.Test.Fallbacks.none!()
        end

        test "erf_inv as Nx computes it" do
          x = Nx.tensor([-1.0, -0.999, -0.5, -1.0e-3, 0.0, 0.25, 0.9, 0.99999, 1.0])
          same(@device, [x], &Nx.erf_inv/1)
          # f64: the device's log within an ulp or two of Erlang's (the Nx guide's promise)
          same(@device, [Nx.as_type(x[1..7], :f64)], &Nx.erf_inv/1, 1.0e-15)
          Accel.Test.Fallbacks.none!()
        end

        test "population_count and count_leading_zeros in every integer type's width" do
          for {kind, width} = type <- [
                {:s, 8},
                {:s, 16},
                {:s, 32},
                {:s, 64},
                {:u, 8},
                {:u, 16},
                {:u, 32},
                {:u, 64}
              ] do
            {low, high} =
              if kind == :s,
                do: {-Bitwise.bsl(1, width - 1), Bitwise.bsl(1, width - 1) - 1},
                else: {0, Bitwise.bsl(1, width) - 1}

            edges =
              Enum.filter(
                [low, low + 1, -1, 0, 1, 2, 3, 127, 128, 255, 256, 65_535, 123_456_789, high - 1, high],
                &(&1 >= low and &1 <= high)
              )

            # and a spread of values across the range
            spread = for i <- 0..4095, do: low + rem(i * 2_654_435_761 * 40_503, high - low + 1)
            t = Nx.tensor(edges ++ spread, type: type)
            same(@device, [t], &Nx.population_count/1)
            same(@device, [t], &Nx.count_leading_zeros/1)
          end

          Accel.Test.Fallbacks.none!()
        end

        test "at 10^6 elements, against closed forms" do
          Nx.default_backend({Accel.Nx.Backend, device: @device, fallback: :raise})
          n = 1_048_576
          # a permutation of 0..n-1 (7919 is prime, so i -> i * 7919 mod n is one)
          perm = Nx.iota({n}, type: :s64) |> Nx.multiply(7919) |> Nx.remainder(n)
          assert Nx.sort(perm) |> Nx.equal(Nx.iota({n})) |> Nx.all() |> Nx.to_number() == 1
          # argsort of a permutation is its inverse: perm[argsort(perm)] == iota
          assert perm |> Nx.take(Nx.argsort(perm)) |> Nx.equal(Nx.iota({n})) |> Nx.all() |> Nx.to_number() ==
                   1

          # descending, with NaN first: every NaN, then n - 1 down to 0
          f = Nx.select(Nx.equal(Nx.remainder(perm, 1000), 0), Nx.Constants.nan(:f32), Nx.as_type(perm, :f32))
          desc = Nx.sort(f, direction: :desc)
          nans = div(n, 1000) + 1
          assert desc[0..(nans - 1)] |> Nx.is_nan() |> Nx.all() |> Nx.to_number() == 1
          assert desc[nans] |> Nx.to_number() == n - 1

          # an embedding: rows of a table whose element (r, c) is r * 64 + c
          table = Nx.iota({30_000, 64}, type: :f32)
          rows = Nx.iota({8192}) |> Nx.multiply(37) |> Nx.remainder(30_000)
          got = Nx.take(table, rows, axis: 0)
          want = rows |> Nx.multiply(64) |> Nx.new_axis(1) |> Nx.add(Nx.iota({1, 64})) |> Nx.as_type(:f32)
          assert got |> Nx.equal(want) |> Nx.all() |> Nx.to_number() == 1
          # its gradient's scatter: indexed_add of ones counts each row's uses
          counts = Nx.indexed_add(Nx.broadcast(0, {30_000}), Nx.new_axis(rows, 1), Nx.broadcast(1, {8192}))
          assert Nx.sum(counts) |> Nx.to_number() == 8192
          assert counts[37] |> Nx.to_number() == Enum.count(0..8191, &(rem(&1 * 37, 30_000) == 37))

          # a running count: the cumulative sum of ones is 1..n, exactly (below 2^24)
          assert Nx.broadcast(1.0, {n})
                 |> Nx.cumulative_sum()
                 |> Nx.equal(Nx.add(Nx.iota({n}), 1))
                 |> Nx.all()
                 |> Nx.to_number() == 1

          # a window sum of ones counts the window's elements inside the input
          ones = Nx.broadcast(1.0, {16, 256, 256})
          sums = Nx.window_sum(ones, {1, 3, 3}, padding: :same)
          assert Nx.to_number(sums[[0, 0, 0]]) == 4.0 and Nx.to_number(sums[[3, 100, 0]]) == 6.0
          assert Nx.to_number(sums[[15, 128, 77]]) == 9.0
          assert Nx.sum(sums) |> Nx.to_number() == 16 * (254 * 254 * 9 + 4 * 254 * 6 + 4 * 4)
          Accel.Test.Fallbacks.none!()
        end
      end
    end

    describe "conv on the CPU backend" do
      # The conv tests above pass whichever way a conv runs: these say which one it took. (Both
      # faster ways once went unused for a month, each guarded by a type check that never matched.)
      # The NIF calls a conv made.
      defp nif_calls(fun),
        do:
          Accel.Test.NifCalls.traced(
            [{Accel.NIF, :tensor_conv_shifted, 7}, {Accel.NIF, :tensor_matmul, 8}],
            fun
          )

      defp conv_calls(x_shape, k_shape, type, opts) do
        b = {Accel.Nx.Backend, device: :cpu, fallback: :raise}
        {x, k} = {Nx.iota(x_shape, type: type, backend: b), Nx.iota(k_shape, type: type, backend: b)}
        Enum.map(nif_calls(fn -> Nx.conv(x, k, opts) end), fn {name, args} -> {name, Enum.at(args, 6)} end)
      end

      test "stride 1 over a plane wider than the channels: shifted products, real or complex" do
        for type <- [:f32, :f64, :c64, :c128] do
          assert [{:tensor_conv_shifted, _}] =
                   conv_calls({2, 16, 32, 32}, {8, 16, 3, 3}, type, padding: :same)
        end
      end

      test "a kernel longer than the output (a kernel's gradient): the patches transposed" do
        # (tensor_matmul's 7th argument: 2 where its right operand is transposed)
        assert [{:tensor_matmul, 2}] = conv_calls({2, 4, 12, 12}, {3, 4, 10, 10}, :f32, [])
        # (a dilated kernel's runs are one element long: the patches as they are)
        assert [{:tensor_matmul, 0}] = conv_calls({2, 4, 12, 12}, {3, 4, 3, 3}, :f32, kernel_dilation: [2, 2])
      end

      test "complex, where the shifted products do not apply: the parts stacked, in one real product" do
        assert [{:tensor_matmul, 0}] = conv_calls({2, 4, 12, 12}, {3, 4, 3, 3}, :c64, kernel_dilation: [2, 2])
      end
    end
  end
end
