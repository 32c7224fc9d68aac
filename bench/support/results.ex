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
  The head of a table of Accel's times against XLA's: the first column's title, an `Accel <device>`
  column per device, XLA's column.
  """
  def xla_head(first, devices) do
    "| #{first} | #{Enum.map_join(devices, " | ", &"Accel #{&1}")} | XLA (CPU) |\n" <>
      "|---|#{Enum.map_join(devices, "", fn _ -> "---:|" end)}---:|"
  end

  @doc "The devices a benchmark times: the CPU backend's, and OpenCL's where a device is available."
  def devices, do: [:cpu] ++ for(%{name: :opencl, available: true} <- Accel.backends(), do: :opencl)

  @doc "Seconds as milliseconds, two decimals."
  def ms(seconds), do: :erlang.float_to_binary(seconds * 1000, decimals: 2)

  @doc "Accel's time in milliseconds, with XLA's time over it in parentheses where XLA ran (nil where not)."
  def xla_cell(seconds, nil), do: ms(seconds)
  def xla_cell(seconds, xla), do: "#{ms(seconds)} (#{:erlang.float_to_binary(xla / seconds, decimals: 2)}x)"

  @doc """
  The CPU's kernels a table's figures came from: OpenBLAS's (the CPU backend's report: what
  OpenBLAS picked for this CPU, what OPENBLAS_CORETYPE named, or what Accel named where OpenBLAS
  took the CPU for an older one: lib/accel/nif.ex) and Accel's own (the instruction set its CPU
  backend chose, Accel.devices/0's capability). (On the AVX-512 EPYC of earlier tables that VM's
  environment named Haswell, AVX2: half the products' speed of OpenBLAS's own pick, Cooperlake.)
  """
  def cpu_kernels do
    detail = Enum.find_value(Accel.backends(), "", &(&1.name == :cpu && &1.detail))

    blas =
      case {Regex.run(~r/OpenBLAS (\w+)/, detail), :persistent_term.get({Accel.NIF, :blas_core}, nil)} do
        {nil, _} ->
          "no OpenBLAS"

        {[_, core], {picked, core}} ->
          "OpenBLAS's #{core}, named by Accel (OpenBLAS took this CPU for #{picked})"

        {[_, core], _} ->
          if(System.get_env("OPENBLAS_CORETYPE"),
            do: "OpenBLAS's #{core}, as OPENBLAS_CORETYPE says",
            else: "OpenBLAS's #{core}, its own choice for this CPU"
          )
      end

    isa = Enum.find_value(Accel.devices(), "unknown", &(&1.backend == :cpu && &1.capability))
    "#{blas}; Accel's CPU kernels for #{isa}"
  end
end
