# What backend: :auto's choice costs a call: at 10^5 elements (where a GPU host showed :auto at
# 1.15-1.26x the device it chose), :auto against a call naming the device :auto chooses, and the
# choice itself: a plan made afresh (Accel.plan/3, what every :auto call made before plans were
# remembered per call shape) against the remembered one an :auto call follows. Every row is timed
# after a 50 ms pause, as bench/placement.exs times its rows and as calls arrive in a service:
# the caches are cold. Same run, rows round-robin, medians. Where :auto has a single candidate
# (this 2-core machine: PoCL shares the CPU backend's cores) nothing is chosen, so the CPU backend
# and the first other device are made its candidates, as on a GPU host. Writes
# bench/results/auto_cost.md (auto_cost_TAG.md with --tag).
#
# Then what small cold calls teach the model: 60 :auto calls of 40,000 elements, each after a 40 ms
# pause, and the model's prediction for a 2^23-element call against its measured time (median of
# 5), before and after. Calls that small are mostly latency; they must not teach the per-element
# costs that large calls depend on.
#
#   mix run bench/auto_cost.exs [--runs 31] [--elements 100000] [--tag TAG]
Code.require_file("support/results.ex", __DIR__)

defmodule AutoCostBench do
  alias Accel.Bench.Results
  require Accel
  alias Accel.Placement

  def main(args) do
    {opts, _} = OptionParser.parse!(args, strict: [runs: :integer, elements: :integer, tag: :string])
    runs = opts[:runs] || 31
    n = opts[:elements] || 100_000
    candidates = candidates()
    # a model measured afresh, as on a machine's first :auto call
    Placement.reset()
    input = Accel.logistic_map(1..n, iterations: 0, as: :binary, backend: :cpu)
    k = Accel.kernel(fn x -> rem(x * x + 7, 1_000_003) end)
    # models measured before timing, as a VM's first :auto call would
    chosen = Accel.plan(input, :logistic_map).device
    kernel_chosen = Accel.plan(input, k).device

    rows = [
      {"logistic map, `:auto`", fn -> Accel.logistic_map(input) end},
      {"logistic map, `device: #{label(chosen)}`", fn -> Accel.logistic_map(input, device: chosen) end},
      {"kernel, `:auto`", fn -> Accel.map(input, k) end},
      {"kernel, `device: #{label(kernel_chosen)}`", fn -> Accel.map(input, k, device: kernel_chosen) end},
      {"the choice, planned afresh (`Accel.plan/3`)", fn -> Accel.plan(input, :logistic_map) end},
      {"the choice, remembered (what an `:auto` call does)", fn -> Placement.choose(input, []) end}
    ]

    [auto, fixed, kauto, kfixed | _] = Enum.map(rows, fn {_, f} -> f.() end)
    (auto == fixed and kauto == kfixed) || raise "results differ"
    m = medians(rows, runs)

    table = Enum.map_join(rows, "\n", fn {name, _} -> "| #{name} | #{Float.round(m[name], 1)} |" end)

    [la, lf, ka, kf | _] = Enum.map(rows, &m[elem(&1, 0)])
    {taught_before, small_device, small_us, taught_after} = small_calls_teach(input)

    text = """
    # What `backend: :auto`'s choice costs a call

    #{n} elements, s64 binary in and out, each call timed after a 50 ms pause (cold caches), median
    of #{runs} runs, rows round-robin in one run, results identical. Candidates:
    #{Enum.map_join(candidates, ", ", &"#{label(&1)} (#{&1.name})")}#{if forced?(), do: " (made the candidates: :auto alone has one here)", else: ""}.

    | call | median, us |
    |---|---:|
    #{table}

    `:auto` / the device it chose: logistic map #{Float.round(la / lf, 2)}x, kernel #{Float.round(ka / kf, 2)}x.

    ## What small cold calls teach the model

    60 `:auto` calls of 40,000 elements (logistic map, binary), each after a 40 ms pause (median
    #{round(small_us)} us, on #{label(small_device)}), then #{label(small_device)}'s predicted time for
    a call of 2^23 elements against its measured time (median of 5), before and after:

    | | predicted, ms | measured, ms | predicted / measured | corrections (per element, latency) |
    |---|---:|---:|---:|---|
    #{teach_row("before", taught_before)}
    #{teach_row("after", taught_after)}
    """

    path = Results.path(if opts[:tag], do: "auto_cost_#{opts[:tag]}.md", else: "auto_cost.md")
    File.write!(path, text)
    IO.puts(text)
  end

  # 60 cold :auto calls of 40,000 elements, and the large call's prediction before and after
  defp small_calls_teach(input) do
    big = Accel.logistic_map(1..8_388_608, iterations: 0, as: :binary, backend: :cpu)
    small = binary_part(input, 0, min(40_000, div(byte_size(input), 8)) * 8)
    device = Accel.plan(small, :logistic_map).device
    before = large_call(big, device)

    times =
      for _ <- 1..60 do
        Process.sleep(40)
        {us, _} = :timer.tc(fn -> Accel.logistic_map(small, as: :binary) end)
        us
      end

    {before, device, Enum.at(Enum.sort(times), 30), large_call(big, device)}
  end

  # the model's prediction for `big` on `device`, its measured time and the model's corrections
  defp large_call(big, device) do
    Placement.Table.await_learning()
    predicted = Enum.find(Accel.plan(big, :logistic_map).predictions, &(&1.device == device))
    Accel.logistic_map(big, device: device, as: :binary)

    measured =
      Enum.map(1..5, fn _ ->
        elem(:timer.tc(fn -> Accel.logistic_map(big, device: device, as: :binary) end), 0)
      end)

    %{
      predicted: predicted.seconds * 1000,
      measured: Enum.at(Enum.sort(measured), 2) / 1000,
      corrections: {predicted.correction, predicted.latency_correction}
    }
  end

  defp teach_row(label, %{predicted: p, measured: m, corrections: {c, l}}),
    do:
      "| #{label} | #{Float.round(p, 2)} | #{Float.round(m, 2)} | #{Float.round(p / m, 2)}x | #{Float.round(c, 2)}, #{Float.round(l, 2)} |"

  defp candidates do
    case Placement.candidates() do
      [_, _ | _] = two_or_more ->
        two_or_more

      _ ->
        devices = Accel.devices()
        forced = [Enum.find(devices, &(&1.backend == :cpu)), Enum.find(devices, &(&1.backend != :cpu))]
        if nil in forced, do: raise("one device only: :auto has nothing to choose here")
        :persistent_term.put({Accel, :co_execution_devices, :auto}, forced)
        :persistent_term.put({__MODULE__, :forced}, true)
        forced
    end
  end

  defp forced?, do: :persistent_term.get({__MODULE__, :forced}, false)

  defp medians(rows, runs) do
    times =
      for r <- 1..runs do
        {before, rest} = Enum.split(rows, rem(r, length(rows)))

        for {name, fun} <- rest ++ before do
          Process.sleep(50)
          {us, _} = :timer.tc(fun)
          {name, us}
        end
      end

    for {name, _} <- rows, into: %{} do
      sorted = times |> Enum.map(&List.keyfind(&1, name, 0)) |> Enum.map(&elem(&1, 1)) |> Enum.sort()
      {name, Enum.at(sorted, div(runs, 2)) * 1.0}
    end
  end

  defp label(%Accel.Device{backend: :cpu}), do: ":cpu"
  defp label(%Accel.Device{backend: b, id: id}), do: "#{b}:#{id}"
end

AutoCostBench.main(System.argv())
