defmodule Accel.CrossingTest do
  use ExUnit.Case, async: true
  alias Accel.Crossing

  doctest Accel.Crossing
  doctest Accel.Timing

  test "empty calls on every scheduler kind" do
    assert Crossing.noop() == :ok
    assert Crossing.noop_dirty_cpu() == :ok
    assert Crossing.noop_dirty_io() == :ok
  end

  test "round trips return what went in, small and large" do
    for n <- [0, 1, 10_000, 10_001, 300_000] do
      list = Enum.to_list(-n..n//7)
      assert Crossing.list_round_trip(list) == list
      assert Crossing.range_to_list(-n..n//7) == list
      bin = for x <- list, into: <<>>, do: <<x::signed-native-64>>
      assert Crossing.binary_round_trip(bin) == bin
    end
  end

  test "round trips validate their input" do
    assert_raise ArgumentError, "expected a list, got: 1..2", fn -> Crossing.list_round_trip(1..2) end

    assert_raise ArgumentError, ~r/element at index 1 is not an integer/, fn ->
      Crossing.list_round_trip([1, :a])
    end

    assert_raise ArgumentError, "expected a Range, got: [1]", fn -> Crossing.range_to_list([1]) end
    assert_raise ArgumentError, ~r/not a multiple of 8/, fn -> Crossing.binary_round_trip(<<1>>) end

    # The list floor: a count, and one that a list could never reach is refused before building.
    assert Crossing.zeros_list(0) == []
    assert Crossing.zeros_list(20_000) == List.duplicate(0, 20_000)

    assert_raise ArgumentError, "expected a non-negative integer count, got: -1", fn ->
      Crossing.zeros_list(-1)
    end

    assert_raise ArgumentError, "expected a non-negative integer count, got: :a", fn ->
      Crossing.zeros_list(:a)
    end

    assert_raise Accel.Error, ~r/would not fit in memory/, fn -> Crossing.zeros_list(1_099_511_627_776) end
  end

  test "measure/1 times every crossing" do
    rows = Crossing.measure(elements: 50_000, runs: 1)
    assert length(rows) == 8

    for row <- rows do
      assert is_binary(row.crossing)
      assert row.per_call_ns > 0
    end

    assert Enum.count(rows, &Map.has_key?(&1, :per_element_ns)) == 5
  end
end
