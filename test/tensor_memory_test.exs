defmodule Accel.TensorMemoryTest do
  # What tensors hold on each device, by Accel.memory/1's count. The count is per device, so these
  # tests run alone (not async): async tests allocating on the same device (Nx's doctests on
  # OpenCL, say) would show in it.
  use ExUnit.Case, async: false
  alias Accel.Tensor, as: T

  for backend <- [:cpu, :opencl, :cuda] do
    describe "#{backend}" do
      @describetag backend
      @backend backend

      test "freeing a tensor releases its memory at once" do
        device = Enum.find(Accel.devices(), &(&1.backend == @backend))
        before = Accel.memory(device)
        # The 8 MB must show, then go, give or take a few kilobytes of buffers other processes
        # (the kernel cache, staging) may hold.
        big = T.iota({1_000_000}, backend: @backend)
        assert Accel.memory(device) >= before + 7_000_000
        assert T.free(big) == :ok
        assert Accel.memory(device) < before + 1_000_000
      end

      test "a loop allocating 10 GB in 100 MB tensors keeps live memory within a small multiple of 100 MB" do
        device = Enum.find(Accel.devices(), &(&1.backend == @backend))
        before = Accel.memory(device)

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
end
