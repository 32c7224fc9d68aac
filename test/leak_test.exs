defmodule Accel.LeakTest do
  # Native memory returns to its baseline: Accel's own counter exactly, the OS resident set within
  # what the VM's allocators keep for reuse.
  use ExUnit.Case, async: false

  @moduletag timeout: 300_000

  defp rss_bytes do
    [kb] = Regex.run(~r/VmRSS:\s+(\d+) kB/, File.read!("/proc/self/status"), capture: :all_but_first)
    String.to_integer(kb) * 1024
  end

  defp settle do
    for pid <- Process.list(), do: :erlang.garbage_collect(pid)
    Process.sleep(50)
    Accel.trim_memory()
    {Accel.memory(:cpu), rss_bytes()}
  end

  defp calls(n) do
    backends = for %{name: name, available: true} <- Accel.backends(), do: name

    for i <- 1..n do
      backend = Enum.at(backends, rem(i, length(backends)))

      case rem(i, 5) do
        0 -> Accel.logistic_map(1..300_000, backend: backend, as: :binary)
        1 -> Accel.logistic_map(Enum.to_list(1..2_000), backend: backend)
        2 -> Accel.Crossing.binary_round_trip(<<i::signed-native-64>>)
        3 -> Accel.logistic_map(1..150_000, backend: backend)
        4 -> catch_error(Accel.logistic_map([1, :bad], backend: backend))
      end
    end

    :ok
  end

  test "10,000 calls leave Accel's memory and the process's RSS at their baseline" do
    # Warm up: backends initialised, VM allocators and the first large buffers sized.
    Task.await(Task.async(fn -> calls(500) end), :infinity)
    {accel_before, rss_before} = settle()

    Task.await(Task.async(fn -> calls(10_000) end), :infinity)
    {accel_after, rss_after} = settle()

    assert accel_after == accel_before
    # 10,000 calls moved ~5 GB through the NIF; a leak of even 1 KB a call would show as 10 MB.
    assert rss_after - rss_before < 64 * 1024 * 1024,
           "RSS grew by #{div(rss_after - rss_before, 1024 * 1024)} MiB over 10,000 calls"
  end
end
