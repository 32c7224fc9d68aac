defmodule Accel.TensorMemoryTest do
  # What tensors hold on each device, by Accel.memory/1's count. The count is per device, so these
  # tests run alone (not async): async tests allocating on the same device (Nx's doctests on
  # OpenCL, say) would show in it.
  use ExUnit.Case, async: false
  alias Accel.Tensor, as: T

  # 200 processes x 40 rounds on PoCL take ~35 s on a 2-core machine
  @moduletag timeout: 300_000

  for backend <- [:cpu, :opencl, :cuda] do
    describe "#{backend}" do
      @describetag backend
      @backend backend

      test "freeing a tensor releases its memory at once" do
        device = Enum.find(Accel.devices(), &(&1.backend == @backend))
        before = settled_memory(device)
        # The 8 MB must show, then go, give or take a few kilobytes of buffers other processes
        # (the kernel cache, staging) may hold.
        big = T.iota({1_000_000}, backend: @backend)
        assert Accel.memory(device) >= before + 7_000_000
        assert T.free(big) == :ok
        assert Accel.memory(device) < before + 1_000_000
      end

      # Dropped tensors wait in their processes' heaps: every process that made tensors is
      # collected once tensor_gc_bytes were made VM-wide (one process's own threshold let garbage
      # grow with the number of processes: 5.9x on OpenCL with 16 processes).
      for {procs, mib} <- [{16, 16}, {200, 2}] do
        test "#{procs} processes dropping #{mib} MiB tensors hold at most 2x what is reachable" do
          peak = peak_while_dropping(@backend, unquote(procs), unquote(mib), 40)
          reachable = unquote(procs) * 2 * unquote(mib) * 1_048_576

          assert peak <= 2 * reachable,
                 "peak #{div(peak, 1_048_576)} MiB for #{div(reachable, 1_048_576)} MiB reachable"
        end
      end

      test "a loop allocating 10 GB in 100 MB tensors keeps live memory within a small multiple of 100 MB" do
        device = Enum.find(Accel.devices(), &(&1.backend == @backend))
        before = settled_memory(device)

        peak =
          Enum.reduce(1..100, 0, fn _, peak ->
            t = T.iota({12_500_000}, backend: @backend)
            _ = T.to_number(T.sum(T.reshape(t, {12_500_000})))
            Kernel.max(peak, Accel.memory(device) - before)
          end)

        assert peak <= 4 * 100_000_000, "peak live tensor memory #{peak} bytes"
      end
    end
  end

  # The device's count once no process holds dropped tensors: earlier tests' garbage (and the
  # background collections they started) would otherwise be freed in the middle of a measurement.
  defp settled_memory(device, last \\ nil) do
    for pid <- Process.list(), do: :erlang.garbage_collect(pid)
    Process.sleep(20)

    case Accel.memory(device) do
      ^last -> last
      now -> settled_memory(device, now)
    end
  end

  # Each process makes a tensor and its sum with 1, drops both, `rounds` times: the peak of the
  # device's count above where it started.
  defp peak_while_dropping(backend, procs, mib, rounds) do
    base = settled_memory(backend)
    peak = :atomics.new(1, [])
    watcher = spawn_link(fn -> watch(backend, peak) end)
    n = div(mib * 1_048_576, 8)

    1..procs
    |> Enum.map(fn _ ->
      Task.async(fn ->
        Enum.each(1..rounds, fn _ -> T.iota({n}, type: :f64, backend: backend) |> T.add(1.0) end)
      end)
    end)
    |> Enum.each(&Task.await(&1, 120_000))

    Process.unlink(watcher)
    Process.exit(watcher, :kill)
    max(:atomics.get(peak, 1) - base, 0)
  end

  defp watch(backend, peak) do
    m = Accel.memory(backend)
    if m > :atomics.get(peak, 1), do: :atomics.put(peak, 1, m)
    Process.sleep(2)
    watch(backend, peak)
  end
end
