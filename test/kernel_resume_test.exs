defmodule Accel.KernelResumeTest do
  # A device kernel cannot be interrupted, so loops that may run long run a bounded number of
  # iterations per launch and resume in the next (Accel.Kernel.Compiler: emit_resumable). Whatever
  # iteration an element is suspended at, in whichever loop, its value must be Enum.map's. The
  # first launch runs 2^16 iterations over all elements, the next at most 4x that each: the loops
  # below run past it.
  use ExUnit.Case, async: true
  require Accel

  # millions of elements through many launches of saved state on PoCL: ~26 s on a 2-core machine
  @moduletag timeout: 300_000

  # the same function, run by the kernel on `backend` and by Enum.map
  defmacrop agree(backend, xs, fun) do
    quote do
      xs = unquote(xs)
      expected = Enum.map(xs, unquote(fun))
      assert Accel.map(xs, Accel.kernel(unquote(fun)), backend: unquote(backend)) == expected
    end
  end

  # (compiled text only: runs on any machine)
  test "loops that may run past 512 iterations resume; shorter ones run in one launch" do
    words = fn k -> Accel.Kernel.Map.compiled(k, [:s64]).resume_words end
    {p, few, many} = {61, 10, 300}

    assert words.(Accel.kernel(fn x -> Enum.reduce(1..10, x, fn _, a -> rem(22 * a * (a + 1), p) end) end)) ==
             0

    assert words.(Accel.kernel(fn x -> Enum.reduce(1..few, x, fn _, a -> a + 1 end) end)) == 0
    assert words.(Accel.kernel(fn x -> Enum.reduce(1..512, x, fn _, a -> a + 1 end) end)) == 0
    assert words.(Accel.kernel(fn x -> Enum.reduce(1..2048//4, x, fn _, a -> a + 1 end) end)) == 0
    assert words.(Accel.kernel(fn x -> Enum.reduce(0..rem(x, 4), x, fn _, a -> a + 1 end) end)) == 0
    # 513 iterations, a captured count of the 16-bit class, an input's range
    assert words.(Accel.kernel(fn x -> Enum.reduce(1..513, x, fn _, a -> a + 1 end) end)) == 3
    assert words.(Accel.kernel(fn x -> Enum.reduce(1..many, x, fn _, a -> a + 1 end) end)) == 3
    assert words.(Accel.kernel(fn x -> Enum.reduce(1..x, x, fn _, a -> a + 1 end) end)) == 3
    # a short loop around a long one resumes too: 1 + 2 words per loop, the inner one emitted
    # twice (in the outer loop's first iteration, and in its later ones)
    assert words.(
             Accel.kernel(fn x ->
               Enum.reduce(1..3, x, fn _, a -> Enum.reduce(1..x, a, fn i, b -> b + i end) end)
             end)
           ) == 7
  end

  for backend <- [:opencl, :cuda] do
    describe "#{backend}" do
      @describetag backend
      @backend backend

      test "one long loop, resumed across launches" do
        agree(@backend, [0, 1, 2, 1023, 1024, 1025, 20_000, 250_000, -3], fn x ->
          Enum.reduce(1..x, 0, fn i, a -> rem(a * 31 + i, 1_000_003) end)
        end)
      end

      test "nested loops suspended in the inner one resume at both iterations" do
        agree(@backend, [1, 7, 64, 300, 700], fn x ->
          Enum.reduce(1..x, x, fn i, a -> Enum.reduce(i..x//7, a, fn j, b -> rem(b * 7 + j, 65_521) end) end)
        end)
      end

      test "a loop after one that ended keeps that one's value when it is suspended" do
        agree(@backend, [0, 5, 3000, 30_000], fn x ->
          a = Enum.reduce(1..x, 0, fn i, a -> rem(a + i * i, 999_983) end)
          b = Enum.reduce(1..x, a, fn i, b -> rem(b * 3 + i, 999_979) end)
          a * 1_000_000 + b
        end)
      end

      test "loops in branches and loops whose range is computed" do
        agree(@backend, [-40_000, -1, 0, 1, 2, 40_001, 123_457], fn x ->
          if rem(x, 2) == 0 do
            Enum.reduce(0..x//2, 1, fn i, a -> rem(a * 5 + i, 100_003) end)
          else
            Enum.reduce(x..0//-1, 0, fn i, a -> Enum.reduce(0..rem(i, 3), a, fn j, b -> b + j end) end)
          end
        end)
      end

      test "float and boolean accumulators are saved exactly" do
        agree(@backend, [0, 3, 5000, 40_000], fn x ->
          Enum.reduce(1..x, 0.5, fn i, a -> a * 0.999 + i / 7 end)
        end)

        agree(@backend, [0, 3, 5000, 40_000], fn x ->
          Enum.reduce(1..x, false, fn i, a -> a != (rem(i * x, 7) == 3) end)
        end)
      end

      test "an element flagged before its loop is suspended is recomputed, not resumed without its flag" do
        # 10^9 cubed is a bignum in Elixir: the kernel flags the element at i = 3 and the BEAM
        # computes it; the loop then runs thousands of iterations past the first launch's fuel
        agree(@backend, [5, 3000, 100_000], fn x ->
          Enum.reduce(1..x, 1, fn i, a -> if i < 4, do: a * 1_000_000_000, else: rem(a, 1000) + i end)
        end)
      end

      test "a captured range bounds nothing, and millions of elements run in windows of saved state" do
        r = 1..100_000
        agree(@backend, [1, 2, 3], fn x -> Enum.reduce(r, x, fn i, a -> rem(a * 3 + i, 10_007) end) end)

        xs = Enum.to_list(1..3_000_000)

        agree(@backend, xs, fn x ->
          Enum.reduce(0..rem(x, 600), x, fn i, a -> rem(a * 3 + i, 1_000_003) end)
        end)
      end
    end
  end
end
