# backend: :auto (a choice per call from Accel.Placement's measured cost model) and device: :all
# against every fixed device, for the logistic map (10 iterations, binary in and out), a user
# kernel and two tensor operations on host data (Accel.map with :add and :tanh) at several sizes;
# same run, rows timed round-robin (each run times every row once), results checked
# identical. The model is calibrated first (its time reported apart), as a VM's first :auto call
# would, then every :auto call refines it. Writes bench/results/placement.md and its chart,
# placement.svg (placement_TAG.* with --tag).
#
#   mix run bench/placement.exs [--runs 11] [--tag TAG]
Code.require_file("support/results.ex", __DIR__)
Code.require_file("support/chart.ex", __DIR__)

defmodule PlacementBench do
  alias Accel.Bench.Results
  require Accel

  def main(args) do
    {opts, _} = OptionParser.parse!(args, strict: [runs: :integer, tag: :string])
    runs = opts[:runs] || 11
    sizes = [10, 1_000, 100_000, 10_000_000, 0x2000000]
    # every usable device, PoCL included: the model must tell it is slower
    fixed = Accel.devices()

    Accel.Placement.reset()
    {calibration, _} = :timer.tc(fn -> Accel.plan(1..1_000_000, :logistic_map, devices: fixed) end)

    s64 = fn n -> Accel.logistic_map(1..n, iterations: 0, as: :binary, backend: :cpu) end
    # f32 operands from 0.5 to seed + 0.5
    f32 = fn n, seed ->
      Accel.Tensor.iota({n}, type: :f32, backend: :cpu)
      |> Accel.Tensor.multiply(seed / n)
      |> Accel.Tensor.add(0.5)
      |> Accel.Tensor.to_binary()
    end

    k = Accel.kernel(fn x -> rem(x * x + 7, 1_000_003) end)

    {logistic, predicted} =
      table(
        sizes,
        fixed,
        runs,
        s64,
        fn input, place -> Accel.logistic_map(input, place) end,
        &Accel.plan(&1, :logistic_map, devices: &2)
      )

    {kernel, _} =
      table(
        sizes,
        fixed,
        runs,
        s64,
        fn input, place -> Accel.map(input, k, place) end,
        &Accel.plan(&1, k, devices: &2)
      )

    {add, _} =
      table(
        sizes,
        fixed,
        runs,
        &{f32.(&1, 3), f32.(&1, 5)},
        fn input, place -> Accel.map(input, :add, [type: :f32] ++ place) end,
        &Accel.plan(&1, :add, type: :f32, devices: &2)
      )

    {tanh, _} =
      table(
        sizes,
        fixed,
        runs,
        &f32.(&1, 3),
        fn input, place -> Accel.map(input, :tanh, [type: :f32] ++ place) end,
        &Accel.plan(&1, :tanh, type: :f32, devices: &2),
        &close?/2
      )

    header = """
    | elements | plan over all | :auto, s | :all, s | every device, s | #{Enum.map_join(fixed, " | ", &"#{label(&1)}, s")} | :auto / best | :all / best | every / best |
    |---:|---|---:|---:|---:|#{Enum.map_join(fixed, "", fn _ -> "---:|" end)}---:|---:|---:|
    """

    report = """
    Median of #{runs} runs (calls under 10^5 elements repeated within each, 10^5 / n times),
    rows timed round-robin in one run, each run starting one call further on, 50 ms apart (PoCL's
    threads stay busy for a while after its calls), results identical (`tanh`: within 1e-5
    relative, what the tensor suites allow between backends' math libraries). `:auto` is
    `backend: :auto`, choosing per call among its candidates (every usable device less OpenCL
    devices on the host's CPU, which share the CPU backend's cores); `:all` is `device: :all`, over
    the same devices. "every device" co-executes on all of them, PoCL included (`device: [...]`:
    shares sized by the model, then the tail pulled), which shows what co-execution costs when
    two devices share the same cores. "plan over all" is what `Accel.plan/3` chooses when given
    every device: the model must find PoCL slower. The model's calibration of the logistic map
    over every device took #{f(calibration / 1.0e6)} s, once per machine (kept on disk); a kernel's
    and an operation's models are timed on their first call's input.

    ## The logistic map, 10 iterations, s64 binary in and out

    #{header}#{Enum.join(logistic, "\n")}

    Devices: #{Enum.map_join(fixed, "; ", &"#{label(&1)} = #{&1.name}")}.

    What the plan over all devices predicted for each, against the median measured above
    (predicted / measured; below 4096 elements the plan predicts nothing: the CPU backend):

    | elements | #{Enum.map_join(fixed, " | ", &"#{label(&1)}, predicted s (ratio)")} |
    |---:|#{Enum.map_join(fixed, "", fn _ -> "---:|" end)}
    #{Enum.join(predicted, "\n")}

    ## A user kernel: `Accel.map(bin, Accel.kernel(fn x -> rem(x * x + 7, 1_000_003) end))`

    "plan over all" is `Accel.plan(bin, kernel, devices: every device)`, whose model of the kernel
    times prefixes of the input on each device (first call only).

    #{header}#{Enum.join(kernel, "\n")}

    ## Tensor operations on host data: `Accel.map({a, b}, :add, type: :f32)`

    Two f32 binaries in, one out: each device uploads, adds and downloads (memory-bound).

    #{header}#{Enum.join(add, "\n")}

    ## `Accel.map(a, :tanh, type: :f32)`

    One f32 binary in, one out: more arithmetic per byte moved.

    #{header}#{Enum.join(tanh, "\n")}
    """

    IO.puts(report)
    name = if opts[:tag], do: "placement_#{opts[:tag]}.md", else: "placement.md"
    path = Results.path(name)
    File.write!(path, "# Placement benchmark\n\n" <> report)
    IO.puts("wrote #{path}")
    Accel.Bench.Chart.placement(path, String.replace_suffix(path, ".md", ".svg"))
  end

  # One workload's rows, one per size: `make.(n)` the input (made once), `call.(input, place)` the
  # call with placement options, `plan.(input, devices)` its plan; results checked by `same?`
  # against the first call's. Also the plan's predictions against the measured times.
  defp table(sizes, fixed, runs, make, call, plan, same? \\ &==/2) do
    Enum.map(sizes, fn n ->
      input = make.(n)
      plan = plan.(input, fixed)

      calls =
        [
          auto: fn -> call.(input, []) end,
          all: fn -> call.(input, device: :all) end,
          every: fn -> call.(input, device: fixed) end
        ] ++ for d <- fixed, do: {label(d), fn -> call.(input, device: d) end}

      [first | rest] = Enum.map(calls, fn {_, f} -> f.() end)
      Enum.all?(rest, &same?.(&1, first)) || raise "results differ at #{n} elements"
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
  end

  # Whether two f32 binaries agree within 1e-5 relative, element by element (on the CPU backend).
  defp close?(a, b) do
    alias Accel.Tensor, as: T
    [x, y] = Enum.map([a, b], &T.from_binary(&1, :f32, backend: :cpu))
    bound = x |> T.abs() |> T.max(T.abs(y)) |> T.multiply(1.0e-5)
    x |> T.subtract(y) |> T.abs() |> T.greater(bound) |> T.sum() |> T.to_number() == 0
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
