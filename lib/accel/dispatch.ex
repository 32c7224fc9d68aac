defmodule Accel.Dispatch do
  @moduledoc """
  Spreads chunks over several workers (devices, nodes) by work pulling: each worker takes the next
  chunk as soon as it has finished its last one, so faster workers take proportionally more chunks.
  The weighting is each worker's throughput as measured during the run, not a guess made before it.
  Used by `Accel.logistic_map/2` with `device: :all`.
  """

  @doc """
  Runs `fun.(chunk, worker)` for every chunk, each worker processing one chunk at a time, and
  returns `{results_in_chunk_order, stats}` where `stats` maps each worker to
  `%{chunks: n, elements: n, seconds: s}` (elements as counted by `size_fun`).

      iex> {results, stats} = Accel.Dispatch.run([1, 2, 3, 4], [:a, :b], fn x, _worker -> x * 10 end)
      iex> {results, stats |> Map.values() |> Enum.map(& &1.chunks) |> Enum.sum()}
      {[10, 20, 30, 40], 4}
  """
  @spec run([term()], [term()], (term(), term() -> term()), (term() -> non_neg_integer())) ::
          {[term()], map()}
  def run(chunks, workers, fun, size_fun \\ fn _ -> 1 end)

  def run(chunks, workers, fun, size_fun)
      when not is_list(chunks) or not is_list(workers) or workers == [] or not is_function(fun, 2) or
             not is_function(size_fun, 1) do
    raise ArgumentError,
          "run/4 expects a list of chunks, a non-empty list of workers, a 2-arity function and a 1-arity size function"
  end

  def run(chunks, workers, fun, size_fun) do
    chunks = List.to_tuple(chunks)
    next = :atomics.new(1, [])

    workers
    |> Enum.map(fn worker ->
      Task.async(fn -> {worker, pull(chunks, next, worker, fun, size_fun, [], 0, 0, 0)} end)
    end)
    |> Task.await_many(:infinity)
    |> Enum.reduce({[], %{}}, fn {worker, {done, stats}}, {all, by_worker} ->
      {done ++ all, Map.put(by_worker, worker, stats)}
    end)
    |> then(fn {done, stats} -> {done |> Enum.sort_by(&elem(&1, 0)) |> Enum.map(&elem(&1, 1)), stats} end)
  end

  defp pull(chunks, next, worker, fun, size_fun, done, count, elements, micros) do
    index = :atomics.add_get(next, 1, 1) - 1

    if index >= tuple_size(chunks) do
      {done, %{chunks: count, elements: elements, seconds: micros / 1.0e6}}
    else
      chunk = elem(chunks, index)
      {us, result} = :timer.tc(fn -> fun.(chunk, worker) end)

      pull(
        chunks,
        next,
        worker,
        fun,
        size_fun,
        [{index, result} | done],
        count + 1,
        elements + size_fun.(chunk),
        micros + us
      )
    end
  end
end
