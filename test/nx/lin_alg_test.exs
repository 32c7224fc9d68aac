if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.LinAlgTest.Grads do
    # Gradients Nx takes through the linear algebra (its compositions' rules, fed the factors)
    import Nx.Defn

    defn(solve(a, b, _w), do: grad(a, &(&1 |> Nx.LinAlg.solve(b) |> Nx.sum())))
    defn(invert(a, _b, _w), do: grad(a, &(&1 |> Nx.LinAlg.invert() |> Nx.sum())))
    defn(determinant(a, _b, _w), do: grad(a, &Nx.LinAlg.determinant/1))
    defn(cholesky(a, _b, w), do: grad(a, &(&1 |> Nx.LinAlg.cholesky() |> Nx.multiply(w) |> Nx.sum())))

    defn qr(a, _b, w) do
      grad(a, fn a ->
        {q, r} = Nx.LinAlg.qr(a)
        Nx.sum(q * w) + Nx.sum(r * w)
      end)
    end
  end

  defmodule Accel.Nx.LinAlgTest do
    # The linear algebra Accel computes itself (Accel.Nx.LinAlg, core/tensor_linalg.cpp): cholesky,
    # qr, determinant, solve, invert and triangular_solve, against Nx.BinaryBackend (Nx's own
    # compositions) on batches, tall, wide and square matrices, every triangular_solve option, f32,
    # f64 and integer input; the gradients Nx takes through them, which read the factors of Nx's
    # compositions and so need factors in the same signs; the edges (NaN, singular
    # matrices, 1 x 1); and at sizes where only residuals can judge. With fallback: :raise: nothing here
    # leaves the device. On the CPU backend and on OpenCL.
    use ExUnit.Case, async: true
    import Accel.Test.Fallbacks, only: [count: 1, none!: 0]

    setup :count

    defp on(device, t), do: Nx.backend_copy(t, {Accel.Nx.Backend, device: device})
    defp host(t), do: Nx.backend_copy(t, Nx.BinaryBackend)

    defp random(shape, seed, type \\ :f64) do
      {t, _} = Nx.Random.normal(Nx.Random.key(seed), shape: shape, type: type)
      host(t)
    end

    # symmetric positive definite: A A^T + n I, per batch
    defp spd(batch, n, seed, type \\ :f64) do
      a = random(List.to_tuple(batch ++ [n, n]), seed, type)
      axes = Enum.to_list(0..(length(batch) - 1)//1)
      aat = Nx.dot(a, [length(batch) + 1], axes, a, [length(batch) + 1], axes)
      Nx.add(aat, Nx.multiply(Nx.eye(n, type: type), n)) |> host()
    end

    defp device_run(device, fun) do
      Nx.with_default_backend({Accel.Nx.Backend, device: device, fallback: :raise}, fun)
    end

    # `fun` of `inputs` on the binary backend and on the device: the same types and shapes, values
    # within `tolerance` relative to the largest magnitude
    defp same(device, inputs, fun, tolerance) do
      expected = Nx.with_default_backend(Nx.BinaryBackend, fn -> apply(fun, Enum.map(inputs, &host/1)) end)
      actual = device_run(device, fn -> apply(fun, Enum.map(inputs, &on(device, &1))) end)
      none!()

      [expected, actual]
      |> Enum.map(&(&1 |> List.wrap() |> Nx.Defn.Composite.flatten_list()))
      |> Enum.zip_with(fn [e, a] ->
        assert %Accel.Nx.Backend{} = a.data
        a = host(a)
        assert {a.type, a.shape} == {e.type, e.shape}
        close(e, a, tolerance)
      end)
    end

    defp close(expected, actual, tolerance) do
      if Nx.size(expected) > 0 do
        diff = Nx.subtract(actual, expected) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
        scale = expected |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number() |> max(1.0)
        assert diff <= tolerance * scale, "differs by #{diff} (scale #{scale})"
      end
    end

    defp complex(re, im), do: Nx.complex(re, im) |> host()

    # `fun` of `inputs` on the binary backend and on the device: the same bits
    defp bits(device, inputs, fun) do
      expected = Nx.with_default_backend(Nx.BinaryBackend, fn -> apply(fun, Enum.map(inputs, &host/1)) end)
      actual = device_run(device, fn -> apply(fun, Enum.map(inputs, &on(device, &1))) end)
      none!()
      assert %Accel.Nx.Backend{} = actual.data
      actual = host(actual)
      assert {actual.type, actual.shape} == {expected.type, expected.shape}
      assert Nx.to_binary(actual) == Nx.to_binary(expected), "#{inspect(actual)}\n#{inspect(expected)}"
    end

    defp nx_0_8?, do: Version.match?(to_string(Application.spec(:nx, :vsn)), ">= 0.8.0")

    defp nan?(t), do: t |> host() |> Nx.is_nan() |> Nx.all() |> Nx.to_number() == 1

    for device <- Accel.Test.Devices.nx() do
      describe "on #{device}" do
        @describetag Accel.Test.Devices.tags(device)
        @device device

        test "cholesky of batches, f32 and f64, as Nx's composition" do
          # Nx's composition divides by each pivot plus 1e-10
          for {batch, n, type, tol} <- [
                {[], 1, :f64, 1.0e-9},
                {[], 6, :f64, 1.0e-9},
                {[3], 5, :f64, 1.0e-9},
                {[2, 2], 4, :f32, 2.0e-6}
              ] do
            same(@device, [spd(batch, n, n, type)], &Nx.LinAlg.cholesky/1, tol)
          end
        end

        # Nx 0.7: the binary backend's own eigh, ported: the same bits; Nx 0.8 on: Nx's composition
        # on the device (eigenvectors up to sign: compared through A V = V diag(values))
        test "eigh of symmetric matrices, batched, f32, f64 and integers" do
          for {shape, type} <- [
                {{1, 1}, :f64},
                {{2, 2}, :f64},
                {{6, 6}, :f64},
                {{3, 5, 5}, :f32},
                {{12, 12}, :f64}
              ] do
            a = random(shape, 40 + elem(shape, 0), type)
            a = Nx.add(a, Nx.transpose(a, axes: Enum.to_list(0..(tuple_size(shape) - 3)//1) ++ [-1, -2]))

            if nx_0_8?() do
              {values, vectors} = device_run(@device, fn -> Nx.LinAlg.eigh(on(@device, a)) end)
              none!()

              rank = tuple_size(shape)
              batch = Enum.to_list(0..(rank - 3)//1)
              av = Nx.dot(a, [rank - 1], batch, host(vectors), [rank - 2], batch)
              residual = Nx.subtract(av, Nx.multiply(host(vectors), Nx.new_axis(host(values), -2)))

              assert Nx.to_number(Nx.reduce_max(Nx.abs(residual))) < 1.0e-3
            else
              {ev, evec} = Nx.LinAlg.eigh(host(a))
              {values, vectors} = device_run(@device, fn -> Nx.LinAlg.eigh(on(@device, a)) end)
              none!()
              assert host(values) == ev
              assert host(vectors) == evec
            end
          end

          # integers, and the options
          int = Nx.tensor([[2, 1, 0], [1, 3, 1], [0, 1, 4]])
          tolerance = if nx_0_8?(), do: 1.0e-5, else: 0.0
          same(@device, [int], &Nx.LinAlg.eigh/1, tolerance)
          same(@device, [int], &Nx.LinAlg.eigh(&1, max_iter: 3, eps: 1.0e-6), tolerance)
        end

        # Nx 0.7: the binary backend's own lu, ported: the same values (NaN's sign apart); Nx 0.8
        # on: Nx's composition on the device
        test "lu of batches, f32, f64 and integers, with zero pivots" do
          for a <- [
                random({5, 5}, 51),
                random({3, 4, 4}, 52),
                random({8, 8}, 53, :f32),
                random({40, 40}, 54),
                Nx.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 10]]),
                Nx.tensor([[1.0, 2.0], [2.0, 4.0]]),
                Nx.tensor([[0.0, 0.0], [0.0, 0.0]])
              ] do
            {expected, actual} =
              {Nx.LinAlg.lu(host(a)), device_run(@device, fn -> Nx.LinAlg.lu(on(@device, a)) end)}

            none!()

            for {e, x} <- Enum.zip(Tuple.to_list(expected), Tuple.to_list(actual)) do
              assert {host(x).type, host(x).shape} == {e.type, e.shape}

              if nx_0_8?(),
                do: close(e, host(x), 1.0e-5),
                else: assert(Nx.to_flat_list(host(x)) == Nx.to_flat_list(e))
            end
          end
        end

        # (Nx 0.8's composition does not check)
        unless Version.match?(to_string(Application.spec(:nx, :vsn)), ">= 0.8.0") do
          test "eigh of a matrix that is not symmetric, or with a max_iter out of bounds, raises" do
            assert_raise ArgumentError, ~r/matrix must be hermitian/, fn ->
              device_run(@device, fn -> Nx.LinAlg.eigh(on(@device, Nx.tensor([[1.0, 2.0], [3.0, 4.0]]))) end)
            end

            # max_iter: an integer, and at most 10^6 (the C++ loop cannot be cancelled)
            spd = on(@device, Nx.tensor([[2.0, 1.0], [1.0, 2.0]]))

            assert_raise ArgumentError, "eigh: max_iter must be an integer, got: 2.5", fn ->
              device_run(@device, fn -> Nx.LinAlg.eigh(spd, max_iter: 2.5) end)
            end

            assert_raise ArgumentError, "max_iter: at most 1000000 iterations, got: 2000000", fn ->
              device_run(@device, fn -> Nx.LinAlg.eigh(spd, max_iter: 2_000_000) end)
            end
          end
        end

        test "cholesky of a matrix that is not positive definite: NaN from the failing pivot on" do
          l =
            device_run(@device, fn ->
              Nx.LinAlg.cholesky(on(@device, Nx.tensor([[4.0, 2.0, 0.0], [2.0, -3.0, 1.0], [0.0, 1.0, 2.0]])))
            end)

          none!()
          [[a, b, c], [d, e, f], [g, h, i]] = l |> host() |> Nx.to_list()
          assert {a, b, c, d} == {2.0, 0.0, 0.0, 1.0}
          assert e == :nan and h == :nan and i == :nan
          assert {f, g} == {0.0, 0.0}
        end

        test "qr of square, tall and wide matrices, batched, in Nx's signs" do
          for {shape, type, tol} <- [
                {{5, 5}, :f64, 1.0e-12},
                {{7, 3}, :f64, 1.0e-12},
                {{3, 7}, :f64, 1.0e-12},
                {{4, 6, 4}, :f64, 1.0e-12},
                {{2, 9, 5}, :f32, 3.0e-6},
                {{1, 1}, :f64, 0.0},
                {{4, 1}, :f64, 1.0e-12},
                # beyond one panel of 32 reflections (the blocked updates), square, tall and wide
                {{40, 40}, :f64, 1.0e-11},
                {{48, 36}, :f64, 1.0e-11},
                {{36, 48}, :f64, 1.0e-11},
                {{2, 34, 34}, :f32, 1.0e-5}
              ] do
            same(@device, [random(shape, Tuple.sum(shape), type)], &Nx.LinAlg.qr/1, tol)
          end

          # reflections Nx skips (columns already reduced) inside and across panels: the identity's
          # first 36 columns with a random block right of them, and rows below
          block = random({44, 8}, 3)
          structured = Nx.concatenate([Nx.eye({44, 36}, type: :f64) |> Nx.multiply(-2), block], axis: 1)
          same(@device, [structured], &Nx.LinAlg.qr/1, 1.0e-11)

          # structured: columns already reduced, where Nx reflects nothing
          same(@device, [Nx.tensor([[2, -2, 18], [2, 1, 0], [1, 2, 0]])], &Nx.LinAlg.qr/1, 1.0e-6)

          same(
            @device,
            [Nx.tensor([[3, 2, 1], [0, 1, 1], [0, 0, 1], [0, 0, 1]], type: :f64)],
            &Nx.LinAlg.qr/1,
            1.0e-12
          )
        end

        test "qr's complete mode of a wide matrix is the reduced one; of a tall one, Nx's composition" do
          same(@device, [random({3, 6}, 1)], &Nx.LinAlg.qr(&1, mode: :complete), 1.0e-12)
          # Q's last columns are not unique even in sign: Nx's composition makes them, on the device
          same(@device, [random({6, 3}, 2)], &Nx.LinAlg.qr(&1, mode: :complete), 1.0e-12)
        end

        test "determinant: Nx's closed forms for 2 x 2 and 3 x 3, LU beyond, batched, integers exact" do
          same(@device, [Nx.tensor([[[1, 2], [3, 4]], [[5, 6], [7, 8]]])], &Nx.LinAlg.determinant/1, 0.0)

          same(
            @device,
            [Nx.tensor([[1.0, 2.0, 3.0], [-1.0, -2.0, -3.0], [4.0, 5.0, 6.0]])],
            &Nx.LinAlg.determinant/1,
            0.0
          )

          same(@device, [random({3, 6, 6}, 3)], &Nx.LinAlg.determinant/1, 1.0e-12)

          same(
            @device,
            [
              Nx.tensor([
                [0.0, 1.0, 0.0, 0.0],
                [1.0, 0.0, 0.0, 0.0],
                [0.0, 0.0, 0.0, 1.0],
                [0.0, 0.0, 1.0, 0.0]
              ])
            ],
            &Nx.LinAlg.determinant/1,
            0.0
          )
        end

        test "solve and invert: vector and matrix right sides, batches" do
          same(@device, [spd([], 6, 4), random({6}, 5)], &Nx.LinAlg.solve/2, 1.0e-12)
          same(@device, [random({2, 5, 5}, 6), random({2, 5, 3}, 7)], &Nx.LinAlg.solve/2, 1.0e-10)
          same(@device, [random({4, 4}, 8, :f32), random({4}, 9, :f32)], &Nx.LinAlg.solve/2, 1.0e-4)

          same(
            @device,
            [Nx.tensor([[1, 3, 2, 1], [2, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]]), Nx.tensor([-3, 0, 4, -2])],
            &Nx.LinAlg.solve/2,
            1.0e-6
          )

          same(@device, [random({3, 5, 5}, 10)], &Nx.LinAlg.invert/1, 1.0e-10)
        end

        test "triangular_solve with every side, triangle and transform, vector and matrix right sides" do
          a = random({5, 5}, 11) |> Nx.add(Nx.multiply(Nx.eye(5, type: :f64), 4))

          for left <- [true, false], lower <- [true, false], transform <- [:none, :transpose] do
            opts = [left_side: left, lower: lower, transform_a: transform]
            tri = if lower, do: Nx.tril(a), else: Nx.triu(a)
            b = if left, do: random({5, 3}, 12), else: random({3, 5}, 12)
            same(@device, [tri, b], &Nx.LinAlg.triangular_solve(&1, &2, opts), 1.0e-12)
            same(@device, [tri, random({5}, 13)], &Nx.LinAlg.triangular_solve(&1, &2, opts), 1.0e-12)
          end

          batched = Nx.stack([Nx.tril(a), Nx.tril(Nx.transpose(a))])
          same(@device, [batched, random({2, 5, 2}, 14)], &Nx.LinAlg.triangular_solve/2, 1.0e-12)
        end

        test "complex triangular_solve: every side, triangle and transform, the binary backend's bits" do
          for type <- [:f32, :f64] do
            a =
              complex(random({5, 5}, 31, type), random({5, 5}, 32, type))
              |> Nx.add(Nx.multiply(Nx.eye(5, type: type), 3))

            # (exact zeros on the diagonal's neighbours, where signed zeros show)
            a = Nx.put_slice(a, [1, 0], Nx.tensor([[0]], type: a.type))
            transforms = if nx_0_8?(), do: [:none, :transpose, :conjugate], else: [:none, :transpose]

            for left <- [true, false], lower <- [true, false], transform <- transforms do
              opts = [left_side: left, lower: lower, transform_a: transform]
              tri = if lower, do: Nx.tril(a), else: Nx.triu(a)

              b =
                complex(
                  random(if(left, do: {5, 3}, else: {3, 5}), 33, type),
                  random(if(left, do: {5, 3}, else: {3, 5}), 34, type)
                )

              bits(@device, [tri, b], &Nx.LinAlg.triangular_solve(&1, &2, opts))

              bits(
                @device,
                [tri, complex(random({5}, 35, type), random({5}, 36, type))],
                &Nx.LinAlg.triangular_solve(&1, &2, opts)
              )
            end

            batched = Nx.stack([Nx.tril(a), Nx.tril(Nx.transpose(a))])
            b = complex(random({2, 5, 2}, 37, type), random({2, 5, 2}, 38, type))
            bits(@device, [batched, b], &Nx.LinAlg.triangular_solve/2)
          end

          # Nx's doctest, whose last imaginary part is 0.0, not -0.0
          a = Nx.tensor([[1, 0, 0], [1, Complex.new(0, 1), 0], [Complex.new(0, 1), 1, 1]])
          bits(@device, [a, Nx.tensor([1, -1, Complex.new(3, 3)])], &Nx.LinAlg.triangular_solve/2)
        end

        test "complex solve: vector and matrix right sides, batches, singular matrices" do
          a = complex(random({6, 6}, 41), random({6, 6}, 42))
          same(@device, [a, complex(random({6}, 43), random({6}, 44))], &Nx.LinAlg.solve/2, 1.0e-10)
          a = complex(random({2, 5, 5}, 45), random({2, 5, 5}, 46))

          same(
            @device,
            [a, complex(random({2, 5, 3}, 47), random({2, 5, 3}, 48))],
            &Nx.LinAlg.solve/2,
            1.0e-10
          )

          a32 = complex(random({4, 4}, 49, :f32), random({4, 4}, 50, :f32))

          same(
            @device,
            [a32, complex(random({4}, 51, :f32), random({4}, 52, :f32))],
            &Nx.LinAlg.solve/2,
            1.0e-4
          )

          singular =
            Nx.tensor([[Complex.new(1, 1), Complex.new(2, 2)], [Complex.new(1, 1), Complex.new(2, 2)]])

          b = Nx.tensor([Complex.new(1, 0), Complex.new(0, 1)])
          zero_diagonal = Nx.tensor([[Complex.new(1, 1), 0], [Complex.new(2, 0), 0]])

          assert_raise ArgumentError, ~r/can't solve for singular matrix/, fn ->
            device_run(@device, fn -> Nx.LinAlg.solve(on(@device, singular), on(@device, b)) end)
          end

          assert_raise ArgumentError, ~r/can't solve for singular matrix/, fn ->
            device_run(@device, fn ->
              Nx.LinAlg.triangular_solve(on(@device, zero_diagonal), on(@device, b))
            end)
          end
        end

        test "gradients through solve, invert, determinant and qr agree with Nx's" do
          a = spd([], 4, 15)
          b = random({4}, 16)
          w = random({4, 4}, 17)

          # Nx 0.7 differentiates the determinant through lu, which is Nx.BinaryBackend's on that line
          funs = [:solve, :invert, :qr, :cholesky] ++ if(nx_0_8?(), do: [:determinant], else: [])

          for fun <- funs,
              do: same(@device, [a, b, w], &apply(Accel.Nx.LinAlgTest.Grads, fun, [&1, &2, &3]), 1.0e-8)
        end

        test "the edges: NaN, singular matrices, 1 x 1, integer and half-precision input" do
          nan = Nx.tensor([[1.0, :nan, 0.0], [0.0, 1.0, 0.0], [2.0, 0.0, 1.0]])
          {q, r} = device_run(@device, fn -> Nx.LinAlg.qr(on(@device, nan)) end)
          assert nan?(q) and nan?(r)

          singular = Nx.tensor([[1.0, 2.0], [2.0, 4.0]])

          assert_raise ArgumentError, "can't solve for singular matrix", fn ->
            device_run(@device, fn ->
              Nx.LinAlg.solve(on(@device, singular), on(@device, Nx.tensor([1.0, 2.0])))
            end)
          end

          assert_raise ArgumentError, "can't solve for singular matrix", fn ->
            device_run(@device, fn ->
              Nx.LinAlg.triangular_solve(
                on(@device, Nx.tensor([[1.0, 0.0], [2.0, 0.0]])),
                on(@device, Nx.tensor([1.0, 2.0]))
              )
            end)
          end

          # integers compute in the float type Nx gives the result
          same(@device, [Nx.tensor([[4, 2], [2, 3]], type: :s64)], &Nx.LinAlg.cholesky/1, 1.0e-6)

          same(
            @device,
            [Nx.tensor([[4, 2], [2, 3]], type: :s32), Nx.tensor([1, 2], type: :s32)],
            &Nx.LinAlg.solve/2,
            1.0e-6
          )

          same(@device, [Nx.tensor([[4, 2], [2, 3]], type: :f16)], &Nx.LinAlg.cholesky/1, 1.0e-3)
          same(@device, [Nx.tensor([[-3.0]], type: :f64)], &Nx.LinAlg.determinant/1, 0.0)

          same(
            @device,
            [Nx.tensor([[2.0]], type: :f64), Nx.tensor([3.0], type: :f64)],
            &Nx.LinAlg.solve/2,
            0.0
          )
        end

        # (OpenBLAS's factorisations of these sizes overflowed a dirty scheduler's stack: they run on
        # a thread of Accel's with a large one)
        test "at sizes users factor: residuals of a 512 x 512 solve, Cholesky and QR, and a determinant" do
          n = 512
          g = random({n, n}, 18)
          b = random({n, 4}, 19)

          device_run(@device, fn ->
            # A A^T + n I, made on the device (the binary backend's dot of this size takes minutes)
            dg = on(@device, g)
            da = Nx.add(Nx.dot(dg, [1], dg, [1]), Nx.multiply(Nx.eye(n, type: :f64), n))
            db = on(@device, b)
            x = Nx.LinAlg.solve(da, db)
            close(host(db), host(Nx.dot(da, x)), 1.0e-10)
            l = Nx.LinAlg.cholesky(da)
            close(host(da), host(Nx.dot(l, Nx.transpose(l))), 1.0e-12)
            {q, r} = Nx.LinAlg.qr(da)
            close(host(da), host(Nx.dot(q, r)), 1.0e-12)
            close(Nx.eye(n, type: :f64), host(Nx.dot(Nx.transpose(q), q)), 1.0e-12)
            # det(A) = prod(diag(L))^2
            log_det = l |> Nx.take_diagonal() |> Nx.log() |> Nx.sum() |> Nx.multiply(2) |> Nx.to_number()

            assert_in_delta :math.log(Nx.to_number(Nx.LinAlg.determinant(Nx.divide(da, n)))),
                            log_det - n * :math.log(n),
                            1.0e-6
          end)

          none!()
        end
      end
    end
  end
end
