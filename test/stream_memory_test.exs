defmodule Accel.StreamMemoryTest do
  # Reads the VM-wide memory total, so it runs alone (async: false), not beside other tests' data.
  use ExUnit.Case, async: false

  test "bounded memory over a 10^8-element stream" do
    growth = growth_over_stream(&Accel.logistic_map(&1, as: :binary))
    # 800 MB of results went through; at most a few chunks of 8 MB were alive at any moment.
    assert growth < 200_000_000, "memory grew by #{div(growth, 1_000_000)} MB"
  end

  test "bounded memory over a 10^8-element stream whose first chunk stalls for a second" do
    growth =
      growth_over_stream(fn range ->
        if range.first == 1, do: Process.sleep(1_000)
        Accel.logistic_map(range, as: :binary)
      end)

    # nothing is read ahead of the stalled chunk beyond max_concurrency chunks
    assert growth < 200_000_000, "memory grew by #{div(growth, 1_000_000)} MB"
  end

  # The VM's peak memory growth while `fun` maps the chunks of 1..10^8 (800 MB of results).
  defp growth_over_stream(fun) do
    before = :erlang.memory(:total)
    parent = self()
    watcher = spawn_link(fn -> watch_memory(parent, before) end)

    count =
      1..100_000_000
      |> Accel.Stream.map_chunks(fun, chunk_size: 1_000_000, emit: :chunks)
      |> Enum.reduce(0, fn bin, acc -> acc + byte_size(bin) end)

    send(watcher, :stop)
    assert_receive {:peak, peak}, 5_000
    assert count == 800_000_000
    peak - before
  end

  defp watch_memory(parent, peak) do
    receive do
      :stop -> send(parent, {:peak, max(peak, :erlang.memory(:total))})
    after
      5 -> watch_memory(parent, max(peak, :erlang.memory(:total)))
    end
  end
end
