# What `backend: :auto` (the default) costs small calls: each call with `:auto` against the same
# call naming each available backend, at 10, 1,000 and 100,000 elements, for the logistic map, a
# user kernel and a registered operation by name (`Accel.map({input, 1}, :add)`). Warm calls, as a
# loop or a pipeline makes them (one round first, unmeasured): 101 rounds in one run, each timing
# a batch of 20 calls (4 at 100,000 elements) of every variant, their order rotated from round to
# round; the per-call median of each. Then :auto and the fastest fixed backend alone, alternated,
# 4x as many rounds: :auto's ratio to it. Writes bench/results/auto_small.md.
#
#   mix run bench/auto_small.exs [--rounds 101]
Code.require_file("support/results.ex", __DIR__)

defmodule AutoSmallBench do
  alias Accel.Bench.Results
  require Accel

  def main(args) do
    {opts, _} = OptionParser.parse!(args, strict: [rounds: :integer])
    rounds = opts[:rounds] || 101
    backends = for %{name: b, available: true} <- Accel.backends(), do: b
    k = Accel.kernel(fn x -> rem(x * x + 7, 1_000_003) end)

    workloads = [
      {"logistic map", fn input, o -> Accel.logistic_map(input, o) end},
      {"kernel", fn input, o -> Accel.map(input, k, o) end},
      {"`:add` by name", fn input, o -> Accel.map({input, 1}, :add, o) end}
    ]

    rows =
      for n <- [10, 1_000, 100_000], {name, call} <- workloads do
        input = Accel.logistic_map(1..n, iterations: 0, as: :binary, backend: :cpu)
        variants = [{:auto, []} | Enum.map(backends, &{&1, [backend: &1]})]
        results = Enum.map(variants, fn {_, o} -> call.(input, o) end)
        if Enum.uniq(results) |> length() != 1, do: raise("#{name} at #{n}: backends disagree")
        batch = if n > 1000, do: 4, else: 20
        times = measure(Enum.map(variants, fn {_, o} -> fn -> call.(input, o) end end), rounds + 1, batch)
        by = Enum.zip(Enum.map(variants, &elem(&1, 0)), times) |> Map.new()
        {best, _} = by |> Map.delete(:auto) |> Enum.min_by(&elem(&1, 1))
        # then :auto against that backend alone: a slower backend's calls between them (PoCL's
        # threads busy on these cores after each) would weigh on whichever call follows
        [auto_us, best_us] =
          measure([fn -> call.(input, []) end, fn -> call.(input, backend: best) end], 4 * rounds + 1, batch)

        {n, name, by, best, {auto_us, best_us}}
      end

    text = """
    # What `backend: :auto` costs small calls

    Warm calls, s64 binary in and out: per-call medians (us) of #{rounds} rounds, each a batch of 20
    calls (4 at 100,000 elements) of every variant in rotated order, after one unmeasured round;
    #{System.schedulers_online()} schedulers, OTP #{System.otp_release()}.
    The backends' columns come from all variants in rotation; a slow backend's calls (PoCL's threads
    stay busy on these cores after each) weigh on whichever call follows them. So `:auto` is then
    measured against the fastest backend named explicitly, the two alone, alternated, #{4 * rounds}
    rounds: per-call medians (us) and their ratio.

    | elements | call | #{Enum.map_join([:auto | backends], " | ", &"`#{&1}`")} | `:auto` / best, alone | `:auto` / best |
    |---:|---|#{String.duplicate("---:|", length(backends) + 3)}
    #{Enum.map_join(rows, "\n", fn {n, name, by, best, {a, b}} -> "| #{n} | #{name} | #{Enum.map_join([:auto | backends], " | ", &us(by[&1]))} | #{us(a)} / #{us(b)} (`#{best}`) | #{:erlang.float_to_binary(a / b, decimals: 2)}x |" end)}
    """

    IO.puts(text)
    File.write!(Results.path("auto_small.md"), text)
  end

  # Per-call medians (us) of each function over `rounds` rounds of a batch of `batch` calls each,
  # the functions' order rotated each round; the first round warms the caches and is dropped.
  defp measure(funs, rounds, batch) do
    k = length(funs)

    samples =
      for round <- 0..(rounds - 1), j <- 0..(k - 1) do
        i = rem(round + j, k)
        f = Enum.at(funs, i)
        start = System.monotonic_time(:nanosecond)
        Enum.each(1..batch, fn _ -> f.() end)
        {round, i, (System.monotonic_time(:nanosecond) - start) / batch / 1000}
      end

    for i <- 0..(k - 1) do
      Accel.Timing.summarize(for {round, ^i, us} <- samples, round > 0, do: us).median
    end
  end

  defp us(t), do: :erlang.float_to_binary(t, decimals: 1)
end

AutoSmallBench.main(System.argv())
