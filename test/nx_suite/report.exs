# bin/nx-suite --report: every run's counts (_build/nx_suite/reports/*.term, written by
# Accel.Test.NxSuite.Counter) as one Markdown table per Nx line, with the binary backend's run of
# the same line as the baseline: a test that fails there is not held against Accel.
#
#   elixir test/nx_suite/report.exs REPORTS_DIR OUTPUT.md   (plain Elixir: no project needed)
[dir, output] = System.argv()

runs =
  for path <- Path.wildcard(Path.join(dir, "*.term")) |> Enum.sort() do
    path |> File.read!() |> :erlang.binary_to_term()
  end

if runs == [], do: raise("no reports in #{dir}: run bin/nx-suite first")

line_of = fn %{run: %{nx: nx}} -> nx |> String.split(".") |> Enum.take(2) |> Enum.join(".") end
label = fn %{run: %{device: d, mode: m}} -> if d == :binary, do: "binary", else: "#{d} #{m}" end
total = fn files, key -> files |> Map.values() |> Enum.map(&Map.get(&1, key, 0)) |> Enum.sum() end
ran = fn counts -> Map.get(counts, :passed, 0) + Map.get(counts, :failed, 0) end

sections =
  for {line, line_runs} <-
        Enum.group_by(runs, line_of)
        |> Enum.sort_by(fn {line, _} -> Version.parse!(line <> ".0") end, Version) do
    baseline = Enum.find(line_runs, &(&1.run.device == :binary))
    base_failures = if baseline, do: MapSet.new(baseline.failures), else: MapSet.new()

    others =
      Enum.reject(line_runs, &(&1.run.device == :binary)) |> Enum.sort_by(&{&1.run.device, &1.run.mode})

    ordered = if baseline, do: [baseline | others], else: others
    files = ordered |> Enum.flat_map(&Map.keys(&1.files)) |> Enum.uniq() |> Enum.sort()

    header =
      "| file | " <>
        Enum.map_join(ordered, " | ", &"#{label.(&1)}: run / passed / excluded") <>
        " |\n" <>
        "|---|" <> String.duplicate("---:|", length(ordered)) <> "\n"

    rows =
      for file <- files do
        cells =
          Enum.map_join(ordered, " | ", fn r ->
            c = Map.get(r.files, file, %{})
            "#{ran.(c)} / #{Map.get(c, :passed, 0)} / #{Map.get(c, :excluded, 0)}"
          end)

        "| #{file} | #{cells} |\n"
      end

    totals =
      "| **total** | " <>
        Enum.map_join(ordered, " | ", fn r ->
          "**#{total.(r.files, :passed) + total.(r.files, :failed)} / #{total.(r.files, :passed)} / #{total.(r.files, :excluded)}**"
        end) <> " |\n"

    failures =
      for r <- others do
        held = Enum.reject(r.failures, &MapSet.member?(base_failures, &1))
        also = Enum.filter(r.failures, &MapSet.member?(base_failures, &1))

        "- #{label.(r)}: " <>
          case held do
            [] ->
              "every test the binary backend passes passes"

            held ->
              "#{length(held)} failing where the binary backend passes: " <>
                Enum.map_join(held, "; ", fn {f, t} -> "`#{t}` (#{f})" end)
          end <>
          if(also == [], do: "", else: "; failing on the binary backend too: #{length(also)}") <>
          if(r.unmatched == [],
            do: "",
            else: "; exclusions that matched no test: #{Enum.join(r.unmatched, "; ")}"
          ) <> "\n"
      end

    base_line =
      if baseline,
        do:
          "- binary: #{length(baseline.failures)} failing (the baseline): " <>
            Enum.map_join(baseline.failures, "; ", fn {_f, t} -> "`#{t}`" end) <> "\n",
        else: "- no binary-backend run of this line: run `bin/nx-suite --nx #{line} --device binary`\n"

    excluded =
      others
      |> Enum.flat_map(fn r -> Enum.map(r.exclusions, fn {name, reason} -> {name, reason, label.(r)} end) end)
      |> Enum.group_by(fn {name, reason, _} -> {name, reason} end, fn {_, _, where} -> where end)
      |> Enum.sort()
      |> Enum.map_join(fn {{name, reason}, where} ->
        "- `#{name}` (#{Enum.join(Enum.uniq(where), ", ")}): #{reason}\n"
      end)

    """
    ## Nx #{hd(line_runs).run.nx}

    Counts per test file: tests run (passed + failed), passed, and excluded (tests tagged
    `:distributed`, which start peer nodes, and the exclusions below).

    #{header}#{rows}#{totals}
    #{base_line}#{failures}
    Excluded, with the reasons (`test/nx_suite/exclusions.exs`):

    #{excluded}
    """
  end

File.write!(output, """
# Nx's own test suite on Accel

Made by `bin/nx-suite --report` from the runs of `bin/nx-suite` (see its header): Nx's own tests
(the files Nx's repository ships, unchanged), with `Accel.Nx.Backend` as the global default
backend on each device, and with `Accel.Nx.Compiler` as the global defn compiler too ("compiler"),
against `Nx.BinaryBackend` through the same harness ("binary", the baseline). CI has no GPU: a
cuda column comes from a GPU host (`bin/gpu-run`'s nx_suite step; its report file copied beside
CI's), and bench/results/ names that machine (`*_machine.txt`).

#{Enum.join(sections, "\n")}
""")

IO.puts("wrote #{output}")
