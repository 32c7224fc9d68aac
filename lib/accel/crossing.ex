defmodule Accel.Crossing do
  @moduledoc """
  What crossing the NIF costs, as functions you can time yourself, and `measure/1` to time them all
  (`mix accel.overhead` prints its table).

  Each function does exactly the conversions `Accel.logistic_map/2` does for that kind of input, and
  no compute: the original Elixir/OpenCL experiment spent 6.0 s of a 6.6 s GPU run in such an
  "empty" list round trip. They follow the same scheduling rule as real calls (small inputs inline,
  large ones on a dirty CPU scheduler), so their timings are the ones a real call pays.
  """

  # Whether this VM reads lists of small integers without a NIF call per element (checked when
  # the NIF loads; false on a VM whose term layout differs, where every element takes the API).
  @doc false
  def fast_list_reader?, do: Accel.NIF.fast_list_reader()

  @doc "An empty NIF call on the calling (normal) scheduler. Returns `:ok`."
  @spec noop() :: :ok
  def noop, do: Accel.NIF.noop()

  @doc "An empty NIF call on a dirty CPU scheduler: the cost of the hop there and back."
  @spec noop_dirty_cpu() :: :ok
  def noop_dirty_cpu, do: Accel.NIF.noop_dirty_cpu()

  @doc "An empty NIF call on a dirty IO scheduler (where device waits run)."
  @spec noop_dirty_io() :: :ok
  def noop_dirty_io, do: Accel.NIF.noop_dirty_io()

  @doc """
  Converts a list of integers into a native int64 buffer and back into a new list.

      iex> Accel.Crossing.list_round_trip([1, -2, 3])
      [1, -2, 3]
  """
  @spec list_round_trip([integer()]) :: [integer()]
  def list_round_trip(list) when is_list(list), do: Accel.NIF.list_round_trip(list)
  def list_round_trip(other), do: raise(ArgumentError, "expected a list, got: #{inspect(other, limit: 5)}")

  @doc """
  A list of `count` zeros, built by a NIF the cheapest way one can return a list: the floor under
  every list a NIF returns (what is left is the VM's heap), against which the other crossings are
  measured.

      iex> Accel.Crossing.zeros_list(3)
      [0, 0, 0]
  """
  @spec zeros_list(non_neg_integer()) :: [0]
  def zeros_list(count) when is_integer(count) and count >= 0, do: Accel.NIF.zeros_list(count)

  def zeros_list(other),
    do: raise(ArgumentError, "expected a non-negative integer count, got: #{inspect(other, limit: 5)}")

  @doc """
  Generates a range natively and returns it as a list.

      iex> Accel.Crossing.range_to_list(10..1//-4)
      [10, 6, 2]
  """
  @spec range_to_list(Range.t()) :: [integer()]
  def range_to_list(%Range{} = range), do: Accel.NIF.range_to_list(range)
  def range_to_list(other), do: raise(ArgumentError, "expected a Range, got: #{inspect(other, limit: 5)}")

  @doc """
  Reads a binary of int64s in place and returns a copy in a new binary (what a binary result costs).

      iex> Accel.Crossing.binary_round_trip(<<7::signed-native-64>>)
      <<7::signed-native-64>>
  """
  @spec binary_round_trip(binary()) :: binary()
  def binary_round_trip(binary) when is_binary(binary), do: Accel.NIF.binary_round_trip(binary)

  def binary_round_trip(other),
    do: raise(ArgumentError, "expected a binary, got: #{inspect(other, limit: 5)}")

  @doc """
  Times every crossing. Returns one map per row with `:per_call_ns` (an empty input) and, for the
  conversions, `:per_element_ns` measured at `:elements` elements (default 1_000_000) net of the
  per-call cost. `:runs` (default 5) samples each; medians are reported.
  """
  @spec measure(keyword()) :: [map()]
  def measure(opts \\ []) do
    opts =
      Accel.Options.validate!(
        opts,
        [
          elements: [rule: {:integer, 1, nil}, default: 1_000_000, doc: "elements per conversion"],
          runs: [rule: {:integer, 1, nil}, default: 5, doc: "samples"]
        ],
        "Accel.Crossing.measure/1"
      )

    n = opts[:elements]
    runs = opts[:runs]
    list = Enum.to_list(1..n)
    binary = Accel.logistic_map(1..n, iterations: 0, as: :binary)

    calls = [
      {"empty NIF, normal scheduler", &noop/0, 20_000},
      {"empty NIF, dirty CPU scheduler", &noop_dirty_cpu/0, 5_000},
      {"empty NIF, dirty IO scheduler", &noop_dirty_io/0, 5_000}
    ]

    conversions = [
      {"list -> buffer -> list", fn -> list_round_trip([]) end, fn -> list_round_trip(list) end},
      {"range -> list", fn -> range_to_list(1..0//1) end, fn -> range_to_list(1..n) end},
      {"binary -> binary (copy out)", fn -> binary_round_trip(<<>>) end, fn -> binary_round_trip(binary) end},
      {"logistic_map binary -> binary (10 iterations)", fn -> Accel.logistic_map(<<>>) end,
       fn -> Accel.logistic_map(binary) end},
      {"logistic_map range -> list (10 iterations)", fn -> Accel.logistic_map(1..0//1) end,
       fn -> Accel.logistic_map(1..n) end}
    ]

    for({name, fun, loops} <- calls, do: %{crossing: name, per_call_ns: median(fun, runs, loops)}) ++
      for {name, empty, full} <- conversions do
        per_call = median(empty, runs, 2_000)
        total = median(full, runs, 1)
        %{crossing: name, per_call_ns: per_call, per_element_ns: max(total - per_call, 0) / n, elements: n}
      end
  end

  defp median(fun, runs, loops), do: Accel.Timing.measure(fun, runs: runs, loops: loops).median
end
