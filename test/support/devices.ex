defmodule Accel.Test.Devices do
  @moduledoc false
  # The devices the placement tests compare: the CPU backend, and PoCL (an OpenCL device on the
  # CPU backend's own cores, ~10x slower; nil on a host without one, such as a GPU host).

  def cpu, do: Enum.find(Accel.devices(), &(&1.backend == :cpu))
  def pocl, do: Enum.find(Accel.devices(), &(&1.backend == :opencl and &1.type == :cpu))
end
