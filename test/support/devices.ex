defmodule Accel.Test.Devices do
  @moduledoc false
  # The devices the placement tests compare: the CPU backend, and PoCL (an OpenCL device on the
  # CPU backend's own cores, ~10x slower; nil on a host without one, such as a GPU host).
  # nx/0 and tags/1: the devices the Nx tests run on, each tagged with its backend, which
  # test_helper.exs excludes where it is not usable (CUDA wherever no GPU and driver are).

  def cpu, do: Enum.find(Accel.devices(), &(&1.backend == :cpu))
  def nx, do: [:cpu, :opencl, :cuda]
  # (ExUnit excludes a test that has an excluded tag whatever its value: the CPU backend's have none)
  def tags(:cpu), do: []
  def tags(device), do: [{device, true}]

  def pocl, do: Enum.find(Accel.devices(), &(&1.backend == :opencl and &1.type == :cpu))
end
