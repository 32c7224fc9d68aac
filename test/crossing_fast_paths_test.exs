defmodule Accel.CrossingFastPathsTest do
  # The crossings' fast paths must give what the slow ones give: lists of small integers read
  # without a NIF call per element (up to the first element that is not one, where the API takes
  # over, errors included), and CPU tensors that share a binary's bytes instead of copying them.
  use ExUnit.Case, async: false

  alias Accel.Test.Reference
  alias Accel.Tensor, as: T

  import Bitwise

  @small_max (1 <<< 59) - 1
  @small_min 0 - (1 <<< 59)
  # Where integers stop being immediates, and the ends of int64: read through the API.
  @edges [
    0,
    1,
    -1,
    @small_max,
    @small_min,
    @small_max + 1,
    @small_min - 1,
    Reference.int64_max(),
    Reference.int64_min()
  ]

  defp list_with_edges(count, seed) do
    :rand.seed(:exsss, {seed, seed, seed})

    for i <- 1..count,
        do: if(rem(i, 997) == 0, do: Enum.random(@edges), else: :rand.uniform(1 <<< 40) - (1 <<< 39))
  end

  test "the fast reader is on for this VM (its term layout passed the check at load)" do
    assert Accel.Crossing.fast_list_reader?()
  end

  test "lists of small integers, bignums among them, decode exactly (inline and dirty sizes)" do
    for count <- [10, 5_000, 200_000], seed <- 1..3 do
      list = list_with_edges(count, seed) ++ @edges
      assert Accel.logistic_map(list, iterations: 0, as: :binary, backend: :cpu) == Reference.to_binary(list)
      assert T.to_binary(T.from_list(list, type: :s64, backend: :cpu)) == Reference.to_binary(list)
      assert T.to_list(T.from_list(list, backend: :cpu)) == list
      # And back: lists made from buffers, small integers in place and bignums through the API.
      assert Accel.logistic_map(list, iterations: 0, backend: :cpu) == list
      assert Accel.logistic_map(Reference.to_binary(list), iterations: 0, as: :list, backend: :cpu) == list
    end

    list = list_with_edges(20_000, 7)
    assert Accel.logistic_map(list, p: 61, backend: :cpu) == Reference.logistic_map(list, p: 61)
  end

  test "after a run of small integers, a bad element is still named by its index" do
    prefix = Enum.to_list(1..50_000)

    assert_raise ArgumentError,
                 ~r/element at index 50000 is outside the signed 64-bit range: 9223372036854775808/,
                 fn ->
                   Accel.logistic_map(prefix ++ [1 <<< 63, 1], backend: :cpu)
                 end

    assert_raise ArgumentError, ~r/element at index 50000 is not an integer: 1.5/, fn ->
      Accel.logistic_map(prefix ++ [1.5], backend: :cpu)
    end

    # A float after small integers: the tensor becomes f64, element for element.
    assert T.to_list(T.from_list(prefix ++ [0.5], backend: :cpu)) == Enum.map(prefix, &(&1 * 1.0)) ++ [0.5]
  end

  describe "CPU tensors and binaries share bytes" do
    test "a tensor made from a binary outlives the binary, and operations never write into it" do
      bin = Reference.to_binary(Enum.to_list(1..100_000))
      copy = :binary.copy(bin)
      t = T.from_binary(bin, :s64, backend: :cpu)
      doubled = T.add(t, t)
      assert T.to_binary(doubled) == Reference.to_binary(Enum.map(1..100_000, &(&1 * 2)))

      assert T.to_binary(Accel.logistic_map(t, p: 61)) ==
               Reference.to_binary(Reference.logistic_map(1..100_000, p: 61))

      assert bin == copy

      # The process that made the binary is gone and collected: the tensor still reads it.
      t2 =
        Task.async(fn -> T.from_binary(Reference.to_binary(Enum.to_list(1..100_000)), :s64, backend: :cpu) end)

      t2 = Task.await(t2)
      :erlang.garbage_collect()
      assert T.to_binary(t2) == copy
    end

    test "a binary made from a tensor outlives the tensor" do
      t = T.iota({200_000}, type: :s64, backend: :cpu)
      bin = T.to_binary(t)
      T.free(t)
      :erlang.garbage_collect()
      assert bin == Reference.to_binary(Enum.to_list(0..199_999))
      assert binary_part(bin, 8, 8) == <<1::signed-native-64>>
    end

    test "a binary at an odd offset (a sub-binary) is copied, and reads the same" do
      whole = <<0>> <> Reference.to_binary(Enum.to_list(1..50_000)) <> <<0>>
      part = binary_part(whole, 1, 400_000)
      assert T.to_list(T.from_binary(part, :s64, backend: :cpu)) == Enum.to_list(1..50_000)
      assert T.to_list(T.from_binary(part, :f32, backend: :cpu)) |> length() == 100_000
    end

    test "shared buffers do not count as new tensor memory, and are released with their holders" do
      baseline = Accel.memory(:cpu)

      Task.async(fn ->
        bin = Accel.logistic_map(1..1_000_000, as: :binary, backend: :cpu)
        held = Accel.memory(:cpu)
        t = T.from_binary(bin, :s64, backend: :cpu)
        assert Accel.memory(:cpu) == held, "the tensor shares the binary's 8 MB, it does not copy them"
        assert T.to_binary(T.slice(t, [10], [1])) == binary_part(bin, 80, 8)
      end)
      |> Task.await()

      :erlang.garbage_collect()
      Process.sleep(10)
      # (at most the baseline: a tensor of an earlier test, dropped by a process that has since
      # collected, may be freed meanwhile; the 8 MB held here must be)
      assert Accel.memory(:cpu) <= baseline
    end
  end
end
