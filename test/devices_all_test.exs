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
    all = Accel.Devices.co_execution_devices(:auto)
    assert Enum.any?(all, &(&1.backend == :cpu))
    refute Enum.any?(all, &(&1.backend == :opencl and &1.type == :cpu)), inspect(all)
    # Asked for OpenCL alone, its CPU devices are what there is.
    assert Accel.Devices.co_execution_devices(:opencl) ==
             Enum.filter(Accel.devices(), &(&1.backend == :opencl))

    assert Accel.Devices.co_execution_devices(:cpu) == Enum.filter(Accel.devices(), &(&1.backend == :cpu))
  end

  test "Accel.devices/1: one backend's devices, as devices/0 lists them; a bad backend raises naming it" do
    for backend <- [:cpu, :opencl, :cuda],
        do: assert(Accel.devices(backend) == Enum.filter(Accel.devices(), &(&1.backend == backend)))

    assert_raise ArgumentError, "Accel.devices/1 expects :cpu, :opencl or :cuda, got: :gpu", fn ->
      Accel.devices(:gpu)
    end

    assert_raise ArgumentError, ~r/unknown backend: :gpu/, fn -> Accel.NIF.devices(:gpu) end
  end

  # Co-execution over a list of devices, PoCL included (about 10x slower than the CPU backend
  # here): shares sized by the measured model, then the tail's pieces pulled.
  @tag :opencl
  test "a list of devices co-executes a call, with the direct call's result" do
    cpu = Enum.find(Accel.devices(), &(&1.backend == :cpu))
    pocl = Enum.find(Accel.devices(), &(&1.backend == :opencl))

    for input <- [1..0, 1..100, 1..300_000, Enum.to_list(-50_000..50_000)] do
      assert Accel.logistic_map(input, device: [cpu, pocl], mu: -3) ==
               Accel.logistic_map(input, backend: :cpu, mu: -3)
    end

    bin = Reference.to_binary(Enum.to_list(1..200_001))

    assert Accel.logistic_map(bin, device: [pocl, cpu], max_bytes: 160_000) ==
             Accel.logistic_map(bin, backend: :cpu)

    assert_raise ArgumentError, ~r/lists a device twice/, fn ->
      Accel.logistic_map(1..3, device: [cpu, cpu])
    end

    assert_raise ArgumentError, ~r/another backend than :opencl/, fn ->
      Accel.logistic_map(1..3, device: [cpu, pocl], backend: :opencl)
    end

    assert_raise ArgumentError, ~r/option :device must be/, fn -> Accel.logistic_map(1..3, device: []) end
  end

  test "shares follow the devices' throughputs; the tail is cut in pieces; a device too slow to help is left out" do
    {devices, pieces} = Accel.Placement.Sharing.pieces(1_000_000, fast: 9.0, slow: 1.0, useless: 0.1)
    assert devices == [:fast, :slow]
    assert [{0, 720_000}, {720_000, 80_000} | tail] = pieces
    assert length(tail) == 8 and Enum.all?(tail, fn {_, n} -> n == 25_000 end)
    # contiguous, covering every element once
    assert Enum.reduce(pieces, 0, fn {offset, n}, at ->
             assert offset == at
             at + n
           end) == 1_000_000

    # too small to share: all of it on the fastest
    assert Accel.Placement.Sharing.pieces(5_000, fast: 1.0, slow: 2.0) == {[:slow], [{0, 5_000}]}
    assert Accel.Placement.Sharing.pieces(0, fast: 1.0, slow: 2.0) == {[:slow], [{0, 0}]}
  end

  test "owned: true gives each worker its own first chunk before any is pulled" do
    {results, stats} =
      Accel.Dispatch.run(Enum.to_list(0..9), [:a, :b, :c], fn x, worker -> {x, worker} end, fn _ -> 1 end,
        owned: true
      )

    assert Enum.map(results, &elem(&1, 0)) == Enum.to_list(0..9)
    assert Enum.take(results, 3) == [{0, :a}, {1, :b}, {2, :c}]
    assert stats.a.chunks + stats.b.chunks + stats.c.chunks == 10
    # fewer chunks than workers: the extra workers have none
    assert {[{0, :a}], _} =
             Accel.Dispatch.run([0], [:a, :b], fn x, w -> {x, w} end, fn _ -> 1 end, owned: true)
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

defmodule Accel.DevicesFreshVmTest do
  # Not async: a child VM makes this one a distributed node, and pids made before that (those of
  # the compiler still requiring other test files while async tests run) stop working.
  use ExUnit.Case, async: false

  # PoCL is what loads when the OpenCL runtime looks for devices: a fresh VM's CPU-backend work
  # (its devices asked, a kernel built by the host compiler for its instruction set) loads none.
  @tag :opencl
  @tag :tmp_dir
  test "the CPU backend's work in a fresh VM does not start the OpenCL runtime", %{tmp_dir: tmp} do
    assert Accel.Test.ChildVM.run([], {Accel.Test.ChildVM, :opencl_started_by_cpu_work, [tmp]}) ==
             {:ok, {false, true}}
  end
end
