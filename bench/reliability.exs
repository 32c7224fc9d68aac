# Reproduces the figures in RELIABILITY.md: memory before and after 10,000 mixed calls (Accel's own
# counter and the OS resident set), and the soak's call count and duration. Uses the workload of
# test/leak_test.exs (test/support is compiled in the test environment):
#   MIX_ENV=test mix run bench/reliability.exs
alias Accel.Test.Workload

Task.await(Task.async(fn -> Workload.mixed_calls(500) end), :infinity)
{accel0, rss0} = Workload.settle()
{us, _} = :timer.tc(fn -> Task.await(Task.async(fn -> Workload.mixed_calls(10_000) end), :infinity) end)
{accel1, rss1} = Workload.settle()
mib = fn b -> Float.round(b / 1_048_576, 1) end

IO.puts("""
10,000 mixed calls on #{inspect(Workload.available_backends())} in #{Float.round(us / 1.0e6, 1)} s
  Accel.memory(:cpu): #{accel0} -> #{accel1} bytes
  VmRSS: #{mib.(rss0)} MiB -> #{mib.(rss1)} MiB (#{mib.(rss1 - rss0)} MiB)
""")

backends = Workload.available_backends()

{us, counts} =
  :timer.tc(fn ->
    1..1_000
    |> Enum.map(fn p ->
      Task.async(fn ->
        for c <- 1..100,
            do:
              Accel.logistic_map(1..(100 + rem(p * c, 3000)),
                backend: Enum.at(backends, rem(p + c, length(backends)))
              )
      end)
    end)
    |> Task.await_many(:infinity)
    |> Enum.map(&length/1)
  end)

IO.puts("soak: #{Enum.sum(counts)} calls from 1,000 processes in #{Float.round(us / 1.0e6, 1)} s")
