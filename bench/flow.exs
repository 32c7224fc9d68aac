# Flow pipelines on the logistic-map workload (10 iterations, p = 6_700_417, mu = 22): the original
# experiment's pipeline in pure Flow (one event per element, the map in Elixir) against the same
# flow offloading its batches (Accel.Flow.map_batches/3) and Accel.Flow.from_chunks/3 as a source;
# every row's results are checked against the CPU backend's. Then memory with a slow consumer
# (peak RSS), which is what Flow's demand bounds. Needs Flow: run it from a project that has Flow and
# Accel as dependencies (`mix run deps/accel/bench/flow.exs`), or in Accel after `mix deps.get`.
# Rows are timed round-robin (each run times every row once), so ratios come from the same run.
# Writes bench/results/flow.md (flow_N.md for another --elements N).
#
#   mix run bench/flow.exs [--runs 3] [--elements N]
unless Code.ensure_loaded?(Flow) do
  IO.puts("bench/flow.exs needs Flow (a hex package), which is not available here: skipped")
  System.halt(0)
end

Code.require_file("support/results.ex", __DIR__)

defmodule FlowBench do
  alias Accel.Bench.Results
  @compile {:no_warn_undefined, [Flow, Accel.Flow]}

  @chunk 1_048_576
  @elements 4_194_304

  def main(args) do
    {opts, _} = OptionParser.parse!(args, strict: [runs: :integer, elements: :integer])
    n = opts[:elements] || @elements
    runs = opts[:runs] || 3
    stages = System.schedulers_online()
    expected = Enum.sort(Accel.logistic_map(1..n, backend: :cpu))
    expected_binary = Accel.logistic_map(1..n, backend: :cpu, as: :binary)

    rows = [
      {"pure Flow: Flow.from_enumerable |> Flow.map(logistic map in Elixir)",
       fn -> 1..n |> Flow.from_enumerable() |> Flow.map(&elixir_logistic_map/1) |> Enum.to_list() end,
       :sorted},
      {"the same flow, batches offloaded: Accel.Flow.map_batches (max_demand 65,536)",
       fn ->
         1..n
         |> Flow.from_enumerable(max_demand: 65_536)
         |> Accel.Flow.map_batches(&Accel.logistic_map(&1, backend: :cpu))
         |> Enum.to_list()
       end, :sorted},
      {"Accel.Flow.from_chunks, emit: :elements (one event per element)",
       fn ->
         1..n
         |> Accel.Flow.from_chunks(&Accel.logistic_map(&1, backend: :cpu, as: :binary),
           chunk_size: @chunk,
           emit: :elements
         )
         |> Enum.to_list()
       end, :sorted},
      {"Accel.Flow.from_chunks, results chunked (one event per chunk)",
       fn ->
         1..n
         |> Accel.Flow.from_chunks(&Accel.logistic_map(&1, backend: :cpu, as: :binary), chunk_size: @chunk)
         |> Enum.to_list()
       end, :chunks},
      {"no Flow: Accel.logistic_map(range) -> list", fn -> Accel.logistic_map(1..n, backend: :cpu) end,
       :sorted}
    ]

    for {name, fun, check} <- rows do
      result = fun.()

      ok =
        case check do
          :sorted ->
            Enum.sort(result) == expected

          :chunks ->
            result |> Enum.sort_by(&elem(&1, 1)) |> Enum.map(&elem(&1, 0)) |> IO.iodata_to_binary() ==
              expected_binary
        end

      ok || raise "#{name}: results differ from the CPU backend's"
    end

    IO.puts("flow: #{n} elements, #{runs} runs per row (round-robin), #{stages} stages, chunks of #{@chunk}")

    samples =
      for _ <- 1..runs, {name, fun, _} <- rows, reduce: %{} do
        acc ->
          {us, _} = :timer.tc(fun)
          Map.update(acc, name, [us / 1.0e6], &[us / 1.0e6 | &1])
      end

    baseline = median(samples[elem(hd(rows), 0)])

    timing =
      Enum.map_join(rows, "\n", fn {name, _, _} ->
        m = median(samples[name])
        "| #{name} | #{fmt(m)} | #{Float.round(baseline / m, 1)}x |"
      end)

    memory =
      Enum.map_join(memory_rows(), "\n", fn {name, fun} ->
        {results, rss, ms} = peaks(fun)
        "| #{name} | #{div(results, 1_048_576)} MiB | #{div(rss, 1_048_576)} MiB | #{ms} ms |"
      end)

    report = """
    ## Flow pipelines: #{n} elements, #{stages} stages

    Median of #{runs} runs, rows timed round-robin; every row's results checked against the CPU backend's.

    | pipeline | median s | speed-up vs pure Flow |
    |---|---:|---:|
    #{timing}

    ## Memory with a slow consumer: 64 chunks of #{@chunk} elements (8 MiB results), 20 ms per chunk

    Peaks while the pipeline runs, sampled every 5 ms: the bytes of result buffers alive at once
    (`Accel.memory(:cpu)`), and the VM's RSS above its value when the row starts (which memory the
    allocators kept from earlier rows makes smaller).

    | pipeline | results alive | RSS rise | time |
    |---|---:|---:|---:|
    #{memory}
    """

    IO.puts(report)
    path = Results.path(if(n == @elements, do: "flow.md", else: "flow_#{n}.md"))
    File.write!(path, "# Accel.Flow benchmark\n\n" <> report)
    IO.puts("wrote #{path}")
  end

  defp memory_rows do
    n = 64 * @chunk
    compute = &Accel.logistic_map(&1, backend: :cpu, as: :binary)
    slow = fn _ -> Process.sleep(20) end
    source = fn -> Accel.Flow.from_chunks(1..n, compute, chunk_size: @chunk) end

    # The unbounded case last: memory the allocators keep would flatter the rows after it.
    [
      {"Accel.Stream.map_chunks (no Flow), consumer enumerating",
       fn -> Accel.Stream.map_chunks(1..n, compute, chunk_size: @chunk, emit: :chunks) |> Enum.each(slow) end},
      {"from_chunks, consumer inside the flow (Flow.map + Flow.run)",
       fn -> source.() |> Flow.map(slow) |> Flow.run() end},
      {"from_chunks, consumer after Flow.partition(max_demand: 1)",
       fn -> source.() |> Flow.partition(stages: 1, max_demand: 1) |> Flow.map(slow) |> Flow.run() end},
      {"from_chunks, consumer enumerating the flow (asks 1,000 events per stage)",
       fn -> Enum.each(source.(), slow) end}
    ]
  end

  # Peaks while `fun` runs, sampled every 5 ms: the bytes of Accel's result buffers alive at once
  # (Accel.memory(:cpu): exact, whatever the allocators keep), and the VM's RSS above its value at
  # the start (memory kept by the allocators from earlier rows flatters it). Processes are
  # collected first, so that earlier rows' results are gone.
  defp peaks(fun) do
    for pid <- Process.list(), do: :erlang.garbage_collect(pid)
    start = {Accel.memory(:cpu), rss()}
    parent = self()
    sampler = spawn(fn -> sample(parent, start) end)
    {us, _} = :timer.tc(fun)
    send(sampler, :stop)

    receive do
      {:peak, {results, peak_rss}} -> {results - elem(start, 0), peak_rss - elem(start, 1), div(us, 1000)}
    end
  end

  defp sample(parent, {results, peak_rss} = peak) do
    receive do
      :stop -> send(parent, {:peak, peak})
    after
      5 -> sample(parent, {max(results, Accel.memory(:cpu)), max(peak_rss, rss())})
    end
  end

  defp rss do
    [_, kb] = Regex.run(~r/VmRSS:\s+(\d+)/, File.read!("/proc/self/status"))
    String.to_integer(kb) * 1024
  end

  defp elixir_logistic_map(x), do: Enum.reduce(1..10, x, fn _, x -> rem(22 * x * (x + 1), 6_700_417) end)

  defp median(samples), do: samples |> Enum.sort() |> Enum.at(div(length(samples), 2))
  defp fmt(s), do: :erlang.float_to_binary(s, decimals: 3)
end

FlowBench.main(System.argv())
