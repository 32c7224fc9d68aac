defmodule Accel.Bench.Peers do
  @moduledoc false
  # The peers a benchmark compares with (NumPy, PyTorch), timed by a Python script in its own
  # process: `run/3` returns its last line of JSON, {"numpy": {op: seconds}, "torch": {...} | null},
  # as %{"numpy" => %{op => seconds}, "torch" => map | nil}; %{} when the script fails.

  def run(python, script, args) do
    case System.cmd(python, [script | args], stderr_to_stdout: true) do
      {out, 0} -> out |> String.split("\n", trim: true) |> List.last() |> decode()
      {out, _} -> IO.puts("peers failed: #{out}") && %{}
    end
  end

  @doc """
  Writes `bytes` of fresh memory in a short-lived OS process of its own (Python's, where there is
  one), which frees it as it exits. On a virtual machine whose host backs the guest's memory on
  first use (this project's Firecracker VMs), a page the guest never touched since it booted costs
  far more to fault in than one it touched before (64 MB: 120 ms against 14 ms, measured in the
  BEAM), so whichever side of a comparison touched the memory first would pay for both. Run before
  anything is timed, it makes first calls compare the work itself. Returns the seconds it took, or
  nil where no Python was found.
  """
  def warm_memory(bytes) do
    if python = System.find_executable("python3") do
      {us, {_, 0}} =
        :timer.tc(fn ->
          System.cmd(python, ["-c", "import sys; bytearray(b'\\x01') * int(sys.argv[1])", "#{bytes}"])
        end)

      us / 1.0e6
    end
  end

  @doc """
  The Python that runs the jax peers: $ACCEL_BENCH_PYTHON where set (a machine's own jax, such as a
  GPU host's), else the benchmarks' virtual environment (`bin/setup --bench` installs jax there), or
  nil.
  """
  def venv_python do
    python =
      System.get_env("ACCEL_BENCH_PYTHON") ||
        Path.expand("../../_build/bench-venv/bin/python", __DIR__)

    if File.exists?(python) or System.find_executable(python), do: python
  end

  @doc """
  A Python that imports NumPy, for the NumPy (and PyTorch) peers: `venv_python/0`'s (jax brings
  NumPy), else the first `python3` on the PATH, or Debian's, that imports it (`bin/setup --bench`
  installs python3-numpy: a `python3` of pyenv's ahead of it on the PATH has none), or nil.
  """
  def numpy_python do
    [venv_python(), System.find_executable("python3"), "/usr/bin/python3"]
    |> Enum.filter(&(&1 && (File.exists?(&1) or System.find_executable(&1))))
    |> Enum.find(&match?({_, 0}, System.cmd(&1, ["-c", "import numpy"], stderr_to_stdout: true)))
  end

  @doc """
  Runs a jax peer script (`python script args...`) whose last line is JSON of flat objects of
  numbers and "jax": its version. `fields` names them, `[as: "json key"]`: returns
  %{as => %{name atom => number}, version: v}, or %{} when the script fails.
  """
  def xla(python, script, args, fields) do
    case System.cmd(python, [script | args], stderr_to_stdout: true) do
      {out, 0} ->
        line = out |> String.split("\n", trim: true) |> List.last()
        [_, version] = Regex.run(~r/"jax": "([^"]+)"/, line)

        Map.new(fields, fn {as, key} ->
          [_, object] = Regex.run(~r/"#{key}": (\{[^}]*\})/, line)

          numbers = Regex.scan(~r/"(\w+)": ([0-9.eE+-]+)/, object)
          {as, Map.new(numbers, fn [_, k, v] -> {String.to_atom(k), String.to_float(v)} end)}
        end)
        |> Map.put(:version, version)

      {out, _} ->
        IO.puts("XLA failed: #{out}")
        %{}
    end
  end

  # Elixir 1.14 has no JSON module: the two flat objects are read with regular expressions.
  defp decode(line) do
    for lib <- ["numpy", "torch"], into: %{} do
      case Regex.run(~r/"#{lib}": (\{[^}]*\}|null)/, line) do
        [_, "null"] ->
          {lib, nil}

        [_, obj] ->
          {lib,
           Map.new(Regex.scan(~r/"(\w+)": ([0-9.eE+-]+)/, obj), fn [_, k, v] -> {k, String.to_float(v)} end)}

        nil ->
          {lib, nil}
      end
    end
  end
end
