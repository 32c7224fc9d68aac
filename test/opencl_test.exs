defmodule Accel.OpenCLTest do
  # What is particular to the OpenCL backend; the shared reference cases are in backend_exactness_test.exs.
  use ExUnit.Case, async: false
  @moduletag :opencl

  # ERTS ignores SIGCHLD; OpenCL calls restore the default while they run (PoCL waits for the
  # linker it forks, and aborts the VM when that wait fails) and must put the BEAM's back.
  defp sigchld_ignored? do
    [mask] = Regex.run(~r/SigIgn:\s*([0-9a-f]+)/, File.read!("/proc/self/status"), capture: :all_but_first)
    Bitwise.band(String.to_integer(mask, 16), Bitwise.bsl(1, 17 - 1)) != 0
  end

  test "the VM's SIGCHLD disposition is the same after OpenCL calls" do
    before = sigchld_ignored?()
    # New sizes make PoCL compile and link new kernel variants (a forked linker each time).
    for n <- [1, 33, 4097, 100_003], do: Accel.logistic_map(1..n, backend: :opencl, as: :binary)
    assert sigchld_ignored?() == before
  end

  test "devices are OpenCL devices with a platform" do
    for %Accel.Device{backend: :opencl, platform: platform, max_alloc: max_alloc} <- Accel.devices() do
      assert platform != "host"
      assert max_alloc > 0
    end
  end

  test "backend: :auto is the first CUDA device, else the first OpenCL GPU, else the CPU backend" do
    devices = Accel.devices()

    expected =
      Enum.find(devices, &(&1.backend == :cuda)) ||
        Enum.find(devices, &(&1.backend == :opencl and &1.type == :gpu)) ||
        Enum.find(devices, &(&1.backend == :cpu))

    assert Accel.default_device() == expected
    assert Accel.logistic_map(1..1000, backend: :auto) == Accel.logistic_map(1..1000, device: expected)
  end
end
