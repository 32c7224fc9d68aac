# backend: :auto (a choice per call from Accel.Placement's measured cost model) and device: :all
# against every fixed device, for the logistic map (10 iterations, binary in and out) at several
# sizes; same run, rows timed round-robin (each run times every row once), results checked
# identical. The model is calibrated first (its time reported apart), as a VM's first :auto call
# would, then every :auto call refines it. Writes bench/results/placement.md (placement_TAG.md with
# --tag).
#
#   mix run bench/placement.exs [--runs 11] [--tag TAG]
defmodule PlacementBench do
  def main(args) do
    {opts, _} = OptionParser.parse!(args, strict: [runs: :integer, tag: :string])
    runs = opts[:runs] || 11
    sizes = [10, 1_000, 100_000, 10_000_000, 0x2000000]
    # every usable device, PoCL included: the model must tell it is slower
    fixed = Accel.devices()

    Accel.Placement.reset()
    {calibration, _} = :timer.tc(fn -> Accel.plan(1..1_000_000, :logistic_map, devices: fixed) end)

    {rows, predicted} =
      Enum.map(sizes, fn n ->
        bin = Accel.logistic_map(1..n, iterations: 0, as: :binary, backend: :cpu)
        plan = Accel.plan(bin, :logistic_map, devices: fixed)

        calls =
          [
            auto: fn -> Accel.logistic_map(bin) end,
            all: fn -> Accel.logistic_map(bin, device: :all) end,
            every: fn -> Accel.logistic_map(bin, device: fixed) end
          ] ++
            for d <- fixed, do: {label(d), fn -> Accel.logistic_map(bin, device: d) end}

        [first | rest] = Enum.map(calls, fn {_, f} -> f.() end)
        Enum.all?(rest, &(&1 == first)) || raise "results differ at #{n} elements"
        # small calls repeated within each sample, so that each is timed over a millisecond at least
        m = medians(calls, runs, max(1, div(100_000, n)))
        best = fixed |> Enum.map(&m[label(&1)]) |> Enum.min()

        row =
          "| #{n} | #{label(plan.device)} | #{f(m[:auto])} | #{f(m[:all])} | #{f(m[:every])} | " <>
            Enum.map_join(fixed, " | ", &f(m[label(&1)])) <>
            " | #{Float.round(m[:auto] / best, 2)}x | #{Float.round(m[:all] / best, 2)}x | " <>
            "#{Float.round(m[:every] / best, 2)}x |"

        {row, "| #{n} | " <> Enum.map_join(fixed, " | ", &predicted(plan, &1, m[label(&1)])) <> " |"}
      end)
      |> Enum.unzip()

    kernel_rows = kernel_rows(sizes, fixed, runs)

    report = """
    ## The logistic map, 10 iterations, s64 binary in and out

    Median of #{runs} runs (calls under 10^5 elements repeated within each, 10^5 / n times),
    rows timed round-robin in one run, each run starting one call further on, 50 ms apart (PoCL's
    threads stay busy for a while after its calls), results identical. `:auto` is
    `backend: :auto`, choosing per call among its candidates (every usable device less OpenCL
    devices on the host's CPU, which share the CPU backend's cores); `:all` is `device: :all`, over
    the same devices. "every device" co-executes on all of them, PoCL included (`device: [...]`:
    shares sized by the model, then the tail pulled), which shows what co-execution costs when
    two devices share the same cores. "plan over all" is what `Accel.plan/3` chooses when given
    every device: the model must find PoCL slower. The model's calibration over every device took
    #{f(calibration / 1.0e6)} s, once per machine (kept on disk).

    | elements | plan over all | :auto, s | :all, s | every device, s | #{Enum.map_join(fixed, " | ", &"#{label(&1)}, s")} | :auto / best | :all / best | every / best |
    |---:|---|---:|---:|---:|#{Enum.map_join(fixed, "", fn _ -> "---:|" end)}---:|---:|---:|
    #{Enum.join(rows, "\n")}

    Devices: #{Enum.map_join(fixed, "; ", &"#{label(&1)} = #{&1.name}")}.

    What the plan over all devices predicted for each, against the median measured above
    (predicted / measured; below 4096 elements the plan predicts nothing: the CPU backend):

    | elements | #{Enum.map_join(fixed, " | ", &"#{label(&1)}, predicted s (ratio)")} |
    |---:|#{Enum.map_join(fixed, "", fn _ -> "---:|" end)}
    #{Enum.join(predicted, "\n")}

    ## A user kernel: `Accel.map(bin, Accel.kernel(fn x -> rem(x * x + 7, 1_000_003) end))`

    Same method; "plan over all" is `Accel.plan(bin, kernel, devices: every device)`, whose model
    of the kernel times prefixes of the input on each device (first call only).

    | elements | plan over all | :auto, s | #{Enum.map_join(fixed, " | ", &"#{label(&1)}, s")} | :auto / best |
    |---:|---|---:|#{Enum.map_join(fixed, "", fn _ -> "---:|" end)}---:|
    #{Enum.join(kernel_rows, "\n")}
    """

    IO.puts(report)
    name = if opts[:tag], do: "placement_#{opts[:tag]}.md", else: "placement.md"
    path = Path.expand("results/" <> name, __DIR__)
    File.write!(path, "# Placement benchmark\n\n" <> report)
    IO.puts("wrote #{path}")
  end

  defp kernel_rows(sizes, fixed, runs) do
    require Accel
    k = Accel.kernel(fn x -> rem(x * x + 7, 1_000_003) end)

    Enum.map(sizes, fn n ->
      bin = Accel.logistic_map(1..n, iterations: 0, as: :binary, backend: :cpu)
      plan = Accel.plan(bin, k, devices: fixed)

      calls =
        [auto: fn -> Accel.map(bin, k) end] ++
          for(d <- fixed, do: {label(d), fn -> Accel.map(bin, k, device: d) end})

      [first | rest] = Enum.map(calls, fn {_, f} -> f.() end)
      Enum.all?(rest, &(&1 == first)) || raise "kernel results differ at #{n} elements"
      m = medians(calls, runs, max(1, div(100_000, n)))
      best = fixed |> Enum.map(&m[label(&1)]) |> Enum.min()

      "| #{n} | #{label(plan.device)} | #{f(m[:auto])} | " <>
        Enum.map_join(fixed, " | ", &f(m[label(&1)])) <> " | #{Float.round(m[:auto] / best, 2)}x |"
    end)
  end

  defp predicted(plan, device, measured) do
    case Enum.find(plan.predictions, &(&1.device == device)) do
      %{seconds: s} when s > 0 -> "#{f(s)} (#{Float.round(s / measured, 2)}x)"
      _ -> "-"
    end
  end

  defp label(%Accel.Device{backend: :cpu}), do: :cpu
  defp label(%Accel.Device{backend: b, id: id}), do: :"#{b}:#{id}"

  defp medians(calls, runs, reps) do
    # each run starts one call further on, so that no call always follows the same other (a call
    # after PoCL's finds the host's memory in another state)
    times =
      for r <- 1..runs do
        {before, rest} = Enum.split(calls, rem(r, length(calls)))

        for {name, fun} <- rest ++ before do
          {us, _} = :timer.tc(fn -> Enum.each(1..reps, fn _ -> fun.() end) end)
          # PoCL's threads keep the cores busy for a while after its calls: let them settle
          Process.sleep(50)
          {name, us / reps}
        end
      end

    for {name, _} <- calls, into: %{} do
      sorted = times |> Enum.map(&Keyword.fetch!(&1, name)) |> Enum.sort()
      {name, Enum.at(sorted, div(runs, 2)) / 1.0e6}
    end
  end

  defp f(seconds) when seconds < 0.001, do: :erlang.float_to_binary(seconds, decimals: 6)
  defp f(seconds), do: :erlang.float_to_binary(seconds, decimals: 4)
end

PlacementBench.main(System.argv())
