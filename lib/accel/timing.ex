defmodule Accel.Timing do
  @moduledoc """
  A small timing helper (benchee is not available here): runs a function repeatedly and reports
  min / median / max per call. Used by `mix accel.overhead` and the scripts in `bench/`.
  """

  @type stats :: %{min: float(), median: float(), max: float(), runs: pos_integer(), loops: pos_integer()}

  @options [
    runs: [rule: {:integer, 1, nil}, default: 5, doc: "samples taken"],
    loops: [
      rule: {:integer, 1, nil},
      default: 1,
      doc: "calls per sample, back to back; a sample is their mean"
    ],
    warmup: [rule: {:integer, 0, nil}, default: 1, doc: "untimed calls first"]
  ]

  @doc """
  Times `fun`: times are in nanoseconds per call.

  ## Options

  #{Accel.Options.docs(@options)}

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
    opts = Accel.Options.validate!(opts, @options, "Accel.Timing.measure/2")
    runs = opts[:runs]
    loops = opts[:loops]
    for _ <- 1..opts[:warmup]//1, do: fun.()

    samples =
      for _ <- 1..runs do
        t0 = System.monotonic_time(:nanosecond)
        loop(fun, loops)
        (System.monotonic_time(:nanosecond) - t0) / loops
      end

    summarize(samples) |> Map.merge(%{runs: runs, loops: loops})
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
