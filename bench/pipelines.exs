# Pipelines on the logistic-map workload (1..0x2000000, 10 iterations): the direct call against the
# same work through Accel.Stream.map_chunks, device: :all, and Accel.Cluster on 1 and 2 local :peer
# nodes. Every result is checked (MD5 of the int64 result) against the direct call's, itself checked
# against the pure-Elixir reference by bench/logistic_map.exs. Writes bench/results/pipelines.md.
#
#   mix run bench/pipelines.exs [--runs 5] [--elements N]
Code.require_file("support/results.ex", __DIR__)
Code.require_file("support/report.ex", __DIR__)

defmodule PipelinesBench do
  alias Accel.Bench.Results
  alias Accel.Bench.Report

  @full 0x2000000
  @known_full_md5 "b23119456b61a1cc70ca80c8254867a4"
  @chunk 1_048_576

  def main(args) do
    {opts, _} = OptionParser.parse!(args, strict: [runs: :integer, elements: :integer])
    n = opts[:elements] || @full
    runs = opts[:runs] || 5
    direct = Accel.logistic_map(1..n, as: :binary)
    reference = md5(direct)

    if n == @full and reference != @known_full_md5,
      do: raise("the direct call does not match the known result")

    {peers, nodes} = start_peers(2)
    IO.puts("pipelines: #{n} elements, #{runs} runs per row, chunks of #{@chunk}\n")

    rows =
      [
        {"direct call, CPU backend", fn -> Accel.logistic_map(1..n, as: :binary) end},
        {"Accel.Stream.map_chunks, CPU backend",
         fn ->
           Accel.Stream.map_chunks(1..n, &Accel.logistic_map(&1, as: :binary),
             chunk_size: @chunk,
             emit: :chunks
           )
           |> Enum.to_list()
         end},
        {"device: :all (#{Enum.map_join(Accel.devices(), ", ", & &1.name)})",
         fn -> Accel.logistic_map(1..n, as: :binary, device: :all, chunk_size: @chunk) end},
        {"Accel.Cluster, 1 peer node",
         fn ->
           Accel.Cluster.map_chunks(Enum.take(nodes, 1), 1..n, {Accel, :logistic_map, [[as: :binary]]},
             chunk_size: 4 * @chunk
           )
           |> Enum.to_list()
         end},
        {"Accel.Cluster, 2 peer nodes",
         fn ->
           Accel.Cluster.map_chunks(nodes, 1..n, {Accel, :logistic_map, [[as: :binary]]},
             chunk_size: 4 * @chunk
           )
           |> Enum.to_list()
         end}
      ]
      |> Enum.map(fn {name, fun} -> row(name, fun, runs, reference) end)

    Enum.each(peers, &:peer.stop/1)
    base = Accel.Timing.summarize(hd(rows).samples).median
    write(rows, base, n, runs)
  end

  defp row(name, fun, runs, reference) do
    IO.write(String.pad_trailing(name, 70))

    samples =
      for _ <- 1..runs do
        :erlang.garbage_collect()
        {us, result} = :timer.tc(fun)
        if md5(IO.iodata_to_binary(result)) != reference, do: raise("#{name} produced a wrong result")
        IO.write(" #{Report.f(us / 1.0e6)}")
        us / 1.0e6
      end

    IO.puts("")
    %{name: name, form: "range -> binary", process: "", samples: samples}
  end

  defp md5(bin), do: Base.encode16(:erlang.md5(bin), case: :lower)

  defp start_peers(count) do
    unless Node.alive?() do
      {_, 0} = System.cmd(System.find_executable("epmd") || "epmd", ["-daemon"])
      {:ok, _} = Node.start(:"accel_bench@127.0.0.1", :longnames)
    end

    args =
      [~c"-setcookie", Atom.to_charlist(Node.get_cookie()), ~c"-connect_all", ~c"false"] ++
        Enum.flat_map(:code.get_path(), &[~c"-pa", &1])

    for i <- 1..count do
      {:ok, peer, node} =
        :peer.start(%{name: :"accel_bench_peer#{i}", host: ~c"127.0.0.1", longnames: true, args: args})

      {:ok, _} = :erpc.call(node, :application, :ensure_all_started, [:elixir])
      {peer, node}
    end
    |> Enum.unzip()
  end

  defp write(rows, base, n, runs) do
    table =
      Enum.map_join(rows, "\n", fn row ->
        %{min: min, median: median, max: max} = Accel.Timing.summarize(row.samples)

        "| #{row.name} | #{Report.f(min)} | #{Report.f(median)} | #{Report.f(max)} | #{Float.round(median / base, 2)} |"
      end)

    md = """
    ## Pipelines, #{n} elements, range -> binary, 10 iterations

    | variant | min s | median s | max s | median / direct call |
    |---|---:|---:|---:|---:|
    #{table}

    #{runs} samples per row on #{System.schedulers_online()} schedulers. Chunked rows use #{@chunk}-element chunks
    (the cluster rows #{4 * @chunk}); results are kept as the list of chunk binaries. Peer nodes run on this same
    machine, so they share its cores and every result crosses loopback distribution: the cluster rows
    measure the dispatch and transfer cost, not extra compute. Every result was checked against the direct call.
    """

    suffix = if n == @full, do: "", else: "_#{n}"
    File.write!(Results.path("pipelines#{suffix}.md"), md)
    IO.puts("\n" <> md)
  end
end

PipelinesBench.main(System.argv())
