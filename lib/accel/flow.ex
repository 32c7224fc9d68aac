# Compiled only where Flow is available (it is a hex package: add {:flow, "~> 1.2"} to your project,
# and build Accel with ACCEL_FLOW=1 so that Mix compiles Flow first). Its logic lives in
# Accel.Stream.chunks/2, which the Accel.Stream tests cover without Flow.
if Code.ensure_loaded?(Flow) do
  defmodule Accel.Flow do
    @moduledoc """
    A chunk-batching stage for Flow pipelines that offload work to Accel.

        1..100_000_000
        |> Accel.Flow.map_chunks(&Accel.logistic_map(&1, as: :binary), chunk_size: 1_000_000)
        |> Flow.map(fn {index, result} -> ... end)   # chunks are processed by parallel stages
        |> Flow.run()

    Each Flow stage takes one chunk at a time (`max_demand: 1`), so the chunks in flight are bounded
    by the number of stages. Results come tagged with their chunk index, since Flow does not keep
    order; sort by it where order matters.
    """

    @doc """
    A flow of `{chunk_index, fun.(chunk)}` over the chunks of `input` (see `Accel.Stream.chunks/2`).
    Options: `:chunk_size`, and Flow's own `:stages` (default: schedulers online), `:max_demand`
    (default 1) and `:min_demand`.
    """
    def map_chunks(input, fun, opts \\ [])

    def map_chunks(_input, fun, _opts) when not is_function(fun, 1) do
      raise ArgumentError, "map_chunks/3 expects a 1-arity function, got: #{inspect(fun, limit: 5)}"
    end

    def map_chunks(input, fun, opts) do
      {chunk_opts, flow_opts} = Keyword.split(opts, [:chunk_size])
      flow_opts = Keyword.merge([stages: System.schedulers_online(), max_demand: 1], flow_opts)

      input
      |> Accel.Stream.chunks(chunk_opts)
      |> Stream.with_index()
      |> Flow.from_enumerable(flow_opts)
      |> Flow.map(fn {chunk, index} -> {index, fun.(chunk)} end)
    end
  end
end
