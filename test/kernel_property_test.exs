defmodule Accel.KernelPropertyTest do
  # The kernel compiler fuzzed: random well-typed kernels from the whole documented language
  # (Accel.Test.KernelPrograms: integer and float arithmetic near the 64-bit and float limits,
  # div/rem/Bitwise, comparisons, if/cond/case, local variables, loops, a captured value), generated
  # and shrunk by PropEr, built as a caller's code builds them, and run by Accel.map on each backend
  # against Enum.map of the same function: results equal (integers exactly, floats bit for bit, or
  # within 4 ulps where a :math function other than sqrt runs on a device's library), or the same
  # exception, with the same message, as the first element Elixir raises for. Where a device's
  # :math function feeds an operation that is not continuous (trunc, a comparison), Elixir's value
  # with that function's result moved by up to 4 ulps is accepted too.
  # ACCEL_PROPER_RUNS and ACCEL_PROPER_SEED as for every property test (Accel.Test.Properties).
  use ExUnit.Case, async: true

  alias Accel.Test.{KernelPrograms, Properties}

  @moduletag :proper
  @moduletag timeout: :infinity

  for backend <- [:cpu, :opencl] do
    @tag opencl: backend == :opencl
    test "random kernels give Enum.map's results on #{backend}" do
      backend = unquote(backend)
      Properties.check!("#{backend}", __ENV__.file, KernelPrograms.program(), &safe_check(&1, backend))
    end
  end

  defp safe_check(program, backend) do
    check(program, backend)
  rescue
    e -> {:error, "raised #{Exception.format(:error, e, __STACKTRACE__)} for #{describe(program)}"}
  end

  defp check({tree, p, rows} = program, backend) do
    kernel = KernelPrograms.kernel(tree, p)
    expected = Enum.map(rows, fn {x, y, f} -> outcome(fn -> kernel.fun.(x, y, f) end) end)
    columns = {Enum.map(rows, &elem(&1, 0)), Enum.map(rows, &elem(&1, 1)), Enum.map(rows, &elem(&1, 2))}
    got = outcome(fn -> Accel.map(columns, kernel, backend: backend, as: :list) end)
    tolerance = if KernelPrograms.inexact?(tree) and backend != :cpu, do: :ulps, else: :exact

    case {Enum.find(expected, &match?({:raise, _}, &1)), got} do
      {{:raise, e}, {:raise, g}} ->
        if e.__struct__ == g.__struct__ and Exception.message(e) == Exception.message(g),
          do: :ok,
          else: {:error, "Elixir raises #{inspect(e)}, Accel #{inspect(g)} for #{describe(program)}"}

      {{:raise, e}, {:ok, _}} ->
        {:error, "Elixir raises #{inspect(e)}, Accel does not, for #{describe(program)}"}

      {nil, {:raise, g}} ->
        {:error, "Accel raises #{inspect(g)}, Elixir does not, for #{describe(program)}"}

      {nil, {:ok, values}} ->
        wanted = Enum.map(expected, fn {:ok, v} -> v end)

        mismatch =
          Enum.find_index(Enum.zip([wanted, values, rows]), fn {w, v, row} ->
            not (same?(w, v, tolerance) or (tolerance == :ulps and within_library_ulps?(tree, p, row, v)))
          end)

        case mismatch do
          nil ->
            :ok

          i ->
            {:error,
             "row #{i} #{inspect(Enum.at(rows, i))}: Elixir #{inspect(Enum.at(wanted, i))}, Accel #{inspect(Enum.at(values, i))} for #{describe(program)}"}
        end
    end
  end

  # A device's :math functions may be a few ulps from Elixir's (Accel.Kernel's promise), and an
  # operation after one (trunc, a comparison) may turn that into any difference: the row is right
  # when Elixir computes the device's value with every such result moved by up to 4 ulps.
  defp within_library_ulps?(tree, p, {x, y, f}, value) do
    Enum.any?([-4, -3, -2, -1, 1, 2, 3, 4], fn ulps ->
      case outcome(fn -> KernelPrograms.nudged(tree, p, ulps).(x, y, f) end) do
        {:ok, nudged} -> same?(nudged, value, :ulps)
        {:raise, _} -> false
      end
    end)
  end

  defp outcome(fun) do
    {:ok, fun.()}
  rescue
    e -> {:raise, e}
  end

  defp same?(a, b, _) when is_integer(a) or is_boolean(a), do: a === b
  defp same?(a, b, :exact) when is_float(a) and is_float(b), do: <<a::float>> == <<b::float>>

  defp same?(a, b, :ulps) when is_float(a) and is_float(b),
    do: a == b or abs(a - b) <= 9.0e-16 * max(abs(a), abs(b))

  defp same?(_a, _b, _), do: false

  defp describe({tree, p, rows}),
    do:
      "kernel fn x, y, f -> #{Macro.to_string(KernelPrograms.ast(tree))} end with p = #{p}, rows #{inspect(rows, limit: 6)}"
end
