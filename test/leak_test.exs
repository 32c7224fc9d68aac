defmodule Accel.LeakTest do
  # Native memory returns to its baseline: Accel's own counter exactly, the OS resident set within
  # what the VM's allocators keep for reuse.
  use ExUnit.Case, async: false
  alias Accel.Test.Workload

  @moduletag timeout: 300_000

  test "10,000 calls leave Accel's memory and the process's RSS at their baseline" do
    # Warm up: backends initialised, VM allocators and the first large buffers sized.
    Task.await(Task.async(fn -> Workload.mixed_calls(500) end), :infinity)
    {accel_before, rss_before} = Workload.settle()

    Task.await(Task.async(fn -> Workload.mixed_calls(10_000) end), :infinity)
    {accel_after, rss_after} = Workload.settle()

    assert accel_after == accel_before
    # 10,000 calls moved ~5 GB through the NIF; a leak of even 1 KB a call would show as 10 MB.
    assert rss_after - rss_before < 64 * 1024 * 1024,
           "RSS grew by #{div(rss_after - rss_before, 1024 * 1024)} MiB over 10,000 calls"
  end

  test "100,000 tensors, freed and dropped, leave every device's tensor memory at its baseline" do
    alias Accel.Tensor, as: T
    devices = Enum.filter(Accel.devices(), &(&1.backend in [:cpu, :opencl, :cuda]))
    Workload.settle()
    before = Map.new(devices, &{&1, Accel.memory(&1)})

    for device <- devices do
      Task.await(
        Task.async(fn ->
          # two tensors an iteration: 100,000 in all
          for i <- 1..div(50_000, length(devices)) do
            t = T.iota({64}, backend: device.backend, device: device.id)
            u = T.add(t, i)
            if rem(i, 2) == 0, do: T.free(u)
          end
        end),
        :infinity
      )
    end

    Workload.settle()

    for device <- devices,
        do: assert(Accel.memory(device) == before[device], "#{device.backend}: tensor bytes leaked")
  end
end
