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

  @doc """
  The CPU's kernels a table's figures came from: OpenBLAS's (OPENBLAS_CORETYPE overrides its
  detection of the CPU: the development VM's environment set Haswell, AVX2, on an EPYC with
  AVX-512 that OpenBLAS detects as Cooperlake, half the products' speed) and Accel's own (the
  instruction set its CPU backend chose, Accel.devices/0's capability).
  """
  def cpu_kernels do
    blas =
      case System.get_env("OPENBLAS_CORETYPE") do
        nil -> "OpenBLAS's own choice for this CPU"
        core -> "OpenBLAS's #{core}, as OPENBLAS_CORETYPE says"
      end

    isa = Enum.find_value(Accel.devices(), "unknown", &(&1.backend == :cpu && &1.capability))
    "#{blas}; Accel's CPU kernels for #{isa}"
  end
end
