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

  `chunks` is a list, or `{count, chunk_at}` where `chunk_at.(index)` makes chunk `index` when a
  worker takes it, so that only the chunks in flight exist at once. With `owned: true`, worker `i`
  takes chunk `i` first (a share sized for it), and the chunks after the workers' are pulled. An
  exception raised by `fun` stops the other workers after their current chunk and is raised again
  in the caller.

      iex> {results, stats} = Accel.Dispatch.run([1, 2, 3, 4], [:a, :b], fn x, _worker -> x * 10 end)
      iex> {results, stats |> Map.values() |> Enum.map(& &1.chunks) |> Enum.sum()}
      {[10, 20, 30, 40], 4}

      iex> {results, _} = Accel.Dispatch.run({3, &(&1 * 2)}, [:a], fn x, _worker -> x + 1 end)
      iex> results
      [1, 3, 5]
  """
  @spec run(
          [term()] | {non_neg_integer(), (non_neg_integer() -> term())},
          [term()],
          (term(), term() -> term()),
          (term() -> non_neg_integer()),
          keyword()
        ) :: {[term()], map()}
  def run(chunks, workers, fun, size_fun \\ fn _ -> 1 end, opts \\ [])

  def run(chunks, workers, fun, size_fun, opts)
      when not (is_list(chunks) or
                  (is_tuple(chunks) and tuple_size(chunks) == 2 and is_integer(elem(chunks, 0)) and
                     is_function(elem(chunks, 1), 1))) or
             not is_list(workers) or workers == [] or not is_function(fun, 2) or not is_function(size_fun, 1) or
             not is_list(opts) do
    raise ArgumentError,
          "run/5 expects a list of chunks or {count, chunk_at}, a non-empty list of workers, a 2-arity function, " <>
            "a 1-arity size function and options"
  end

  def run(chunks, workers, fun, size_fun, opts) do
    source =
      case chunks do
        list when is_list(list) -> tuple_source(list)
        {count, chunk_at} -> {count, chunk_at}
      end

    # owned: true gives chunk i (i < length(workers)) to worker i, before any is pulled
    owned = opts |> Accel.Options.keyword!("Accel.Dispatch.run/5") |> Keyword.get(:owned, false)
    next = :atomics.new(1, [])
    if owned, do: :atomics.put(next, 1, min(length(workers), elem(source, 0)))
    # Set by the first worker whose chunk raised: the others stop pulling.
    failed = :atomics.new(1, [])

    {done, stats, errors} =
      workers
      |> Enum.with_index()
      |> Enum.map(fn {worker, i} ->
        first = if owned and i < elem(source, 0), do: i
        Task.async(fn -> {worker, pull(source, next, failed, worker, fun, size_fun, [], 0, 0, 0, first)} end)
      end)
      |> Task.await_many(:infinity)
      |> Enum.reduce({[], %{}, []}, fn
        {worker, {:ok, done, stats}}, {all, by_worker, errors} ->
          {done ++ all, Map.put(by_worker, worker, stats), errors}

        {_worker, {:error, index, kind, reason, stack}}, {all, by_worker, errors} ->
          {all, by_worker, [{index, kind, reason, stack} | errors]}
      end)

    case Enum.sort_by(errors, &elem(&1, 0)) do
      [] -> {done |> Enum.sort_by(&elem(&1, 0)) |> Enum.map(&elem(&1, 1)), stats}
      [{_index, kind, reason, stack} | _] -> :erlang.raise(kind, reason, stack)
    end
  end

  defp tuple_source(list) do
    tuple = List.to_tuple(list)
    {tuple_size(tuple), &elem(tuple, &1)}
  end

  defp pull({count, chunk_at} = source, next, failed, worker, fun, size_fun, done, n, elements, micros, first) do
    index = first || :atomics.add_get(next, 1, 1) - 1

    if index >= count or :atomics.get(failed, 1) == 1 do
      {:ok, done, %{chunks: n, elements: elements, seconds: micros / 1.0e6}}
    else
      chunk = chunk_at.(index)

      try do
        :timer.tc(fn -> fun.(chunk, worker) end)
      catch
        kind, reason ->
          :atomics.put(failed, 1, 1)
          {:error, index, kind, reason, __STACKTRACE__}
      else
        {us, result} ->
          pull(
            source,
            next,
            failed,
            worker,
            fun,
            size_fun,
            [{index, result} | done],
            n + 1,
            elements + size_fun.(chunk),
            micros + us,
            nil
          )
      end
    end
  end
end
