defmodule Accel.Cluster do
  @moduledoc """
  Offloads chunks to other BEAM nodes over Erlang distribution (`:erpc`), each node running them on
  its own devices: for when one machine is not enough.

      Accel.Cluster.map_chunks([:"a@host1", :"b@host2"], 1..1_000_000_000,
                               {Accel, :logistic_map, [[as: :binary]]}, chunk_size: 10_000_000)
      |> Enum.each(&consume/1)

  Each node has one chunk in flight at a time (it parallelises inside the call); a node that
  finishes takes the next chunk. If a node goes down mid-run, its unfinished chunk goes back to the
  queue and the remaining nodes finish the work; only when every node is gone does the stream fail.
  Results come out chunk by chunk, in input order, with at most `:window` chunks held at once.

  The function runs on the remote node, so it must exist there: pass `{module, function, args}`
  (called as `apply(module, function, [chunk | args])`) or an external capture such as
  `&Accel.logistic_map/1`; anonymous functions only work where every node runs identical code.
  """

  @options [
    chunk_size: [rule: {:integer, 1, nil}, default: 1_000_000, doc: "elements per chunk"],
    window: [
      rule: {:integer, 1, nil},
      default: nil,
      default_doc: "4 per node",
      doc: "chunks dispatched together before their results are emitted"
    ],
    timeout: [
      rule: {:timeout, 1},
      default: :infinity,
      doc:
        "per chunk and call, in milliseconds or `:infinity`; a node whose call times out is " <>
          "treated as lost, and its chunk goes to the others"
    ]
  ]

  @doc """
  Applies `fun` to each chunk of `enumerable` (see `Accel.Stream.chunks/2`) on `nodes`; returns a
  lazy stream of chunk results in order.

  ## Options

  #{Accel.Options.docs(@options)}
  """
  @spec map_chunks(
          [node()],
          Enumerable.t() | binary(),
          (term() -> term()) | {module(), atom(), list()},
          keyword()
        ) ::
          Enumerable.t()
  def map_chunks(nodes, enumerable, fun, opts \\ []) do
    unless is_list(nodes) and nodes != [] and Enum.all?(nodes, &is_atom/1) do
      raise ArgumentError, "expected a non-empty list of node names, got: #{inspect(nodes, limit: 5)}"
    end

    check_fun!(fun)

    opts = Accel.Options.validate!(opts, @options, "Accel.Cluster.map_chunks/4")
    window = opts[:window] || 4 * length(nodes)
    timeout = opts[:timeout]

    enumerable
    |> Accel.Stream.chunks(chunk_size: opts[:chunk_size])
    |> Stream.with_index()
    |> Stream.chunk_every(window)
    |> Stream.transform(nodes, fn batch, alive ->
      {results, alive} = run_batch(batch, alive, fun, timeout)
      {results, alive}
    end)
  end

  @doc false
  # Runs on the remote node.
  def run_chunk({m, f, a}, chunk), do: apply(m, f, [chunk | a])
  def run_chunk(fun, chunk), do: fun.(chunk)

  defp check_fun!({m, f, a}) when is_atom(m) and is_atom(f) and is_list(a), do: :ok
  defp check_fun!(fun) when is_function(fun, 1), do: :ok

  defp check_fun!(other) do
    raise ArgumentError,
          "expected a 1-arity function or {module, function, args}, got: #{inspect(other, limit: 5)}"
  end

  # Dispatches a batch of {chunk, index} over the alive nodes, one chunk in flight per node; a chunk
  # whose node goes down is queued again. Returns results in index order and the nodes still alive.
  defp run_batch(batch, alive, fun, timeout) do
    loop(:queue.from_list(batch), alive, %{}, %{}, {fun, timeout, []})
  end

  # lost: [{node, why}] of the nodes lost in this batch, for the message when none is left.
  defp loop(queue, alive, busy, done, {fun, timeout, lost} = call) do
    {queue, busy} = fill(queue, alive -- Map.values(busy), busy, fun, timeout)

    cond do
      map_size(busy) == 0 and :queue.is_empty(queue) ->
        {done |> Enum.sort() |> Enum.map(&elem(&1, 1)), alive}

      map_size(busy) == 0 ->
        raise Accel.Error,
          reason: :no_nodes,
          message:
            "every node was lost before the work was done: " <>
              Enum.map_join(Enum.reverse(lost), "; ", fn {node, why} -> "#{node} #{why}" end)

      true ->
        receive do
          {ref, {:ok, index, result}} when is_map_key(busy, ref) ->
            Process.demonitor(ref, [:flush])
            loop(queue, alive, Map.delete(busy, ref), Map.put(done, index, result), call)

          {ref, {:node_down, node, item, reason}} when is_map_key(busy, ref) ->
            Process.demonitor(ref, [:flush])

            why =
              if reason == :timeout, do: "timed out (timeout: #{timeout} ms) on a chunk", else: "went down"

            loop(
              :queue.in_r(item, queue),
              List.delete(alive, node),
              Map.delete(busy, ref),
              done,
              {fun, timeout, [{node, why} | lost]}
            )

          {:DOWN, ref, :process, _pid, reason} when is_map_key(busy, ref) ->
            exit({reason, {__MODULE__, :map_chunks, [fun]}})
        end
    end
  end

  defp fill(queue, [], busy, _fun, _timeout), do: {queue, busy}

  defp fill(queue, [node | idle], busy, fun, timeout) do
    case :queue.out(queue) do
      {:empty, queue} ->
        {queue, busy}

      {{:value, {chunk, index} = item}, queue} ->
        %Task{ref: ref} =
          Task.async(fn ->
            try do
              {:ok, index, :erpc.call(node, __MODULE__, :run_chunk, [fun, chunk], timeout)}
            catch
              :error, {:erpc, reason} when reason in [:noconnection, :timeout] ->
                {:node_down, node, item, reason}
            end
          end)

        fill(queue, idle, Map.put(busy, ref, node), fun, timeout)
    end
  end
end
