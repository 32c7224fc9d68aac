defmodule Accel.MemoryTest do
  # Large results are Accel-owned buffers behind resource binaries: they must be released when the
  # binary is garbage-collected, and scratch buffers must not outlive the call.
  use ExUnit.Case, async: false

  defp settle_memory do
    :erlang.garbage_collect()
    Process.sleep(10)
    Accel.memory(:cpu)
  end

  test "result binaries are released on garbage collection" do
    baseline = settle_memory()

    task =
      Task.async(fn ->
        bin = Accel.logistic_map(1..1_000_000, as: :binary)
        {byte_size(bin), Accel.memory(:cpu)}
      end)

    {size, during} = Task.await(task)
    assert size == 8_000_000
    assert during - baseline >= 8_000_000
    assert settle_memory() == baseline
  end

  test "repeated calls return to the baseline" do
    baseline = settle_memory()

    for _ <- 1..200 do
      Accel.logistic_map(1..300_000, as: :binary)
      Accel.logistic_map(Enum.to_list(1..30_000))
    end

    assert settle_memory() == baseline
  end

  test "released large buffers are cached for reuse and trim_memory/0 returns them" do
    Accel.trim_memory()
    task = Task.async(fn -> byte_size(Accel.logistic_map(1..1_000_000, as: :binary)) end)
    assert Task.await(task) == 8_000_000
    :erlang.garbage_collect()
    Process.sleep(10)
    assert Accel.trim_memory() >= 8_000_000
    assert Accel.trim_memory() == 0
  end

  test "a smaller tensor takes part of a larger released buffer, and released, the parts join again" do
    Accel.trim_memory()
    mib = 1024 * 1024
    big = Accel.Tensor.iota({2 * mib}, type: :f32, backend: :cpu)
    Accel.Tensor.free(big)
    assert elem(Accel.NIF.host_memory(), 1) == 8 * mib
    # no released buffer of about 2 MiB: the 8 MiB one's head, its pages already touched
    small = Accel.Tensor.iota({div(mib, 2)}, type: :f32, backend: :cpu)
    assert elem(Accel.NIF.host_memory(), 1) == 6 * mib
    # (read in a process of its own: the binary shares the tensor's memory while it lives)
    ends =
      Task.await(
        Task.async(fn ->
          bits = Accel.Tensor.to_binary(small)
          {binary_part(bits, 0, 8), binary_part(bits, 2 * mib - 4, 4)}
        end)
      )

    assert ends == {<<0.0::float-32-native, 1.0::float-32-native>>, <<div(mib, 2) - 1::float-32-native>>}
    Accel.Tensor.free(small)
    # one 8 MiB buffer again: an 8 MiB tensor reuses it whole
    assert elem(Accel.NIF.host_memory(), 1) == 8 * mib
    again = Accel.Tensor.iota({2 * mib}, type: :f32, backend: :cpu)
    assert elem(Accel.NIF.host_memory(), 1) == 0
    Accel.Tensor.free(again)
    assert Accel.trim_memory() == 8 * mib
  end

  test "memory/1 rejects unknown backends" do
    assert_raise ArgumentError, ~r/memory\/1 expects an Accel.Device or a backend name/, fn ->
      Accel.memory(:nope)
    end
  end
end
