# Reproduces the figures in RELIABILITY.md: memory before and after 10,000 mixed calls (Accel's own
# counter and the OS resident set), and the soak's call count and duration.
#   MIX_ENV=test mix run bench/reliability.exs
rss = fn ->
  [kb] = Regex.run(~r/VmRSS:\s+(\d+) kB/, File.read!("/proc/self/status"), capture: :all_but_first)
  String.to_integer(kb) * 1024
end

settle = fn ->
  for pid <- Process.list(), do: :erlang.garbage_collect(pid)
  Process.sleep(50)
  Accel.trim_memory()
  {Accel.memory(:cpu), rss.()}
end

backends = for %{name: name, available: true} <- Accel.backends(), do: name

# Each result is dropped as soon as it is made, as a caller that consumes results would.
calls = fn n ->
  Enum.each(1..n, fn i ->
    backend = Enum.at(backends, rem(i, length(backends)))

    case rem(i, 5) do
      0 -> Accel.logistic_map(1..300_000, backend: backend, as: :binary)
      1 -> Accel.logistic_map(Enum.to_list(1..2_000), backend: backend)
      2 -> Accel.Crossing.binary_round_trip(<<i::signed-native-64>>)
      3 -> Accel.logistic_map(1..150_000, backend: backend)
      4 -> try(do: Accel.logistic_map([1, :bad], backend: backend), rescue: (ArgumentError -> :ok))
    end
  end)
end

Task.await(Task.async(fn -> calls.(500) end), :infinity)
{accel0, rss0} = settle.()
{us, _} = :timer.tc(fn -> Task.await(Task.async(fn -> calls.(10_000) end), :infinity) end)
{accel1, rss1} = settle.()
mib = fn b -> Float.round(b / 1_048_576, 1) end

IO.puts("""
10,000 mixed calls on #{inspect(backends)} in #{Float.round(us / 1.0e6, 1)} s
  Accel.memory(:cpu): #{accel0} -> #{accel1} bytes
  VmRSS: #{mib.(rss0)} MiB -> #{mib.(rss1)} MiB (#{mib.(rss1 - rss0)} MiB)
""")

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
