defmodule Accel.Test.Reference do
  @moduledoc false
  # The definition Accel must match, in plain Elixir: arbitrary-precision integers, and `rem/2`,
  # whose result takes the dividend's sign.

  def logistic_map(xs, opts \\ []) do
    p = Keyword.get(opts, :p, 6_700_417)
    mu = Keyword.get(opts, :mu, 22)
    iterations = Keyword.get(opts, :iterations, 10)
    Enum.map(xs, &iterate(&1, p, mu, iterations))
  end

  defp iterate(x, _p, _mu, 0), do: x
  defp iterate(x, p, mu, n), do: iterate(rem(mu * x * (x + 1), p), p, mu, n - 1)

  # The values the issue gives for 1..10 with the defaults: a check on the reference itself.
  def known_first_ten,
    do: [
      5_756_693,
      3_714_507,
      3_456_095,
      6_578_590,
      2_830_244,
      6_018_359,
      3_928_136,
      3_291_622,
      2_592_373,
      2_538_985
    ]

  def to_binary(xs), do: for(x <- xs, into: <<>>, do: <<x::signed-native-64>>)
  def from_binary(bin), do: for(<<x::signed-native-64 <- bin>>, do: x)

  @min -0x8000000000000000
  @max 0x7FFFFFFFFFFFFFFF
  def int64_min, do: @min
  def int64_max, do: @max

  # Seeded generator (stream_data is not available): mixes the full int64 range, 32-bit values,
  # small values and values near the extremes.
  def random_int64s(count, seed) do
    :rand.seed(:exsss, {seed, seed * 7 + 1, seed * 13 + 2})

    for i <- 1..count//1 do
      case rem(i, 4) do
        0 ->
          :rand.uniform(@max - @min + 1) + @min - 1

        1 ->
          :rand.uniform(0x100000000) - 0x80000000

        2 ->
          :rand.uniform(20_001) - 10_001

        3 ->
          if(:rand.uniform(2) == 1, do: @max - :rand.uniform(1000) + 1, else: @min + :rand.uniform(1000) - 1)
      end
    end
  end
end
