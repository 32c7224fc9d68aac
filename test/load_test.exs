defmodule Accel.LoadTest do
  # Load, killed callers and shared resources: the NIF must stay correct and free under all three.
  use ExUnit.Case, async: false
  import Bitwise
  alias Accel.Test.{Reference, Workload}

  @moduletag timeout: 300_000

  defp backends, do: for(%{name: name, available: true} <- Accel.backends(), do: name)

  test "1,000 processes x 100 mixed calls across backends, results checked, no deadlock" do
    shared = Accel.logistic_map(1..2_000_000, iterations: 0, as: :binary)
    list = Enum.to_list(-300..300)

    specs =
      for backend <- backends(), spec <- [:list, :range, :binary, :shared, :crossing] do
        {spec, backend}
      end

    run = fn
      {:list, backend} -> Accel.logistic_map(list, backend: backend, mu: -7)
      {:range, backend} -> Accel.logistic_map(1..30_000, backend: backend, as: :binary)
      {:binary, backend} -> Accel.logistic_map(Reference.to_binary(list), backend: backend, p: 1_000_003)
      {:shared, backend} -> Accel.logistic_map(binary_part(shared, 8 * 1000, 8 * 5000), backend: backend)
      {:crossing, _} -> Accel.Crossing.list_round_trip(list)
    end

    expected = Map.new(specs, &{&1, run.(&1)})
    specs = List.to_tuple(specs)

    results =
      1..1_000
      |> Enum.map(fn proc ->
        Task.async(fn ->
          Enum.count(1..100, fn call ->
            spec = elem(specs, rem(proc * 7 + call, tuple_size(specs)))
            run.(spec) != expected[spec]
          end)
        end)
      end)
      |> Task.await_many(240_000)

    assert Enum.sum(results) == 0
  end

  # Occupies every dirty CPU scheduler with calls that would run for hours, kills their callers,
  # then needs a dirty scheduler: only cancellation lets the last call run.
  test "callers killed in the middle of dirty calls free their schedulers and memory" do
    baseline = settle()
    dirty = :erlang.system_info(:dirty_cpu_schedulers)

    victims =
      for _ <- 1..dirty do
        spawn(fn -> Accel.logistic_map(1..100_000, iterations: 1 <<< 40, as: :binary) end)
      end

    Process.sleep(200)
    Enum.each(victims, &Process.exit(&1, :kill))
    task = Task.async(fn -> Accel.logistic_map(1..200_000, as: :binary) end)
    assert {:ok, result} = Task.yield(task, 30_000), "no dirty scheduler came free"
    assert result == Reference.to_binary(Reference.logistic_map(1..200_000))
    assert settle() == baseline
  end

  test "callers killed in the middle of a user kernel's endless loop free their cores at once" do
    require Accel
    victims = Workload.occupy_dirty_schedulers()
    Enum.each(victims, &Process.exit(&1, :kill))
    killed = System.monotonic_time(:millisecond)
    # a kernel call takes a dirty CPU scheduler: it runs once the endless ones have stopped
    small = Accel.kernel(fn x -> x * 2 end)
    task = Task.async(fn -> Accel.map([1, 2, 3], small, backend: :cpu) end)
    assert {:ok, [2, 4, 6]} = Task.yield(task, 30_000), "the endless loops still hold the schedulers"
    # (timer and scheduling noise on a shared VM are in this figure)
    assert System.monotonic_time(:millisecond) - killed < 1_000
  end

  test "Accel.map with timeout: abandons a call that runs too long, and raises Accel.Error :timeout" do
    require Accel
    endless = Workload.endless_kernel()

    started = System.monotonic_time(:millisecond)
    e = assert_raise Accel.Error, fn -> Accel.map([1, 2], endless, backend: :cpu, timeout: 200) end
    assert e.reason == :timeout
    assert e.message == "Accel.map/3 ran past its timeout of 200 ms and was abandoned"
    assert System.monotonic_time(:millisecond) - started < 2_000

    # the abandoned call freed its scheduler and cores; results and exceptions come through
    assert Accel.map([1, 2], Accel.kernel(fn x -> x + 1 end), backend: :cpu, timeout: 5_000) == [2, 3]

    assert_raise ArithmeticError, fn ->
      Accel.map([1], Accel.kernel(fn x -> div(x, 0) end), backend: :cpu, timeout: 5_000)
    end

    assert_raise ArgumentError,
                 "option :timeout must be a number of milliseconds of at least 1, or :infinity, got: 0",
                 fn ->
                   Accel.map([1], :add, timeout: 0)
                 end
  end

  # A device kernel cannot be stopped from outside: its loops run in bounded launches instead.
  for backend <- [:opencl, :cuda] do
    @tag backend
    test "#{backend}: endless user kernels let other calls pass, time out, and free the device when their callers die" do
      require Accel
      backend = unquote(backend)
      k = Workload.endless_kernel()
      device = Enum.find(Accel.devices(), &(&1.backend == backend))
      before = settled_memory(device)
      victims = for n <- [4, 100_000], do: spawn(fn -> Accel.map(Enum.to_list(1..n), k, backend: backend) end)
      Process.sleep(300)

      # a call made while both run gets its turn between their launches
      small = Accel.kernel(fn x -> x * 2 end)
      task = Task.async(fn -> Accel.map([1, 2, 3], small, backend: backend) end)
      assert {:ok, [2, 4, 6]} = Task.yield(task, 30_000), "the endless calls hold the device"
      assert Accel.memory(device) > before

      e = assert_raise Accel.Error, fn -> Accel.map([1, 2], k, backend: backend, timeout: 300) end
      assert e.reason == :timeout

      # their launches stop, and what they held (outputs, saved loop state) is freed
      Enum.each(victims, &Process.exit(&1, :kill))

      assert Enum.any?(1..250, fn _ -> Process.sleep(20) || settled_memory(device) <= before end),
             "#{Accel.memory(device) - before} bytes still held on the device"
    end
  end

  @tag :opencl
  test "callers killed in the middle of OpenCL calls" do
    baseline = settle()

    victims =
      for _ <- 1..3 do
        spawn(fn -> Accel.logistic_map(1..1_000, backend: :opencl, iterations: 1 <<< 20, chunk_size: 1) end)
      end

    Process.sleep(200)
    Enum.each(victims, &Process.exit(&1, :kill))
    task = Task.async(fn -> Accel.logistic_map(1..1_000, backend: :opencl) end)
    assert {:ok, result} = Task.yield(task, 30_000), "the OpenCL device did not come free"
    assert result == Reference.logistic_map(1..1_000)
    assert settle() == baseline
  end

  test "one Accel-owned binary used from many processes at once, then released" do
    baseline = settle()

    outcome =
      Task.async(fn ->
        shared = Accel.logistic_map(1..1_000_000, iterations: 0, as: :binary)
        expected = Accel.logistic_map(shared)

        1..50
        |> Enum.map(fn i ->
          Task.async(fn -> Accel.logistic_map(shared, backend: Enum.at(backends(), rem(i, 2), :cpu)) end)
        end)
        |> Task.await_many(60_000)
        |> Enum.all?(&(&1 == expected))
      end)
      |> Task.await(60_000)

    assert outcome
    assert settle() == baseline
  end

  defp settled_memory(device) do
    for pid <- Process.list(), do: :erlang.garbage_collect(pid)
    Accel.memory(device)
  end

  defp settle do
    for pid <- Process.list(), do: :erlang.garbage_collect(pid)
    Process.sleep(20)
    Accel.memory(:cpu)
  end
end
