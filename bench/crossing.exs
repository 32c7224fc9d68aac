# What crossing the NIF costs, in both directions, on the workload's size (2^25 elements by
# default): lists to contiguous buffers and back, ranges to lists, tensors from and to lists, each
# against its floor (a walk of the list by length/1; a list as long built by a NIF that computes
# nothing, and by the VM). Rows are timed round-robin (each run times every row once),
# medians of --runs; then the first call in a fresh VM against its warm calls. CPU backend.
# Writes bench/results/crossing.md (crossing_N.md for another --elements N).
#
#   mix run bench/crossing.exs [--runs 5] [--elements N]
Code.require_file("support/results.ex", __DIR__)

defmodule CrossingBench do
  alias Accel.Bench.Results
  @elements 0x2000000

  def main(args) do
    {opts, _} = OptionParser.parse!(args, strict: [runs: :integer, elements: :integer])
    n = opts[:elements] || @elements
    runs = opts[:runs] || 5
    check!(n)
    # Each sample runs in a new process that first makes its input, untimed, and collects its
    # garbage: a list result then lands in a small heap, as in a program's worker, rather than in
    # a heap holding every input (whose collections would be timed instead).
    list = fn -> Enum.to_list(1..n) end
    floats = fn -> Enum.map(1..div(n, 4), &(&1 * 0.5)) end
    bin = fn -> Accel.logistic_map(1..n, iterations: 0, as: :binary, backend: :cpu) end
    tensor = fn -> Accel.Tensor.iota({n}, type: :s64, backend: :cpu) end
    float_tensor = fn -> Accel.Tensor.from_list(floats.(), backend: :cpu) end
    none = fn -> nil end

    rows = [
      {:walk, "length/1 (the VM walking the list: the floor)", n, list, &length/1},
      {:decode, "list -> binary: logistic_map(list, iterations: 0, as: :binary)", n, list,
       &Accel.logistic_map(&1, iterations: 0, as: :binary, backend: :cpu)},
      {:from_list, "Tensor.from_list(list) (s64)", n, list, &Accel.Tensor.from_list(&1, backend: :cpu)},
      {:floor_nif, "a list of n zeros by a NIF (Accel.Crossing.zeros_list: the floor)", n, none,
       fn _ -> Accel.Crossing.zeros_list(n) end},
      {:range_list, "range -> list: logistic_map(range, iterations: 0)", n, none,
       fn _ -> Accel.logistic_map(1..n, iterations: 0, backend: :cpu) end},
      {:encode, "binary -> list: logistic_map(binary, iterations: 0, as: :list)", n, bin,
       &Accel.logistic_map(&1, iterations: 0, as: :list, backend: :cpu)},
      {:to_list, "Tensor.to_list(tensor) (s64)", n, tensor, &Accel.Tensor.to_list/1},
      {:from_floats, "Tensor.from_list(floats) (f64, n/4 elements)", div(n, 4), floats,
       &Accel.Tensor.from_list(&1, backend: :cpu)},
      {:to_floats, "Tensor.to_list(f64 tensor) (n/4 elements)", div(n, 4), float_tensor,
       &Accel.Tensor.to_list/1},
      # Last: the VM's own list leaves the largest heap behind it.
      {:floor_vm, "range -> list by the VM (Enum.to_list/1)", n, none, fn _ -> Enum.to_list(1..n) end}
    ]

    samples =
      for _ <- 1..runs, {key, _, _, input, fun} <- rows, reduce: %{} do
        acc ->
          seconds = isolated(input, fun)
          Map.update(acc, key, [seconds], &[seconds | &1])
      end

    m = Map.new(samples, fn {key, s} -> {key, median(s)} end)

    table =
      Enum.map_join(rows, "\n", fn {key, name, count, _, _} ->
        "| #{name} | #{ms(m[key])} | #{round(count / m[key] / 1.0e6)} |"
      end)

    {first, warm, gc} = fresh_vm(n)

    report = """
    ## Crossings: #{n} elements, CPU backend, #{System.schedulers_online()} schedulers

    Medians of #{runs} runs, rows timed round-robin. Every result was checked against the pure-Elixir one.

    | crossing | median ms | M elements/s |
    |---|---:|---:|
    #{table}

    | ratio | measured | target |
    |---|---:|---:|
    | list -> binary, elements/s | #{round(n / m.decode / 1.0e6)} M/s | >= 150 M/s |
    | list -> binary / length/1 | #{ratio(m.decode, m.walk)} | <= 5x |
    | Tensor.from_list / list -> binary | #{ratio(m.from_list, m.decode)} | <= 1.5x |
    | Tensor.to_list / binary -> list | #{ratio(m.to_list, m.encode)} | <= 1.5x |
    | binary -> list / the NIF floor | #{ratio(m.encode, m.floor_nif)} | |
    | range -> list / the NIF floor | #{ratio(m.range_list, m.floor_nif)} | |
    | the NIF floor / the VM building the list | #{ratio(m.floor_nif, m.floor_vm)} | |
    | list -> binary, first call in a fresh VM / warm (medians of 3 VMs) | #{ratio(first, warm)} (#{ms(first)} / #{ms(warm)} ms) | <= 2x |
    | the VM's collection of the just-built list that the first call sets off, timed alone | #{ms(gc)} ms | (the first call's excess over warm: #{ms(first - warm)} ms) |

    Decoding rows start from a list already in its process's old heap (a program's long-lived
    data). A list built just before the call is still in the young heap: the first large binary
    that lands in its process sets off a collection, which copies the whole list to the old heap.
    That collection is the VM's, charged to any call returning a large binary there, and is timed
    alone above.
    """

    IO.puts(report)
    name = if n == @elements, do: "crossing.md", else: "crossing_#{n}.md"
    path = Results.path(name)
    File.write!(path, "# Crossing benchmark\n\n" <> report)
    IO.puts("wrote #{path}")
  end

  defp isolated(input, fun) do
    Task.async(fn ->
      x = input.()
      # Collected, then promoted to the old heap: a large result landing in this process triggers a
      # collection, which would otherwise copy a just-built input (timed apart, in fresh_vm/1).
      :erlang.garbage_collect()
      :erlang.garbage_collect(self(), type: :minor)
      {us, _} = :timer.tc(fn -> fun.(x) end)
      us / 1.0e6
    end)
    |> Task.await(:infinity)
  end

  defp check!(n) do
    list = Enum.to_list(1..n)
    floats = Enum.map(1..div(n, 4), &(&1 * 0.5))
    expected = for x <- list, into: <<>>, do: <<x::signed-native-64>>
    bin = Accel.logistic_map(list, iterations: 0, as: :binary, backend: :cpu)
    true = bin == expected
    tensor = Accel.Tensor.from_list(list, backend: :cpu)
    true = Accel.Tensor.to_binary(tensor) == expected
    true = Accel.Tensor.to_list(tensor) == list
    true = Accel.Tensor.to_list(Accel.Tensor.iota({n}, type: :s64, backend: :cpu)) == Enum.to_list(0..(n - 1))
    true = Accel.Crossing.zeros_list(3) == [0, 0, 0]
    true = Accel.logistic_map(bin, iterations: 0, as: :list, backend: :cpu) == list
    true = Accel.logistic_map(1..n, iterations: 0, backend: :cpu) == list
    true = Accel.Tensor.to_list(Accel.Tensor.from_list(floats, backend: :cpu)) == floats
  end

  # The first list -> binary call of a new VM (its own OS process) against its next calls: the
  # list is built, then the call timed, as a program would.
  defp fresh_vm(n) do
    code = """
    list = Enum.to_list(1..#{n})
    t = fn -> elem(:timer.tc(fn -> Accel.logistic_map(list, iterations: 0, as: :binary, backend: :cpu) end), 0) end
    first = t.()
    warm = Enum.map(1..3, fn _ -> t.() end) |> Enum.sort() |> Enum.at(1)
    # The VM's own part of the first call: the collection that copies a just-built list into the
    # old heap, which the first large binary landing in the process sets off. Timed alone.
    again = Enum.to_list(1..#{n})
    {gc, _} = :timer.tc(fn -> :erlang.garbage_collect(self(), type: :minor) end)
    IO.puts("#{"\#{first} \#{warm} \#{gc} \#{length(again)}"}")
    """

    paths = Enum.flat_map(:code.get_path(), &["-pa", List.to_string(&1)])

    results =
      for _ <- 1..3 do
        {out, 0} = System.cmd(System.find_executable("elixir"), paths ++ ["-e", code])
        [first, warm, gc, _] = out |> String.split() |> Enum.take(-4) |> Enum.map(&String.to_integer/1)
        {first / 1.0e6, warm / 1.0e6, gc / 1.0e6}
      end

    {median(Enum.map(results, &elem(&1, 0))), median(Enum.map(results, &elem(&1, 1))),
     median(Enum.map(results, &elem(&1, 2)))}
  end

  defp median(samples), do: samples |> Enum.sort() |> Enum.at(div(length(samples), 2))
  defp ms(seconds), do: :erlang.float_to_binary(seconds * 1000, decimals: 1)
  defp ratio(a, b), do: "#{Float.round(a / b, 2)}x"
end

CrossingBench.main(System.argv())
