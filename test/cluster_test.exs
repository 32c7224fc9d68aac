defmodule Accel.ClusterTest do
  # Real BEAM nodes started with :peer on loopback.
  use ExUnit.Case, async: false
  alias Accel.Test.ClusterHelper

  @moduletag timeout: 120_000

  setup_all do
    ClusterHelper.start_distribution!()
    peers = for _ <- 1..2, do: ClusterHelper.start_peer!()
    on_exit(fn -> for {peer, _} <- peers, do: stop_quietly(peer) end)
    %{peers: peers}
  end

  defp stop_quietly(peer) do
    :peer.stop(peer)
  catch
    :exit, _ -> :already_stopped
  end

  defp expected(range, chunk),
    do: range |> Accel.Stream.chunks(chunk_size: chunk) |> Enum.map(&Accel.logistic_map(&1, as: :binary))

  test "results equal the direct call, in order, on one node and on two", %{peers: [{_, a}, {_, b}]} do
    for nodes <- [[a], [a, b]], chunk <- [1, 999, 10_000, 10_001] do
      results =
        Accel.Cluster.map_chunks(nodes, 1..10_000, {Accel, :logistic_map, [[as: :binary]]}, chunk_size: chunk)
        |> Enum.to_list()

      assert results == expected(1..10_000, chunk), "nodes #{length(nodes)}, chunk #{chunk}"
    end

    assert Accel.Cluster.map_chunks([a, b], Enum.to_list(1..100), &Accel.logistic_map/1, chunk_size: 7)
           |> Enum.concat() ==
             Accel.logistic_map(1..100)
  end

  test "a node lost mid-run: its unfinished chunks are redone on the others" do
    {victim_peer, victim} = ClusterHelper.start_peer!()
    {survivor_peer, survivor} = ClusterHelper.start_peer!()
    # (stopped with the test, not left to halt when the test VM goes)
    on_exit(fn -> stop_quietly(survivor_peer) end)

    task =
      Task.async(fn ->
        Accel.Cluster.map_chunks([victim, survivor], 1..40_000, {ClusterHelper, :slow_logistic_map, [40]},
          chunk_size: 1_000
        )
        |> Enum.to_list()
      end)

    Process.sleep(150)
    :peer.stop(victim_peer)
    assert Task.await(task, 60_000) == expected(1..40_000, 1_000)
    refute victim in Node.list()
  end

  test "when every node is gone the stream fails with :no_nodes" do
    {peer, node} = ClusterHelper.start_peer!()
    :peer.stop(peer)

    assert_raise Accel.Error, "every node was lost before the work was done: #{node} went down", fn ->
      Accel.Cluster.map_chunks([node], 1..10, &Accel.logistic_map/1) |> Enum.to_list()
    end
  end

  test "a node whose calls time out is lost, and the message says so" do
    slow = {Enum, :each, [&Process.sleep/1]}

    assert_raise Accel.Error,
                 "every node was lost before the work was done: #{node()} timed out (timeout: 20 ms) on a chunk",
                 fn ->
                   # the chunk [1000] sleeps 1000 ms: longer than the timeout
                   Accel.Cluster.map_chunks([node()], [1000], slow, timeout: 20) |> Enum.to_list()
                 end

    assert_raise ArgumentError,
                 ~r/option :timeout must be a number of milliseconds of at least 1, or :infinity, got: 0/,
                 fn ->
                   Accel.Cluster.map_chunks([node()], 1..3, &Accel.logistic_map/1, timeout: 0)
                 end
  end

  test "argument errors" do
    assert_raise ArgumentError, ~r/expected a non-empty list of node names/, fn ->
      Accel.Cluster.map_chunks([], 1..3, & &1)
    end

    assert_raise ArgumentError, ~r/expected a 1-arity function or \{module, function, args\}/, fn ->
      Accel.Cluster.map_chunks([node()], 1..3, fn a, b -> {a, b} end)
    end
  end
end
