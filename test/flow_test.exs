defmodule Accel.FlowTest do
  # Flow is a hex package. Where it was fetched (mix deps.get), these tests run against it; where
  # it is absent, against a stand-in with the parts of Flow's API that Accel.Flow calls
  # (sequential, so it checks results and errors, not concurrency). Accel.Flow looks for Flow when
  # it runs, so the module as compiled with the project is what runs against either.
  use ExUnit.Case, async: false

  # Flow exists when the tests run (Flow's or the stand-in's), not necessarily when they compile.
  @compile {:no_warn_undefined, Flow}

  @real_flow Code.ensure_loaded?(Flow)

  @stand_in """
  defmodule Flow do
    defstruct [:stream]

    def from_enumerable(enum, opts) do
      true = Keyword.keyword?(opts)
      %Flow{stream: Stream.map(enum, & &1)}
    end

    def map(%Flow{stream: s}, fun), do: %Flow{stream: Stream.map(s, fun)}
    def flat_map(%Flow{stream: s}, fun), do: %Flow{stream: Stream.flat_map(s, fun)}
    def map_batch(%Flow{stream: s}, fun), do: %Flow{stream: s |> Stream.chunk_every(7) |> Stream.flat_map(fun)}
    def stream(%Flow{stream: s}), do: s
  end
  """

  setup_all do
    unless @real_flow do
      Code.compile_string(@stand_in)
      on_exit(fn -> Accel.FlowTest.Absent.unload_flow() end)
    end

    :ok
  end

  defp collect(flow), do: flow |> Flow.stream() |> Enum.to_list()
  defp reference(input), do: Accel.logistic_map(input, backend: :cpu)

  test "from_chunks/3: one {result, chunk_index} event per chunk, for ranges, lists and binaries" do
    binary = Accel.logistic_map(1..5_000, iterations: 0, as: :binary)

    for input <- [1..10_000, Enum.to_list(-500..500), binary] do
      events = collect(Accel.Flow.from_chunks(input, &Accel.logistic_map(&1, as: :binary), chunk_size: 999))
      count = if is_binary(input), do: 5_000, else: Enum.count(input)
      assert Enum.map(events, &elem(&1, 1)) |> Enum.sort() == Enum.to_list(0..div(count - 1, 999))

      joined = events |> Enum.sort_by(&elem(&1, 1)) |> Enum.map(&elem(&1, 0)) |> IO.iodata_to_binary()
      assert joined == Accel.logistic_map(input, as: :binary, backend: :cpu)
    end
  end

  test "from_chunks/3 with emit: :elements: every result element is an event" do
    events =
      collect(
        Accel.Flow.from_chunks(1..3_000, &Accel.logistic_map(&1, as: :binary),
          chunk_size: 256,
          emit: :elements
        )
      )

    assert Enum.sort(events) == Enum.sort(reference(1..3_000))

    events =
      collect(
        Accel.Flow.from_chunks(1..300, &Accel.logistic_map/1, chunk_size: 7, emit: :elements, stages: 3)
      )

    assert Enum.sort(events) == Enum.sort(reference(1..300))
  end

  test "map_batches/3 offloads an existing flow's events, one call per batch" do
    parent = self()

    calls = fn batch ->
      send(parent, {:batch, length(batch)})
      Accel.logistic_map(batch)
    end

    events = 1..2_000 |> Flow.from_enumerable(max_demand: 100) |> Accel.Flow.map_batches(calls) |> collect()
    assert Enum.sort(events) == Enum.sort(reference(1..2_000))
    sizes = receive_batches([])
    assert Enum.sum(sizes) == 2_000
    assert length(sizes) < 2_000, "one call per batch, not per element"

    batches =
      1..500
      |> Flow.from_enumerable(max_demand: 50)
      |> Accel.Flow.map_batches(&Accel.logistic_map(&1, as: :binary), emit: :batches)
      |> collect()

    assert Enum.all?(batches, &is_binary/1)

    assert batches |> Enum.flat_map(&Accel.Stream.elements(&1, "test")) |> Enum.sort() ==
             Enum.sort(reference(1..500))
  end

  defp receive_batches(acc) do
    receive do
      {:batch, n} -> receive_batches([n | acc])
    after
      0 -> acc
    end
  end

  if @real_flow do
    test "back-pressure: a stalled chunk does not make the source read ahead" do
      # 1: chunks run, 2: elements read from the source
      counter = :counters.new(2, [])

      stalled = fn chunk ->
        :counters.add(counter, 1, 1)
        if hd(chunk) == 1, do: Process.sleep(500)
        Accel.logistic_map(chunk, backend: :cpu)
      end

      taken =
        Stream.iterate(1, &(&1 + 1))
        |> Stream.each(fn _ -> :counters.add(counter, 2, 1) end)
        |> Accel.Flow.from_chunks(stalled, chunk_size: 100, stages: 2, emit: :elements)
        |> Flow.stream()
        # a slow consumer (a loaded machine is one) lets the stages run as far as demand allows
        |> Stream.each(fn _ -> Process.sleep(2) end)
        |> Enum.take(250)

      assert length(taken) == 250
      # Chunks are read only as demand asks: Flow.stream's consumer asks each of the 2 stages for
      # at most 1,000 elements (GenStage's default :max_demand), 10 chunks of 100, and each stage
      # asks the source for one chunk at a time: at most 2 * 10 chunks run and 2 * 11 are read,
      # where reading ahead without back-pressure runs through the infinite input.
      assert :counters.get(counter, 1) <= 2 * 10
      assert :counters.get(counter, 2) <= 2 * 11 * 100
    end
  end

  test "a flow given as input, a missing flow, unknown options and bad results raise ArgumentError" do
    flow = Flow.from_enumerable(1..10, [])

    assert_raise ArgumentError, ~r/takes the input to chunk, not a flow.*map_batches/, fn ->
      Accel.Flow.from_chunks(flow, &Accel.logistic_map/1)
    end

    assert_raise ArgumentError, ~r/map_batches\/3 expects a flow \(%Flow\{\}\), got: 1\.\.10/, fn ->
      Accel.Flow.map_batches(1..10, &Accel.logistic_map/1)
    end

    assert_raise ArgumentError, ~r/unknown option :max_demnd for Accel.Flow.from_chunks\/3/, fn ->
      Accel.Flow.from_chunks(1..10, &Accel.logistic_map/1, max_demnd: 1)
    end

    assert_raise ArgumentError, ~r/unknown option :chunk_size for Accel.Flow.map_batches\/3/, fn ->
      Accel.Flow.map_batches(flow, &Accel.logistic_map/1, chunk_size: 1)
    end

    assert_raise ArgumentError, ~r/option :emit must be one of/, fn ->
      Accel.Flow.from_chunks(1..10, &Accel.logistic_map/1, emit: :batches)
    end

    assert_raise ArgumentError, "from_chunks/3 expects a 1-arity function, got: :f", fn ->
      Accel.Flow.from_chunks(1..3, :f)
    end

    assert_raise ArgumentError, "map_batches/3 expects a 1-arity function, got: :f", fn ->
      Accel.Flow.map_batches(flow, :f)
    end

    # Inside a stage: Flow's stages crash with the error, which reaches the caller as an exit.
    bad = fn -> flow |> Accel.Flow.map_batches(fn _ -> :oops end) |> collect() end
    error = ExUnit.CaptureLog.with_log(fn -> raised(bad) end) |> elem(0)
    assert %ArgumentError{message: message} = error
    assert message =~ ~r/with emit: :elements needs each result to be a list.*got: :oops/
  end

  defp raised(fun) do
    Process.flag(:trap_exit, true)

    try do
      fun.()
      flunk("no error")
    rescue
      e in ArgumentError -> e
    catch
      :exit, reason -> find_exception(reason)
    after
      # Exits stay trapped: the flow's other processes stop with :shutdown after the error, some
      # later than any wait here would cover (it failed once with seed 6), and the test ends here.
      receive_exits()
    end
  end

  defp find_exception(%ArgumentError{} = e), do: e
  defp find_exception(tuple) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> find_exception()
  defp find_exception([head | tail]), do: find_exception(head) || find_exception(tail)
  defp find_exception(_), do: nil

  defp receive_exits do
    receive do
      {:EXIT, _, _} -> receive_exits()
    after
      100 -> :ok
    end
  end
end

defmodule Accel.FlowTest.Absent do
  # Without Flow (the stand-in unloaded, where Flow was not fetched), Accel.Flow says what to add.
  use ExUnit.Case, async: false

  def unload_flow do
    for _ <- 1..2 do
      :code.purge(Flow)
      :code.delete(Flow)
    end
  end

  test "without Flow, Accel.Flow's functions say what to add" do
    unless Code.ensure_loaded?(Flow) do
      assert_raise RuntimeError, ~r/Accel.Flow.from_chunks\/3 needs Flow.*add \{:flow, "~> 1.2"\}/, fn ->
        Accel.Flow.from_chunks(1..10, &Accel.logistic_map/1)
      end
    end
  end
end
