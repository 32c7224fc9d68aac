defmodule Accel.DevicesAllTest do
  # device: :all and the work-pulling dispatcher behind it.
  use ExUnit.Case, async: true
  alias Accel.Test.Reference

  test "device: :all gives the direct call's result, for every input form" do
    for chunk <- [1_000, 33_333, 100_000] do
      assert Accel.logistic_map(1..100_000, device: :all, chunk_size: chunk) == Accel.logistic_map(1..100_000)
    end

    bin = Reference.to_binary(Enum.to_list(-5_000..5_000))
    assert Accel.logistic_map(bin, device: :all, chunk_size: 777) == Accel.logistic_map(bin)

    assert Accel.logistic_map(Enum.to_list(1..5_000), device: :all, chunk_size: 999, mu: -3) ==
             Accel.logistic_map(1..5_000, mu: -3)

    assert Accel.logistic_map(1..10, device: :all, backend: :cpu, as: :binary) ==
             Accel.logistic_map(1..10, as: :binary)
  end

  test "device: :all leaves out OpenCL devices on the host's CPU when the CPU backend takes part" do
    all = Accel.co_execution_devices(:auto)
    assert Enum.any?(all, &(&1.backend == :cpu))
    refute Enum.any?(all, &(&1.backend == :opencl and &1.type == :cpu)), inspect(all)
    # Asked for OpenCL alone, its CPU devices are what there is.
    assert Accel.co_execution_devices(:opencl) == Enum.filter(Accel.devices(), &(&1.backend == :opencl))
    assert Accel.co_execution_devices(:cpu) == Enum.filter(Accel.devices(), &(&1.backend == :cpu))
  end

  test "faster workers take proportionally more chunks" do
    delays = %{fast: 1, slow: 30}

    {results, stats} =
      Accel.Dispatch.run(Enum.to_list(1..120), [:fast, :slow], fn x, worker ->
        Process.sleep(delays[worker])
        x
      end)

    assert results == Enum.to_list(1..120)
    assert stats.fast.chunks + stats.slow.chunks == 120
    assert stats.fast.chunks > 3 * stats.slow.chunks, inspect(stats)
  end

  # max_bytes: is a device-memory budget (the CPU backend has no device buffers to bound): 1,600
  # bytes hold two buffers of 100 elements, so the OpenCL call runs as 100 chunks.
  @tag :opencl
  test "max_bytes: a device call in chunks small enough for two buffers gives the whole call's result" do
    want = Accel.logistic_map(1..10_000, backend: :cpu)
    assert Accel.logistic_map(1..10_000, backend: :opencl, max_bytes: 1_600) == want
    # 16 bytes: one element per chunk, for a list input.
    assert Accel.logistic_map(Enum.to_list(1..1_000), backend: :opencl, max_bytes: 16) ==
             Enum.take(want, 1_000)
  end

  test "max_bytes: is checked" do
    assert_raise ArgumentError, "option :max_bytes must be an integer of at least 16, got: 0", fn ->
      Accel.logistic_map(1..3, max_bytes: 0)
    end
  end

  test "async/await overlap the caller with the call" do
    task = Accel.async(fn -> Accel.logistic_map(1..0x1000000, as: :binary) end)
    # The call takes tens of milliseconds at least: the task is still running when we look.
    assert Task.yield(task, 0) == nil
    assert Accel.await(task) == Accel.logistic_map(1..0x1000000, as: :binary)
  end
end
