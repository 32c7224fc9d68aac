# Draws every chart of bench/results/ again from the tables beside it (after a change to a chart's
# style, or for results committed from another machine): logistic_map*.svg from logistic_map*.csv,
# speedup*.svg from speedup*.csv, placement*.svg from placement*.md. The benchmarks draw their own
# when they run; this needs gnuplot only (bin/setup --bench installs it), not Accel's devices.
#
#   mix run bench/charts.exs
Code.require_file("support/results.ex", __DIR__)
Code.require_file("support/chart.ex", __DIR__)
alias Accel.Bench.Chart

results = Accel.Bench.Results.dir()

for csv <- Path.wildcard(Path.join(results, "logistic_map*.csv")) do
  md = File.read!(String.replace_suffix(csv, ".csv", ".md"))
  [_, n] = Regex.run(~r/^## Logistic map, (\d+) elements/m, md)
  Chart.logistic_map(csv, String.replace_suffix(csv, ".csv", ".svg"), "Logistic map, #{n} elements")
end

for csv <- Path.wildcard(Path.join(results, "speedup*.csv")),
    do: Chart.speedup(csv, String.replace_suffix(csv, ".csv", ".svg"))

for md <- Path.wildcard(Path.join(results, "placement*.md")),
    do: Chart.placement(md, String.replace_suffix(md, ".md", ".svg"))
