defmodule Accel.SchedulingTest do
  # Proof that large calls leave the normal schedulers alone: with a single normal scheduler online,
  # a ticker process measures how late it wakes while a 33M-element call runs. A call holding the
  # scheduler would delay it by the call's whole duration (hundreds of milliseconds).
  use ExUnit.Case, async: false

  @n 0x2000000
  # Wake-up lateness allowed for the ticker: timer and OS noise on a shared 2-core VM, well below
  # the ~200 ms a blocked scheduler would show.
  @max_lateness_ms 25

  setup do
    online = :erlang.system_info(:schedulers_online)
    :erlang.system_flag(:schedulers_online, 1)
    on_exit(fn -> :erlang.system_flag(:schedulers_online, online) end)
  end

  # A call that holds the scheduler delays the ticker by the call's whole duration, every time it
  # runs. This shared VM is now and then stopped by its host for 25-45 ms whatever runs: one run
  # of this file in 12 failed so at 68b07cf, 3 in 16 after it, though none of the code changed
  # since runs in these calls. So a call whose ticker came out late runs once more, and the test
  # judges the better of the two.
  defp worst_lateness_during(fun) do
    first = lateness_during(fun)

    if elem(first, 1) < @max_lateness_ms,
      do: first,
      else: Enum.min_by([first, lateness_during(fun)], &elem(&1, 1))
  end

  defp lateness_during(fun) do
    parent = self()
    ticker = spawn_link(fn -> tick(parent, 0) end)
    # Let the ticker settle, then run the call on this process (same single scheduler).
    Process.sleep(20)
    {micros, _} = :timer.tc(fun)
    send(ticker, :stop)
    assert_receive {:worst, worst_us}, 5_000
    {micros / 1000, worst_us / 1000}
  end

  defp tick(parent, worst) do
    t0 = System.monotonic_time(:microsecond)

    receive do
      :stop -> send(parent, {:worst, worst})
    after
      1 ->
        late = System.monotonic_time(:microsecond) - t0 - 1000
        tick(parent, max(worst, late))
    end
  end

  # Iterations for a call long enough to prove something on this machine (16 cores finish 10
  # iterations over 33M elements in 60 ms): doubled until the call takes 200 ms, each size judged
  # by the faster of two calls (one slow call, the VM paused by its host, would stop the doubling
  # too early). The first call also maps its buffers' pages, which the measured call will not: not
  # timed.
  defp long_enough(call) do
    call.(1)
    long_enough(call, 10)
  end

  defp long_enough(call, iterations) do
    us = Enum.min(for _ <- 1..2, do: elem(:timer.tc(fn -> call.(iterations) end), 0))
    if us >= 200_000 or iterations >= 10_240, do: iterations, else: long_enough(call, iterations * 2)
  end

  test "a 33M-element binary call runs off the normal scheduler" do
    bin = Accel.logistic_map(1..@n, iterations: 0, as: :binary)
    iterations = long_enough(&Accel.logistic_map(bin, iterations: &1))

    measure = fn iterations ->
      worst_lateness_during(fn -> Accel.logistic_map(bin, iterations: iterations) end)
    end

    # a call that came out short all the same runs again, twice as long
    {call_ms, worst_ms} =
      case measure.(iterations) do
        {ms, _} when ms <= 4 * @max_lateness_ms -> measure.(iterations * 2)
        measured -> measured
      end

    assert call_ms > 4 * @max_lateness_ms, "the call took #{call_ms} ms: too short to prove anything"

    assert worst_ms < @max_lateness_ms,
           "a normal scheduler was blocked for #{worst_ms} ms during a #{call_ms} ms call"
  end

  test "a 33M-element range -> list call runs off the normal scheduler" do
    {call_ms, worst_ms} = worst_lateness_during(fn -> length(Accel.logistic_map(1..@n)) end)
    assert call_ms > 4 * @max_lateness_ms

    assert worst_ms < @max_lateness_ms,
           "a normal scheduler was blocked for #{worst_ms} ms during a #{call_ms} ms call"
  end

  test "concurrent large calls on every available backend, plus many small ones, leave it free" do
    backends = for %{name: name, available: true} <- Accel.backends(), do: name
    bin = Accel.logistic_map(1..4_000_000, iterations: 0, as: :binary)

    load = fn ->
      large = for backend <- backends, do: Task.async(fn -> Accel.logistic_map(bin, backend: backend) end)
      small = for i <- 1..200, do: Task.async(fn -> Accel.logistic_map(1..100, mu: i) end)
      Task.await_many(large ++ small, 60_000)
    end

    {_call_ms, worst_ms} = worst_lateness_during(load)
    assert worst_ms < @max_lateness_ms, "a normal scheduler was blocked for #{worst_ms} ms under load"
  end

  test "a 1M-element list call runs off the normal scheduler" do
    list = Enum.to_list(1..1_000_000)
    {_call_ms, worst_ms} = worst_lateness_during(fn -> Accel.logistic_map(list, iterations: 200) end)
    assert worst_ms < @max_lateness_ms
  end

  test "tensor operations run off the normal scheduler, judged by their largest operand" do
    alias Accel.Tensor, as: T
    big = T.iota({4_000_000, 3}, type: :f64, backend: :cpu)
    row = T.from_list([1.0, 2.0, 3.0], backend: :cpu)

    # The first operand has 3 elements; the broadcast output has 12 million.
    for op <- [fn -> T.add(row, big) end, fn -> T.exp(big) end, fn -> T.sum(big, axis: 0) end] do
      {call_ms, worst_ms} = worst_lateness_during(fn -> op.() |> T.free() end)
      assert worst_ms < @max_lateness_ms, "ticker late by #{worst_ms} ms during a #{call_ms} ms tensor call"
    end
  end
end
