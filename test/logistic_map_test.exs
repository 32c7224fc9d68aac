defmodule Accel.LogisticMapTest do
  use ExUnit.Case, async: true
  alias Accel.Test.Reference

  doctest Accel

  @known Reference.known_first_ten()

  describe "known values" do
    test "1..10 with the defaults" do
      assert Accel.logistic_map(1..10) == @known
      assert Reference.logistic_map(1..10) == @known
    end

    test "the README's small example" do
      assert Accel.logistic_map([1, 2, 3], p: 61, mu: 22) == [28, 25, 37]
    end
  end

  describe "input and output forms" do
    test "list, range and binary inputs agree" do
      xs = Enum.to_list(-500..500)
      expected = Reference.logistic_map(xs)
      assert Accel.logistic_map(xs) == expected
      assert Accel.logistic_map(-500..500) == expected
      assert Accel.logistic_map(Reference.to_binary(xs)) == Reference.to_binary(expected)
    end

    test "as: overrides the output form" do
      expected = Reference.logistic_map(1..100)
      assert Accel.logistic_map(1..100, as: :binary) == Reference.to_binary(expected)
      assert Accel.logistic_map(Enum.to_list(1..100), as: :binary) == Reference.to_binary(expected)
      assert Accel.logistic_map(Reference.to_binary(Enum.to_list(1..100)), as: :list) == expected
    end

    test "ranges with any step, descending, single and empty" do
      for range <- [1..100//7, 100..1//-3, -50..50//25, 5..5, 1..0//1, 10..20//-1, 0..-1//1] do
        assert Accel.logistic_map(range) == Reference.logistic_map(Enum.to_list(range)), inspect(range)
      end
    end

    test "ranges at the ends of int64" do
      max = Reference.int64_max()
      min = Reference.int64_min()

      for range <- [(max - 5)..max, min..(min + 5), max..(max - 9)//-3, min..max//0x1000000000000001] do
        assert Accel.logistic_map(range) == Reference.logistic_map(Enum.to_list(range)), inspect(range)
      end
    end

    test "empty inputs" do
      assert Accel.logistic_map([]) == []
      assert Accel.logistic_map(<<>>) == <<>>
      assert Accel.logistic_map([], as: :binary) == <<>>
    end

    test "sub-binaries at odd offsets are read correctly" do
      xs = Enum.to_list(1..1000)

      <<_::binary-size(3), sub::binary-size(8000), _::binary>> =
        <<0, 0, 0>> <> Reference.to_binary(xs) <> <<9>>

      assert Accel.logistic_map(sub, as: :list) == Reference.logistic_map(xs)
    end

    test "iterations: 0 is the identity" do
      xs = [Reference.int64_min(), -1, 0, 1, Reference.int64_max()]
      assert Accel.logistic_map(xs, iterations: 0) == xs
    end

    test "inputs on both sides of the inline/dirty boundary" do
      for n <- [7999, 8000, 8001, 10_000, 10_001, 100_003] do
        xs = Enum.to_list(n..1//-1)
        assert Accel.logistic_map(xs) == Reference.logistic_map(xs), "n = #{n}"
        assert Accel.logistic_map(1..n, as: :binary) == Reference.to_binary(Reference.logistic_map(1..n))
      end
    end
  end

  describe "backends" do
    test "the CPU backend is compiled in and available" do
      assert %{name: :cpu, compiled: true, available: true, detail: detail} = hd(Accel.backends())
      assert detail =~ ~r/^\d+ threads(; OpenBLAS \w+)?$/
    end

    # (OpenBLAS 0.3.21, Debian 12's, took this development machine's Sapphire Rapids Xeon for
    # Prescott: SSE3 kernels, a third of the products' speed; Accel.NIF names them where it sees this)
    test "OpenBLAS runs kernels of the CPU's own instruction set" do
      %{detail: detail} = hd(Accel.backends())

      with [_, core] <- Regex.run(~r/OpenBLAS (\w+)/, detail),
           {:ok, cpuinfo} <- File.read("/proc/cpuinfo") do
        assert Accel.NIF.blas_core(core, cpuinfo) == nil,
               "OpenBLAS runs #{core}'s kernels on a CPU with AVX2 and FMA (#{detail})"
      end

      # where Accel named them, the process's environment (not only the VM's copy) says so
      case :persistent_term.get({Accel.NIF, :blas_core}, nil) do
        {_picked, named} ->
          assert Accel.BlasEnv.core() == String.to_charlist(named)
          assert detail =~ "OpenBLAS #{named}"

        nil ->
          :ok
      end
    end

    test "the OpenBLAS kernels named for a CPU that OpenBLAS does not know" do
      intel = "vendor_id\t: GenuineIntel\nflags\t\t: sse3 avx avx2 fma avx512f avx512bw avx512dq avx512vl\n"
      amd = "vendor_id\t: AuthenticAMD\nflags\t\t: sse3 avx avx2 fma avx512f avx512bw avx512dq avx512vl\n"
      old = "vendor_id\t: GenuineIntel\nflags\t\t: sse3 avx\n"

      assert Accel.NIF.blas_core("Prescott", intel) == "SkylakeX"
      assert Accel.NIF.blas_core("Prescott", amd) == "SkylakeX"
      assert Accel.NIF.blas_core("Sandybridge", String.replace(amd, ~r/ avx512\w+/, "")) == "Haswell"
      assert Accel.NIF.blas_core("Core2", String.replace(intel, " avx512bw", "")) == "Haswell"
      # its own pick where that uses AVX2, or where the CPU has none
      assert Accel.NIF.blas_core("Cooperlake", intel) == nil
      assert Accel.NIF.blas_core("Haswell", amd) == nil
      assert Accel.NIF.blas_core("Prescott", old) == nil
      assert Accel.NIF.blas_core("Prescott", "") == nil
    end

    test "every backend is reported, with a reason when unavailable" do
      backends = Accel.backends()
      assert Enum.map(backends, & &1.name) == [:cpu, :opencl, :cuda]

      for %{available: false, detail: detail} <- backends,
          do:
            assert(
              detail =~
                ~r/not compiled|no OpenCL platform|no devices|no usable CUDA device|reports no devices/
            )
    end

    test "backend: :cpu and :auto agree" do
      assert Accel.logistic_map(1..1000, backend: :cpu) == Accel.logistic_map(1..1000, backend: :auto)
    end
  end
end
