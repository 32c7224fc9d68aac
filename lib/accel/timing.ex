defmodule Accel.Timing do
  @moduledoc """
  A small timing helper (benchee is not available here): runs a function repeatedly and reports
  min / median / max per call. Used by `mix accel.overhead` and the scripts in `bench/`.
  """

  @type stats :: %{min: float(), median: float(), max: float(), runs: pos_integer(), loops: pos_integer()}

  @doc """
  Times `fun`. Each of `:runs` samples (default 5) calls it `:loops` times (default 1) back to back
  and divides by the count; `:warmup` calls (default 1) run first, untimed. Times are in nanoseconds
  per call.

      iex> %{min: min, median: median, max: max, runs: 3} = Accel.Timing.measure(fn -> :ok end, runs: 3, loops: 10)
      iex> min <= median and median <= max
      true
  """
  @spec measure((() -> any()), keyword()) :: stats()
  def measure(fun, opts \\ [])

  def measure(fun, _opts) when not is_function(fun, 0) do
    raise ArgumentError, "measure/2 expects a function of no arguments, got: #{inspect(fun, limit: 5)}"
  end

  def measure(fun, opts) do
    opts = Accel.validate_opts!(opts, [runs: 5, loops: 1, warmup: 1], "Accel.Timing.measure/2")
    runs = count!(opts, :runs, 1)
    loops = count!(opts, :loops, 1)
    for _ <- 1..count!(opts, :warmup, 0)//1, do: fun.()

    samples =
      for _ <- 1..runs do
        t0 = System.monotonic_time(:nanosecond)
        loop(fun, loops)
        (System.monotonic_time(:nanosecond) - t0) / loops
      end

    summarize(samples) |> Map.merge(%{runs: runs, loops: loops})
  end

  @doc false
  # An integer option of at least `min`, or ArgumentError naming it.
  def count!(opts, key, min) do
    case opts[key] do
      n when is_integer(n) and n >= min ->
        n

      other ->
        raise ArgumentError,
              "option #{inspect(key)} must be an integer >= #{min}, got: #{inspect(other, limit: 5)}"
    end
  end

  @doc "min / median / max of a non-empty list of numbers."
  @spec summarize([number()]) :: %{min: number(), median: number(), max: number()}
  def summarize(samples) when samples != [] do
    sorted = Enum.sort(samples)
    n = length(sorted)
    mid = div(n, 2)

    median =
      if rem(n, 2) == 1, do: Enum.at(sorted, mid), else: (Enum.at(sorted, mid - 1) + Enum.at(sorted, mid)) / 2

    %{min: hd(sorted), median: median, max: List.last(sorted)}
  end

  defp loop(_fun, 0), do: :ok

  defp loop(fun, n) do
    fun.()
    loop(fun, n - 1)
  end
end
