defmodule Accel.Test.Workload do
  @moduledoc false
  # The mixed calls and the memory readings shared by test/leak_test.exs and bench/reliability.exs.

  def available_backends, do: for(%{name: name, available: true} <- Accel.backends(), do: name)

  # n calls rotating over large and small binaries, lists, crossings and a bad input, and over the
  # available backends; each result is dropped at once, as a consuming caller would.
  def mixed_calls(n) do
    backends = available_backends()

    Enum.each(1..n, fn i ->
      backend = Enum.at(backends, rem(i, length(backends)))

      case rem(i, 5) do
        0 -> Accel.logistic_map(1..300_000, backend: backend, as: :binary)
        1 -> Accel.logistic_map(Enum.to_list(1..2_000), backend: backend)
        2 -> Accel.Crossing.binary_round_trip(<<i::signed-native-64>>)
        3 -> Accel.logistic_map(1..150_000, backend: backend)
        4 -> bad_call(backend)
      end
    end)
  end

  defp bad_call(backend) do
    Accel.logistic_map([1, :bad], backend: backend)
  rescue
    ArgumentError -> :expected
  end

  def rss_bytes do
    [kb] = Regex.run(~r/VmRSS:\s+(\d+) kB/, File.read!("/proc/self/status"), capture: :all_but_first)
    String.to_integer(kb) * 1024
  end

  # Garbage-collects every process, returns cached buffers to the OS, then reads
  # {Accel's own live bytes, the OS resident set}.
  def settle do
    for pid <- Process.list(), do: :erlang.garbage_collect(pid)
    Process.sleep(50)
    Accel.trim_memory()
    {Accel.memory(:cpu), rss_bytes()}
  end

  # A user kernel whose loop runs for hours, compiled for the CPU before any clock starts: a call
  # of it holds a dirty CPU scheduler until its caller dies.
  def endless_kernel do
    require Accel

    k =
      Accel.kernel(fn x ->
        Enum.reduce(1..10_000_000_000_000, x, fn i, a -> rem(a * 31 + i, 1_000_003) end)
      end)

    compiled = Accel.Kernel.Map.compiled(k, [:s64])
    Accel.Kernel.Native.library(compiled.key, compiled.source)
    k
  end

  # Every dirty CPU scheduler held by an endless kernel call; the callers, to kill.
  def occupy_dirty_schedulers do
    k = endless_kernel()

    victims =
      for _ <- 1..:erlang.system_info(:dirty_cpu_schedulers),
          do: spawn(fn -> Accel.map(Enum.to_list(1..64), k, backend: :cpu) end)

    Process.sleep(300)
    victims
  end
end
