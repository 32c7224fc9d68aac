defmodule Accel.KernelTest.Kernels do
  use Accel.Kernel

  @p 6_700_417

  defkernel(step(x, p), do: rem(22 * x * (x + 1), p))
  defkernel(ten_steps(x, p), do: Enum.reduce(1..10, x, fn _, acc -> step(acc, p) end))
  defkernel(seed_step(x), do: step(x, @p))
end

defmodule Accel.KernelTest do
  # Accel.kernel/1 and Accel.map/3 beyond the element semantics (kernel_differential_test.exs):
  # the language's compile-time errors, specialisation errors, inputs, outputs, placement,
  # chunking, the module form, streams, and captured values as parameters.
  use ExUnit.Case, async: true
  require Accel
  doctest Accel.Kernel
  alias Accel.KernelTest.Kernels

  defp compile_error(code) do
    e =
      assert_raise CompileError, fn -> Code.compile_string("require Accel\n" <> code, "kernel_source.ex") end

    Exception.message(e)
  end

  describe "the language" do
    test "a construct outside it is a compile error naming it and its line" do
      assert compile_error("x = 1\nAccel.kernel(fn y ->\n  IO.puts(y)\nend)") =~
               ~r/kernel_source.ex:4: Accel.kernel: IO.puts\(y\) is not supported in a kernel/

      assert compile_error("Accel.kernel(fn y -> [y] end)") =~ "[y] is not supported in a kernel"
      assert compile_error("Accel.kernel(fn y -> {y, y} end)") =~ "is not supported in a kernel"
      assert compile_error("Accel.kernel(fn {a, b} -> a end)") =~ "kernel parameters must be plain variables"
      assert compile_error("Accel.kernel(fn 1 -> 1; x -> x end)") =~ "one clause"
      assert compile_error("Accel.kernel(&Enum.sum/1)") =~ "Enum.sum/1 is not a defkernel"

      assert compile_error("Accel.kernel(fn x -> Enum.reduce([1, 2], x, fn i, a -> a + i end) end)") =~
               "runs over a range"

      assert compile_error("Accel.kernel(fn x -> case x do {a} -> a end end)") =~ "case patterns in a kernel"
    end

    test "a value of two types is refused when the kernel is specialised, naming the line" do
      k = Accel.kernel(fn x -> if x > 0, do: x, else: 0.5 end)

      assert_raise ArgumentError, ~r/line \d+\): one branch gives an integer and another a float/, fn ->
        Accel.map([1], k, backend: :cpu)
      end

      m = Accel.kernel(fn x -> min(x, 1.5) end)

      assert_raise ArgumentError, ~r/min\/2 of an integer and a float/, fn ->
        Accel.map([1], m, backend: :cpu)
      end

      # the same kernel over floats is fine
      assert Accel.map([2.0, 1.0], m, backend: :cpu) == [1.5, 1.0]
    end

    test "captured values are parameters: new values of one magnitude class reuse the compiled kernel" do
      run = fn p ->
        k = Accel.kernel(fn x -> rem(x * x + 1, p) end)
        {Accel.map(1..1000, k, backend: :cpu), k}
      end

      {r1, k} = run.(1_000_003)
      {r2, _} = run.(999_983)
      assert r1 == Enum.map(1..1000, &rem(&1 * &1 + 1, 1_000_003))
      assert r2 == Enum.map(1..1000, &rem(&1 * &1 + 1, 999_983))
      specialisations = for {{Accel.Kernel.Map, id, _, _, _}, _} <- :persistent_term.get(), id == k.id, do: id
      assert length(specialisations) == 1
    end

    test "captured values must be 64-bit integers, floats, booleans or ranges" do
      big = Bitwise.bsl(1, 64)
      k = Accel.kernel(fn x -> x + big end)

      assert_raise ArgumentError, ~r/captured variable big is 18446744073709551616/, fn ->
        Accel.map([1], k, backend: :cpu)
      end

      atom = :nope
      k = Accel.kernel(fn x -> if atom, do: x, else: -x end)

      assert_raise ArgumentError, ~r/captured variable atom is :nope/, fn ->
        Accel.map([1], k, backend: :cpu)
      end
    end

    test "module attributes of numbers and booleans are constants, as Elixir reads them; others are captured" do
      {:module, mod, _, _} =
        defmodule AttributeKernels do
          @p 6_700_417
          @scale 0.5
          @flip true
          @big Bitwise.bsl(1, 64)
          def seed, do: Accel.kernel(fn x -> rem(22 * x * (x + 1), @p) end)
          def mixed, do: Accel.kernel(fn x -> if @flip, do: x * @scale, else: -x * @scale end)
          def big, do: Accel.kernel(fn x -> x + @big end)
          @p 7
          def later, do: Accel.kernel(fn x -> rem(x, @p) end)
        end

      literal = Accel.kernel(fn x -> rem(22 * x * (x + 1), 6_700_417) end)
      assert mod.seed().values == [] and mod.mixed().values == []
      # the same text as the literal's: the divisor's magic numbers folded, the range analysis informed
      assert Accel.Kernel.source(mod.seed()) == Accel.Kernel.source(literal)

      assert Accel.map(1..1000, mod.seed(), backend: :cpu) ==
               Enum.map(1..1000, &rem(22 * &1 * (&1 + 1), 6_700_417))

      assert Accel.map([1.0, 3.0], mod.mixed(), backend: :cpu) == [0.5, 1.5]
      # each function reads the attribute's value where it is defined
      assert Accel.map([10, 20], mod.later(), backend: :cpu) == [3, 6]

      assert_raise ArgumentError, ~r/captured variable @big is 18446744073709551616/, fn ->
        Accel.map([1], mod.big(), backend: :cpu)
      end
    end

    test "captured ranges drive loops; captured floats and booleans are parameters" do
      r = 10..1//-2
      scale = 0.5
      flip = true

      k =
        Accel.kernel(fn x ->
          Enum.reduce(r, x * scale, fn i, acc -> if flip, do: acc + i, else: acc - i end)
        end)

      assert Accel.map([1, 2, 3], k, backend: :cpu) == Enum.map([1, 2, 3], k.fun)
    end

    test "defkernel: a plain function too, inlined into other kernels, with module attributes" do
      assert Kernels.step(3, 61) == rem(22 * 3 * 4, 61)
      k = Accel.kernel(fn x -> Kernels.ten_steps(x, 61) end)
      assert Accel.map(1..100, k, backend: :cpu) == Accel.logistic_map(1..100, p: 61)

      assert Accel.map(1..100, Accel.kernel(&Kernels.seed_step/1), backend: :cpu) ==
               Accel.logistic_map(1..100, iterations: 1)

      pair = Accel.kernel(&Kernels.step/2)
      assert Accel.map({[1, 2, 3], [61, 7, 5]}, pair, backend: :cpu) == [44, 6, 4]
    end
  end

  describe "inputs and outputs" do
    test "each input form, and the output each gives by default" do
      k = Accel.kernel(fn x -> x * 2 end)
      bin = for x <- [1, -2, 3], into: <<>>, do: <<x::signed-native-64>>
      assert Accel.map([1, -2, 3], k, backend: :cpu) == [2, -4, 6]
      assert Accel.map(1..3, k, backend: :cpu) == [2, 4, 6]
      assert Accel.map(10..1//-4, k, backend: :cpu) == [20, 12, 4]
      assert Accel.map(bin, k, backend: :cpu) == for(x <- [2, -4, 6], into: <<>>, do: <<x::signed-native-64>>)
      assert Accel.map(bin, k, backend: :cpu, as: :list) == [2, -4, 6]
      assert Accel.map([], k, backend: :cpu) == []
      floats = <<1.5::float-native-64, -0.25::float-native-64>>
      assert Accel.map(floats, k, type: :f64, as: :list, backend: :cpu) == [3.0, -0.5]
      t = Accel.Tensor.from_list([1, 2, 3], type: :s32, backend: :cpu)
      out = Accel.map(t, k)
      assert %Accel.Tensor{type: :s64, device: {:cpu, 0}} = out
      assert Accel.Tensor.to_list(out) == [2, 4, 6]
      assert Accel.map([1, -1], Accel.kernel(fn x -> x > 0 end), backend: :cpu, as: :binary) == <<1, 0>>
      assert Accel.map([1, -1], Accel.kernel(fn x -> x > 0 end), backend: :cpu) == [true, false]
    end

    test "bad inputs name what is wrong" do
      k = Accel.kernel(fn x -> x end)
      k2 = Accel.kernel(fn x, y -> x + y end)
      assert_raise ArgumentError, ~r/takes 2 input\(s\), got 1/, fn -> Accel.map([1], k2, backend: :cpu) end

      assert_raise ArgumentError, ~r/input 1 has 2 elements and input 0 has 1/, fn ->
        Accel.map({[1], [1, 2]}, k2, backend: :cpu)
      end

      assert_raise ArgumentError, ~r/input 0: element 1 is 2, but the list starts with a float/, fn ->
        Accel.map([1.0, 2], k, backend: :cpu)
      end

      assert_raise ArgumentError, ~r/input 0:.*index 1/, fn -> Accel.map([1, :a], k, backend: :cpu) end

      assert_raise ArgumentError, ~r/9 bytes does not hold whole :s64/, fn ->
        Accel.map(<<0::72>>, k, backend: :cpu)
      end

      assert_raise ArgumentError, ~r/unknown option :iterations/, fn -> Accel.map([1], k, iterations: 3) end

      assert_raise ArgumentError, ~r/expects a kernel from Accel.kernel\/1/, fn ->
        Accel.map([1], &(&1 * 2))
      end

      t = Accel.Tensor.from_list([1], backend: :cpu)
      assert_raise ArgumentError, ~r/do not apply to tensor inputs/, fn -> Accel.map(t, k, backend: :cpu) end
    end

    test "an :s64 output cannot hold a bignum: the element is named; a list holds it" do
      k = Accel.kernel(fn x -> x * x end)

      assert_raise ArgumentError,
                   ~r/element 2: kernel .* gives 18446744073709551616, which does not fit :s64/,
                   fn ->
                     Accel.map([1, 2, 0x100000000], k, backend: :cpu, as: :binary)
                   end

      assert Accel.map([1, 2, 0x100000000], k, backend: :cpu) == [1, 4, 0x10000000000000000]
    end

    test "chunk_size: results identical, errors name the element in the whole input" do
      k = Accel.kernel(fn x -> rem(x * 7919, 1_000_003) end)
      assert Accel.map(1..10_000, k, backend: :cpu, chunk_size: 777) == Accel.map(1..10_000, k, backend: :cpu)
      bin = Accel.map(1..10_000, k, backend: :cpu, as: :binary)
      assert Accel.map(bin, k, backend: :cpu, chunk_size: 999) == Accel.map(bin, k, backend: :cpu)
      sq = Accel.kernel(fn x -> x * x end)
      input = Enum.to_list(1..100) ++ [0x100000000]

      assert_raise ArgumentError, ~r/element 100:/, fn ->
        Accel.map(input, sq, backend: :cpu, as: :binary, chunk_size: 7)
      end
    end

    test "a tensor's kernel runs on its device and returns a tensor there" do
      t = Accel.Tensor.from_list([1.0, 2.0, 4.0], type: :f64, backend: :cpu)
      out = Accel.map({t, t}, Accel.kernel(fn x, y -> x * y + 1.0 end))
      assert out.device == {:cpu, 0} and out.type == :f64
      assert Accel.Tensor.to_list(out) == [2.0, 5.0, 17.0]
    end

    @tag :opencl
    test "OpenCL: tensors stay on the device; binaries go and come back" do
      t = Accel.Tensor.from_list([1, 2, 3], backend: :opencl)
      out = Accel.map(t, Accel.kernel(fn x -> x * 0x4000000000000000 end), as: :list)
      assert out == [0x4000000000000000, 0x8000000000000000, 0xC000000000000000]
      assert Accel.map(1..5, Accel.kernel(fn x -> x + 1 end), backend: :opencl) == [2, 3, 4, 5, 6]
    end

    @tag :opencl
    test "OpenCL: a binary's upload takes the output, which recomputed elements read back from the binary" do
      k = Accel.kernel(fn x -> x * x + 1 end)
      big = 0x100000000
      xs = [3, big, -5, 7]
      bin = for x <- xs, into: <<>>, do: <<x::signed-native-64>>
      # big * big + 1 is a bignum: flagged, recomputed from the binary's own element
      assert Accel.map(bin, k, backend: :opencl, as: :list) == Enum.map(xs, &(&1 * &1 + 1))

      assert_raise ArgumentError, ~r/element 1: .* does not fit :s64/, fn ->
        Accel.map(bin, k, backend: :opencl)
      end

      # a tensor input is the caller's: never overwritten; a second binary input of the output's
      # type is not either, the first one takes it
      t = Accel.Tensor.from_list(xs, backend: :opencl)
      _ = Accel.map(t, Accel.kernel(fn x -> x - 1 end))
      assert Accel.Tensor.to_list(t) == xs
      pair = Accel.kernel(fn x, y -> x - y end)
      assert Accel.map({bin, t}, pair, as: :list) == [0, 0, 0, 0]
      assert Accel.map({t, bin}, pair, as: :list) == [0, 0, 0, 0]
      assert Accel.Tensor.to_list(t) == xs
      # a float output does not take an s64 input's place
      assert Accel.map(bin, Accel.kernel(fn x -> x / 2 end), backend: :opencl, as: :list) ==
               Enum.map(xs, &(&1 / 2))

      # what the launch does with the input it is given: on a device, writes over it
      c = Accel.Kernel.Map.compiled(k, [:s64])
      kterm = {c.key, c.source, c.uses_f64, nil, [:s64], :s64, <<>>, "accel_user", true, nil, 0, 0}
      given = Accel.Tensor.from_list([1, 2, 3], backend: :opencl)

      {out, false} =
        Accel.Job.call(&Accel.NIF.tensor_source_kernel(kterm, [given.ref], 3, <<>>, :opencl, 0, &1))

      assert Accel.Tensor.to_list(Accel.Tensor.wrap(out, {3}, :s64)) == [2, 5, 10]
      assert Accel.Tensor.to_list(given) == [2, 5, 10]
    end

    @tag :opencl
    test "OpenCL: binaries stream through the device in chunks, with Enum.map's results" do
      # 300,001 elements: four chunks of 75,001 on two queues; flagged elements in the last chunk
      n = 300_001
      xs = Enum.map(1..n, &(&1 * 7919 - 1_000_000))
      xs = List.replace_at(xs, n - 2, 0x100000000) |> List.replace_at(n - 5, -0x100000001)
      bin = for x <- xs, into: <<>>, do: <<x::signed-native-64>>
      k = Accel.kernel(fn x -> x * x + 1 end)
      assert Accel.map(bin, k, backend: :opencl, as: :list) == Enum.map(xs, &(&1 * &1 + 1))
      assert Accel.map(xs, k, backend: :opencl) == Enum.map(xs, &(&1 * &1 + 1))

      # two inputs of two types (a list of floats is sent as f64), a float output (written over the
      # f64 input's buffer)
      fs = Enum.map(1..n, &(&1 / 8))
      mix = Accel.kernel(fn x, f -> x * 0.5 + f end)
      assert Accel.map({bin, fs}, mix, backend: :opencl, as: :list) == Enum.zip_with(xs, fs, &(&1 * 0.5 + &2))

      # a boolean output: a buffer of its own; an s32 input
      small = for x <- 1..n, into: <<>>, do: <<rem(x, 1000) - 500::signed-native-32>>

      assert Accel.map(small, Accel.kernel(fn x -> x > 0 end), backend: :opencl, type: :s32, as: :list) ==
               Enum.map(1..n, &(rem(&1, 1000) - 500 > 0))

      # the stream stops at an element where Elixir raises, with the BEAM's exception
      assert_raise ArithmeticError, fn ->
        Accel.map(List.replace_at(xs, n - 1, 0), Accel.kernel(fn x -> div(1000, x) end), backend: :opencl)
      end
    end

    test "map_source, the streamed path's NIF, trusts nothing" do
      k = Accel.kernel(fn x -> x + 1 end)
      c = Accel.Kernel.Map.compiled(k, [:s64])
      kterm = {c.key, c.source, c.uses_f64, nil, [:s64], :s64, <<>>, "accel_user", true, nil, 0, nil}

      call = fn kt, bins, n, backend ->
        Accel.Job.call(&Accel.NIF.map_source(kt, bins, n, <<>>, backend, 0, &1))
      end

      assert_raise ArgumentError, ~r/to devices only/, fn -> call.(kterm, [<<1::64>>], 1, :cpu) end

      if Enum.any?(Accel.backends(), &(&1.name == :opencl and &1.available)) do
        assert_raise ArgumentError, ~r/input 0 has 9 bytes, not 1 elements of :s64/, fn ->
          call.(kterm, [<<1::72>>], 1, :opencl)
        end

        assert_raise ArgumentError, ~r/input 0 must be a binary/, fn -> call.(kterm, [[1]], 1, :opencl) end

        assert_raise ArgumentError, ~r/takes 1 input\(s\), got more/, fn ->
          call.(kterm, [<<>>, <<>>], 0, :opencl)
        end

        assert_raise ArgumentError, ~r/a list of binaries/, fn -> call.(kterm, <<>>, 0, :opencl) end

        assert_raise ArgumentError, ~r/one launch, with 1 input\(s\) and 0 scalar\(s\), got 0 and 0/, fn ->
          call.(kterm, [], 0, :opencl)
        end

        assert_raise ArgumentError, ~r/runs in one launch/, fn ->
          call.(put_elem(kterm, 10, 2), [<<1::native-64>>], 1, :opencl)
        end

        assert call.(kterm, [<<41::signed-native-64>>], 1, :opencl) == {<<42::signed-native-64>>, false}
        assert call.(kterm, [<<>>], 0, :opencl) == {<<>>, false}
      end
    end

    @tag :cuda
    test "CUDA: compiled by NVRTC once per architecture; tensors stay on the device" do
      k = Accel.kernel(fn x -> rem(x * 0x4000000000000, 1_000_003) end)
      expected = Enum.map(1..100_000, &rem(&1 * 0x4000000000000, 1_000_003))
      assert Accel.map(1..100_000, k, backend: :cuda) == expected
      t = Accel.Tensor.from_list([1, 2, 3], backend: :cuda)
      out = Accel.map(t, Accel.kernel(fn x -> x * 0x4000000000000000 end), as: :list)
      assert out == [0x4000000000000000, 0x8000000000000000, 0xC000000000000000]
      assert Path.wildcard(Path.join(Accel.Kernel.Native.cache_dir(), "*.cubin")) != []
    end

    test "CUDA without a device: the backend's own reason, as for every :cuda call" do
      if not Enum.any?(Accel.backends(), &(&1.name == :cuda and &1.available)) do
        k = Accel.kernel(fn x -> x + 1 end)

        assert_raise ArgumentError, ~r/^backend :cuda is (unavailable|not compiled)/, fn ->
          Accel.map(1..5, k, backend: :cuda)
        end
      end
    end
  end

  describe "the NIF trusts nothing" do
    test "a compiled kernel given inputs of another type, number or scalar count is refused" do
      k = Accel.kernel(fn x -> x + 1 end)
      Accel.map([1], k, backend: :cpu)

      [compiled] =
        for {{Accel.Kernel.Map, id, [{:s64, :buffer}], [], []}, c} <- :persistent_term.get(),
            id == k.id,
            do: c

      lib = Accel.Kernel.Native.library(compiled.key, compiled.source)

      kterm = fn types, slots ->
        {compiled.key, compiled.source, false, lib, types, :s64, :binary.copy(<<8>>, slots), "accel_user",
         true}
      end

      s32 = Accel.Tensor.from_list([1, 2], type: :s32, backend: :cpu)
      s64 = Accel.Tensor.from_list([1, 2], backend: :cpu)

      call = fn kt, tensors, slots ->
        Accel.Job.call(
          &Accel.NIF.tensor_source_kernel(kt, Enum.map(tensors, fn t -> t.ref end), 2, slots, :cpu, 0, &1)
        )
      end

      assert_raise ArgumentError, ~r/input 0 is :s32, but the kernel was compiled for :s64/, fn ->
        call.(kterm.([:s64], 0), [s32], <<>>)
      end

      assert_raise ArgumentError, ~r/takes 1 input buffers and 0 scalars, got 2 and 0/, fn ->
        call.(kterm.([:s64], 0), [s64, s64], <<>>)
      end

      assert_raise ArgumentError, ~r/got 1 and 1/, fn -> call.(kterm.([:s64], 0), [s64], <<0::64>>) end

      assert_raise ArgumentError, ~r/has 2 elements, not 3/, fn ->
        Accel.Job.call(&Accel.NIF.tensor_source_kernel(kterm.([:s64], 0), [s64.ref], 3, <<>>, :cpu, 0, &1))
      end

      assert_raise ArgumentError, ~r/expected a compiled kernel/, fn -> call.({:nope}, [s64], <<>>) end

      assert_raise ArgumentError, ~r/not compiled for the CPU backend/, fn ->
        call.(put_elem(kterm.([:s64], 0), 3, nil), [s64], <<>>)
      end

      # the text is not read where the code is given (a loaded library), but still checked
      assert_raise ArgumentError, ~r/a kernel's source must be a binary, got: :text/, fn ->
        call.(put_elem(kterm.([:s64], 0), 1, :text), [s64], <<>>)
      end

      assert_raise ArgumentError, ~r/a kernel's source must be a binary/, fn ->
        call.(kterm.([:s64], 0) |> put_elem(1, [1]) |> put_elem(3, nil), [s64], <<>>)
      end

      assert_raise ArgumentError, ~r/scalars are 1, 2, 4 or 8 bytes/, fn ->
        call.(put_elem(kterm.([:s64], 0), 6, <<3>>), [s64], <<0::64>>)
      end

      assert_raise ArgumentError, ~r/name without NUL bytes/, fn ->
        call.(put_elem(kterm.([:s64], 0), 7, "accel\0user"), [s64], <<>>)
      end

      # the resumable words: bounded, and only for generated kernels
      resumable = fn words, flag ->
        Tuple.append(put_elem(kterm.([:s64], 0), 8, flag), nil) |> Tuple.append(words)
      end

      assert_raise ArgumentError, ~r/at most 4096 words of state/, fn ->
        call.(resumable.(4097, true), [s64], <<>>)
      end

      assert_raise ArgumentError, ~r/a kernel's resumable words/, fn ->
        call.(resumable.(-1, true), [s64], <<>>)
      end

      assert_raise ArgumentError, ~r/only generated kernels/, fn ->
        call.(resumable.(3, false), [s64], <<>>)
      end

      # (the CPU backend runs loops to their end: its text has no resumable form)
      assert {_, false} = call.(resumable.(3, true), [s64], <<>>)

      # the input the output may overwrite: one of the kernel's, or nil; the CPU backend never
      # overwrites (its tensors may share a binary's bytes)
      into = &Tuple.append(resumable.(0, true), &1)
      assert_raise ArgumentError, ~r/not input 1/, fn -> call.(into.(1), [s64], <<>>) end

      assert_raise ArgumentError, ~r/the input a kernel's output may overwrite/, fn ->
        call.(into.(-1), [s64], <<>>)
      end

      # then the launch's work (where it runs: inline when small), a count or nil, and nothing more
      assert {worked, false} = call.(Tuple.append(into.(0), 4), [s64], <<>>)
      assert Accel.Tensor.to_list(Accel.Tensor.wrap(worked, {2}, :s64)) == [2, 3]
      assert {_, false} = call.(Tuple.append(into.(0), nil), [s64], <<>>)

      assert_raise ArgumentError, ~r/a kernel's work/, fn ->
        call.(Tuple.append(into.(0), -1), [s64], <<>>)
      end

      assert_raise ArgumentError, ~r/expected a compiled kernel/, fn ->
        call.(into.(0) |> Tuple.append(0) |> Tuple.append(0), [s64], <<>>)
      end

      assert {out, false} = call.(into.(nil), [s64], <<>>)
      assert {out0, false} = call.(into.(0), [s64], <<>>)
      assert Accel.Tensor.to_list(Accel.Tensor.wrap(out0, {2}, :s64)) == [2, 3]

      assert Accel.Tensor.to_list(s64) == [1, 2] and
               Accel.Tensor.to_list(Accel.Tensor.wrap(out, {2}, :s64)) == [2, 3]

      assert {_, false} = call.(kterm.([:s64], 0), [s64], <<>>)
    end

    test "kernel_load refuses what is not a kernel library" do
      assert_raise ArgumentError, ~r/the path must be a binary/, fn ->
        Accel.NIF.kernel_load(123, "accel_user")
      end

      assert_raise ArgumentError, ~r/NUL byte/, fn -> Accel.NIF.kernel_load("/tmp/a\0b.so", "accel_user") end
      e = assert_raise Accel.Error, fn -> Accel.NIF.kernel_load("/nonexistent/kernel.so", "accel_user") end
      assert e.reason == :load_failed

      libc =
        Enum.find(
          ["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib/libc.so.6"],
          &File.exists?/1
        )

      if libc,
        do:
          assert_raise(Accel.Error, ~r/has no accel_user entry/, fn ->
            Accel.NIF.kernel_load(libc, "accel_user")
          end)

      # only Accel's entries are looked up: no other symbol of a library is ever called as one
      for entry <- ["printf", "accel_user_1;", "accel_userX", String.duplicate("accel_user_1", 6), 7] do
        assert_raise ArgumentError, ~r/the entry must be (accel_user|a binary)/, fn ->
          Accel.NIF.kernel_load(libc || "/x.so", entry)
        end
      end
    end
  end

  describe "streams" do
    test "Accel.Stream.map_chunks takes a kernel" do
      k = Accel.kernel(fn x -> rem(x * x, 97) end)
      chunks = 1..1000 |> Accel.Stream.map_chunks(k, chunk_size: 128) |> Enum.to_list()
      assert List.flatten(chunks) == Enum.map(1..1000, &rem(&1 * &1, 97))
    end
  end
end
