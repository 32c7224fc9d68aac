if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.CompilerLoopsTest.Defns do
    import Nx.Defn

    defn(normal(key), do: Nx.Random.normal(key, shape: {1_000_003}, type: :f32))
    defn(uniform64(key), do: Nx.Random.uniform(key, shape: {3, 517}, type: :f64))
    defn(randint(key), do: Nx.Random.randint(key, -50, 50, shape: {4097}, type: :s32))
    defn(shuffled(key, x), do: Nx.Random.shuffle(key, x))
    defn(split(key), do: Nx.Random.split(key, parts: 3))

    # an outer loop counting down by 2 whose counter the body reads, around a loop over a tensor
    defn nested(x) do
      {x, _} =
        while {x, i = 10}, i > 4 do
          {y, _} =
            while {y = x, i}, r <- Nx.tensor([3.0, 1.0, 2.0]) do
              {y * r - i, i}
            end

          {Nx.cos(y) + i, i - 2}
        end

      x
    end

    defn zero_trips(x) do
      {x, _} = while({x, i = 5}, i < 5, do: {x + 1.0, i + 1})
      x
    end

    # more iterations than are unrolled
    defn long_loop(x) do
      {x, _} = while({x, i = 0}, i < 100, do: {x * 0.5 + 1.0, i + 1})
      x
    end

    defn hooked(x) do
      {x, _} = while({x, i = 0}, i < 3, do: {hook(x * 2.0, :step), i + 1})
      x
    end

    # indices past the tensor's end, which Nx's dynamic slices clamp
    defn clamped(x) do
      {_, _, acc} = while({x, i = 0, acc = 0.0}, i < 5, do: {x, i + 1, acc + x[i]})
      acc
    end

    # a counter that wraps at its type's end (not counted by the unroller)
    defn wrapping(x) do
      {x, _} = while({x, i = Nx.tensor(250, type: :u8)}, i != 4, do: {x * 0.5 + 1.0, i + 1})
      x
    end

    # a value read twice within one region
    defn diamond(x) do
      y = x * 2.0 + 1.0
      y * y - y
    end

    # a value read inside a region and outside it
    defn escaping(x) do
      y = x * 2.0 + 1.0
      {y * y - y, Nx.exp(y)}
    end

    # parts that share their work, joined
    defn halves(x) do
      a = x * 3 + 1
      b = a * a
      c = Nx.bitwise_xor(a, b)
      Nx.concatenate([b + c, c - a])
    end

    defn(joined_rows(x), do: Nx.concatenate([x * 2.0, x + 1.0], axis: 1))

    defn shifts(x) do
      {Nx.left_shift(x, 0), Nx.left_shift(x, 7), Nx.right_shift(x, 3),
       Nx.right_shift(x, 7) |> Nx.left_shift(1)}
    end

    defn(wide_shifts(x),
      do: {Nx.left_shift(x, 63), Nx.right_shift(x, 63), Nx.right_shift(x, 31), Nx.left_shift(x, 32)}
    )
  end

  defmodule Accel.Nx.CompilerLoopsTest do
    # Accel.Nx.Compiler's unrolling of loops of a constant count (Accel.Nx.Compiler.Unroll), its
    # regions that read a value several times or join parts (Fusion), and its constant shifts
    # (Codegen): results equal Nx.Defn.Evaluator's on the binary backend on every device, at the
    # scale Nx.Random is used, and the regions are what the rewrite promises.
    use ExUnit.Case, async: true

    alias Accel.Nx.Compiler
    alias Accel.Nx.CompilerLoopsTest.Defns

    @moduletag timeout: 300_000

    defp jit(fun, args, opts), do: apply(Nx.Defn.jit(fun, [compiler: Compiler] ++ opts), args)
    defp reference(fun, args), do: apply(Nx.Defn.jit(fun, compiler: Nx.Defn.Evaluator), args)

    defp leaves(result),
      do: Nx.Defn.Composite.flatten_list([result]) |> Enum.map(&Nx.backend_copy(&1, Nx.BinaryBackend))

    # integers bit for bit; floats bit for bit on the CPU backend, within Nx's tolerance where a
    # device's own library computes a function (erf_inv's log, cos)
    defp assert_same(got, want, device) do
      for {g, w} <- Enum.zip(leaves(got), leaves(want)) do
        assert {g.shape, g.type} == {w.shape, w.type}

        if device == :cpu or not Nx.Type.float?(w.type),
          do: assert(Nx.to_binary(g) == Nx.to_binary(w)),
          else: assert(Nx.all_close(g, w, rtol: 1.0e-6, atol: 1.0e-6) |> Nx.to_number() == 1)
      end
    end

    defp template(shape, type), do: Nx.template(shape, type)
    defp key, do: Nx.Random.key(1_701)

    describe "what the rewrite gives" do
      test "Nx.Random's threefry rounds unroll into one region, its halves joined" do
        regions = Compiler.report(&Defns.normal/1, [template({2}, :u32)])
        # (was 59 regions, one per round's value)
        assert length(regions) <= 10
        # (1_000_003 draws: two halves of 500_002 pairs)
        threefry = Enum.find(regions, &(&1.shape == {1_000_004}))
        assert length(threefry.ops) > 100
        assert Enum.count(threefry.ops, &(&1 == :left_shift)) == 20
        assert :select in threefry.ops
        # (its rotations constants: C shifts, not the checking helper)
        refute threefry.source =~ ~r/accel_int_(left|right)_shift\((v|x)[0-9]/
      end

      test "loops of a constant count unroll; others stay loops" do
        # three iterations of the outer loop, three of the inner one each: one region
        assert [%{ops: ops}] = Compiler.report(&Defns.nested/1, [template({5}, :f32)])
        assert Enum.count(ops, &(&1 == :cos)) == 3
        assert Enum.count(ops, &(&1 == :multiply)) == 9

        assert Compiler.report(&Defns.zero_trips/1, [template({5}, :f32)]) == []
        # the 100-iteration loop and the one with a hook keep their bodies' regions
        assert [%{ops: [:multiply, :add]}] = Compiler.report(&Defns.long_loop/1, [template({5}, :f32)])
        assert [] = Compiler.report(&Defns.hooked/1, [template({5}, :f32)])
      end

      test "a value read twice in a region is computed once there; one read outside is an input" do
        assert [%{ops: [:multiply, :add, :multiply, :subtract], inputs: [{6}]}] =
                 Compiler.report(&Defns.diamond/1, [template({6}, :f32)])

        # (the lone exp of it is the backend's operation)
        regions = Compiler.report(&Defns.escaping/1, [template({6}, :f32)])
        assert Enum.sort(Enum.map(regions, & &1.ops)) == [[:multiply, :add], [:multiply, :subtract]]
      end

      test "a concatenation of parts that share their work is one region" do
        assert [%{ops: ops, shape: {14}, inputs: inputs}] =
                 Compiler.report(&Defns.halves/1, [template({7}, :u32)])

        assert Enum.count(ops, &(&1 == :multiply)) == 2
        # (the part's input, and the blocks' numbers)
        assert MapSet.new(inputs) == MapSet.new([{2, 1}, {7}])
        assert [%{shape: {1, 10}}] = Compiler.report(&Defns.joined_rows/1, [template({1, 5}, :f32)])
        # blocks that are not contiguous in the output: the backend's concatenation (of two lone
        # operations, the backend's too)
        assert Compiler.report(&Defns.joined_rows/1, [template({3, 5}, :f32)]) == []
      end
    end

    for device <- Accel.Test.Devices.nx() do
      describe "on #{device}" do
        @describetag Accel.Test.Devices.tags(device)
        @device device

        test "Nx.Random's draws equal the evaluator's" do
          x = Nx.iota({1000}, type: :f32)

          for {fun, args} <- [
                {&Defns.normal/1, [key()]},
                {&Defns.uniform64/1, [key()]},
                {&Defns.randint/1, [key()]},
                {&Defns.shuffled/2, [key(), x]},
                {&Defns.split/1, [key()]}
              ] do
            assert_same(jit(fun, args, device: @device), reference(fun, args), @device)
          end
        end

        test "unrolled loops, loops and joined parts equal the evaluator's" do
          f = Nx.iota({3, 5}, type: :f32) |> Nx.divide(7.0)
          row = Nx.iota({1, 5}, type: :f32)

          for {fun, args} <- [
                {&Defns.nested/1, [f]},
                {&Defns.zero_trips/1, [f]},
                {&Defns.long_loop/1, [f]},
                {&Defns.hooked/1, [f]},
                {&Defns.clamped/1, [Nx.tensor([1.5, -2.0, 4.0])]},
                {&Defns.wrapping/1, [f]},
                {&Defns.diamond/1, [f]},
                {&Defns.escaping/1, [f]},
                {&Defns.joined_rows/1, [row]},
                {&Defns.joined_rows/1, [f]},
                {&Defns.halves/1,
                 [Nx.tensor([0, 1, 7, 65_535, 65_536, 4_294_967_295, 2_863_311_530], type: :u32)]},
                {&Defns.halves/1,
                 [Nx.tensor([-3, 0, 2, 46_340, -46_341, 2_147_483_647, -2_147_483_648], type: :s32)]}
              ] do
            assert_same(jit(fun, args, device: @device), reference(fun, args), @device)
          end
        end

        test "shifts by constants give Nx's values at every type's edges" do
          for {type, values} <- [
                u8: [0, 1, 127, 128, 255],
                u32: [0, 1, 2_147_483_648, 4_294_967_295, 305_419_896],
                s32: [0, 1, -1, 2_147_483_647, -2_147_483_648],
                s64: [0, 1, -1, 9_223_372_036_854_775_807, -9_223_372_036_854_775_808]
              ] do
            x = Nx.tensor(values, type: type)
            assert_same(jit(&Defns.shifts/1, [x], device: @device), reference(&Defns.shifts/1, [x]), @device)

            if type == :s64,
              do:
                assert_same(
                  jit(&Defns.wide_shifts/1, [x], device: @device),
                  reference(&Defns.wide_shifts/1, [x]),
                  @device
                )
          end
        end
      end
    end
  end
end
