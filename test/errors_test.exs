defmodule Accel.ErrorsTest do
  # Every bad input raises ArgumentError with a message that names the problem (and, for elements,
  # the index); nothing crashes the VM or returns wrong numbers.
  use ExUnit.Case, async: true
  import Bitwise

  defp message(fun) do
    try do
      fun.()
      flunk("expected an exception")
    rescue
      e -> {e.__struct__, Exception.message(e)}
    end
  end

  describe "elements" do
    test "non-integers are named with their index" do
      assert message(fn -> Accel.logistic_map([1, 2, 3.5]) end) ==
               {ArgumentError, "element at index 2 is not an integer: 3.5"}

      assert message(fn -> Accel.logistic_map([0.1, 1]) end) ==
               {ArgumentError, "element at index 0 is not an integer: 0.1"}

      assert message(fn -> Accel.logistic_map([3.0]) end) ==
               {ArgumentError, "element at index 0 is not an integer: 3.0"}

      assert {ArgumentError, "element at index 0 is not an integer: :a"} =
               message(fn -> Accel.logistic_map([:a]) end)

      assert {ArgumentError, "element at index 1 is not an integer: " <> _} =
               message(fn -> Accel.logistic_map([1, [2]]) end)
    end

    test "integers outside int64" do
      assert message(fn -> Accel.logistic_map([0, 1 <<< 63]) end) ==
               {ArgumentError, "element at index 1 is outside the signed 64-bit range: 9223372036854775808"}

      assert message(fn -> Accel.logistic_map([-(1 <<< 63) - 1]) end) ==
               {ArgumentError, "element at index 0 is outside the signed 64-bit range: -9223372036854775809"}
    end

    test "a bad element deep in a large list (dirty path) is found too" do
      list = Enum.to_list(1..100_000) ++ ["x"]

      assert {ArgumentError, "element at index 100000 is not an integer: <<\"x\">>"} =
               message(fn -> Accel.logistic_map(list) end)
    end

    test "improper lists" do
      assert message(fn -> Accel.logistic_map([1, 2 | 3]) end) ==
               {ArgumentError, "improper list: the tail after 2 elements is 3, not []"}
    end

    test "binaries whose size is not a multiple of 8, and bitstrings" do
      assert message(fn -> Accel.logistic_map(<<1, 2, 3, 4, 5, 6, 7, 8, 9>>) end) ==
               {ArgumentError,
                "binary input must hold whole signed 64-bit integers: its size, 9 bytes, is not a multiple of 8"}

      assert message(fn -> Accel.logistic_map(<<1::3>>) end) ==
               {ArgumentError,
                "binary input must hold whole signed 64-bit integers: got a bitstring of 3 bits"}
    end

    test "inputs of the wrong kind" do
      for bad <- [:foo, 42, %{a: 1}, {1, 2}, 1.0, self()] do
        assert {ArgumentError,
                "expected a list of integers, a Range or a binary of signed 64-bit integers, got: " <> _} =
                 message(fn -> Accel.logistic_map(bad) end)
      end
    end

    test "ranges with bignum bounds or a zero step" do
      assert {ArgumentError, "range bounds must be integers in the signed 64-bit range, got: " <> _} =
               message(fn -> Accel.logistic_map(0..(1 <<< 64)) end)

      assert {ArgumentError, "range step must be a non-zero integer in the signed 64-bit range, got: " <> _} =
               message(fn -> Accel.logistic_map(%Range{first: 1, last: 5, step: 0}) end)
    end

    test "a range too large for any memory is an Accel.Error, before any allocation" do
      assert {Accel.Error, "a range of 4611686018427387904 elements is too large to process"} =
               message(fn -> Accel.logistic_map(1..(1 <<< 62), as: :binary) end)

      assert {Accel.Error, "a list of " <> _} = message(fn -> Accel.logistic_map(1..(1 <<< 40)) end)

      assert {Accel.Error, "a result of " <> _} =
               message(fn -> Accel.logistic_map(1..(1 <<< 55), as: :binary) end)
    end
  end

  describe "options" do
    test "p must be positive and within int64" do
      assert message(fn -> Accel.logistic_map([1], p: 0) end) ==
               {ArgumentError, "option :p must be a positive integer below 2^63, got: 0"}

      assert message(fn -> Accel.logistic_map([1], p: -7) end) ==
               {ArgumentError, "option :p must be a positive integer below 2^63, got: -7"}

      assert message(fn -> Accel.logistic_map([1], p: 1 <<< 63) end) ==
               {ArgumentError, "option :p must be a positive integer below 2^63, got: 9223372036854775808"}
    end

    test "iterations must be non-negative; mu within int64" do
      assert message(fn -> Accel.logistic_map([1], iterations: -1) end) ==
               {ArgumentError, "option :iterations must be a non-negative integer below 2^63, got: -1"}

      assert message(fn -> Accel.logistic_map(1..100_000, iterations: -1) end) ==
               {ArgumentError, "option :iterations must be a non-negative integer below 2^63, got: -1"}

      assert message(fn -> Accel.logistic_map([1], mu: -(1 <<< 70)) end) ==
               {ArgumentError,
                "option :mu must be an integer in the signed 64-bit range, got: -1180591620717411303424"}
    end

    test "non-integer numeric options" do
      for key <- [:p, :mu, :iterations], bad <- [1.0, "3", nil, :x] do
        assert {ArgumentError, "option " <> rest} = message(fn -> Accel.logistic_map([1], [{key, bad}]) end)

        assert rest =~
                 ~r/^#{inspect(key)} must be an? (positive |non-negative )?integer .*, got: #{Regex.escape(inspect(bad))}$/
      end
    end

    test "unknown options and malformed option lists" do
      assert message(fn -> Accel.logistic_map([1], foo: 1) end) ==
               {ArgumentError,
                "unknown option :foo for Accel.logistic_map/2; known options: :p, :mu, :iterations, :backend, :device, :chunk_size, :max_bytes, :as"}

      assert {ArgumentError, "Accel.logistic_map/2 expects options as a keyword list, got: " <> _} =
               message(fn -> Accel.logistic_map([1], [:p]) end)

      assert {ArgumentError, "Accel.logistic_map/2 expects options as a keyword list, got: %{p: 3}"} =
               message(fn -> Accel.logistic_map([1], %{p: 3}) end)
    end

    test "unknown and unavailable backends, bad as:" do
      assert message(fn -> Accel.logistic_map([1], backend: :gpu) end) ==
               {ArgumentError, "option :backend must be one of :auto, :cpu, :opencl, :cuda, got: :gpu"}

      for %{name: name, available: false} <- Accel.backends() do
        assert {ArgumentError, "backend " <> _} = message(fn -> Accel.logistic_map([1], backend: name) end)
      end

      assert message(fn -> Accel.logistic_map([1], backend: :auto, device: 0) end) ==
               {ArgumentError, "option :device as an index needs a :backend, got: backend: :auto, device: 0"}

      cpu = List.last(Accel.devices())

      assert message(fn -> Accel.logistic_map([1], backend: :opencl, device: cpu) end) ==
               {ArgumentError, "option :device is a :cpu device, but :backend is :opencl"}

      assert message(fn -> Accel.logistic_map([1], backend: :cpu, device: -1) end) ==
               {ArgumentError,
                "option :device must be an Accel.Device, a non-negative index, :all or a non-empty list of Accel.Device, got: -1"}

      assert message(fn -> Accel.logistic_map([1], backend: :cpu, device: 1) end) ==
               {ArgumentError, "no :cpu device 1: the backend has 1 (see Accel.devices/0)"}

      for bad <- [0, -5, 1.5, :big] do
        assert message(fn -> Accel.logistic_map([1], chunk_size: bad) end) ==
                 {ArgumentError, "option :chunk_size must be a positive integer, got: #{inspect(bad)}"}
      end

      assert message(fn -> Accel.logistic_map([1], as: :tuple) end) ==
               {ArgumentError, "option :as must be one of :list, :binary, got: :tuple"}
    end
  end

  test "the VM and the library are fine after all of the above" do
    assert Accel.logistic_map(1..3, p: 61) == [28, 25, 37]
  end

  test "Accel.Error documents every reason the code raises" do
    native =
      for path <- Path.wildcard("c_src/**/*.{cpp,hpp,cu}"),
          [_, reason] <- Regex.scan(~r/Error\("([a-z_]+)"/, File.read!(path)),
          do: reason

    elixir =
      for path <- Path.wildcard("lib/**/*.ex"),
          [_, reason] <- Regex.scan(~r/raise Accel\.Error,\s*reason: :([a-z_]+)/, File.read!(path)),
          do: reason

    # reason_for() in each device backend maps vendor errors to these three.
    raised = Enum.uniq(native ++ elixir ++ ["opencl_error", "cuda_error", "internal"])
    documented = Enum.map(Accel.Error.reasons(), &Atom.to_string/1)
    assert length(native) > 10 and "no_nodes" in elixir
    assert raised -- documented == []
    assert documented -- raised == []
  end
end
