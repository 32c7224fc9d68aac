defmodule Accel.BackendExactnessTest do
  # The same reference cases on every backend, against the pure-Elixir definition. Tests for a
  # backend carry its name as a tag; test_helper.exs excludes the tags of unusable backends.
  use ExUnit.Case, async: true
  import Bitwise
  alias Accel.Test.Reference

  @params [
    [p: 6_700_417, mu: 22],
    [p: 6_700_417, mu: -22],
    [p: 61, mu: 22, iterations: 3],
    [p: 2_147_483_647, mu: 3],
    [p: 4_294_967_295, mu: 1],
    [p: (1 <<< 61) - 1, mu: 22],
    [p: 0x7FFFFFFFFFFFFFFF, mu: -0x8000000000000000],
    [p: 0x7FFFFFFFFFFFFFFF, mu: 0x7FFFFFFFFFFFFFFF],
    [p: 1, mu: 5],
    [p: 2, mu: -7, iterations: 1],
    [p: 1_000_003, mu: -0x8000000000000000, iterations: 25]
  ]

  for backend <- [:cpu, :opencl, :cuda] do
    describe "#{backend}" do
      @describetag backend
      @backend backend

      test "known values" do
        assert Accel.logistic_map(1..10, backend: @backend) == Reference.known_first_ten()
      end

      test "every parameter set on int64 extremes and random inputs" do
        extremes = [
          Reference.int64_min(),
          Reference.int64_min() + 1,
          -1,
          0,
          1,
          Reference.int64_max() - 1,
          Reference.int64_max()
        ]

        for opts <- @params do
          xs = extremes ++ Reference.random_int64s(2000, opts[:p] |> rem(1000) |> abs())
          opts = [backend: @backend] ++ opts
          assert Accel.logistic_map(xs, opts) == Reference.logistic_map(xs, opts), inspect(opts)
        end
      end

      test "thousands of random parameter sets" do
        :rand.seed(:exsss, {1, 2, 3})

        for _ <- 1..if(@backend == :cpu, do: 3000, else: 300) do
          p = Enum.random([:rand.uniform(100), :rand.uniform(1 <<< 32), :rand.uniform(1 <<< (63 - 1))])
          mu = :rand.uniform(1 <<< 64) - (1 <<< 63)
          opts = [p: p, mu: mu, iterations: :rand.uniform(12) - 1]
          xs = Reference.random_int64s(5, :rand.uniform(1_000_000))

          assert Accel.logistic_map(xs, [backend: @backend] ++ opts) == Reference.logistic_map(xs, opts),
                 inspect(opts)
        end
      end

      test "all input and output forms, large and small" do
        for n <- [0, 1, 255, 257, 10_001, 300_007] do
          expected = Reference.logistic_map(1..n//1)
          assert Accel.logistic_map(1..n//1, backend: @backend) == expected

          assert Accel.logistic_map(Enum.to_list(1..n//1), backend: @backend, as: :binary) ==
                   Reference.to_binary(expected)

          assert Accel.logistic_map(Reference.to_binary(Enum.to_list(1..n//1)), backend: @backend) ==
                   Reference.to_binary(expected)
        end

        assert Accel.logistic_map(100..-100//-7, backend: @backend) == Reference.logistic_map(100..-100//-7)
      end

      test "forced chunks give the unchunked result" do
        xs = Reference.random_int64s(5003, 9)
        whole = Accel.logistic_map(xs, backend: @backend, mu: -22)

        for chunk <- [1, 7, 1000, 5002, 5003, 5004] do
          assert Accel.logistic_map(xs, backend: @backend, mu: -22, chunk_size: chunk) == whole
        end

        assert Accel.logistic_map(-3000..3000//3, backend: @backend, chunk_size: 17) ==
                 Reference.logistic_map(-3000..3000//3)
      end

      test "every device of the backend is listed and selectable" do
        devices = Enum.filter(Accel.devices(), &(&1.backend == @backend))
        assert devices != []

        for device <- devices do
          assert %Accel.Device{name: name, type: type, memory: memory, compute_units: units} = device
          assert is_binary(name) and type in [:cpu, :gpu, :accelerator, :other] and memory > 0 and units > 0
          assert Accel.logistic_map([1, 2, 3], p: 61, device: device) == [28, 25, 37]
          assert Accel.logistic_map([1, 2, 3], p: 61, backend: @backend, device: device.id) == [28, 25, 37]
        end

        assert_raise ArgumentError, ~r/device #{length(devices)}/, fn ->
          Accel.logistic_map([1], backend: @backend, device: length(devices))
        end
      end

      test "concurrent callers get their own results" do
        tasks =
          for mu <- 1..16 do
            Task.async(fn -> {mu, Accel.logistic_map(1..50_000, backend: @backend, mu: mu, as: :binary)} end)
          end

        for {mu, bin} <- Task.await_many(tasks, 60_000) do
          assert bin == Reference.to_binary(Reference.logistic_map(1..50_000, mu: mu))
        end
      end
    end
  end
end
