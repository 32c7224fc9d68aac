defmodule Accel.TensorAccuracyTest do
  # One accumulation rule on every backend, tested at the scale users run: sums and means of 10^7
  # elements against exact references. (The first release's f32 sums passed on 2,000 elements and
  # were 0.6% off at 10^7 on OpenCL, which accumulated in f32.)
  # Not async: Accel.TensorTest measures device memory around its own allocations.
  use ExUnit.Case, async: false
  alias Accel.Tensor, as: T

  @n 10_000_000

  setup_all do
    # mean over x_i = i / n of sigmoid(2.5 x - 1), in f64: the device computes it in f32.
    sigmoid_mean =
      Enum.reduce(0..(@n - 1), 0.0, fn i, acc -> acc + 1.0 / (1.0 + :math.exp(1.0 - 2.5 * i / @n)) end) / @n

    %{sigmoid_mean: sigmoid_mean}
  end

  defp assert_relative(got, want, rel) do
    assert abs(got - want) <= rel * abs(want),
           "got #{got}, want #{want} (relative error #{abs(got - want) / abs(want)})"
  end

  for backend <- [:cpu, :opencl, :cuda] do
    describe "#{backend}" do
      @describetag backend
      @backend backend

      test "f32: the sum of 10^7 copies of 0.1, and a mean of 10^7 sigmoids", %{sigmoid_mean: want} do
        tenth = <<0.1::float-32-native>>
        t = T.from_binary(:binary.copy(tenth, @n), :f32, {@n}, backend: @backend)
        <<tenth_f32::float-32-native>> = tenth
        assert_relative(t |> T.sum() |> T.to_number(), @n * tenth_f32, 1.0e-7)

        x = T.iota({@n}, type: :f32, backend: @backend) |> T.divide(@n * 1.0)
        got = x |> T.multiply(2.5) |> T.subtract(1.0) |> T.sigmoid() |> T.mean() |> T.to_number()
        assert_relative(got, want, 1.0e-6)
      end

      test "axis sums of 10^7 elements: f32 within 1e-7, integers exact" do
        rows = T.iota({2, div(@n, 2)}, type: :f32, backend: @backend) |> T.sum(axis: 1) |> T.to_list()
        half = div(@n, 2)
        # iota counts 0 .. n - 1 exactly in f32 up to 2^24; each row is an arithmetic series.
        want = [div(half * (half - 1), 2), div(half * (half - 1), 2) + half * half]
        for {g, w} <- Enum.zip(rows, want), do: assert_relative(g, w, 1.0e-7)

        ints = T.iota({@n}, type: :s32, backend: @backend)
        assert ints |> T.sum() |> T.to_number() == div(@n * (@n - 1), 2)

        assert ints |> T.reshape({div(@n, 4), 4}) |> T.sum(axis: 0) |> T.to_list() ==
                 for(k <- 0..3, do: Enum.sum(for i <- 0..(div(@n, 4) - 1), do: 4 * i + k))
      end
    end
  end
end
