# Speed-up over pure Elixir against input size, per backend: the logistic map (10 iterations,
# p = 6_700_417, mu = 22) over 1..n, as the original experiment's Enum.map code computes it from
# a list, against Accel.logistic_map/2 on each usable backend with a list in and out (what the
# Elixir code holds) and with binaries in and out (what a caller keeping data in Accel's form
# passes). Each sample runs in a fresh process that builds its input untimed (a process holding
# several lists of 2^25 elements collects them in every sample); rows are timed round-robin, the
# median of several runs each (the pure Elixir code, which takes seconds from 10^7 elements,
# 3 runs at 10^7 and one at 2^25); every result is checked against the Elixir one. Writes
# bench/results/speedup.{md,csv,svg} (speedup_TAG.* with --tag TAG).
#
#   mix run bench/speedup.exs [--runs 5] [--max 33554432] [--tag NAME]
Code.require_file("support/results.ex", __DIR__)
Code.require_file("support/logistic_map_elixir.ex", __DIR__)
Code.require_file("support/chart.ex", __DIR__)

defmodule SpeedupBench do
  alias Accel.Bench.Results
  @p 6_700_417
  @mu 22

  def main(args) do
    {opts, _, _} = OptionParser.parse(args, strict: [runs: :integer, max: :integer, tag: :string])
    runs = Keyword.get(opts, :runs, 5)
    max = Keyword.get(opts, :max, 0x2000000)
    sizes = Enum.filter([100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 0x2000000], &(&1 <= max))
    backends = for %{name: b, available: true} <- Accel.backends(), b != :auto, do: b

    rows =
      for n <- sizes do
        bin = Accel.logistic_map(1..n, iterations: 0, as: :binary, backend: :cpu)

        # the pure Elixir code takes seconds from 10^7 elements: 3 runs there, 1 at 2^25; its first
        # run's result is the reference every other result is checked against
        elixir_runs = if n > 10_000_000, do: 1, else: if(n == 10_000_000, do: min(runs, 3), else: runs)
        # the list every list sample builds in its own process
        elixir_list = fn -> Enum.to_list(1..n) end
        elixir_call = &LogisticMapElixir.map10(&1, @p, @mu)
        {first, expected} = sample(elixir_list, elixir_call, nil)

        # {backend, form, the input's maker (run in the sample's process, untimed), the call}
        calls =
          for b <- backends,
              {form, make} <- [{"list", elixir_list}, {"binary", fn -> bin end}] do
            {b, form, make, &Accel.logistic_map(&1, backend: b)}
          end

        elixir =
          median([
            first | for(_ <- 2..elixir_runs//1, do: elixir_list |> sample(elixir_call, expected) |> elem(0))
          ])

        # one untimed call each (compiles kernels, maps buffers), then the runs, round-robin
        Enum.each(calls, fn {_, _, make, call} -> sample(make, call, expected) end)

        times =
          for(
            _ <- 1..runs,
            do: Enum.map(calls, fn {_, _, make, call} -> make |> sample(call, expected) |> elem(0) end)
          )
          |> Enum.zip_with(&median/1)

        accel = Enum.zip_with(calls, times, fn {b, form, _, _}, t -> {b, form, t} end)

        IO.puts(
          "n = #{n}: Elixir #{fmt(elixir)} s; " <>
            Enum.map_join(accel, "; ", fn {b, f, t} -> "#{b} #{f} #{fmt(t)} s" end)
        )

        {n, elixir, accel}
      end

    write(rows, backends, runs, opts[:tag])
  end

  # {seconds `call` takes on `make`'s input, its result as int64s}, in a fresh process that made the
  # input (untimed), as a caller holding that data would run it; the result must be `expected`
  # (nil: the reference is being made).
  defp sample(make, call, expected) do
    fresh(fn ->
      input = make.()
      # the input in the old heap, as a caller's long-held data is: not copied by the call's collections
      :erlang.garbage_collect()
      {us, result} = :timer.tc(fn -> call.(input) end)
      got = if is_list(result), do: Accel.NIF.int64_binary(result), else: result
      if expected != nil and got != expected, do: raise("a result differs from the pure Elixir one")
      {us / 1.0e6, got}
    end)
  end

  # `fun`'s value, computed in a process of its own, which is gone (its memory released) on return.
  defp fresh(fun) do
    parent = self()
    {pid, ref} = spawn_monitor(fn -> send(parent, {self(), fun.()}) end)

    receive do
      {^pid, value} ->
        receive do: ({:DOWN, ^ref, :process, ^pid, _} -> value)

      {:DOWN, ^ref, :process, ^pid, reason} ->
        raise "a sample crashed: #{inspect(reason)}"
    end
  end

  defp median(xs), do: xs |> Enum.sort() |> Enum.at(div(length(xs), 2))
  defp fmt(s), do: :erlang.float_to_binary(s, [{:decimals, 6}, :compact])

  defp write(rows, backends, runs, tag) do
    suffix = if tag, do: "_#{tag}", else: ""
    base = Results.path("speedup#{suffix}")
    columns = for b <- backends, form <- ["list", "binary"], do: {b, form}

    header =
      "| elements | pure Elixir, s | " <>
        Enum.map_join(columns, " | ", fn {b, f} -> "#{b} #{f}, s (speed-up)" end) <> " |"

    lines =
      for {n, elixir, accel} <- rows do
        cells =
          Enum.map_join(columns, " | ", fn {b, f} ->
            {_, _, t} = Enum.find(accel, &match?({^b, ^f, _}, &1))
            "#{fmt(t)} (#{Float.round(elixir / t, 1)}x)"
          end)

        "| #{n} | #{fmt(elixir)} | #{cells} |"
      end

    devices = Accel.devices() |> Enum.map_join("; ", &"#{&1.backend} #{&1.id}: #{&1.name}")

    File.write!(base <> ".md", """
    # Speed-up over pure Elixir against input size

    The logistic map, 10 iterations, over 1..n: the original experiment's Enum.map code on a list
    against `Accel.logistic_map/2` on each backend, list in and out and binary in and out. Median
    of #{runs} runs, each in a fresh process that built its input (rows round-robin; the pure Elixir
    code 3 times at 10^7 elements and once at 2^25), every
    result checked against the Elixir one. #{System.schedulers_online()} schedulers, OTP
    #{System.otp_release()}, Elixir #{System.version()}. Devices: #{devices}.

    ![Speed-up over pure Elixir](speedup#{suffix}.svg)

    #{header}
    |---:|---:|#{String.duplicate("---:|", length(columns))}
    #{Enum.join(lines, "\n")}
    """)

    File.write!(
      base <> ".csv",
      "elements,backend,form,seconds,elixir_seconds\n" <>
        Enum.map_join(rows, "", fn {n, elixir, accel} ->
          Enum.map_join(accel, "", fn {b, f, t} -> "#{n},#{b},#{f},#{t},#{elixir}\n" end)
        end)
    )

    Accel.Bench.Chart.speedup(base <> ".csv", base <> ".svg")
    IO.puts("Wrote #{base}.{md,csv}")
  end
end

SpeedupBench.main(System.argv())
