# Flow is an optional dependency, looked for when these functions run rather than when Accel is
# compiled: a project that adds Flow after building Accel gets a working Accel.Flow without
# recompiling Accel, and one without Flow gets an error saying what to add.
# (test/flow_test.exs runs against Flow where it was fetched, else against a stand-in.)
defmodule Accel.Flow do
  # Flow's functions are called only once flow_loaded!/1 has found it.
  @compile {:no_warn_undefined, Flow}

  @moduledoc """
  Accel in Flow pipelines: a source whose stages each run one chunk at a time on a device, and a
  way to offload the events of an existing flow in batches, one device call per batch.

      # A source: the chunks of an input, processed by parallel stages.
      1..100_000_000
      |> Accel.Flow.from_chunks(&Accel.logistic_map(&1, as: :binary), chunk_size: 1_000_000)
      |> Flow.map(fn {result, index} -> {index, byte_size(result)} end)
      |> Enum.sort()

      # Inside an existing flow: each batch of events is one call, and its results are events.
      events
      |> Flow.from_enumerable(max_demand: 100_000)
      |> Accel.Flow.map_batches(&Accel.logistic_map/1)
      |> Enum.sum()

  ## Memory

  Flow bounds what is in flight by demand, counted in events. A `from_chunks/3` stage computes a
  chunk only when its consumer asks for an event, and holds one chunk at a time, so work done
  inside the flow (`Flow.map/2`, `Flow.reduce/3`, ... after `from_chunks/3`, which run in the same
  stage) keeps at most one chunk and its result per stage in memory, whatever the input's length.
  A consumer outside the flow decides the rest: `Enum` functions over a flow ask each stage for
  up to 1,000 events ahead (GenStage's default, which Flow does not let a caller change), and
  `Flow.partition/2` for its `:max_demand` (default 1,000); with one event per chunk that is up to
  1,000 chunk results per stage. For such a consumer, emit elements (`emit: :elements`: a stage
  then holds at most its current chunk's elements) or partition with `max_demand: 1`.
  """

  @source_options Accel.Stream.chunk_options() ++
                    [
                      stages: [
                        rule: {:integer, 1, nil},
                        default: nil,
                        default_doc: "`System.schedulers_online/0`",
                        doc: "stages computing chunks in parallel, one chunk at a time each"
                      ],
                      emit: [
                        rule: {:in, [:chunks, :elements]},
                        default: :chunks,
                        doc:
                          "the events: `:chunks`, one `{result, chunk_index}` per chunk (Flow does not " <>
                            "keep order: sort by the index where order matters); or `:elements`, each element " <>
                            "of each result (a list's elements, or a binary read as signed 64-bit integers)"
                      ]
                    ]

  @batch_options [
    emit: [
      rule: {:in, [:elements, :batches]},
      default: :elements,
      doc:
        "the events: `:elements`, each element of each batch's result (a list, or a binary read as " <>
          "signed 64-bit integers); or `:batches`, each batch's result as one event"
    ]
  ]

  @doc """
  A flow over the chunks of `input` (a range, a list or other enumerable, a binary, or a stream
  of binaries: see `Accel.Stream.chunks/2`), each stage applying `fun` to one chunk at a time.
  `fun` may be a kernel from `Accel.kernel/1` (each chunk through `Accel.map/3`).

  ## Options

  #{Accel.Options.docs(@source_options)}
  """
  @spec from_chunks(Enumerable.t() | binary(), (term() -> term()), keyword()) :: Flow.t()
  def from_chunks(input, fun, opts \\ [])

  def from_chunks(flow, _fun, _opts) when is_struct(flow, Flow) do
    raise ArgumentError,
          "Accel.Flow.from_chunks/3 takes the input to chunk, not a flow; to offload the events " <>
            "of an existing flow, use Accel.Flow.map_batches/3"
  end

  def from_chunks(input, %Accel.Kernel{} = kernel, opts),
    do: from_chunks(input, Accel.Kernel.chunk_function(kernel, opts), opts)

  def from_chunks(_input, fun, _opts) when not is_function(fun, 1),
    do: not_a_function!(fun, "from_chunks/3")

  def from_chunks(input, fun, opts) do
    flow_loaded!("from_chunks/3")
    opts = Accel.Options.validate!(opts, @source_options, "Accel.Flow.from_chunks/3")

    flow =
      input
      |> Accel.Stream.chunks(Keyword.take(opts, [:chunk_size, :type]))
      |> Stream.with_index()
      |> Flow.from_enumerable(stages: opts[:stages] || System.schedulers_online(), max_demand: 1)

    case opts[:emit] do
      :chunks ->
        Flow.map(flow, fn {chunk, index} -> {fun.(chunk), index} end)

      :elements ->
        Flow.flat_map(flow, fn {chunk, _index} ->
          Accel.Stream.elements(fun.(chunk), "Accel.Flow.from_chunks/3")
        end)
    end
  end

  @doc """
  Offloads the events of `flow` in batches: `fun` gets each batch of events GenStage delivers to
  a stage (a list, of at most the subscription's `:max_demand` events: raise it, on
  `Flow.from_enumerable/2` or `Flow.partition/2`, for batches worth a device call) and returns
  its results (`fun` may be a kernel from `Accel.kernel/1`: each batch through `Accel.map/3`).
  Like `Flow.map_batch/2`, which it uses, it comes first in a stage: straight after
  the flow's source or a partition.

  ## Options

  #{Accel.Options.docs(@batch_options)}
  """
  @spec map_batches(Flow.t(), (list() -> term()), keyword()) :: Flow.t()
  def map_batches(flow, fun, opts \\ [])

  def map_batches(flow, %Accel.Kernel{} = kernel, opts) when is_struct(flow, Flow),
    do: map_batches(flow, &Accel.map(&1, kernel), opts)

  def map_batches(flow, fun, _opts) when is_struct(flow, Flow) and not is_function(fun, 1),
    do: not_a_function!(fun, "map_batches/3")

  def map_batches(flow, fun, opts) when is_struct(flow, Flow) do
    flow_loaded!("map_batches/3")
    opts = Accel.Options.validate!(opts, @batch_options, "Accel.Flow.map_batches/3")

    case opts[:emit] do
      :elements -> Flow.map_batch(flow, &Accel.Stream.elements(fun.(&1), "Accel.Flow.map_batches/3"))
      :batches -> Flow.map_batch(flow, &[fun.(&1)])
    end
  end

  def map_batches(other, _fun, _opts) do
    raise ArgumentError,
          "Accel.Flow.map_batches/3 expects a flow (%Flow{}), got: #{inspect(other, limit: 5)}; " <>
            "to make one from an input, use Accel.Flow.from_chunks/3 or Flow.from_enumerable/2"
  end

  defp flow_loaded!(name) do
    unless Code.ensure_loaded?(Flow) do
      raise RuntimeError,
            "Accel.Flow.#{name} needs Flow, which is not available: add {:flow, \"~> 1.2\"} to your " <>
              "project's deps (Accel need not be recompiled)"
    end
  end

  defp not_a_function!(fun, name) do
    raise ArgumentError, "#{name} expects a 1-arity function, got: #{inspect(fun, limit: 5)}"
  end
end
