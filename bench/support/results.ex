defmodule Accel.Bench.Results do
  @moduledoc false
  # Where every benchmark writes its tables, CSVs and charts: bench/results/ (committed), or the
  # folder ACCEL_BENCH_RESULTS names. `bin/bench --quick` names bench/results/quick/ (untracked), so
  # that a quick run's small-size figures never replace the committed full-size ones.

  def dir, do: System.get_env("ACCEL_BENCH_RESULTS") || Path.expand("../results", __DIR__)

  @doc "The path of a results file `name`, its folder made."
  def path(name) do
    File.mkdir_p!(dir())
    Path.join(dir(), name)
  end
end
