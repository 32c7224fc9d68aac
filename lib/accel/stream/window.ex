defmodule Accel.Stream.Window do
  @moduledoc false
  # Accel.Stream.map_chunks/3's dispatcher: `fun` over the chunks of a lazy input, each in a task,
  # with at most `max_concurrency` chunks taken from the input and not yet emitted (running, or
  # done and waiting behind an earlier one when results are ordered). A chunk is taken only when
  # one of those places frees, that is when the consumer takes a result: a slow chunk holds the
  # pipeline at `max_concurrency` chunks, never more. Results are {:ok, value} or, with
  # `on_timeout: :kill_task`, {:exit, :timeout}, as Task.async_stream/3 gives them; tasks are
  # linked to the caller as its tasks are, and the input is halted and running tasks killed when
  # the consumer stops early.

  def run(chunks, fun, opts) do
    limit = opts[:max_concurrency]
    ordered = Keyword.get(opts, :ordered, true)
    timeout = Keyword.get(opts, :timeout, :infinity)
    on_timeout = Keyword.get(opts, :on_timeout, :exit)

    Stream.resource(
      fn ->
        %{next: &Enumerable.reduce(chunks, &1, fn x, _ -> {:suspend, x} end), running: [], done: false}
      end,
      fn state ->
        state = fill(state, fun, limit)

        case state.running do
          [] -> {:halt, state}
          running -> take(state, running, ordered, timeout, on_timeout)
        end
      end,
      fn state ->
        Enum.each(state.running, fn {task, _started} -> Task.shutdown(task, :brutal_kill) end)
        if not state.done, do: state.next.({:halt, nil})
      end
    )
  end

  # Starts chunks until `limit` are taken and not emitted, or the input ends.
  defp fill(%{done: true} = state, _fun, _limit), do: state
  defp fill(%{running: running} = state, _fun, limit) when length(running) >= limit, do: state

  defp fill(state, fun, limit) do
    case state.next.({:cont, nil}) do
      {:suspended, chunk, continuation} ->
        task = Task.async(fn -> fun.(chunk) end)
        fill(%{state | next: continuation, running: state.running ++ [{task, now()}]}, fun, limit)

      {status, _} when status in [:done, :halted] ->
        %{state | done: true}
    end
  end

  # The next result: the oldest chunk's (ordered), or the first to finish.
  defp take(state, [{task, started} | rest], true, timeout, on_timeout) do
    case Task.yield(task, remaining(started, timeout)) || Task.shutdown(task, :brutal_kill) do
      {:ok, value} -> {[{:ok, value}], %{state | running: rest}}
      nil -> timed_out(state, rest, timeout, on_timeout)
      {:exit, reason} -> exit(reason)
    end
  end

  defp take(state, running, false, timeout, on_timeout) do
    refs = Map.new(running, fn {task, _} -> {task.ref, task} end)
    # the soonest deadline among the running chunks
    wait = running |> Enum.map(fn {_, started} -> remaining(started, timeout) end) |> Enum.min()

    receive do
      {ref, value} when is_map_key(refs, ref) ->
        Process.demonitor(ref, [:flush])
        {[{:ok, value}], %{state | running: List.keydelete(running, Map.fetch!(refs, ref), 0)}}

      {:DOWN, ref, _, _, reason} when is_map_key(refs, ref) ->
        exit(reason)
    after
      wait ->
        {late, _} = Enum.min_by(running, fn {_, started} -> started end)
        Task.shutdown(late, :brutal_kill)
        timed_out(state, List.keydelete(running, late, 0), timeout, on_timeout)
    end
  end

  defp timed_out(state, rest, _timeout, :kill_task), do: {[{:exit, :timeout}], %{state | running: rest}}

  defp timed_out(_state, rest, timeout, :exit) do
    Enum.each(rest, fn {task, _} -> Task.shutdown(task, :brutal_kill) end)
    exit({:timeout, {Accel.Stream, :map_chunks, [timeout]}})
  end

  defp remaining(_started, :infinity), do: :infinity
  defp remaining(started, timeout), do: max(timeout - (now() - started), 0)

  defp now, do: System.monotonic_time(:millisecond)
end
