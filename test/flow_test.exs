defmodule Accel.FlowTest do
  # Flow is a hex package this machine cannot fetch. Where it is absent, lib/accel/flow.ex must
  # compile to nothing; and the module it defines must work against Flow's API, which this test
  # checks by compiling it against a stand-in with the same two functions (from_enumerable/2, map/2).
  use ExUnit.Case, async: false

  @source Path.expand("../lib/accel/flow.ex", __DIR__)

  test "without Flow, Accel.Flow is not defined" do
    unless Code.ensure_loaded?(Flow) do
      refute Code.ensure_loaded?(Accel.Flow)
    end
  end

  test "against Flow's API, map_chunks/3 tags each chunk's result with its index" do
    if Code.ensure_loaded?(Flow) do
      assert_results(Accel.Flow)
    else
      Code.compile_string("""
      defmodule Flow do
        def from_enumerable(enum, opts) do
          true = Keyword.keyword?(opts)
          Stream.map(enum, & &1)
        end

        def map(flow, fun), do: Stream.map(flow, fun)
      end
      """)

      try do
        Code.compile_file(@source)
        assert_results(Accel.Flow)
      after
        for mod <- [Flow, Accel.Flow] do
          :code.purge(mod)
          :code.delete(mod)
        end
      end
    end
  end

  defp assert_results(module) do
    results =
      module.map_chunks(1..10_000, &Accel.logistic_map(&1, as: :binary), chunk_size: 999) |> Enum.to_list()

    assert length(results) == 11
    joined = results |> Enum.sort() |> Enum.map(&elem(&1, 1)) |> IO.iodata_to_binary()
    assert joined == Accel.logistic_map(1..10_000, as: :binary)

    assert_raise ArgumentError, "map_chunks/3 expects a 1-arity function, got: :f", fn ->
      module.map_chunks(1..3, :f)
    end
  end
end
