if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.CompilerTest.Defns do
    import Nx.Defn

    defn branchy(x) do
      s = Nx.sum(x * 2.0 + 1.0)

      if s > 10 do
        Nx.exp(x) + s
      else
        -x - s
      end
    end

    defn looped(x) do
      {x, _} =
        while {x, i = 0}, i < 5 do
          {x * 1.5 - 0.25, i + 1}
        end

      x
    end

    # (as many iterations as n says: a loop to run, not to unroll)
    defn counted(x, n) do
      {x, _, _} =
        while {x, i = 0, n}, i < n do
          {x * 1.5 - 0.25, i + 1, n}
        end

      x
    end

    # A loop inside a loop, a cond in the inner body with three clauses: the first clause's
    # predicate is computed in the body before the cond, a value two clauses read (the loop's
    # `shared`) on the first one's demand, a clause's own values only where it is taken; the outer
    # loop's state a nested tuple.
    defn nested_branches(x, n) do
      {{x, _}, _} =
        while {{x, i = 0}, n}, i < n do
          shared = Nx.sum(x)

          {_, x, _, _} =
            while {j = 0, x, i, shared}, j < 3 do
              y =
                cond do
                  j == 0 -> x + i
                  shared > 50.0 -> x - shared / 100.0
                  Nx.any(x < 0) -> Nx.abs(x) * 2.0 + shared
                  true -> x * 2.0
                end

              {j + 1, y, i, shared}
            end

          {{x, i + 1}, n}
        end

      x
    end

    # An integer division in a branch that is not taken when its divisor is 0 (nothing computes
    # it then), and a branch giving a constant as the function's result.
    defn guarded(i) do
      q = if i > 0, do: Nx.quotient(100, i), else: -1
      {q, if(i > 5, do: 7, else: i * 2)}
    end

    # A value two branches read, each of another cond (Nx's scopes give it to the function's),
    # computed only where one of them is taken, and once: the evaluator computes it on their
    # first demand.
    defn shared_by_branches(i) do
      q = Nx.quotient(100, i)
      {if(i > 0, do: q + 1, else: 0), if(i > 0, do: q * 2, else: 1)}
    end

    # Softmax of scores under a causal mask built at {s, s}: selected through an explicit broadcast
    # (Nx's select takes its predicate at the result's shape), or added as a bias (broadcast by
    # the addition).
    defn masked_scores(s) do
      {_, n, _} = Nx.shape(s)
      mask = Nx.iota({n, n}, axis: 0) >= Nx.iota({n, n}, axis: 1)
      softmax_rows(Nx.select(Nx.broadcast(mask, s), s, -1.0e9))
    end

    defn biased_scores(s) do
      {_, n, _} = Nx.shape(s)
      softmax_rows(s + Nx.select(Nx.iota({n, n}, axis: 0) >= Nx.iota({n, n}, axis: 1), 0.0, -1.0e9))
    end

    defn softmax_rows(s) do
      e = Nx.exp(s - Nx.reduce_max(s, axes: [-1], keep_axes: true))
      e / Nx.sum(e, axes: [-1], keep_axes: true)
    end

    # A constant a loop hands back as its result when it runs no iteration, and one made in it.
    defn steps_or_constant(n) do
      {x, _, _} = while({x = 0.5, i = 0, n}, i < n, do: {Nx.cos(x) + 0.25, i + 1, n})
      x
    end

    # A constant of this run's, to put in a kernel's text so that no cache holds its kernels (a
    # random one: the test cache outlives the VM; not from :rand, which ExUnit seeds, so a rerun
    # with the same --seed draws it again), at least 2 f32 ulps from its neighbours.
    def fresh_constant do
      <<r::32>> = :crypto.strong_rand_bytes(4)
      1.5 + rem(r, 2_000_000) / 4_194_304
    end
  end

  defmodule Accel.Nx.CompilerTest do
    # Accel.Nx.Compiler: what fuses, and that fused kernels give what the backend gives operation by
    # operation (fuse: false) and what Nx.Defn.Evaluator gives on Nx.BinaryBackend, on the CPU
    # backend and on OpenCL (PoCL here). Random graphs: compiler_property_test.exs.
    use ExUnit.Case, async: true

    alias Accel.Nx.Compiler

    doctest Accel.Nx.Compiler
    alias Accel.Nx.CompilerTest.Defns

    defp jit(fun, args, opts), do: apply(Nx.Defn.jit(fun, [compiler: Compiler] ++ opts), args)
    defp reference(fun, args), do: apply(Nx.Defn.jit(fun, compiler: Nx.Defn.Evaluator), args)

    defp binary(t), do: Nx.backend_copy(t, Nx.BinaryBackend)

    defp assert_close(a, b, tol) do
      a = Nx.backend_copy(a, Nx.BinaryBackend)
      b = Nx.backend_copy(b, Nx.BinaryBackend)
      assert a.shape == b.shape and a.type == b.type
      assert Nx.all_close(a, b, rtol: tol, atol: tol) |> Nx.to_number() == 1, "#{inspect(a)}\n#{inspect(b)}"
    end

    # The most ulps two f32 tensors are apart (NaN where the other is NaN; zeros of either sign
    # equal only themselves: bit patterns in order, as c_src/test/host_math_test.cpp's).
    defp max_ulps(a, b) do
      [a, b] = for t <- [a, b], do: t |> binary() |> Nx.bitcast(:s32) |> Nx.as_type(:s64)
      key = fn bits -> Nx.select(Nx.less(bits, 0), Nx.negate(Nx.bitwise_and(bits, 0x7FFFFFFF)), bits) end
      nan = fn bits -> Nx.greater(Nx.bitwise_and(bits, 0x7FFFFFFF), 0x7F800000) end
      assert Nx.equal(nan.(a), nan.(b)) |> Nx.all() |> Nx.to_number() == 1

      apart = Nx.abs(Nx.subtract(key.(a), key.(b)))
      Nx.select(nan.(a), 0, apart) |> Nx.reduce_max() |> Nx.to_number()
    end

    defp chain(x, y), do: x |> Nx.multiply(2.0) |> Nx.add(y) |> Nx.exp() |> Nx.subtract(1.0) |> Nx.divide(3.0)

    defp softmax(x) do
      e = Nx.exp(Nx.subtract(x, Nx.reduce_max(x, axes: [-1], keep_axes: true)))
      Nx.divide(e, Nx.sum(e, axes: [-1], keep_axes: true))
    end

    describe "report/3" do
      test "a chain of elementwise operations with broadcast operands is one region" do
        [region] = Compiler.report(&chain/2, [Nx.template({4, 3}, :f32), Nx.template({3}, :f32)])
        assert region.ops == [:multiply, :add, :exp, :subtract, :divide]
        assert region.inputs == [{4, 3}, {3}]
        assert region.shape == {4, 3}
        assert region.source =~ "accel_f32_exp"
      end

      test "a lone operation, a dot and a value used twice are not fused into their consumers" do
        assert Compiler.report(&Nx.add/2, [Nx.template({4}, :f32), Nx.template({4}, :f32)]) == []

        # (8 rows of 1000: too few rows for a row region, too many elements for a small one)
        [region, division] = Compiler.report(&softmax/1, [Nx.template({8, 1000}, :f32)])
        # exp(x - max) is used by the sum and the division: it is stored once
        assert region.ops == [:subtract, :exp]
        assert region.inputs == [{8, 1000}, {8, 1}]
        # a lone operation reading a broadcast operand (the rows' sums) is a kernel too
        assert division.ops == [:divide]
        assert division.inputs == [{8, 1000}, {8, 1}]

        mlp = fn x, w -> x |> Nx.dot(w) |> Nx.add(1.0) |> Nx.max(0.0) end
        [region] = Compiler.report(mlp, [Nx.template({4, 3}, :f32), Nx.template({3, 2}, :f32)])
        assert region.ops == [:add, :max]

        # a lone operation with a constant operand is a kernel where the tensor is large
        scale = fn x -> Nx.divide(x, 8.0) end
        assert [%{ops: [:divide]}] = Compiler.report(scale, [Nx.template({64, 128}, :f32)])
        assert Compiler.report(scale, [Nx.template({3}, :f32)]) == []
      end

      test "reductions over the last axis and the work around them form one row region" do
        # softmax over rows long enough and many enough: one kernel per row
        [region] = Compiler.report(&softmax/1, [Nx.template({64, 128}, :f32)])
        assert region.ops == [:reduce_max, :subtract, :exp, :sum, :divide]
        assert region.inputs == [{64, 128}]
        # too few rows for the device's cores: the regions above
        assert length(Compiler.report(&softmax/1, [Nx.template({4, 2048}, :f32)])) == 2
        # unless the whole is small (at most 4096 elements): one kernel, whatever its rows
        for shape <- [{1, 8}, {4, 128}, {8, 5}, {3, 2}, {1, 4096}] do
          [region] = Compiler.report(&softmax/1, [Nx.template(shape, :f32)])
          assert region.ops == [:reduce_max, :subtract, :exp, :sum, :divide]
        end

        assert length(Compiler.report(&softmax/1, [Nx.template({1, 4097}, :f32)])) == 2
        # a lone reduction of an input is the backend's own
        assert Compiler.report(&Nx.sum(&1, axes: [1]), [Nx.template({64, 128}, :f32)]) == []
      end

      test "a row region's loops after its first fetch the next row's inputs (host only)" do
        prefetches = fn f, templates ->
          [region] = Compiler.report(f, templates)
          Regex.scan(~r/ACCEL_NX_PREFETCH\(&in(\d+)\[([^\]]*)\]\)/, region.source, capture: :all_but_first)
        end

        # softmax: its sum's loop (exp over the row in cache) fetches the next row, its max's not
        assert prefetches.(&softmax/1, [Nx.template({64, 256}, :f32)]) == [["0", "(gn) * 256UL + rb + p"]]

        # layer norm: the row's input, not gamma and beta (the same for every row); f64 rows
        layer_norm = fn x, gamma, beta ->
          centred = Nx.subtract(x, Nx.mean(x, axes: [-1], keep_axes: true))
          var = centred |> Nx.multiply(centred) |> Nx.mean(axes: [-1], keep_axes: true)
          centred |> Nx.divide(Nx.sqrt(Nx.add(var, 1.0e-5))) |> Nx.multiply(gamma) |> Nx.add(beta)
        end

        f64 = &Nx.template(&1, :f64)

        assert prefetches.(layer_norm, [f64.({32, 256}), f64.({256}), f64.({256})]) == [
                 ["0", "(gn) * 256UL + rb + p"]
               ]

        # a mask broadcast over the heads: its next row is the next query's
        masked = fn s, m -> softmax(Nx.add(s, m)) end

        assert prefetches.(masked, [Nx.template({8, 256, 256}, :f32), Nx.template({1, 256, 256}, :f32)]) ==
                 [["0", "(gn) * 256UL + rb + p"], ["1", "(gn % 256UL) * 256UL + rb + p"]]

        # rows past 64 KiB (the row, the next and the output would leave L2), rows under 1 KiB
        # (the hardware follows them), one loop over the row (nothing computes while the next
        # arrives): none
        assert prefetches.(&softmax/1, [Nx.template({16, 32768}, :f32)]) == []
        assert prefetches.(&softmax/1, [Nx.template({64, 128}, :f32)]) == []
        normalise = fn x -> Nx.divide(x, Nx.sum(x, axes: [-1], keep_axes: true)) end
        assert prefetches.(normalise, [Nx.template({64, 256}, :f32)]) == []
      end

      test "a reduction ends the region it reduces" do
        f = fn x -> x |> Nx.exp() |> Nx.multiply(2.0) |> Nx.sum(axes: [1]) end
        [region] = Compiler.report(f, [Nx.template({4, 3}, :f32)])
        assert region.ops == [:exp, :multiply, :sum]
        assert region.shape == {4}
      end

      test "an iota a region reads is computed from each element's index, never stored" do
        f32 = &Nx.template(&1, :f32)

        # a one-hot of labels (the iota broadcast along the rows)
        onehot = fn y, x -> Nx.equal(Nx.new_axis(y, 1), Nx.iota({1, 10})) |> Nx.multiply(x) end
        [region] = Compiler.report(onehot, [Nx.template({33}, :s64), f32.({33, 10})])
        assert region.ops == [:equal, :multiply]
        assert region.inputs == [{33, 1}, {33, 10}]
        assert region.iotas == [{1, 10}]

        # a causal mask: two iotas along either axis, in the softmax's row region
        masked = fn s ->
          mask = Nx.greater_equal(Nx.iota(s.shape, axis: 1), Nx.iota(s.shape, axis: 2))
          softmax(Nx.select(mask, s, -1.0e9))
        end

        [region] = Compiler.report(masked, [f32.({8, 64, 64})])
        assert [:greater_equal, :select, :reduce_max | _] = region.ops
        assert region.inputs == [{8, 64, 64}]
        assert region.iotas == [{8, 64, 64}, {8, 64, 64}]
        # (in 32 bits, each value fitting them: the row's index once, the column's from its counter)
        assert region.source =~ "const accel_i32 y0 = (accel_i32)("
        assert region.source =~ "const accel_i32 y1 = c32;"

        # Nx.Random's counters (each half of an iota, xs[0] and xs[1]), a strided slice of one,
        # a lone operation reading one
        draw = fn key -> Nx.Random.uniform_split(key, 0.0, 1.0, shape: {1000}) end

        assert [{500}, {500}] =
                 Compiler.report(draw, [Nx.template({2}, :u32)]) |> Enum.flat_map(& &1.iotas) |> Enum.take(-2)

        strided = fn x ->
          Nx.add(x, Nx.slice(Nx.iota({300, 7}, type: :u8), [5, 2], [200, 5], strides: [3, 2]))
        end

        assert [%{ops: [:add], inputs: [{67, 3}], iotas: [{67, 3}], source: source}] =
                 Compiler.report(strided, [f32.({67, 3})])

        # (a u8 iota past 255 wraps: its values in the type's, not 32 bits)
        assert source =~ "const accel_i64 y0 = (accel_i64)(accel_u8)("

        # a region of iotas alone is not one: a kernel is placed by the tensors it reads
        mask = fn _x -> Nx.greater_equal(Nx.iota({4, 1}), Nx.iota({1, 4})) end
        assert Compiler.report(mask, [f32.({1})]) == []
      end

      test "a value of iotas at a smaller shape is computed in the region that reads it broadcast" do
        f32 = &Nx.template(&1, :f32)

        # a causal mask at {s, s} for 8 heads' scores: broadcast explicitly, or a bias added
        for masked <- [&Defns.masked_scores/1, &Defns.biased_scores/1] do
          [region] = Compiler.report(masked, [f32.({8, 64, 64})])
          assert :greater_equal in region.ops and :reduce_max in region.ops
          assert region.inputs == [{8, 64, 64}]
          assert region.iotas == [{64, 64}, {64, 64}]
        end

        # in an elementwise region, of arithmetic on iotas of two shapes
        pattern = fn x -> Nx.add(x, Nx.remainder(Nx.add(Nx.iota({5, 1}), Nx.iota({1, 7})), 3)) end

        assert [%{ops: [:add, :remainder, :add], inputs: [{2, 5, 7}]}] =
                 Compiler.report(pattern, [f32.({2, 5, 7})])

        # a broadcast along other axes than the last ones is read from memory, as before
        across = fn x ->
          x
          |> Nx.multiply(3.0)
          |> Nx.add(Nx.broadcast(Nx.iota({5, 1}) |> Nx.multiply(2), {5, 7, 2}, axes: [0, 1]))
        end

        assert [%{ops: [:multiply, :add], inputs: [{5, 7, 2}, {5, 7, 2}]}] =
                 Compiler.report(across, [f32.({5, 7, 2})])
      end

      test "types Accel does not compute in are not fused" do
        f = fn x -> x |> Nx.add(1) |> Nx.multiply(3) end
        assert Compiler.report(f, [Nx.template({4}, :s16)]) == []
        assert [%{ops: [:add, :multiply]}] = Compiler.report(f, [Nx.template({4}, :s32)])
      end
    end

    for device <- Accel.Test.Devices.nx() do
      describe "on #{device}" do
        @describetag Accel.Test.Devices.tags(device)
        @device device

        test "a fused chain equals the backend op by op and the binary backend" do
          x = Nx.iota({64, 33}, type: :f32) |> Nx.divide(100.0)
          y = Nx.iota({33}, type: :f32) |> Nx.negate()
          fused = jit(&chain/2, [x, y], device: @device)
          assert %Accel.Nx.Backend{tensor: %{device: {@device, _}}} = fused.data
          assert binary(fused) == binary(jit(&chain/2, [x, y], device: @device, fuse: false))
          assert_close(fused, reference(&chain/2, [binary(x), binary(y)]), 1.0e-6)
        end

        test "broadcasting along either axis, scalars and constants" do
          f = fn a, b, c -> a |> Nx.multiply(b) |> Nx.add(c) |> Nx.subtract(0.5) |> Nx.abs() end
          a = Nx.iota({5, 7}, type: :f64)
          b = Nx.iota({5, 1}, type: :f64) |> Nx.add(1)
          c = Nx.tensor(-3.25, type: :f64)
          assert binary(jit(f, [a, b, c], device: @device)) == reference(f, [a, b, c])
          b2 = Nx.iota({7}, type: :f64)
          assert binary(jit(f, [a, b2, c], device: @device)) == reference(f, [a, b2, c])
        end

        test "x ** 2 in f32 is the backend's pow bit for bit (computed as a product)" do
          f = fn x -> Nx.pow(x, 2) end

          edges = [
            0.0,
            -0.0,
            1.0e-23,
            -1.0e-23,
            1.0e-45,
            1.8e19,
            1.9e19,
            -3.0e38,
            :nan,
            :infinity,
            :neg_infinity
          ]

          x =
            Nx.concatenate([
              Nx.tensor(edges, type: :f32),
              Nx.iota({100_000}, type: :f32) |> Nx.multiply(-0.37)
            ])

          assert [%{ops: [:pow]}] = Compiler.report(f, [x])
          assert binary(jit(f, [x], device: @device)) == binary(jit(f, [x], device: @device, fuse: false))
          # NaN's bits aside: NVIDIA's GPUs give their canonical NaN, not the operand's
          nan_as_nx = &Nx.select(Nx.is_nan(&1), Nx.tensor(:nan, type: :f32), &1)
          assert nan_as_nx.(binary(jit(f, [x], device: @device))) == nan_as_nx.(reference(f, [x]))
        end

        test "integers wrap in their type after every operation" do
          f = fn x, y ->
            x |> Nx.multiply(y) |> Nx.add(2_000_000_000) |> Nx.quotient(7) |> Nx.bitwise_xor(x)
          end

          x = Nx.tensor([2_147_483_647, -2_147_483_648, 12_345, -1, 0], type: :s32)
          y = Nx.tensor([3, 5, 99_991, 2_147_483_647, 1], type: :s32)
          assert binary(jit(f, [x, y], device: @device)) == reference(f, [x, y])

          u = Nx.tensor([0, 1, 200, 255], type: :u8)
          g = fn u -> u |> Nx.subtract(3) |> Nx.multiply(7) |> Nx.right_shift(1) end
          assert binary(jit(g, [u], device: @device)) == reference(g, [u])

          # (s32 and u32 add, multiply and shift on 32-bit words below a shift of 32; past it, as
          # 64-bit values wrapped)
          shifts = fn x ->
            x |> Nx.left_shift(7) |> Nx.add(x) |> Nx.bitwise_or(Nx.left_shift(x, 35)) |> Nx.multiply(x)
          end

          assert binary(jit(shifts, [x], device: @device)) == reference(shifts, [x])
          w = Nx.tensor([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 2_654_435_761], type: :u32)

          unsigned = fn w ->
            w
            |> Nx.right_shift(31)
            |> Nx.add(Nx.right_shift(w, 33))
            |> Nx.subtract(Nx.left_shift(w, 31))
            |> Nx.bitwise_and(Nx.multiply(w, w))
          end

          assert binary(jit(unsigned, [w], device: @device)) == reference(unsigned, [w])
        end

        # Nx.Random's threefry: rounds of u32 adds, rotations and xors in a while loop, all fused
        test "u32 wraps as Nx's: a threefry-like round, reductions and conversions" do
          rotate = fn x, r -> Nx.bitwise_or(Nx.left_shift(x, r), Nx.right_shift(x, 32 - r)) end

          f = fn x, y ->
            a = Nx.add(x, y)
            b = a |> rotate.(13) |> Nx.bitwise_xor(a) |> Nx.multiply(0x9E3779B9)
            c = b |> Nx.add(466_688_986) |> rotate.(7) |> Nx.subtract(y) |> Nx.bitwise_not()
            {c, Nx.reduce_max(c, axes: [1]), Nx.sum(c), Nx.as_type(c, :f64) |> Nx.divide(3.0)}
          end

          x = Nx.iota({64, 1000}, type: :u32) |> Nx.multiply(2_654_435_761)

          y =
            Nx.tensor([0xFFFFFFFF, 0x80000000, 1, 0], type: :u32)
            |> Nx.tile([16_000])
            |> Nx.reshape({64, 1000})

          assert [%{type: {:u, 32}} | _] = Compiler.report(f, [x, y])
          fused = jit(f, [x, y], device: @device)
          want = reference(f, [x, y])

          for {a, b} <- Enum.zip(Tuple.to_list(fused), Tuple.to_list(want)),
              do: assert(binary(a) == b)

          key = Nx.Random.key(7)
          draw = fn k -> Nx.Random.uniform_split(k, 0.0, 1.0, shape: {3000}) end
          assert binary(jit(draw, [key], device: @device)) == reference(draw, [key])

          # Nx.Random.normal: after the threefry rounds, its bits' shift, their bit cast to floats,
          # the scaling and erf_inv in one region (stop_grad's metadata inside it)
          normal = fn k -> Nx.Random.normal(k, shape: {5000}, type: :f32) |> elem(0) end
          assert Enum.any?(Compiler.report(normal, [key]), &(:bitcast in &1.ops and :erf_inv in &1.ops))
          assert binary(jit(normal, [key], device: @device)) == reference(normal, [key])
        end

        test "bit casts fuse: a float's bits as an integer of its width, and back" do
          f = fn x ->
            x |> Nx.multiply(3.0) |> Nx.bitcast(:s32) |> Nx.add(1) |> Nx.bitcast(:f32) |> Nx.subtract(x)
          end

          x = Nx.tensor([0.0, -0.0, 1.5, -2.25, 1.0e38, 1.0e-40, -7.0e-39], type: :f32)
          assert [%{ops: [:multiply, :bitcast, :add, :bitcast, :subtract]}] = Compiler.report(f, [x])
          assert binary(jit(f, [x], device: @device)) == reference(f, [x])

          g = fn y ->
            y |> Nx.add(1.0) |> Nx.bitcast(:u64) |> Nx.right_shift(1) |> Nx.bitcast(:f64) |> Nx.multiply(2.0)
          end

          h = fn y -> y |> Nx.multiply(-3.0) |> Nx.bitcast(:s64) |> Nx.subtract(5) |> Nx.bitcast(:f64) end
          y = Nx.tensor([0.0, -1.5, 2.0e300, 1.0e-310, -4.0e-320], type: :f64)
          assert binary(jit(g, [y], device: @device)) == reference(g, [y])
          assert binary(jit(h, [y], device: @device)) == reference(h, [y])
        end

        # Nx sums unsigned integers into u64: the gradient of a max counts the elements that reach
        # it (a sum of u8 flags) and divides by that count
        test "u64 computes unsigned: a max's gradient in one row kernel, values past 2^63" do
          grad_max = fn x ->
            Nx.Defn.grad(x, &(&1 |> Nx.reduce_max(axes: [1]) |> Nx.multiply(3.0) |> Nx.sum()))
          end

          # rows with 1 to 25 ties at their maximum
          x = Nx.iota({64, 128}, type: :f32) |> Nx.remainder(Nx.iota({64, 1}, type: :f32) |> Nx.add(5.0))
          assert [%{ops: [:equal, :multiply, :sum, :divide]}] = Compiler.report(grad_max, [x])
          assert binary(jit(grad_max, [x], device: @device)) == reference(grad_max, [x])

          a =
            Nx.tensor([0xFFFFFFFFFFFFFFFF, 0x8000000000000000, 0x7FFFFFFFFFFFFFFF, 12_345, 0, 1], type: :u64)

          b = Nx.tensor([3, 0x8000000000000001, 2, 0xFFFFFFFFFFFFFFFE, 7, 1], type: :u64)

          f = fn a, b ->
            {Nx.select(Nx.greater(a, b), Nx.quotient(a, b), Nx.remainder(b, Nx.bitwise_or(a, 1))),
             a |> Nx.right_shift(3) |> Nx.max(b) |> Nx.as_type(:f32), Nx.as_type(Nx.add(a, b), :f64),
             Nx.multiply(a, b) |> Nx.add(5) |> Nx.reduce_max(), Nx.multiply(a, 3) |> Nx.sum(),
             a |> Nx.subtract(b) |> Nx.min(Nx.tensor(0xFFFFFFFFFFFFFF00, type: :u64)) |> Nx.as_type(:s64)}
          end

          # (a sum of u64 is u64 on Nx 0.7, s64 on 0.13)
          report = Compiler.report(f, [a, b])
          assert %{type: {:u, 64}} = Enum.find(report, &(:select in &1.ops))
          assert %{type: {:u, 64}} = Enum.find(report, &(:reduce_max in &1.ops))
          fused = jit(f, [a, b], device: @device)
          want = reference(f, [a, b])

          for {got, want} <- Enum.zip(Tuple.to_list(fused), Tuple.to_list(want)),
              do: assert(binary(got) == want)

          # from floats: truncated (past 2^63 too), and outside u64's range saturated as the
          # backend's as_type saturates (where the binary backend wraps)
          g = fn x, a -> x |> Nx.multiply(2.0) |> Nx.as_type(:u64) |> Nx.add(a) end
          x = Nx.tensor([5.0e18, 1.7, 4.0e18, 0.0, -3.0, 1.0e20], type: :f32)
          fused = jit(g, [x, a], device: @device)
          assert binary(fused) == binary(jit(g, [x, a], device: @device, fuse: false))
          assert binary(fused[0..3]) == reference(g, [x, a])[0..3]
        end

        test "iotas computed in a region give the backend's values, in every type and layout" do
          x = Nx.iota({67, 3}, type: :f32) |> Nx.multiply(0.5)

          fs = [
            # along each axis, over the whole shape, broadcast from a smaller one
            fn x -> Nx.add(x, Nx.iota({67, 3}, axis: 0, type: :f32)) end,
            fn x -> Nx.multiply(x, Nx.iota({67, 3}, axis: 1, type: :f64)) end,
            fn x -> Nx.subtract(x, Nx.iota({67, 3}, type: :s32)) end,
            fn x -> Nx.add(x, Nx.iota({1, 3})) |> Nx.multiply(Nx.iota({67, 1}, type: :f32)) end,
            # wrapped into u8 (300 x 7 > 255) and u32, sliced with offsets and strides
            fn x -> Nx.add(x, Nx.slice(Nx.iota({300, 7}, type: :u8), [5, 2], [200, 5], strides: [3, 2])) end,
            fn x ->
              half = Nx.squeeze(Nx.slice(Nx.iota({2, 3 * 67}, type: :u32), [1, 0], [1, 3 * 67]), axes: [0])
              Nx.add(Nx.as_type(x, :u32), Nx.multiply(Nx.reshape(half, {67, 3}), 2_654_435_761))
            end,
            # in a reduction's loop and in a row region's
            fn x -> Nx.sum(Nx.multiply(x, Nx.iota({67, 3}, axis: 0)), axes: [0]) end,
            fn x -> softmax(Nx.multiply(x, Nx.iota({67, 3}, axis: 1, type: :f32))) end
          ]

          for f <- fs do
            assert [%{iotas: [_ | _]}] = Compiler.report(f, [x])
            fused = jit(f, [x], device: @device)
            assert binary(fused) == binary(jit(f, [x], device: @device, fuse: false))
            assert binary(fused) == reference(f, [x])
          end

          # an f32 iota past 2^24 rounds each index once (to even), as Nx writes it: the last
          # 1000 of 2^25 + 2000 (the iota itself is never made)
          n = 33_556_432
          tail = fn x -> Nx.add(x, Nx.slice(Nx.iota({n}, type: :f32), [n - 1000], [1000])) end
          zeros = Nx.broadcast(Nx.tensor(0.0, type: :f32), {1000})
          assert [%{iotas: [{1000}]}] = Compiler.report(tail, [zeros])
          want = Nx.tensor(Enum.to_list((n - 1000)..(n - 1)), type: :f32)
          assert binary(jit(tail, [zeros], device: @device)) == want

          # no iota is made at run time (Nx.Random's counters, a one-hot)
          key = Nx.Random.key(7)
          draw = fn k -> Nx.Random.uniform_split(k, 0.0, 1.0, shape: {3000}) end
          onehot = fn y -> Nx.equal(Nx.new_axis(y, 1), Nx.iota({1, 10})) |> Nx.multiply(2.5) end
          y = Nx.iota({40}) |> Nx.remainder(10)

          for {f, args} <- [{draw, [key]}, {onehot, [y]}] do
            compiled = Nx.Defn.jit(f, compiler: Compiler, device: @device)
            placed = Enum.map(args, &Nx.backend_copy(&1, {Accel.Nx.Backend, device: @device}))
            assert binary(apply(compiled, placed)) == reference(f, args)

            calls =
              Accel.Test.NifCalls.traced([{Accel.NIF, :tensor_iota, 5}], fn -> apply(compiled, placed) end)

            assert calls == []
          end
        end

        test "values of iotas at a smaller shape, computed where they are read, give the backend's values" do
          scores = Nx.iota({8, 64, 64}, type: :f32) |> Nx.multiply(1.0e-3) |> Nx.sin()

          fs = [
            &Defns.masked_scores/1,
            &Defns.biased_scores/1,
            fn x -> Nx.add(x, Nx.remainder(Nx.add(Nx.iota({64, 1}), Nx.iota({1, 64})), 3)) end,
            fn x -> Nx.add(x, Nx.broadcast(Nx.iota({8, 1}) |> Nx.multiply(2), {8, 64, 64}, axes: [0, 1])) end
          ]

          for f <- fs do
            compiled = Nx.Defn.jit(f, compiler: Compiler, device: @device)
            placed = Nx.backend_copy(scores, {Accel.Nx.Backend, device: @device})
            fused = compiled.(placed)
            assert binary(fused) == binary(jit(f, [scores], device: @device, fuse: false))
            assert binary(fused) == reference(f, [scores])
          end

          # the mask is never made
          compiled = Nx.Defn.jit(&Defns.masked_scores/1, compiler: Compiler, device: @device)
          placed = Nx.backend_copy(scores, {Accel.Nx.Backend, device: @device})
          _ = compiled.(placed)
          assert Accel.Test.NifCalls.traced([{Accel.NIF, :tensor_iota, 5}], fn -> compiled.(placed) end) == []
        end

        test "select, comparisons, clip and conversions" do
          f = fn x, y ->
            x
            |> Nx.greater(y)
            |> Nx.select(Nx.multiply(x, y), Nx.clip(Nx.subtract(x, y), -2.5, 2.5))
            |> Nx.as_type(:f64)
            |> Nx.add(Nx.as_type(Nx.less_equal(x, 0.0), :f64))
          end

          x = Nx.iota({6, 4}, type: :f32) |> Nx.subtract(10.0) |> Nx.divide(3.0)
          y = Nx.tensor([1.0, -1.0, 0.5, 2.0], type: :f32)
          assert binary(jit(f, [x, y], device: @device)) == reference(f, [x, y])
        end

        test "a select of floats gives either branch's bits; iotas in 32 bits where they fit, wrapped where not" do
          # signed zeros, infinities, a subnormal and NaN in either branch; predicates of an
          # integer (any nonzero value), a float, and a comparison of the branches
          values = [0.0, -0.0, :infinity, :neg_infinity, 1.5, -2.5, 1.0e-40, :nan]
          p = Nx.tensor([0, 1, 2, 255, 0, 7, 1, 0], type: :u8)

          f = fn p, a, b ->
            {Nx.select(Nx.greater(p, 1), a, b), Nx.select(Nx.as_type(p, :f32), b, a),
             Nx.select(Nx.less(a, b), a, b)}
          end

          for t <- [:f32, :f64] do
            a = Nx.tensor(values, type: t)
            b = Nx.reverse(a)
            assert length(Compiler.report(f, [p, a, b])) == 3

            got = Tuple.to_list(jit(f, [p, a, b], device: @device))
            for {g, w} <- Enum.zip(got, Tuple.to_list(reference(f, [p, a, b]))), do: assert(binary(g) == w)
          end

          x = Nx.iota({6, 300}, type: :f32) |> Nx.divide(7.0) |> Nx.sin()

          # a u8 iota past 255 wraps (0..255, then 0..43), compared in an elementwise region;
          # a column iota of stride 2 and offset 1 against a row's, in a softmax's row region;
          # iotas along the reduced axis and the kept one in a reduction's region, and a sum
          # of comparisons
          wrapped = fn x -> Nx.select(Nx.less(Nx.iota({6, 300}, type: :u8, axis: 1), 100), x, -1.0) end

          strided = fn x ->
            cols = Nx.slice(Nx.iota({6, 600}, axis: 1), [0, 1], [6, 599], strides: [1, 2])
            rows = Nx.iota({6, 300}, axis: 0) |> Nx.multiply(100) |> Nx.add(50)
            Defns.softmax_rows(Nx.select(Nx.less(cols, rows), x, -1.0e9))
          end

          reduced = fn x ->
            mask = Nx.greater_equal(Nx.iota({6, 300}, axis: 1), Nx.iota({6, 300}, axis: 0) |> Nx.multiply(37))

            {Nx.sum(Nx.select(mask, x, 0.0), axes: [0]),
             Nx.sum(Nx.greater(Nx.iota({6, 300}, axis: 1), x), axes: [1])}
          end

          outputs = fn t -> if is_tuple(t), do: Tuple.to_list(t), else: [t] end

          for g <- [wrapped, strided, reduced] do
            assert Enum.all?(Compiler.report(g, [x]), &(&1.iotas != []))
            got = outputs.(jit(g, [x], device: @device))
            for {a, b} <- Enum.zip(got, outputs.(reference(g, [x]))), do: assert(binary(a) == b)
          end
        end

        test "a reduction of a fused chain, over inner, outer and all axes" do
          x = Nx.iota({37, 300}, type: :f32) |> Nx.divide(1000.0)

          for opts <- [[axes: [1]], [axes: [0], keep_axes: true], []],
              op <- [:sum, :reduce_max, :reduce_min] do
            f = fn x -> apply(Nx, op, [x |> Nx.sin() |> Nx.multiply(3.0), opts]) end
            assert [%{ops: [:sin, :multiply, ^op]}] = Compiler.report(f, [x])
            assert_close(jit(f, [x], device: @device), reference(f, [binary(x)]), 1.0e-5)
          end

          i = Nx.iota({40, 50}, type: :s32) |> Nx.multiply(1_000_003)
          g = fn i -> i |> Nx.multiply(3) |> Nx.sum(axes: [0]) end
          assert binary(jit(g, [i], device: @device)) == reference(g, [i])
        end

        test "reductions over rows of every length: NaN in any lane, products, integer wrapping" do
          # the reduced range runs in blocks of 64 into 8 interleaved accumulators, then a tail
          for cols <- [7, 63, 64, 65, 130, 1000] do
            x = Nx.iota({5, cols}, type: :f32) |> Nx.divide(cols * 1000) |> Nx.add(1.0)
            x = x |> Nx.put_slice([1, cols - 1], Nx.tensor([[:nan]], type: :f32))
            x = x |> Nx.put_slice([3, div(cols, 2)], Nx.tensor([[:nan]], type: :f32))

            for op <- [:sum, :product, :reduce_max, :reduce_min] do
              f = fn x -> apply(Nx, op, [x |> Nx.multiply(1.001), [axes: [1]]]) end
              got = binary(jit(f, [x], device: @device))
              want = reference(f, [binary(x)])

              assert Nx.all_close(got, want, rtol: 1.0e-5, equal_nan: true) |> Nx.to_number() == 1,
                     "#{op} over #{cols}: #{inspect(got)} #{inspect(want)}"

              assert got |> Nx.is_nan() |> Nx.to_flat_list() == [0, 1, 0, 1, 0]
            end

            i = Nx.iota({4, cols}, type: :s64) |> Nx.multiply(1_000_003) |> Nx.add(1)
            g = fn i -> i |> Nx.add(7) |> Nx.product(axes: [1]) end
            assert binary(jit(g, [i], device: @device)) == reference(g, [i])

            # a max or min is exact (its lanes combine in a tree): each row holds its extreme in
            # several lanes, in the tail, or as an infinity
            y = Nx.iota({4, cols}, type: :f32) |> Nx.multiply(7.0) |> Nx.remainder(cols * 0.5 + 3.0)
            y = y |> Nx.put_slice([2, cols - 1], Nx.tensor([[:infinity]], type: :f32))
            y = y |> Nx.put_slice([3, 0], Nx.tensor([[:neg_infinity]], type: :f32))

            for op <- [:reduce_max, :reduce_min] do
              f = fn y -> apply(Nx, op, [Nx.negate(y), [axes: [1]]]) end
              assert binary(jit(f, [y], device: @device)) == reference(f, [binary(y)]), "#{op} over #{cols}"
            end
          end
        end

        test "regions reading broadcast inputs run row by row, rows split between threads" do
          f = fn a, b, c -> a |> Nx.multiply(b) |> Nx.subtract(c) |> Nx.exp() end

          for {shape, b_shape, c_shape} <- [
                {{3, 5}, {5}, {3, 1}},
                {{7, 1000}, {1, 1000}, {7, 1}},
                {{2, 3, 17}, {3, 1}, {2, 1, 17}},
                {{1001, 999}, {999}, {1001, 1}}
              ] do
            a = Nx.iota(shape, type: :f32) |> Nx.divide(Nx.size(shape))
            b = Nx.iota(b_shape, type: :f32) |> Nx.divide(100.0)
            c = Nx.iota(c_shape, type: :f32) |> Nx.divide(-50.0)
            fused = jit(f, [a, b, c], device: @device)
            assert binary(fused) == binary(jit(f, [a, b, c], device: @device, fuse: false)), inspect(shape)
            assert_close(fused, reference(f, [a, b, c]), 1.0e-6)
          end
        end

        test "softmax, layer norm and a log-softmax loss run each row in one kernel" do
          layer_norm = fn x, gamma, beta ->
            mean = Nx.mean(x, axes: [-1], keep_axes: true)
            centred = Nx.subtract(x, mean)
            var = centred |> Nx.multiply(centred) |> Nx.mean(axes: [-1], keep_axes: true)
            centred |> Nx.divide(Nx.sqrt(Nx.add(var, 1.0e-5))) |> Nx.multiply(gamma) |> Nx.add(beta)
          end

          loss = fn logits, y ->
            shifted = Nx.subtract(logits, Nx.reduce_max(logits, axes: [1], keep_axes: true))
            logp = Nx.subtract(shifted, Nx.log(Nx.sum(Nx.exp(shifted), axes: [1], keep_axes: true)))
            onehot = Nx.equal(Nx.new_axis(y, 1), Nx.iota({1, Nx.axis_size(logits, 1)}))
            onehot |> Nx.multiply(logp) |> Nx.sum(axes: [1]) |> Nx.negate()
          end

          # (rows enough, and small wholes of any rows: {2, 8}, {5, 3})
          for type <- [:f32, :f64], shape <- [{40, 300}, {3, 20, 70}, {2, 8}, {5, 3}] do
            x = Nx.iota(shape, type: type) |> Nx.multiply(0.37) |> Nx.sin() |> Nx.multiply(4.0)
            # a row holding NaN, one holding infinity, one of -infinity
            x =
              Nx.put_slice(
                x,
                List.duplicate(0, tuple_size(shape)),
                Nx.broadcast(
                  Nx.tensor(:nan, type: type),
                  put_elem(Tuple.duplicate(1, tuple_size(shape)), tuple_size(shape) - 1, 1)
                )
              )

            last = elem(shape, tuple_size(shape) - 1)
            gamma = Nx.iota({last}, type: type) |> Nx.divide(last) |> Nx.add(0.5)
            beta = Nx.iota({1, last}, type: type) |> Nx.divide(-last)

            for {f, args} <- [{&softmax/1, [x]}, {layer_norm, [x, gamma, beta]}] do
              assert [%{ops: ops}] = Compiler.report(f, args, device: @device)
              assert :sum in ops, inspect(ops)
              fused = jit(f, args, device: @device)
              op_by_op = jit(f, args, device: @device, fuse: false)
              tol = if type == :f32, do: 1.0e-5, else: 1.0e-12

              assert Nx.all_close(binary(fused), binary(op_by_op), rtol: tol, atol: tol, equal_nan: true)
                     |> Nx.to_number() == 1

              want = reference(f, Enum.map(args, &binary/1))

              assert Nx.all_close(binary(fused), want, rtol: tol, atol: tol, equal_nan: true)
                     |> Nx.to_number() == 1
            end

            if tuple_size(shape) == 2 do
              logits = Nx.put_slice(x, [1, 0], Nx.tensor([[:infinity, :neg_infinity]], type: type))
              y = Nx.iota({elem(shape, 0)}) |> Nx.remainder(7)
              assert [%{ops: [_ | _] = ops}] = Compiler.report(loss, [logits, y], device: @device)
              assert [:reduce_max, :subtract, :exp, :sum] -- ops == []
              fused = jit(loss, [logits, y], device: @device)
              want = reference(loss, [binary(logits), binary(y)])
              assert Nx.all_close(binary(fused), want, rtol: 1.0e-5, equal_nan: true) |> Nx.to_number() == 1
            end
          end
        end

        test "a mask's uniform blocks (causal, padding) are computed once per row: the bits of the mask read from memory" do
          causal = fn s, _ -> Nx.greater_equal(Nx.iota(s.shape, axis: 1), Nx.iota(s.shape, axis: 2)) end
          later = fn s, _ -> Nx.less(Nx.iota(s.shape, axis: 1), Nx.iota(s.shape, axis: 2)) end
          # (masking each row's first columns, before the diagonal)
          earlier = fn s, _ -> Nx.less_equal(Nx.iota(s.shape, axis: 1), Nx.iota(s.shape, axis: 2)) end

          padding = fn s, lengths ->
            Nx.less(Nx.iota(s.shape, axis: 2), Nx.reshape(lengths, {:auto, 1, 1}))
          end

          # {the mask, what it masks}: softmax with -1.0e9 (whose exp is 0: every loop skips
          # masked blocks), the branches the other way round with -infinity, -1.0 (its exp is not
          # 0: the sum computes every block), a sum, a product and a min of the row's unmasked
          # values, a uniform value computed on, and a mask of the first columns
          cases = [
            {causal, &softmax(Nx.select(&2, &1, -1.0e9))},
            {later, &softmax(Nx.select(&2, Nx.Constants.neg_infinity(Nx.type(&1)), &1))},
            {causal, &softmax(Nx.select(&2, &1, -1.0))},
            {padding, &Nx.sum(Nx.select(&2, &1, -0.0), axes: [-1])},
            {padding, &Nx.product(Nx.select(&2, Nx.divide(&1, 4.0), 1.0), axes: [-1])},
            {causal, &Nx.reduce_min(Nx.select(&2, &1, :infinity), axes: [-1])},
            {later, &softmax(Nx.multiply(Nx.select(&2, 0.0, &1), 3.0))},
            {earlier, &softmax(Nx.select(&2, &1, -1.0e9))}
          ]

          # rows of 200 (three whole blocks and a tail) and of 64 (one), where the mask takes a row
          # wholly (row 0 of the padding mask, length 0), in part or not at all (rows past the
          # columns); NaN and infinity under the mask and outside it
          for type <- [:f32, :f64], shape <- [{3, 150, 200}, {2, 70, 64}], {mask, body} <- cases do
            s = Nx.iota(shape, type: type) |> Nx.multiply(0.37) |> Nx.sin() |> Nx.multiply(4.0)
            s = s |> Nx.put_slice([0, 5, 0], Nx.tensor([[[:nan, :infinity]]], type: type))

            s =
              s |> Nx.put_slice([1, 3, elem(shape, 2) - 2], Nx.tensor([[[:nan, :neg_infinity]]], type: type))

            lengths = Nx.tensor([0, 130, 61] |> Enum.take(elem(shape, 0)))

            from_iotas = fn s, lengths -> body.(s, mask.(s, lengths)) end
            from_memory = fn s, m -> body.(s, m) end
            m = mask.(s, lengths)

            assert [%{source: source}] = Compiler.report(from_iotas, [s, lengths], device: @device)
            assert source =~ "const int uniform = ends =="
            assert [%{source: source}] = Compiler.report(from_memory, [s, m], device: @device)
            refute source =~ "const int uniform"

            fused = binary(jit(from_iotas, [s, lengths], device: @device))
            assert Nx.to_binary(fused) == Nx.to_binary(binary(jit(from_memory, [s, m], device: @device)))

            tol = if type == :f32, do: 1.0e-5, else: 1.0e-12
            want = reference(from_iotas, [s, lengths])
            assert Nx.all_close(fused, want, rtol: tol, atol: tol, equal_nan: true) |> Nx.to_number() == 1
          end

          # a comparison of a sum of iotas, or of an iota with a column's value, is computed in
          # every block
          shifted = fn s ->
            softmax(
              Nx.select(
                Nx.greater_equal(Nx.iota(s.shape, axis: 1), Nx.add(Nx.iota(s.shape, axis: 2), 3)),
                s,
                -1.0e9
              )
            )
          end

          by_value = fn s -> softmax(Nx.select(Nx.greater_equal(Nx.iota(s.shape, axis: 2), s), s, -1.0e9)) end

          for f <- [shifted, by_value] do
            s = Nx.iota({2, 100, 130}, type: :f32) |> Nx.multiply(0.37) |> Nx.sin() |> Nx.multiply(90.0)
            assert [%{source: source}] = Compiler.report(f, [s], device: @device)
            refute source =~ "const int uniform"

            assert Nx.all_close(binary(jit(f, [s], device: @device)), reference(f, [s]), rtol: 1.0e-5)
                   |> Nx.to_number() == 1
          end
        end

        # PoCL once wrote nothing at all from such a kernel (the output kept what the buffer held):
        # its compiler could prove exp's argument NaN (kernels/tensor.h, ACCEL_NAN_PASSES).
        test "a function of rows that a mask makes NaN throughout gives NaN, exact and fast" do
          for type <- [:f32, :f64],
              math <- [:exact, :fast],
              fun <- [:exp, :expm1, :sigmoid, :tanh, :log, :sin] do
            f = fn s ->
              x = Nx.select(Nx.less(225, Nx.iota(s.shape, axis: 2)), s, Nx.Constants.nan(type))
              y = apply(Nx, fun, [Nx.subtract(x, Nx.reduce_max(x, axes: [-1], keep_axes: true))])
              Nx.divide(y, Nx.sum(y, axes: [-1], keep_axes: true))
            end

            s = Nx.iota({1, 16, 64}, type: type) |> Nx.multiply(0.37) |> Nx.sin()
            out = binary(jit(f, [s], device: @device, math: math))
            assert Nx.to_number(Nx.all(Nx.is_nan(out))) == 1, inspect({type, math, fun, out[0][0][0..3]})
          end
        end

        test "math: :fast computes exp, sigmoid and tanh within their ulps, alone and fused" do
          # 2^20 values over every range the functions have (underflow to subnormals and 0,
          # overflow, tanh's two forms) and the special values
          specials = [:nan, :infinity, :neg_infinity, 0.0, -0.0, 1.0e-30, -88.7, -100.0, 0.625, -9.0]

          range =
            Nx.iota({1_048_576 - 10}, type: :f32) |> Nx.multiply(205.0 / 1_048_576) |> Nx.subtract(110.0)

          x = Nx.concatenate([range, Nx.tensor(specials, type: :f32)])

          f = fn x -> {Nx.exp(x), Nx.sigmoid(x), Nx.tanh(x)} end
          assert [:exp, :sigmoid, :tanh] == Enum.flat_map(Compiler.report(f, [x], math: :fast), & &1.ops)
          assert [] == Compiler.report(f, [x])
          assert Enum.all?(Compiler.report(f, [x], math: :fast), &(&1.source =~ "_fast("))

          # the most ulps off: Accel's own functions on the CPU (c_src/test/host_math_test.cpp);
          # OpenCL's and CUDA's specified bounds for their exp and tanh
          ulps = if @device == :cpu, do: {1, 2, 1}, else: {3, 6, 5}
          fast = jit(f, [x], device: @device, math: :fast)
          exact = jit(f, [x], device: @device)

          for i <- 0..2 do
            assert max_ulps(elem(fast, i), elem(exact, i)) <= elem(ulps, i), "output #{i}"
          end

          # a row region around exp (softmax over 4096 rows of 256)
          z = Nx.iota({4096, 256}, type: :f32) |> Nx.multiply(0.37) |> Nx.sin() |> Nx.multiply(30.0)
          assert [%{source: source}] = Compiler.report(&softmax/1, [z], math: :fast)
          assert source =~ "accel_f32_exp_fast("

          assert_close(
            jit(&softmax/1, [z], device: @device, math: :fast),
            jit(&softmax/1, [z], device: @device),
            1.0e-6
          )
        end

        test "a reduction to few values is split over the device's cores and stays accurate" do
          x = Nx.iota({1_000_000}, type: :f32) |> Nx.divide(1_000_000.0)
          f = fn x -> x |> Nx.multiply(x) |> Nx.add(1.0) |> Nx.sum() end
          # sum of (k/n)^2 + 1 for k < n, exactly
          n = 1_000_000
          exact = (n - 1) * n * (2 * n - 1) / 6 / (n * n) + n
          assert_in_delta Nx.to_number(jit(f, [x], device: @device)), exact, exact * 1.0e-6
        end

        test "an integer zero divisor raises ArgumentError, as the backend does" do
          f = fn x, y -> x |> Nx.add(1) |> Nx.remainder(y) end
          x = Nx.tensor([1, 2, 3], type: :s64)
          y = Nx.tensor([1, 0, 2], type: :s64)

          assert_raise ArgumentError, ~r/division by zero in a fused remainder/, fn ->
            jit(f, [x, y], device: @device)
          end

          assert_raise ArgumentError, ~r/division by zero/, fn ->
            jit(f, [x, y], device: @device, fuse: false)
          end
        end

        test "cond and while run around fused regions, and fuse in their bodies" do
          assert [_, %{ops: [:exp, :add]}, %{ops: [:negate, :subtract]}] =
                   Compiler.report(&Defns.branchy/1, [Nx.template({3}, :f32)])

          assert [%{ops: [:multiply, :subtract]}] =
                   Compiler.report(&Defns.counted/2, [Nx.template({3}, :f32), Nx.template({}, :s64)])

          # five iterations of a constant count: unrolled, one region
          assert [%{ops: ops}] = Compiler.report(&Defns.looped/1, [Nx.template({3}, :f32)])
          assert ops == List.duplicate([:multiply, :subtract], 5) |> List.flatten()

          for x <- [Nx.iota({3, 3}, type: :f32), Nx.tensor([[-5.0]])] do
            assert_close(
              jit(&Defns.branchy/1, [x], device: @device),
              reference(&Defns.branchy/1, [x]),
              1.0e-6
            )
          end

          x = Nx.iota({4}, type: :f32)
          assert_close(jit(&Defns.looped/1, [x], device: @device), reference(&Defns.looped/1, [x]), 1.0e-6)
          n = Nx.tensor(3)

          assert_close(
            jit(&Defns.counted/2, [x, n], device: @device),
            reference(&Defns.counted/2, [x, n]),
            1.0e-6
          )
        end

        test "Nx.Serving runs functions it compiles" do
          serving =
            Nx.Serving.jit(&softmax/1, compiler: Compiler, device: @device)
            |> Nx.Serving.batch_size(4)

          batch = Nx.Batch.stack([Nx.tensor([1.0, 2.0, 3.0]), Nx.tensor([0.0, 0.0, 1.0])])
          result = Nx.Serving.run(serving, batch)

          assert_close(
            result,
            reference(&softmax/1, [Nx.stack([Nx.tensor([1.0, 2.0, 3.0]), Nx.tensor([0.0, 0.0, 1.0])])]),
            1.0e-6
          )
        end
      end
    end

    test "a function is compiled once per shapes, types and options" do
      handler = "accel-compile-#{inspect(make_ref())}"
      f = fn x -> x |> Nx.cos() |> Nx.multiply(0.75) |> Nx.add(0.125) end

      :telemetry.attach(handler, [:accel, :nx, :compile], &__MODULE__.forward/4, self())

      try do
        fun = Nx.Defn.jit(f, compiler: Compiler, device: :cpu)
        a = fun.(Nx.iota({9}, type: :f32))
        assert_receive {:compiled, %{duration: d}, %{regions: [%{ops: [:cos, :multiply, :add]}]}} when d > 0
        assert binary(fun.(Nx.iota({9}, type: :f32))) == binary(a)
        # (other tests compile at the same time: only this function's compilations count)
        refute_receive {:compiled, _, %{regions: [%{ops: [:cos, :multiply, :add]}]}}, 50
        fun.(Nx.iota({10}, type: :f32))
        assert_receive {:compiled, _, %{regions: [%{ops: [:cos, :multiply, :add], shape: {10}}]}}
      after
        :telemetry.detach(handler)
      end
    end

    test "the same tensors in other containers are other functions" do
      f = Nx.Defn.jit(fn x -> x end, compiler: Compiler, device: :cpu)
      assert %Nx.Tensor{} = f.(Nx.tensor(1))
      assert {%Nx.Tensor{}} = f.({Nx.tensor(1)})
      assert %{b: %Nx.Tensor{}} = f.(%{b: Nx.tensor(1)})
      assert %{c: %Nx.Tensor{}} = f.(%{c: Nx.tensor(1)})
    end

    def forward(_event, measure, meta, pid), do: send(pid, {:compiled, measure, meta})

    describe "build: :background (the default outside this suite, which waits: test_helper.exs)" do
      setup do
        handler = "accel-build-#{inspect(make_ref())}"
        events = [[:accel, :nx, :compile], [:accel, :nx, :built]]
        :telemetry.attach_many(handler, events, &__MODULE__.forward_build/4, self())
        on_exit(fn -> :telemetry.detach(handler) end)
        # a constant of this run's in every kernel text: no cache holds its kernels
        %{c: Defns.fresh_constant()}
      end

      # the handlers are global and other tests compile at the same time: only the events of this
      # test's process and of the processes it started (its tasks, the background builder it
      # started) count
      def forward_build(event, measure, meta, pid) do
        if self() == pid or pid in Process.get(:"$callers", []) do
          tag = if event == [:accel, :nx, :built], do: :built, else: :compiled
          send(pid, {tag, measure, meta})
        end
      end

      test "the first calls run unfused while the fused kernels build, later calls fused, with the same bits",
           %{c: c} do
        # a row region (softmax's shape) and an elementwise one
        f = fn x ->
          e = Nx.exp(Nx.subtract(x, Nx.reduce_max(x, axes: [1], keep_axes: true)))
          {Nx.divide(e, Nx.sum(e, axes: [1], keep_axes: true)), x |> Nx.multiply(c) |> Nx.sin()}
        end

        x = Nx.iota({64, 100}, type: :f32) |> Nx.multiply(0.37) |> Nx.sin() |> Nx.multiply(5.0)
        fun = Nx.Defn.jit(f, compiler: Compiler, device: :cpu, build: :background)
        first = fun.(x)
        assert_receive {:compiled, _, %{build: :background, key: key, regions: [_, _]}}
        # the compiler takes about 0.1 s; a call on 6,400 elements well under a millisecond: the
        # build was still under way, so the first call ran unfused
        refute_received {:built, _, %{key: ^key}}
        assert_receive {:built, %{duration: d}, %{key: ^key, errors: []}} when d > 0, 120_000

        fused = fun.(x)
        unfused = jit(f, [x], device: :cpu, fuse: false)
        waited = jit(f, [x], device: :cpu, build: :wait)

        for {a, b, u, w} <-
              [Tuple.to_list(first), Tuple.to_list(fused), Tuple.to_list(unfused), Tuple.to_list(waited)]
              |> Enum.zip() do
          assert binary(a) == binary(u)
          assert binary(b) == binary(w)
          assert binary(a) == binary(b)
        end

        # the kernels are built and loaded now: the same regions in another function wait for nothing
        again = Nx.Defn.jit(fn x -> f.(x) end, compiler: Compiler, device: :cpu, build: :background)
        again.(x)
        assert_receive {:compiled, _, %{build: :wait, regions: [_, _]}}
      end

      test "functions compiled at once build one after the other, and each runs fused after", %{c: c} do
        x = Nx.iota({16, 50}, type: :f32) |> Nx.divide(100.0)

        funs =
          for k <- 1..3 do
            f = fn x -> x |> Nx.multiply(c + k) |> Nx.exp() |> Nx.sum(axes: [1]) end
            {f, Nx.Defn.jit(f, compiler: Compiler, device: :cpu, build: :background)}
          end

        firsts = funs |> Enum.map(fn {_, fun} -> Task.async(fn -> fun.(x) end) end) |> Task.await_many(60_000)
        keys = for _ <- funs, do: assert_receive({:compiled, _, %{build: :background, key: key}}) && key

        for key <- keys, do: assert_receive({:built, _, %{key: ^key, errors: []}}, 120_000)

        for {{f, fun}, first} <- Enum.zip(funs, firsts) do
          assert binary(fun.(x)) == binary(first)
          assert binary(first) == binary(jit(f, [x], device: :cpu, build: :wait))
        end
      end

      # (inputs made on the device: the binary backend takes seconds for tens of millions)
      @cpu {Accel.Nx.Backend, device: :cpu}

      # the same 9 operations on 2^23 f32 elements before `rest` more (each a tensor of 32 MiB)
      defp operations(x, c, rest) do
        x
        |> Nx.multiply(c)
        |> Nx.sin()
        |> Nx.add(1.0)
        |> Nx.exp()
        |> Nx.sqrt()
        |> Nx.cos()
        |> Nx.multiply(0.5)
        |> Nx.tanh()
        |> Nx.log1p()
        |> then(&Enum.reduce(1..rest//1, &1, fn k, t -> t |> Nx.multiply(1.0 + k / 64) |> Nx.cos() end))
      end

      test "unfused operations writing up to 512 MiB, two tensors at once, run while the compiler builds",
           %{c: c} do
        # 9 operations: 288 MiB written, each tensor freed after its reader (64 MiB live at most)
        f = &operations(&1, c, 0)
        x = Nx.iota({8_388_608}, type: :f32, backend: @cpu) |> Nx.divide(8_388_608)
        out = Nx.Defn.jit(f, compiler: Compiler, device: :cpu, build: :background).(x)
        assert_receive {:compiled, _, %{build: :background, key: key, regions: [%{ops: ops}]}}
        assert length(ops) >= 9
        assert_receive {:built, _, %{key: ^key, errors: []}}, 120_000
        assert binary(out) == binary(jit(f, [x], device: :cpu, fuse: false))
      end

      test "where the unfused operations would write over 512 MiB, the first call waits for the compiler",
           %{c: c} do
        # 9 + 2 x 4 operations: 544 MiB
        f = &operations(&1, c, 4)
        x = Nx.iota({8_388_608}, type: :f32, backend: @cpu) |> Nx.divide(8_388_608)
        out = Nx.Defn.jit(f, compiler: Compiler, device: :cpu, build: :background).(x)
        assert_receive {:compiled, _, %{build: :wait, regions: [%{ops: ops}]}}
        assert length(ops) >= 17
        assert binary(out) == binary(jit(f, [x], device: :cpu, fuse: false))

        # the same operations into a sum: a region of the sum's shape, whose operations before it
        # write tensors of the input's
        sum = fn x -> x |> f.() |> Nx.sum() end
        Nx.Defn.jit(sum, compiler: Compiler, device: :cpu, build: :background).(x)
        assert_receive {:compiled, _, %{build: :wait, regions: [%{ops: ops, shape: {}}]}}
        assert length(ops) >= 18
      end

      test "where the unfused intermediates would peak over 256 MiB above the fused ones', the first call waits",
           %{c: c} do
        # 3 operations on 40 Mi f32 elements: 480 MiB written; the second's result is made while
        # the first's lives, 320 MiB of intermediates (the fused function makes only its result)
        f = fn x -> x |> Nx.multiply(c) |> Nx.add(1.0) |> Nx.multiply(0.5) end
        x = Nx.iota({41_943_040}, type: :f32, backend: @cpu)
        out = Nx.Defn.jit(f, compiler: Compiler, device: :cpu, build: :background).(x)
        assert_receive {:compiled, _, %{build: :wait, regions: [%{ops: [:multiply, :add, :multiply]}]}}
        last = Nx.tensor([41_943_039], type: :f32, backend: Nx.BinaryBackend)
        assert binary(Nx.slice(out, [41_943_039], [1])) == f.(last)

        # an intermediate of both (a product's 282 MiB): only the unfused function's own count
        g = fn x ->
          outer = Nx.dot(Nx.new_axis(x, 1), [1], Nx.new_axis(x, 0), [0])
          outer |> Nx.dot(x) |> Nx.multiply(c) |> Nx.sin()
        end

        x = Nx.iota({8400}, type: :f32, backend: @cpu) |> Nx.divide(8400)
        out = Nx.Defn.jit(g, compiler: Compiler, device: :cpu, build: :background).(x)
        assert_receive {:compiled, _, %{build: :background, key: key, regions: [%{shape: {8400}}]}}
        assert_receive {:built, _, %{key: ^key, errors: []}}, 120_000
        assert binary(out) == binary(jit(g, [x], device: :cpu, fuse: false))
      end
    end

    test "arguments from other backends are copied to the device; the result stays there" do
      x = Nx.tensor([1.0, 2.0], backend: Nx.BinaryBackend)
      out = jit(fn x -> x |> Nx.multiply(3.0) |> Nx.add(1.0) end, [x], device: :cpu)
      assert %Accel.Nx.Backend{tensor: %{device: {:cpu, 0}}} = out.data
      assert Nx.to_flat_list(out) == [4.0, 7.0]
      assert Nx.to_flat_list(x) == [1.0, 2.0]
    end

    # Nx.Defn.stream/3 is Nx 0.7's (later versions removed it)
    if function_exported?(Nx.Defn, :stream, 3) do
      test "Nx.Defn.stream runs the compiled function on each chunk" do
        f = fn x, acc -> {x |> Nx.multiply(2.0) |> Nx.add(acc), x |> Nx.exp() |> Nx.add(acc)} end

        stream =
          Nx.Defn.stream(f, [Nx.template({3}, :f32), Nx.broadcast(0.0, {3})], compiler: Compiler, device: :cpu)

        chunks = for i <- 1..3, do: Nx.tensor([i, i + 1, i + 2], type: :f32)

        {outputs, acc} =
          Enum.map_reduce(chunks, Nx.broadcast(0.0, {3}), fn chunk, acc ->
            {expected, acc} = f.(chunk, acc)
            Nx.Stream.send(stream, chunk)
            assert_close(Nx.Stream.recv(stream), expected, 1.0e-6)
            {expected, acc}
          end)

        assert length(outputs) == 3
        assert_close(Nx.Stream.done(stream), acc, 1.0e-6)
      end
    end

    test "a function's regions are built into one library, each entry the right region's" do
      # three regions of other kernels than any other test's (their constants), all built in one
      # compiler run; the function then runs them from that library: an entry mixed up with
      # another region's would give another region's values
      f = fn x, y ->
        a = x |> Nx.multiply(1.2345) |> Nx.add(y)
        b = a |> Nx.exp() |> Nx.sum(axes: [1])
        c = Nx.dot(a, Nx.transpose(a)) |> Nx.subtract(2.345) |> Nx.abs()
        {b |> Nx.multiply(3.456) |> Nx.add(1.0), Nx.sum(c, axes: [0]) |> Nx.max(0.5), a}
      end

      x = Nx.iota({24, 40}, type: :f32) |> Nx.divide(1000.0)
      y = Nx.iota({40}, type: :f32) |> Nx.divide(-500.0)
      regions = Compiler.report(f, [x, y], device: :cpu)
      assert length(regions) >= 3
      members = Enum.map(regions, &{&1.kernel, &1.source})
      path = Accel.Kernel.Native.build_together(members)
      assert is_binary(path) and File.exists?(path)
      assert Accel.Kernel.Native.build_together(members) == :loaded

      fused = jit(f, [x, y], device: :cpu)
      op_by_op = jit(f, [x, y], device: :cpu, fuse: false)

      for i <- 0..2,
          do: assert_close(elem(fused, i), elem(op_by_op, i), 1.0e-6)
    end

    test "a product read transposed is the product the other way round, with no transpose left" do
      x = Nx.iota({64, 30}, type: :f32) |> Nx.multiply(0.01) |> Nx.sin()
      y = Nx.iota({64, 20}, type: :f32) |> Nx.multiply(0.02) |> Nx.cos()
      # (what Nx.Defn.grad makes of a weight's gradient)
      f = fn x, y -> Nx.transpose(Nx.dot(x, [0], y, [0])) end
      {expr, _} = Compiler.Fusion.rewrite(apply(Nx.Defn.debug_expr(f), [x, y]))
      assert %Nx.Defn.Expr{op: :dot, args: [b, [0], [], a, [0], []]} = expr.data
      assert {a.shape, b.shape, expr.shape} == {{64, 30}, {64, 20}, {20, 30}}
      assert_close(jit(f, [x, y], device: :cpu), reference(f, [x, y]), 1.0e-5)

      # batched: the batch axes stay first
      xb = Nx.reshape(x, {4, 16, 30})
      yb = Nx.reshape(y, {4, 16, 20})
      g = fn x, y -> Nx.transpose(Nx.dot(x, [1], [0], y, [1], [0]), axes: [0, 2, 1]) end
      {expr, _} = Compiler.Fusion.rewrite(apply(Nx.Defn.debug_expr(g), [xb, yb]))
      assert %Nx.Defn.Expr{op: :dot, args: [_, [1], [0], _, [1], [0]]} = expr.data
      assert_close(jit(g, [xb, yb], device: :cpu), reference(g, [xb, yb]), 1.0e-5)

      # another order of the axes, or a product used twice, keeps its transpose
      h = fn x, y -> Nx.transpose(Nx.dot(Nx.reshape(x, {64, 3, 10}), [0], y, [0]), axes: [1, 0, 2]) end
      {expr, _} = Compiler.Fusion.rewrite(apply(Nx.Defn.debug_expr(h), [x, y]))
      assert %Nx.Defn.Expr{op: :transpose} = expr.data
      assert_close(jit(h, [x, y], device: :cpu), reference(h, [x, y]), 1.0e-5)

      k = fn x, y ->
        d = Nx.dot(x, [0], y, [0])
        {Nx.transpose(d), d}
      end

      {{expr, _}, _} = Compiler.Fusion.rewrite(apply(Nx.Defn.debug_expr(k), [x, y]))
      assert %Nx.Defn.Expr{op: :transpose} = expr.data
    end

    test "gradients compile" do
      f = fn x -> Nx.Defn.grad(x, fn x -> x |> Nx.sin() |> Nx.multiply(x) |> Nx.sum() end) end
      x = Nx.tensor([0.5, 1.0, 2.0], type: :f64)
      assert_close(jit(f, [x], device: :cpu), reference(f, [x]), 1.0e-12)
    end

    # Where no GPU is: fused kernels as :cuda runs them, compiled by NVRTC (which needs no driver).
    @tag :nvrtc
    test "fused kernels compile for CUDA" do
      graphs = [
        {&chain/2, [Nx.template({64, 33}, :f32), Nx.template({33}, :f32)]},
        {&softmax/1, [Nx.template({8, 5}, :f64)]},
        # (rows that fetch the next row on the host)
        {&softmax/1, [Nx.template({16, 256}, :f32)]},
        # (a causal mask's uniform blocks)
        {&Defns.masked_scores/1, [Nx.template({4, 128, 128}, :f32)]},
        {fn x -> x |> Nx.multiply(3) |> Nx.quotient(7) |> Nx.sum() end, [Nx.template({100_000}, :s32)]},
        {fn x, y -> Nx.select(Nx.greater(x, y), x, y) |> Nx.as_type(:u8) |> Nx.add(1) end,
         [Nx.template({4}, :f32), Nx.template({4}, :s64)]}
      ]

      for {fun, args} <- graphs, region <- Compiler.report(fun, args) do
        assert {<<0x7F, "ELF", _::binary>>, "sm_90"} =
                 Accel.NIF.cuda_kernel_code(region.source, 90, "accel_user"),
               inspect(region.ops)
      end
    end

    describe "a call's steps" do
      # Each function twice, as steps (the default) and as Nx.Defn.Evaluator runs it (plan: false):
      # the same operations in the same order, so the same bits; and which one ran, from the
      # telemetry event of the compilation (sent in the compiling process: this test's).
      defp runs(fun, args, opts \\ []) do
        handler = "accel-runner-#{inspect(make_ref())}"

        :telemetry.attach(handler, [:accel, :nx, :compile], &__MODULE__.forward_runner/4, self())

        try do
          stepped = jit(fun, args, [device: :cpu] ++ opts)
          assert_received {:runner, runner}
          evaluated = jit(fun, args, [device: :cpu, plan: false] ++ opts)
          assert_received {:runner, :evaluator}
          assert bits(stepped) == bits(evaluated)
          {runner, stepped}
        after
          :telemetry.detach(handler)
        end
      end

      def forward_runner(_event, _measure, meta, pid),
        do: if(self() == pid, do: send(pid, {:runner, meta.runner}))

      defp bits(result),
        do:
          [result]
          |> Nx.Defn.Composite.flatten_list()
          |> Enum.map(&{&1.shape, &1.type, &1.names, Nx.to_binary(&1)})

      defp ramp(shape, scale), do: Nx.iota(shape, type: :f32) |> Nx.multiply(scale) |> Nx.sin()

      defp step(x, y, w1, b1, w2, b2) do
        grads =
          Nx.Defn.grad({w1, b1, w2, b2}, fn {w1, b1, w2, b2} ->
            h = Nx.max(Nx.add(Nx.dot(x, w1), b1), 0.0)
            logits = Nx.add(Nx.dot(h, w2), b2)
            logp = Nx.subtract(logits, Nx.log(Nx.sum(Nx.exp(logits), axes: [1], keep_axes: true)))
            onehot = Nx.equal(Nx.new_axis(y, 1), Nx.iota({1, 2}))
            Nx.negate(Nx.mean(Nx.sum(Nx.multiply(onehot, logp), axes: [1])))
          end)

        {w1, b1, w2, b2}
        |> Tuple.to_list()
        |> Enum.zip(Tuple.to_list(grads))
        |> Enum.map(fn {p, g} -> Nx.subtract(p, Nx.multiply(0.1, g)) end)
        |> List.to_tuple()
      end

      test "a training step (a gradient, fused regions, products, a tuple of results)" do
        args = [
          ramp({3, 8}, 1.0),
          Nx.tensor([0, 1, 1]),
          ramp({8, 4}, 0.01),
          ramp({4}, 0.1),
          ramp({4, 2}, 0.1),
          ramp({2}, 1.0)
        ]

        assert {:plan, {w1, _, _, b2}} = runs(&step/6, args)
        assert w1.shape == {8, 4} and b2.shape == {2}
        assert_close(b2, apply(&step/6, Enum.map(args, &binary/1)) |> elem(3), 1.0e-5)
      end

      test "lists of operands, tensor start indices, creation, captured tensors, tuple results" do
        captured = Nx.tensor([[1.0, -1.0], [0.5, 2.0]])

        f = fn x, i ->
          # (Nx.stack and Nx.concatenate take lists of tensors; slice and put_slice tensor starts)
          s = Nx.stack([x, Nx.multiply(x, 2.0)])
          c = Nx.concatenate([x, Nx.iota({1, 2}, type: :f32), Nx.eye(2, type: :f32)])
          part = Nx.slice(c, [i, 0], [2, 2])
          put = Nx.put_slice(x, [i, 0], Nx.add(Nx.slice(x, [0, 0], [1, 2]), 10.0))
          {q, r} = Nx.LinAlg.qr(Nx.add(part, captured))
          {s, Nx.Defn.Kernel.stop_grad(part), put, q, r}
        end

        assert {:plan, {s, part, put, _q, r}} = runs(f, [Nx.tensor([[1.0, 2.0], [3.0, 4.0]]), Nx.tensor(1)])
        assert s.shape == {2, 2, 2}
        assert Nx.to_flat_list(part) == [3.0, 4.0, 0.0, 1.0]
        assert Nx.to_flat_list(put) == [1.0, 2.0, 11.0, 12.0]
        assert r.shape == {2, 2}
      end

      test "results in a map, one value twice, a parameter returned as it is, an unused parameter" do
        f = fn x, _unused, y -> %{a: Nx.exp(x), b: Nx.exp(x), c: y, d: Nx.add(x, 1.0)} end
        assert {:plan, out} = runs(f, [Nx.tensor([0.0, 1.0]), Nx.tensor(5), Nx.tensor([3, 4])])
        assert Nx.to_binary(out.a) == Nx.to_binary(out.b)
        assert Nx.to_flat_list(out.c) == [3, 4]
      end

      test "names and vectorized axes are the function's (Nx traces vectorized arguments devectorized)" do
        x = Nx.tensor([[1.0, 2.0], [3.0, 4.0]], names: [:rows, :cols])
        {_, out} = runs(fn x -> Nx.multiply(x, 2.0) end, [x])
        assert out.names == [:rows, :cols]

        v = Nx.vectorize(Nx.tensor([[1.0, 2.0], [3.0, 4.0]]), :batch)
        {:plan, out} = runs(fn x -> Nx.sum(Nx.multiply(x, 2.0)) end, [v])
        assert out.vectorized_axes == [batch: 2]
        assert Nx.to_flat_list(Nx.devectorize(out)) == [6.0, 14.0]
      end

      test "hooks, inner functions and :garbage_collect run on the evaluator" do
        x = Nx.tensor([1.0, -2.0, 3.0])
        assert {:evaluator, _} = runs(fn x -> Nx.reduce(x, 0.0, fn a, b -> Nx.add(a, b) end) end, [x])
        assert {:evaluator, _} = runs(fn x -> Nx.exp(x) end, [x], garbage_collect: true)
        hooked = fn x -> Nx.Defn.Kernel.hook(Nx.exp(x), fn _ -> :ok end) end
        assert {:evaluator, _} = runs(hooked, [x])
      end

      test "while and cond are steps: loops, branches, nested, each the evaluator's bits" do
        x = Nx.tensor([1.0, -2.0, 3.0])
        assert {:plan, _} = runs(&Defns.counted/2, [x, Nx.tensor(4)])
        # (each call a shape of its own: compiled anew, so that its runner is reported)
        assert {:plan, _} = runs(&Defns.counted/2, [Nx.tensor([1.0, 2.0]), Nx.tensor(0)])
        # (a loop of a constant count is unrolled: straight-line code, planned)
        assert {:plan, _} = runs(&Defns.looped/1, [x])
        # both branches
        assert {:plan, _} = runs(&Defns.branchy/1, [x])
        assert {:plan, _} = runs(&Defns.branchy/1, [Nx.tensor([10.0, -20.0, 30.0, 4.0])])

        # every clause of the inner cond taken on some iteration, the state a nested tuple
        for {x, n} <- [{x, 4}, {Nx.tensor([30.0, 20.0, 10.0, 5.0]), 2}, {Nx.tensor([-1.0, -2.0]), 3}] do
          assert {:plan, got} = runs(&Defns.nested_branches/2, [x, Nx.tensor(n)])
          assert bits(got) == bits(reference(&Defns.nested_branches/2, [binary(x), Nx.tensor(n)]))
        end
      end

      test "a branch not taken computes nothing; constants of loops and branches stay the plan's" do
        # (i = 0: the quotient's branch is not taken, so no division by zero raises)
        assert {:plan, {q, r}} = runs(&Defns.guarded/1, [Nx.tensor(0)])
        assert {Nx.to_number(q), Nx.to_number(r)} == {-1, 0}
        assert {:plan, {a, b}} = runs(&Defns.shared_by_branches/1, [Nx.tensor(0)])
        assert {Nx.to_number(a), Nx.to_number(b)} == {0, 1}
        # (another type: compiled anew)
        assert {:plan, {a, b}} = runs(&Defns.shared_by_branches/1, [Nx.tensor(4, type: :s16)])
        assert {Nx.to_number(a), Nx.to_number(b)} == {26, 50}

        f = Nx.Defn.jit(&Defns.guarded/1, compiler: Compiler, device: :cpu)
        assert {q, r} = f.(Nx.tensor(8))
        assert {Nx.to_number(q), Nx.to_number(r)} == {12, 7}
        assert_raise ArgumentError, fn -> Nx.quotient(Nx.tensor(100, backend: Accel.Nx.Backend), 0) end

        # A constant the function returns is the caller's own: deallocating it leaves the next
        # call's result whole.
        for _ <- 1..3 do
          {_, r} = f.(Nx.tensor(8))
          assert Nx.to_number(r) == 7
          assert Nx.backend_deallocate(r) == :ok
        end

        g = Nx.Defn.jit(&Defns.steps_or_constant/1, compiler: Compiler, device: :cpu)

        for n <- [0, 3, 0, 2] do
          got = g.(Nx.tensor(n))
          assert bits(got) == bits(reference(&Defns.steps_or_constant/1, [Nx.tensor(n)]))
          Nx.backend_deallocate(got)
        end
      end

      test "a long chain: values in reused slots, each read before its slot is written again" do
        f = fn x ->
          Enum.reduce(1..40, {x, x}, fn i, {a, b} ->
            # (a dot between steps keeps them apart: no fusion)
            c = Nx.dot(Nx.add(a, i * 1.0), Nx.multiply(b, 0.5))
            {Nx.divide(c, Nx.add(Nx.abs(c), 1.0)), a}
          end)
        end

        assert {:plan, {a, b}} = runs(f, [ramp({4, 4}, 0.3)])
        assert {{4, 4}, {4, 4}} == {a.shape, b.shape}
        assert_close(a, f.(binary(ramp({4, 4}, 0.3))) |> elem(0), 1.0e-5)
      end
    end

    describe "one crossing per call" do
      # Over Accel tensors, a compiled function records its NIF calls on its second call and then
      # replays them in one NIF call (c_src/nif/call_plans.hpp); `replay: false` runs the steps.
      # Each function is run both ways on new data every call: the same bits every time, and the
      # replays that happened are counted by tracing Accel.NIF.plan_replay's replies.
      defp accel(t), do: Nx.backend_transfer(t, {Accel.Nx.Backend, device: :cpu})

      defp both(fun, opts \\ []) do
        {Nx.Defn.jit(fun, [compiler: Compiler, device: :cpu] ++ opts),
         Nx.Defn.jit(fun, [compiler: Compiler, device: :cpu, replay: false] ++ opts)}
      end

      # (fun's result, and how many of plan_replay's replies to this process were replays: traced
      # to a process of its own, the count asked for once every trace message was delivered)
      defp replayed(fun) do
        counter = spawn_link(fn -> count_replays(0) end)
        :erlang.trace_pattern({Accel.NIF, :plan_replay, 3}, [{:_, [], [{:return_trace}]}], [:local])
        :erlang.trace(self(), true, [:call, {:tracer, counter}])

        try do
          fun.()
        after
          :erlang.trace(self(), false, [:call])
          :erlang.trace_pattern({Accel.NIF, :plan_replay, 3}, false, [:local])
        end

        ref = :erlang.trace_delivered(self())
        assert_receive {:trace_delivered, _, ^ref}
        send(counter, {:count, self()})
        assert_receive {:replays, n}
        n
      end

      defp count_replays(n) do
        receive do
          {:trace, _, :return_from, {Accel.NIF, :plan_replay, 3}, {_, _, _}} -> count_replays(n + 1)
          {:count, pid} -> send(pid, {:replays, n})
          _other -> count_replays(n)
        end
      end

      test "a training step: the steps' bits on every call, with new data each time" do
        {replaying, stepping} = both(&step/6)

        replays =
          replayed(fn ->
            for k <- 1..6 do
              scale = 1.0 + k / 10

              args =
                Enum.map(
                  [ramp({1, 8}, scale), Nx.tensor([rem(k, 2)]), ramp({8, 4}, 0.01 * k)] ++
                    [ramp({4}, 0.1), ramp({4, 2}, 0.1 * scale), ramp({2}, 1.0)],
                  &accel/1
                )

              assert bits(apply(replaying, args)) == bits(apply(stepping, args))

              assert_close(
                elem(apply(replaying, args), 0),
                elem(apply(&step/6, Enum.map(args, &binary/1)), 0),
                1.0e-5
              )
            end
          end)

        # (calls 1 and 2 run the steps, the second recording; the rest replay, twice per round)
        assert replays >= 6
      end

      test "operations large enough for a dirty scheduler are recorded and replayed too" do
        # (a 512 x 512 x 512 product and kernels over 262,144 elements: each step on a dirty
        # scheduler, and the replay, over 0.5 ms, on one)
        {replaying, stepping} =
          both(fn x, w -> x |> Nx.dot(w) |> Nx.multiply(1.0e-3) |> Nx.exp() |> Nx.sum(axes: [1]) end)

        w = accel(ramp({512, 512}, 1.0e-3))

        replays =
          replayed(fn ->
            for k <- 1..5 do
              x = accel(ramp({512, 512}, 1.0e-3 * k))
              assert bits(replaying.(x, w)) == bits(stepping.(x, w))
            end
          end)

        assert replays >= 3
      end

      test "one tensor as two parameters: its calls replay; a call with two tensors there runs the steps" do
        {replaying, stepping} = both(fn a, b -> Nx.add(Nx.multiply(a, b), a) end)

        replays =
          replayed(fn ->
            for k <- 1..5 do
              x = accel(ramp({64}, 0.1 * k))
              assert bits(replaying.(x, x)) == bits(stepping.(x, x))
            end

            # (another signature than the plan's: a mismatch, and the steps' own result)
            for k <- 1..2 do
              {x, y} = {accel(ramp({64}, 0.1 * k)), accel(ramp({64}, 0.3 * k))}
              assert bits(replaying.(x, y)) == bits(stepping.(x, y))
              assert bits(replaying.(x, y)) != bits(replaying.(x, x))
            end
          end)

        assert replays >= 3
      end

      test "a kernel's division by zero raises on a replay as on the steps, and later calls recover" do
        {replaying, stepping} = both(fn a, b -> Nx.add(Nx.quotient(a, b), 1) end)
        a = accel(Nx.tensor([7, -8, 9], type: :s32))

        replays =
          replayed(fn ->
            for d <- [1, 2, 3, 4] do
              b = accel(Nx.tensor([d, 2, -1], type: :s32))
              assert Nx.to_binary(replaying.(a, b)) == Nx.to_binary(stepping.(a, b))
            end

            zero = accel(Nx.tensor([1, 0, 1], type: :s32))
            assert_raise ArgumentError, ~r/integer division by zero/, fn -> replaying.(a, zero) end
            assert_raise ArgumentError, ~r/integer division by zero/, fn -> stepping.(a, zero) end
            assert Nx.to_flat_list(replaying.(a, accel(Nx.tensor([7, 8, 9], type: :s32)))) == [2, 0, 2]
          end)

        assert replays >= 2
      end

      test "parameters from another backend, freed parameters and other types run the steps" do
        {replaying, stepping} = both(fn x, y -> Nx.multiply(Nx.exp(x), Nx.sum(y)) end)
        x = accel(Nx.tensor([0.0, 1.0, 2.0]))
        y = accel(Nx.tensor([1.0, 2.0]))
        for _ <- 1..3, do: assert(bits(replaying.(x, y)) == bits(stepping.(x, y)))

        # (a binary backend's tensor: its data was never seen by the plan)
        host = Nx.tensor([3.0, 4.0])
        assert bits(replaying.(x, host)) == bits(stepping.(x, host))
        assert_close(replaying.(x, host), Nx.multiply(Nx.exp(Nx.tensor([0.0, 1.0, 2.0])), 7.0), 1.0e-5)

        # (an f64 tensor: compiled again for its type, no plan of the f32 one used)
        x64 = accel(Nx.tensor([0.0, 1.0, 2.0], type: :f64))
        assert bits(replaying.(x64, y)) == bits(stepping.(x64, y))

        freed = accel(Nx.tensor([0.5, 0.5]))
        Nx.backend_deallocate(freed)
        replay_error = assert_raise(ArgumentError, fn -> replaying.(x, freed) end)
        step_error = assert_raise(ArgumentError, fn -> stepping.(x, freed) end)
        assert replay_error.message == step_error.message
        assert bits(replaying.(x, y)) == bits(stepping.(x, y))
      end

      test "results: a parameter, one value twice; a captured tensor (uploaded by every call)" do
        captured = Nx.backend_copy(Nx.tensor([10.0, 20.0]))

        {replaying, stepping} =
          both(fn x, y -> {y, Nx.exp(Nx.add(x, captured)), Nx.exp(Nx.add(x, captured))} end)

        replays =
          replayed(fn ->
            for k <- 1..4 do
              x = accel(Nx.tensor([k * 1.0, -k * 1.0]))
              y = accel(Nx.tensor([k]))
              {y_out, a, b} = replaying.(x, y)
              assert bits({y_out, a, b}) == bits(stepping.(x, y))
              assert Nx.to_flat_list(y_out) == [k] and Nx.to_binary(a) == Nx.to_binary(b)
              assert_close(a, Nx.exp(Nx.tensor([10.0 + k, 20.0 - k])), 1.0e-6)
            end
          end)

        assert replays >= 2
      end

      test "data read back to the host (tensor start indices) is never replayed" do
        {replaying, stepping} = both(fn x, i -> Nx.multiply(Nx.slice(x, [i], [2]), 2.0) end)
        x = accel(Nx.tensor([1.0, 2.0, 3.0, 4.0]))

        replays =
          replayed(fn ->
            for i <- [0, 1, 2, 0, 1, 2] do
              assert Nx.to_flat_list(replaying.(x, accel(Nx.tensor(i)))) ==
                       Nx.to_flat_list(stepping.(x, accel(Nx.tensor(i))))

              assert Nx.to_flat_list(replaying.(x, accel(Nx.tensor(i)))) == [2.0 * (i + 1), 2.0 * (i + 2)]
            end
          end)

        assert replays == 0
      end

      test "callers in many processes at once, each with its own data" do
        {replaying, stepping} =
          both(fn x -> Nx.divide(Nx.exp(x), Nx.sum(Nx.exp(x), axes: [1], keep_axes: true)) end)

        1..8
        |> Task.async_stream(
          fn p ->
            for k <- 1..25 do
              x = accel(ramp({2, 8}, p + k / 7))
              assert bits(replaying.(x)) == bits(stepping.(x))
            end
          end,
          max_concurrency: 8,
          timeout: 60_000
        )
        |> Enum.each(&assert(match?({:ok, _}, &1)))
      end

      test "its NIFs check their arguments" do
        assert_raise ArgumentError, ~r/expected a plan cell/, fn -> Accel.NIF.plan_replay(:x, [], []) end

        assert_raise ArgumentError, ~r/expected a plan cell/, fn ->
          Accel.NIF.plan_record_start(make_ref())
        end

        assert_raise ArgumentError, ~r/expected a plan recording/, fn ->
          Accel.NIF.plan_record_finish(:x, [], [], [], nil)
        end

        assert_raise ArgumentError, ~r/expected a plan recording/, fn -> Accel.NIF.plan_record_stop(1) end

        cell = Accel.NIF.plan_cell()
        # (no plan yet: the first call is asked to run the steps, the second to record)
        assert Accel.NIF.plan_replay(cell, :not_a_list, []) == :none
        assert Accel.NIF.plan_replay(cell, [], []) == :record

        recording = Accel.NIF.plan_record_start(cell)
        assert Accel.NIF.plan_record_start(cell) == false
        assert {false, _} = Accel.NIF.plan_record_finish(recording, [:x], [:y], [], nil)

        assert_raise ArgumentError, ~r/params must be a list/, fn ->
          Accel.NIF.plan_record_finish(recording, :x, [], [], nil)
        end

        assert Accel.NIF.plan_record_stop(recording) == :ok
        assert Accel.NIF.plan_replay(cell, [], []) == :record
      end

      # (CI once saw a replay missing: the check of the bytes made VM-wide, which Elixir makes
      # where other processes' tensors passed the threshold, spoiled a recording)
      test "the tensor-pressure check between a recording's calls does not spoil it; another NIF call does" do
        x = Accel.Tensor.iota({64}, type: :f32, backend: :cpu)

        record = fn between ->
          cell = Accel.NIF.plan_cell()
          assert Accel.NIF.plan_replay(cell, [x.ref], [:sig]) == :none
          assert Accel.NIF.plan_replay(cell, [x.ref], [:sig]) == :record
          recording = Accel.NIF.plan_record_start(cell)

          try do
            y = Accel.Tensor.exp(x)
            between.()
            z = Accel.Tensor.add(y, x)
            {cell, Accel.NIF.plan_record_finish(recording, [x.ref], [z.ref], [:sig], :meta)}
          after
            Accel.NIF.plan_record_stop(recording)
          end
        end

        # (a threshold no count reaches: the check answers false and resets nothing)
        {cell, finished} =
          record.(fn -> assert Accel.NIF.tensor_take_pressure(Integer.pow(2, 62)) == false end)

        assert finished == true
        other = Accel.Tensor.iota({64}, type: :f32, backend: :cpu) |> Accel.Tensor.multiply(0.5)
        assert {[out], _since_gc, :meta} = Accel.NIF.plan_replay(cell, [other.ref], [:sig])
        replayed = %{other | ref: out}

        assert Accel.Tensor.to_binary(replayed) ==
                 Accel.Tensor.to_binary(Accel.Tensor.add(Accel.Tensor.exp(other), other))

        assert {_, {false, "the call made work other than inline tensor operations on the CPU"}} =
                 record.(fn -> Accel.NIF.devices(:cpu) end)
      end
    end

    test "bad options raise ArgumentError naming them" do
      assert_raise ArgumentError, ~r/option :max_concurrency must be/, fn ->
        jit(&Nx.exp/1, [Nx.tensor(1.0)], max_concurrency: 0)
      end

      assert_raise ArgumentError,
                   ~r/report\/3 expects a function and a list of its arguments .*got: :x and 1/,
                   fn ->
                     Compiler.report(:x, 1)
                   end

      assert_raise ArgumentError, ~r/option :fuse must be a boolean/, fn ->
        jit(&Nx.exp/1, [Nx.tensor(1.0)], fuse: 1)
      end

      assert_raise ArgumentError, ~r/option :plan must be a boolean, got: "yes"/, fn ->
        jit(&Nx.exp/1, [Nx.tensor(1.0)], plan: "yes")
      end

      assert_raise ArgumentError, ~r/option :replay must be a boolean, got: 1/, fn ->
        jit(&Nx.exp/1, [Nx.tensor(1.0)], replay: 1)
      end

      assert_raise ArgumentError, ~r/option :math must be :exact or :fast, got: :approximate/, fn ->
        jit(&Nx.exp/1, [Nx.tensor(1.0)], math: :approximate)
      end

      assert_raise ArgumentError, ~r/option :math must be/, fn ->
        Compiler.report(&Nx.exp/1, [Nx.tensor(1.0)], math: "fast")
      end

      assert_raise ArgumentError, ~r/option :build must be :background or :wait, got: :later/, fn ->
        jit(&Nx.exp/1, [Nx.tensor(1.0)], build: :later)
      end

      assert_raise ArgumentError, ~r/device: must be/, fn ->
        jit(&Nx.exp/1, [Nx.tensor(1.0)], device: :gpu)
      end
    end
  end

  defmodule Accel.Nx.CompilerBackgroundFailureTest do
    # Points the kernel cache (a global setting) at a directory Accel refuses: a module of its own,
    # not async, so that no other test's kernels go there.
    use ExUnit.Case, async: false

    import ExUnit.CaptureLog

    def forward(_event, measure, meta, pid), do: send(pid, {:built, measure, meta})

    test "config :accel, nx_build is checked where a function compiles, naming the key" do
      previous = Application.get_env(:accel, :nx_build)
      Application.put_env(:accel, :nx_build, :later)

      try do
        assert_raise ArgumentError,
                     "config :accel, nx_build: must be one of :background, :wait, got: :later",
                     fn ->
                       # (a function of this test's own, which no other compiled: one lone
                       # operation, no fused region, so nothing is built)
                       f = fn x -> Nx.exp(x) end
                       Nx.Defn.jit(f, compiler: Accel.Nx.Compiler, device: :cpu).(Nx.iota({7}, type: :f32))
                     end
      after
        if previous,
          do: Application.put_env(:accel, :nx_build, previous),
          else: Application.delete_env(:accel, :nx_build)
      end
    end

    test "a background build that fails is logged, and the calls stay unfused, with the same results" do
      dir = Path.join(System.tmp_dir!(), "accel_refused_cache_#{System.unique_integer([:positive])}")
      File.mkdir_p!(dir)
      # writable by every user: Accel refuses to load or build kernels there
      File.chmod!(dir, 0o777)
      previous = Application.get_env(:accel, :kernel_cache)
      Application.put_env(:accel, :kernel_cache, dir)
      handler = "accel-built-#{inspect(make_ref())}"
      :telemetry.attach(handler, [:accel, :nx, :built], &__MODULE__.forward/4, self())

      try do
        c = Accel.Nx.CompilerTest.Defns.fresh_constant()
        f = fn x -> x |> Nx.multiply(c) |> Nx.exp() |> Nx.add(1.0) end
        x = Nx.iota({1000}, type: :f32) |> Nx.divide(100.0)
        fun = Nx.Defn.jit(f, compiler: Accel.Nx.Compiler, device: :cpu, build: :background)

        log =
          capture_log(fn ->
            first = fun.(x)
            assert_receive {:built, _, %{errors: [message]}}, 120_000
            assert message =~ "kernel cache"
            # (the log is written after the event)
            Process.sleep(100)
            assert Nx.to_binary(fun.(x)) == Nx.to_binary(first)

            unfused = Nx.Defn.jit(f, compiler: Accel.Nx.Compiler, device: :cpu, fuse: false).(x)
            assert Nx.to_binary(first) == Nx.to_binary(unfused)
          end)

        assert log =~ "a fused kernel failed to build; calls stay unfused"
      after
        :telemetry.detach(handler)

        if previous,
          do: Application.put_env(:accel, :kernel_cache, previous),
          else: Application.delete_env(:accel, :kernel_cache)

        File.rm_rf!(dir)
      end
    end
  end

  defmodule Accel.Nx.CompilerMemoryTest do
    # Reads Accel's host memory, a count for the whole VM, while calls run: not async, so that no
    # other test's tensors count.
    use ExUnit.Case, async: false

    # 20 layout operations in a chain (none fuses), each result read by the next only
    defp chain(x), do: Enum.reduce(1..20, x, fn i, acc -> Nx.reverse(acc, axes: [rem(i, 2)]) end)

    defp poll(parent, peak) do
      receive do
        :stop -> send(parent, {:peak, peak})
      after
        0 -> poll(parent, max(peak, Accel.memory(:cpu)))
      end
    end

    test "a call frees each tensor it made after its last reader, holding the live ones only" do
      backend = {Accel.Nx.Backend, device: :cpu}
      x = Nx.iota({2048, 2048}, type: :f32, backend: backend)
      bytes = 2048 * 2048 * 4
      want = x |> Nx.backend_copy(Nx.BinaryBackend) |> chain() |> Nx.to_binary()
      f = Nx.Defn.jit(&chain/1, compiler: Accel.Nx.Compiler, device: :cpu)
      first = f.(x)
      assert Nx.to_binary(first) == want
      Nx.backend_deallocate(first)

      base = Accel.memory(:cpu)
      parent = self()
      poller = spawn_link(fn -> poll(parent, base) end)

      # the steps, their recording, then its replay: each frees as it goes
      for _ <- 1..3 do
        result = f.(x)
        assert Nx.to_binary(result) == want
        Nx.backend_deallocate(result)
      end

      send(poller, :stop)
      assert_receive {:peak, peak}, 5_000
      # an intermediate, the next and the result at once (20 if each waited for the call's end)
      assert peak - base <= 4 * bytes, "#{div(peak - base, bytes)} tensors of the chain at once"
    end

    test "a tensor an operation gave back as its result outlives its operand's last reader" do
      # (the reshape of the sorted tensor, contiguous, is the sorted tensor; the sum reads it after
      # the sort's value is read for the last time)
      f = fn x -> x |> Nx.sort() |> Nx.reshape({4, 2}) |> Nx.sum(axes: [1]) end
      x = Nx.tensor([5.0, 3.0, 8.0, 1.0, 2.0, 7.0, 6.0, 4.0])
      want = f.(x)
      fun = Nx.Defn.jit(f, compiler: Accel.Nx.Compiler, device: :cpu)

      for _ <- 1..3, do: assert(Nx.to_binary(fun.(x)) == Nx.to_binary(want))
    end
  end
end
