defmodule Accel.DeviceQueueTest do
  # Device calls wait in `receive`, not on a scheduler: the VM's dirty IO schedulers stay free for
  # file I/O while many long device calls are queued; callers that die stop waiting and their work
  # is dropped or stopped; a full queue makes callers wait for a place, with results unchanged.
  use ExUnit.Case, async: false
  import Bitwise
  alias Accel.Test.ChildVM

  @moduletag :opencl
  @moduletag timeout: 300_000
  # A generous bound for one small file operation or Accel.devices/0 on this shared VM; a dirty IO
  # scheduler held by device waits made them take seconds (RELIABILITY.md).
  @max_ms 100

  defp ms(fun) do
    {us, _} = :timer.tc(fun)
    us / 1000
  end

  defp long_call(iterations),
    do: fn -> Accel.logistic_map(1..300_000, backend: :opencl, iterations: iterations, as: :binary) end

  # Iterations for one call to take at least `ms` on this machine's first OpenCL device: 120 on
  # PoCL, thousands on a GPU, which would otherwise finish the whole load before it is measured.
  defp iterations_lasting(ms, iterations \\ 120) do
    long_call(iterations).()
    took = ms(long_call(iterations))
    if took >= ms or iterations >= 1 <<< 24, do: iterations, else: iterations_lasting(ms, iterations * 4)
  end

  @tag :tmp_dir
  test "file I/O and Accel.devices/0 stay fast while 40 long OpenCL calls are queued", %{tmp_dir: dir} do
    path = Path.join(dir, "small.txt")
    File.write!(path, "hello")
    iterations = iterations_lasting(100)
    # Exactness against the CPU backend is tested elsewhere; here, results must not change under load.
    expected = long_call(iterations).()

    tasks = for _ <- 1..40, do: Task.async(long_call(iterations))
    Process.sleep(200)
    [{:opencl, 0, in_use, _limit}] = Enum.filter(Accel.NIF.device_queues(), &match?({:opencl, 0, _, _}, &1))
    assert in_use >= 20, "only #{in_use} calls were queued: the load is too light to prove anything"

    for _ <- 1..5 do
      read = ms(fn -> "hello" = File.read!(path) end)
      write = ms(fn -> :ok = File.write!(Path.join(dir, "w.txt"), "x") end)
      devices = ms(fn -> [_ | _] = Accel.devices() end)

      for {what, took} <- [read: read, write: write, devices: devices] do
        assert took < @max_ms, "#{what} took #{took} ms with #{in_use} device calls queued"
      end
    end

    still_running = Enum.count(tasks, &Process.alive?(&1.pid))
    assert still_running > 0, "the load ended before the probes: they proved nothing"
    assert Enum.all?(Task.await_many(tasks, :infinity), &(&1 == expected))
  end

  test "killed callers' queued calls are dropped and the running one stops" do
    parent = self()

    callers =
      for _ <- 1..10 do
        spawn(fn ->
          send(parent, :started)
          Accel.logistic_map(1..1000, backend: :opencl, iterations: 1 <<< 40)
        end)
      end

    for _ <- callers, do: assert_receive(:started)
    Process.sleep(100)
    Enum.each(callers, &Process.exit(&1, :kill))
    # Hours of queued work, abandoned: the next call must run as soon as the running launch ends.
    task = Task.async(fn -> Accel.logistic_map([1, 2, 3], backend: :opencl, p: 61) end)
    assert Task.await(task, 60_000) == [28, 25, 37]
  end

  test "a caller waiting on the device holds no scheduler: a normal scheduler keeps running" do
    waiting_status(iterations_lasting(200))
  end

  # The status of a caller 50 ms into its call, once a call lasts that long: the calibration may
  # have run while other work slowed the device, and a call that is over has no status to show.
  defp waiting_status(iterations) do
    task = Task.async(long_call(iterations))
    # Everything else on the VM continues; the caller itself is merely waiting in receive.
    Process.sleep(50)
    status = Process.info(task.pid, :status)
    Task.await(task, :infinity)

    if status == nil and iterations < 1 <<< 24,
      do: waiting_status(iterations * 4),
      else: assert({:status, :waiting} = status)
  end

  test "a full queue makes callers wait for a place; results are unchanged" do
    {:ok, {results, samples}} =
      ChildVM.run([device_queue_limit: 2], {ChildVM, :crowd_under_queue_limit, []}, 180_000)

    assert results == for(i <- 1..24, do: Accel.logistic_map(1..20_000, backend: :cpu, mu: i))
    assert Enum.all?(samples, fn {in_use, limit} -> limit == 2 and in_use <= 2 end)
    assert Enum.any?(samples, fn {in_use, _} -> in_use == 2 end), "the queue never filled"
  end
end
